"""The decoding loop: constrained greedy or sampled decoding with drafts, lossless.

Rows of sequences over a :class:`~structgen.decoding.backend.ModelBackend` (today's
transformers backend runs one row). Each step, for each row:

1. choose the next token from the masked logits (greedy argmax, or a sample);
2. ask the row's :class:`~structgen.decoding.controller.DraftController` for a *draft*: it
   weighs the draft sources (:mod:`structgen.decoding.drafts`: the text the grammar forces;
   :mod:`~structgen.decoding.lookup`: values copied from the prompt; a draft model) by the
   acceptance measured so far per label and the pass-cost curve
   (:class:`~structgen.decoding.costs.PassCosts`), and cuts the best draft where it pays;
3. feed ``[token] + draft`` in one forward pass; walk the draft with the matcher, masking every
   position exactly as step-by-step decoding would, and keep each draft token only when the
   model's own choice there is that token (greedy), by the point-mass rule, or by the
   ``min(1, p/q)`` rule for a draft model's sampled token (sampling, see
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

from structgen.decoding.backend import ModelBackend
from structgen.decoding.config import DecodeConfig
from structgen.decoding.controller import Acceptance, DraftController
from structgen.decoding.costs import PassCosts
from structgen.decoding.drafts import Draft, DraftSource
from structgen.decoding.masking import Masker
from structgen.decoding.stats import GenerationStats
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary
from structgen.errors import ContextLengthError, DecodingError, IncompleteGenerationError

if TYPE_CHECKING:  # torch is imported where a model runs, so compiling grammars never needs it
    import torch

__all__ = ["Finish", "RowRequest", "RowOutcome", "check_context", "decode", "decode_rows"]

#: How a row ended: the model chose EOS, the grammar allowed nothing more, or ``stop`` said so.
Finish = Literal["eos", "grammar", "stop"]

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
    controller: DraftController
    started: float
    tokens: list[int] = field(default_factory=list)
    logits: "torch.Tensor | None" = None  # for the next position
    pending: int | None = None  # a token already chosen at a refused draft position
    finish: Finish | None = None
    error: DecodingError | None = None

    @property
    def done(self) -> bool:
        return self.finish is not None or self.error is not None


def decode(backend: ModelBackend, vocab: Vocabulary, matcher: Matcher, prompt_ids: Sequence[int],
           config: DecodeConfig, *, sources: Sequence[DraftSource] = (), costs: PassCosts | None = None,
           banned_first: Collection[int] = (), stop: Callable[[list[int]], bool] | None = None,
           learned: dict[str, float] | None = None) -> tuple[list[int], Finish, GenerationStats]:
    """Decode one sequence under ``matcher``; return (token ids, how it ended, stats).

    ``matcher`` may already be past some tokens (they end ``prompt_ids`` too): decoding resumes
    there. ``banned_first`` are tokens the first choice may not be (a retry that backtracks to a
    position bans what was chosen there before). ``stop(tokens)`` is asked where the grammar may
    end, after each chosen token and after each pass's accepted draft tokens; True ends decoding
    there (finish ``"stop"``).

    ``sources`` propose drafts when ``config.speculate``; a controller per row chooses among
    them (:mod:`structgen.decoding.controller`); ``costs`` is the pass-cost curve (default:
    :class:`PassCosts`' built-in one), which learns from the passes it sees. ``learned`` holds
    acceptance per draft label from earlier generations: each row starts halfway between it and
    ``config.acceptance_prior``, and it is updated when the row ends. Drafts only change speed,
    never the output.

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
                             sources=sources, costs=costs, learned=learned)
    if outcome.error is not None:
        raise outcome.error
    assert outcome.finish is not None
    return outcome.tokens, outcome.finish, outcome.stats


