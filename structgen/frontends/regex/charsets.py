"""Code-point sets (sorted, disjoint ranges) and one character of a set as grammar IR.

A JSON string character may be spelt raw (UTF-8), as a short escape or as ``\\uXXXX`` in either
hex case; :func:`char_set_ir` covers every spelling (or only the canonical one), while
:func:`raw_set_ir` is plain UTF-8 text (grammar-file terminals). Both split ranges the standard
way (UTF-8 lead/continuation bytes, hexadecimal digits) and factor the byte-class sequences into
a prefix tree, so even ``[^a]`` is a few dozen IR nodes.

Example
-------
>>> normalize([(5, 9), (0, 3), (4, 4)]), complement(((0x61, 0x7A),))[:1]
(((0, 9),), ((0, 96),))
"""

from __future__ import annotations

import functools
from typing import Iterable, Union

from structgen.core.ir import ByteClass, Expr, Lit, alt, seq

__all__ = ["MAX_CODE_POINT", "Ranges", "char_set_ir", "complement", "normalize", "raw_set_ir"]

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)

Ranges = tuple[tuple[int, int], ...]


# ---------------------------------------------------------------- code-point range sets

def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged (overlapping or adjacent), inclusive ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def complement(ranges: Ranges) -> Ranges:
    out = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


def _intersect(ranges: Ranges, lo: int, hi: int) -> Ranges:
    return tuple((max(a, lo), min(b, hi)) for a, b in ranges if a <= hi and b >= lo)


def _subtract(ranges: Ranges, lo: int, hi: int) -> Ranges:
    out = []
    for a, b in ranges:
        if b < lo or a > hi:
            out.append((a, b))
            continue
        if a < lo:
            out.append((a, lo - 1))
        if b > hi:
            out.append((hi + 1, b))
    return tuple(out)


# ---------------------------------------------------------------- byte-sequence factoring

# A "spelling sequence" is a tuple of elements, each a byte set (an int bit mask over 0..255) or
# an already built IR expression (the hex digits of a surrogate, reused as a unit).
Element = Union[int, Expr]


def _mask(lo: int, hi: int) -> int:
    return ((1 << (hi - lo + 1)) - 1) << lo


def _mask_ir(mask: int) -> Expr:
    if mask & (mask - 1) == 0:
        return Lit(bytes((mask.bit_length() - 1,)))
    ranges: list[tuple[int, int]] = []
    b = 0
    while mask >> b:
        if (mask >> b) & 1:
            lo = b
            while (mask >> (b + 1)) & 1:
                b += 1
            ranges.append((lo, b))
        b += 1
    return ByteClass(tuple(ranges))


_NOTHING = ByteClass(())  # matches no input at all


def _factor(seqs: list[tuple[Element, ...]]) -> Expr:
    """The alternative of ``seqs`` as a prefix tree; siblings with equal subtrees share a class."""
    empty = False
    groups: dict[Element, list[tuple[Element, ...]]] = {}
    for s in seqs:
        if s:
            groups.setdefault(s[0], []).append(s[1:])
        else:
            empty = True
    merged: dict[Expr, int] = {}  # subtree -> union of the byte masks leading to it
    opts: list[Expr] = [Lit(b"")] if empty else []
    for first, rests in groups.items():
        sub = _factor(rests)
        if isinstance(first, int):
            merged[sub] = merged.get(sub, 0) | first
        else:
            opts.append(seq(first, sub))
    opts = [seq(_mask_ir(m), sub) for sub, m in merged.items()] + opts
    return alt(*opts) if opts else _NOTHING


# ---------------------------------------------------------------- UTF-8 and hex splitting

def _utf8(cp: int) -> bytes:
    if cp < 0x80:
        return bytes((cp,))
    if cp < 0x800:
        return bytes((0xC0 | cp >> 6, 0x80 | cp & 0x3F))
    if cp < 0x10000:
        return bytes((0xE0 | cp >> 12, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F))
    return bytes((0xF0 | cp >> 18, 0x80 | cp >> 12 & 0x3F, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F))


