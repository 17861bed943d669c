"""Scalars of a JSON schema as grammar rules: numbers, strings, and ``enum``/``const`` literals.

Why together: each reads one kind's merged facts (:class:`~structgen.frontends.json_schema.facts.Merged`)
and builds a regular automaton (bounds digit by digit, patterns and formats intersected with
lengths and excluded values); values are spelt every JSON way when walking, one way when
generating (``cv.canonical``).

Example
-------
>>> from structgen.frontends.json_schema.translate import schema_to_grammar
>>> g = schema_to_grammar({"type": "string", "maxLength": 2, "not": {"const": "no"}}, whitespace="compact")
>>> print(g.rules[0][1])
string_0_2_except_...
"""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction
from typing import Any

from structgen.core import regular
from structgen.core.budget import BudgetExceededError, charge
from structgen.core.ir import Counted, Expr, Fsm, Lit, Ref, Repeat, Seq, Unordered, alt, digest, seq
from structgen.core.regular import difference, intersect
from structgen.errors import CompileError, SchemaError, UnsupportedFeatureError, is_no_value, no_value
from structgen.frontends.json_schema.facts import Merged
from structgen.frontends.json_schema.formats import DEFINED_FORMATS, FORMAT_ALIASES, FORMAT_PATTERNS, GENERATION_PATTERNS
from structgen.frontends.json_schema.lowering import Lowering, Relaxed
from structgen.frontends.json_schema.numbers import Bounds, bounded_number_ir, number_ir
from structgen.frontends.json_text import JSON_CHAR, char_spelling_set, spellings
from structgen.frontends.regex.ecma import char_set_ir, pattern_to_ir

__all__ = ["number_expr", "string_expr", "plain_string", "constrained_string", "string_pieces", "string_piece",
           "string_content", "literal", "object_literal_any_order"]

