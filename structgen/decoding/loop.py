"""The decoding loop: constrained greedy or sampled decoding with forced-text drafts, lossless.

One sequence (batch size 1) over a transformers causal LM with a KV cache. Each step:

1. choose the next token from the masked logits (greedy argmax, or a sample);
2. ask the matcher for the text the grammar now forces (keys, punctuation, closing brackets)
   and tokenize it canonically into a *draft*, trimmed to what the matcher accepts and backed
   off where a longer legal token could extend its end;
3. feed ``[token] + draft`` in one forward pass; walk the draft with the matcher, masking every
   position exactly as step-by-step decoding would, and keep each draft token only when the
   model's own choice there is that token (greedy) or by the point-mass rule (sampling, see
   :mod:`structgen.decoding.sampling`); the first refused position yields the model's own token;
4. crop the KV cache back to what was kept.

So the output is token for token what ``speculate=False`` produces (up to float near-ties
between batched and single-position passes, ~1e-5 in logits), while forced runs cost one pass
instead of one per token. A draft is only proposed when its expected acceptance pays for the
wider pass, judged by a pass-cost curve measured once per model (:class:`PassCosts`).

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
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Literal

if TYPE_CHECKING:  # torch is imported where a model runs, so compiling grammars never needs it
    import torch

import numpy as np

from structgen.errors import DecodingError, IncompleteGenerationError
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary, prefix_range_end

__all__ = ["DraftEnds", "GenerationStats", "PassCosts", "decode", "forced_draft"]

#: Longest draft proposed at once.
MAX_DRAFT = 16


@dataclass
class GenerationStats:
    """What one generation cost.

    ``forward_passes`` counts every model call, the prefill included; ``new_tokens`` excludes
    the final end-of-sequence token (an EOS the grammar forces costs no pass at all).
    """

    forward_passes: int = 0
    prefill_tokens: int = 0
    new_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    rejected_drafts: int = 0
    seconds: float = 0.0
    speculation: str = "on"

    @property
    def acceptance_rate(self) -> float:
        """Accepted over drafted tokens (0 when nothing was drafted)."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    @property
    def passes_per_token(self) -> float:
        """Decoding passes (prefill excluded) per new token."""
        return (self.forward_passes - 1) / self.new_tokens if self.new_tokens else 0.0


@dataclass
class PassCosts:
    """Cost of a forward pass over ``n`` new positions, relative to a 1-position pass.

    Measured once per model and device (:meth:`measure`); the default is the curve measured for
    SmolLM2 on 2 CPU threads (DESIGN.md).
    """

    relative: dict[int, float] = field(default_factory=lambda: {1: 1.0, 2: 1.6, 4: 1.5, 8: 1.5, 16: 1.7, 32: 2.2})

    def cost(self, n: int) -> float:
        sizes = sorted(self.relative)
        for s in sizes:
            if n <= s:
                return self.relative[s]
        return self.relative[sizes[-1]] * n / sizes[-1]

    def best_length(self, draft_len: int, acceptance: float) -> int:
        """Draft length (0 = no draft) with the most expected tokens per unit of pass cost."""
        best, best_rate = 0, 1.0  # no draft: one token per 1-position pass
        expected = 1.0
        for k in range(1, draft_len + 1):
            expected += acceptance ** k
            rate = expected / self.cost(k + 1)
            if rate > best_rate:
                best, best_rate = k, rate
        return best

    @staticmethod
    def measure(model: Any, *, context: int = 256, sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32),
                repeats: int = 3) -> "PassCosts":
        """Time passes over ``sizes`` new positions after ``context`` cached ones (best of ``repeats``)."""
        import torch
        from transformers import DynamicCache

        device = next(model.parameters()).device
        prompt = torch.ones((1, context), dtype=torch.long, device=device)
        seconds: dict[int, float] = {}
        with torch.no_grad():
            cache = DynamicCache(config=model.config)
            model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            for n in sizes:
                best = float("inf")
                for _ in range(repeats):
                    ids = torch.ones((1, n), dtype=torch.long, device=device)
                    t0 = time.perf_counter()
                    model(input_ids=ids, past_key_values=cache, use_cache=True)
                    best = min(best, time.perf_counter() - t0)
                    cache.crop(-n)
                seconds[n] = best
        base = seconds[min(sizes)]
        # A wider pass never costs less than the 1-position one (timing noise, e.g. another
        # process on the cores, must not make a draft look free); beyond that the curve is kept
        # as measured: on CPUs a 4-position pass can cost less than a 2-position one.
        return PassCosts({n: max(1.0, s / base) for n, s in seconds.items()})


