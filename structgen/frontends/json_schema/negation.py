"""``not`` keyword by keyword: each negation exact, as alternatives (lists of terms), or none.

Why: ``not (A and B)`` is ``(not A) or (not B)``, so the negation of a schema is the union of
its keywords' negations; each keyword's ``negate`` (named by its registry entry in
:mod:`structgen.frontends.json_schema.keywords`) returns *pieces*, each a thunk giving terms,
or ``None`` when its negation is not exact (then ``not`` is refused, or dropped under
``lenient``). A keyword of one type holds for every value of the others, so its negation is
values of its type that break it: ``not {minLength: 3}`` is a string of at most 2 characters.
The recursion (``not`` of ``not``, of a ``$ref``, of ``allOf`` branches) goes back through the
:class:`Negating` the merger passes in.

Example
-------
>>> from structgen.frontends.json_schema.keywords import merge
>>> [m.schema() for m in merge([{"not": {"minLength": 3}}])]
[{'type': 'string', 'maxLength': 2}]
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from structgen.errors import SchemaError
from structgen.frontends.json_schema.numbers import read_bounds
from structgen.frontends.json_schema.refs import resolve_ref
from structgen.frontends.json_schema.terms import (Absent, NotMultiple, NotString, NotType, NotValues, Part,
                                                   SomeMember, Term)
from structgen.frontends.json_schema.values import (contains_counts, enum_values, holds_array, join_pointer,
                                                    kinds_of, schema_list)

__all__ = ["Negating", "Piece", "Negate", "negate_type", "negate_values", "negate_not", "negate_ref",
           "negate_all_of", "negate_any_of", "negate_one_of", "flip", "negate_required", "negate_string",
           "negate_contains", "negate_multiple_of", "negate_members", "negate_items", "negate_properties",
           "negate_dependencies", "negated_with"]

Piece = Callable[[], list[Term]]


class Negating(Protocol):
    """What a keyword's negation needs from the merger: the forms of subschemas, and refusal."""

    root: Any

    def dnf(self, part: Part, stack: tuple[str, ...]) -> list[Term]: ...

    def negate(self, part: Part, stack: tuple[str, ...], keyword: str = "not") -> list[Term]: ...

    def product(self, terms: list[Term], factor: list[Term], keyword: str, pointer: str) -> list[Term]: ...

    def refuse(self, keyword: str, pointer: str, hint: str) -> None: ...


#: ``negate(ng, schema, ptr, kw, stack, keyword)``: pieces, or None (not exact here)
Negate = Callable[[Negating, dict, str, str, tuple, str], "list[Piece] | None"]


