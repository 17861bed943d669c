"""Evidence for :mod:`structgen.frontends.json_schema.formats`: each ``format`` pattern against the JSON-Schema-Test-Suite,
python-jsonschema's FormatChecker (with the ``format-nongpl`` extras), independent reference
checkers written here in plain code, and an ECMA-262 engine (node, when installed).

Where a pattern refuses a valid string on purpose (a documented, sound approximation) or a
checker is known to be wrong or looser, the case is kept and marked ``xfail(strict=True)`` with
the reason, so the disagreement stays pinned: if it ever goes away the test fails.
"""

from __future__ import annotations

import calendar
import doctest
import ipaddress
import json
import os
import re
import shutil
import string
import subprocess
import warnings
from pathlib import Path

import jsonschema
import pytest
import rfc3986_validator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structgen.frontends.json_schema.formats
from structgen.frontends.json_schema.formats import FORMAT_NOTES, FORMAT_PATTERNS

try:  # Python 3.11+
    from re import _constants as sre_c, _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

DATA_DIR = Path(os.environ.get("STRUCTGEN_DATA_DIR",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))
SUITE_DIR = DATA_DIR / "json-schema-test-suite" / "tests" / "draft2020-12" / "optional" / "format"

FORMATS = sorted(FORMAT_PATTERNS)
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
# draft 3 defines "color" (CSS colours); python-jsonschema checks it there (and in FormatChecker())
DRAFT3_CHECKER = jsonschema.Draft3Validator.FORMAT_CHECKER
DRAFT3_ONLY = {"color"}
HYPOTHESIS = settings(max_examples=100, deadline=None, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def matches(fmt: str, s: str) -> bool:
    return re.fullmatch(FORMAT_PATTERNS[fmt], s) is not None


def checker_accepts(fmt: str, s: str) -> bool:
    return (DRAFT3_CHECKER if fmt in DRAFT3_ONLY else CHECKER).conforms(s, fmt)


# ------------------------------------------------------------------ reference checkers (plain code)
# Written from the RFC text, not from the patterns, to check the patterns against.

def ref_date(s: str) -> bool:
    """RFC 3339 §5.6 full-date + §5.7 limits (proleptic Gregorian, years 0000-9999)."""
    m = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", s)
    if not m:
        return False
    y, mo, d = map(int, m.groups())
    return 1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]


def ref_time(s: str) -> bool:
    """RFC 3339 §5.6 full-time; second 60 only at 23:59 UTC (local time minus offset)."""
    m = re.fullmatch(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))", s)
    if not m:
        return False
    h, mi, sec = int(m[1]), int(m[2]), int(m[3])
    sign = -1 if m[4] == "-" else 1
    oh, om = (int(m[5]), int(m[6])) if m[4] else (0, 0)
    if not (h < 24 and mi < 60 and sec <= 60 and oh < 24 and om < 60):
        return False
    return sec < 60 or (h * 60 + mi - sign * (oh * 60 + om)) % 1440 == 23 * 60 + 59


def ref_date_time(s: str) -> bool:
    return len(s) > 11 and s[10] in "Tt" and ref_date(s[:10]) and ref_time(s[11:])


def leap_offset_supported(s: str) -> bool:
    """Our documented approximation: leap seconds only under offsets with minutes 00/15/30/45."""
    m = re.search(r":60(?:\.[0-9]+)?[+-][0-9]{2}:([0-9]{2})$", s)
    return m is None or m[1] in ("00", "15", "30", "45")


def ref_duration(s: str) -> bool:
    """RFC 3339 Appendix A: date units a gap-free run of Y M D, time units of H M S, or weeks."""
    m = re.fullmatch(r"P((?:[0-9]+[YMWD])*)(?:T((?:[0-9]+[HMS])+))?", s.upper())  # RFC 5234 §2.3
    if not m:
        return False
    date_units = "".join(re.findall("[YMWD]", m[1]))
    time_units = "".join(re.findall("[HMS]", m[2] or ""))
    if "W" in date_units:
        return date_units == "W" and m[2] is None
    return (date_units in ("", "D", "M", "MD", "Y", "YM", "YMD")
            and time_units in ("", "H", "HM", "HMS", "M", "MS", "S")
            and bool(date_units or time_units))