def number_expr(cv: Lowering, t: str, m: Merged) -> Expr:
    """``number``, ``integer``, or ``fraction`` (a number that is no integer: ``not`` integer)."""
    forms = "plain" if cv.canonical else "any"
    integer, fractional = t == "integer", t == "fraction"
    excluded = [(v, p) for v, p in m.excluded if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not fractional and not excluded and not m.non_divisors and m.bounds == Bounds() and m.divisor is None:
        return cv.primitive(t)
    ptr = m.number_pointer or m.pointer
    # values taken out (not enum, not multipleOf) leave exponent spellings out: 2e0 is 2
    exponents = not excluded and not m.non_divisors

    def build(divisor: Fraction | None) -> Expr:
        return bounded_number_ir(m.bounds, divisor, integer=integer, forms=forms, pointer=ptr,
                                 exponents=exponents, fractional=fractional,
                                 integral_spellings=cv.integral_spellings)

    try:
        expr = build(m.divisor)
    except UnsupportedFeatureError as err:
        if err.keyword != "multipleOf" or not cv.lenient or is_no_value(err):
            raise
        cv.refuse("multipleOf", err.pointer, err.hint)
        expr = build(None)
    if m.non_divisors:  # every multiple taken out, however spelt (without exponent)
        multiples = alt(*(bounded_number_ir(Bounds(), d, integer=False, forms=forms, pointer=where,
                                            exponents=False) for d, where in m.non_divisors))
        expr = difference(expr, multiples, what=f"the numbers at {ptr or '/'}")
        if not expr.accept:
            raise no_value(UnsupportedFeatureError("not", pointer=m.non_divisors[0][1],
                                                   hint="every number left is a multiple `not` excludes"))
    if excluded:  # every spelling of each value taken out (1, 1.0, 1.00 ...)
        expr = difference(expr, alt(*(number_ir(integer=False, minimum=v, maximum=v) for v, _ in excluded)),
                          what=f"the numbers at {ptr or '/'}")
        if not expr.accept:
            raise no_value(UnsupportedFeatureError("not", pointer=excluded[0][1],
                                                   hint="no number is left once the excluded values are out"))
    return expr


def string_expr(cv: Lowering, m: Merged) -> Expr:
    lo, hi = m.min_length, m.max_length
    if hi is not None and hi < lo:
        raise no_value(SchemaError("maxLength is below minLength: no string fits",
                                   pointer=m.max_length_pointer))
    excluded = sorted({v for v, _ in m.excluded if isinstance(v, str)})
    if m.patterns or m.formats or m.avoided:
        return constrained_string(cv, m, lo, hi, excluded)
    return plain_string(cv, lo, hi, excluded, m)


def plain_string(cv: Lowering, lo: int, hi: int | None, excluded: list[str], m: Merged) -> Expr:
    """Strings of ``lo``..``hi`` characters but the ``excluded`` ones (in every spelling)."""
    if not excluded:
        return cv.string_rule(lo, hi)
    if hi == 0 and "" in excluded:
        raise no_value(UnsupportedFeatureError("not", pointer=m.excluded[0][1],
                                               hint="the only string the lengths allow is excluded"))
    words = frozenset(tuple(map(char_spelling_set, v)) for v in excluded)
    digest = hashlib.sha1(json.dumps(excluded).encode()).hexdigest()[:10]
    suffix = f"{lo}_{'' if hi is None else hi}_except_{digest}"
    chars = cv.rule(f"chars_{suffix}", Counted(JSON_CHAR, lo, hi, words))
    return cv.rule(f"string_{suffix}", seq(Lit(b'"'), chars, Lit(b'"')))


def constrained_string(cv: Lowering, m: Merged, lo: int, hi: int | None, excluded: list[str]) -> Expr:
    """A string under patterns and/or formats, lengths and excluded values: one automaton,
    the intersection of each (lengths count characters, whatever their spelling)."""
    pieces = string_pieces(cv, m)
    if not pieces and not m.avoided:  # all relaxed
        return plain_string(cv, lo, hi, excluded, m)
    content = string_content(cv, m, pieces)
    return cv.rule(f"string_{digest(content)[:10]}", seq(Lit(b'"'), content, Lit(b'"')))


def string_pieces(cv: Lowering, m: Merged) -> list[Expr]:
    """The automata of ``m``'s patterns and formats (those ``lenient`` keeps)."""
    pieces = [string_piece(cv, "pattern", pattern, where) for pattern, where in m.patterns]
    pieces += [string_piece(cv, "format", fmt, where) for fmt, where in m.formats]
    return [p for p in pieces if p is not None]


def string_piece(cv: Lowering, kind: str, value: str, where: str) -> Expr | None:
    """The automaton of one pattern or format; None where ``lenient`` dropped it."""
    if kind == "pattern":
        try:
            return pattern_to_ir(value, pointer=where, canonical=cv.canonical)
        except UnsupportedFeatureError as err:
            cv.refuse("pattern", err.pointer, err.hint)
            return None
    patterns = GENERATION_PATTERNS if cv.canonical else FORMAT_PATTERNS
    value = FORMAT_ALIASES.get(value, value)
    if value in patterns:
        return pattern_to_ir(patterns[value], canonical=cv.canonical)
    if value not in DEFINED_FORMATS:  # an annotation: no constraint, but said so
        cv.note(Relaxed("format", where, f"custom format {value!r}: JSON Schema defines no such "
                                             "format, so it is an annotation, not checked"))
        return None
    cv.refuse("format", where, f"format {value!r} is not supported "
                                 f"(supported: {', '.join(sorted(FORMAT_PATTERNS))})")
    return None


def string_content(cv: Lowering, m: Merged, pieces: list[Expr] | None = None) -> Expr:
    """The contents (between the quotes) of the strings ``m`` allows, as one regular
    automaton: patterns, formats, lengths and excluded values intersected."""
    if pieces is None:
        pieces = string_pieces(cv, m)
    lo, hi = m.min_length, m.max_length
    if hi is not None and hi < lo:
        raise no_value(SchemaError("maxLength is below minLength: no string fits",
                                   pointer=m.max_length_pointer))
    excluded = sorted({v for v, _ in m.excluded if isinstance(v, str)})
    ptr = m.pointer
    keyword = "pattern" if m.patterns else "format" if m.formats else "maxLength"
    what = f"the string constraints at {ptr or '/'}"
    char = char_set_ir([(0, 0x10FFFF)], canonical=True) if cv.canonical else JSON_CHAR

    def checked(operation, *exprs: Expr) -> Expr:  # regular.intersect or regular.difference
        try:
            return operation(*exprs, what=what)
        except BudgetExceededError:
            raise
        except CompileError as err:
            raise UnsupportedFeatureError(keyword, pointer=ptr,
                                          hint=f"{err}: the pattern, format and lengths together "
                                               "are too large an automaton") from err

    content = Repeat(char, 0, None) if not pieces else pieces[0] if len(pieces) == 1 else checked(intersect, *pieces)
    for kind, value, where in m.avoided:  # under not: the strings it matches are taken out
        # A format's full reading, even when generating (whose own format patterns are
        # narrower): every string the format accepts is taken out.
        if kind == "format":
            value = FORMAT_ALIASES.get(value, value)
            if value not in DEFINED_FORMATS:
                raise UnsupportedFeatureError("format", pointer=where, hint=f"custom format {value!r} under "
                                              "not: as an annotation it would exclude every string")
        avoided = (pattern_to_ir(FORMAT_PATTERNS[value], canonical=cv.canonical)
                   if kind == "format" and value in FORMAT_PATTERNS else string_piece(cv, kind, value, where))
        if avoided is None:
            raise UnsupportedFeatureError(kind, pointer=where, hint=f"{kind} under not cannot be dropped: "
                                                                   "dropping it would widen the schema")
        content = checked(difference, content, avoided)
    if lo or hi is not None:
        # Lengths the pattern implies anyway need no counter (a char takes 1+ bytes).
        shortest, longest = regular.length_range(content)
        if lo <= min(shortest, 1) and hi is not None and longest is not None and longest <= hi:
            lo, hi = 0, None
    if lo or hi is not None:
        # Lengths run beside the pattern as a product automaton (states x count): exact, but
        # refused when that product would be too large (e.g. an email format with a
        # maxLength of 255); lenient=True then drops the length and records it.
        length_kw, where = (("maxLength", m.max_length_pointer) if hi is not None
                            else ("minLength", m.min_length_pointer))
        size = regular.state_count(content) * (max(lo, hi or 0) + 1)
        if size > regular.DEFAULT_STATE_LIMIT:
            cv.refuse(length_kw, where,
                        f"a length of {max(lo, hi or 0)} beside a pattern or format would need an "
                        f"automaton of about {size} states (limit {regular.DEFAULT_STATE_LIMIT})")
        else:
            content = checked(lambda e, what: regular.with_length(e, char, lo, hi, what=what), content)
    if excluded:
        content = checked(difference, content, alt(*(spellings(v) for v in excluded)))
    if isinstance(content, Fsm) and not content.accept:
        raise no_value(UnsupportedFeatureError(
            keyword, pointer=ptr, hint="no string satisfies the pattern, format and lengths together"))
    return content


def object_literal_any_order(cv: Lowering, value: dict, ptr: str) -> Expr:
    """An object value with its members in any order (JSON objects are unordered), for walking:
    every member a slot of one :class:`~structgen.core.ir.Unordered` rule, all required."""
    ws = cv.ws
    uid = cv.uid()
    cv.rules[f"lit{uid}_members"] = Seq(())  # reserved: rules of nested values come after it
    items = tuple(cv.rule(f"lit{uid}_m{i}", seq(cv.key_literal(k), cv.colon, literal(cv, v, ptr)))
                  for i, k in enumerate(value) for v in (value[k],))
    body = Unordered(items, tuple(range(len(items))), cv.comma, (1 << len(items)) - 1)
    cv.rules[f"lit{uid}_members"] = body
    return seq(Lit(b"{"), ws, Ref(f"lit{uid}_members"), ws, Lit(b"}"))


def literal(cv: Lowering, value: Any, ptr: str) -> Expr:
    ws = cv.ws
    if isinstance(value, str):
        return cv.key_literal(value)
    if value is None or isinstance(value, bool):
        return cv.keyword(value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaError(f"enum value {value!r} is not JSON", pointer=ptr)
        if cv.canonical:
            return Lit(json.dumps(value).encode())
        # walking: every spelling of the value (1 == 1.0 == 1.00 in JSON), exponents aside;
        # charged up front for the range automata below (measured ~10 units per digit)
        charge(10 * len(json.dumps(value)))
        return number_ir(integer=False, minimum=value, maximum=value, pointer=ptr)
    if isinstance(value, list):
        if not value:
            return seq(Lit(b"["), ws, Lit(b"]"))
        parts: list[Expr] = [Lit(b"["), ws]
        for i, v in enumerate(value):
            if i:
                parts += [cv.comma]
            parts.append(literal(cv, v, ptr))
        return seq(*parts, ws, Lit(b"]"))
    if isinstance(value, dict):
        if not value:
            return seq(Lit(b"{"), ws, Lit(b"}"))
        if not cv.canonical and len(value) > 1:
            return object_literal_any_order(cv, value, ptr)
        parts = [Lit(b"{"), ws]
        for i, (k, v) in enumerate(value.items()):
            if i:
                parts += [cv.comma]
            parts += [cv.key_literal(k), cv.colon, literal(cv, v, ptr)]
        return seq(*parts, ws, Lit(b"}"))
    raise SchemaError(f"enum value {value!r} is not JSON", pointer=ptr)
