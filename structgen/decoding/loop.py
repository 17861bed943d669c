"""The decoding loop: constrained greedy or sampled decoding with drafts, lossless.

A batch of rows, each with its own matcher, over a
:class:`~structgen.decoding.backend.ModelBackend`. Each step:

1. each row takes its next token (chosen from the masked logits of the last pass: greedy
   argmax, or a sample) and asks its :class:`~structgen.decoding.controller.DraftController`
   for a *draft*: it weighs the draft sources (:mod:`structgen.decoding.drafts`: the text the
   grammar forces; :mod:`~structgen.decoding.lookup`: values copied from the prompt; a draft
   model) by the acceptance measured so far per label and the pass-cost surface at this batch
   size (:class:`~structgen.decoding.costs.PassCosts`);
2. one width for the pass is chosen from every row's expected tokens and the surface
   (:meth:`~structgen.decoding.costs.PassCosts.best_width`): as the batch fills, a wider pass
   costs nearly its width and drafts shorten, then stop; as rows end, they come back. Each
   row's draft is cut to it;
3. each row's matcher walks its draft, and the masks of every position of every row are filled
   into one array and applied to the pass's logits in one call, on the model's device;
4. one forward pass feeds each row ``[token] + draft``; each row keeps its draft tokens while the
   model's own choice there is that token (greedy), by the point-mass rule, or by the
   ``min(1, p/q)`` rule for a draft model's sampled token (sampling, see
   :mod:`structgen.decoding.sampling`); the first refused position (or the one after the draft)
   gives the row's next token;
5. each row's matcher and cache are rolled back to what it kept; rows that ended leave the batch.

So each row's output is token for token what ``speculate=False`` produces for that row alone
(up to float near-ties between batched and single-position passes, ~1e-5 in logits), while
forced runs cost one pass instead of one per token.

Example
-------
>>> from structgen import Generator                           # doctest: +SKIP
>>> result = Generator().json({"type": "boolean"}, "Is water wet?")  # doctest: +SKIP
>>> result.value, result.stats.forward_passes                   # doctest: +SKIP
(True, 2)
"""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Collection, Literal, Sequence

from structgen.decoding.backend import ModelBackend
from structgen.decoding.config import DecodeConfig
from structgen.decoding.controller import Acceptance, DraftController
from structgen.decoding.costs import PassCosts
from structgen.decoding.drafts import Draft, DraftSource
from structgen.decoding.masking import Masker
from structgen.decoding.stats import GenerationStats, StepStats
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary
from structgen.errors import (BudgetTooSmallError, ContextLengthError, DecodingError, IncompleteGenerationError,
                              OptionError)

if TYPE_CHECKING:  # torch is imported where a model runs, so compiling grammars never needs it
    import numpy as np
    import torch

__all__ = ["Finish", "RowRequest", "RowOutcome", "check_context", "decode", "decode_rows"]

#: How a row ended: the model chose EOS, the grammar allowed nothing more, ``stop`` said so, or
#: (``budget="complete"``) it ended complete after the budget changed some choice to fit.
Finish = Literal["eos", "grammar", "stop", "length"]

@dataclass
class RowRequest:
    """One sequence to decode: its matcher (perhaps already past some tokens, which then end
    ``prompt_ids`` too), the prompt, tokens its first choice may not be, a stop test asked
    where the grammar may end (True ends the row there, finish ``"stop"``), and its own budget
    and sampling options (``config``: ``max_new_tokens``, ``temperature``, ``top_p``,
    ``top_k``, ``seed`` and the logits processing options; default: the batch's)."""

    matcher: Matcher
    prompt_ids: Sequence[int]
    banned_first: Collection[int] = ()
    stop: Callable[[list[int]], bool] | None = None
    config: DecodeConfig | None = None
    #: called with the tokens the row accepted since the last call, once per step (a token and
    #: the draft kept before it arrive together), for streaming
    on_tokens: Callable[[list[int]], None] | None = None
    #: the ids logits processors see before the output (default: ``prompt_ids``); e.g. the
    #: padded row, as ``model.generate``'s own processors see it
    history: Sequence[int] | None = None