def ref_hostname(s: str) -> bool:
    """RFC 1123 §2.1 labels, <= 253 chars, no R-LDH ("??--") label (RFC 5890 §2.3.1).

    A-labels ("xn--") are R-LDH labels: valid ones exist, but checking them takes a Punycode
    decoder and IDNA 2008 tables, so this reference (like the pattern) refuses them all.
    """
    if not s or len(s) > 253:
        return False
    return all(re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label) and label[2:4] != "--"
               for label in s.split("."))


def hostname_in_shapes(s: str) -> bool:
    """Our documented approximation of the 253 limit: up to 3 labels <= 63 or 8 labels <= 30."""
    labels = s.split(".")
    longest = max(map(len, labels))
    return any(len(labels) <= k and longest <= m for k, m in ((3, 63), (8, 30)))


_ATEXT = set(string.ascii_letters + string.digits + "!#$%&'*+-/=?^_`{|}~")


def _snum_quad(s: str) -> bool:  # RFC 5321 IPv4-address-literal: Snum = 1*3DIGIT, 0-255
    parts = s.split(".")
    return len(parts) == 4 and all(re.fullmatch("[0-9]{1,3}", p) and int(p) <= 255 for p in parts)


def _smtp_ipv6(a: str) -> bool:  # RFC 5321 §4.1.3 IPv6-addr
    if a.count("::") > 1:
        return False
    if "::" in a:
        left, right = a.split("::")
        head, tail = (left.split(":") if left else []), (right.split(":") if right else [])
    else:
        head, tail = a.split(":"), None
    v4 = "." in a.rsplit(":", 1)[-1]
    if v4:
        last = (tail if tail is not None else head).pop()
        if not _snum_quad(last):
            return False
    groups = head + (tail or [])
    if not all(re.fullmatch("[0-9A-Fa-f]{1,4}", g) for g in groups):
        return False
    if tail is None:
        return len(groups) == (6 if v4 else 8)
    return len(groups) <= (4 if v4 else 6)


def ref_email(s: str) -> bool:
    """RFC 5321 §4.1.2 Mailbox; the Domain read as :func:`ref_hostname`."""
    if s.startswith('"'):
        i = 1
        while i < len(s) and s[i] != '"':
            if not 32 <= ord(s[i]) <= 126:
                return False
            if s[i] == "\\":
                if i + 1 >= len(s) or not 32 <= ord(s[i + 1]) <= 126:
                    return False
                i += 1
            i += 1
        if s[i + 1:i + 2] != "@":
            return False
        domain = s[i + 2:]
    else:
        local, at, domain = s.rpartition("@")
        if not at or not all(atom and set(atom) <= _ATEXT for atom in local.split(".")):
            return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal[:5].lower() == "ipv6:":
            return _smtp_ipv6(literal[5:])
        return _snum_quad(literal)
    return ref_hostname(domain)


REFERENCE = {"date": ref_date, "time": ref_time, "date-time": ref_date_time, "duration": ref_duration,
             "hostname": ref_hostname, "email": ref_email}


# ------------------------------------------------------------------ where python-jsonschema is off
# Gaps of the checker on strings our patterns generate (a valid string the checker refuses):

def checker_gap(fmt: str, s: str) -> str | None:
    if fmt in ("date", "date-time") and s.startswith("0000"):
        return "Python's datetime (date.fromisoformat, rfc3339-validator) has no year 0000"
    if fmt in ("time", "date-time") and re.search(r":60(?:[.Zz+-]|$)", s):
        return "rfc3339-validator has no leap seconds (seconds are [0-5][0-9])"
    if fmt in ("uri", "uri-reference") and "[V" in s:
        return "rfc3986-validator spells IPvFuture's \"v\" lower case only; ABNF strings are case-insensitive"
    return None


