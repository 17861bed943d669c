"""Sampling rules for constrained decoding, and the lossless verification of point-mass drafts.

Everything here is a pure function of tensors: no model, no matcher, no state besides the
``torch.Generator`` the caller passes in.

**The target distribution.** At each position the grammar mask has already set every illegal
token's logit to ``-inf``. :func:`target_probs` turns those masked logits into the distribution
that plain step-by-step sampling draws from: ``softmax(logits / temperature)``, then top-k, then
nucleus (top-p), renormalised. Masking comes first, so top-k and top-p choose among *legal*
tokens only, and an illegal token has probability exactly ``0``. :func:`greedy_token` is the
``temperature = 0`` case (argmax, ties to the lowest token id).

**Drafts are free because verification is lossless.** A draft token ``d`` (for example the
canonical tokenization of text the grammar forces) is proposed *with certainty*: the drafting
distribution is a point mass ``q = delta_d``. The standard speculative-sampling rule, accept
with probability ``min(1, p(d) / q(d))`` and on rejection sample from the residual
``norm(max(0, p - q))``, then reduces to:

* accept ``d`` with probability ``p(d)``;
* on rejection, sample from ``p`` with ``d`` removed and renormalised.

The output token ``X`` then has exactly the target distribution::

    P(X = d)      = p(d)
    P(X = x != d) = (1 - p(d)) * p(x) / (1 - p(d)) = p(x)

so drafted decoding samples from the same distribution as step-by-step decoding, position by
position, and therefore over whole sequences: after an accepted draft the next position is
verified against the target distribution *conditional on that token*, and after a rejection
the remaining drafts are discarded. :func:`verify_draft` implements the rule; the edge cases
fall out of it (``p(d) = 1``: always accepted; ``p(d) = 0``, e.g. a masked draft: always
rejected, and the token is drawn from ``p`` itself).

Examples
--------
>>> import torch
>>> from structgen.decoding.sampling import target_probs, verify_draft
>>> logits = torch.tensor([2.0, 1.0, float("-inf"), 0.5])
>>> p = target_probs(logits, temperature=0.7, top_p=0.95)
>>> float(p[2])
0.0
>>> g = torch.Generator().manual_seed(0)
>>> accepted, token = verify_draft(p, 0, g)
>>> token == 0 if accepted else token != 0
True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from structgen.errors import OptionError

if TYPE_CHECKING:
    from structgen.decoding.config import DecodeConfig

__all__ = ["logits_processors", "process_logits", "target_probs", "greedy_token", "sample_token", "verify_draft",
           "verify_sampled_draft"]

#: A transformers-style logits processor: ``processor(input_ids (1, n), scores (1, vocab)) -> scores``.
Processor = Callable[[Any, Any], Any]


def logits_processors(config: "DecodeConfig") -> list[Processor]:
    """The processors ``config`` asks for, in transformers' order: repetition penalty, n-gram
    ban, then the user's own (``[]`` when none: the loop then skips processing altogether).

    They are transformers' own classes, so a drafted run equals ``model.generate`` under the
    same options.

    Example
    -------
    >>> from structgen.decoding.config import DecodeConfig
    >>> [type(p).__name__ for p in logits_processors(DecodeConfig(repetition_penalty=1.3))]
    ['RepetitionPenaltyLogitsProcessor']
    """
    processors: list[Processor] = []
    if config.repetition_penalty == 1 and not config.no_repeat_ngram_size:
        return list(config.logits_processors)
    from transformers import NoRepeatNGramLogitsProcessor, RepetitionPenaltyLogitsProcessor

    if config.repetition_penalty != 1:
        processors.append(RepetitionPenaltyLogitsProcessor(config.repetition_penalty))
    if config.no_repeat_ngram_size:
        processors.append(NoRepeatNGramLogitsProcessor(config.no_repeat_ngram_size))
    return processors + list(config.logits_processors)


def process_logits(processors: Sequence[Processor], logits: torch.Tensor, prefixes: Sequence[Sequence[int]]) -> None:
    """Apply ``processors`` in place to each row of ``logits`` (one per position, raw: before
    the grammar mask), row ``j`` seeing ``prefixes[j]`` (prompt + output before that position)
    as its ``input_ids``. One call per position: a drafted position gets exactly what
    step-by-step decoding would give it.

    Example
    -------
    >>> import torch
    >>> from transformers import RepetitionPenaltyLogitsProcessor
    >>> logits = torch.tensor([[2.0, -1.0, 1.0], [2.0, -1.0, 1.0]])
    >>> process_logits([RepetitionPenaltyLogitsProcessor(2.0)], logits, [[0], [0, 1]])
    >>> logits.tolist()
    [[1.0, -1.0, 1.0], [1.0, -2.0, 1.0]]
    """
    for j, prefix in enumerate(prefixes):
        ids = torch.tensor([list(prefix)], dtype=torch.long, device=logits.device)
        scores = logits[j:j + 1]
        for processor in processors:
            scores = processor(ids, scores)
        logits[j:j + 1] = scores


def _check_1d(t: torch.Tensor, name: str) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.numel() == 0:
        raise OptionError(f"{name} must be a non-empty 1-D tensor")


def target_probs(
    masked_logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
) -> torch.Tensor:
    """Sampling distribution over the vocabulary from grammar-masked logits.

    Computes ``softmax(masked_logits / temperature)`` in float64, keeps the ``top_k`` most
    probable tokens (``0`` = off), renormalises, keeps the nucleus (the smallest set of most
    probable tokens whose mass is ``>= top_p``; always at least one token; ``1.0`` = off), and
    renormalises again. This is the order Hugging Face's ``TopKLogitsWarper`` then
    ``TopPLogitsWarper`` use: the nucleus is measured on the top-k distribution.

    Ties in probability are broken towards the lower token id, for both cut-offs, so the
    result is deterministic.

    Parameters
    ----------
    masked_logits : torch.Tensor
        1-D logits over the vocabulary, with every illegal token already set to ``-inf``.
        At least one entry must be finite.
    temperature : float, default 1.0
        Softmax temperature, ``> 0``. Greedy decoding (temperature 0) is :func:`greedy_token`.
    top_k : int, default 0
        Keep only the ``top_k`` most probable tokens; ``0`` disables it. Values larger than the
        number of legal tokens keep all legal tokens.
    top_p : float, default 1.0
        Nucleus mass in ``(0, 1]``; ``1.0`` disables it.

    Returns
    -------
    torch.Tensor
        float64 probabilities, same shape and device as ``masked_logits``, summing to 1.
        Masked (``-inf``) and cut-off tokens have probability exactly ``0``.

    Raises
    ------
    OptionError
        (a ``ValueError``) If ``temperature <= 0``, ``top_k < 0``, ``top_p`` is not in
        ``(0, 1]``, the logits are not a non-empty 1-D tensor, no token is legal (all ``-inf``),
        or the logits contain NaN or ``+inf``.

    Examples
    --------
    >>> import math, torch
    >>> logits = torch.tensor([math.log(0.4), math.log(0.3), math.log(0.2), math.log(0.1),
    ...                        float("-inf")])
    >>> [round(x, 4) for x in target_probs(logits).tolist()]
    [0.4, 0.3, 0.2, 0.1, 0.0]
    >>> [round(x, 4) for x in target_probs(logits, top_k=2).tolist()]
    [0.5714, 0.4286, 0.0, 0.0, 0.0]
    >>> [round(x, 4) for x in target_probs(logits, top_p=0.75).tolist()]
    [0.4444, 0.3333, 0.2222, 0.0, 0.0]
    """
    _check_1d(masked_logits, "masked_logits")
    if not (isinstance(temperature, (int, float)) and 0 < temperature < math.inf):
        raise OptionError(f"temperature must be a finite number > 0, got {temperature!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise OptionError(f"top_k must be an int >= 0 (0 = off), got {top_k!r}")
    if not (isinstance(top_p, (int, float)) and 0.0 < top_p <= 1.0):
        raise OptionError(f"top_p must be in (0, 1], got {top_p!r}")

    logits = masked_logits.to(torch.float64)
    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise OptionError("masked_logits contains NaN or +inf")
    legal = torch.isfinite(logits)
    if not legal.any():
        raise OptionError("no legal token: every logit is -inf")

    probs = torch.softmax(logits / temperature, dim=0)
    probs = torch.where(legal, probs, torch.zeros_like(probs))  # exact zeros, whatever softmax did

    if top_k == 0 and top_p >= 1.0:
        return probs / probs.sum()

    # Descending by probability, ties to the lower id (stable sort keeps id order among equals).
    order = torch.sort(probs, descending=True, stable=True).indices
    sorted_p = probs[order]
    keep_sorted = sorted_p > 0
    if top_k > 0:
        keep_sorted[top_k:] = False
        sorted_p = torch.where(keep_sorted, sorted_p, torch.zeros_like(sorted_p))
        sorted_p = sorted_p / sorted_p.sum()
    if top_p < 1.0:
        # Keep token i iff the mass strictly before it is < top_p: the smallest prefix whose
        # mass reaches top_p. The first token always has 0 mass before it, so one is kept.
        mass_before = torch.cumsum(sorted_p, dim=0) - sorted_p
        keep_sorted &= mass_before < top_p
    kept = torch.zeros_like(legal)
    kept[order] = keep_sorted
    probs = torch.where(kept, probs, torch.zeros_like(probs))
    return probs / probs.sum()


def greedy_token(masked_logits: torch.Tensor) -> int:
    """The most likely legal token: argmax of the masked logits, ties to the lowest token id.

    Parameters
    ----------
    masked_logits : torch.Tensor
        1-D logits with illegal tokens set to ``-inf``.

    Returns
    -------
    int
        The token id.

    Raises
    ------
    OptionError
        (a ``ValueError``) If the logits are not a non-empty 1-D tensor, contain NaN, or are
        all ``-inf``.

    Examples
    --------
    >>> import torch
    >>> greedy_token(torch.tensor([1.0, 3.0, 3.0, float("-inf")]))
    1
    """
    _check_1d(masked_logits, "masked_logits")
    if torch.isnan(masked_logits).any():
        raise OptionError("masked_logits contains NaN")
    # torch.argmax returns the first maximal index.
    token = int(torch.argmax(masked_logits))
    if masked_logits[token] == float("-inf"):
        raise OptionError("no legal token: every logit is -inf")
    return token


def sample_token(probs: torch.Tensor, generator: torch.Generator) -> int:
    """Draw one token from ``probs`` (``torch.multinomial``).

    Parameters
    ----------
    probs : torch.Tensor
        1-D non-negative weights (normally from :func:`target_probs`); need not sum to 1.
        Zero-probability tokens are never drawn.
    generator : torch.Generator
        Source of randomness, on the same device as ``probs``.

    Returns
    -------
    int
        The sampled token id.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> sample_token(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64), g)
    1
    """
    _check_1d(probs, "probs")
    return int(torch.multinomial(probs, 1, generator=generator))


def verify_draft(probs: torch.Tensor, draft: int, generator: torch.Generator) -> tuple[bool, int]:
    """Verify a point-mass draft against the target distribution, losslessly.

    Accept ``draft`` with probability ``probs[draft]`` (one ``torch.rand`` draw); on rejection
    sample from ``probs`` with ``draft`` removed and renormalised. The returned token is then
    distributed exactly as ``probs``, so drafting never changes what is sampled. If
    ``probs[draft] == 1`` the draft is always accepted; if ``probs[draft] == 0`` (e.g. the
    draft is masked) it is always rejected and the token is drawn from ``probs``. If rounding
    leaves no mass outside the draft, the draft is accepted.

    The acceptance draw is always made, so the generator advances by one uniform per call plus
    one multinomial draw on rejection.

    Parameters
    ----------
    probs : torch.Tensor
        1-D target probabilities (normally from :func:`target_probs`), summing to 1.
    draft : int
        The drafted token id.
    generator : torch.Generator
        Source of randomness, on the same device as ``probs``.

    Returns
    -------
    tuple of (bool, int)
        ``(accepted, token)``; ``token == draft`` exactly when ``accepted``.

    Raises
    ------
    OptionError
        (a ``ValueError``) If ``probs`` is not a non-empty 1-D tensor.
    IndexError
        If ``draft`` is not a valid token id.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> p = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    >>> verify_draft(p, 1, g)
    (True, 1)
    >>> verify_draft(p, 0, g)
    (False, 1)
    """
    _check_1d(probs, "probs")
    if isinstance(draft, bool) or not 0 <= int(draft) < probs.numel():
        raise IndexError(f"draft {draft!r} out of range for {probs.numel()} tokens")
    draft = int(draft)
    p_draft = float(probs[draft])
    u = float(torch.rand((), generator=generator, dtype=torch.float64, device=generator.device))
    # u is in [0, 1): p = 1 always accepts, p = 0 never does.
    if u < p_draft:
        return True, draft
    residual = probs.clone()
    residual[draft] = 0
    if not float(residual.sum()) > 0:  # rounding left p(d) just below 1 and nothing else
        return True, draft
    return False, int(torch.multinomial(residual, 1, generator=generator))


def verify_sampled_draft(probs: torch.Tensor, q: torch.Tensor, draft: int,
                         generator: torch.Generator) -> tuple[bool, int]:
    """Verify a token a draft model sampled from ``q``, losslessly (speculative sampling).

    Accept ``draft`` with probability ``min(1, p(d) / q(d))``; on rejection sample from the
    residual ``normalise(max(0, p - q))``. The returned token is then distributed exactly as
    ``probs``: ``P(X = x) = q(x) min(1, p(x)/q(x)) + (1 - sum_y min(p(y), q(y))) r(x) = p(x)``.
    ``probs`` and ``q`` are distributions over the same vocabulary, on the same device (both
    masked and processed the same way, e.g. by :func:`target_probs`).

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> p = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    >>> q = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    >>> verify_sampled_draft(p, q, 0, g)
    (False, 1)
    """
    _check_1d(probs, "probs")
    _check_1d(q, "q")
    if q.numel() != probs.numel():
        raise OptionError(f"q has {q.numel()} entries and probs {probs.numel()}")
    if isinstance(draft, bool) or not 0 <= int(draft) < probs.numel():
        raise IndexError(f"draft {draft!r} out of range for {probs.numel()} tokens")
    draft = int(draft)
    p_d, q_d = float(probs[draft]), float(q[draft])
    u = float(torch.rand((), generator=generator, dtype=torch.float64, device=generator.device))
    if q_d > 0 and u < min(1.0, p_d / q_d):
        return True, draft
    residual = (probs.to(torch.float64) - q.to(torch.float64)).clamp_min(0)
    if not float(residual.sum()) > 0:  # p == q up to rounding: nothing left but the draft
        return (True, draft) if p_d > 0 else (False, int(torch.multinomial(probs, 1, generator=generator)))
    return False, int(torch.multinomial(residual, 1, generator=generator))
