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
>>> from structgen.json_schema import schema_to_grammar
>>> from structgen.compiler import CompiledGrammar
>>> from structgen.vocab import Vocabulary
>>> g = schema_to_grammar({"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
...                        "additionalProperties": False}, whitespace="compact")
>>> m = CompiledGrammar(g, Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])).matcher()
>>> [m.advance(b) for b in b'{"x-a":1,"y'][-1]
False
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from .budget import BudgetExceededError
from .errors import CompileError, SchemaError, UnsupportedFeatureError, is_no_value, no_value
from .ir import Counted, Expr, Fsm, Lit, Ref, Repeat, Seq, alt, seq
from .json_text import JSON_CHAR, char_encodings, spellings
from .regex import char_set_ir, pattern_to_ir
from .regular import difference, intersect, matcher
from .schema_merge import Conj, Merged, Part, join_pointer

if TYPE_CHECKING:
    from .json_schema import _Converter

__all__ = ["object_expr", "object_of", "key_except", "MAX_KEY_PATTERNS", "MAX_ANY_ORDER_KEYS", "NOTHING"]

#: patternProperties with more patterns than this (over the merged schemas) are refused: the
#: key regions grow as 2**patterns.
MAX_KEY_PATTERNS = 4
#: An object whose schema gives its keys no one order matches them in any order when walking,
#: up to this many keys (one rule per set of keys written).
MAX_ANY_ORDER_KEYS = 6

Member = tuple[str, Ref, bool]  # key, value rule, required


def object_expr(cv: "_Converter", m: Merged) -> Expr:
    """The grammar of the objects ``m`` allows (``m`` is one merged alternative of type object)."""
    names = _names_language(cv, m) if m.property_names else None
    name_ok = None if names is None else matcher(names)
    members: list[Member] = []
    keys = list(m.properties) + [k for k in m.required if k not in m.properties]
    for key in keys:
        required = key in m.required
        if name_ok is not None and not name_ok(json.dumps(key, ensure_ascii=False)[1:-1].encode()):
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
    lo, hi = m.min_properties, m.max_properties
    if hi is not None and hi < lo:
        raise no_value(SchemaError("maxProperties is below minProperties: no object fits",
                                   pointer=m.max_properties_pointer))
    if (not m.one_order and not cv.canonical and len(members) <= MAX_ANY_ORDER_KEYS
            and (lo, hi) == (0, None)):
        return object_any_order(cv, members, extra)
    return object_of(cv, members, extra, lo, hi, m.min_properties_pointer or m.pointer)


# -- additional members


def _char(cv: "_Converter") -> Expr:
    return char_set_ir([(0, 0x10FFFF)], canonical=True) if cv.canonical else JSON_CHAR


#: The empty language: no string content at all.
NOTHING = Fsm(((),), frozenset())


def _names_language(cv: "_Converter", m: Merged) -> Expr:
    """The string contents every ``propertyNames`` schema allows (their union over merged
    alternatives, each the string automaton the frontend builds for a string schema)."""
    options: list[Expr] = []
    try:
        alternatives = cv.merger.alternatives(Conj(tuple(m.property_names)))
    except SchemaError as err:
        if not is_no_value(err):
            raise
        return NOTHING  # propertyNames: false, say: only the empty object
    for alternative in alternatives:
        if alternative.enum is not None:
            options += [spellings(v) for v in alternative.enum if isinstance(v, str)]
        elif "string" in alternative.kinds:
            options.append(cv.string_content(alternative))
    return alt(*options) if options else NOTHING


