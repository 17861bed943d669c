"""The pieces a conjunction is made of: subschemas (:class:`Part`) and the atoms ``not`` leaves.

Why: merging, negation, ``oneOf`` and lowering all pass these around; a *term* is a tuple of
atoms that all hold (one alternative of a disjunctive normal form), a :class:`Conj` the
subschemas that apply at one place (a property's value, the items), kept unmerged until that
place is compiled so recursion needs no depth limit.

Example
-------
>>> c = conj([Part(True, "/items"), Part({"type": "string"}, "/allOf/0/items")])
>>> c.key, c.schema()
(('/allOf/0/items',), {'type': 'string'})
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from structgen.frontends.json_schema.values import kind

__all__ = ["Part", "Conj", "conj", "NotType", "NotValues", "TypeCheck", "NotString", "NotMultiple", "Absent",
           "SomeMember", "PendingOneOf", "Atom", "Term"]


@dataclass(frozen=True)
class Part:
    """A subschema of the document and its JSON pointer."""

    schema: Any
    pointer: str
    #: made by the merger (a rewrite of if/then/else, dependencies or a negation), not written
    #: in the document: its properties give the object no key order of their own
    synthetic: bool = False


@dataclass(frozen=True)
class Conj:
    """Subschemas that all apply at one place (no parts: any value)."""

    parts: tuple[Part, ...] = ()

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.pointer for p in self.parts))

    def schema(self) -> Any:
        """As one JSON schema (for reading): the subschema, or an ``allOf`` of them."""
        schemas = [p.schema for p in self.parts]
        return True if not schemas else schemas[0] if len(schemas) == 1 else {"allOf": schemas}


def conj(parts: list[Part]) -> Conj:
    """The parts, less those that constrain nothing (``true``, ``{}``) when others do."""
    kept = [p for p in parts if p.schema is not True and p.schema != {}]
    return Conj(tuple(kept or parts[:1]))


@dataclass(frozen=True)
class NotType:
    """The value's kind is none of ``kinds`` (``not: {type: ...}``)."""

    kinds: frozenset[str]
    pointer: str  # of the type keyword inside not


@dataclass(frozen=True)
class NotValues:
    """The value is none of ``values`` (``not`` over ``enum``/``const``)."""

    values: tuple[Any, ...]
    pointer: str  # of the enum/const keyword inside not


@dataclass(frozen=True)
class TypeCheck:
    """A checker for a subschema that only states ``type`` (python-jsonschema's interface)."""

    kinds: frozenset[str]

    def is_valid(self, value: Any) -> bool:
        return kind(value) in self.kinds


@dataclass(frozen=True)
class NotString:
    """A string must not match a pattern or format."""

    kind: str  # "pattern" or "format"
    value: str
    pointer: str  # of the keyword inside not


@dataclass(frozen=True)
class NotMultiple:
    """A number must not be a multiple of ``divisor``."""

    divisor: Fraction
    pointer: str  # of the multipleOf keyword inside not


@dataclass(frozen=True)
class Absent:
    """An object must not have ``key`` (if it is an object)."""

    key: str
    pointer: str


@dataclass(frozen=True)
class SomeMember:
    """An object must have a member whose key is in ``keys`` and whose value ``value`` accepts
    (``None``: any value): what ``not`` over ``additionalProperties``, ``patternProperties`` or
    ``propertyNames`` leaves. ``keys`` reads ``("pattern", p)``: keys ``p`` matches;
    ``("extra", names, patterns)``: keys neither named nor matched; ``("names", part)``: keys
    the ``propertyNames`` schema ``part`` rejects."""

    keys: tuple
    value: Part | None
    pointer: str  # of the keyword inside not


@dataclass(frozen=True)
class PendingOneOf:
    """A ``oneOf`` not yet expanded (its branches are tried when the term is resolved)."""

    part: Part  # the schema holding oneOf
    stack: tuple[str, ...]


Atom = Any  # Part | NotType | NotValues | NotString | NotMultiple | Absent | SomeMember | PendingOneOf
Term = tuple  # tuple[Atom, ...]: a conjunction
