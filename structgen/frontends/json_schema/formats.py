"""Exact regular languages for the JSON Schema ``format`` keyword.

Each supported format is an anchored pattern (``^...$``) written in the common subset of
ECMA-262 and Python ``re`` syntax where both read it the same way: literals, escapes, classes
with ranges, ``(?:...)`` groups, ``|`` and the quantifiers ``* + ? {n} {n,} {n,m}``. There are
no ``\\d \\w \\s`` (their meaning differs between the two), no lookarounds, backreferences,
``\\b``, flags or named groups, and counted bounds stay small (they are unrolled). The
patterns are assembled below from named parts, one per RFC production.

The reading of each format (RFC, section, and what is approximated, in which direction) is in
:data:`FORMAT_NOTES`. Where a format is not exactly regular in practice (hostname length,
A-labels), the pattern errs on the *sound* side: every string it accepts is valid, some valid
strings are refused.

Example
-------
>>> import re
>>> [bool(re.fullmatch(FORMAT_PATTERNS["date"], s)) for s in ("2024-02-29", "2023-02-29")]
[True, False]
>>> [bool(re.fullmatch(FORMAT_PATTERNS["ipv6"], s)) for s in ("::ffff:10.0.0.1", "1::2::3")]
[True, False]
>>> bool(re.fullmatch(FORMAT_PATTERNS["time"], "15:59:60-08:00"))  # 23:59:60 UTC
True
"""

from __future__ import annotations

__all__ = ["FORMAT_PATTERNS", "GENERATION_PATTERNS", "FORMAT_NOTES", "DEFINED_FORMATS", "FORMAT_ALIASES"]


def _alt(*parts: str) -> str:
    return "(?:" + "|".join(parts) + ")"


# --------------------------------------------------------------------------- shared pieces
_HEXDIG = "[0-9A-Fa-f]"  # RFC 5234 B.1 HEXDIG (ABNF strings are case-insensitive)

# RFC 3986 §3.2.2 dec-octet: 0-255 without leading zeros (also used for the ipv4 format, where
# RFC 2673 §3.2's decbyte = 1*3DIGIT would admit them: see FORMAT_NOTES).
_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
# RFC 3986 §3.2.2 IPv4address = dec-octet 3("." dec-octet)
_IPV4 = _DEC_OCTET + r"(?:\." + _DEC_OCTET + "){3}"

# RFC 3986 §3.2.2 h16 = 1*4HEXDIG
_H16 = _HEXDIG + "{1,4}"
# RFC 3986 §3.2.2 ls32 = ( h16 ":" h16 ) / IPv4address
_LS32 = _alt(_H16 + ":" + _H16, _IPV4)


def _h16s(n: int) -> str:
    """``n( h16 ":" )``."""
    return "" if n == 0 else f"(?:{_H16}:){{{n}}}"


def _before(n: int) -> str:
    """``[ *n( h16 ":" ) h16 ]``: up to n+1 groups before a ``::``."""
    if n == 0:
        return f"(?:{_H16})?"
    return f"(?:(?:{_H16}:){{0,{n}}}{_H16})?"


# RFC 3986 §3.2.2 IPv6address: the nine alternatives of the RFC, in its order (RFC 4291 §2.2
# text forms: full, "::"-compressed, embedded IPv4; no zone id).
_IPV6 = _alt(
    _h16s(6) + _LS32,
    "::" + _h16s(5) + _LS32,
    _before(0) + "::" + _h16s(4) + _LS32,
    _before(1) + "::" + _h16s(3) + _LS32,
    _before(2) + "::" + _h16s(2) + _LS32,
    _before(3) + "::" + _h16s(1) + _LS32,
    _before(4) + "::" + _LS32,
    _before(5) + "::" + _H16,
    _before(6) + "::",
)