def _extra_member(cv: "_Converter", m: Merged, defined: set[str], names: Expr | None) -> Expr | None:
    """``key : value`` for the keys outside ``defined`` (and inside ``names``, the
    ``propertyNames`` language), or None when there can be none."""
    ws = cv.ws
    colon = seq(ws, Lit(b":"), ws)
    if not m.key_rules and names is None:
        value = _additional_value(cv, m)
        return None if value is None else seq(key_except(cv, defined), colon, value)
    patterns = list(dict.fromkeys(p for rules, _ in m.key_rules for p, _ in rules))
    if len(patterns) > MAX_KEY_PATTERNS:
        cv.refuse("patternProperties", m.pointer,
                  f"{len(patterns)} key patterns (limit {MAX_KEY_PATTERNS}: keys split into 2**n regions)")
        patterns = []
    char = _char(cv)
    anything = Repeat(char, 0, None)
    languages = {}
    for p in patterns:
        where = next(sub.pointer for rules, _ in m.key_rules for q, sub in rules if q == p)
        try:
            languages[p] = pattern_to_ir(p, pointer=where, canonical=cv.canonical)
        except UnsupportedFeatureError as err:
            raise UnsupportedFeatureError("patternProperties", pointer=where, hint=err.hint) from err
    base: list[Expr] = []
    if defined:
        base.append(difference(anything, alt(*(spellings(k) for k in defined)), what=f"the additional keys at {m.pointer or '/'}"))
    if names is not None:
        base.append(names)
    options: list[Expr] = []
    for region in range(1 << len(patterns)):
        inside = [p for i, p in enumerate(patterns) if region >> i & 1]
        outside = [p for p in patterns if p not in inside]
        value = (_additional_value(cv, m) if not inside
                 else _region_value(cv, m, inside))
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
        digest = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
        options.append(seq(cv.rule(f"key_{digest}", seq(Lit(b'"'), key, Lit(b'"'))), colon, value))
    return alt(*options) if options else None


def _additional_value(cv: "_Converter", m: Merged) -> Ref | None:
    """The value of a key no pattern matches: ``additionalProperties`` (strict: closed unless
    given), or None when no such key can be there."""
    if m.key_rules:
        extras = [extra for _, extra in m.key_rules if extra is not None]
        given = m.additional is not None
        conj = Conj(tuple(extras)) if extras else Conj()
    else:
        given = m.additional is not None
        conj = m.additional if given else Conj()
    if not given and cv.strict:
        return None
    if not conj.parts:
        return cv.convert(True, join_pointer(m.pointer, "additionalProperties"))
    return cv.position_or_none(conj)


def _region_value(cv: "_Converter", m: Merged, inside: list[str]) -> Ref | None:
    """The value of a key matching exactly the patterns ``inside``: their subschemas, and the
    ``additionalProperties`` of conjuncts whose own patterns it does not match."""
    parts: list[Part] = []
    for rules, extra in m.key_rules:
        mine = [sub for p, sub in rules if p in inside]
        parts += mine if mine else ([extra] if extra is not None else [])
    return cv.position_or_none(Conj(tuple(parts)))


def key_except(cv: "_Converter", defined: set[str]) -> Expr:
    """A JSON string whose decoded value is none of ``defined``, however it is spelt.

    The body is the shared JSON-string counter with the defined keys excluded (every spelling of
    every character), so masks inside the key stay the shared string masks.
    """
    if not defined:
        return cv.primitive("string")
    digest = hashlib.sha1(json.dumps(sorted(defined)).encode()).hexdigest()[:10]
    words = frozenset(tuple(frozenset(char_encodings(ch)) for ch in key) for key in defined)
    chars = cv.rule(f"chars_except_{digest}", Counted(JSON_CHAR, 0, None, words))
    return cv.rule(f"key_except_{digest}", seq(Lit(b'"'), chars, Lit(b'"')))


# -- member sequences