def decode_rows(backend: ModelBackend, vocab: Vocabulary, requests: Sequence[RowRequest], config: DecodeConfig, *,
                sources: Sequence[DraftSource] = (), costs: PassCosts | None = None,
                learned: dict[str, float] | None = None) -> list[RowOutcome]:
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
    if config.speculate is not True:  # the sources named
        sources = [source for source in sources if source.name in config.drafts]
    speculate = speculation == "on" and bool(sources)
    costs = costs or PassCosts()
    masker = Masker(backend.logits_width)
    rows = []
    for r, request in enumerate(requests):
        # Sampling draws from its own generator: the global torch RNG is neither used nor reseeded.
        seed = config.seed + r if config.seed is not None else secrets.randbits(63)
        row_sources = [_for_row(source, request.prompt_ids, config) for source in sources] if speculate else []
        start = {label: (rate + config.acceptance_prior) / 2 for label, rate in (learned or {}).items()}
        controller = DraftController(row_sources, costs, Acceptance(config.acceptance_prior, start))
        rows.append(_Row(request, GenerationStats(prefill_tokens=len(request.prompt_ids), speculation=speculation),
                         torch.Generator().manual_seed(seed), controller, time.perf_counter()))

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
                step = None if row.done else _next_step(row, vocab, masker, config)
                drafts.append(step[1] if step else None)
                feeds.append([step[0], *step[1].tokens] if step else [])
            if not any(feeds):
                break
            started = time.perf_counter()
            outs = backend.extend(feeds)
            if len(rows) == 1:  # the curve is per row count; batches are measured elsewhere
                costs.observe(len(feeds[0]), time.perf_counter() - started)
            rollbacks = [0] * len(rows)
            for r, (row, draft, logits) in enumerate(zip(rows, drafts, outs)):
                if draft is not None:
                    rollbacks[r] = _verify(row, draft, logits, masker, config)
            backend.rollback(rollbacks)  # with no rollback it still trims sliding-window layers
    for row in rows:
        if learned is not None:
            learned.update(row.controller.acceptance.rates)
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


def _choose(row: _Row, logits: "torch.Tensor", masker: Masker, config: DecodeConfig) -> int:
    from structgen.decoding import sampling

    masked = masker.masked(logits, row.request.matcher)
    if config.greedy:
        return sampling.greedy_token(masked)
    probs = sampling.target_probs(masked, temperature=config.temperature, top_k=config.top_k, top_p=config.top_p)
    return sampling.sample_token(probs, row.generator)


def _for_row(source: DraftSource, prompt_ids: Sequence[int], config: DecodeConfig) -> DraftSource:
    for_row = getattr(source, "for_row", None)
    return for_row(prompt_ids, config) if for_row is not None else source


def _next_step(row: _Row, vocab: Vocabulary, masker: Masker, config: DecodeConfig) -> tuple[int, Draft] | None:
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
    limit = min(config.max_draft, config.max_new_tokens - len(tokens))
    return token, row.controller.propose(matcher, tokens, limit) if limit > 0 else Draft((), "")


def _verify(row: _Row, draft: Draft, logits: "torch.Tensor", masker: Masker, config: DecodeConfig) -> int:
    """Walk ``draft`` against the pass's ``logits`` (one row per fed position); return how many
    positions to roll back."""
    from structgen.decoding import sampling

    matcher, tokens = row.request.matcher, row.tokens
    row.stats.forward_passes += 1
    row.stats.count_pass(draft.source if draft.tokens else "none")
    kept = 0
    for i, proposed in enumerate(draft.tokens):
        masked = masker.masked(logits[i], matcher)
        if config.greedy:
            choice = sampling.greedy_token(masked)
            ok = choice == proposed
        else:
            probs = sampling.target_probs(masked, temperature=config.temperature, top_k=config.top_k,
                                          top_p=config.top_p)
            q = draft.distribution(i)
            if q is None:
                ok, choice = sampling.verify_draft(probs, proposed, row.generator)
            else:
                ok, choice = sampling.verify_sampled_draft(probs, q.to(probs.device), proposed, row.generator)
        if not ok:
            row.pending = choice  # the model's own token at this position
            break
        matcher.advance(proposed)
        tokens.append(proposed)
        kept += 1
    if draft.tokens:
        labels = [draft.label(i) for i in range(len(draft))]
        for label in dict.fromkeys(labels):
            row.stats.count_draft(label, drafted=labels.count(label), accepted=labels[:kept].count(label),
                                  refused=kept < len(labels) and labels[kept] == label)
        row.controller.record(draft, kept, row.pending)
    row.logits = logits[kept]
    if kept and matcher.is_finished():
        row.finish = "grammar"
    elif kept and row.request.stop is not None and matcher.can_end() and row.request.stop(tokens):
        row.finish = "stop"
    return len(draft) - kept
