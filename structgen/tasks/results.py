"""One shape for every task's result: ``text``, ``token_ids``, ``finish_reason``, ``stats``.

Each task adds its own fields (:class:`JsonResult`'s ``value``, :class:`~structgen.SqlResult`'s
``rows``, :class:`~structgen.ToolCallResult`'s ``message``, ...). Results are built with
keywords.

Example
-------
>>> from structgen.decoding.stats import GenerationStats
>>> r = TextResult(text="yes", token_ids=[10407], finish_reason="grammar", stats=GenerationStats())
>>> isinstance(r, Result), r.text
(True, 'yes')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from structgen.decoding.stats import GenerationStats

__all__ = ["JsonResult", "Result", "TextResult"]


@dataclass(kw_only=True)
class Result:
    """What a generation produced.

    ``text`` and ``token_ids`` exclude the final end-of-sequence token; ``finish_reason`` is
    ``"eos"`` (the model ended), ``"grammar"`` (nothing else could follow), ``"stop"`` (the
    task's stop condition, e.g. a SQL query's ``;``) or a task's own reason; ``stats`` what it
    cost (:class:`~structgen.GenerationStats`).
    """

    text: str
    token_ids: list[int]
    finish_reason: str
    stats: GenerationStats
    #: with ``reasoning=``: the thinking before the answer (its markers left out); ``text`` and
    #: ``token_ids`` are the answer's
    reasoning: str | None = None
    #: tokens written inside the thinking (the end marker's forced tokens not counted)
    reasoning_tokens: int = 0


@dataclass(kw_only=True)
class JsonResult(Result):
    """One generated JSON value.

    ``value`` is the parsed JSON (an instance of the Pydantic model when one was given);
    ``finish_reason`` is ``"eos"`` or ``"grammar"``.
    """

    value: Any
    #: constraints left unchecked (lenient drops, custom formats); see CompiledGrammar.relaxed
    relaxed: tuple = ()
    #: with relaxed constraints the value may fail the schema: jsonschema's first error, if any
    validation_error: str | None = None


@dataclass(kw_only=True)
class TextResult(Result):
    """Text generated under a grammar or a regex; ``finish_reason`` is ``"eos"`` or ``"grammar"``."""
