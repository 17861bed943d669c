"""Objects of a JSON schema as grammar rules: members in order, extra keys by pattern, counts.

An object is written as its defined properties in schema order (each optional one may be left
out), then additional members. What an additional member may be depends on its key:

- no ``patternProperties``: any key but the defined ones (the shared JSON-string counter with
  those keys excluded), valued by ``additionalProperties``;
- ``patternProperties``: the keys are split into regions by the patterns they match (a key
  matching ``^x-`` and not ``^y-``, ...); each region is a key automaton (pattern automata
  intersected, the others subtracted, the defined keys taken out), valued by the conjunction of
  its patterns' subschemas, and the region no pattern matches by ``additionalProperties``;
- ``propertyNames``: every key automaton is intersected with the string language of its
  schema, and a defined key that it rejects is forbidden.

``minProperties``/``maxProperties`` count members: the rule for "members from ``i`` on" is split
by the count written so far (capped where larger counts behave alike), and a member is offered
only when the counts can still end in range, so no state is a dead end.

Example
-------
>>> from structgen.frontends.json_schema.translate import schema_to_grammar
>>> from structgen.engine.compiled import CompiledGrammar
>>> from structgen.engine.vocab import Vocabulary
>>> g = schema_to_grammar({"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
...                        "additionalProperties": False}, whitespace="compact")
>>> m = CompiledGrammar(g, Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])).matcher()
>>> [m.advance(b) for b in b'{"x-a":1,"y'][-1]
False
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

from structgen.core.budget import BudgetExceededError, affordable
from structgen.errors import CompileError, SchemaError, UnsupportedFeatureError, is_no_value, no_value
from structgen.core.ir import Counted, Expr, Fsm, Lit, Ref, Repeat, Seq, Unordered, alt, digest, seq
from structgen.core.unordered import Slots
from structgen.frontends.json_text import JSON_CHAR, char_spelling_set, spellings
from structgen.frontends.regex.ecma import char_set_ir, pattern_to_ir
from structgen.core.regular import difference, intersect, matcher
from structgen.frontends.json_schema.facts import Merged
from structgen.frontends.json_schema.lowering import Lowering
from structgen.frontends.json_schema.scalars import string_content
from structgen.frontends.json_schema.terms import Conj, Part
from structgen.frontends.json_schema.values import join_pointer


__all__ = ["object_expr", "object_of", "object_unordered", "Needs", "MAX_ASKED_MEMBERS", "key_except", "MAX_KEY_REGIONS",
           "NOTHING"]

#: patternProperties whose patterns split keys into more regions than this (the sets of
#: patterns a key can match at once, over the merged schemas) are refused: up to 2**patterns
#: when they overlap, patterns + 1 when they are disjoint (the common case: distinct prefixes).
MAX_KEY_REGIONS = 16

Member = tuple[str, Ref, bool]  # key, value rule, required


def object_expr(cv: Lowering, m: Merged) -> Expr:
    """The grammar of the objects ``m`` allows (``m`` is one merged alternative of type object)."""
    names = _names_language(cv, m.property_names) if m.property_names else None
    name_ok = None if names is None else matcher(names)
    asked = _asked_members(cv, m)
    members: list[Member] = []
    keys = list(m.properties) + [k for k in m.required if k not in m.properties]
    # each key's literal is charged when it is made (Lowering.key_literal), after its value: an
    # object whose keys alone cannot fit is refused before 70,000 values are translated
    affordable((2 if cv.canonical else 4) * sum(map(len, keys)))
    spelt = {key: json.dumps(key, ensure_ascii=False)[1:-1].encode() for key in keys}
    for key in keys:
        required = key in m.required
        if name_ok is not None and not name_ok(spelt[key]):
            if required:
                raise no_value(SchemaError(f"required key {key!r} fails propertyNames",
                                           pointer=m.property_names[0].pointer))
            continue  # forbidden: it is also outside every additional key's language
        # a required key that can have no value: no object (the error says why); an optional one
        # is left out
        value = cv.position(m.value_at(key)) if required else cv.position_or_none(m.value_at(key))
        if value is not None:
            members.append((key, value, required))
    extra = _extra_member(cv, m, set(keys), names)
    needs = None if not asked else _needs(cv, m, asked, members, spelt, set(keys), names)
    lo, hi = m.min_properties, m.max_properties
    if hi is not None and hi < lo:
        raise no_value(SchemaError("maxProperties is below minProperties: no object fits",
                                   pointer=m.max_properties_pointer))
    if not cv.canonical and (len(members) > 1 or (members and (extra is not None or needs is not None))):
        return object_unordered(cv, members, extra, lo, hi, m.min_properties_pointer or m.pointer, needs)
    return object_of(cv, members, extra, lo, hi, m.min_properties_pointer or m.pointer, needs)


# -- members that ``not`` asks for

#: At most this many members asked for by negations in one object (a rule per subset of them).
MAX_ASKED_MEMBERS = 4


@dataclass
class Needs:
    """Members an object must have (``not`` over ``additionalProperties``, ``patternProperties``,
    ``propertyNames``), numbered as bits of ``full``. ``member_hits[key][bits]``: the value of a
    named member that is every member of ``bits`` at once; ``extra_hits[bits]``: an additional
    ``key : value`` that is."""

    full: int
    member_hits: dict[str, dict[int, Ref]]
    extra_hits: dict[int, Expr]

    @functools.cached_property
    def extra_cover(self) -> int:  # what additional members can provide (asked in loops: once)
        out = 0
        for bits in self.extra_hits:
            out |= bits
        return out

    def hits(self, key: str, got: int) -> list[tuple[int, Ref]]:
        """(bits, value) for the member ``key`` providing some of what ``got`` lacks."""
        return [(bits, ref) for bits, ref in self.member_hits.get(key, {}).items() if not bits & got]


def _with(conj: Conj, also: list[Part]) -> Conj:
    return Conj(conj.parts + tuple(also)) if also else conj


def _asked_members(cv: Lowering, m: Merged) -> list[tuple[Expr, Part | None]]:
    """The key language and value schema of each member the object must have."""
    if len(m.some_members) > MAX_ASKED_MEMBERS:
        raise UnsupportedFeatureError("not", pointer=m.some_members[MAX_ASKED_MEMBERS].pointer,
                                      hint=f"{len(m.some_members)} negations each require a member "
                                           f"(limit {MAX_ASKED_MEMBERS})")
    out = []
    anything = Repeat(_char(cv), 0, None)
    for some in m.some_members:
        what = f"the keys `not` asks for at {some.pointer}"
        kind = some.keys[0]
        if kind == "pattern":
            keys = pattern_to_ir(some.keys[1], pointer=some.pointer, canonical=cv.canonical)
        elif kind == "names":
            keys = difference(anything, _names_language(cv, [some.keys[1]]), what=what)
        else:  # extra: neither named nor matched by a pattern
            _, named, patterns = some.keys
            taken = [spellings(k) for k in named]
            taken += [pattern_to_ir(p, pointer=some.pointer, canonical=cv.canonical) for p in patterns]
            keys = difference(anything, alt(*taken), what=what) if taken else anything
        out.append((keys, some.value))
    return out


def _needs(cv: Lowering, m: Merged, asked: list[tuple[Expr, Part | None]], members: list[Member],
           spelt: dict[str, bytes], defined: set[str], names: Expr | None) -> Needs:
    """Which named and additional members can be which asked-for members (every subset)."""
    full = (1 << len(asked)) - 1
    accepts = [matcher(keys) for keys, _ in asked]
    member_hits: dict[str, dict[int, Ref]] = {}
    for key, _, _ in members:
        mine = sum(1 << j for j, ok in enumerate(accepts) if ok(spelt[key]))
        for bits in range(1, full + 1):
            if bits & mine == bits:
                also = [asked[j][1] for j in range(len(asked)) if bits >> j & 1 and asked[j][1] is not None]
                ref = cv.position_or_none(_with(m.value_at(key), also))
                if ref is not None:
                    member_hits.setdefault(key, {})[bits] = ref
    extra_hits: dict[int, Expr] = {}
    parts = _key_parts(cv, m, defined)  # the same for every subset: built once
    for bits in range(1, full + 1):
        chosen = [asked[j] for j in range(len(asked)) if bits >> j & 1]
        keys = chosen[0][0] if len(chosen) == 1 else intersect(*(k for k, _ in chosen), what="the keys `not` asks for")
        hit = _extra_member(cv, m, defined, names, (keys, [v for _, v in chosen if v is not None]), parts)
        if hit is not None:
            extra_hits[bits] = hit
    needs = Needs(full, member_hits, extra_hits)
    cover = needs.extra_cover
    for hits in member_hits.values():
        for bits in hits:
            cover |= bits
    if cover != full:
        missing = next(j for j in range(len(asked)) if not cover >> j & 1)
        raise no_value(SchemaError("no member of this object can be the one `not` asks for",
                                   pointer=m.some_members[missing].pointer))
    return needs


# -- additional members


def _char(cv: Lowering) -> Expr:
    return char_set_ir([(0, 0x10FFFF)], canonical=True) if cv.canonical else JSON_CHAR


#: The empty language: no string content at all.
NOTHING = Fsm(((),), frozenset())


def _names_language(cv: Lowering, parts: list[Part]) -> Expr:
    """The string contents the ``propertyNames`` schemas ``parts`` all allow (their union over
    merged alternatives, each the string automaton the frontend builds for a string schema)."""
    options: list[Expr] = []
    try:
        alternatives = cv.merger.alternatives(Conj(tuple(parts)))
    except SchemaError as err:
        if not is_no_value(err):
            raise
        return NOTHING  # propertyNames: false, say: only the empty object
    for alternative in alternatives:
        if alternative.enum is not None:
            options += [spellings(v) for v in alternative.enum if isinstance(v, str)]
        elif "string" in alternative.kinds:
            options.append(string_content(cv, alternative))
    return alt(*options) if options else NOTHING


def _key_parts(cv: Lowering, m: Merged, defined: set[str]) -> tuple[dict[str, Expr], list[Expr], list]:
    """What every additional member of the object shares: the languages of its key patterns,
    the keys outside ``defined`` (a list of at most one), and the key regions."""
    patterns = list(dict.fromkeys(p for rules, _ in m.key_rules for p, _ in rules))
    anything = Repeat(_char(cv), 0, None)
    languages = {}
    for p in patterns:
        where = next(sub.pointer for rules, _ in m.key_rules for q, sub in rules if q == p)
        try:
            languages[p] = pattern_to_ir(p, pointer=where, canonical=cv.canonical)
        except UnsupportedFeatureError as err:
            raise UnsupportedFeatureError("patternProperties", pointer=where, hint=err.hint) from err
    not_named = ([difference(anything, alt(*(spellings(k) for k in defined)), what=f"the additional keys at {m.pointer or '/'}")]
                 if defined else [])
    regions = _regions(cv, m, patterns, languages)
    if regions is None:  # lenient dropped them: every key is additional
        regions = [([], [])]
    return languages, not_named, regions


def _extra_member(cv: Lowering, m: Merged, defined: set[str], names: Expr | None,
                  some: tuple[Expr, list[Part]] | None = None,
                  parts: "tuple[dict[str, Expr], list[Expr], list] | None" = None) -> Expr | None:
    """``key : value`` for the keys outside ``defined`` (and inside ``names``, the
    ``propertyNames`` language), or None when there can be none. With ``some`` (keys, value
    schemas): only the members that are also members ``not`` asks for. ``parts``: what
    :func:`_key_parts` gives, when the caller asks for several ``some``."""
    colon = cv.colon
    if not m.key_rules and names is None and some is None:
        value = _additional_value(cv, m)
        return None if value is None else seq(key_except(cv, defined), colon, value)
    languages, not_named, regions = parts if parts is not None else _key_parts(cv, m, defined)
    anything = Repeat(_char(cv), 0, None)
    base: list[Expr] = list(not_named)
    if names is not None:
        base.append(names)
    if some is not None:
        base.append(some[0])
    options: list[Expr] = []
    for inside, outside in regions:
        value = (_additional_value(cv, m, some and some[1]) if not inside
                 else _region_value(cv, m, inside, some and some[1]))
        if value is None:
            continue
        pieces = [languages[p] for p in inside] + base
        if outside:
            pieces.append(difference(anything, alt(*(languages[p] for p in outside)), what=f"the additional keys at {m.pointer or '/'}"))
        try:
            key = (anything if not pieces else pieces[0] if len(pieces) == 1
                   else intersect(*pieces, what=f"the additional keys at {m.pointer or '/'}"))
        except BudgetExceededError:
            raise
        except CompileError as err:
            raise UnsupportedFeatureError("patternProperties", pointer=m.pointer, hint=str(err)) from err
        if isinstance(key, Fsm) and not key.accept:
            continue  # no key falls in this region
        options.append(seq(cv.rule(f"key_{digest(key)[:10]}", seq(Lit(b'"'), key, Lit(b'"'))), colon, value))
    return alt(*options) if options else None


def _regions(cv: Lowering, m: Merged, patterns: list[str],
             languages: dict[str, Expr]) -> list[tuple[list[str], list[str]]] | None:
    """The regions of keys: (patterns a key matches, patterns it must not match), found by
    intersecting pattern by pattern and dropping empty intersections as they appear; a pattern
    disjoint from a region's patterns is in neither list (nothing to take out)."""
    found: list[tuple[list[str], list[str]]] = []
    what = f"the key patterns at {m.pointer or '/'}"

    def walk(i: int, inside: list[str], outside: list[str], language: Expr | None) -> None:
        if len(found) > MAX_KEY_REGIONS:
            return
        if i == len(patterns):
            found.append((inside, outside))
            return
        both = languages[patterns[i]] if language is None else intersect(language, languages[patterns[i]], what=what)
        if isinstance(both, Fsm) and not both.accept:  # disjoint from the region: nothing to take out
            walk(i + 1, inside, outside, language)
            return
        walk(i + 1, inside + [patterns[i]], outside, both)
        walk(i + 1, inside, outside + [patterns[i]], language)

    try:
        walk(0, [], [], None)
    except BudgetExceededError:
        raise
    except CompileError as err:
        raise UnsupportedFeatureError("patternProperties", pointer=m.pointer, hint=str(err)) from err
    if len(found) > MAX_KEY_REGIONS:
        cv.refuse("patternProperties", m.pointer,
                  f"{len(patterns)} key patterns split keys into more than {MAX_KEY_REGIONS} regions "
                  "(sets of patterns one key can match)")
        return None  # lenient: the patterns dropped
    return found