# --------------------------------------------------------------------------- RFC 3339 §5.6
# date-mday per date-month (§5.7 "Restrictions"): 31-day months, 30-day months, February 1-28.
_MONTH_DAY = _alt(
    "(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",
    "(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)",
    "02-(?:0[1-9]|1[0-9]|2[0-8])",
)
# Years whose February has 29 days (§5.7 and Appendix C: divisible by 4, and not by 100 unless by
# 400), over date-fullyear = 4DIGIT: yy in {04, 08, ..., 96} after any century, or a century
# cc00 with cc in {00, 04, ..., 96} (0000 is a leap year in the proleptic Gregorian calendar).
_MULTIPLE_OF_4 = "(?:0[48]|[2468][048]|[13579][26])"  # two-digit multiples of 4 except 00
_LEAP_YEAR = _alt("[0-9]{2}" + _MULTIPLE_OF_4, "(?:" + _MULTIPLE_OF_4 + "|00)00")
# full-date = date-fullyear "-" date-month "-" date-mday
_FULL_DATE = _alt("[0-9]{4}-" + _MONTH_DAY, _LEAP_YEAR + "-02-29")

_TIME_HOUR = "(?:[01][0-9]|2[0-3])"  # time-hour 00-23
_TIME_MINUTE = "[0-5][0-9]"  # time-minute 00-59
_SECFRAC = r"(?:\.[0-9]+)?"  # [time-secfrac] = "." 1*DIGIT
_NUMOFFSET = "[+-]" + _TIME_HOUR + ":" + _TIME_MINUTE  # time-numoffset
_TIME_OFFSET = _alt("[Zz]", _NUMOFFSET)  # time-offset ("Z" is case-insensitive, §5.6 NOTE)

# Offsets (in minutes east of UTC) under which a leap second is honoured. time-second 60 is a
# leap second, only valid when the time *in UTC* is 23:59 (§5.7), i.e. local hh:mm minus the
# offset is 23:59. That is a regular language (offsets are finite), but an exact one needs a
# state per local hh:mm (1440) before the offset is read; we keep the offsets whose minutes are
# 00, 15, 30 or 45, which include every UTC offset in use (+05:45, -09:30, +12:45, ...), so a
# DFA only tells 96 local times apart. Leap seconds under other offsets are refused (sound).
# Minimal DFA states over characters (over JSON string bytes, with escapes, in brackets): no leap
# seconds 19 (110); UTC only, () here, 33 (194); (0, 30) 475 (2846); (0, 15, 30, 45) 884 (5300);
# every minute, range(60), the exact language, about 11,000.
_LEAP_OFFSET_MINUTES = (0, 15, 30, 45)
_LEAP_OFFSETS = [s * (h * 60 + m) for s in (1, -1) for h in range(24) for m in _LEAP_OFFSET_MINUTES]