# Looser checkers (an invalid string the checker accepts):
_EMAIL_LOOSE = "python-jsonschema's email check is only '\"@\" in instance'"
_NEWLINE_LOOSE = "rfc3986-validator anchors with Python's '$', which also matches before a final newline"
_ISODURATION_LOOSE = "isoduration reads full ISO 8601 (fractions, gaps in the unit sequence), not RFC 3339 App. A"
_FQDN_RLDH = "fqdn does not know reserved R-LDH labels (RFC 5890 §2.3.1)"
_FQDN_DOT = "fqdn accepts the absolute form with a trailing dot"
_RFC3986_V4 = "rfc3986-validator's IPv6 accepts leading zeros in the embedded IPv4 ([01]?[0-9][0-9]?)"


# ------------------------------------------------------------------ hand-written tricky cases

class Case:
    """``valid`` is the RFC/test-suite truth; ``ours``/``checker`` say why one of them differs."""

    def __init__(self, s: str, valid: bool, *, ours: str | None = None, checker: str | None = None):
        self.s, self.valid, self.ours, self.checker = s, valid, ours, checker

    def __repr__(self) -> str:
        return repr(self.s)


_LEAP_APPROX = "leap second under an offset whose minutes are not 00/15/30/45: refused (sound)"
_SHAPE_APPROX = "253-char limit kept by shapes (3 labels <= 63 or 8 <= 30): this valid name is refused (sound)"
_A_LABEL_APPROX = "A-labels ('xn--') refused: Punycode/IDNA 2008 is not checked (sound)"
_CASE_APPROX = "duration designators read upper case only (sound)"
_V4_ZERO_APPROX = "ipv4 parts with leading zeros refused (octal in inet_aton; sound)"
_IPADDRESS_ZERO = "Python's ipaddress refuses leading zeros (since 3.9.5)"
_NO_LEAP = checker_gap("time", "23:59:60Z")
_NO_YEAR0 = checker_gap("date", "0000-01-01")

