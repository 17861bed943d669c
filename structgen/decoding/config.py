"""The options of one decoding run, frozen and checked once.

Example
-------
>>> from structgen.decoding.config import DecodeConfig
>>> DecodeConfig(temperature=0.7, seed=1).greedy
False
>>> DecodeConfig(max_new_tokens=0)
Traceback (most recent call last):
...
structgen.errors.OptionError: max_new_tokens must be an int >= 1, not 0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from structgen.errors import OptionError

__all__ = ["BUDGETS", "DRAFT_SOURCES", "DecodeConfig", "MAX_DRAFT"]

#: Longest draft proposed at once.
MAX_DRAFT = 16

#: What ``budget`` may be: keep a complete output within ``max_new_tokens``, or raise when it runs out.
BUDGETS = ("complete", "raise")
#: The draft sources by name: the text the grammar forces, values copied from the prompt, a
#: draft model's guesses (when the generator has one).
DRAFT_SOURCES = ("forced", "lookup", "model")


@dataclass(frozen=True)
class DecodeConfig:
    """How to decode: budget, sampling rule and drafting, validated on construction.

    Parameters
    ----------
    max_new_tokens
        Token budget (the final end-of-sequence token excluded); at least 1.
    temperature
        ``0`` is greedy (argmax of the masked logits); above it, sampling from
        ``softmax(masked / temperature)``.
    top_p, top_k
        Nucleus mass in ``(0, 1]`` (``1`` = off) and top-k (``0`` = off), applied after the
        grammar mask; used only when sampling.
    seed
        Seed of the sampling generator (``None``: a fresh random seed); the global torch RNG is
        neither used nor reseeded.
    speculate
        ``True``: draft from every source there is (the text the grammar forces, values copied
        from the prompt, a draft model if the generator has one) and verify drafts losslessly;
        a collection of names from :data:`DRAFT_SOURCES` (e.g. ``("forced",)``): those sources
        only; ``False``: one pass per token, the reference drafting reproduces.
    acceptance_prior
        Expected acceptance of a draft token before any was judged, in ``[0, 1]``; it decides
        draft lengths with the pass-cost curve and then follows the measured acceptance.
    max_draft
        Longest draft proposed at once (``0``: none).
    repetition_penalty
        transformers' ``repetition_penalty`` (``1`` = off, else ``> 0``): every token already in
        the prompt or the output has its logit divided by it when positive, multiplied when
        negative. The prompt counts, as in transformers (its ``input_ids`` are prompt + output).
    no_repeat_ngram_size
        transformers' ``no_repeat_ngram_size`` (``0`` = off): a token that would repeat an
        n-gram of this size already in the prompt + output is banned.
    logits_processors
        Callables called as transformers ``LogitsProcessor`` objects: ``processor(input_ids, scores)``
        with ``input_ids`` of shape ``(1, prefix length)`` (prompt + output so far) and ``scores``
        of shape ``(1, vocabulary)``, returning the new scores. Applied after the two options
        above, in order.

    budget
        What happens as ``max_new_tokens`` runs out. ``"complete"`` (default): from each
        position only tokens that leave a complete output within the tokens left are chosen
        (the shortest completion, counted in this vocabulary's tokens; see
        :meth:`~structgen.engine.matcher.Matcher.completion_length`), so the output is complete
        and valid when the budget ends; values may be cut short (a string closed early, an
        array ended), and ``finish_reason`` is then ``"length"``. A budget below the grammar's
        shortest completion is refused before decoding (``BudgetTooSmallError``). ``"raise"``:
        the model's choices are left alone and a budget that runs out raises
        ``IncompleteGenerationError`` with the partial output.
    reasoning
        Let the model think before its answer: ``True`` reads the thinking markers from the
        chat template (``<think>``/``</think>``), a pair of strings gives them; ``False``
        (default): the answer starts at once. The thinking is free text that never holds the
        end marker; the answer follows it under the grammar (:mod:`structgen.tasks.reasoning`).
    thinking_budget
        The most tokens of thinking (``None``: no limit but ``max_new_tokens``, which counts
        the thinking too); when it is spent the end marker is forced, whole tokens only.

    These three act on each position's raw logits before the grammar mask, at every position
    fed, drafted ones included (each sees the prefix step-by-step decoding would see there), so
    drafting still reproduces ``speculate=False`` under them. Where they leave no token the
    grammar allows, decoding ends with a ``DecodingError``. ``logits_processors`` is compared
    but not hashed (callables need not be hashable).

    Raises
    ------
    OptionError
        A value is out of its range; the message names it.
    """

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    speculate: bool | tuple[str, ...] = True
    acceptance_prior: float = 0.9
    max_draft: int = MAX_DRAFT
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    logits_processors: "tuple[Callable[[Any, Any], Any], ...]" = field(default=(), hash=False)
    budget: str = "complete"
    reasoning: "bool | tuple[str, str]" = False
    thinking_budget: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reasoning, bool):
            pair = self.reasoning
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(m, str) and m for m in pair)):
                raise OptionError(f"reasoning must be True, False or a (start, end) pair of marker strings, "
                                  f"not {pair!r:.80}")
            object.__setattr__(self, "reasoning", tuple(pair))
        if self.thinking_budget is not None:
            _check_int("thinking_budget", self.thinking_budget, 0, " (None = no limit)")
            if self.reasoning is False:
                raise OptionError("thinking_budget needs reasoning=True (or a pair of markers)")
        _check_int("max_new_tokens", self.max_new_tokens, 1)
        _check_int("top_k", self.top_k, 0, " (0 = off)")
        _check_int("max_draft", self.max_draft, 0)
        if not _is_number(self.temperature) or not 0 <= self.temperature < math.inf:
            raise OptionError(f"temperature must be a finite number >= 0 (0 = greedy), not {self.temperature!r}")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise OptionError(f"top_p must be in (0, 1] (1 = off), not {self.top_p!r}")
        if not _is_number(self.acceptance_prior) or not 0 <= self.acceptance_prior <= 1:
            raise OptionError(f"acceptance_prior must be in [0, 1], not {self.acceptance_prior!r}")
        if not _is_number(self.repetition_penalty) or not 0 < self.repetition_penalty < math.inf:
            raise OptionError(f"repetition_penalty must be a finite number > 0 (1 = off), not {self.repetition_penalty!r}")
        if self.budget not in BUDGETS:
            raise OptionError(f"budget must be one of {', '.join(map(repr, BUDGETS))}, not {self.budget!r}")
        _check_int("no_repeat_ngram_size", self.no_repeat_ngram_size, 0, " (0 = off)")
        processors = self.logits_processors
        if isinstance(processors, (str, bytes)) or not hasattr(processors, "__iter__"):
            raise OptionError("logits_processors must be a sequence of callables (transformers LogitsProcessors; "
                              f"wrap one in a list), not {processors!r}")
        processors = tuple(processors)
        bad = [p for p in processors if not callable(p)]
        if bad:
            raise OptionError(f"logits_processors must be callables processor(input_ids, scores), not {bad[0]!r}")
        object.__setattr__(self, "logits_processors", processors)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not -(1 << 63) <= self.seed < 1 << 64):
            raise OptionError(f"seed must be an int from -2**63 to 2**64 - 1 (what a torch generator takes) "
                              f"or None, not {self.seed!r:.40}")
        if not isinstance(self.speculate, bool):
            names = self.speculate
            if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
                raise OptionError(f"speculate must be True, False or a collection of draft source names "
                                  f"{DRAFT_SOURCES}, not {names!r}")
            names = tuple(dict.fromkeys(names))
            unknown = [n for n in names if n not in DRAFT_SOURCES]
            if unknown:
                raise OptionError(f"speculate names unknown draft sources {unknown}; they are {DRAFT_SOURCES}")
            object.__setattr__(self, "speculate", names)

    @property
    def drafts(self) -> tuple[str, ...]:
        """The draft sources asked for (all of :data:`DRAFT_SOURCES` for ``speculate=True``)."""
        if self.speculate is True:
            return DRAFT_SOURCES
        return self.speculate or ()

    @property
    def processes(self) -> bool:
        """Whether any logits processing (repetition penalty, n-gram ban, processors) is on."""
        return self.repetition_penalty != 1 or self.no_repeat_ngram_size > 0 or bool(self.logits_processors)

    @property
    def greedy(self) -> bool:
        """Whether this is greedy decoding (``temperature == 0``)."""
        return self.temperature == 0


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(name: str, value: object, least: int, note: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise OptionError(f"{name} must be an int >= {least}{note}, not {value!r}")