def _leap_second_time() -> str:
    """``hh:mm:60[.frac]offset`` exactly where hh:mm - offset is 23:59 (for _LEAP_OFFSETS)."""
    by_local: dict[int, set[str]] = {}
    for off in _LEAP_OFFSETS:
        local = (23 * 60 + 59 + off) % 1440
        sign = "-" if off < 0 else "+"
        spelled = f"\\{sign}" if sign == "+" else sign
        by_local.setdefault(local, set()).add(f"{spelled}{abs(off) // 60:02d}:{abs(off) % 60:02d}")
    by_local[23 * 60 + 59] = {"[Zz]", "[+-]00:00"}  # UTC itself, "+00:00", "-00:00" (§4.3)
    hours: dict[int, list[str]] = {}
    for local in sorted(by_local):
        offsets = _alt(*sorted(by_local[local]))
        hours.setdefault(local // 60, []).append(f"{local % 60:02d}:60{_SECFRAC}{offsets}")
    return _alt(*(f"{h:02d}:" + _alt(*mins) for h, mins in sorted(hours.items())))


# partial-time with time-second 00-59, then time-offset; or a leap second (see above).
_FULL_TIME = _alt(
    _TIME_HOUR + ":" + _TIME_MINUTE + ":[0-5][0-9]" + _SECFRAC + _TIME_OFFSET,
    _leap_second_time(),
)
# date-time = full-date "T" full-time ("T" is case-insensitive, §5.6 NOTE)
_DATE_TIME = _FULL_DATE + "[Tt]" + _FULL_TIME

# --------------------------------------------------------------------------- RFC 3339 App. A
# ISO 8601 durations, Appendix A ABNF (designators upper case, see FORMAT_NOTES).
_DUR_SECOND = "[0-9]+S"  # dur-second = 1*DIGIT "S"
_DUR_MINUTE = "[0-9]+M(?:" + _DUR_SECOND + ")?"  # dur-minute = 1*DIGIT "M" [dur-second]
_DUR_HOUR = "[0-9]+H(?:" + _DUR_MINUTE + ")?"  # dur-hour = 1*DIGIT "H" [dur-minute]
_DUR_TIME = "T" + _alt(_DUR_HOUR, _DUR_MINUTE, _DUR_SECOND)  # dur-time
_DUR_DAY = "[0-9]+D"  # dur-day = 1*DIGIT "D"
_DUR_WEEK = "[0-9]+W"  # dur-week = 1*DIGIT "W"
_DUR_MONTH = "[0-9]+M(?:" + _DUR_DAY + ")?"  # dur-month = 1*DIGIT "M" [dur-day]
_DUR_YEAR = "[0-9]+Y(?:" + _DUR_MONTH + ")?"  # dur-year = 1*DIGIT "Y" [dur-month]
_DUR_DATE = _alt(_DUR_DAY, _DUR_MONTH, _DUR_YEAR) + "(?:" + _DUR_TIME + ")?"  # dur-date
_DURATION = "P" + _alt(_DUR_DATE, _DUR_TIME, _DUR_WEEK)  # duration

# --------------------------------------------------------------------------- host names
_LET_DIG = "[A-Za-z0-9]"  # RFC 1123 §2.1 / RFC 5321 Let-dig
_LDH = "[A-Za-z0-9-]"  # letter, digit or hyphen


def _label(n: int) -> str:
    """A label of 1..n letters, digits and hyphens, not starting or ending with a hyphen
    (RFC 1123 §2.1, RFC 1035 §2.3.1), and without "--" in positions 3 and 4: those are the
    reserved R-LDH labels of RFC 5890 §2.3.1 (A-labels "xn--" included, see FORMAT_NOTES)."""
    assert n >= 5
    # 1 to 3 chars; 4 chars (the 4th ends the label, so 3-4 is never "--"); 5..n chars with
    # positions 3-4 one of letter-digit+any, or hyphen+letter-digit.
    return (f"{_LET_DIG}(?:{_LDH}?{_LET_DIG}"
            f"|{_LDH}(?:{_LDH}{_LET_DIG}|(?:{_LET_DIG}{_LDH}|-{_LET_DIG}){_LDH}{{0,{n - 5}}}{_LET_DIG}))?")


# A name of at most k labels of at most m characters is at most k*m + k-1 <= 253 characters long
# (RFC 1123 §2.1, RFC 1035 §2.3.4: 255 octets on the wire, 253 as text without a trailing dot).
# The exact bound is a product of two counters (total length, label length) that no compact
# regular expression spells, so names are accepted in these shapes, each within 253 by
# construction: up to 3 labels of up to 63 characters, or up to 8 labels of up to 30. (Each shape
# costs DFA states, about 2 per character position it allows: these two give ~730; adding
# (16, 14) gives ~1100; the unbounded, unsound label(.label)* needs ~125.)
_HOSTNAME_SHAPES = ((3, 63), (8, 30))
assert all(k * m + k - 1 <= 253 for k, m in _HOSTNAME_SHAPES)
_HOSTNAME = _alt(*(f"{_label(m)}(?:\\.{_label(m)}){{0,{k - 1}}}" for k, m in _HOSTNAME_SHAPES))

# --------------------------------------------------------------------------- RFC 5321 §4.1.2
# atext (RFC 5322 §3.2.3) = ALPHA / DIGIT / "!#$%&'*+-/=?^_`{|}~"
_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_STRING = f"{_ATEXT}+(?:\\.{_ATEXT}+)*"  # Dot-string = Atom *("." Atom)
# Quoted-string = DQUOTE *QcontentSMTP DQUOTE; qtextSMTP = %d32-33 / %d35-91 / %d93-126;
# quoted-pairSMTP = "\" %d32-126
_QUOTED_STRING = r'"(?:[ !#-\[\]-~]|\\[ -~])*"'
_LOCAL_PART = _alt(_DOT_STRING, _QUOTED_STRING)  # Local-part = Dot-string / Quoted-string
# RFC 5321 §4.1.3 Snum = 1*3DIGIT, value 0-255 (leading zeros allowed there)
_SNUM = "(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]{1,2})"
_IPV4_LITERAL = _SNUM + r"(?:\." + _SNUM + "){3}"  # IPv4-address-literal
_SMTP_HEX = _HEXDIG + "{1,4}"  # IPv6-hex = 1*4HEXDIG


def _smtp_comp(total: int, tail: str) -> str:
    """RFC 5321 IPv6-comp / IPv6v4-comp: "::" with at most `total` groups around it (and
    `tail` after them, already ending the address)."""
    forms = []
    for before in range(total + 1):
        head = "" if before == 0 else f"{_SMTP_HEX}(?::{_SMTP_HEX}){{{before - 1}}}"
        after = total - before
        if tail:
            rest = "" if after == 0 else f"(?:{_SMTP_HEX}:){{0,{after}}}"
            forms.append(f"{head}::{rest}{tail}")
        else:
            rest = "" if after == 0 else f"(?:{_SMTP_HEX}(?::{_SMTP_HEX}){{0,{after - 1}}})?"
            forms.append(f"{head}::{rest}")
    return _alt(*forms)


# IPv6-addr = IPv6-full / IPv6-comp / IPv6v4-full / IPv6v4-comp
_SMTP_IPV6 = _alt(
    f"{_SMTP_HEX}(?::{_SMTP_HEX}){{7}}",  # IPv6-full
    _smtp_comp(6, ""),  # IPv6-comp: no more than 6 groups besides "::"
    f"{_SMTP_HEX}(?::{_SMTP_HEX}){{5}}:{_IPV4_LITERAL}",  # IPv6v4-full
    _smtp_comp(4, _IPV4_LITERAL),  # IPv6v4-comp: no more than 4 groups besides "::" and IPv4
)
# address-literal = "[" ( IPv4-address-literal / IPv6-address-literal ) "]"; the
# General-address-literal needs an IANA-registered tag and "IPv6" is the only one.
_ADDRESS_LITERAL = r"\[" + _alt(_IPV4_LITERAL, "[Ii][Pp][Vv]6:" + _SMTP_IPV6) + r"\]"
# Mailbox = Local-part "@" ( Domain / address-literal ); Domain as a host name (above).
_MAILBOX = _LOCAL_PART + "@" + _alt(_HOSTNAME, _ADDRESS_LITERAL)

# --------------------------------------------------------------------------- RFC 3986 URIs
_PCT = "%" + _HEXDIG + "{2}"  # pct-encoded = "%" HEXDIG HEXDIG
# unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"; sub-delims = "!$&'()*+,;="
_UNRES_SUB = "A-Za-z0-9._~!$&'()*+,;="  # class body: unreserved + sub-delims (hyphen added last)


def _chars(extra: str) -> str:
    """``( unreserved / pct-encoded / sub-delims / extra )``."""
    return f"(?:[{_UNRES_SUB}{extra}-]|{_PCT})"


_SCHEME = "[A-Za-z][A-Za-z0-9+.-]*"  # scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
_USERINFO = _chars(":") + "*"  # userinfo = *( unreserved / pct-encoded / sub-delims / ":" )
_IPVFUTURE = f"[Vv]{_HEXDIG}+\\.[{_UNRES_SUB}:-]+"  # IPvFuture = "v" 1*HEXDIG "." 1*(...)
_IP_LITERAL = r"\[" + _alt(_IPV6, _IPVFUTURE) + r"\]"  # IP-literal
_REG_NAME = _chars("") + "*"  # reg-name = *( unreserved / pct-encoded / sub-delims )
# host = IP-literal / IPv4address / reg-name; IPv4address is a subset of reg-name.
_HOST = _alt(_IP_LITERAL, _REG_NAME)
_AUTHORITY = f"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"  # authority = [userinfo "@"] host [":" port]
_PCHAR = _chars(":@")  # pchar = unreserved / pct-encoded / sub-delims / ":" / "@"
_SEGMENT = _PCHAR + "*"  # segment = *pchar
_SEGMENT_NZ = _PCHAR + "+"  # segment-nz = 1*pchar
_SEGMENT_NZ_NC = _chars("@") + "+"  # segment-nz-nc: a segment-nz without ":"
_PATH_ABEMPTY = f"(?:/{_SEGMENT})*"  # path-abempty = *( "/" segment )
# hier-part = "//" authority path-abempty / path-absolute / path-rootless / path-empty, where
# path-absolute / path-rootless / path-empty = [ "/" ] [ segment-nz *( "/" segment ) ]
_HIER_PART = _alt("//" + _AUTHORITY + _PATH_ABEMPTY, f"/?(?:{_SEGMENT_NZ}{_PATH_ABEMPTY})?")
# relative-part = "//" authority path-abempty / path-absolute / path-noscheme / path-empty
_RELATIVE_PART = _alt(
    "//" + _AUTHORITY + _PATH_ABEMPTY,
    f"/(?:{_SEGMENT_NZ}{_PATH_ABEMPTY})?",
    _SEGMENT_NZ_NC + _PATH_ABEMPTY,
) + "?"
_QUERY = _chars(":@/?") + "*"  # query = fragment = *( pchar / "/" / "?" )
_QUERY_FRAGMENT = f"(?:\\?{_QUERY})?(?:#{_QUERY})?"
_URI = _SCHEME + ":" + _HIER_PART + _QUERY_FRAGMENT  # URI
# URI-reference = URI / relative-ref; relative-ref = relative-part [ "?" query ] [ "#" fragment ]
_URI_REFERENCE = _alt(_SCHEME + ":" + _HIER_PART, _RELATIVE_PART) + _QUERY_FRAGMENT

# --------------------------------------------------------------------------- the table
_UUID = f"{_HEXDIG}{{8}}-{_HEXDIG}{{4}}-{_HEXDIG}{{4}}-{_HEXDIG}{{4}}-{_HEXDIG}{{12}}"

# CSS colours (draft 3's "color"), as python-jsonschema checks them with webcolors: one of the
# 147 CSS3 colour names in any case, or "#" and 3 or 6 hex digits.
_CSS3_NAMES = (
    "aliceblue antiquewhite aqua aquamarine azure beige bisque black blanchedalmond blue blueviolet "
    "brown burlywood cadetblue chartreuse chocolate coral cornflowerblue cornsilk crimson cyan "
    "darkblue darkcyan darkgoldenrod darkgray darkgreen darkgrey darkkhaki darkmagenta "
    "darkolivegreen darkorange darkorchid darkred darksalmon darkseagreen darkslateblue "
    "darkslategray darkslategrey darkturquoise darkviolet deeppink deepskyblue dimgray dimgrey "
    "dodgerblue firebrick floralwhite forestgreen fuchsia gainsboro ghostwhite gold goldenrod gray "
    "green greenyellow grey honeydew hotpink indianred indigo ivory khaki lavender lavenderblush "
    "lawngreen lemonchiffon lightblue lightcoral lightcyan lightgoldenrodyellow lightgray "
    "lightgreen lightgrey lightpink lightsalmon lightseagreen lightskyblue lightslategray "
    "lightslategrey lightsteelblue lightyellow lime limegreen linen magenta maroon "
    "mediumaquamarine mediumblue mediumorchid mediumpurple mediumseagreen mediumslateblue "
    "mediumspringgreen mediumturquoise mediumvioletred midnightblue mintcream mistyrose moccasin "
    "navajowhite navy oldlace olive olivedrab orange orangered orchid palegoldenrod palegreen "
    "paleturquoise palevioletred papayawhip peachpuff peru pink plum powderblue purple red "
    "rosybrown royalblue saddlebrown salmon sandybrown seagreen seashell sienna silver skyblue "
    "slateblue slategray slategrey snow springgreen steelblue tan teal thistle tomato turquoise "
    "violet wheat white whitesmoke yellow yellowgreen").split()
_ANY_CASE = "".join  # a name spelt in any case: one [xX] class per letter
_COLOR = _alt("#" + f"{_HEXDIG}{{3}}", "#" + f"{_HEXDIG}{{6}}",
              *(_ANY_CASE(f"[{c}{c.upper()}]" for c in name) for name in _CSS3_NAMES))

FORMAT_PATTERNS: dict[str, str] = {
    name: f"^{body}$"
    for name, body in {
        "date": _FULL_DATE,
        "time": _FULL_TIME,
        "date-time": _DATE_TIME,
        "duration": _DURATION,
        "email": _MAILBOX,
        "hostname": _HOSTNAME,
        "ipv4": _IPV4,
        "ipv6": _IPV6,
        "uuid": _UUID,
        "color": _COLOR,
        "uri": _URI,
        "uri-reference": _URI_REFERENCE,
    }.items()
}

# Generation spells a subset that every common validator accepts too: python-jsonschema's
# checkers (rfc3339-validator, datetime.date) refuse year 0000 and every leap second, which the
# RFC allows. Walking keeps the exact readings above; generating the stricter ones means a
# generated value never depends on which validator checks it. (Also far smaller automata.)
_YEAR_NOT_ZERO = _alt("[0-9]{3}[1-9]", "[0-9]{2}[1-9]0", "[0-9][1-9]00", "[1-9]000")
_FULL_DATE_GEN = _alt(_YEAR_NOT_ZERO + "-" + _MONTH_DAY,
                      _alt("[0-9]{2}" + _MULTIPLE_OF_4, _MULTIPLE_OF_4 + "00") + "-02-29")
_FULL_TIME_GEN = _TIME_HOUR + ":" + _TIME_MINUTE + ":[0-5][0-9]" + _SECFRAC + _TIME_OFFSET

#: Draft 3's names for formats later drafts renamed: the same readings.
FORMAT_ALIASES: dict[str, str] = {"host-name": "hostname", "ip-address": "ipv4"}

#: Every format some JSON Schema draft (3 to 2020-12) defines, and python-jsonschema's
#: ``FormatChecker`` checks. A validator that asserts formats checks these, so structgen reads
#: each exactly (FORMAT_PATTERNS) or refuses it. Any other name is a *custom* format ("byte",
#: "int32", "path"): the spec makes it an annotation, left to agreement between the parties, and
#: validators ignore it; so does structgen, recording it in ``CompiledGrammar.relaxed``.
DEFINED_FORMATS: frozenset[str] = frozenset(FORMAT_PATTERNS) | frozenset(FORMAT_ALIASES) | {
    "idn-email", "idn-hostname", "iri", "iri-reference", "uri-template", "json-pointer",
    "relative-json-pointer", "regex", "color", "style", "phone", "utc-millisec",
}

#: The patterns generation uses (``canonical=True``): each a subset of FORMAT_PATTERNS.
GENERATION_PATTERNS: dict[str, str] = dict(
    FORMAT_PATTERNS,
    date=f"^{_FULL_DATE_GEN}$",
    time=f"^{_FULL_TIME_GEN}$",
    **{"date-time": f"^{_FULL_DATE_GEN}[Tt]{_FULL_TIME_GEN}$"},
)

FORMAT_NOTES: dict[str, str] = {
    "date": "RFC 3339 §5.6 full-date with the §5.7 day-of-month limits and Gregorian leap years "
            "(÷4, not ÷100 unless ÷400) over years 0000-9999: exact.",
    "time": "RFC 3339 §5.6 full-time, offset required, 'Z'/'z'; second 60 only as a leap second "
            "(local time minus offset = 23:59 UTC, §5.7), honoured for offsets whose minutes are "
            "00/15/30/45 (every offset in use); leap seconds under other offsets are refused "
            "(sound: stricter than the RFC).",
    "date-time": "RFC 3339 §5.6 date-time = full-date 'T'/'t' full-time, with the date and time "
                 "readings above (same leap-second approximation, sound).",
    "duration": "RFC 3339 Appendix A ISO 8601 duration ABNF: 'P', then date units Y-M-D in order "
                "without gaps (Y then D needs M), optional 'T' with H-M-S likewise, or weeks alone; "
                "integers only; designators upper case (the ABNF's case-insensitive letters are not "
                "taken: ISO 8601 and validators use upper case; sound).",
    "email": "RFC 5321 §4.1.2 Mailbox: Dot-string or Quoted-string local part, '@', then a domain "
             "read as the hostname format (so with its limits) or an address literal "
             "([IPv4 with Snum], [IPv6:...] per §4.1.3); no length limits on the local part "
             "(§4.5.3.1 sizes are implementation limits, not syntax); ASCII only.",
    "hostname": "RFC 1123 §2.1 labels (1-63 letters/digits/hyphens, no hyphen at either end), no "
                "trailing dot; reserved '??--' labels refused, so A-labels ('xn--') are refused "
                "(checking Punycode/IDNA 2008 is out of reach; sound); the 253-character limit is "
                "kept by accepting up to 3 labels of <=63 chars or up to 8 labels of <=30 (sound: "
                "longer valid names, or with more labels, are refused).",
    "ipv4": "RFC 2673 §3.2 dotted quad, each part 0-255; leading zeros refused as in RFC 3986 "
            "§3.2.2 dec-octet (RFC 2673's decbyte = 1*3DIGIT admits them, inet_aton reads them as "
            "octal; the Test-Suite has no case either way; sound).",
    "ipv6": "RFC 4291 §2.2 text forms as the RFC 3986 §3.2.2 IPv6address ABNF: 8 groups of 1-4 hex "
            "digits, one '::', trailing embedded IPv4 (no leading zeros); no zone id: exact.",
    "uuid": "RFC 4122 §3 string form: 8-4-4-4-12 hex digits in either case, any version/variant: "
            "exact.",
    "color": "draft 3's CSS colour, as python-jsonschema checks it (webcolors): one of the 147 "
             "CSS3 colour names in any case, or '#' and 3 or 6 hex digits: exact.",
    "uri": "RFC 3986 §3 URI (scheme required), ASCII only, percent-encodings checked, host an "
           "IP-literal (IPv6 or IPvFuture, no RFC 6874 zone id) or a reg-name (which covers "
           "IPv4address and out-of-range dotted digits): exact.",
    "uri-reference": "RFC 3986 §4.1 URI-reference (URI or relative-ref, incl. the empty string), "
                     "ASCII only: exact.",
}