def _utf8_sequences(lo: int, hi: int) -> list[tuple[int, ...]]:
    """Byte-range sequences whose UTF-8 strings are exactly the code points ``lo..hi``.

    The construction of Rust's ``utf8-ranges``: split at encoded-length boundaries, then until
    every continuation position spans whole 64-value blocks; then encode both ends.
    """
    out: list[tuple[int, ...]] = []
    todo = [(lo, hi)]
    while todo:
        lo, hi = todo.pop()
        for boundary in (0x7F, 0x7FF, 0xFFFF):
            if lo <= boundary < hi:
                todo += [(boundary + 1, hi), (lo, boundary)]
                break
        else:
            for i in (1, 2, 3):
                m = (1 << (6 * i)) - 1
                if lo & ~m != hi & ~m:
                    if lo & m:
                        todo += [((lo | m) + 1, hi), (lo, lo | m)]
                        break
                    if hi & m != m:
                        todo += [(hi & ~m, hi), (lo, (hi & ~m) - 1)]
                        break
            else:
                out.append(tuple(_mask(a, b) for a, b in zip(_utf8(lo), _utf8(hi))))
    return out


# Bytes spelling each hex digit value: '0'..'9', then 'a'/'A'..'f'/'F'.
_HEX_DIGIT_MASKS = [_mask(0x30 + d, 0x30 + d) if d < 10
                    else _mask(0x57 + d, 0x57 + d) | _mask(0x37 + d, 0x37 + d) for d in range(16)]


def _digit_mask(lo: int, hi: int) -> int:
    m = 0
    for d in range(lo, hi + 1):
        m |= _HEX_DIGIT_MASKS[d]
    return m


def _hex_sequences(lo: int, hi: int, ndigits: int = 4) -> list[tuple[int, ...]]:
    """Digit-class sequences spelling ``lo..hi`` as ``ndigits`` hex digits (either letter case)."""
    if ndigits == 1:
        return [(_digit_mask(lo, hi),)]
    base = 16 ** (ndigits - 1)
    lo_d, lo_rest = divmod(lo, base)
    hi_d, hi_rest = divmod(hi, base)
    if lo_d == hi_d:
        return [(_HEX_DIGIT_MASKS[lo_d],) + s for s in _hex_sequences(lo_rest, hi_rest, ndigits - 1)]
    out: list[tuple[int, ...]] = []
    tail: list[tuple[int, ...]] = []
    if lo_rest:
        out += [(_HEX_DIGIT_MASKS[lo_d],) + s for s in _hex_sequences(lo_rest, base - 1, ndigits - 1)]
        lo_d += 1
    if hi_rest != base - 1:
        tail = [(_HEX_DIGIT_MASKS[hi_d],) + s for s in _hex_sequences(0, hi_rest, ndigits - 1)]
        hi_d -= 1
    if lo_d <= hi_d:
        out.append((_digit_mask(lo_d, hi_d),) + (_digit_mask(0, 15),) * (ndigits - 1))
    return out + tail


def _hex_ir(ranges: Ranges) -> Expr:
    return _factor([s for lo, hi in ranges for s in _hex_sequences(lo, hi)])


_SHORT_ESCAPES = {0x22: ord('"'), 0x5C: ord("\\"), 0x2F: ord("/"), 0x08: ord("b"), 0x0C: ord("f"),
                  0x0A: ord("n"), 0x0D: ord("r"), 0x09: ord("t")}
_BACKSLASH, _U = _mask(0x5C, 0x5C), _mask(0x75, 0x75)