def _additional_value(cv: Lowering, m: Merged, also: list[Part] | None = None) -> Ref | None:
    """The value of a key no pattern matches: ``additionalProperties`` (strict: closed unless
    given) and ``also``, or None when no such key can be there."""
    if m.key_rules:
        extras = [extra for _, extra in m.key_rules if extra is not None]
        given = m.additional is not None
        conj = Conj(tuple(extras)) if extras else Conj()
    else:
        given = m.additional is not None
        conj = m.additional if given else Conj()
    if not given and cv.strict:
        return None
    conj = _with(conj, also)
    if not conj.parts:
        return cv.convert(True, join_pointer(m.pointer, "additionalProperties"))
    return cv.position_or_none(conj)


def _region_value(cv: Lowering, m: Merged, inside: list[str], also: list[Part] | None = None) -> Ref | None:
    """The value of a key matching exactly the patterns ``inside``: their subschemas, and the
    ``additionalProperties`` of conjuncts whose own patterns it does not match (and ``also``)."""
    parts: list[Part] = []
    for rules, extra in m.key_rules:
        mine = [sub for p, sub in rules if p in inside]
        parts += mine if mine else ([extra] if extra is not None else [])
    return cv.position_or_none(_with(Conj(tuple(parts)), also))


def key_except(cv: Lowering, defined: set[str]) -> Expr:
    """A JSON string whose decoded value is none of ``defined``, however it is spelt.

    The body is the shared JSON-string counter with the defined keys excluded (every spelling of
    every character), so masks inside the key stay the shared string masks.
    """
    if not defined:
        return cv.primitive("string")
    digest = hashlib.sha1(json.dumps(sorted(defined)).encode()).hexdigest()[:10]
    words = frozenset(tuple(map(char_spelling_set, key)) for key in defined)
    chars = cv.rule(f"chars_except_{digest}", Counted(JSON_CHAR, 0, None, words))
    return cv.rule(f"key_except_{digest}", seq(Lit(b'"'), chars, Lit(b'"')))