CASES: dict[str, list[Case]] = {
    "date": [
        Case("2000-02-29", True), Case("1900-02-29", False), Case("2004-02-29", True),
        Case("1600-02-29", True), Case("1700-02-29", False), Case("2400-02-29", True),
        Case("0004-02-29", True), Case("0000-02-29", True, checker=_NO_YEAR0),
        Case("0000-01-01", True, checker=_NO_YEAR0), Case("9999-12-31", True),
        Case("2023-02-28", True), Case("2023-04-31", False), Case("2024-02-30", False),
        Case("2024-1-01", False), Case("2024-01-01T", False), Case("2024-12-00", False),
        Case("2024-10-31", True), Case("2024-11-31", False),
    ],
    "time": [
        Case("23:59:60Z", True, checker=_NO_LEAP), Case("23:59:60.5z", True, checker=_NO_LEAP),
        Case("23:59:60-00:00", True, checker=_NO_LEAP), Case("23:59:60+00:00", True, checker=_NO_LEAP),
        Case("05:44:60+05:45", True, checker=_NO_LEAP),  # Nepal
        Case("14:29:60-09:30", True, checker=_NO_LEAP),  # Marquesas
        Case("00:44:60+00:45", True, checker=_NO_LEAP),
        Case("12:44:60+12:45", True, checker=_NO_LEAP),  # Chatham
        Case("00:00:60+00:01", True, ours=_LEAP_APPROX, checker=_NO_LEAP),
        Case("23:58:60-00:01", True, ours=_LEAP_APPROX, checker=_NO_LEAP),
        Case("23:59:60+00:15", False), Case("23:44:60+00:15", False),
        Case("23:44:60-00:15", True, checker=_NO_LEAP), Case("00:14:60+00:15", True, checker=_NO_LEAP),
        Case("00:00:60Z", False), Case("23:59:61Z", False), Case("23:59:59.999+23:59", True),
        Case("00:00:00-23:59", True), Case("12:00:00+24:00", False), Case("12:00:00.Z", False),
        Case("12:00:00+0100", False), Case("12:00Z", False), Case("T12:00:00Z", False),
    ],
    "date-time": [
        Case("2016-12-31T23:59:60Z", True, checker=_NO_LEAP),
        Case("2017-01-01t08:59:60+09:00", True, checker=_NO_LEAP),
        Case("2016-12-31T23:59:60+01:00", False), Case("2020-02-29T00:00:00Z", True),
        Case("2019-02-29T00:00:00Z", False), Case("0000-02-29T00:00:00Z", True, checker=_NO_YEAR0),
        Case("2020-01-01 00:00:00Z", False), Case("2020-01-01T00:00:00", False),
        Case("2020-01-01T00:00:00.Z", False), Case("2020-01-01TZ", False),
    ],
    "duration": [
        Case("P1W", True), Case("P0W", True), Case("PT1H1S", False, checker=_ISODURATION_LOOSE),
        Case("P1Y1D", False, checker=_ISODURATION_LOOSE), Case("P1Y1M1DT1H1M1S", True),
        Case("P1DT", False), Case("PT1.5S", False, checker=_ISODURATION_LOOSE),
        Case("P1DT1S", True), Case("P1Y1MT1M", True), Case("P1M1Y", False), Case("PT1S1M", False),
        Case("P1D1D", False), Case("PT1W", False), Case("P1Y2MT", False),
        Case("p1d", True, ours=_CASE_APPROX, checker="isoduration refuses lower-case designators"),
    ],
    "email": [
        Case('"a\\"b"@example.com', True), Case('""@example.com', True),
        Case('"a\\\x7f"@example.com', False, checker=_EMAIL_LOOSE),
        Case('a"b@example.com', False, checker=_EMAIL_LOOSE),
        Case("a@b", True), Case("a@[IPv6:1:2:3:4:5:6:7:8]", True),
        Case("a@[IPv6:1:2:3:4:5:6:7::]", False, checker=_EMAIL_LOOSE),  # RFC 5321: <= 6 groups with "::"
        Case("a@[IPv6:1:2:3:4:5::1.2.3.4]", False, checker=_EMAIL_LOOSE),  # <= 4 groups with "::" + IPv4
        Case("a@[IPv6:1:2:3:4::1.2.3.4]", True),
        Case("a@[IPv6:::ffff:1.2.3.4]", True), Case("a@[ipv6:::1]", True),
        Case("a@[001.2.3.4]", True),  # Snum = 1*3DIGIT
        Case("a@[1.2.3]", False, checker=_EMAIL_LOOSE), Case("a@[tag:stuff]", False, checker=_EMAIL_LOOSE),
        Case("a@-example.com", False, checker=_EMAIL_LOOSE), Case("a@example-.com", False, checker=_EMAIL_LOOSE),
        Case("a@ex_ample.com", False, checker=_EMAIL_LOOSE), Case("a@example.com.", False, checker=_EMAIL_LOOSE),
        Case("!#$%&'*+/=?^_`{|}~-@example.com", True), Case("a..b@example.com", False, checker=_EMAIL_LOOSE),
        Case("a@xn--bcher-kva.example", True, ours=_A_LABEL_APPROX), Case("a@b@c", False, checker=_EMAIL_LOOSE),
        Case("a@", False, checker=_EMAIL_LOOSE), Case("é@example.com", False, checker=_EMAIL_LOOSE),
    ],
    "hostname": [
        Case("a", True), Case("A-1.B-2", True), Case("a" * 63, True), Case("a" * 64, False),
        Case(".".join(["a" * 63] * 3 + ["b" * 61]), True, ours=_SHAPE_APPROX),  # exactly 253
        Case(".".join(["a" * 63] * 3 + ["b" * 62]), False, checker=None),  # 254: fqdn agrees
        Case(".".join("abcdefgh"), True),  # 8 labels
        Case(".".join("abcdefghi"), True, ours=_SHAPE_APPROX),  # 9 labels
        Case(".".join(["a" * 40] * 4), True, ours=_SHAPE_APPROX),  # 4 labels of 40
        Case(".".join(["a" * 30] * 8), True), Case(".".join(["a" * 31] + ["b"] * 3), True, ours=_SHAPE_APPROX),
        Case("ab--cd", False, checker=_FQDN_RLDH), Case("a--b", True), Case("abc--d", True),
        Case("xn--bcher-kva", True, ours=_A_LABEL_APPROX), Case("a.", False, checker=_FQDN_DOT),
        Case("a..b", False), Case("a-.b", False), Case("0", True), Case("a b", False),
    ],
    "ipv4": [
        # RFC 2673 decbyte = 1*3DIGIT admits leading zeros; refused here, and by ipaddress too.
        Case("01.2.3.4", True, ours=_V4_ZERO_APPROX, checker=_IPADDRESS_ZERO),
        Case("087.010.000.001", True, ours=_V4_ZERO_APPROX, checker=_IPADDRESS_ZERO),
        Case("1.2.3.0004", False), Case("255.255.255.255", True),
        Case("256.0.0.0", False), Case("0.0.0.0", True), Case("1.2.3.4.", False),
        Case("100.200.250.199", True), Case("249.250.251.255", True), Case("1.2.3", False),
    ],
    "ipv6": [
        Case("1:2:3:4:5:6:7::", True), Case("::1:2:3:4:5:6:7", True), Case("1:2:3:4:5:6::1.2.3.4", False),
        Case("1:2:3:4:5:6:1.2.3.4", True), Case("::1.2.3.4", True), Case("::ffff:01.2.3.4", False),
        Case("ABCD:EF01::", True), Case("1:2:3:4:5:6:7:8:9", False), Case(":::", False),
        Case("1:::2", False), Case("fe80::1%eth0", False), Case("00000::", False),
        Case("0000:0000:0000:0000:0000:0000:0000:0000", True), Case("::ffff:1.2.3", False),
        Case("1::2:3:4:5:6:7", True), Case("1.2.3.4::", False), Case("::1.2.3.4:1", False),
    ],
    "uuid": [
        Case("{2eb8aa08-aa98-11ea-b4aa-73b441d16380}", False), Case("2eb8aa08-aa98-11ea-b4aa-73b441d16380", True),
        Case("2eb8aa08-aa98-11ea-b4aa-73b441d1638g", False), Case("2EB8AA08-aa98-11EA-b4aa-73B441D16380", True),
    ],
    "color": [
        Case("red", True), Case("Red", True), Case("LightGoldenrodYellow", True), Case("grey", True),
        Case("#fff", True), Case("#A0b1C2", True), Case("#ffff", False), Case("#abcdeg", False),
        Case("red ", False), Case("transparent", False), Case("rebeccapurple", False), Case("", False),
    ],
    "uri": [
        Case("http://[v1.fe80::a+en1]", True), Case("http://[V7.x]/", True, checker=checker_gap("uri", "[V")),
        Case("http://example.com:", True), Case("http://@example.com", True), Case("http:", True),
        Case("a:", True), Case("http://[::1]:80/", True), Case("http://[::1", False),
        Case("http://exa mple.com", False), Case("http://ex%41mple.com", True),
        Case("http://[fe80::1%25eth0]/", False),  # RFC 6874 zone ids are not RFC 3986
        Case("urn:isbn:0451450523", True), Case("HTTP://EXAMPLE.COM", True), Case("a+b-c.d:x", True),
        Case("http://a:b@c:d@e", False), Case("http://a/b?c#d#e", False), Case("http://a/b?c?d/e", True),
        Case("//a", False), Case("http://a\n", False, checker=_NEWLINE_LOOSE),
        Case("http://[::ffff:01.2.3.4]", False, checker=_RFC3986_V4), Case("http:///a", True),
        Case("http:/a//b", True), Case("http://a/%7e", True), Case("http://a/%7", False),
    ],
    "uri-reference": [
        Case("", True), Case(".", True), Case("../a:b", True), Case("a:b", True), Case("1a:b", False),
        Case(":a", False), Case("?", True), Case("#", True), Case("//[::1]", True), Case("/a//b", True),
        Case("//a//b", True), Case("a b", False), Case("%41", True), Case("%4", False), Case("[", False),
        Case("///a", True), Case("a/b:c", True), Case("a?b:c", True),
        Case("http://a\n", False, checker=_NEWLINE_LOOSE),
    ],
}


