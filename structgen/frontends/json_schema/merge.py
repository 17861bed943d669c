"""Combinators brought down to plain schemas: ``allOf``, keywords beside ``$ref`` or ``anyOf``,
``oneOf`` and ``not``, each either exact or refused.

A schema object is the conjunction of its keywords: ``$ref`` and ``allOf`` add conjuncts (the
2019-09+ reading of ``$ref``: one more assertion; a document declaring drafts 3 to 7, which
ignore keywords beside ``$ref``, has them refused), ``anyOf`` adds a disjunction, ``not`` a
negation. :meth:`Merger.alternatives` brings a conjunction of subschemas into disjunctive
normal form: a list of :class:`Merged` schemas, each one conjunction of plain keywords merged
exactly into one schema (their union is the conjunction):

- ``type``: the intersection of the type sets (``integer`` ∩ ``number`` is ``integer``);
- ``properties``: per key, the conjunction of every conjunct's constraint on that key: its
  ``properties`` entry, else its ``additionalProperties`` (which governs the keys *that*
  conjunct does not list); ``required``: the union; ``additionalProperties``: the conjunction
  of those given; ``items``: the conjunction;
- numeric bounds: the tightest; ``multipleOf``: the least common multiple (exact for the
  decimals a schema writes); ``minLength``/``maxLength``: the tightest; every ``pattern`` and
  ``format`` is kept (the frontend intersects their automata);
- ``enum``/``const``: the values valid under every conjunct (python-jsonschema checks them).

Subschemas under a key or in ``items`` stay unmerged (:class:`Conj`) until that place is
compiled, so recursion through ``properties`` and ``items`` needs no depth limit; a reference
cycle that never enters one (``{"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}}``) is left
recursion, a :class:`~structgen.errors.CompileError`.

``anyOf`` beside other keywords is distributed over its branches. ``oneOf`` is an ``anyOf``
when its branches, siblings merged in, are provably pairwise disjoint: by type, by ``enum``
values, by numeric or length ranges, or by a property required in both whose values are
disjoint (a discriminator); otherwise it is refused (``lenient``: read as ``anyOf``, recorded).
``not`` goes down by De Morgan (through ``not``, ``anyOf``, ``allOf``, ``$ref``) to atoms the
frontend compiles exactly: a smaller type set, excluded values, flipped bounds, an absent key,
a string outside a pattern, a number that is no multiple, a member the object must have
(:class:`SomeMember`); ``not`` of anything else is refused.

A conjunction no value satisfies (``false``, ``string`` ∩ ``integer``, ``not: {}``) raises an
error marked by :func:`~structgen.errors.no_value`: an ``anyOf`` branch or an alternative that
is empty is dropped, an optional property that can have no value is a forbidden key.

Example
-------
>>> [m.schema() for m in merge([{"type": ["string", "integer"], "minLength": 2},
...                             {"type": "string", "maxLength": 5, "not": {"const": "no"}}])]
[{'type': 'string', 'minLength': 2, 'maxLength': 5, 'not': {'enum': ['no']}}]
>>> [m.schema() for m in merge([{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
...                             {"properties": {"a": {"minimum": 0}}, "additionalProperties": False}])]
[{'properties': {'a': {'allOf': [{'type': 'integer'}, {'minimum': 0}]}}, 'required': ['a'], 'additionalProperties': False}]
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

from structgen.errors import CompileError, SchemaError, UnsupportedFeatureError, is_no_value, no_value
from structgen.frontends.json_schema.numbers import Bounds, read_bounds

__all__ = ["Part", "Conj", "Merged", "Merger", "SomeMember", "merge", "LOCAL_KEYWORDS", "COMBINATOR_KEYWORDS",
           "MAX_ALTERNATIVES", "resolve_ref", "json_equal", "join_pointer"]

#: Keywords merged by :class:`Merger` (each constrains one kind of value).
LOCAL_KEYWORDS = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "patternProperties", "propertyNames", "minProperties", "maxProperties",
    "prefixItems", "additionalItems", "minItems", "maxItems", "contains", "minContains",
    "maxContains", "uniqueItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
})
#: Keywords that combine subschemas.
COMBINATOR_KEYWORDS = frozenset({"$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                                 "dependentRequired", "dependentSchemas", "dependencies"})
#: Local keywords whose negation is exact: ``not {minimum: 5}`` is a non-number or a number
#: below 5 (type, bound to flip, the flipped keyword, how the bound moves).
_FLIPS = {
    "minimum": ("number", "exclusiveMaximum", 0), "maximum": ("number", "exclusiveMinimum", 0),
    "exclusiveMinimum": ("number", "maximum", 0), "exclusiveMaximum": ("number", "minimum", 0),
    "minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1),
    "minProperties": ("object", "maxProperties", -1), "maxProperties": ("object", "minProperties", 1),
}

#: A conjunction distributes over at most this many alternatives (anyOf/oneOf beside other
#: keywords multiply out); beyond, the combinator is refused.
MAX_ALTERNATIVES = 128
#: Past MAX_ALTERNATIVES, products up to this size are pruned of terms with no value before
#: the limit applies (each term costs one merge).
MAX_PRUNED_PRODUCT = 4096
#: How deep :meth:`Merger.disjoint` looks into required properties for a discriminator.
MAX_DISJOINT_DEPTH = 3

#: Value kinds: the JSON types, with numbers split into integers and non-integers.
KINDS = frozenset({"null", "boolean", "object", "array", "integer", "fraction", "string"})
TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_TYPE_KINDS = {"null": {"null"}, "boolean": {"boolean"}, "object": {"object"}, "array": {"array"},
               "number": {"integer", "fraction"}, "integer": {"integer"}, "string": {"string"}}


# ---------------------------------------------------------------- values


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


@dataclass(frozen=True)
class _NotType:
    kinds: frozenset[str]
    pointer: str  # of the type keyword inside not


@dataclass(frozen=True)
class _NotValues:
    values: tuple[Any, ...]
    pointer: str  # of the enum/const keyword inside not


@dataclass(frozen=True)
class _TypeCheck:
    """A checker for a subschema that only states ``type`` (python-jsonschema's interface)."""

    kinds: frozenset[str]

    def is_valid(self, value: Any) -> bool:
        return _kind(value) in self.kinds


@dataclass(frozen=True)
class _NotString:
    kind: str  # "pattern" or "format": a string must not match it
    value: str
    pointer: str  # of the keyword inside not


@dataclass(frozen=True)
class _NotMultiple:
    divisor: Fraction  # a number must not be a multiple of it
    pointer: str  # of the multipleOf keyword inside not


@dataclass(frozen=True)
class _Absent:
    key: str  # an object must not have this key (if it is an object)
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
class _OneOf:
    part: Part  # the schema holding oneOf
    stack: tuple[str, ...]


_Atom = Any  # Part | _NotType | _NotValues | _NotString | _NotMultiple | _Absent | SomeMember | _OneOf
_Term = tuple  # tuple[_Atom, ...]: a conjunction


@dataclass
class Merged:
    """One conjunction of plain keywords, merged. Pointers name where each keyword came from."""

    parts: tuple[Part, ...]
    kinds: frozenset[str] = KINDS
    type_order: tuple[str, ...] = TYPES
    enum: list[Any] | None = None
    properties: dict[str, Conj] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    additional: Conj | None = None  # None: no conjunct mentions additionalProperties
    #: per conjunct with patternProperties: its (pattern, subschema) pairs and its
    #: additionalProperties (None: not given); empty when no conjunct has patternProperties
    key_rules: list[tuple[tuple[tuple[str, Part], ...], Part | None]] = field(default_factory=list)
    property_names: list[Part] = field(default_factory=list)
    min_properties: int = 0
    max_properties: int | None = None
    min_properties_pointer: str = ""
    max_properties_pointer: str = ""
    #: values of required keys that ``properties`` does not list (patterns and extras applied)
    other_values: dict[str, Conj] = field(default_factory=dict)
    items: Conj | None = None  # items after the prefix; None: no conjunct constrains them
    prefix: list[Conj] = field(default_factory=list)  # prefixItems (array-form items), merged by position
    min_items: int = 0
    max_items: int | None = None
    min_items_pointer: str = ""
    max_items_pointer: str = ""
    #: (contains subschema, minContains, maxContains) of each conjunct with contains
    contains: list[tuple[Part, int, int | None]] = field(default_factory=list)
    unique: str | None = None  # pointer of a uniqueItems: true
    min_length: int = 0
    max_length: int | None = None
    min_length_pointer: str = ""
    max_length_pointer: str = ""
    patterns: list[tuple[str, str]] = field(default_factory=list)  # (pattern, pointer of the keyword)
    formats: list[tuple[Any, str]] = field(default_factory=list)
    #: ("pattern" | "format", value, pointer) from not: strings must match none of these
    avoided: list[tuple[str, str, str]] = field(default_factory=list)
    bounds: Bounds = Bounds()
    divisor: Fraction | None = None
    #: (divisor, pointer) from not: numbers must be multiples of none of these
    non_divisors: list[tuple[Fraction, str]] = field(default_factory=list)
    number_pointer: str = ""  # of the schema holding the (first) numeric keyword
    excluded: list[tuple[Any, str]] = field(default_factory=list)  # (value, pointer) from not
    #: members the object must have (from not); the compiler takes up to MAX_ASKED_MEMBERS
    some_members: list[SomeMember] = field(default_factory=list)
    #: False when ``properties`` come from several conjuncts, or ``required`` names keys they do
    #: not list: then the schema gives its keys no one order
    one_order: bool = True

    @property
    def pointer(self) -> str:
        return self.parts[0].pointer if self.parts else ""

    def types(self) -> list[str]:
        """Type names to compile, in schema order; ``fraction`` is a number that is no integer."""
        numeric = ("number" if {"integer", "fraction"} <= self.kinds else "integer" if "integer" in self.kinds
                   else "fraction" if "fraction" in self.kinds else None)
        slots = [t for t in self.type_order if t in ("number", "integer")]
        at = "number" if numeric == "number" and "number" in slots else slots[0]
        out = [numeric if t == at else t for t in self.type_order
               if t == at or (t in self.kinds and t not in ("number", "integer"))]
        return [t for t in dict.fromkeys(out) if t is not None]

    def value_kinds(self) -> frozenset[str]:
        """The kinds a value may have (for ``enum``: those of its values)."""
        if self.enum is not None:
            return frozenset(_kind(v) for v in self.enum)
        return self.kinds

    def value_at(self, key: str) -> Conj:
        """What constrains the value of ``key`` in an object."""
        if key in self.properties:
            return self.properties[key]
        if key in self.other_values:
            return self.other_values[key]
        return self.additional if self.additional is not None else Conj()

    def schema(self) -> dict[str, Any]:
        """As one JSON schema, for reading (subschemas under keys as :meth:`Conj.schema`)."""
        out: dict[str, Any] = {}
        if self.kinds != KINDS:
            names = [t if t != "fraction" else "number" for t in self.types()]
            out["type"] = names[0] if len(names) == 1 else names
            if "fraction" in self.types():
                out.setdefault("not", {})["type"] = "integer"
        if self.enum is not None:
            out["enum"] = self.enum
        if self.properties:
            out["properties"] = {k: c.schema() for k, c in self.properties.items()}
        if self.required:
            out["required"] = self.required
        if self.additional is not None:
            out["additionalProperties"] = self.additional.schema()
        if self.prefix:
            out["prefixItems"] = [c.schema() for c in self.prefix]
        if self.items is not None:
            out["items"] = self.items.schema()
        if self.min_items:
            out["minItems"] = self.min_items
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        for part, lo, hi in self.contains[:1]:  # (one shown: a schema has one contains)
            out["contains"] = part.schema
            if lo != 1:
                out["minContains"] = lo
            if hi is not None:
                out["maxContains"] = hi
        if self.unique is not None:
            out["uniqueItems"] = True
        if self.min_length:
            out["minLength"] = self.min_length
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        if self.patterns:
            out["pattern"] = self.patterns[0][0] if len(self.patterns) == 1 else [p for p, _ in self.patterns]
        if self.formats:
            out["format"] = self.formats[0][0] if len(self.formats) == 1 else [f for f, _ in self.formats]
        if self.avoided:
            out["not"] = {"anyOf": [{kind: value} for kind, value, _ in self.avoided]}
        b = self.bounds
        for value, open_, plain, strict in ((b.lo, b.lo_open, "minimum", "exclusiveMinimum"),
                                            (b.hi, b.hi_open, "maximum", "exclusiveMaximum")):
            if value is not None:
                out[strict if open_ else plain] = int(value) if value.denominator == 1 else float(value)
        if self.divisor is not None:
            d = self.divisor
            out["multipleOf"] = int(d) if d.denominator == 1 else float(d)
        if self.non_divisors:
            out.setdefault("not", {})["anyOf"] = [
                {"multipleOf": int(d) if d.denominator == 1 else float(d)} for d, _ in self.non_divisors]
        if self.excluded:
            out.setdefault("not", {})["enum"] = [v for v, _ in self.excluded]
        if self.some_members:  # for reading only: no keyword says "some member"
            out["x-some-member"] = [{"keys": list(map(str, some.keys)), "at": some.pointer}
                                    for some in self.some_members]
        return out


# ---------------------------------------------------------------- the merger


class Merger:
    """Disjunctive normal forms of conjunctions of subschemas of one document (memoized).

    ``check(schema, pointer)`` vets each subschema reached (the frontend refuses keywords it
    does not support there); ``refuse(keyword, pointer, hint)`` raises, or under ``lenient``
    records and returns (then ``oneOf`` reads as ``anyOf``, an inexact ``not`` is dropped).
    ``enum`` values are checked against each subschema with python-jsonschema.
    """

    def __init__(self, root: Any, *, check: Callable[[dict, str], None] | None = None,
                 refuse: Callable[[str, str, str], None] | None = None,
                 ref_siblings_always: bool = False) -> None:
        self.root = root
        # Drafts 3 to 7 ignore keywords beside $ref; later drafts apply them. Applying them in
        # every draft (ref_siblings_always, generation's strict mode) keeps to what the author
        # most likely meant, and what it generates still validates under the declared draft.
        dialect = root.get("$schema") if isinstance(root, dict) else None
        old_ref = isinstance(dialect, str) and any(f"/draft-0{d}/" in dialect for d in "34567")
        self.ref_alone = old_ref and not ref_siblings_always
        self.check = check or (lambda schema, pointer: None)
        self.refuse = refuse or _raise_refusal
        self._memo: dict[tuple[str, ...], list[Merged]] = {}
        self._computing: set[tuple[str, ...]] = set()  # alternatives() under way
        self._checkers: dict[tuple[str, str | None], Any] = {}

    # -- entry points

    def alternatives(self, conj: Conj) -> list[Merged]:
        """The merged alternatives whose union is the conjunction of ``conj``'s parts.

        Raises an error marked :func:`~structgen.errors.no_value` when no value satisfies it.
        """
        key = conj.key
        if key not in self._memo:
            self._computing.add(key)
            try:
                terms: list[_Term] = [()]
                for part in conj.parts:
                    terms = self._product(terms, self._dnf(part, ()), "allOf", part.pointer)
                self._memo[key] = self._either([lambda t=t: self._resolve(t) for t in terms])
            finally:
                self._computing.discard(key)
        return self._memo[key]

    def settled(self, conj: Conj) -> bool:
        """False while ``conj``'s alternatives are being worked out further up the call stack (a
        recursive schema met inside itself): checks that would need them cannot tell yet."""
        return conj.key not in self._computing

    def is_empty(self, conj: Conj) -> bool:
        """Whether no value satisfies ``conj`` (as far as merging can tell; a recursive schema
        met again inside its own check counts as not empty)."""
        if not self.settled(conj):
            return False
        try:
            self.alternatives(conj)
        except SchemaError as err:
            if not is_no_value(err):
                raise
            return True
        return False

    # -- disjunctive normal form

    def _dnf(self, part: Part, stack: tuple[str, ...]) -> list[_Term]:
        schema, ptr = part.schema, part.pointer
        if schema is True:
            return [()]
        if schema is False:
            raise no_value(UnsupportedFeatureError("false", pointer=ptr,
                                                   hint="a false schema matches nothing, so no value can be generated"))
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer=ptr)
        stack = _enter(stack, ptr)
        self.check(schema, ptr)
        terms: list[_Term] = [()]
        if "$ref" in schema:  # the target first: its keys come before those added beside it
            terms = self._dnf(resolve_ref(self.root, schema["$ref"], ptr), stack)
            if self.ref_alone:
                return terms
        terms = [t + (part,) for t in terms]
        for i, sub in enumerate(_schema_list(schema, "allOf", ptr) if "allOf" in schema else ()):
            terms = self._product(terms, self._dnf(Part(sub, join_pointer(ptr, "allOf", i)), stack),
                                  "allOf", join_pointer(ptr, "allOf"))
        if "anyOf" in schema:
            branches = self._either([lambda i=i, sub=sub: self._dnf(Part(sub, join_pointer(ptr, "anyOf", i)), stack)
                                     for i, sub in enumerate(_schema_list(schema, "anyOf", ptr))])
            terms = self._product(terms, branches, "anyOf", join_pointer(ptr, "anyOf"))
        if "oneOf" in schema:
            _schema_list(schema, "oneOf", ptr)
            terms = [t + (_OneOf(part, stack),) for t in terms]
        if "if" in schema and ("then" in schema or "else" in schema):
            terms = self._product(terms, self._conditional(schema, ptr, stack), "if", join_pointer(ptr, "if"))
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            for key, branches in self._dependencies(schema, kw, ptr, stack):
                terms = self._product(terms, branches, kw, join_pointer(ptr, kw, key))
        if "not" in schema:
            terms = self._product(terms, self._negate(Part(schema["not"], join_pointer(ptr, "not")), stack),
                                  "not", join_pointer(ptr, "not"))
        return terms

    def _either(self, options: list[Callable[[], list]], nothing: SchemaError | None = None) -> list:
        """The union of what the options give (terms, merged alternatives), leaving out those no
        value satisfies; when none is left, the first such error (or ``nothing``)."""
        out: list = []
        errors: list[SchemaError] = []
        for option in options:
            try:
                out += option()
            except SchemaError as err:
                if not is_no_value(err):
                    raise
                errors.append(err)
        if not out:
            if errors:
                raise errors[0]
            raise nothing or no_value(SchemaError("no value satisfies this schema"))
        return out

    def _conditional(self, schema: dict, ptr: str, stack: tuple[str, ...]) -> list[_Term]:
        """``if``/``then``/``else`` as ``(if and then) or (not if and else)``; the negation must be exact."""
        cond = Part(schema["if"], join_pointer(ptr, "if"))
        then = Part(schema.get("then", True), join_pointer(ptr, "then"))
        other = Part(schema.get("else", True), join_pointer(ptr, "else"))
        return self._either([
            lambda: self._product(self._dnf(cond, stack), self._dnf(then, stack), "then", then.pointer),
            lambda: self._product(self._negate(cond, stack, keyword="if"), self._dnf(other, stack),
                                  "else", other.pointer),
        ])

    def _dependencies(self, schema: dict, kw: str, ptr: str, stack: tuple[str, ...]):
        """Per key of ``dependentRequired``/``dependentSchemas``/``dependencies``: the key absent,
        or present with the keys it requires or the schema it brings (a disjunction)."""
        if kw not in schema:
            return
        table = schema[kw]
        if not isinstance(table, dict):
            raise SchemaError(f"{kw} must be an object", pointer=join_pointer(ptr, kw))
        for key, need in table.items():
            where = join_pointer(ptr, kw, key)
            absent = (_Absent(key, where),)
            if isinstance(need, list):  # required keys (dependentRequired, or dependencies' array form)
                if kw == "dependentSchemas" or not all(isinstance(k, str) for k in need):
                    raise SchemaError(f"{kw} values must be {'schemas' if kw == 'dependentSchemas' else 'arrays of strings'}",
                                      pointer=where)
                present = Part({"type": "object", "required": [key, *need]}, where, True)
                yield key, [absent, (present,)]
            else:
                if kw == "dependentRequired":
                    raise SchemaError("dependentRequired values must be arrays of strings", pointer=where)
                present = Part({"type": "object", "required": [key]}, where + "~present", True)
                yield key, self._either([
                    lambda absent=absent: [absent],
                    lambda need=need, where=where, present=present: [
                        (present,) + t for t in self._dnf(Part(need, where), stack)]])

    def _negate_local(self, schema: dict, ptr: str, keyword: str, stack: tuple[str, ...]) -> list[Callable[[], list[_Term]]]:
        """Negations of the local keywords that have an exact one (each a list of terms), or a
        refusal naming those that do not."""
        # A keyword of one type holds for every value of the others, so its negation is values
        # of its type that break it: not {minLength: 3} is a string of at most 2 characters.
        pieces: list[Callable[[], list[_Term]]] = []
        for kw in schema:
            where = join_pointer(ptr, kw)
            if kw in _FLIPS and not isinstance(schema[kw], bool):
                kind, flipped, shift = _FLIPS[kw]
                bound = schema[kw]
                if not isinstance(bound, (int, float)):
                    raise SchemaError(f"{kw} must be a number", pointer=where)
                if not shift or bound + shift >= 0:  # not {minLength: 0}: no string at all
                    flip = Part({"type": kind, flipped: bound + shift}, where + "~not", True)
                    pieces.append(lambda flip=flip: [(flip,)])
            elif kw == "required":
                keys = schema[kw]
                if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                    raise SchemaError("required must be an array of strings", pointer=where)
                obj = Part({"type": "object"}, where + "~not", True)
                pieces.append(lambda keys=keys, where=where, obj=obj: [(obj, _Absent(k, where)) for k in keys])
            elif kw in ("pattern", "format") and isinstance(schema[kw], str):
                # a string the automaton rejects: the complement of a regular language is exact
                string = Part({"type": "string"}, where + "~not", True)
                avoided = _NotString(kw, schema[kw], where)
                pieces.append(lambda string=string, avoided=avoided: [(string, avoided)])
            elif kw == "contains":  # fewer matching items than minContains, or more than maxContains
                lo, hi = _contains_counts(schema, ptr)
                sub = schema[kw]
                if lo == 1:  # none: every item breaks it
                    few = Part({"type": "array", "items": {"not": sub}}, where + "~not", True)
                    pieces.append(lambda few=few: [(few,)])
                elif lo > 1:
                    few = Part({"type": "array", "contains": sub, "minContains": 0, "maxContains": lo - 1},
                               where + "~not", True)
                    pieces.append(lambda few=few: [(few,)])
                if hi is not None:
                    many = Part({"type": "array", "contains": sub, "minContains": hi + 1}, where + "~many", True)
                    pieces.append(lambda many=many: [(many,)])
            elif kw == "multipleOf":  # a number that is no multiple (spelt without exponent)
                _, divisor = read_bounds({kw: schema[kw]}, ptr)
                number = Part({"type": "number"}, where + "~not", True)
                pieces.append(lambda number=number, divisor=divisor, where=where:
                              [(number, _NotMultiple(divisor, where))])
            elif kw in ("additionalProperties", "patternProperties", "propertyNames"):
                pieces += self._negate_members(schema, kw, where)
            elif kw == "items":  # only a single schema (see _negate): some item breaks it
                some = Part({"type": "array", "contains": {"not": schema[kw]}}, where + "~not", True)
                pieces.append(lambda some=some: [(some,)])
            elif kw == "properties":
                if not isinstance(schema[kw], dict):
                    raise SchemaError("properties must be an object", pointer=where)
                for key, sub in schema[kw].items():
                    # the key present, its value under not (negated where it is compiled)
                    broken = Part({"type": "object", "required": [key], "properties": {key: {"not": sub}}},
                                  join_pointer(where, key) + "~not", True)
                    pieces.append(lambda broken=broken: [(broken,)])
        return pieces

    def _none_of_values(self, values: tuple, where: str, stack: tuple[str, ...], keyword: str) -> list[_Term]:
        """``not`` over ``enum``/``const``: scalars (and arrays) excluded as values; an object
        value as the negation of the schema that matches exactly it (its keys required, each
        value ``const``, no other key)."""
        plain = tuple(v for v in values if not isinstance(v, dict))
        terms: list[_Term] = [(_NotValues(plain, where),)] if plain else [()]
        for i, value in enumerate(v for v in values if isinstance(v, dict)):
            if _holds_array(value):  # its exclusion would need an array's: not exact (see _merge)
                self.refuse(keyword, where, "excluding an object value that holds an array is not supported")
                continue
            exactly = Part({"type": "object", "required": list(value), "additionalProperties": False,
                            "properties": {k: {"const": x} for k, x in value.items()}}, f"{where}~{i}", True)
            terms = self._product(terms, self._negate(exactly, stack, keyword), "not", where)
        return terms

    def _negate_dependencies(self, schema: dict, kw: str, ptr: str, stack: tuple[str, ...],
                             keyword: str) -> list[Callable[[], list[_Term]]]:
        """``not`` over ``dependencies``/``dependentRequired``/``dependentSchemas``: an object with
        some key present whose required keys are not all there, or whose schema breaks."""
        if kw not in schema:
            return []
        table = schema[kw]
        if not isinstance(table, dict):
            raise SchemaError(f"{kw} must be an object", pointer=join_pointer(ptr, kw))
        pieces: list[Callable[[], list[_Term]]] = []
        for key, need in table.items():
            where = join_pointer(ptr, kw, key)
            present = Part({"type": "object", "required": [key]}, where + "~not", True)
            if isinstance(need, list):
                if kw == "dependentSchemas" or not all(isinstance(k, str) for k in need):
                    raise SchemaError(f"{kw} values must be {'schemas' if kw == 'dependentSchemas' else 'arrays of strings'}",
                                      pointer=where)
                pieces.append(lambda present=present, need=need, where=where:
                              [(present, _Absent(k, where)) for k in need if k != key])
            else:
                if kw == "dependentRequired":
                    raise SchemaError("dependentRequired values must be arrays of strings", pointer=where)
                pieces.append(lambda present=present, need=need, where=where: [
                    (present,) + t for t in self._negate(Part(need, where), stack, keyword)])
        return pieces

    @staticmethod
    def _negate_members(schema: dict, kw: str, where: str) -> list[Callable[[], list[_Term]]]:
        """``not`` over a keyword about members: an object with some member that breaks it."""
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

    def _negate(self, part: Part, stack: tuple[str, ...], keyword: str = "not") -> list[_Term]:
        """The disjunctive normal form of ``not`` ``part`` (De Morgan down to type and values)."""
        schema, ptr = part.schema, part.pointer
        everything = no_value(UnsupportedFeatureError(
            "not", pointer=ptr, hint="`not` of a schema that every value satisfies matches nothing"))
        if schema is False:
            return [()]
        if schema is True:
            raise everything
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer=ptr)
        stack = _enter(stack, ptr)
        self.check(schema, ptr)
        if "$ref" in schema and self.ref_alone:
            return self._negate(resolve_ref(self.root, schema["$ref"], ptr), stack, keyword)
        keys = [k for k in schema if k in LOCAL_KEYWORDS | COMBINATOR_KEYWORDS]
        exact = {"type", "enum", "const", "not", "anyOf", "allOf", "oneOf", "$ref", "required", "properties",
                 "pattern", "format", "additionalProperties", "patternProperties", "propertyNames", "multipleOf",
                 "contains", "minContains", "maxContains", "dependencies", "dependentRequired",
                 "dependentSchemas", *_FLIPS}
        if isinstance(schema.get("items"), (dict, bool)) and "prefixItems" not in schema:
            exact.add("items")  # every item matches X; negated: some item matches not X
        inexact = [k for k in keys if k not in exact or (k in _FLIPS and isinstance(schema[k], bool))]
        if inexact:
            self.refuse(keyword, ptr, f"`not` is exact over type, enum, const, required, properties, "
                                      f"additionalProperties, patternProperties, propertyNames, multipleOf, "
                                      f"contains, dependencies, items (one schema), numeric bounds, lengths "
                                      f"and item counts (and not, anyOf, allOf, oneOf, $ref of those); not "
                                      f"over {', '.join(inexact)}")
            return [()]  # lenient: the negation is dropped
        if not keys:
            raise everything
        # not (A and B and ...) = (not A) or (not B) or ...: each keyword gives alternatives
        pieces: list[Callable[[], list[_Term]]] = []
        if "type" in schema:
            kinds = _kinds_of(schema["type"], join_pointer(ptr, "type"))
            pieces.append(lambda: [(_NotType(kinds, join_pointer(ptr, "type")),)])
        for kw in ("enum", "const"):
            if kw in schema:
                values = tuple(_enum_values(schema, kw, ptr))
                pieces.append(lambda values=values, kw=kw: self._none_of_values(values, join_pointer(ptr, kw),
                                                                                stack, keyword))
        if "not" in schema:
            pieces.append(lambda: self._dnf(Part(schema["not"], join_pointer(ptr, "not")), stack))
        if "$ref" in schema:
            pieces.append(lambda: self._negate(resolve_ref(self.root, schema["$ref"], ptr), stack, keyword))
        for i, sub in enumerate(_schema_list(schema, "allOf", ptr) if "allOf" in schema else []):
            pieces.append(lambda i=i, sub=sub: self._negate(Part(sub, join_pointer(ptr, "allOf", i)), stack, keyword))
        pieces += self._negate_local(schema, ptr, keyword, stack)
        for kw in ("dependencies", "dependentRequired", "dependentSchemas"):
            pieces += self._negate_dependencies(schema, kw, ptr, stack, keyword)
        for kw in ("anyOf", "oneOf"):
            if kw not in schema:
                continue
            branches = [Part(sub, join_pointer(ptr, kw, i)) for i, sub in enumerate(_schema_list(schema, kw, ptr))]

            def none_of(branches=branches) -> list[_Term]:  # not (A or B) = (not A) and (not B)
                terms: list[_Term] = [()]
                for branch in branches:
                    terms = self._product(terms, self._negate(branch, stack, keyword), "not", ptr)
                return terms
            pieces.append(none_of)
            if kw == "oneOf":  # not exactly one: none, or two (or more) at once
                pieces += [lambda a=a, b=b: self._product(self._dnf(a, stack), self._dnf(b, stack), "not", ptr)
                           for i, a in enumerate(branches) for b in branches[i + 1:]]
        out = self._either(pieces, nothing=everything)
        if len(out) > MAX_ALTERNATIVES:
            raise UnsupportedFeatureError("not", pointer=ptr, hint=f"the negation has {len(out)} alternatives "
                                                                    f"(limit {MAX_ALTERNATIVES})")
        return out

    def _possible(self, term: _Term) -> bool:
        """False when ``term`` surely has no value: its merge fails, or a key it requires can
        hold no value (a cheap check; pending ``oneOf`` and deeper conflicts count as possible)."""
        if any(isinstance(a, _OneOf) for a in term):
            return True
        try:
            m = self._merge(term)
            return not any(self.is_empty(m.value_at(key)) for key in m.required)
        except SchemaError as err:
            if is_no_value(err):
                return False
            return True  # not for this check to report: the full rewrite meets it again

    def _product(self, terms: list[_Term], factor: list[_Term], keyword: str, pointer: str,
                 limit: int = MAX_ALTERNATIVES) -> list[_Term]:
        """Every term of ``terms`` and'ed with every term of ``factor``. Past ``limit``, the terms
        that surely have no value (types apart, say) are dropped first: an ``allOf`` of
        ``anyOf``s multiplies out to many terms of which few are possible."""
        size = len(terms) * len(factor)
        if size <= limit:
            return [a + b for a in terms for b in factor]
        if size <= MAX_PRUNED_PRODUCT:
            out = [a + b for a in terms for b in factor if self._possible(a + b)]
            if not out:
                raise no_value(SchemaError(f"no value satisfies {keyword} and the keywords beside it",
                                           pointer=pointer))
            if len(out) <= limit:
                return out
            size = len(out)
        raise UnsupportedFeatureError(keyword, pointer=pointer,
                                      hint=f"distributing it over the other keywords gives "
                                           f"{size} alternatives (limit {limit})")

    def _resolve(self, term: _Term) -> list[Merged]:
        """Merge a term, expanding its first pending ``oneOf`` (if its branches are disjoint)."""
        at = next((i for i, a in enumerate(term) if isinstance(a, _OneOf)), None)
        if at is None:
            return [self._merge(term)]
        one: _OneOf = term[at]
        rest = term[:at] + term[at + 1:]
        ptr = one.part.pointer
        groups: list[tuple[int, list[Merged]]] = []
        errors: list[SchemaError] = []
        for j, sub in enumerate(one.part.schema["oneOf"]):
            found: list[Merged] = []
            try:
                for t in self._dnf(Part(sub, join_pointer(ptr, "oneOf", j)), one.stack):
                    try:
                        found += self._resolve(rest + t)
                    except SchemaError as err:
                        if not is_no_value(err):
                            raise
                        errors.append(err)
            except SchemaError as err:
                if not is_no_value(err):
                    raise
                errors.append(err)
            if found:
                groups.append((j, found))
        if not groups:
            raise errors[0]
        overlap = next(((j, k) for a, (j, xs) in enumerate(groups) for k, ys in groups[a + 1:]
                        if not all(self.disjoint(x, y) for x in xs for y in ys)), None)
        if overlap is not None:
            exact = self._exclusive(one, rest, groups)
            if not isinstance(exact, UnsupportedFeatureError):
                return exact
            self.refuse("oneOf", join_pointer(ptr, "oneOf"),
                        f"branches {overlap[0]} and {overlap[1]} may both hold for one value; oneOf is exact "
                        "only when its branches are provably disjoint (by type, enum/const values, numeric or "
                        "length ranges, or a required property whose values are disjoint), or when each "
                        f"branch that may overlap another can be negated exactly (here: {exact.hint}, at "
                        f"{exact.pointer or '/'})")
        out = [m for _, ms in groups for m in ms]
        if len(out) > MAX_ALTERNATIVES:
            raise UnsupportedFeatureError("oneOf", pointer=join_pointer(ptr, "oneOf"),
                                          hint=f"distributing it gives {len(out)} alternatives (limit {MAX_ALTERNATIVES})")
        return out

    def _exclusive(self, one: _OneOf, rest: _Term,
                   groups: list[tuple[int, list[Merged]]]) -> list[Merged] | UnsupportedFeatureError:
        """``oneOf`` as "branch j and not the others it may overlap", for every j; or the refusal
        of a negation it needs that is not exact."""
        ptr = one.part.pointer
        branches = {j: Part(one.part.schema["oneOf"][j], join_pointer(ptr, "oneOf", j)) for j, _ in groups}
        merged = dict(groups)

        def only(j: int) -> list[Merged]:  # branch j and none of those it may overlap
            terms = self._dnf(branches[j], one.stack)
            for k in branches:
                if k != j and not all(self.disjoint(x, y) for x in merged[j] for y in merged[k]):
                    # Terms with no value are dropped as they appear, so a negation whose other
                    # alternatives contradict branch j does not multiply the count.
                    terms = [t for t in self._product(terms, self._negate(branches[k], one.stack), "oneOf",
                                                      join_pointer(ptr, "oneOf"), limit=MAX_ALTERNATIVES ** 2)
                             if self._possible(rest + t)]
                    if not terms:
                        raise no_value(SchemaError(f"oneOf branch {j} holds only where another does",
                                                   pointer=join_pointer(ptr, "oneOf", j)))
                    if len(terms) > MAX_ALTERNATIVES:
                        raise UnsupportedFeatureError("oneOf", pointer=join_pointer(ptr, "oneOf"),
                                                      hint=f"excluding the other branches gives {len(terms)} "
                                                           f"alternatives (limit {MAX_ALTERNATIVES})")
            return self._either([lambda t=t: self._resolve(rest + t) for t in terms])

        nothing = no_value(SchemaError("no value satisfies exactly one oneOf branch", pointer=join_pointer(ptr, "oneOf")))
        refuse, self.refuse = self.refuse, _raise_refusal  # a negation that is not exact: give up
        try:
            # a branch left empty (it lies inside another) is dropped, the others still count
            out = self._either([lambda j=j: only(j) for j in branches], nothing=nothing)
        except SchemaError as err:
            if not is_no_value(err):
                if isinstance(err, UnsupportedFeatureError):
                    return err
                raise
            raise nothing from err
        finally:
            self.refuse = refuse
        if len(out) > MAX_ALTERNATIVES:
            raise UnsupportedFeatureError("oneOf", pointer=join_pointer(ptr, "oneOf"),
                                          hint=f"distributing it gives {len(out)} alternatives (limit {MAX_ALTERNATIVES})")
        return out

    # -- merging one conjunction

    def _merge(self, term: _Term) -> Merged:
        parts = tuple({a.pointer: a for a in term if isinstance(a, Part)}.values())
        m = Merged(parts)
        kinds = set(KINDS)
        type_sources: list[str] = []
        type_order: tuple[str, ...] | None = None
        divisor_seen = False
        enum_source: tuple[str, str] | None = None
        # (part, properties, additionalProperties or None, patternProperties as (pattern, Part))
        own_props: list[tuple[Part, dict, Any, tuple]] = []
        arrays: list[tuple[list[Part], Part | None]] = []  # per conjunct: prefix, then the rest
        additional_seen = False
        for part in parts:
            s, ptr = part.schema, part.pointer
            if not isinstance(s, dict):
                continue  # True
            if "type" in s:
                kinds &= _kinds_of(s["type"], join_pointer(ptr, "type"))
                type_sources.append(join_pointer(ptr, "type"))
                if type_order is None:
                    names = [s["type"]] if isinstance(s["type"], str) else s["type"]
                    type_order = tuple(dict.fromkeys([*names, *TYPES]))
            for kw in ("const", "enum"):
                if kw in s and m.enum is None:
                    m.enum = list(_enum_values(s, kw, ptr))
                    enum_source = (ptr, kw)
                elif kw in s:
                    _enum_values(s, kw, ptr)  # vetted; the values are checked below
            if "properties" in s or "additionalProperties" in s or "patternProperties" in s:
                props = s.get("properties", {})
                if not isinstance(props, dict):
                    raise SchemaError("properties must be an object", pointer=join_pointer(ptr, "properties"))
                extra = s.get("additionalProperties")
                if extra is not None and not isinstance(extra, (bool, dict)):
                    raise SchemaError("additionalProperties must be a schema",
                                      pointer=join_pointer(ptr, "additionalProperties"))
                patterns = s.get("patternProperties", {})
                if not isinstance(patterns, dict):
                    raise SchemaError("patternProperties must be an object",
                                      pointer=join_pointer(ptr, "patternProperties"))
                additional_seen |= extra is not None
                own_props.append((part, props, extra, tuple(
                    (pattern, Part(sub, join_pointer(ptr, "patternProperties", pattern)))
                    for pattern, sub in patterns.items())))
            if "propertyNames" in s:
                m.property_names.append(Part(s["propertyNames"], join_pointer(ptr, "propertyNames")))
            if "minProperties" in s:
                lo = _non_negative_int(s, "minProperties", ptr)
                if lo >= m.min_properties:
                    m.min_properties, m.min_properties_pointer = lo, join_pointer(ptr, "minProperties")
            if "maxProperties" in s:
                hi = _non_negative_int(s, "maxProperties", ptr)
                if m.max_properties is None or hi < m.max_properties:
                    m.max_properties, m.max_properties_pointer = hi, join_pointer(ptr, "maxProperties")
            if "required" in s:
                req = s["required"]
                if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
                    raise SchemaError("required must be an array of strings", pointer=join_pointer(ptr, "required"))
                m.required += [r for r in req if r not in m.required]
            if any(k in s for k in ("items", "prefixItems")):
                arrays.append(_array_part(s, ptr))
            if "minItems" in s:
                lo = _non_negative_int(s, "minItems", ptr)
                if lo >= m.min_items:
                    m.min_items, m.min_items_pointer = lo, join_pointer(ptr, "minItems")
            if "maxItems" in s:
                hi = _non_negative_int(s, "maxItems", ptr)
                if m.max_items is None or hi < m.max_items:
                    m.max_items, m.max_items_pointer = hi, join_pointer(ptr, "maxItems")
            if "contains" in s:
                lo, hi = _contains_counts(s, ptr)
                m.contains.append((Part(s["contains"], join_pointer(ptr, "contains")), lo, hi))
            if s.get("uniqueItems") is True and m.unique is None:
                m.unique = join_pointer(ptr, "uniqueItems")
            if "minLength" in s:
                lo = _non_negative_int(s, "minLength", ptr)
                if lo >= m.min_length:
                    m.min_length, m.min_length_pointer = lo, ptr
            if "maxLength" in s:
                hi = _non_negative_int(s, "maxLength", ptr)
                if m.max_length is None or hi < m.max_length:
                    m.max_length, m.max_length_pointer = hi, ptr
            if "pattern" in s:
                if not isinstance(s["pattern"], str):
                    raise SchemaError(f"pattern must be a string, not {s['pattern']!r}",
                                      pointer=join_pointer(ptr, "pattern"))
                if s["pattern"] not in [p for p, _ in m.patterns]:
                    m.patterns.append((s["pattern"], join_pointer(ptr, "pattern")))
            if "format" in s:
                if not isinstance(s["format"], str):
                    raise SchemaError(f"format must be a string, not {s['format']!r}",
                                      pointer=join_pointer(ptr, "format"))
                if s["format"] not in [f for f, _ in m.formats]:
                    m.formats.append((s["format"], join_pointer(ptr, "format")))
            if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
                bounds, divisor = read_bounds(s, ptr)
                m.bounds = m.bounds.meet(bounds)
                if divisor is not None:
                    m.divisor = divisor if m.divisor is None else _lcm(m.divisor, divisor)
                if not m.number_pointer or (divisor is not None and not divisor_seen):
                    m.number_pointer = ptr  # numbers.py reports multipleOf errors below it
                divisor_seen |= divisor is not None
        # objects: a key's value answers to each conjunct's entry for it, or that conjunct's
        # additionalProperties when it has none
        keys = list(dict.fromkeys(k for _, props, _, _ in own_props for k in props))
        m.one_order = (sum(1 for p, props, _, _ in own_props if props and not p.synthetic) <= 1
                       and all(r in keys for r in m.required))

        def value_of(key: str) -> Conj:  # each conjunct: its entry and matching patterns, else its extra
            found: list[Part] = []
            for p, props, extra, patterns in own_props:
                mine = [sub for pattern, sub in patterns if pattern_matches(pattern, key, sub.pointer)]
                if key in props:
                    mine.insert(0, Part(props[key], join_pointer(p.pointer, "properties", key)))
                elif not mine and extra is not None:
                    mine = [Part(extra, join_pointer(p.pointer, "additionalProperties"))]
                found += mine
            return _conj(found)

        for key in keys:
            m.properties[key] = value_of(key)
        if any(patterns for *_, patterns in own_props):
            m.key_rules = [(patterns, None if extra is None else Part(extra, join_pointer(p.pointer, "additionalProperties")))
                           for p, _, extra, patterns in own_props if patterns or extra is not None]
            m.other_values = {key: value_of(key) for key in m.required if key not in m.properties}
        if additional_seen:
            m.additional = _conj([Part(extra, join_pointer(p.pointer, "additionalProperties"))
                                  for p, _, extra, _ in own_props if extra is not None])
        # arrays: position i answers to each conjunct's prefix entry i, or its rest items
        for i in range(max((len(prefix) for prefix, _ in arrays), default=0)):
            m.prefix.append(_conj([prefix[i] if i < len(prefix) else rest for prefix, rest in arrays
                                   if i < len(prefix) or rest is not None]))
        rests = [rest for _, rest in arrays if rest is not None]
        if rests:
            m.items = _conj(rests)
        # negations
        for atom in term:
            if isinstance(atom, _Absent):  # as a property whose value can be nothing
                conj = m.properties.get(atom.key, Conj())
                m.properties[atom.key] = Conj(conj.parts + (Part(False, atom.pointer, True),))
            elif isinstance(atom, _NotType):
                kinds -= atom.kinds
                type_sources.append(atom.pointer + " (under not)")
            elif isinstance(atom, _NotValues):
                m.excluded += [(v, atom.pointer) for v in atom.values]
            elif isinstance(atom, _NotMultiple) and (atom.divisor, atom.pointer) not in m.non_divisors:
                m.non_divisors.append((atom.divisor, atom.pointer))
            elif isinstance(atom, SomeMember) and atom not in m.some_members:
                m.some_members.append(atom)
            elif isinstance(atom, _NotString) and (atom.kind, atom.value, atom.pointer) not in m.avoided:
                m.avoided.append((atom.kind, atom.value, atom.pointer))
        if type_order is not None:
            m.type_order = type_order
        excluded = [v for v, _ in m.excluded]
        if any(v is None for v in excluded):
            kinds.discard("null")
        if any(v is True for v in excluded) and any(v is False for v in excluded):
            kinds.discard("boolean")
        if m.enum is not None:
            # the term is exactly its parts' local keywords and the negations: check just those
            excluded = [v for v, _ in m.excluded]
            m.enum = [v for v in m.enum if _kind(v) in kinds and not any(json_equal(v, x) for x in excluded)]
            m.enum = self._valid_values(m.enum, parts, m.pointer, enum_source)
            m.enum = [v for v in m.enum if not (isinstance(v, str) and _matches_avoided(v, m.avoided))
                      and not any(_is_multiple(v, d) for d, _ in m.non_divisors)]
            if not m.enum:
                raise no_value(UnsupportedFeatureError("enum", pointer=m.pointer,
                                                       hint="no enum value is left once the negations apply"))
            m.avoided = []
            m.non_divisors = []
            m.excluded = []
        else:
            for value, ptr in m.excluded:
                kind = _kind(value)
                if kind in ("object", "array") and kind in kinds:
                    self.refuse("not", ptr, f"excluding {kind} values is not supported (only strings, numbers, "
                                            "booleans and null)")
            m.excluded = [(v, p) for v, p in m.excluded if _kind(v) not in ("object", "array")]
            if not kinds:
                raise no_value(SchemaError(
                    "no type satisfies " + " and ".join(f"'{s}'" for s in type_sources) + " together",
                    pointer=type_sources[-1].removesuffix(" (under not)")))
        m.kinds = frozenset(kinds)
        return m

    def _valid_values(self, values: list[Any], parts: tuple[Part, ...], pointer: str,
                      source: tuple[str, str] | None = None) -> list[Any]:
        """The values (deduplicated) valid under every part; ``source`` (pointer, keyword) is
        where they come from, not checked again."""
        kept: list[Any] = []
        seen: set = set()  # json_key of each kept value: a large enum deduplicates in linear time
        for v in values:
            key = json_key(v)
            if key not in seen and self._valid_under(v, parts, source):
                kept.append(v)
                seen.add(key)
        if not kept:
            raise no_value(UnsupportedFeatureError("enum", pointer=pointer,
                                                   hint="no enum value satisfies the other keywords"))
        return kept

    def _valid_under(self, value: Any, parts: tuple[Part, ...], source: tuple[str, str] | None = None) -> bool:
        """Whether ``value`` satisfies every part (python-jsonschema's verdict)."""
        for p in parts:
            drop = source[1] if source is not None and source[0] == p.pointer else None
            checker = self._checker(p, drop)
            if checker is None:
                continue
            try:
                if not checker.is_valid(value):
                    return False
            except Exception as err:  # noqa: BLE001 - the checker failed, not the value
                raise UnsupportedFeatureError("enum", pointer=p.pointer,
                                              hint=f"enum values could not be checked against this "
                                                   f"subschema: {type(err).__name__}: {err}") from err
        return True

    def _checker(self, part: Part, drop: str | None) -> Any:
        """A python-jsonschema validator for the local keywords of ``part`` less ``drop``
        (``None``: nothing to check).

        Combinators are left out: in a term, each ``$ref`` target, ``allOf`` branch and chosen
        ``anyOf``/``oneOf`` branch is a part of its own, and ``not`` an atom. Checking a part
        whole would bring in a ``oneOf`` with its "exactly one" (not what one branch of it
        means) and a ``$ref`` beside keywords as an older draft reads it.
        """
        key = (part.pointer, drop)
        if key not in self._checkers:
            schema = part.schema
            local = ({k: x for k, x in schema.items() if k in LOCAL_KEYWORDS and k != drop}
                     if isinstance(schema, dict) else {})
            if not local:
                self._checkers[key] = None
            elif local.keys() == {"type"}:  # the common case (a typed enum): no validator needed
                self._checkers[key] = _TypeCheck(frozenset(_kinds_of(local["type"], join_pointer(part.pointer, "type"))))
            else:
                from jsonschema import Draft202012Validator, validators

                cls = validators.validator_for(self.root if isinstance(self.root, dict) else {},
                                               default=Draft202012Validator)
                # evolved from the root: references inside resolve in the document
                self._checkers[key] = cls(self.root).evolve(schema=local)
        return self._checkers[key]

    # -- disjointness (oneOf)

    def disjoint(self, a: Merged, b: Merged, depth: int = 0) -> bool:
        """Whether no value satisfies both (``False``: they may overlap, or it cannot tell)."""
        common = a.value_kinds() & b.value_kinds()
        if not common:
            return True
        if a.enum is not None and b.enum is not None:
            return not any(json_equal(x, y) for x in a.enum for y in b.enum)
        for x, y in ((a, b), (b, a)):
            if x.enum is not None:
                return not any(_kind(v) in y.kinds and not any(json_equal(v, e) for e, _ in y.excluded)
                               and self._valid_under(v, y.parts) for v in x.enum)
        if common <= {"integer", "fraction"} and a.bounds.meet(b.bounds).is_empty():
            return True
        if common == {"string"} and (
                (a.max_length is not None and a.max_length < b.min_length)
                or (b.max_length is not None and b.max_length < a.min_length)):
            return True
        if common == {"object"} and depth < MAX_DISJOINT_DEPTH:
            for key in dict.fromkeys(a.required + b.required):
                va, vb = a.value_at(key), b.value_at(key)
                if (key in a.required and self.is_empty(vb)) or (key in b.required and self.is_empty(va)):
                    return True  # required on one side, forbidden on the other
                if key in a.required and key in b.required and self.settled(va) and self.settled(vb):
                    xs, ys = self.alternatives(va), self.alternatives(vb)
                    if all(self.disjoint(x, y, depth + 1) for x in xs for y in ys):
                        return True  # a discriminator
        return False