def object_of(cv: "_Converter", members: list[Member], extra: Expr | None, lo: int = 0,
              hi: int | None = None, count_pointer: str = "") -> Expr:
    """``{`` members in order (optional ones may be left out), then additional ones ``}``, with
    ``lo``..``hi`` members in all.

    ``tail(i, c)``: what may follow once ``c`` members are written, from member ``i`` on; shared
    rules, so the object stays linear in its properties (times the counts that matter).
    """
    ws = cv.ws
    comma = seq(ws, Lit(b","), ws)
    colon = seq(ws, Lit(b":"), ws)
    n = len(members)
    cap = hi if hi is not None else lo  # counts above it behave alike
    required_after = [sum(req for _, _, req in members[i:]) for i in range(n + 1)]

    def feasible(i: int, c: int) -> bool:  # some total in lo..hi is still reachable
        least = c + required_after[i]
        most = float("inf") if extra is not None else c + (n - i)
        return (hi is None or least <= hi) and most >= lo

    def extras(c: int) -> Expr:  # additional members after c members were written (c >= 1)
        if extra is None:
            return Seq(())
        room = None if hi is None else hi - c
        return Repeat(seq(comma, extra), max(lo - c, 0), room)

    uid = len(cv.rules)

    def tail(i: int, c: int) -> Expr:
        c = min(c, cap) if hi is None else c
        if i == n:
            return extras(c)
        name = f"obj{uid}_tail{i}_{c}"
        if name not in cv.rules:
            key, value, req = members[i]
            options: list[Expr] = []
            if feasible(i + 1, c + 1) and (hi is None or c < hi):
                options.append(seq(comma, cv.key_literal(key), colon, value, tail(i + 1, c + 1)))
            if not req and feasible(i + 1, c):
                options.append(tail(i + 1, c))
            cv.rules[name] = alt(*options)  # never empty: entered only when feasible
        return Ref(name)

    firsts: list[Expr] = []
    for i, (key, value, req) in enumerate(members):
        if feasible(i + 1, 1) and (hi is None or hi >= 1):
            firsts.append(seq(cv.key_literal(key), colon, value, tail(i + 1, 1)))
        if req:
            break
    else:
        if extra is not None and (hi is None or hi >= 1):
            firsts.append(seq(extra, extras(1)))
    options: list[Expr] = []
    if not required_after[0] and lo == 0:
        options.append(seq(Lit(b"{"), ws, Lit(b"}")))
    if firsts:
        options.append(seq(Lit(b"{"), ws, alt(*firsts), ws, Lit(b"}")))
    if not options:
        raise no_value(SchemaError(f"no object has {lo} to {hi} members here", pointer=count_pointer))
    return alt(*options)


def object_any_order(cv: "_Converter", members: list[Member], extra: Expr | None) -> Expr:
    """Members in any order, additional ones anywhere: for walking an object whose schema gives
    its keys no one order (``properties`` merged from several subschemas, required keys outside
    ``properties``). One rule per set of members written, hence :data:`MAX_ANY_ORDER_KEYS`."""
    ws = cv.ws
    comma = seq(ws, Lit(b","), ws)
    colon = seq(ws, Lit(b":"), ws)
    items = [seq(cv.key_literal(key), colon, value) for key, value, _ in members]
    required = sum(1 << i for i, (_, _, req) in enumerate(members) if req)
    uid = len(cv.rules)

    def rest(done: int) -> Ref:  # what may follow once the members in ``done`` were written
        name = f"obj{uid}_any{done}"
        if name not in cv.rules:
            cv.rules[name] = Seq(())  # reserved while its options are built
            options = [seq(comma, items[i], rest(done | 1 << i))
                       for i in range(len(items)) if not done >> i & 1]
            if done & required == required:
                options.append(seq(ws, Lit(b"}")))
            body = alt(*options)
            if extra is not None:
                body = seq(Repeat(seq(comma, extra), 0, None), body)
            cv.rules[name] = body
        return Ref(name)

    firsts = [seq(items[i], rest(1 << i)) for i in range(len(items))]
    if extra is not None:
        firsts.append(seq(extra, rest(0)))
    options: list[Expr] = []
    if not required:
        options.append(seq(Lit(b"{"), ws, Lit(b"}")))
    if firsts:
        options.append(seq(Lit(b"{"), ws, alt(*firsts)))
    return alt(*options)