@dataclass
class RowOutcome:
    """What a row produced: tokens (final EOS excluded), how it ended, stats; or the error that
    ended it (``IncompleteGenerationError`` when the budget ran out, holding the partial output;
    a :class:`DecodingError` when its grammar allowed no token)."""

    tokens: list[int]
    finish: Finish | None
    stats: GenerationStats
    error: DecodingError | None = None


@dataclass
class _Row:
    index: int
    request: RowRequest
    config: DecodeConfig
    stats: GenerationStats
    generator: "torch.Generator"
    controller: DraftController
    started: float
    tokens: list[int] = field(default_factory=list)
    next_token: int | None = None  # chosen from the last pass's logits
    draft: Draft = field(default_factory=lambda: Draft((), ""))
    walked: int = 0  # draft tokens the matcher advanced over before the pass
    reported: int = 0  # tokens handed to ``request.on_tokens`` so far
    finish: Finish | None = None
    error: DecodingError | None = None
    released: bool = False  # left the backend's batch
    processors: list = field(default_factory=list)  # logits processors (none: the fast path)
    history: list[int] = field(default_factory=list)  # what processors see before the output
    budgeted: bool = False  # choices keep a complete output within the budget
    cut: bool = False  # the budget changed some choice: the output may be cut short

    @property
    def left(self) -> int:
        """Tokens left at the position being chosen (it included)."""
        return self.config.max_new_tokens - len(self.tokens)

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
    them (:mod:`structgen.decoding.controller`); ``costs`` is the pass-cost surface (default:
    :class:`PassCosts`' built-in one), which learns from the passes it sees. ``learned`` holds
    acceptance per draft label from earlier generations: each row starts halfway between it and
    ``config.acceptance_prior``, and it is updated when the row ends. Drafts only change speed,
    never the output.

    ``token_ids`` exclude the final EOS. ``finish`` is ``"eos"`` when the model chose an
    end-of-sequence token and ``"grammar"`` when nothing else could follow (no pass spent);
    ``"length"`` when, under ``config.budget="complete"``, the budget changed some choice so
    that the output ends complete within it (see :mod:`structgen.decoding.budget`).

    Raises
    ------
    IncompleteGenerationError
        ``config.max_new_tokens`` ran out first (``budget="raise"``); it carries the partial
        text, tokens and stats.
    BudgetTooSmallError
        ``budget="complete"`` and no complete output fits ``max_new_tokens``: before any pass.
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
    """Decode a batch of rows together, one forward pass per step for all of them (see
    :func:`decode`, which is this for one row, and the module notes).

    ``config`` gives the drafting options (``speculate``, ``max_draft``, ``acceptance_prior``)
    and each row's budget and sampling unless its request has its own ``config``. Each row
    ends on its own and leaves the batch; its outcome holds its tokens or its error (a budget
    that ran out, a grammar that allowed no token), and the other rows go on. A backend with a
    ``max_rows`` limit decodes the rows in batches of that size, one after another.
    """
    if not requests:
        return []
    check_context(backend, [request.prompt_ids for request in requests], config)
    limit = getattr(backend, "max_rows", None)
    if limit and len(requests) > limit:
        return [outcome for start in range(0, len(requests), limit)
                for outcome in _decode_batch(backend, vocab, requests[start:start + limit], config,
                                             sources, costs, learned, offset=start)]
    return _decode_batch(backend, vocab, requests, config, sources, costs, learned)


def _decode_batch(backend: ModelBackend, vocab: Vocabulary, requests: Sequence[RowRequest], config: DecodeConfig,
                  sources: Sequence[DraftSource], costs: PassCosts | None, learned: dict[str, float] | None,
                  offset: int = 0) -> list[RowOutcome]:
    import torch

    from structgen.decoding import sampling

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
    release = getattr(backend, "release", None)
    started = time.perf_counter()
    rows = []
    for r, request in enumerate(requests):
        row_config = _row_config(config, request.config)
        # Sampling draws from its own generator: the global torch RNG is neither used nor reseeded.
        seed = row_config.seed + offset + r if row_config.seed is not None else secrets.randbits(63)
        if request.config is not None and request.config.seed is not None:
            seed = request.config.seed
        row_sources = [_for_row(source, request.prompt_ids, row_config) for source in sources] if speculate else []
        start = {label: (rate + config.acceptance_prior) / 2 for label, rate in (learned or {}).items()}
        controller = DraftController(row_sources, costs, Acceptance(config.acceptance_prior, start))
        rows.append(_Row(r, request, row_config,
                         GenerationStats(prefill_tokens=len(request.prompt_ids), speculation=speculation),
                         torch.Generator().manual_seed(seed % (1 << 64)), controller, started))
        if row_config.processes:
            rows[-1].processors = sampling.logits_processors(row_config)
            rows[-1].history = list(request.history if request.history is not None else request.prompt_ids)
        if row_config.budget == "complete":
            _check_budget(rows[-1])
    if all(row.done for row in rows):  # every budget refused: no pass at all
        return [RowOutcome(row.tokens, row.finish, row.stats, row.error) for row in rows]

    with torch.no_grad():
        first = backend.prefill([list(row.request.prompt_ids) for row in rows])
        words = masker.words(len(rows))
        for i, row in enumerate(rows):
            row.stats.forward_passes += 1
            masker.fill(words, i, row.request.matcher)
            if row.processors:  # raw logits, before the mask (as transformers orders them)
                sampling.process_logits(row.processors, first[i:i + 1], [row.history + row.tokens])
            if row.request.banned_first:
                banned = torch.tensor(sorted(row.request.banned_first), device=first.device)
                first[i, banned] = float("-inf")
        masked, alive = masker.apply(first, words)
        choices = masked.argmax(dim=1).tolist()
        for i, row in enumerate(rows):
            if not row.done:
                _take(row, masked[i], bool(alive[i]), choices[i])
        for step in itertools.count():
            step_started = time.perf_counter()
            live = [row for row in rows if not row.done and _begin_step(row, vocab)]
            for row in rows:
                _report(row)
            ended = [row for row in rows if row.done and not row.released]
            for row in ended:
                row.released = True
            if ended and release is not None:
                release([row.index for row in ended])
            if not live:
                break
            view = costs.at(len(live))
            for row in live:
                budget = min(config.max_draft, row.config.max_new_tokens - len(row.tokens))
                row.draft = Draft((), "")
                if budget > 0 and speculate:
                    # a draft model runs one pass per row: in a batch of several rows it never pays
                    row.draft = row.controller.propose(row.request.matcher, row.tokens, budget, view,
                                                       cheap_only=len(live) > 1)
            width = costs.best_width([row.controller.expected(row.draft) for row in live], len(live))
            words = masker.words(sum(1 + min(len(row.draft), width - 1) for row in live))
            at = 0
            for row in live:
                row.draft = row.draft.cut(min(len(row.draft), width - 1))
                at = _walk(row, masker, words, at)
            feeds = [[] for _ in rows]
            for row in live:
                feeds[row.index] = [row.next_token, *row.draft.tokens]
            pass_started = time.perf_counter()
            outs = backend.extend(feeds)
            pass_seconds = time.perf_counter() - pass_started
            for row in live:
                if row.processors:
                    # each position sees the prefix step-by-step decoding would see there (row.tokens
                    # already ends with the fed token), so drafting stays lossless under processors
                    prefix = row.history + row.tokens
                    sampling.process_logits(row.processors, outs[row.index],
                                            [prefix + list(row.draft.tokens[:j]) for j in range(len(row.draft) + 1)])
            masked, alive = masker.apply(torch.cat([outs[row.index] for row in live]), words)
            # every position's greedy choice in one call (argmax: the first of equal maxima)
            choices = masked.argmax(dim=1).tolist() if any(row.config.greedy for row in live) else None
            alive_list = alive.tolist()
            rollbacks = [0] * len(rows)
            at = 0
            kept = {}
            for row in live:
                positions = len(row.draft) + 1
                kept[row.index] = _verify(row, masked[at:at + positions], alive_list[at:at + positions],
                                          choices[at:at + positions] if choices is not None else None)
                rollbacks[row.index] = positions - 1 - kept[row.index]
                at += positions
            backend.rollback(rollbacks)  # with no rollback it still trims sliding-window layers
            overhead = time.perf_counter() - step_started - pass_seconds
            fed = max(len(feed) for feed in feeds)
            # The surface learns what a step of this width costs whole: the pass, and the masks
            # and verification that grow with the positions fed.
            costs.observe(fed, time.perf_counter() - pass_started, rows=len(live))
            for row in live:
                row.stats.steps.append(StepStats(step=step, rows=len(live), width=fed, drafted=len(row.draft),
                                                 accepted=kept[row.index], pass_seconds=pass_seconds,
                                                 overhead_seconds=overhead))
    for row in rows:
        if learned is not None:
            learned.update(row.controller.acceptance.rates)
        if row.error is not None:  # its stats were closed when it ended
            continue
        row.stats.new_tokens = len(row.tokens)
        row.stats.seconds = time.perf_counter() - row.started if not row.stats.seconds else row.stats.seconds
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


def _row_config(batch: DecodeConfig, own: DecodeConfig | None) -> DecodeConfig:
    """The batch's drafting options with the row's own budget (and budget rule), sampling and
    processing options."""
    if own is None:
        return batch
    if not isinstance(own, DecodeConfig):
        raise OptionError(f"a row's config must be a DecodeConfig, not {type(own).__name__}")
    return replace(batch, max_new_tokens=own.max_new_tokens, temperature=own.temperature, top_p=own.top_p,
                   top_k=own.top_k, seed=own.seed, repetition_penalty=own.repetition_penalty,
                   no_repeat_ngram_size=own.no_repeat_ngram_size, logits_processors=own.logits_processors,
                   budget=own.budget)


def _for_row(source: DraftSource, prompt_ids: Sequence[int], config: DecodeConfig) -> DraftSource:
    for_row = getattr(source, "for_row", None)
    return for_row(prompt_ids, config) if for_row is not None else source


def _check_budget(row: _Row) -> None:
    """Turn the budget rule on for the row, or end it at once when no complete output fits its
    budget; a grammar whose shortest completion is not found within the search's limit keeps
    ``budget="raise"``'s behaviour (said in the log)."""
    needed = row.request.matcher.completion_length()
    if needed is None:
        import logging

        logging.getLogger(__name__).warning(
            "budget='complete': no completion found within the search limit from this grammar's "
            "start; decoding as budget='raise'")
        return
    if needed > row.config.max_new_tokens:
        _end(row, BudgetTooSmallError(
            f"max_new_tokens={row.config.max_new_tokens} is below the {needed} tokens the shortest complete "
            "output needs; raise it (or loosen the grammar)", needed=needed,
            max_new_tokens=row.config.max_new_tokens))
        return
    row.budgeted = True


def _end(row: _Row, error: DecodingError | None = None, finish: Finish | None = None) -> None:
    if row.cut and finish in ("eos", "grammar"):
        finish = "length"
    row.error, row.finish = error, finish
    row.stats.new_tokens = len(row.tokens)
    row.stats.seconds = time.perf_counter() - row.started


def _take(row: _Row, masked: "torch.Tensor", alive: bool, greedy: int) -> "int | None":
    """Choose the row's next token from masked logits (``alive``: some token is allowed;
    ``greedy``: their argmax); a dead end ends the row with a :class:`DecodingError`."""
    from structgen.decoding import sampling

    if not alive:
        matcher = row.request.matcher
        _end(row, DecodingError("the grammar allows no token here: " + (matcher.last_rejection or "dead end")))
        return None
    if _none_left(row, masked):
        _end(row, DecodingError(
            "the logits processing (repetition_penalty, no_repeat_ngram_size, logits_processors) left no token "
            "the grammar allows here (e.g. forced text that repeats an n-gram of the prompt); loosen it"))
        return None
    if row.config.greedy:
        first = greedy
    else:
        probs = sampling.target_probs(masked, temperature=row.config.temperature, top_k=row.config.top_k,
                                      top_p=row.config.top_p)
        first = sampling.sample_token(probs, row.generator)
    row.next_token = _within_budget(row, masked, first)
    return row.next_token


def _within_budget(row: _Row, masked: "torch.Tensor", first: int) -> "int | None":
    """``first`` (the model's choice at the row's position), or under the budget rule the
    choice among the tokens that fit (:mod:`structgen.decoding.budget`); ends the row when no
    allowed token fits."""
    from structgen.decoding import budget, sampling

    if not row.budgeted:
        return first
    matcher, left = row.request.matcher, row.left
    if row.config.greedy:
        token = budget.greedy_within(matcher, masked, first, left)
    else:
        probs = sampling.target_probs(masked, temperature=row.config.temperature, top_k=row.config.top_k,
                                      top_p=row.config.top_p)
        token = budget.sample_within(matcher, probs, first, left, row.generator)
        if token is None:  # the sampling cut-offs left none that fits: the best that does
            token = budget.greedy_within(matcher, masked, int(masked.argmax()), left)
    if token is None:
        _end(row, DecodingError(
            f"no token the grammar and the logits processing allow here leaves a complete output within "
            f"the {left} tokens left of max_new_tokens={row.config.max_new_tokens}; loosen the processing "
            "or raise the budget"))
        return None
    row.cut = row.cut or token != first
    return token


def _begin_step(row: _Row, vocab: Vocabulary) -> bool:
    """Take the row's chosen token; False when that ended the row (``row.finish`` or
    ``row.error`` set)."""
    matcher, tokens, config = row.request.matcher, row.tokens, row.config
    token = row.next_token
    assert token is not None
    if token in vocab.eos_ids:
        _end(row, finish="eos")
        return False
    if len(tokens) >= config.max_new_tokens:
        _end(row, IncompleteGenerationError(
            f"max_new_tokens={config.max_new_tokens} ran out before the value was complete; raise it "
            "or tighten the schema (e.g. maxLength)",
            partial_text=vocab.token_bytes(tokens).decode("utf-8", "replace"),
            token_ids=list(tokens), stats=row.stats))
        return False
    if not matcher.advance(token):
        _end(row, DecodingError(f"internal error: the masked choice was refused: {matcher.last_rejection}"))
        return False
    tokens.append(token)
    if matcher.is_finished():  # only EOS could follow: no pass needed to choose it
        _end(row, finish="grammar")
        return False
    if row.request.stop is not None and matcher.can_end() and row.request.stop(tokens):
        _end(row, finish="stop")
        return False
    return True


def _fits_drafted(row: _Row, i: int) -> bool:
    """Whether the row's draft token ``i`` (its matcher walked past it) fits the budget at its
    position, as :func:`structgen.decoding.budget.fits` would judge it there."""
    proposed = row.draft.tokens[i]
    if proposed in row.request.matcher.vocabulary.eos_ids:
        return True
    needed = row.request.matcher.completion_length(back=row.walked - i - 1)
    return needed is not None and needed <= row.left - i - 1


def _none_left(row: _Row, masked: "torch.Tensor") -> bool:
    """Whether the row's logits processors set every token the grammar allows to ``-inf`` (the
    mask alone cannot tell: its ``alive`` counts only the grammar)."""
    return bool(row.processors) and not bool(masked.isfinite().any())


def _report(row: _Row) -> None:
    """Hand the row's tokens accepted since the last report to its ``on_tokens``."""
    if row.request.on_tokens is not None and len(row.tokens) > row.reported:
        new = row.tokens[row.reported:]
        row.reported = len(row.tokens)
        row.request.on_tokens(new)


def _walk(row: _Row, masker: Masker, words: "np.ndarray", at: int) -> int:
    """Fill the masks of the row's positions in this pass (after its token, then after each
    draft token) from ``words[at]`` on, advancing its matcher along the draft; returns the next
    free index. A draft token the matcher refuses leaves the positions after it unmasked (they
    cannot be reached: the model's masked choice there is never that token)."""
    matcher = row.request.matcher
    masker.fill(words, at, matcher)
    row.walked = 0
    for i, token in enumerate(row.draft.tokens):
        if not matcher.advance(token):
            break
        row.walked += 1
        masker.fill(words, at + i + 1, matcher)
    return at + len(row.draft) + 1


def _verify(row: _Row, masked: "torch.Tensor", alive: list[bool], choices: list[int] | None) -> int:
    """Judge the row's draft against the pass's masked logits (one row per fed position, the
    matcher already walked along the draft; ``choices``: their argmax); keep what passes,
    choose the next token at the first refused position (or after the draft), and return how
    many draft tokens were kept."""
    from structgen.decoding import sampling

    matcher, tokens, draft, config = row.request.matcher, row.tokens, row.draft, row.config
    row.stats.forward_passes += 1
    row.stats.count_pass(draft.source if draft.tokens else "none")
    kept, choice = 0, None
    greedy = choices if config.greedy else None
    for i, proposed in enumerate(draft.tokens[: row.walked]):
        if _none_left(row, masked[i]):  # step-by-step fails here: so does this (in _take, below)
            choice = None
            break
        if greedy is not None:
            ok, choice = greedy[i] == proposed, greedy[i]
            # under the budget the proposal must also fit (else step-by-step chooses another)
            ok = ok and (not row.budgeted or _fits_drafted(row, i))
        elif row.budgeted:
            # the draw step-by-step decoding makes here: kept if it is the proposal and fits,
            # else the choice after the refusal starts from it (exact, and token-identical)
            probs = sampling.target_probs(masked[i], temperature=config.temperature, top_k=config.top_k,
                                          top_p=config.top_p)
            choice = sampling.sample_token(probs, row.generator)
            ok = choice == proposed and _fits_drafted(row, i)
        else:
            probs = sampling.target_probs(masked[i], temperature=config.temperature, top_k=config.top_k,
                                          top_p=config.top_p)
            q = draft.distribution(i)
            if q is None:
                ok, choice = sampling.verify_draft(probs, proposed, row.generator)
            else:
                ok, choice = sampling.verify_sampled_draft(probs, q.to(probs.device), proposed, row.generator)
        if not ok:
            break
        kept += 1
    refused = kept < len(draft)
    matcher.rollback(row.walked - kept)
    tokens.extend(draft.tokens[:kept])
    if draft.tokens:
        labels = [draft.label(i) for i in range(len(draft))]
        for label in dict.fromkeys(labels):
            row.stats.count_draft(label, drafted=labels.count(label), accepted=labels[:kept].count(label),
                                  refused=refused and labels[kept] == label)
        row.controller.record(draft, kept, choice if refused else None)
    if kept and matcher.is_finished():
        _end(row, finish="grammar")
    elif kept and row.request.stop is not None and matcher.can_end() and row.request.stop(tokens):
        _end(row, finish="stop")
    elif refused and kept < row.walked and choice is not None:
        if not alive[kept]:
            _end(row, DecodingError("the grammar allows no token here: " + (matcher.last_rejection or "dead end")))
        else:  # the model's own token where the draft was refused (the budget may change it)
            row.next_token = _within_budget(row, masked[kept], choice)
    else:
        _take(row, masked[kept], alive[kept], choices[kept] if choices is not None else -1)
    return kept
