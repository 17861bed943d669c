"""What the lowering of one kind (objects, arrays, strings, numbers) needs from the converter.

Why a protocol: :mod:`~structgen.frontends.json_schema.objects`,
:mod:`~structgen.frontends.json_schema.arrays` and :mod:`~structgen.frontends.json_schema.scalars`
build rules for the converter of :mod:`~structgen.frontends.json_schema.translate` without
importing it (no cycle): it hands itself in as a :class:`Lowering`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from structgen.core.ir import Expr, Ref
from structgen.frontends.json_schema.facts import Merged
from structgen.frontends.json_schema.terms import Conj

__all__ = ["Lowering", "Alternatives", "Relaxed"]


@dataclass(frozen=True)
class Relaxed:
    """A constraint left unchecked: the keyword, where, and why. ``lenient=True`` drops what
    cannot be honoured; a custom ``format`` is never checked (the spec makes it an annotation)."""

    keyword: str
    pointer: str
    reason: str


class Alternatives(Protocol):
    """The merger as the lowering sees it: a place's merged alternatives."""

    def alternatives(self, conj: Conj) -> list[Merged]: ...


class Lowering(Protocol):
    """Rule plumbing and options of one translation (see ``translate._Converter``)."""

    canonical: bool  # one spelling per value (generation)
    strict: bool  # objects closed unless the schema opens them
    lenient: bool  # drop what cannot be honoured (recorded)
    integral_spellings: bool  # an integer may be spelt 1.0 (drafts 6+)
    python: bool  # true, false and null spelt True, False and None (Python literals)
    rules: dict[str, Expr]
    merger: Alternatives

    @property
    def ws(self) -> Expr: ...

    @property
    def comma(self) -> Expr: ...

    @property
    def colon(self) -> Expr: ...

    def rule(self, name: str, body: Expr, *, mergeable: bool = False) -> Ref: ...

    def keyword(self, value: "bool | None") -> Expr: ...

    def uid(self) -> int: ...

    def convert(self, schema: Any, pointer: str) -> Ref: ...

    def position(self, conj: Conj) -> Ref: ...

    def position_or_none(self, conj: Conj) -> Ref | None: ...

    def primitive(self, name: str) -> Ref: ...

    def string_rule(self, lo: int, hi: int | None) -> Ref: ...

    def key_literal(self, key: str) -> Expr: ...

    def refuse(self, keyword: str, pointer: str, hint: str) -> None: ...

    def note(self, relaxed: Relaxed) -> None: ...
