"""The decoding loop: constrained greedy or sampled decoding with drafts, lossless.

Rows of sequences over a :class:`~structgen.decoding.backend.ModelBackend` (today's
transformers backend runs one row). Each step, for each row:

1. choose the next token from the masked logits (greedy argmax, or a sample);
2. ask the draft sources (:mod:`structgen.decoding.drafts`; by default the text the grammar now
   forces, tokenized canonically) for a *draft*, cut to the length the pass-cost curve pays
   for at the acceptance measured so far (:class:`~structgen.decoding.costs.PassCosts`);
3. feed ``[token] + draft`` in one forward pass; walk the draft with the matcher, masking every
   position exactly as step-by-step decoding would, and keep each draft token only when the
   model's own choice there is that token (greedy) or by the point-mass rule (sampling, see
   :mod:`structgen.decoding.sampling`); the first refused position yields the model's own token;
4. roll the backend's cache back to what was kept.

So the output is token for token what ``speculate=False`` produces (up to float near-ties
between batched and single-position passes, ~1e-5 in logits), while forced runs cost one pass
instead of one per token.

Example
-------
>>> from structgen import Generator                           # doctest: +SKIP
>>> result = Generator().json({"type": "boolean"}, "Is water wet?")  # doctest: +SKIP
>>> result.value, result.stats.forward_passes                   # doctest: +SKIP
(True, 2)
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Collection, Literal, Sequence

import numpy as np

from structgen.decoding.backend import ModelBackend
from structgen.decoding.config import DecodeConfig
from structgen.decoding.costs import PassCosts
from structgen.decoding.drafts import Draft, DraftSource
from structgen.decoding.stats import GenerationStats
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary
from structgen.errors import ContextLengthError, DecodingError, IncompleteGenerationError

if TYPE_CHECKING:  # torch is imported where a model runs, so compiling grammars never needs it
    import torch

__all__ = ["Finish", "RowRequest", "RowOutcome", "check_context", "decode", "decode_rows"]

#: How a row ended: the model chose EOS, the grammar allowed nothing more, or ``stop`` said so.
Finish = Literal["eos", "grammar", "stop"]

#: The running acceptance estimate of a source: this much of the old estimate, the rest from
#: the latest draft's kept fraction.
ACCEPTANCE_KEEP, ACCEPTANCE_STEP = 0.8, 0.2


@dataclass
class RowRequest:
    """One sequence to decode: its matcher (perhaps already past some tokens, which then end
    ``prompt_ids`` too), the prompt, tokens its first choice may not be, and a stop test asked
    where the grammar may end (True ends the row there, finish ``"stop"``)."""

    matcher: Matcher
    prompt_ids: Sequence[int]
    banned_first: Collection[int] = ()
    stop: Callable[[list[int]], bool] | None = None


@dataclass
class RowOutcome:
    """What a row produced: tokens (final EOS excluded), how it ended, stats; or the error that
    ended it (``IncompleteGenerationError`` when the budget ran out, holding the partial output)."""

    tokens: list[int]
    finish: Finish | None
    stats: GenerationStats
    error: DecodingError | None = None


@dataclass
class _Row:
    request: RowRequest
    stats: GenerationStats
    generator: "torch.Generator"
    acceptance: dict[str, float]
    started: float
    tokens: list[int] = field(default_factory=list)
    logits: "torch.Tensor | None" = None  # for the next position
    pending: int | None = None  # a token already chosen at a refused draft position
    finish: Finish | None = None
    error: DecodingError | None = None

    @property
    def done(self) -> bool:
        return self.finish is not None or self.error is not None


class _Masker:
    """Masked logits for a matcher's current state."""

    def __init__(self, width: int) -> None:
        self.width = width

    def masked(self, logits: "torch.Tensor", matcher: Matcher) -> "torch.Tensor":
        import torch

        bits = np.unpackbits(matcher.mask_words().view(np.uint8), bitorder="little")[: self.width]
        if bits.size < self.width:  # logits wider than the vocabulary: the rest stays masked
            bits = np.concatenate([bits, np.zeros(self.width - bits.size, np.uint8)])
        allowed = torch.from_numpy(bits.astype(bool)).to(logits.device)
        if not bool(allowed.any()):
            raise DecodingError("the grammar allows no token here: " + (matcher.last_rejection or "dead end"))
        return logits.float().masked_fill(~allowed, float("-inf"))