def forced_draft(matcher: Matcher, tokenizer: Any, vocab: Vocabulary, limit: int = MAX_DRAFT) -> list[int]:
    """Canonical tokens of the text the grammar forces from here (possibly empty).

    The forced text is tokenized on its own; tokens are kept while their bytes spell it and the
    matcher accepts them, and trailing tokens that a longer legal token could extend are dropped
    (the model, seeing what follows, would likely pick the longer one).
    """
    text = matcher.forced_text()
    if not text or limit <= 0:
        return []
    data = text.encode("utf-8")
    draft: list[int] = []
    pos = 0
    for tid in tokenizer.encode(text, add_special_tokens=False):
        piece = vocab.tokens[tid] if 0 <= tid < vocab.size else None
        if not piece or data[pos:pos + len(piece)] != piece:
            break
        draft.append(tid)
        pos += len(piece)
        if len(draft) == limit:
            break
    draft = draft[:matcher.validate(draft)]
    while draft and _extendable(matcher, vocab, draft):
        draft.pop()
    return draft


def _extendable(matcher: Matcher, vocab: Vocabulary, draft: list[int]) -> bool:
    """Whether some legal token after ``draft[:-1]`` starts with ``draft[-1]``'s bytes and is longer."""
    probe = matcher.fork()
    for tid in draft[:-1]:
        probe.advance(tid)
    words = probe.mask_words()
    keys, ids = vocab.index.keys, vocab.index.ids
    piece = vocab.tokens[draft[-1]]
    lo = bisect_left(keys, piece)
    hi = prefix_range_end(keys, piece, lo, len(keys))
    for k in range(lo, hi):
        if len(keys[k]) > len(piece) and any(words[t >> 5] >> (t & 31) & 1 for t in ids[k]):
            return True
    return False


class _Masker:
    """Masked logits for the matcher's current state."""

    def __init__(self, vocab: Vocabulary, width: int) -> None:
        self.vocab = vocab
        self.width = width

    def masked(self, logits: torch.Tensor, matcher: Matcher) -> torch.Tensor:
        import torch

        bits = np.unpackbits(matcher.mask_words().view(np.uint8), bitorder="little")[: self.width]
        if bits.size < self.width:  # logits wider than the vocabulary: the rest stays masked
            bits = np.concatenate([bits, np.zeros(self.width - bits.size, np.uint8)])
        allowed = torch.from_numpy(bits.astype(bool)).to(logits.device)
        if not bool(allowed.any()):
            raise DecodingError("the grammar allows no token here: " + (matcher.last_rejection or "dead end"))
        return logits.float().masked_fill(~allowed, float("-inf"))


class DraftEnds:
    """How often the model refused each token when it ended a draft, learned as it decodes.

    A draft's last token meets free text: the canonical split there is often not the model's
    (SmolLM2 writes ``":`` then ``"New`` rather than ``":"`` then ``New``). A token refused in
    most of at least ``min_seen`` such positions is no longer proposed last; the pass then ends
    one token earlier and the model's own token comes as the bonus, at no loss.
    """

    def __init__(self, min_seen: int = 3, max_refused: float = 0.5) -> None:
        self.min_seen = min_seen
        self.max_refused = max_refused
        self.seen: dict[int, list[int]] = {}  # token -> [times proposed last, times refused]

    def trim(self, draft: list[int]) -> list[int]:
        if draft:
            seen, refused = self.seen.get(draft[-1], (0, 0))
            if seen >= self.min_seen and refused > self.max_refused * seen:
                return draft[:-1]
        return draft

    def record(self, draft: list[int], kept: int) -> None:
        if draft and kept >= len(draft) - 1:  # the last token was judged
            entry = self.seen.setdefault(draft[-1], [0, 0])
            entry[0] += 1
            entry[1] += kept < len(draft)


