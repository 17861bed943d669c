"""One conjunction of plain keywords merged into facts per kind (:class:`Merged`), exactly.

Why: a term of the disjunctive normal form (:mod:`structgen.frontends.json_schema.dnf`) is a
conjunction of subschemas and atoms; the lowering by kind (objects, arrays, strings, numbers)
reads one set of facts instead of every subschema. Each keyword's ``merge`` (a function here,
named by its registry entry in :mod:`structgen.frontends.json_schema.keywords`) folds its value
into a :class:`Gathering`; :meth:`Gathering.finish` applies the negation atoms and checks
``enum`` values:

- ``type``: the intersection of the kind sets (``integer`` ∩ ``number`` is ``integer``);
- ``properties``: per key, every conjunct's entry for it, else that conjunct's matching
  ``patternProperties``, else its ``additionalProperties``; ``required``: the union;
- counts, lengths and numeric bounds: the tightest (:func:`tighter`, one rule for all);
  ``multipleOf``: the least common multiple; every ``pattern`` and ``format`` is kept;
- ``enum``/``const``: the values valid under every conjunct (python-jsonschema checks them).

Example
-------
>>> from structgen.frontends.json_schema.keywords import merge
>>> [m.schema() for m in merge([{"type": ["string", "integer"], "minLength": 2},
...                             {"type": "string", "maxLength": 5, "not": {"const": "no"}}])]
[{'type': 'string', 'minLength': 2, 'maxLength': 5, 'not': {'enum': ['no']}}]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

from structgen.errors import SchemaError, UnsupportedFeatureError, no_value
from structgen.frontends.json_schema.numbers import Bounds, read_bounds
from structgen.frontends.json_schema.terms import (Absent, Conj, NotMultiple, NotString, NotType, NotValues, Part,
                                                   SomeMember, Term, TypeCheck, conj)
from structgen.frontends.json_schema.values import (KINDS, TYPES, contains_counts, enum_values, is_multiple,
                                                    join_pointer, json_equal, json_key, kind, kinds_of, lcm,
                                                    non_negative_int, tighter)
from structgen.frontends.json_schema.patterns import matches_avoided, pattern_matches

__all__ = ["Merged", "Gathering", "ValueChecks", "MemberRule", "ItemRule", "array_part", "merge_type",
           "merge_enum", "merge_members", "merge_property_names", "merge_required", "merge_items",
           "merge_contains", "merge_unique", "merge_pattern", "merge_format", "merge_numbers", "merge_count",
           "member_rule", "raise_refusal"]

#: One conjunct's say on members: (its part, its ``properties``, its ``additionalProperties`` as a
#: part or None, its ``patternProperties`` as (pattern, part) pairs)
MemberRule = tuple[Part, dict, "Part | None", tuple]
#: One conjunct's say on items: (its prefix parts, the part for the items after them or None)
ItemRule = tuple[list[Part], "Part | None"]


@dataclass
class Merged:
    """One conjunction of plain keywords, merged. Pointers name where each keyword came from
    (for counts and lengths: the keyword's own pointer)."""

    parts: tuple[Part, ...]
    # -- any value
    kinds: frozenset[str] = KINDS
    type_order: tuple[str, ...] = TYPES
    enum: list[Any] | None = None
    excluded: list[tuple[Any, str]] = field(default_factory=list)  # (value, pointer) from not
    # -- objects
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
    #: members the object must have (from not); the compiler takes up to MAX_ASKED_MEMBERS
    some_members: list[SomeMember] = field(default_factory=list)
    # -- arrays
    items: Conj | None = None  # items after the prefix; None: no conjunct constrains them
    prefix: list[Conj] = field(default_factory=list)  # prefixItems (array-form items), merged by position
    min_items: int = 0
    max_items: int | None = None
    min_items_pointer: str = ""
    max_items_pointer: str = ""
    #: (contains subschema, minContains, maxContains) of each conjunct with contains
    contains: list[tuple[Part, int, int | None]] = field(default_factory=list)
    unique: str | None = None  # pointer of a uniqueItems: true
    # -- strings
    min_length: int = 0
    max_length: int | None = None
    min_length_pointer: str = ""
    max_length_pointer: str = ""
    patterns: list[tuple[str, str]] = field(default_factory=list)  # (pattern, pointer of the keyword)
    formats: list[tuple[Any, str]] = field(default_factory=list)
    #: ("pattern" | "format", value, pointer) from not: strings must match none of these
    avoided: list[tuple[str, str, str]] = field(default_factory=list)
    # -- numbers
    bounds: Bounds = Bounds()
    divisor: Fraction | None = None
    #: (divisor, pointer) from not: numbers must be multiples of none of these
    non_divisors: list[tuple[Fraction, str]] = field(default_factory=list)
    number_pointer: str = ""  # of the schema holding the (first) numeric keyword

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
            return frozenset(kind(v) for v in self.enum)
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
            out["not"] = {"anyOf": [{k: value} for k, value, _ in self.avoided]}
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


@dataclass
class Gathering:
    """What the keywords of one term say, gathered part by part before :meth:`finish`."""

    m: Merged
    kinds: set[str] = field(default_factory=lambda: set(KINDS))
    type_sources: list[str] = field(default_factory=list)
    type_order: tuple[str, ...] | None = None
    divisor_seen: bool = False
    enum_source: tuple[str, str] | None = None
    members: list[MemberRule] = field(default_factory=list)
    arrays: list[ItemRule] = field(default_factory=list)
    additional_seen: bool = False
    #: ``refuse(keyword, pointer, hint)``: raises, or under ``lenient`` records and returns
    refuse: Callable[[str, str, str], None] | None = None
    #: the schema declares draft 3 to 7, where ``unevaluated*`` are not keywords
    old_draft: bool = False

    def finish(self, term: Term, checks: "ValueChecks", refuse: Callable[[str, str, str], None]) -> Merged:
        """The merged facts: members and items assembled, negation atoms applied, enum values checked."""
        m, kinds = self.m, self.kinds
        self._objects()
        self._arrays()
        for atom in term:
            if isinstance(atom, Absent):  # as a property whose value can be nothing
                c = m.properties.get(atom.key, Conj())
                m.properties[atom.key] = Conj(c.parts + (Part(False, atom.pointer, True),))
            elif isinstance(atom, NotType):
                kinds -= atom.kinds
                self.type_sources.append(atom.pointer + " (under not)")
            elif isinstance(atom, NotValues):
                m.excluded += [(v, atom.pointer) for v in atom.values]
            elif isinstance(atom, NotMultiple) and (atom.divisor, atom.pointer) not in m.non_divisors:
                m.non_divisors.append((atom.divisor, atom.pointer))
            elif isinstance(atom, SomeMember) and atom not in m.some_members:
                m.some_members.append(atom)
            elif isinstance(atom, NotString) and (atom.kind, atom.value, atom.pointer) not in m.avoided:
                m.avoided.append((atom.kind, atom.value, atom.pointer))
        if self.type_order is not None:
            m.type_order = self.type_order
        excluded = [v for v, _ in m.excluded]
        if any(v is None for v in excluded):
            kinds.discard("null")
        if any(v is True for v in excluded) and any(v is False for v in excluded):
            kinds.discard("boolean")
        if m.enum is not None:
            # the term is exactly its parts' local keywords and the negations: check just those
            m.enum = [v for v in m.enum if kind(v) in kinds and not any(json_equal(v, x) for x in excluded)]
            m.enum = checks.valid_values(m.enum, m.parts, m.pointer, self.enum_source)
            m.enum = [v for v in m.enum if not (isinstance(v, str) and matches_avoided(v, m.avoided))
                      and not any(is_multiple(v, d) for d, _ in m.non_divisors)]
            if not m.enum:
                raise no_value(UnsupportedFeatureError("enum", pointer=m.pointer,
                                                       hint="no enum value is left once the negations apply"))
            m.avoided, m.non_divisors, m.excluded = [], [], []
        else:
            for value, ptr in m.excluded:
                k = kind(value)
                if k in ("object", "array") and k in kinds:
                    refuse("not", ptr, f"excluding {k} values is not supported (only strings, numbers, "
                                       "booleans and null)")
            m.excluded = [(v, p) for v, p in m.excluded if kind(v) not in ("object", "array")]
            if not kinds:
                raise no_value(SchemaError(
                    "no type satisfies " + " and ".join(f"'{s}'" for s in self.type_sources) + " together",
                    pointer=self.type_sources[-1].removesuffix(" (under not)")))
        m.kinds = frozenset(kinds)
        return m

    def _objects(self) -> None:
        """A key's value answers to each conjunct's entry for it, its matching patterns, or that
        conjunct's additionalProperties when it has neither."""
        m, rules = self.m, self.members
        keys = list(dict.fromkeys(k for _, props, _, _ in rules for k in props))

        def value_of(key: str) -> Conj:
            found: list[Part] = []
            for p, props, extra, patterns in rules:
                mine = [sub for pattern, sub in patterns if pattern_matches(pattern, key, sub.pointer)]
                if key in props:
                    mine.insert(0, Part(props[key], join_pointer(p.pointer, "properties", key)))
                elif not mine and extra is not None:
                    mine = [extra]
                found += mine
            return conj(found)

        for key in keys:
            m.properties[key] = value_of(key)
        if any(patterns for *_, patterns in rules):
            m.key_rules = [(patterns, extra) for _, _, extra, patterns in rules if patterns or extra is not None]
            m.other_values = {key: value_of(key) for key in m.required if key not in m.properties}
        if self.additional_seen:
            m.additional = conj([extra for _, _, extra, _ in rules if extra is not None])

    def _arrays(self) -> None:
        """Position i answers to each conjunct's prefix entry i, or its items after the prefix."""
        m, arrays = self.m, self.arrays
        for i in range(max((len(prefix) for prefix, _ in arrays), default=0)):
            m.prefix.append(conj([prefix[i] if i < len(prefix) else rest for prefix, rest in arrays
                                  if i < len(prefix) or rest is not None]))
        rests = [rest for _, rest in arrays if rest is not None]
        if rests:
            m.items = conj(rests)


# ---------------------------------------------------------------- merges, one per keyword (or group)


def merge_type(g: Gathering, part: Part, kw: str) -> None:
    s, ptr = part.schema, part.pointer
    g.kinds &= kinds_of(s["type"], join_pointer(ptr, "type"))
    g.type_sources.append(join_pointer(ptr, "type"))
    if g.type_order is None:
        names = [s["type"]] if isinstance(s["type"], str) else s["type"]
        g.type_order = tuple(dict.fromkeys([*names, *TYPES]))


def merge_enum(g: Gathering, part: Part, kw: str) -> None:
    """``const`` and ``enum``: the first gives the values, the others are checked against them."""
    s, ptr = part.schema, part.pointer
    for kw in ("const", "enum"):
        if kw in s and g.m.enum is None:
            g.m.enum = list(enum_values(s, kw, ptr))
            g.enum_source = (ptr, kw)
        elif kw in s:
            enum_values(s, kw, ptr)  # vetted; the values are checked in finish


def member_rule(part: Part) -> MemberRule:
    """``properties``, ``additionalProperties`` and ``patternProperties`` of one schema, vetted."""
    s, ptr = part.schema, part.pointer
    props = s.get("properties", {})
    if not isinstance(props, dict):
        raise SchemaError("properties must be an object", pointer=join_pointer(ptr, "properties"))
    extra = s.get("additionalProperties")
    if extra is not None and not isinstance(extra, (bool, dict)):
        raise SchemaError("additionalProperties must be a schema", pointer=join_pointer(ptr, "additionalProperties"))
    patterns = s.get("patternProperties", {})
    if not isinstance(patterns, dict):
        raise SchemaError("patternProperties must be an object", pointer=join_pointer(ptr, "patternProperties"))
    return (part, props, None if extra is None else Part(extra, join_pointer(ptr, "additionalProperties")),
            tuple((pattern, Part(sub, join_pointer(ptr, "patternProperties", pattern)))
                  for pattern, sub in patterns.items()))


def merge_members(g: Gathering, part: Part, kw: str) -> None:
    """``properties``, ``additionalProperties``, ``patternProperties``: one member rule per schema."""
    rule = member_rule(part)
    g.additional_seen |= rule[2] is not None
    g.members.append(rule)


def merge_property_names(g: Gathering, part: Part, kw: str) -> None:
    g.m.property_names.append(Part(part.schema[kw], join_pointer(part.pointer, kw)))


def merge_required(g: Gathering, part: Part, kw: str) -> None:
    req, ptr = part.schema[kw], part.pointer
    if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
        raise SchemaError("required must be an array of strings", pointer=join_pointer(ptr, "required"))
    g.m.required += [r for r in dict.fromkeys(req) if r not in g.m.required]  # each key once


def merge_count(field_name: str, *, lower: bool) -> Callable[[Gathering, Part, str], None]:
    """The merge of one count keyword (``minItems`` …): the tightest bound, with its pointer."""
    def merge(g: Gathering, part: Part, kw: str) -> None:
        value = non_negative_int(part.schema, kw, part.pointer)
        if tighter(value, getattr(g.m, field_name), lower=lower):
            setattr(g.m, field_name, value)
            setattr(g.m, field_name + "_pointer", join_pointer(part.pointer, kw))
    merge.__name__ = f"merge_{field_name}"
    return merge


def array_part(s: dict, ptr: str) -> ItemRule:
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


def merge_items(g: Gathering, part: Part, kw: str) -> None:
    """``items``, ``prefixItems`` (``additionalItems`` beside an array-form ``items``)."""
    s = part.schema
    if "items" in s or "prefixItems" in s:
        g.arrays.append(array_part(s, part.pointer))


def merge_contains(g: Gathering, part: Part, kw: str) -> None:
    """``contains`` with its ``minContains``/``maxContains`` (those alone say nothing)."""
    s, ptr = part.schema, part.pointer
    if "contains" not in s:
        return
    lo, hi = contains_counts(s, ptr)
    g.m.contains.append((Part(s["contains"], join_pointer(ptr, "contains")), lo, hi))


def merge_unique(g: Gathering, part: Part, kw: str) -> None:
    if part.schema[kw] is True and g.m.unique is None:
        g.m.unique = join_pointer(part.pointer, kw)


def _merge_listed_string(field: str) -> Callable[[Gathering, Part, str], None]:
    """A merge for a string keyword whose values all hold (``pattern``, ``format``): each distinct
    value is kept once, with its pointer, in the merged facts' ``field`` list."""

    def merge(g: Gathering, part: Part, kw: str) -> None:
        value, where = part.schema[kw], join_pointer(part.pointer, kw)
        if not isinstance(value, str):
            raise SchemaError(f"{kw} must be a string, not {value!r}", pointer=where)
        listed = getattr(g.m, field)
        if value not in [v for v, _ in listed]:
            listed.append((value, where))

    return merge


merge_pattern = _merge_listed_string("patterns")
merge_format = _merge_listed_string("formats")


def merge_numbers(g: Gathering, part: Part, kw: str) -> None:
    """Numeric bounds (drafts 4 to 2020-12 spellings) met, ``multipleOf`` the least common multiple."""
    m, ptr = g.m, part.pointer
    bounds, divisor = read_bounds(part.schema, ptr)
    m.bounds = m.bounds.meet(bounds)
    if divisor is not None:
        m.divisor = divisor if m.divisor is None else lcm(m.divisor, divisor)
    if not m.number_pointer or (divisor is not None and not g.divisor_seen):
        m.number_pointer = ptr  # numbers.py reports multipleOf errors below it
    g.divisor_seen |= divisor is not None


# ---------------------------------------------------------------- enum values, checked


class ValueChecks:
    """Whether values satisfy subschemas: python-jsonschema validators over each part's local
    keywords (memoized). ``local``: the keywords a part is checked on; ``companions``: keywords
    checked beside one of them (``unevaluatedProperties`` needs its ``allOf`` to know what is
    evaluated)."""

    def __init__(self, root: Any, local: frozenset[str], companions: dict[str, frozenset[str]]) -> None:
        self.root = root
        self.local = local
        self.companions = companions
        self._checkers: dict[tuple[str, str | None], Any] = {}

    def valid_values(self, values: list[Any], parts: tuple[Part, ...], pointer: str,
                     source: tuple[str, str] | None = None) -> list[Any]:
        """The values (deduplicated) valid under every part; ``source`` (pointer, keyword) is
        where they come from, not checked again."""
        kept: list[Any] = []
        seen: set = set()  # json_key of each kept value: a large enum deduplicates in linear time
        for v in values:
            key = json_key(v)
            if key not in seen and self.valid_under(v, parts, source):
                kept.append(v)
                seen.add(key)
        if not kept:
            raise no_value(UnsupportedFeatureError("enum", pointer=pointer,
                                                   hint="no enum value satisfies the other keywords"))
        return kept

    def valid_under(self, value: Any, parts: tuple[Part, ...], source: tuple[str, str] | None = None) -> bool:
        """Whether ``value`` satisfies every part (python-jsonschema's verdict)."""
        for p in parts:
            drop = source[1] if source is not None and source[0] == p.pointer else None
            checker = self.checker(p, drop)
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

    def checker(self, part: Part, drop: str | None) -> Any:
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
            local = ({k: x for k, x in schema.items() if k in self.local and k != drop}
                     if isinstance(schema, dict) else {})
            for kw in list(local):
                local.update({c: schema[c] for c in self.companions.get(kw, ()) if c in schema})
            if not local:
                self._checkers[key] = None
            elif local.keys() == {"type"}:  # the common case (a typed enum): no validator needed
                self._checkers[key] = TypeCheck(frozenset(kinds_of(local["type"], join_pointer(part.pointer, "type"))))
            else:
                from jsonschema import Draft202012Validator, validators

                cls = validators.validator_for(self.root if isinstance(self.root, dict) else {},
                                               default=Draft202012Validator)
                # evolved from the root: references inside resolve in the document
                self._checkers[key] = cls(self.root).evolve(schema=local)
        return self._checkers[key]


def raise_refusal(keyword: str, pointer: str, hint: str) -> None:
    """The strict refusal (no ``lenient``): an :class:`~structgen.errors.UnsupportedFeatureError`."""
    raise UnsupportedFeatureError(keyword, pointer=pointer, hint=hint)