def _case_id(fmt: str, s: str) -> str:
    return f"{fmt}:{s!r}" if len(s) <= 40 else f"{fmt}:{s[:24]!r}...({len(s)} chars)"


def _hand_params(side: str):
    out = []
    for fmt, cases in CASES.items():
        for c in cases:
            reason = c.ours if side == "ours" else c.checker
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(fmt, c, marks=marks, id=_case_id(fmt, c.s)))
    return out


@pytest.mark.parametrize("fmt,case", _hand_params("ours"))
def test_hand_case_pattern(fmt, case):
    assert matches(fmt, case.s) == case.valid


@pytest.mark.parametrize("fmt,case", _hand_params("checker"))
def test_hand_case_checker(fmt, case):
    assert checker_accepts(fmt, case.s) == case.valid


@pytest.mark.parametrize("fmt,case", [pytest.param(f, c, id=_case_id(f, c.s))
                                      for f, cs in CASES.items() if f in REFERENCE for c in cs
                                      if c.ours != _A_LABEL_APPROX])
def test_hand_case_reference(fmt, case):
    """The reference checkers agree with the hand table (A-labels aside: refused by both)."""
    assert REFERENCE[fmt](case.s) == case.valid


def test_every_format_has_hand_cases():
    assert set(CASES) == set(FORMAT_PATTERNS)