def decode(backend: ModelBackend, vocab: Vocabulary, matcher: Matcher, prompt_ids: Sequence[int],
           config: DecodeConfig, *, sources: Sequence[DraftSource] = (), costs: PassCosts | None = None,
           banned_first: Collection[int] = (), stop: Callable[[list[int]], bool] | None = None,
           ) -> tuple[list[int], Finish, GenerationStats]:
    """Decode one sequence under ``matcher``; return (token ids, how it ended, stats).

    ``matcher`` may already be past some tokens (they end ``prompt_ids`` too): decoding resumes
    there. ``banned_first`` are tokens the first choice may not be (a retry that backtracks to a
    position bans what was chosen there before). ``stop(tokens)`` is asked where the grammar may
    end, after each chosen token and after each pass's accepted draft tokens; True ends decoding
    there (finish ``"stop"``).

    ``sources`` propose drafts when ``config.speculate`` (the first non-empty proposal is
    used); ``costs`` size them (default: :class:`PassCosts`' built-in curve). Drafts only change
    speed, never the output.

    ``token_ids`` exclude the final EOS. ``finish`` is ``"eos"`` when the model chose an
    end-of-sequence token and ``"grammar"`` when nothing else could follow (no pass spent).

    Raises
    ------
    IncompleteGenerationError
        ``config.max_new_tokens`` ran out first; it carries the partial text, tokens and stats.
    DecodingError
        The grammar allowed no token (a dead end), or the model and the grammar disagreed.
    """
    (outcome,) = decode_rows(backend, vocab, [RowRequest(matcher, prompt_ids, banned_first, stop)], config,
                             sources=sources, costs=costs)
    if outcome.error is not None:
        raise outcome.error
    assert outcome.finish is not None
    return outcome.tokens, outcome.finish, outcome.stats


def decode_rows(backend: ModelBackend, vocab: Vocabulary, requests: Sequence[RowRequest], config: DecodeConfig, *,
                sources: Sequence[DraftSource] = (), costs: PassCosts | None = None) -> list[RowOutcome]:
    """Decode a batch of rows (see :func:`decode`, which is this for one row).

    Rows advance together, one backend pass per step; a row that ends is fed nothing more.
    A row whose budget runs out ends with an :class:`IncompleteGenerationError` in its
    outcome; an internal :class:`DecodingError` is raised at once.
    """
    import torch

    if not requests:
        return []
    check_context(backend, [request.prompt_ids for request in requests], config)
    speculation = "on"
    if not config.speculate:
        speculation = "off"
    elif backend.rollback_refusal:
        speculation = f"off: {backend.rollback_refusal}"
    speculate = speculation == "on" and bool(sources)
    costs = costs or PassCosts()
    masker = _Masker(backend.logits_width)
    rows = []
    for r, request in enumerate(requests):
        # Sampling draws from its own generator: the global torch RNG is neither used nor reseeded.
        seed = config.seed + r if config.seed is not None else secrets.randbits(63)
        rows.append(_Row(request, GenerationStats(prefill_tokens=len(request.prompt_ids), speculation=speculation),
                         torch.Generator().manual_seed(seed), {}, time.perf_counter()))

    with torch.no_grad():
        first = backend.prefill([list(row.request.prompt_ids) for row in rows])
        for row, logits in zip(rows, first):
            row.stats.forward_passes += 1
            if row.request.banned_first:
                logits = logits.clone()
                logits[torch.tensor(sorted(row.request.banned_first), device=logits.device)] = float("-inf")
            row.logits = logits
        while True:
            feeds: list[list[int]] = []
            drafts: list[Draft | None] = []
            for row in rows:
                step = None if row.done else _next_step(row, vocab, masker, config, costs,
                                                        sources if speculate else ())
                drafts.append(step[1] if step else None)
                feeds.append([step[0], *step[1].tokens] if step else [])
            if not any(feeds):
                break
            outs = backend.extend(feeds)
            rollbacks = [0] * len(rows)
            for r, (row, draft, logits) in enumerate(zip(rows, drafts, outs)):
                if draft is not None:
                    rollbacks[r] = _verify(row, draft, logits, masker, config, sources)
            if any(rollbacks):
                backend.rollback(rollbacks)
    for row in rows:
        if row.error is not None:  # its stats were closed when it ended
            continue
        row.stats.new_tokens = len(row.tokens)
        row.stats.seconds = time.perf_counter() - row.started
    return [RowOutcome(row.tokens, row.finish, row.stats, row.error) for row in rows]