@functools.lru_cache(maxsize=4096)
def _char_set_ir(ranges: Ranges, canonical: bool = False) -> Expr:
    seqs: list[tuple[Element, ...]] = []
    # Raw UTF-8: code points >= 0x20 except '"' and '\'.
    raw = _subtract(_subtract(_intersect(ranges, 0x20, MAX_CODE_POINT), 0x22, 0x22), 0x5C, 0x5C)
    for lo, hi in raw:
        seqs += _utf8_sequences(lo, hi)
    if canonical:  # json.dumps(ensure_ascii=False): short escapes, \u00xx for other controls
        letters = 0
        for cp, letter in _SHORT_ESCAPES.items():
            if cp != 0x2F and any(lo <= cp <= hi for lo, hi in ranges):
                letters |= _mask(letter, letter)
        if letters:
            seqs.append((_BACKSLASH, letters))
        for cp in range(0x20):
            if cp not in _SHORT_ESCAPES and any(lo <= cp <= hi for lo, hi in ranges):
                seqs.append((_BACKSLASH,) + tuple(_mask(b, b) for b in f"u{cp:04x}".encode()))
        return _factor(seqs)
    # Short escapes.
    letters = 0
    for cp, letter in _SHORT_ESCAPES.items():
        if any(lo <= cp <= hi for lo, hi in ranges):
            letters |= _mask(letter, letter)
    if letters:
        seqs.append((_BACKSLASH, letters))
    # \uXXXX for the BMP (surrogates are already gone).
    for lo, hi in _intersect(ranges, 0, 0xFFFF):
        seqs += [(_BACKSLASH, _U) + s for s in _hex_sequences(lo, hi)]
    # Astral: \uHIGH\uLOW, blocks of (high range, low range), grouped by low range.
    by_low: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for lo, hi in _intersect(ranges, 0x10000, MAX_CODE_POINT):
        h_lo, l_lo = divmod(lo - 0x10000, 0x400)
        h_hi, l_hi = divmod(hi - 0x10000, 0x400)
        if h_lo == h_hi:
            by_low.setdefault((l_lo, l_hi), []).append((h_lo, h_lo))
            continue
        if l_lo:
            by_low.setdefault((l_lo, 0x3FF), []).append((h_lo, h_lo))
            h_lo += 1
        if l_hi != 0x3FF:
            by_low.setdefault((0, l_hi), []).append((h_hi, h_hi))
            h_hi -= 1
        if h_lo <= h_hi:
            by_low.setdefault((0, 0x3FF), []).append((h_lo, h_hi))
    for (l_lo, l_hi), highs in by_low.items():
        high_ir = _hex_ir(tuple((0xD800 + a, 0xD800 + b) for a, b in normalize(highs)))
        low_ir = _hex_ir(((0xDC00 + l_lo, 0xDC00 + l_hi),))
        seqs.append((_BACKSLASH, _U, high_ir, _BACKSLASH, _U, low_ir))
    return _factor(seqs)


def char_set_ir(ranges: Iterable[tuple[int, int]], *, canonical: bool = False) -> Expr:
    """One JSON string character, in any spelling, whose code point lies in ``ranges``.

    ``canonical=True`` allows one spelling per character, the one ``json.dumps(...,
    ensure_ascii=False)`` writes (raw, or a short escape, or ``\\u00xx`` for other controls):
    a much smaller automaton, for generation.

    ``ranges`` are inclusive code-point ranges within ``0..0x10FFFF`` (they are sorted and merged
    here; surrogates ``U+D800..U+DFFF`` are dropped, as JSON strings cannot hold them alone). The
    result accepts the raw UTF-8 spelling (for code points JSON allows raw: ``>= 0x20``, not
    ``"`` nor ``\\``), the short escape where one exists, and ``\\uXXXX`` in any hex-letter case
    (astral code points as a surrogate pair). An empty set gives an expression matching nothing.
    The IR is built by range splitting, never code point by code point, and is cached.

    Example
    -------
    >>> print(char_set_ir([(0x30, 0x39)]))
    [0-9] | "\\\\u003" [0-9]
    >>> print(char_set_ir([(0xE9, 0xE9)]))
    "\\xc3\\xa9" | "\\\\u00" [Ee] "9"
    """
    rs = []
    for lo, hi in ranges:
        if not 0 <= lo <= hi <= MAX_CODE_POINT:
            raise ValueError(f"bad code-point range ({lo:#x}, {hi:#x})")
        rs.append((lo, hi))
    return _char_set_ir(_subtract(normalize(rs), *_SURROGATES), canonical)


@functools.lru_cache(maxsize=4096)
def _raw_set_ir(ranges: Ranges) -> Expr:
    return _factor([s for lo, hi in ranges for s in _utf8_sequences(lo, hi)])


def raw_set_ir(ranges: Iterable[tuple[int, int]]) -> Expr:
    """One character of plain UTF-8 text whose code point lies in ``ranges`` (no surrogates).

    Example
    -------
    >>> print(raw_set_ir([(0x61, 0x63), (0xE9, 0xE9)]))
    [a-c] | "\\xc3\\xa9"
    """
    return _raw_set_ir_as_given(tuple((lo, hi) for lo, hi in ranges))  # hashable, as given


@functools.lru_cache(maxsize=4096)
def _raw_set_ir_as_given(ranges: Ranges) -> Expr:
    # keyed on the ranges as the parser gives them: a case-insensitive name is one {x, X} set
    # per letter, and normalizing each again cost more than the lookup (SQL: 5,500 per grammar)
    return _raw_set_ir(_subtract(normalize(ranges), *_SURROGATES))
