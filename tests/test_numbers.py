"""Numeric keywords as exact automata: tables, then Hypothesis against exact decimal arithmetic."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen import SchemaError, UnsupportedFeatureError
from structgen.frontends.json_schema.numbers import number_ir
from structgen.core.regular import intersect, matches, to_fsm
from structgen.core.ir import ByteClass, Repeat, seq, Lit

JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def test_regular_tools():
    digits = Repeat(ByteClass.of("0-9"), 1, None)
    even = seq(Repeat(ByteClass.of("0-9"), 0, None), ByteClass.of("02468"))
    both = intersect(digits, even, Repeat(ByteClass.of("0-9"), 0, 3))
    assert [matches(both, s) for s in (b"8", b"123", b"124", b"1234", b"")] == [True, False, True, False, False]
    assert len(to_fsm(seq(Lit(b"a"), Repeat(Lit(b"a"), 0, None))).edges) == 2  # minimized


@pytest.mark.parametrize("kw,text,ok", [
    (dict(integer=True, minimum=17, maximum=305), "17", True),
    (dict(integer=True, minimum=17, maximum=305), "305", True),
    (dict(integer=True, minimum=17, maximum=305), "16", False),
    (dict(integer=True, minimum=17, maximum=305), "1000", False),
    (dict(integer=True, minimum=-5, maximum=-2), "-3", True),
    (dict(integer=True, minimum=-5, maximum=-2), "-1", False),
    (dict(integer=True, minimum=-5, maximum=-2), "-6", False),
    (dict(integer=True, minimum=0), "-0", True),                  # -0 is 0, valid when walked
    (dict(integer=True, minimum=0, forms="plain"), "-0", False),  # never generated
    (dict(integer=True, minimum=0), "99999999999999999999", True),
    (dict(integer=True, maximum=-10), "-99999999999999", True),
    (dict(integer=True), "1.0", True),                            # an integer per the spec
    (dict(integer=True), "1e3", True),
    (dict(integer=True), "1.5", False),
    (dict(integer=True, forms="plain"), "1.0", False),
    (dict(integer=True, minimum=1.5, maximum=3.5), "1", False),
    (dict(integer=True, minimum=1.5, maximum=3.5), "2", True),
    (dict(integer=True, exclusive_minimum=2, exclusive_maximum=4), "3", True),
    (dict(integer=True, exclusive_minimum=2, exclusive_maximum=4), "4", False),
    (dict(integer=False, exclusive_minimum=0), "0.01", True),
    (dict(integer=False, exclusive_minimum=0), "0", False),
    (dict(integer=False, exclusive_minimum=0), "-0.0", False),
    (dict(integer=False, exclusive_minimum=0), "0.0", False),
    (dict(integer=False, exclusive_minimum=0), "0.000", False),
    (dict(integer=False, minimum=0.1, maximum=0.25), "0.1", True),
    (dict(integer=False, minimum=0.1, maximum=0.25), "0.25000", True),
    (dict(integer=False, minimum=0.1, maximum=0.25), "0.2500001", False),
    (dict(integer=False, minimum=0.1, maximum=0.25), "0.09999", False),
    (dict(integer=False, minimum=-1.5, maximum=2), "-1.5", True),
    (dict(integer=False, minimum=-1.5, maximum=2), "-1.51", False),
    (dict(integer=False, minimum=-1.5, maximum=2), "1.99", True),
    (dict(integer=False, minimum=-1.5, maximum=2), "1e0", False),  # exponents refused with bounds
    (dict(integer=False), "1e0", True),
    (dict(integer=False, forms="plain"), "1e0", False),
    (dict(integer=True, multiple_of=7), "49", True),
    (dict(integer=True, multiple_of=7), "-14", True),
    (dict(integer=True, multiple_of=7), "50", False),
    (dict(integer=True, multiple_of=7), "0", True),
    (dict(integer=False, multiple_of=0.01), "1.25", True),
    (dict(integer=False, multiple_of=0.01), "1.250", True),
    (dict(integer=False, multiple_of=0.01), "1.255", False),
    (dict(integer=False, multiple_of=0.5, minimum=0, maximum=2), "1.5", True),
    (dict(integer=False, multiple_of=0.5, minimum=0, maximum=2), "2.5", False),
    (dict(integer=False, multiple_of=0.5, minimum=0, maximum=2), "0.25", False),
    (dict(integer=True, multiple_of=0.5), "3", True),              # every integer is a multiple of 1/2
    (dict(integer=True, multiple_of=1.5), "3", True),
    (dict(integer=True, multiple_of=1.5), "4", False),
])
def test_number_table(kw, text, ok):
    assert matches(number_ir(**kw), text.encode()) is ok


def test_errors():
    with pytest.raises(UnsupportedFeatureError):
        number_ir(integer=True, minimum=3, maximum=2)
    with pytest.raises(UnsupportedFeatureError):
        number_ir(integer=True, exclusive_minimum=1, exclusive_maximum=2)
    with pytest.raises(UnsupportedFeatureError):
        number_ir(integer=True, minimum=1, maximum=4, multiple_of=5)
    with pytest.raises(SchemaError):
        number_ir(integer=False, multiple_of=0)
    with pytest.raises(SchemaError):
        number_ir(integer=False, minimum="1")
    with pytest.raises(UnsupportedFeatureError, match="multipleOf"):
        number_ir(integer=True, multiple_of=123456789)


# ---------------------------------------------------------------- Hypothesis against exact arithmetic

decimals = st.decimals(min_value=-1000, max_value=1000, places=2, allow_nan=False, allow_infinity=False)
bound_values = st.one_of(st.none(), decimals.map(lambda d: float(d) if d % 1 else int(d)))


def number_texts():
    digits = st.text("0123456789", min_size=1, max_size=5)
    whole = st.one_of(st.just("0"), st.builds(lambda a, b: a + b, st.sampled_from("123456789"), st.text("0123456789", max_size=4)))
    return st.builds(lambda sign, w, frac, exp: sign + w + frac + exp,
                     st.sampled_from(["", "-"]), whole,
                     st.one_of(st.just(""), digits.map(lambda d: "." + d)),
                     st.one_of(st.just(""), st.just(""), st.builds(lambda e, d: e + d, st.sampled_from(["e", "E+", "e-"]), st.text("0123", min_size=1, max_size=2))))


def oracle(text, integer, lo, lo_open, hi, hi_open, divisor, forms):
    if not JSON_NUMBER.fullmatch(text):
        return False
    value = Fraction(Decimal(text))
    if integer and divisor is not None and divisor.numerator == 1:
        divisor = None  # every integer is a multiple of 1/q: no constraint at all
    constrained = any(v is not None for v in (lo, hi, divisor))
    has_exp = "e" in text.lower()
    if forms == "plain":
        if has_exp or (integer and "." in text) or (text.startswith("-") and value == 0):
            return False
    elif has_exp and (constrained or integer):
        if constrained:
            return False
        # unconstrained integers: int, optional zero fraction, non-negative exponent (sound subset)
        return re.fullmatch(r"-?(0|[1-9][0-9]*)(\.0+)?[eE]\+?[0-9]+", text) is not None
    if integer and value.denominator != 1:
        return False
    if lo is not None and (value < lo or (lo_open and value == lo)):
        return False
    if hi is not None and (value > hi or (hi_open and value == hi)):
        return False
    if divisor is not None and (value / divisor).denominator != 1:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(integer=st.booleans(), lo=bound_values, hi=bound_values, lo_open=st.booleans(),
       hi_open=st.booleans(), divisor=st.one_of(st.none(), st.sampled_from([1, 2, 3, 7, 0.5, 0.25, 0.1, 2.5, 0.03])),
       forms=st.sampled_from(["any", "plain"]), texts=st.lists(number_texts(), min_size=20, max_size=20))
def test_numbers_match_exact_arithmetic(integer, lo, hi, lo_open, hi_open, divisor, forms, texts):
    kw = dict(integer=integer, forms=forms, multiple_of=divisor,
              **{("exclusive_minimum" if lo_open else "minimum"): lo,
                 ("exclusive_maximum" if hi_open else "maximum"): hi})
    try:
        expr = number_ir(**kw)
    except UnsupportedFeatureError:
        return  # checked below: only when nothing fits
    exact = lambda v: None if v is None else Fraction(Decimal(repr(v)) if isinstance(v, float) else v)
    args = (integer, exact(lo), lo_open and lo is not None, exact(hi), hi_open and hi is not None,
            exact(divisor), forms)
    # a few values inside the range, to hit more accepted cases than random texts do
    extra = []
    if lo is not None:
        extra += [str(lo), str(Decimal(repr(lo)) + 1) if isinstance(lo, float) else str(lo + 1)]
    for text in texts + extra:
        assert matches(expr, text.encode()) is oracle(text, *args), (kw, text)