# ------------------------------------------------------------------ the patterns themselves

_ALLOWED_CLASS_ITEMS = {sre_c.LITERAL, sre_c.RANGE, sre_c.NEGATE}


def _subset_violations(node, out: list[str]) -> None:
    for op, av in node:
        if op is sre_c.LITERAL:
            continue
        if op is sre_c.IN:
            out += [f"class item {o}" for o, _ in av if o not in _ALLOWED_CLASS_ITEMS]  # \d \w \s ...
        elif op is sre_c.BRANCH:
            for branch in av[1]:
                _subset_violations(branch, out)
        elif op is sre_c.MAX_REPEAT:
            lo, hi, sub = av
            if hi is not sre_c.MAXREPEAT and hi > 64:
                out.append(f"counted repetition up to {hi}")
            _subset_violations(sub, out)
        elif op is sre_c.SUBPATTERN:
            group, add_flags, del_flags, sub = av
            if group is not None or add_flags or del_flags:
                out.append("capturing group or flags")
            _subset_violations(sub, out)
        else:  # ANY ('.' differs), AT (anchors inside), lazy repeats, lookarounds, backrefs, ...
            out.append(str(op))


@pytest.mark.parametrize("fmt", FORMATS)
def test_pattern_is_in_the_common_subset(fmt):
    p = FORMAT_PATTERNS[fmt]
    assert p.isascii() and p.startswith("^") and p.endswith("$")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. FutureWarning for a possible set operation
        re.compile(p)
    tree = list(sre_parse.parse(p))
    assert tree[0] == (sre_c.AT, sre_c.AT_BEGINNING) and tree[-1] == (sre_c.AT, sre_c.AT_END)
    violations: list[str] = []
    _subset_violations(tree[1:-1], violations)
    assert violations == []


def test_notes_cover_every_format():
    assert set(FORMAT_NOTES) == set(FORMAT_PATTERNS)
    assert all(note and "\n" not in note for note in FORMAT_NOTES.values())


def test_docstring_examples_run():
    assert doctest.testmod(structgen.frontends.json_schema.formats).failed == 0


def test_checker_knows_every_format():
    """Without the format extras, FormatChecker silently passes unknown formats."""
    assert set(FORMAT_PATTERNS) - DRAFT3_ONLY <= set(CHECKER.checkers)
    assert DRAFT3_ONLY <= set(DRAFT3_CHECKER.checkers)


# ------------------------------------------------------------------ JSON-Schema-Test-Suite

