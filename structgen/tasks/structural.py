"""Structural tags on a model: a spec and a prompt in; the text, cut into its segments, out.

Example
-------
>>> spec = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
...     {"type": "const_string", "value": "Answer: "},
...     {"type": "json_schema", "json_schema": {"type": "integer"}}]}}
>>> r = Generator().structural(spec, "How many legs has a cat?")              # doctest: +SKIP
>>> r.text, [s.value for s in r.segments]                                     # doctest: +SKIP
('Answer: 4', ['Answer: ', 4])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from structgen.decoding.config import DecodeConfig
from structgen.errors import DecodingError, OptionError, ParseError
from structgen.frontends.structural_tag import Whitespace, read_structural_tag
from structgen.tasks.context import ModelContext
from structgen.tasks.jobs import Decode, Job
from structgen.tasks.results import Result
from structgen.tasks.segments import Segment, segments_of

__all__ = ["StructuralResult", "structural_job"]


@dataclass(kw_only=True)
class StructuralResult(Result):
    """Text under a structural tag; ``segments`` says which format wrote each part of it
    (:class:`~structgen.tasks.segments.Segment`: ``kind``, ``pointer``, ``text``, ``value``,
    ``tag``). ``values`` are the parsed JSON of the ``json_schema`` segments, in order."""

    segments: list[Segment] = field(default_factory=list)

    @property
    def values(self) -> list[Any]:
        return [s.value for s in self.segments if s.kind == "json_schema"]


def structural_job(context: ModelContext, spec: Any, prompt: Any, config: DecodeConfig, *,
                   whitespace: Whitespace = "compact", strict: bool = True,
                   raw: bool = False) -> Job[StructuralResult]:
    """:meth:`structgen.Generator.structural` as a job (:mod:`structgen.tasks.jobs`)."""
    if raw and not isinstance(prompt, str):
        raise OptionError("raw=True encodes a prompt string as it is; chat messages need the chat template")
    compiled = context.compiler.structural_tag(spec, whitespace=whitespace, strict=strict, canonical=True)
    tag = read_structural_tag(spec)
    ids = context.encode(prompt) if raw else context.chat_ids(prompt, thinking=bool(config.reasoning))
    tokens, finish, stats = yield Decode(compiled.matcher(), ids, config)
    text = context.text_of(tokens)
    try:
        segments = segments_of(tag, text)
    except ParseError as err:
        raise DecodingError(f"internal error: the output does not cut into the tag's segments ({err})") from err
    return StructuralResult(text=text, token_ids=tokens, finish_reason=finish, stats=stats, segments=segments)