def check_context(backend: ModelBackend, prompts: Sequence[Sequence[int]], config: DecodeConfig) -> None:
    """Refuse, before any pass, a prompt that cannot fit the model's context with its budget
    (:class:`ContextLengthError`); tasks call it before compiling too, as a tool grammar for a
    prompt that cannot fit is wasted work. A backend without ``max_positions`` is not checked."""
    limit = getattr(backend, "max_positions", None)
    if not limit:
        return
    for r, prompt_ids in enumerate(prompts):
        need = len(prompt_ids) + config.max_new_tokens
        if need > limit:
            row = f"row {r}: " if len(prompts) > 1 else ""
            raise ContextLengthError(
                f"{row}the prompt is {len(prompt_ids)} tokens and max_new_tokens is "
                f"{config.max_new_tokens}: {need} positions, over the model's context of {limit}; "
                "shorten the prompt (fewer tools, a shorter document) or lower max_new_tokens")


def _choose(row: _Row, logits: "torch.Tensor", masker: _Masker, config: DecodeConfig) -> int:
    from structgen.decoding import sampling

    masked = masker.masked(logits, row.request.matcher)
    if config.greedy:
        return sampling.greedy_token(masked)
    probs = sampling.target_probs(masked, temperature=config.temperature, top_k=config.top_k, top_p=config.top_p)
    return sampling.sample_token(probs, row.generator)


def _next_step(row: _Row, vocab: Vocabulary, masker: _Masker, config: DecodeConfig, costs: PassCosts,
               sources: Sequence[DraftSource]) -> tuple[int, Draft] | None:
    """The row's next token and the draft to verify after it, or None when the row ended
    (``row.finish`` or ``row.error`` set)."""
    matcher, tokens = row.request.matcher, row.tokens
    assert row.logits is not None
    token = row.pending if row.pending is not None else _choose(row, row.logits, masker, config)
    row.pending = None
    if token in vocab.eos_ids:
        row.finish = "eos"
        return None
    if len(tokens) >= config.max_new_tokens:
        row.stats.new_tokens = len(tokens)
        row.stats.seconds = time.perf_counter() - row.started
        row.error = IncompleteGenerationError(
            f"max_new_tokens={config.max_new_tokens} ran out before the value was complete; raise it "
            "or tighten the schema (e.g. maxLength)",
            partial_text=vocab.token_bytes(tokens).decode("utf-8", "replace"),
            token_ids=list(tokens), stats=row.stats)
        return None
    if not matcher.advance(token):
        raise DecodingError(f"internal error: the masked choice was refused: {matcher.last_rejection}")
    tokens.append(token)
    if matcher.is_finished():  # only EOS could follow: no pass needed to choose it
        row.finish = "grammar"
        return None
    if row.request.stop is not None and matcher.can_end() and row.request.stop(tokens):
        row.finish = "stop"
        return None
    draft = Draft((), "")
    limit = min(config.max_draft, config.max_new_tokens - len(tokens))
    for source in sources:
        draft = source.propose(matcher, tokens, limit)
        if draft.tokens:
            break
    if draft.tokens:
        acceptance = row.acceptance.get(draft.source, config.acceptance_prior)
        draft = draft.cut(costs.best_length(len(draft), acceptance))
    return token, draft


def _verify(row: _Row, draft: Draft, logits: "torch.Tensor", masker: _Masker, config: DecodeConfig,
            sources: Sequence[DraftSource]) -> int:
    """Walk ``draft`` against the pass's ``logits`` (one row per fed position); return how many
    positions to roll back."""
    from structgen.decoding import sampling

    matcher, tokens = row.request.matcher, row.tokens
    row.stats.forward_passes += 1
    kept = 0
    for i, proposed in enumerate(draft.tokens):
        masked = masker.masked(logits[i], matcher)
        if config.greedy:
            choice = sampling.greedy_token(masked)
            ok = choice == proposed
        else:
            probs = sampling.target_probs(masked, temperature=config.temperature, top_k=config.top_k,
                                          top_p=config.top_p)
            ok, choice = sampling.verify_draft(probs, proposed, row.generator)
        if not ok:
            row.pending = choice  # the model's own token at this position
            break
        matcher.advance(proposed)
        tokens.append(proposed)
        kept += 1
    if draft.tokens:
        row.stats.count_draft(draft.source, drafted=len(draft), accepted=kept)
        for source in sources:
            if source.name == draft.source:
                source.record(draft, kept)
        previous = row.acceptance.get(draft.source, config.acceptance_prior)
        row.acceptance[draft.source] = ACCEPTANCE_KEEP * previous + ACCEPTANCE_STEP * (kept / len(draft))
    row.logits = logits[kept]
    if kept and matcher.is_finished():
        row.finish = "grammar"
    elif kept and row.request.stop is not None and matcher.can_end() and row.request.stop(tokens):
        row.finish = "stop"
    return len(draft) - kept
