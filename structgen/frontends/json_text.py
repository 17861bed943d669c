"""JSON text pieces as grammar IR: string characters in every spelling, numbers, literals.

A JSON string character may be written raw (UTF-8), as a short escape (``\\n``) or as a
``\\uXXXX`` escape in either hex case (astral characters as a surrogate pair); a schema
constrains the *decoded* string, so every spelling of an allowed character must be allowed.

Example
-------
>>> print(JSON_INTEGER)
"-"? ("0" | [1-9] [0-9]*)
"""

from __future__ import annotations

import functools
import json

from structgen.core.ir import Alt, ByteClass, Expr, Lit, Repeat, Seq, seq

__all__ = ["UTF8_MULTI", "JSON_CHAR", "JSON_NUMBER", "JSON_INTEGER", "char_encodings", "char_spelling_set", "spellings",
           "string_literal"]

_HEX = ByteClass.of("0-9a-fA-F")
_CONT = ByteClass(((0x80, 0xBF),))


def _bc(*ranges: tuple[int, int]) -> ByteClass:
    return ByteClass(tuple(ranges))


# One JSON string character: unescaped UTF-8 (no control chars, no '"' or '\'), a short escape,
# or a \u escape of a non-surrogate / a valid surrogate pair (lone surrogates are refused).
UTF8_MULTI = Alt((
    Seq((_bc((0xC2, 0xDF)), _CONT)),
    Seq((Lit(b"\xe0"), _bc((0xA0, 0xBF)), _CONT)),
    Seq((_bc((0xE1, 0xEC), (0xEE, 0xEF)), _CONT, _CONT)),
    Seq((Lit(b"\xed"), _bc((0x80, 0x9F)), _CONT)),
    Seq((Lit(b"\xf0"), _bc((0x90, 0xBF)), _CONT, _CONT)),
    Seq((_bc((0xF1, 0xF3)), _CONT, _CONT, _CONT)),
    Seq((Lit(b"\xf4"), _bc((0x80, 0x8F)), _CONT, _CONT)),
))
_ESCAPE = Seq((Lit(b"\\"), Alt((
    ByteClass.of('"\\\\/bfnrt'),
    Seq((Lit(b"u"), Alt((
        Seq((ByteClass.of("0-9a-cA-CeEfF"), _HEX, _HEX, _HEX)),
        Seq((ByteClass.of("dD"), ByteClass.of("0-7"), _HEX, _HEX)),
        Seq((ByteClass.of("dD"), ByteClass.of("89abAB"), _HEX, _HEX,
             Lit(b"\\u"), ByteClass.of("dD"), ByteClass.of("c-fC-F"), _HEX, _HEX)),
    )))),
))))
JSON_CHAR = Alt((_bc((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)), UTF8_MULTI, _ESCAPE))

_DIGITS = Repeat(ByteClass.of("0-9"), 0, None)
JSON_INTEGER = Seq((Repeat(Lit(b"-"), 0, 1), Alt((Lit(b"0"), Seq((ByteClass.of("1-9"), _DIGITS))))))
JSON_NUMBER = Seq((
    JSON_INTEGER,
    Repeat(Seq((Lit(b"."), ByteClass.of("0-9"), _DIGITS)), 0, 1),
    Repeat(Seq((ByteClass.of("eE"), Repeat(ByteClass.of("+-"), 0, 1), ByteClass.of("0-9"), _DIGITS)), 0, 1),
))


@functools.lru_cache(maxsize=4096)
def char_encodings(ch: str) -> tuple[bytes, ...]:
    """Every JSON spelling of one character (raw, short escape, \\u escapes in any hex case);
    memoized, as a long enum or many keys spell the same characters again and again."""
    out: list[bytes] = []
    cp = ord(ch)
    short = {'"': b'\\"', "\\": b"\\\\", "/": b"\\/", "\b": b"\\b", "\f": b"\\f", "\n": b"\\n",
             "\r": b"\\r", "\t": b"\\t"}
    if cp >= 0x20 and ch not in '"\\' and not 0xD800 <= cp <= 0xDFFF:
        out.append(ch.encode("utf-8"))
    if ch in short:
        out.append(short[ch])
    units = [cp] if cp < 0x10000 else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
    spellings = [b""]
    for u in units:
        hexes = _case_variants(f"{u:04x}")
        spellings = [s + b"\\u" + h for s in spellings for h in hexes]
    out.extend(spellings)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def char_spelling_set(ch: str) -> frozenset[bytes]:
    """:func:`char_encodings` as a set, one shared per character: excluded keys and values are
    words of these sets (an object's 130 keys made 16,000 sets before, one per character of
    each key, each a container the cyclic collector then visited).

    >>> len(char_spelling_set("/")), char_spelling_set("a") is char_spelling_set("a")
    (4, True)
    """
    return frozenset(char_encodings(ch))


def _case_variants(h: str) -> list[bytes]:
    out = [b""]
    for c in h:
        opts = {c.lower(), c.upper()}
        out = [s + o.encode() for s in out for o in sorted(opts)]
    return out


def spellings(text: str) -> Expr:
    """The characters of ``text`` in every JSON spelling (a string literal's content).

    >>> from structgen.core.regular import matches
    >>> [matches(spellings("a"), w) for w in (b"a", bytes([92]) + b"u0061", b"b")]
    [True, True, False]
    """
    parts: list[Expr] = []
    for ch in text:
        options = char_encodings(ch)
        parts.append(Lit(options[0]) if len(options) == 1 else Alt(tuple(Lit(x) for x in options)))
    return seq(*parts)


def string_literal(value: str) -> Expr:
    """A JSON string literal: canonical spelling; non-ASCII characters raw or \\u-escaped."""
    parts: list[Expr] = [Lit(b'"')]
    ascii_run = bytearray()
    for ch in value:
        if ord(ch) < 0x80:
            ascii_run += json.dumps(ch)[1:-1].encode()
            continue
        if ascii_run:
            parts.append(Lit(bytes(ascii_run)))
            ascii_run = bytearray()
        escaped = json.dumps(ch)[1:-1].encode()  # \\uXXXX (pair for astral chars), lowercase
        parts.append(Alt((Lit(ch.encode("utf-8")), Lit(escaped))))
    ascii_run += b'"'
    parts.append(Lit(bytes(ascii_run)))
    return seq(*parts)