_A_LABEL = ("valid A-label (Punycode, RFC 5891 §4.4): checking Punycode and IDNA 2008 is out of reach "
            "of a compact regular language, so every R-LDH label ('??--', 'xn--' included) is refused (sound)")
SUITE_XFAIL = {("hostname", s): _A_LABEL for s in (
    "xn--9n2bp8q.xn--9t4b11yi5a", "xn--zca29lwxobi7a", "xn--qmbc", "xn--ll-0ea", "xn--wva3je",
    "xn--4dbc5h", "xn--4dbc8h", "xn--k8j5u", "xn--bck0j", "xn--vek778f", "xn--ngba1o", "xn--0-gyc",
    "xn--11b2ezcw70k", "xn--11b2ezcs70k", "xn--ngba5hb2804a",
)}


def _suite_cases() -> list[tuple[str, str, str, bool]]:
    out = []
    for fmt in FORMATS:
        path = SUITE_DIR / f"{fmt}.json"
        if not path.exists():
            continue
        for group in json.loads(path.read_text(encoding="utf-8")):
            for t in group["tests"]:
                if isinstance(t["data"], str):  # non-strings are always valid for a format
                    out.append((fmt, t["description"], t["data"], t["valid"]))
    return out


SUITE = _suite_cases()


def test_suite_is_present():
    # No silent skip: without the data every suite case below would vanish and the file still pass.
    missing = [f for f in FORMATS if f not in DRAFT3_ONLY and not (SUITE_DIR / f"{f}.json").exists()]
    assert not missing, (f"JSON-Schema-Test-Suite format files missing under {SUITE_DIR}: {missing}; "
                         "put shared/data beside the repository or set STRUCTGEN_DATA_DIR")


def test_suite_xfails_are_current():
    assert set(SUITE_XFAIL) <= {(fmt, data) for fmt, _, data, _ in SUITE}


@pytest.mark.parametrize("fmt,data,valid", [
    pytest.param(fmt, data, valid, id=f"{fmt}:{desc}",
                 marks=[pytest.mark.xfail(strict=True, reason=SUITE_XFAIL[fmt, data])]
                 if (fmt, data) in SUITE_XFAIL else [])
    for fmt, desc, data, valid in SUITE
])
def test_suite_case(fmt, data, valid):
    assert matches(fmt, data) == valid


# ------------------------------------------------------------------ soundness: generated => valid

@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_strings_are_valid(fmt):
    """Every string the pattern can produce is valid: the checker accepts it (but for documented
    checker gaps), and so does the reference checker where there is one."""

    @HYPOTHESIS
    @given(st.from_regex(FORMAT_PATTERNS[fmt], fullmatch=True))
    def check(s):
        assert matches(fmt, s) and s.isascii()
        if checker_gap(fmt, s) is None:
            assert checker_accepts(fmt, s), s
        if fmt in REFERENCE:
            assert REFERENCE[fmt](s), s

    check()


# ------------------------------------------------------------------ exactness: valid => accepted

def test_date_is_exact():
    for year in range(10000):  # February 29 of every year
        s = f"{year:04d}-02-29"
        assert matches("date", s) == ref_date(s), s
    for year in (0, 1, 4, 100, 400, 1900, 2000, 2023, 2024, 9999):
        for month in range(0, 14):
            for day in range(0, 33):
                s = f"{year:04d}-{month:02d}-{day:02d}"
                assert matches("date", s) == ref_date(s), s


def test_leap_seconds_are_exact_within_the_approximation():
    """Every local hh:mm against every offset with minutes 00/15/30/45 (and both spellings of
    UTC), exactly; under other offsets a leap second is always refused."""
    pattern = re.compile(FORMAT_PATTERNS["time"])
    offsets = ["Z", "z"] + [f"{sign}{h:02d}:{m:02d}" for sign in "+-" for h in range(24) for m in (0, 15, 30, 45)]
    for h in range(24):
        for m in range(60):
            for off in offsets:
                s = f"{h:02d}:{m:02d}:60{off}"
                assert (pattern.fullmatch(s) is not None) == ref_time(s), s
    for off in ("+00:01", "-00:01", "+05:20", "-11:59", "+23:59"):
        assert not any(pattern.fullmatch(f"{h:02d}:{m:02d}:60{off}") for h in range(24) for m in range(60))