# -- member sequences


def object_of(cv: Lowering, members: list[Member], extra: Expr | None, lo: int = 0,
              hi: int | None = None, count_pointer: str = "", needs: Needs | None = None) -> Expr:
    """``{`` members in order (optional ones may be left out), then additional ones ``}``, with
    ``lo``..``hi`` members in all.

    ``tail(i, c, got)``: what may follow once ``c`` members are written, from member ``i`` on;
    shared rules, so the object stays linear in its properties (times the counts that matter).
    With ``needs`` (members ``not`` asks for), ``got`` holds the bits of those written so far,
    and ``}`` needs them all. A member is offered only where the object can still end in range
    with every bit, so no state is a dead end.
    """
    ws = cv.ws
    comma = cv.comma
    colon = cv.colon
    n = len(members)
    cap = hi if hi is not None else lo  # counts above it behave alike
    full = needs.full if needs is not None else 0
    extra_hits = needs.extra_hits if needs is not None else {}
    inf = float("inf")

    def hits(i: int, got: int) -> list[tuple[Ref, int]]:  # member i as some asked-for members
        return [(ref, got | bits) for bits, ref in needs.hits(members[i][0], got)] if needs is not None else []

    fewest_memo: dict[tuple[int, int], float] = {}

    def fewest(i: int, got: int) -> float:  # fewest members still to write, from member i, to end with every bit
        key = (i, got)
        if key not in fewest_memo:
            if i == n:  # additional members only
                best = 0 if got == full else min((1 + fewest(n, got | bits) for bits in extra_hits
                                                 if not bits & got), default=inf)
            else:
                best = 1 + min([fewest(i + 1, got)] + [fewest(i + 1, after) for _, after in hits(i, got)])
                if not members[i][2]:
                    best = min(best, fewest(i + 1, got))
            fewest_memo[key] = best
        return fewest_memo[key]

    # Filled from the last member back, supersets of bits first, so that each call finds what it
    # asks for already made: called from the front, the recursion was one frame per member (an
    # object of 60,000 properties ran out of Python's stack).
    sets = [full]
    while sets[-1]:
        sets.append((sets[-1] - 1) & full)
    sets.sort(key=lambda bits: -bin(bits).count("1"))
    for i in range(n, -1, -1):
        for got in sets:
            fewest(i, got)

    def feasible(i: int, c: int, got: int = full) -> bool:  # the object can still end well
        most = inf if extra is not None else c + (n - i)
        least = c + fewest(i, got)
        return least <= (inf if hi is None else hi) and most >= max(lo, least)

    uid = cv.uid()

    def extras(c: int, got: int = full) -> Expr:  # additional members after c members (c >= 1)
        if got == full:
            if extra is None:
                return Seq(())
            room = None if hi is None else hi - c
            return Repeat(seq(comma, extra), max(lo - c, 0), room)
        c = min(c, cap) if hi is None else c
        name = f"obj{uid}_extras{c}_got{got}"
        if name not in cv.rules:
            if hi is None and c >= lo:  # counts are met: any additional members, some asked for
                cv.rules[name] = seq(Repeat(seq(comma, extra), 0, None), alt(*(
                    seq(comma, hit, extras(c + 1, got | bits)) for bits, hit in extra_hits.items()
                    if not bits & got and feasible(n, c + 1, got | bits))))
            else:  # one member at a time while counts still matter (finitely many c)
                options = [seq(comma, extra, extras(c + 1, got))] if feasible(n, c + 1, got) else []
                options += [seq(comma, hit, extras(c + 1, got | bits)) for bits, hit in extra_hits.items()
                            if not bits & got and feasible(n, c + 1, got | bits)]
                cv.rules[name] = alt(*options)
        return Ref(name)

    def written(i: int, got: int) -> list[tuple[Ref, int]]:  # member i's values, with the bits after
        return [(members[i][1], got)] + hits(i, got)

    def tail(i: int, c: int, got: int = full) -> Expr:
        c = min(c, cap) if hi is None else c
        if i == n:
            return extras(c, got)
        name = f"obj{uid}_tail{i}_{c}" + ("" if got == full else f"_got{got}")
        if name not in cv.rules:
            key, _, req = members[i]
            options: list[Expr] = []
            for value, after in written(i, got):
                if feasible(i + 1, c + 1, after):
                    options.append(seq(comma, cv.key_literal(key), colon, value, tail(i + 1, c + 1, after)))
            if not req and feasible(i + 1, c, got):
                options.append(tail(i + 1, c, got))
            cv.rules[name] = alt(*options)  # never empty: entered only when feasible
        return Ref(name)

    try:
        firsts: list[Expr] = []
        for i, (key, _, req) in enumerate(members):
            for value, after in written(i, 0):
                if feasible(i + 1, 1, after):
                    firsts.append(seq(cv.key_literal(key), colon, value, tail(i + 1, 1, after)))
            if req:
                break
        else:
            if extra is not None:  # the first additional member is some of those asked for, or none
                if feasible(n, 1, 0):
                    firsts.append(seq(extra, extras(1, 0)))
                firsts += [seq(hit, extras(1, bits)) for bits, hit in extra_hits.items() if feasible(n, 1, bits)]
        options: list[Expr] = []
        if lo == 0 and full == 0 and not any(req for *_, req in members):
            options.append(seq(Lit(b"{"), ws, Lit(b"}")))
        if firsts:
            options.append(seq(Lit(b"{"), ws, alt(*firsts), ws, Lit(b"}")))
        if not options:
            raise no_value(SchemaError(f"no object has {lo} to {hi} members here", pointer=count_pointer))
        return alt(*options)
    finally:  # the helpers call themselves through their cells: emptied, they are freed at once
        hits = fewest = feasible = extras = written = tail = None  # type: ignore[assignment]  # noqa: F841


