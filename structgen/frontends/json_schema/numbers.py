"""JSON numbers under ``minimum``/``maximum``/``exclusive*``/``multipleOf``, as exact automata.

A bound is honoured digit by digit, not by sampling and checking: the integers in [17, 305]
are ``1[7-9] | [2-9][0-9] | [12][0-9]{2} | 30[0-5]``, and a decimal bound compares the
fraction digit by digit (``0.f > 0.25``: a first digit above 2, or 2 then a rest above 5). A
``multipleOf`` is a remainder counter over the digits, intersected with the range
(:func:`structgen.core.regular.intersect`). Bounds and divisors are read as the decimals written in
the schema (``0.1`` is one tenth, not the nearest double).

Two spellings of the number language, chosen by ``forms``:

- ``"any"`` (walking and validating): every JSON spelling of an allowed value. An ``integer``
  also accepts a zero fraction (``1.0``, per the spec); exponents (``1e3``) are accepted where
  no bound or divisor applies, because a bounded exponent form is not a regular language; with
  bounds they are refused (a valid instance rejected, never an invalid one accepted).
- ``"plain"`` (generation): integers as ``-?digits``, decimals without exponent, no ``-0``.

Example
-------
>>> from structgen.core.regular import matches
>>> e = number_ir(integer=True, minimum=17, maximum=305)
>>> [matches(e, s) for s in (b"16", b"17", b"305", b"306", b"017", b"20.0")]
[False, True, True, False, False, True]
>>> d = number_ir(integer=False, exclusive_minimum=0, maximum=1, forms="plain")
>>> [matches(d, s) for s in (b"0", b"0.0", b"-0.0", b"0.01", b"1", b"1.001")]
[False, False, False, True, True, False]
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Literal

from structgen.errors import SchemaError, UnsupportedFeatureError, no_value
from structgen.core.ir import ByteClass, Expr, Fsm, Lit, Repeat, Seq, alt, seq
from structgen.core.dfa import fsm_of_rows
from structgen.core.regular import intersect
from structgen.frontends.json_text import JSON_INTEGER, JSON_NUMBER
from structgen.frontends.json_schema.values import tighter

__all__ = ["number_ir", "Bounds", "read_bounds", "MAX_DIVISOR_STATES"]

Forms = Literal["any", "plain"]

#: multipleOf counts remainders; above this many counter states the schema is refused.
MAX_DIVISOR_STATES = 4096

_D = ByteClass.of("0-9")
_DSTAR = Repeat(_D, 0, None)


def _digits(lo: int, hi: int) -> Expr:
    return Lit(str(lo).encode()) if lo == hi else ByteClass(((0x30 + lo, 0x30 + hi),))


@dataclass(frozen=True)
class Bounds:
    """A value interval; ``None`` is unbounded. Values are exact decimals as fractions."""

    lo: Fraction | None = None
    lo_open: bool = False
    hi: Fraction | None = None
    hi_open: bool = False

    def meet(self, other: "Bounds") -> "Bounds":
        """The intersection of two intervals (the tighter bound on each side)."""
        lo, lo_open = self.lo, self.lo_open
        if other.lo is not None and tighter(other.lo, lo, lower=True, new_open=other.lo_open, old_open=lo_open):
            lo, lo_open = other.lo, other.lo_open
        hi, hi_open = self.hi, self.hi_open
        if other.hi is not None and tighter(other.hi, hi, lower=False, new_open=other.hi_open, old_open=hi_open):
            hi, hi_open = other.hi, other.hi_open
        return Bounds(lo, lo_open, hi, hi_open)

    def is_empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and (self.lo_open or self.hi_open))


def _exact(value: Any, keyword: str, pointer: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{keyword} must be a number, not {value!r}", pointer=pointer)
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"{keyword} must be finite, not {value!r}", pointer=pointer)
    try:  # repr gives the shortest decimal that round-trips: the number as written
        return Fraction(Decimal(repr(value))) if isinstance(value, float) else Fraction(value)
    except InvalidOperation as err:  # pragma: no cover - repr of a finite float always parses
        raise SchemaError(f"{keyword} {value!r} is not a decimal", pointer=pointer) from err


def read_bounds(schema: dict, pointer: str) -> tuple[Bounds, Fraction | None]:
    """The interval and divisor a schema states (drafts 4 to 2020-12 spellings)."""
    found = Bounds()

    def tighter_lo(v: Fraction, open_: bool) -> None:
        nonlocal found
        found = found.meet(Bounds(lo=v, lo_open=open_))

    def tighter_hi(v: Fraction, open_: bool) -> None:
        nonlocal found
        found = found.meet(Bounds(hi=v, hi_open=open_))

    ex_min, ex_max = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if "minimum" in schema:  # draft 4: a boolean exclusiveMinimum makes minimum exclusive
        tighter_lo(_exact(schema["minimum"], "minimum", pointer), ex_min is True)
    if "maximum" in schema:
        tighter_hi(_exact(schema["maximum"], "maximum", pointer), ex_max is True)
    if ex_min is not None and not isinstance(ex_min, bool):
        tighter_lo(_exact(ex_min, "exclusiveMinimum", pointer), True)
    if ex_max is not None and not isinstance(ex_max, bool):
        tighter_hi(_exact(ex_max, "exclusiveMaximum", pointer), True)
    divisor = None
    if "multipleOf" in schema:
        divisor = _exact(schema["multipleOf"], "multipleOf", pointer)
        if divisor <= 0:
            raise SchemaError(f"multipleOf must be above 0, not {schema['multipleOf']!r}", pointer=pointer)
    return found, divisor


def number_ir(*, integer: bool, minimum: Any = None, maximum: Any = None,
              exclusive_minimum: Any = None, exclusive_maximum: Any = None,
              multiple_of: Any = None, forms: Forms = "any", pointer: str = "",
              integral_spellings: bool = True) -> Expr:
    """The JSON numbers (``integer=True``: integers) that satisfy the given keywords."""
    schema = {k: v for k, v in (("minimum", minimum), ("maximum", maximum),
                                ("exclusiveMinimum", exclusive_minimum),
                                ("exclusiveMaximum", exclusive_maximum),
                                ("multipleOf", multiple_of)) if v is not None}
    bounds, divisor = read_bounds(schema, pointer)
    return bounded_number_ir(bounds, divisor, integer=integer, forms=forms, pointer=pointer,
                             integral_spellings=integral_spellings)


def bounded_number_ir(bounds: Bounds, divisor: Fraction | None, *, integer: bool,
                      forms: Forms = "any", pointer: str = "", exponents: bool = True,
                      fractional: bool = False, integral_spellings: bool = True) -> Expr:
    """The JSON numbers in ``bounds`` that are multiples of ``divisor`` (when given).

    ``integral_spellings=False`` reads ``integer`` as drafts 3 and 4 do: "a JSON number without
    a fraction or exponent part", so ``1.0`` is no integer there (it is from draft 6 on).

    ``exponents=False`` leaves out exponent spellings even where no bound applies (a language
    with values taken out of it, as ``not`` does, cannot keep them exactly: ``1e0`` is ``1``).
    ``fractional=True``: only numbers that are not integers (``not: {type: integer}``), without
    exponents.
    """
    if forms not in ("any", "plain"):
        raise ValueError(f"forms must be 'any' or 'plain', not {forms!r}")
    if fractional:
        base = bounded_number_ir(bounds, divisor, integer=False, forms=forms, pointer=pointer, exponents=False)
        fsm = intersect(base, _FRACTIONAL, what=f"non-integer numbers at {pointer or '/'}")
        if not fsm.accept:
            raise no_value(UnsupportedFeatureError("not", pointer=pointer,
                                                   hint="no number that is not an integer satisfies the bounds"))
        return fsm
    if integer and divisor is not None and divisor.denominator != 1:
        # an integer x is a multiple of p/q (lowest terms) exactly when p divides x
        divisor = Fraction(divisor.numerator)
    if divisor == 1 and integer:
        divisor = None
    if bounds == Bounds() and divisor is None and forms == "any" and exponents:
        return (_INTEGER_ANY if integral_spellings else JSON_INTEGER) if integer else JSON_NUMBER
    if integer:
        bounds = _integer_bounds(bounds)
    if bounds.is_empty():
        raise no_value(UnsupportedFeatureError("minimum", pointer=pointer,
                                               hint="no number lies within the bounds, so none can be generated"))
    zero_fraction = integer and forms == "any" and integral_spellings
    parts: list[Expr | None] = []
    # non-negative values: magnitudes in [max(lo, 0), hi]
    if bounds.hi is None or bounds.hi > 0 or (bounds.hi == 0 and not bounds.hi_open):
        lo, lo_open = (bounds.lo, bounds.lo_open) if bounds.lo is not None and bounds.lo >= 0 else (Fraction(0), False)
        parts.append(_magnitude(lo, lo_open, bounds.hi, bounds.hi_open, integer, zero_fraction, divisor, pointer))
    # negative values: "-" then magnitudes in [max(-hi, 0), -lo]; -0 only in "any" forms
    zero_only = forms == "any" and bounds.lo == 0 and not bounds.lo_open  # then just -0
    if bounds.lo is None or bounds.lo < 0 or zero_only:
        if bounds.hi is not None and bounds.hi < 0:
            m_lo, m_lo_open = -bounds.hi, bounds.hi_open
        else:
            zero_in = bounds.hi is None or bounds.hi > 0 or not bounds.hi_open
            m_lo, m_lo_open = Fraction(0), not (zero_in and forms == "any")
        m_hi = None if bounds.lo is None else -bounds.lo
        neg = _magnitude(m_lo, m_lo_open, m_hi, bounds.lo_open, integer, zero_fraction, divisor, pointer)
        parts.append(None if neg is None else seq(Lit(b"-"), neg))
    found = [p for p in parts if p is not None]
    if not found:
        raise no_value(UnsupportedFeatureError("multipleOf" if divisor is not None else "minimum", pointer=pointer,
                                               hint="no number satisfies the bounds and multipleOf together"))
    return alt(*found)


_INTEGER_ANY = seq(  # a number with a zero fraction, e.g. 1.0 or 1e2 or 1.0E+3
    JSON_INTEGER,
    Repeat(seq(Lit(b"."), Repeat(Lit(b"0"), 1, None)), 0, 1),
    Repeat(seq(ByteClass.of("eE"), Repeat(Lit(b"+"), 0, 1), _D, _DSTAR), 0, 1),
)


#: Number text with a non-zero fraction digit and no exponent: exactly the non-integers so spelt.
_FRACTIONAL = seq(Repeat(Lit(b"-"), 0, 1), alt(Lit(b"0"), seq(ByteClass.of("1-9"), _DSTAR)), Lit(b"."),
                  _DSTAR, ByteClass.of("1-9"), _DSTAR)


def _integer_bounds(b: Bounds) -> Bounds:
    lo = hi = None
    if b.lo is not None:
        lo = Fraction(math.floor(b.lo) + 1) if b.lo_open and b.lo.denominator == 1 else Fraction(math.ceil(b.lo))
    if b.hi is not None:
        hi = Fraction(math.ceil(b.hi) - 1) if b.hi_open and b.hi.denominator == 1 else Fraction(math.floor(b.hi))
    return Bounds(lo, False, hi, False)


def _magnitude(lo: Fraction, lo_open: bool, hi: Fraction | None, hi_open: bool, integer: bool,
               zero_fraction: bool, divisor: Fraction | None, pointer: str) -> Expr | None:
    """Unsigned JSON number text (``0|[1-9][0-9]*`` and an optional fraction) in the range;
    ``None`` when no value fits (an empty piece must never reach a sequence: it would leave a
    dead end that masks would wrongly allow into)."""
    if lo_open and integer:
        lo, lo_open = lo + 1, False  # integer bounds arrive closed; -0 exclusion comes this way
    if integer:
        whole = _int_range(int(lo), None if hi is None else int(hi))
        if whole is None:
            return None
        body = seq(whole, Repeat(seq(Lit(b"."), Repeat(Lit(b"0"), 1, None)), 0, 1) if zero_fraction else Seq(()))
    else:
        body = _decimal_range(lo, lo_open, hi, hi_open)
        if body is None:
            return None
    if divisor is None:
        return body
    fsm = intersect(body, _multiple_fsm(divisor, pointer), what=f"multipleOf at {pointer or '/'}")
    return fsm if fsm.accept else None


# ---------------------------------------------------------------- integer ranges


def _int_range(lo: int, hi: int | None) -> Expr | None:
    """Canonical decimal integers (no leading zeros) in [lo, hi]; ``hi=None`` is unbounded."""
    if hi is not None and lo > hi:
        return None
    parts: list[Expr] = []
    top_len = len(str(lo)) if hi is None else len(str(hi))
    for length in range(len(str(lo)), top_len + 1):
        a = max(lo, 10 ** (length - 1) if length > 1 else 0)
        b = 10 ** length - 1 if hi is None else min(hi, 10 ** length - 1)
        if a <= b:
            parts.append(_same_length(str(a).zfill(length), str(b).zfill(length)))
    if hi is None:  # any longer integer
        parts.append(seq(ByteClass.of("1-9"), Repeat(_D, top_len, top_len), _DSTAR))
    return alt(*parts) if parts else None


def _same_length(a: str, b: str) -> Expr:
    """Digit strings of one length between ``a`` and ``b`` (lexicographic = numeric here)."""
    if not a:
        return Seq(())
    if a[0] == b[0]:
        return seq(Lit(a[0].encode()), _same_length(a[1:], b[1:]))
    rest = len(a) - 1
    if a[1:] == "0" * rest and b[1:] == "9" * rest:
        return seq(_digits(int(a[0]), int(b[0])), Repeat(_D, rest, rest))
    parts = [seq(Lit(a[0].encode()), _same_length(a[1:], "9" * rest))]
    if int(b[0]) - int(a[0]) > 1:
        parts.append(seq(_digits(int(a[0]) + 1, int(b[0]) - 1), Repeat(_D, rest, rest)))
    parts.append(seq(Lit(b[0].encode()), _same_length("0" * rest, b[1:])))
    return alt(*parts)


# ---------------------------------------------------------------- decimal ranges


def _split(x: Fraction) -> tuple[int, str]:
    """Integer part and fraction digits (no trailing zeros) of a non-negative decimal."""
    whole = math.floor(x)
    frac = x - whole
    digits = ""
    while frac:  # terminates: schema values are decimals (denominators 2^a 5^b)
        frac *= 10
        d = math.floor(frac)
        digits += str(d)
        frac -= d
    return whole, digits


def _frac_at_least(alpha: str, strict: bool, nonempty: bool) -> Expr:
    # never empty: some long enough digit string always exceeds a finite alpha
    """Digit strings f with 0.f >= 0.alpha (> when ``strict``); ``nonempty``: f not empty."""
    if not alpha:
        if strict:  # some non-zero digit
            return seq(Repeat(Lit(b"0"), 0, None), ByteClass.of("1-9"), _DSTAR)
        return Repeat(_D, 1 if nonempty else 0, None)
    d = int(alpha[0])
    parts = [seq(Lit(alpha[0].encode()), _frac_at_least(alpha[1:], strict, False))]
    if d < 9:
        parts.insert(0, seq(_digits(d + 1, 9), _DSTAR))
    return alt(*parts)


def _frac_at_most(beta: str, strict: bool, nonempty: bool) -> Expr | None:
    """Digit strings f with 0.f <= 0.beta (< when ``strict``); ``nonempty``: f not empty.
    ``None`` when there is none (0.f < 0 never holds)."""
    if not beta:
        return None if strict else Repeat(Lit(b"0"), 1 if nonempty else 0, None)
    d = int(beta[0])
    rest = _frac_at_most(beta[1:], strict, False)
    parts = [] if rest is None else [seq(Lit(beta[0].encode()), rest)]
    if d > 0:
        parts.insert(0, seq(_digits(0, d - 1), _DSTAR))
    if not nonempty:
        parts.insert(0, Seq(()))
    return alt(*parts)


def _with_fraction(whole: Expr, frac_nonempty: Expr | None, empty_ok: bool) -> Expr | None:
    """``whole``, then a fraction from ``frac_nonempty`` (or none when ``empty_ok``)."""
    options = [Seq(())] if empty_ok else []
    if frac_nonempty is not None and not (isinstance(frac_nonempty, Fsm) and not frac_nonempty.accept):
        options.append(seq(Lit(b"."), frac_nonempty))
    return seq(whole, alt(*options)) if options else None


def _decimal_range(lo: Fraction, lo_open: bool, hi: Fraction | None, hi_open: bool) -> Expr | None:
    a, alpha = _split(lo)
    parts: list[Expr | None] = []
    if hi is not None:
        b, beta = _split(hi)
        if a == b:  # one integer part: the fraction lies between both bounds
            at_most = _frac_at_most(beta, hi_open, True)
            frac = None if at_most is None else intersect(_frac_at_least(alpha, lo_open, True), at_most,
                                                          what="decimal bounds")
            # the fraction-less value is a itself
            empty_ok = not alpha and not lo_open and (bool(beta) or not hi_open)
            return _with_fraction(Lit(str(a).encode()), frac, empty_ok)
    # integer part a: fraction at least alpha
    parts.append(_with_fraction(Lit(str(a).encode()), _frac_at_least(alpha, lo_open, True),
                                not alpha and not lo_open))
    # integer parts strictly between: any fraction
    top = None if hi is None else b - 1
    middle = _int_range(a + 1, top)
    if middle is not None:
        parts.append(_with_fraction(middle, Repeat(_D, 1, None), True))
    if hi is not None:  # integer part b: fraction at most beta
        parts.append(_with_fraction(Lit(str(b).encode()), _frac_at_most(beta, hi_open, True),
                                    bool(beta) or not hi_open))
    found = [p for p in parts if p is not None]
    return alt(*found) if found else None


# ---------------------------------------------------------------- multipleOf


def _multiple_fsm(divisor: Fraction, pointer: str) -> Fsm:
    """Unsigned number text whose value is a multiple of ``divisor`` (a decimal).

    With ``divisor = P / 10**s``: the value times 10**s must be an integer (fraction digits past
    the s-th are zeros) divisible by P.
    """
    s = 0
    while (divisor * 10 ** s).denominator != 1:
        s += 1
        if s > 64:
            raise UnsupportedFeatureError("multipleOf", pointer=pointer + "/multipleOf",
                                          hint=f"{float(divisor)!r} is not a short decimal")
    p = int(divisor * 10 ** s)
    if p * (s + 2) > MAX_DIVISOR_STATES:
        raise UnsupportedFeatureError("multipleOf", pointer=pointer + "/multipleOf",
                                      hint=f"a divisor of {p} digits-states is too large to count "
                                           f"(limit {MAX_DIVISOR_STATES} states)")
    return _remainder_fsm(p, s)


@functools.lru_cache(maxsize=16)  # at most 4,096 states each (MAX_DIVISOR_STATES)
def _remainder_fsm(p: int, s: int) -> Fsm:
    """Unsigned number text whose value times ``10**s`` is an integer divisible by ``p``: states
    count the remainder mod ``p`` and the fraction digits read so far. Kept per process, with
    its digest on it: a divisor recurs, in a schema (322 times in one of MaskBench's) and
    across schemas, and each new copy cost its construction and its digest again."""
    # states: ("int", r) reading the integer part; ("frac", r, k) after k fraction digits
    index: dict[tuple, int] = {}
    order: list[tuple] = []

    def state(key: tuple) -> int:
        if key not in index:
            index[key] = len(order)
            order.append(key)
        return index[key]

    state(("start", 0))  # like ("int", 0), but nothing read yet: not accepting, no "."
    rows: list[list[tuple[int, int]]] = []  # per state, (bytes as a mask, target)
    accept: list[bool] = []
    i = 0
    while i < len(order):
        key = order[i]
        by_target: dict[int, int] = {}
        ok = False
        if key[0] in ("start", "int"):
            r = key[1]
            for d in range(10):
                t = state(("int", (r * 10 + d) % p))
                by_target[t] = by_target.get(t, 0) | _DIGIT_BITS[d]
            if key[0] == "int":
                by_target[state(("frac", r, 0))] = _DOT_BIT
                ok = (r * 10 ** s) % p == 0
        else:
            _, r, k = key
            if k < s:
                for d in range(10):
                    t = state(("frac", (r * 10 + d) % p, k + 1))
                    by_target[t] = by_target.get(t, 0) | _DIGIT_BITS[d]
            else:
                by_target[state(("frac", r, s + 1))] = _DIGIT_BITS[0]  # zeros only
            ok = k > 0 and (r * 10 ** (s - min(k, s))) % p == 0
        rows.append([(mask, t) for t, mask in by_target.items()])
        accept.append(ok)
        i += 1
    return fsm_of_rows(rows, accept)


_DIGIT_BITS = [1 << (0x30 + d) for d in range(10)]
_DOT_BIT = 1 << 0x2E