def decode(model: Any, tokenizer: Any, vocab: Vocabulary, matcher: Matcher, prompt_ids: list[int], *,
           max_new_tokens: int = 256, temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0,
           seed: int | None = None, speculate: bool = True, costs: PassCosts | None = None,
           acceptance_prior: float = 0.9, draft_ends: DraftEnds | None = None,
           banned_first: Collection[int] = (),
           stop: Callable[[list[int]], bool] | None = None,
           ) -> tuple[list[int], Literal["eos", "grammar", "stop"], GenerationStats]:
    """Decode one sequence under ``matcher``; return (token ids, how it ended, stats).

    ``matcher`` may already be past some tokens (they end ``prompt_ids`` too): decoding resumes
    there. ``banned_first`` are tokens the first choice may not be (a retry that backtracks to a
    position bans what was chosen there before). ``stop(tokens)`` is asked where the grammar may
    end, after each chosen token and after each pass's accepted draft tokens; True ends decoding
    there (finish ``"stop"``).

    ``draft_ends`` carries what was learned about draft ends across calls (a
    :class:`Generator` keeps one per model); drafts only change speed, never the output.

    ``token_ids`` exclude the final EOS. ``finish`` is ``"eos"`` when the model chose an
    end-of-sequence token and ``"grammar"`` when nothing else could follow (no pass spent).

    Raises
    ------
    IncompleteGenerationError
        ``max_new_tokens`` ran out first; it carries the partial text, tokens and stats.
    """
    import torch
    from transformers import DynamicCache

    from structgen.decoding import sampling

    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, not {max_new_tokens}")
    greedy = temperature == 0.0
    if not greedy and temperature < 0:
        raise ValueError(f"temperature must be >= 0, not {temperature}")
    # Sampling draws from its own generator: the global torch RNG is neither used nor reseeded.
    generator = torch.Generator().manual_seed(seed if seed is not None else secrets.randbits(63))
    stats = GenerationStats(prefill_tokens=len(prompt_ids))
    reason = _no_speculation_reason(model)
    if not speculate:
        stats.speculation = "off"
    elif reason:
        stats.speculation = f"off: {reason}"
        speculate = False
    costs = costs or PassCosts()
    draft_ends = draft_ends if draft_ends is not None else DraftEnds()
    acceptance = acceptance_prior
    device = next(model.parameters()).device
    width = model.get_output_embeddings().weight.shape[0] if model.get_output_embeddings() is not None \
        else vocab.size
    masker = _Masker(vocab, width)
    tokens: list[int] = []
    started = time.perf_counter()

    def choose(row: torch.Tensor) -> int:
        masked = masker.masked(row, matcher)
        if greedy:
            return sampling.greedy_token(masked)
        probs = sampling.target_probs(masked, temperature=temperature, top_k=top_k, top_p=top_p)
        return sampling.sample_token(probs, generator)

    def incomplete() -> IncompleteGenerationError:
        stats.new_tokens = len(tokens)
        stats.seconds = time.perf_counter() - started
        return IncompleteGenerationError(
            f"max_new_tokens={max_new_tokens} ran out before the value was complete; raise it "
            "or tighten the schema (e.g. maxLength)",
            partial_text=vocab.token_bytes(tokens).decode("utf-8", "replace"),
            token_ids=list(tokens), stats=stats)

    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        out = model(input_ids=torch.tensor([prompt_ids], device=device), past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
        stats.forward_passes += 1
        row = out.logits[0, -1]
        if banned_first:
            row = row.clone()
            row[torch.tensor(sorted(banned_first), device=row.device)] = float("-inf")
        pending: int | None = None  # a token already chosen at a refused draft position
        while True:
            token = pending if pending is not None else choose(row)
            pending = None
            if token in vocab.eos_ids:
                finish: Literal["eos", "grammar"] = "eos"
                break
            if len(tokens) >= max_new_tokens:
                raise incomplete()
            if not matcher.advance(token):
                raise DecodingError(f"internal error: the masked choice was refused: {matcher.last_rejection}")
            tokens.append(token)
            if matcher.is_finished():  # only EOS could follow: no pass needed to choose it
                finish = "grammar"
                break
            if stop is not None and matcher.can_end() and stop(tokens):
                finish = "stop"
                break
            draft: list[int] = []
            if speculate:
                draft = forced_draft(matcher, tokenizer, vocab, min(MAX_DRAFT, max_new_tokens - len(tokens)))
                draft = draft_ends.trim(draft)
                draft = draft[:costs.best_length(len(draft), acceptance)]
            out = model(input_ids=torch.tensor([[token] + draft], device=device), past_key_values=cache,
                        use_cache=True)
            stats.forward_passes += 1
            logits = out.logits[0]
            kept = 0
            for i, proposed in enumerate(draft):
                masked = masker.masked(logits[i], matcher)
                if greedy:
                    choice = sampling.greedy_token(masked)
                    ok = choice == proposed
                else:
                    probs = sampling.target_probs(masked, temperature=temperature, top_k=top_k, top_p=top_p)
                    ok, choice = sampling.verify_draft(probs, proposed, generator)
                if not ok:
                    pending = choice  # the model's own token at this position
                    break
                matcher.advance(proposed)
                tokens.append(proposed)
                kept += 1
            stats.drafted_tokens += len(draft)
            stats.accepted_tokens += kept
            draft_ends.record(draft, kept)
            if draft:
                acceptance = 0.8 * acceptance + 0.2 * (kept / len(draft))
            if kept < len(draft):
                stats.rejected_drafts += 1
                cache.crop(-(len(draft) - kept))
            row = logits[kept]
            if kept and matcher.is_finished():
                finish = "grammar"
                break
            if kept and stop is not None and matcher.can_end() and stop(tokens):
                finish = "stop"
                break
    stats.new_tokens = len(tokens)
    stats.seconds = time.perf_counter() - started
    return tokens, finish, stats


def _no_speculation_reason(model: Any) -> str:
    """Why drafts cannot be checked and rolled back on this model ('' when they can)."""
    config = getattr(model, "config", None)
    layer_types = getattr(config, "layer_types", None) or []
    if getattr(config, "sliding_window", None) and (not layer_types or "sliding_attention" in layer_types):
        return "the model has sliding-window attention layers, whose cache cannot be rolled back"
    if any(t not in ("full_attention", "sliding_attention") for t in layer_types):
        return "the model has recurrent or linear-attention layers, whose cache cannot be rolled back"
    return ""