def negated_with(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """A companion keyword (``minContains`` beside ``contains``): negated with its keyword."""
    return []


def negate_type(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    kinds = kinds_of(schema[kw], join_pointer(ptr, kw))
    return [lambda: [(NotType(kinds, join_pointer(ptr, kw)),)]]


def negate_values(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """``enum``/``const``: scalars (and arrays) excluded as values; an object value as the
    negation of the schema that matches exactly it (its keys required, each value ``const``,
    no other key)."""
    values, where = tuple(enum_values(schema, kw, ptr)), join_pointer(ptr, kw)

    def none_of() -> list[Term]:
        plain = tuple(v for v in values if not isinstance(v, dict))
        terms: list[Term] = [(NotValues(plain, where),)] if plain else [()]
        for i, value in enumerate(v for v in values if isinstance(v, dict)):
            if holds_array(value):  # its exclusion would need an array's: not exact
                ng.refuse(keyword, where, "excluding an object value that holds an array is not supported")
                continue
            exactly = Part({"type": "object", "required": list(value), "additionalProperties": False,
                            "properties": {k: {"const": x} for k, x in value.items()}}, f"{where}~{i}", True)
            terms = ng.product(terms, ng.negate(exactly, stack, keyword), "not", where)
        return terms
    return [none_of]


def negate_not(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    return [lambda: ng.dnf(Part(schema[kw], join_pointer(ptr, kw)), stack)]


def negate_ref(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    return [lambda: ng.negate(resolve_ref(ng.root, schema[kw], ptr), stack, keyword)]


def negate_all_of(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    return [lambda i=i, sub=sub: ng.negate(Part(sub, join_pointer(ptr, kw, i)), stack, keyword)
            for i, sub in enumerate(schema_list(schema, kw, ptr))]


def negate_any_of(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """not (A or B) = (not A) and (not B); for ``oneOf`` also: two (or more) at once."""
    branches = [Part(sub, join_pointer(ptr, kw, i)) for i, sub in enumerate(schema_list(schema, kw, ptr))]

    def none_of() -> list[Term]:
        terms: list[Term] = [()]
        for branch in branches:
            terms = ng.product(terms, ng.negate(branch, stack, keyword), "not", ptr)
        return terms
    return [none_of]


def negate_one_of(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """Not exactly one: none, or two (or more) at once."""
    branches = [Part(sub, join_pointer(ptr, kw, i)) for i, sub in enumerate(schema_list(schema, kw, ptr))]
    return negate_any_of(ng, schema, ptr, kw, stack, keyword) + [
        lambda a=a, b=b: ng.product(ng.dnf(a, stack), ng.dnf(b, stack), "not", ptr)
        for i, a in enumerate(branches) for b in branches[i + 1:]]


def flip(kind: str, flipped: str, shift: int) -> Negate:
    """The negation of a bound: values of ``kind`` under the ``flipped`` bound, moved by
    ``shift`` (``not {minimum: 5}`` is a number with ``exclusiveMaximum: 5``); not exact for the
    draft-4 boolean ``exclusiveMinimum``/``exclusiveMaximum``."""
    def negate(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece] | None:
        bound, where = schema[kw], join_pointer(ptr, kw)
        if isinstance(bound, bool):
            return None
        if not isinstance(bound, (int, float)):
            raise SchemaError(f"{kw} must be a number", pointer=where)
        if shift and bound + shift < 0:  # not {minLength: 0}: no string at all
            return []
        part = Part({"type": kind, flipped: bound + shift}, where + "~not", True)
        return [lambda: [(part,)]]
    negate.__name__ = f"flip_{kind}_{flipped}"
    return negate


def negate_required(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    keys, where = schema[kw], join_pointer(ptr, kw)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise SchemaError("required must be an array of strings", pointer=where)
    obj = Part({"type": "object"}, where + "~not", True)
    return [lambda: [(obj, Absent(k, where)) for k in keys]]


def negate_string(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece] | None:
    """``pattern``/``format``: a string the automaton rejects (the complement is exact)."""
    if not isinstance(schema[kw], str):
        return None
    where = join_pointer(ptr, kw)
    string, avoided = Part({"type": "string"}, where + "~not", True), NotString(kw, schema[kw], where)
    return [lambda: [(string, avoided)]]


def negate_contains(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """Fewer matching items than ``minContains``, or more than ``maxContains``."""
    lo, hi = contains_counts(schema, ptr)
    sub, where = schema[kw], join_pointer(ptr, kw)
    pieces: list[Piece] = []
    if lo == 1:  # none: every item breaks it
        few = Part({"type": "array", "items": {"not": sub}}, where + "~not", True)
        pieces.append(lambda: [(few,)])
    elif lo > 1:
        few = Part({"type": "array", "contains": sub, "minContains": 0, "maxContains": lo - 1}, where + "~not", True)
        pieces.append(lambda: [(few,)])
    if hi is not None:
        many = Part({"type": "array", "contains": sub, "minContains": hi + 1}, where + "~many", True)
        pieces.append(lambda: [(many,)])
    return pieces


def negate_multiple_of(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """A number that is no multiple (spelt without exponent)."""
    _, divisor = read_bounds({kw: schema[kw]}, ptr)
    where = join_pointer(ptr, kw)
    number = Part({"type": "number"}, where + "~not", True)
    return [lambda: [(number, NotMultiple(divisor, where))]]


def negate_members(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """``additionalProperties``, ``patternProperties``, ``propertyNames``: an object with some
    member that breaks it."""
    where = join_pointer(ptr, kw)
    obj = Part({"type": "object"}, where + "~not", True)
    table = schema[kw]
    found: list[SomeMember] = []
    if kw == "propertyNames":  # some key the names schema rejects, any value
        found.append(SomeMember(("names", Part(table, where)), None, where))
    elif kw == "additionalProperties":  # some key neither named nor matched, its value not A
        if not isinstance(table, (bool, dict)):
            raise SchemaError("additionalProperties must be a schema", pointer=where)
        props, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        if not isinstance(props, dict) or not isinstance(patterns, dict):
            raise SchemaError("properties and patternProperties must be objects", pointer=where)
        if table is not True:
            value = None if table is False else Part({"not": table}, where + "~value", True)
            found.append(SomeMember(("extra", tuple(props), tuple(patterns)), value, where))
    else:  # patternProperties: not (every key matching p has a value in S, for each p)
        if not isinstance(table, dict):
            raise SchemaError("patternProperties must be an object", pointer=where)
        for pattern, sub in table.items():
            at = join_pointer(where, pattern)
            if sub is not True:
                value = None if sub is False else Part({"not": sub}, at + "~value", True)
                found.append(SomeMember(("pattern", pattern), value, at))
    return [lambda some=some: [(obj, some)] for some in found]


def negate_items(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece] | None:
    """``items`` of one schema (no ``prefixItems``): some item breaks it, as ``contains``."""
    if not isinstance(schema[kw], (dict, bool)) or "prefixItems" in schema:
        return None
    some = Part({"type": "array", "contains": {"not": schema[kw]}}, join_pointer(ptr, kw) + "~not", True)
    return [lambda: [(some,)]]


def negate_properties(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """Some listed key present whose value is ``not`` its schema (negated where it is compiled)."""
    where = join_pointer(ptr, kw)
    if not isinstance(schema[kw], dict):
        raise SchemaError("properties must be an object", pointer=where)
    pieces: list[Piece] = []
    for key, sub in schema[kw].items():
        broken = Part({"type": "object", "required": [key], "properties": {key: {"not": sub}}},
                      join_pointer(where, key) + "~not", True)
        pieces.append(lambda broken=broken: [(broken,)])
    return pieces


def negate_dependencies(ng: Negating, schema: dict, ptr: str, kw: str, stack: tuple, keyword: str) -> list[Piece]:
    """``dependencies``/``dependentRequired``/``dependentSchemas``: an object with some key
    present whose required keys are not all there, or whose schema breaks."""
    table = schema[kw]
    if not isinstance(table, dict):
        raise SchemaError(f"{kw} must be an object", pointer=join_pointer(ptr, kw))
    pieces: list[Piece] = []
    for key, need in table.items():
        where = join_pointer(ptr, kw, key)
        present = Part({"type": "object", "required": [key]}, where + "~not", True)
        if isinstance(need, list):
            if kw == "dependentSchemas" or not all(isinstance(k, str) for k in need):
                raise SchemaError(f"{kw} values must be {'schemas' if kw == 'dependentSchemas' else 'arrays of strings'}",
                                  pointer=where)
            pieces.append(lambda present=present, need=need, where=where, key=key:
                          [(present, Absent(k, where)) for k in need if k != key])
        else:
            if kw == "dependentRequired":
                raise SchemaError("dependentRequired values must be arrays of strings", pointer=where)
            pieces.append(lambda present=present, need=need, where=where: [
                (present,) + t for t in ng.negate(Part(need, where), stack, keyword)])
    return pieces