def object_unordered(cv: Lowering, members: list[Member], extra: Expr | None, lo: int = 0,
                     hi: int | None = None, count_pointer: str = "", needs: Needs | None = None) -> Expr:
    """Members in any order, additional ones anywhere, for walking (JSON objects are unordered):
    ``{`` then one :class:`~structgen.core.ir.Unordered` rule over the members ``}``.

    Each member is a rule ``"key" : value`` filling its own slot (so a defined key is written at
    most once), each member ``not`` asks for (``needs``) a rule that fills the same slot and gives
    its bits; additional members fill no slot. The slots written, the bits got and the count live
    beside the parse state, so the object stays linear in its properties, whatever their number;
    ``lo``..``hi`` members in all, required ones and every asked-for bit before ``}``.
    """
    ws = cv.ws
    colon = cv.colon
    uid = cv.uid()
    items: list[Ref] = []
    slots: list[int] = []
    gives: list[int] = []

    def add(name: str, body: Expr, slot: int, bits: int) -> None:
        items.append(cv.rule(f"obj{uid}_{name}", body, mergeable=True))  # equal members: one rule
        slots.append(slot)
        gives.append(bits)

    for i, (key, value, _) in enumerate(members):
        add(f"m{i}", seq(cv.key_literal(key), colon, value), i, 0)
        if needs is not None:
            for bits, ref in needs.member_hits.get(key, {}).items():
                add(f"m{i}_got{bits}", seq(cv.key_literal(key), colon, ref), i, bits)
    if extra is not None:
        add("extra", extra, -1, 0)
    if needs is not None:
        for bits, hit in needs.extra_hits.items():
            add(f"extra_got{bits}", hit, -1, bits)
    required = sum(1 << i for i, (_, _, req) in enumerate(members) if req)
    full = needs.full if needs is not None else 0
    options: list[Expr] = []
    if lo == 0 and not required and not full:
        options.append(seq(Lit(b"{"), ws, Lit(b"}")))
    if items:
        body = Unordered(tuple(items), tuple(slots), cv.comma, required, lo, hi,
                         tuple(gives) if full else (), full)
        if Slots.of(body).can_add(0, 0, 0):  # equal objects (their members merged): one rule
            options.append(seq(Lit(b"{"), ws, cv.rule(f"obj{uid}_members", body, mergeable=True), ws, Lit(b"}")))
    if not options:
        raise no_value(SchemaError(f"no object has {lo} to {hi} members here", pointer=count_pointer))
    return alt(*options)