def merge(schemas: list[Any], root: Any = None) -> list[Merged]:
    """The merged alternatives of ``allOf: schemas`` (``$ref`` resolved in ``root``)."""
    parts = tuple(Part(s, join_pointer("/allOf", i)) for i, s in enumerate(schemas))
    return Merger({"allOf": schemas} if root is None else root).alternatives(Conj(parts))


# ---------------------------------------------------------------- helpers


def _conj(parts: list[Part]) -> Conj:
    """The parts, less those that constrain nothing (``true``, ``{}``) when others do."""
    kept = [p for p in parts if p.schema is not True and p.schema != {}]
    return Conj(tuple(kept or parts[:1]))


def _raise_refusal(keyword: str, pointer: str, hint: str) -> None:
    raise UnsupportedFeatureError(keyword, pointer=pointer, hint=hint)


def _enter(stack: tuple[str, ...], ptr: str) -> tuple[str, ...]:
    if ptr in stack:
        cycle = " -> ".join(stack[stack.index(ptr):] + (ptr,))
        raise CompileError(f"left recursion: the subschema at '{ptr or '/'}' applies itself through {cycle} "
                           "before any property or item")
    return stack + (ptr,)


def _schema_list(schema: dict, kw: str, ptr: str) -> list[Any]:
    value = schema[kw]
    if not isinstance(value, list) or not value:
        raise SchemaError(f"{kw} must be a non-empty array", pointer=join_pointer(ptr, kw))
    return value