@HYPOTHESIS
@given(st.text(alphabet="0123456789:.T+-Zz", max_size=30))
def test_time_agrees_with_reference(s):
    assert matches("time", s) == (ref_time(s) and leap_offset_supported(s)), s


@HYPOTHESIS
@given(st.text(alphabet="PT0123456789YMWDHS", max_size=14))
def test_duration_agrees_with_reference(s):
    assert matches("duration", s) == ref_duration(s)


@HYPOTHESIS
@given(st.one_of(st.text(alphabet="ab01-.", max_size=40),
                 st.lists(st.text(alphabet="ab-", min_size=1, max_size=70), min_size=1, max_size=20).map(".".join)))
def test_hostname_agrees_with_reference(s):
    assert matches("hostname", s) == (ref_hostname(s) and hostname_in_shapes(s)), s


def _ip_parses(cls, s: str) -> bool:
    try:
        cls(s)
    except ValueError:
        return False
    return True


@HYPOTHESIS
@given(st.one_of(st.text(alphabet="0123456789.", max_size=16),
                 st.lists(st.integers(0, 300).map(str), min_size=3, max_size=5).map(".".join)))
def test_ipv4_agrees_with_ipaddress(s):
    assert matches("ipv4", s) == _ip_parses(ipaddress.IPv4Address, s), s


@HYPOTHESIS
@given(st.one_of(st.text(alphabet="01aF:.", max_size=24),
                 st.from_regex(rfc3986_validator.IPv6_RE, fullmatch=True),
                 st.lists(st.text(alphabet="0fF", max_size=5), min_size=1, max_size=10).map(":".join)))
def test_ipv6_agrees_with_ipaddress(s):
    assert matches("ipv6", s) == _ip_parses(ipaddress.IPv6Address, s), s


def _leading_zero_ipv4_in_literal(s: str) -> bool:
    """An IP-literal whose embedded IPv4 part has a dec-octet with a leading zero."""
    tails = (lit.rsplit(":", 1)[-1] for lit in re.findall(r"\[([^\]]*)\]", s))
    return any(re.search(r"(?:^|\.)0[0-9]", t) for t in tails if "." in t)


@HYPOTHESIS
@given(st.from_regex(rfc3986_validator.URI_RE_COMP, fullmatch=True))
def test_uri_accepts_what_rfc3986_validator_generates(s):
    # rfc3986-validator spells the RFC 3986 ABNF as a regex too; where it is looser (leading zeros
    # in an IPv6 literal's IPv4 part) the string is invalid and we must refuse it.
    assert matches("uri", s) == (not _leading_zero_ipv4_in_literal(s)), s


@HYPOTHESIS
@given(st.from_regex(rfc3986_validator.URI_REF_RE_COMP, fullmatch=True))
def test_uri_reference_accepts_what_rfc3986_validator_generates(s):
    assert matches("uri-reference", s) == (not _leading_zero_ipv4_in_literal(s)), s


# ------------------------------------------------------------------ same meaning in ECMA-262

_NODE = shutil.which("node")
_JS = """
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = input.cases.map(([fmt, s]) => {
  const p = input.patterns[fmt];
  return [new RegExp(p).test(s), new RegExp(p, 'u').test(s)];
});
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.skipif(_NODE is None, reason="node (an ECMA-262 engine) is not installed")
def test_ecma_engine_agrees_with_python():
    cases = [(fmt, data) for fmt, _, data, _ in SUITE] + [(f, c.s) for f, cs in CASES.items() for c in cs]
    payload = json.dumps({"patterns": FORMAT_PATTERNS, "cases": cases})
    got = json.loads(subprocess.run([_NODE, "-e", _JS], input=payload, capture_output=True, text=True,
                                    check=True, timeout=60).stdout)
    for (fmt, s), (plain, unicode) in zip(cases, got, strict=True):
        assert plain == unicode == matches(fmt, s), (fmt, s)