def _enum_values(schema: dict, kw: str, ptr: str) -> list[Any]:
    if kw == "const":
        return [schema["const"]]
    values = schema["enum"]
    if not isinstance(values, list) or not values:
        raise SchemaError("enum must be a non-empty array", pointer=join_pointer(ptr, "enum"))
    return values


def _kinds_of(value: Any, pointer: str) -> frozenset[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(t not in _TYPE_KINDS for t in names):
        raise SchemaError(f"invalid type {value!r}", pointer=pointer)
    return frozenset(k for t in names for k in _TYPE_KINDS[t])


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "integer" if isinstance(value, int) or value.is_integer() else "fraction"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _lcm(a: Fraction, b: Fraction) -> Fraction:
    """The least positive common multiple of two positive rationals."""
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


_PATTERNS: dict[tuple[str, str], Any] = {}


def _holds_array(value: Any) -> bool:
    """Whether a JSON value is or contains an array."""
    if isinstance(value, list):
        return True
    return isinstance(value, dict) and any(_holds_array(v) for v in value.values())


def _is_multiple(value: Any, divisor: Fraction) -> bool:
    """Whether ``value`` is a number that is a multiple of ``divisor`` (decimals exactly)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    exact = Fraction(value) if isinstance(value, int) else Fraction(repr(value))
    return (exact / divisor).denominator == 1


def _matches_avoided(value: str, avoided: list[tuple[str, str, str]]) -> bool:
    """Whether the string ``value`` matches one of the patterns or known formats ``avoided``."""
    from structgen.frontends.json_schema.formats import FORMAT_ALIASES, FORMAT_PATTERNS

    for kind, what, ptr in avoided:
        what = FORMAT_ALIASES.get(what, what) if kind == "format" else what
        if kind == "format" and what not in FORMAT_PATTERNS:
            raise UnsupportedFeatureError("format", pointer=ptr, hint=f"format {what!r} under not is not supported")
        if pattern_matches(what if kind == "pattern" else FORMAT_PATTERNS[what], value, ptr):
            return True
    return False


def pattern_matches(pattern: str, key: str, pointer: str) -> bool:
    """Whether the ECMA-262 ``pattern`` finds a match in ``key`` (structgen's own regex engine,
    so a key is judged exactly as the key automaton judges it)."""
    from structgen.frontends.regex.ecma import pattern_to_ir
    from structgen.core.regular import matcher

    got = _PATTERNS.get((pattern, pointer))
    if got is None:
        if len(_PATTERNS) > 1024:
            _PATTERNS.clear()
        got = _PATTERNS[(pattern, pointer)] = matcher(pattern_to_ir(pattern, pointer=pointer, canonical=True))
    return got(json.dumps(key, ensure_ascii=False)[1:-1].encode())


def _array_part(s: dict, ptr: str) -> tuple[list[Part], Part | None]:
    """One schema's array items: ``prefixItems`` (or the array form of ``items``, with
    ``additionalItems`` for the rest, as drafts 4 to 2019-09 write tuples), then the rest."""
    def subschema(value: Any, *path: Any) -> Part:
        if not isinstance(value, (dict, bool)):
            raise SchemaError(f"{path[0]} must hold schemas, not {value!r}", pointer=join_pointer(ptr, *path))
        return Part(value, join_pointer(ptr, *path))

    items = s.get("items")
    if "prefixItems" in s:
        if not isinstance(s["prefixItems"], list):
            raise SchemaError("prefixItems must be an array of schemas", pointer=join_pointer(ptr, "prefixItems"))
        prefix = [subschema(x, "prefixItems", i) for i, x in enumerate(s["prefixItems"])]
        return prefix, None if items is None else subschema(items, "items")
    if isinstance(items, list):
        rest = s.get("additionalItems")
        return ([subschema(x, "items", i) for i, x in enumerate(items)],
                None if rest is None else subschema(rest, "additionalItems"))
    return [], subschema(items, "items")


def _contains_counts(schema: dict, ptr: str) -> tuple[int, int | None]:
    """``(minContains, maxContains)`` beside a ``contains``: at least one item by default."""
    lo = _non_negative_int(schema, "minContains", ptr) if "minContains" in schema else 1
    hi = _non_negative_int(schema, "maxContains", ptr) if "maxContains" in schema else None
    return lo, hi


def _non_negative_int(schema: dict, kw: str, ptr: str) -> int:
    v = schema[kw]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SchemaError(f"{kw} must be a non-negative integer, not {v!r}", pointer=join_pointer(ptr, kw))
    return v


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1 == 1.0`` but ``True != 1``, recursively."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal exactly when :func:`json_equal` says so."""
    if isinstance(value, bool) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", Fraction(value) if math.isfinite(value) else value)
    if isinstance(value, list):
        return ("array", tuple(json_key(x) for x in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, json_key(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def join_pointer(ptr: str, *parts: Any) -> str:
    """``ptr`` extended by reference tokens (``~`` and ``/`` escaped)."""
    for p in parts:
        ptr += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return ptr


def resolve_ref(root: Any, ref: Any, ptr: str) -> Part:
    """The subschema a ``$ref`` at ``ptr`` names, inside the document ``root``.

    The reference is resolved against the base URI at ``ptr`` (each ``$id`` on the way there
    sets it), then looked up among the document's own resources: a JSON pointer (``~0``/``~1``,
    percent-encoding) or an anchor (``$anchor``, ``$dynamicAnchor``, or a draft 6/7 ``$id:
    "#name"``) in the resource it names. A reference to anything outside the document (a remote
    schema, a metaschema) is refused.
    """
    where = join_pointer(ptr, "$ref")
    if not isinstance(ref, str):
        raise SchemaError(f"$ref must be a string, not {ref!r}", pointer=where)
    doc = _document(root)
    uri, fragment = urllib.parse.urldefrag(_join_uri(doc.base_at(root, ptr), ref))
    fragment = urllib.parse.unquote(fragment)  # a URI fragment: %25 is "%"
    resource = doc.resources.get(uri)
    if resource is None:
        raise UnsupportedFeatureError("$ref", pointer=where,
                                      hint=f"{ref!r} names a schema outside this document "
                                           f"({uri or 'the document'}); only references inside it are supported")
    if fragment and not fragment.startswith("/"):  # "#name": an anchor, not a pointer
        target = doc.anchors.get((uri, fragment))
        if target is None:
            raise SchemaError(f"$ref {ref!r}: no $anchor named {fragment!r} in the document", pointer=where)
        return Part(_node_at(root, target, ref, where), target)
    target = resource + fragment
    return Part(_node_at(root, target, ref, where), target)


def _node_at(root: Any, pointer: str, ref: str, where: str) -> Any:
    node = root
    try:
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
    except (KeyError, IndexError, ValueError, TypeError) as err:
        raise SchemaError(f"$ref {ref!r} does not resolve", pointer=where) from err
    return node


def _join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986; a fragment-only reference keeps any base,
    a URN's too, which ``urljoin`` would drop)."""
    if ref.startswith("#"):
        return urllib.parse.urldefrag(base)[0] + ref
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", ref):
        return ref
    return urllib.parse.urljoin(base, ref)


@dataclass
class _Document:
    """The resources (``$id``) and anchors of one schema document, by absolute URI."""

    resources: dict[str, str] = field(default_factory=lambda: {"": ""})  # URI -> pointer
    anchors: dict[tuple[str, str], str] = field(default_factory=dict)  # (URI, name) -> pointer
    bases: dict[str, str] = field(default_factory=dict)  # pointer -> base URI (memo)
    legacy: bool = False  # drafts 3 and 4 spell $id as id

    def base_at(self, root: Any, ptr: str) -> str:
        """The base URI in force at ``ptr`` (the ``$id`` of the nearest resource around it)."""
        got = self.bases.get(ptr)
        if got is None:
            base, node = _own_id(root, "", self.legacy), root
            for part in ptr.split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                try:
                    node = node[int(part)] if isinstance(node, list) else node[part]
                except (KeyError, IndexError, ValueError, TypeError):
                    break
                base = _own_id(node, base, self.legacy)
            self.bases[ptr] = got = base
        return got


def _own_id(node: Any, base: str, legacy: bool) -> str:
    """The base URI inside ``node``: its ``$id`` (drafts 3-4: ``id``) resolved against ``base``."""
    if isinstance(node, dict):
        ident = node.get("id" if legacy else "$id")
        if isinstance(ident, str) and not ident.startswith("#"):
            return urllib.parse.urldefrag(_join_uri(base, ident))[0]
    return base


_DOCUMENTS: dict[int, tuple[Any, _Document]] = {}
_VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # JSON values, not schemas


def _document(root: Any) -> _Document:
    got = _DOCUMENTS.get(id(root))
    if got is not None and got[0] is root:
        return got[1]
    dialect = root.get("$schema") if isinstance(root, dict) else None
    doc = _Document(legacy=isinstance(dialect, str) and any(f"/draft-0{d}/" in dialect for d in "34"))
    id_keyword = "id" if doc.legacy else "$id"

    def walk(node: Any, pointer: str, base: str) -> None:
        if isinstance(node, dict):
            base = _own_id(node, base, doc.legacy)
            doc.resources.setdefault(base, pointer)
            ident = node.get(id_keyword)
            if isinstance(ident, str) and ident.startswith("#") and len(ident) > 1:  # drafts 4-7 anchor
                doc.anchors.setdefault((base, ident[1:]), pointer)
            for kw in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(kw), str):
                    doc.anchors.setdefault((base, node[kw]), pointer)
            for key, child in node.items():
                if key not in _VALUE_KEYWORDS:
                    walk(child, join_pointer(pointer, key), base)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, join_pointer(pointer, i), base)

    walk(root, "", "")
    doc.resources.setdefault(_own_id(root, "", doc.legacy), "")
    if len(_DOCUMENTS) > 64:
        _DOCUMENTS.clear()
    _DOCUMENTS[id(root)] = (root, doc)
    return doc
