"""JSON Schema ``pattern`` (ECMA-262 dialect) compiled to grammar IR over JSON string bytes.

Data flow
---------
``pattern`` constrains the *decoded* value of a JSON string and is an unanchored search: the
string must *contain* a match unless ``^``/``$`` anchor it. The automaton, though, reads the
*encoded* bytes between the quotes, where every character may be spelt raw (UTF-8), as a short
escape (``\\n``, ``\\"`` ...) or as ``\\uXXXX`` in either hex case (astral characters as a
surrogate pair). So compilation runs in three steps:

1. :func:`pattern_to_ir` parses the pattern (recursive descent, our own parser) into a small
   syntax tree whose leaves are *code-point sets* (a literal ``a`` is the set ``{0x61}``, ``\\d``
   is ``{0x30..0x39}``, ``[^x]`` the complement of ``{0x78}``).
2. Each leaf becomes :func:`char_set_ir`: one JSON string character, in any spelling, whose
   decoded code point lies in the set. Raw UTF-8 uses the standard UTF-8 range splitting,
   ``\\u`` escapes a hexadecimal-digit range splitting; the resulting byte-class sequences are
   factored into a prefix tree, so even ``[^a]`` is a few dozen IR nodes.
3. Sequences, alternatives and quantifiers map onto ``seq``/``alt``/``Repeat``; the pattern is
   wrapped in ``Repeat(JSON_CHAR, 0, None)`` on each side that is not anchored.

Dialect
-------
ECMA-262 with the ``u`` flag (code-point semantics, as JSON Schema recommends), no other flags:

* literal characters; escapes ``\\n \\r \\t \\f \\v \\0 \\cX \\xHH \\uHHHH \\u{H...}`` (a
  ``\\uHHHH\\uHHHH`` surrogate pair is one character) and identity escapes of ASCII punctuation
  (``\\. \\* \\/ \\- \\\\`` ...); an escaped ASCII letter or digit without a meaning is an error;
* ``\\d \\D \\w \\W \\s \\S`` (ASCII ``\\d``/``\\w``; ``\\s`` is ECMA WhiteSpace and
  LineTerminator), ``.`` (anything but ``\\n \\r \\u2028 \\u2029``);
* classes ``[...]``/``[^...]`` with ranges and escapes (``\\b`` there is backspace);
* groups ``(...)``, ``(?:...)``, ``(?<name>...)``; alternation ``|``; quantifiers
  ``* + ? {n} {n,} {n,m}`` and their lazy forms (same language);
* ``^`` at the start and ``$`` at the end of the pattern or of a top-level alternative, also
  through groups (``^(a|b)$``, ``(^a|b$)``, ``(^a|b)c``).

Refused with :class:`~structgen.errors.UnsupportedFeatureError` (keyword ``pattern``): lookahead
and lookbehind, backreferences, ``\\b``/``\\B`` word boundaries, ``\\p{...}`` property escapes,
inline modifiers, anchors anywhere else, and quantifiers whose unrolled copies (multiplied
through nesting) exceed :data:`structgen.core.automaton.MAX_UNROLL`. A malformed pattern raises
:class:`~structgen.errors.SchemaError` saying what is wrong at which character offset.

Code points U+D800..U+DFFF (lone surrogates) are never matched: JSON strings cannot hold them.

Example
-------
>>> from structgen.core.ir import Grammar, Lit, seq
>>> from structgen.core.automaton import build_automaton
>>> from structgen.engine.pda import StackMachine, ACCEPT
>>> body = seq(Lit(b'"'), pattern_to_ir("^[a-z]+$"), Lit(b'"'))
>>> sm = StackMachine(build_automaton(Grammar.of("root", root=body)))
>>> [ACCEPT in sm.step_bytes(sm.initial(), s) for s in (b'"abc"', b'"\\\\u0061b"', b'"a1"')]
[True, True, False]
"""

from __future__ import annotations

import functools
from typing import Iterable, Union

from structgen.core.automaton import MAX_UNROLL
from structgen.errors import SchemaError, UnsupportedFeatureError
from structgen.core.ir import ByteClass, Expr, Lit, Repeat, alt, seq
from structgen.frontends.json_text import JSON_CHAR

__all__ = ["char_set_ir", "pattern_to_ir", "raw_set_ir"]

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)

Ranges = tuple[tuple[int, int], ...]


# ---------------------------------------------------------------- code-point range sets

def _normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged (overlapping or adjacent), inclusive ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def _complement(ranges: Ranges) -> Ranges:
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
        high_ir = _hex_ir(tuple((0xD800 + a, 0xD800 + b) for a, b in _normalize(highs)))
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
    return _char_set_ir(_subtract(_normalize(rs), *_SURROGATES), canonical)


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
    return _raw_set_ir(_subtract(_normalize(list(ranges)), *_SURROGATES))


# ---------------------------------------------------------------- pattern syntax tree

class _Set:
    __slots__ = ("ranges",)

    def __init__(self, ranges: Ranges) -> None:
        self.ranges = ranges


class _Seq:
    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items


class _Alt:
    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items


class _Rep:
    __slots__ = ("item", "min", "max", "offset", "text")

    def __init__(self, item, lo: int, hi: int | None, offset: int, text: str) -> None:
        self.item, self.min, self.max, self.offset, self.text = item, lo, hi, offset, text


class _Anchor:
    __slots__ = ("kind", "offset")

    def __init__(self, kind: str, offset: int) -> None:
        self.kind, self.offset = kind, offset


_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE: Ranges = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                  (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                  (0xFEFF, 0xFEFF))
_DOT: Ranges = _complement(((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)))
_CLASS_ESCAPES = {"d": _DIGIT, "D": _complement(_DIGIT), "w": _WORD, "W": _complement(_WORD),
                  "s": _SPACE, "S": _complement(_SPACE)}
_CONTROL_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
_HEX_CHARS = "0123456789abcdefABCDEF"


class _Malformed(Exception):
    def __init__(self, what: str, offset: int) -> None:
        super().__init__(what, offset)
        self.what, self.offset = what, offset


class _Unsupported(Exception):
    def __init__(self, what: str, offset: int) -> None:
        super().__init__(what, offset)
        self.what, self.offset = what, offset


class _Parser:
    """Recursive descent over the ECMA-262 (``u`` flag) pattern grammar."""

    dot: Ranges = _DOT
    class_escapes: "dict[str, Ranges]" = _CLASS_ESCAPES

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.lazy = False  # a lazy quantifier was read

    def fold(self, ranges: Ranges) -> Ranges:
        """A character set as the dialect reads it (case folding lives in subclasses)."""
        return ranges

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self):
        node = self.disjunction()
        if self.i < len(self.p):  # only a ')' stops a top-level disjunction early
            raise _Malformed("unbalanced parenthesis: ')' closes no group", self.i)
        return node

    def disjunction(self):
        alts = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            alts.append(self.alternative())
        return alts[0] if len(alts) == 1 else _Alt(alts)

    def alternative(self):
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            items.append(self.term())
        return items[0] if len(items) == 1 else _Seq(items)

    def term(self):
        start = self.i
        c = self.peek()
        if c in "^$":
            self.i += 1
            if self._at_quantifier():
                raise _Malformed(f"quantifier after anchor '{c}' (nothing to repeat)", self.i)
            return _Anchor(c, start)
        if c in "*+?":
            raise _Malformed(f"quantifier '{c}' with nothing to repeat", start)
        if c == "{":
            if self._at_quantifier():
                raise _Malformed("quantifier '{' with nothing to repeat", start)
            raise _Malformed("lone '{' (escape it as '\\{')", start)
        if c in "}]":
            raise _Malformed(f"lone '{c}' (escape it as '\\{c}')", start)
        if c == "(":
            atom = self.group()
        elif c == "[":
            atom = _Set(self.char_class())
        elif c == ".":
            self.i += 1
            atom = _Set(self.dot)
        elif c == "\\":
            atom = self.atom_escape()
        else:
            cp = self.literal_char()
            atom = _Set(self.fold(((cp, cp),)))
        return self.quantified(atom)

    def literal_char(self) -> int:
        """One pattern character; a raw surrogate pair in the string counts as one."""
        cp = ord(self.p[self.i])
        self.i += 1
        if 0xD800 <= cp <= 0xDBFF and 0xDC00 <= ord(self.peek() or "\0") <= 0xDFFF:
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.p[self.i]) - 0xDC00)
            self.i += 1
        return cp

    def _at_quantifier(self) -> bool:
        c = self.peek()
        if c in ("*", "+", "?") and c:
            return True
        if c != "{":
            return False
        j = self.i + 1
        k = j
        while k < len(self.p) and self.p[k].isdigit() and self.p[k].isascii():
            k += 1
        if k == j:
            return False
        if k < len(self.p) and self.p[k] == ",":
            k += 1
            while k < len(self.p) and self.p[k].isdigit() and self.p[k].isascii():
                k += 1
        return k < len(self.p) and self.p[k] == "}"

    def quantified(self, atom):
        start = self.i
        c = self.peek()
        if c == "*":
            lo, hi = 0, None
            self.i += 1
        elif c == "+":
            lo, hi = 1, None
            self.i += 1
        elif c == "?":
            lo, hi = 0, 1
            self.i += 1
        elif c == "{":
            if not self._at_quantifier():
                raise _Malformed("incomplete quantifier '{' (escape a literal brace as '\\{')", start)
            end = self.p.index("}", self.i)
            body = self.p[self.i + 1:end]
            self.i = end + 1
            if "," in body:
                a, b = body.split(",")
                lo, hi = int(a), (int(b) if b else None)
            else:
                lo = hi = int(body)
            if hi is not None and lo > hi:
                raise _Malformed(f"quantifier {{{body}}} has its numbers out of order", start)
        else:
            return atom
        if self.peek() == "?":  # lazy: same language (a lexer ends such a token early: see .lazy)
            self.i += 1
            self.lazy = True
        return _Rep(atom, lo, hi, start, self.p[start:self.i])

    def group(self):
        start = self.i
        self.i += 1
        if self.peek() == "?":
            nxt = self.peek(1)
            if nxt == ":":
                self.i += 2
            elif nxt and nxt in "=!":
                raise _Unsupported(f"lookahead '(?{nxt}'", start)
            elif nxt == "<" and self.peek(2) in ("=", "!") and self.peek(2):
                raise _Unsupported(f"lookbehind '(?<{self.peek(2)}'", start)
            elif nxt == "<":
                end = self.p.find(">", self.i + 2)
                name = self.p[self.i + 2:end] if end >= 0 else ""
                if end < 0 or not _valid_group_name(name):
                    raise _Malformed("invalid group name in '(?<'", start)
                self.i = end + 1
            elif nxt and (nxt.isalpha() or nxt == "-"):
                raise _Unsupported(f"inline modifier group '(?{nxt}'", start)
            else:
                raise _Malformed("invalid group '(?'", start)
        # Capturing or not is the same language here (captures only matter to backreferences).
        node = self.disjunction()
        if self.peek() != ")":
            raise _Malformed("unbalanced parenthesis: '(' is never closed", start)
        self.i += 1
        return node

    # -- escapes

    def atom_escape(self):
        start = self.i
        c = self.peek(1)
        if c in ("b", "B") and c:
            raise _Unsupported(f"word boundary '\\{c}'", start)
        if c in "123456789" and c:
            j = self.i + 1
            while j < len(self.p) and self.p[j] in "0123456789":
                j += 1
            raise _Unsupported(f"backreference '{self.p[start:j]}'", start)
        if c == "k":
            raise _Unsupported("named backreference '\\k'", start)
        ranges = self.class_escape()
        if ranges is not None:
            return _Set(self.fold(ranges))
        cp = self.char_escape(in_class=False)
        return _Set(self.fold(((cp, cp),)))

    def class_escape(self) -> Ranges | None:
        """``\\d \\D \\w \\W \\s \\S`` (consumed); property escapes refused; else None."""
        c = self.peek(1)
        if c and c in self.class_escapes:
            self.i += 2
            return self.class_escapes[c]
        if c in ("p", "P") and c:
            raise _Unsupported(f"unicode property escape '\\{c}{{...}}'", self.i)
        return None

    def char_escape(self, *, in_class: bool) -> int:
        """An escape standing for one character; ``self.i`` is at the backslash."""
        start = self.i
        c = self.peek(1)
        if not c:
            raise _Malformed("pattern ends with a lone backslash", start)
        self.i += 2
        if c in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[c]
        if c == "b" and in_class:
            return 0x08
        if c == "0":
            if self.peek().isdigit() and self.peek().isascii():
                raise _Malformed("octal escape '\\0" + self.peek() + "' (not allowed in unicode mode)", start)
            return 0
        if c == "c":
            letter = self.peek()
            if letter and letter.isascii() and letter.isalpha():
                self.i += 1
                return ord(letter) % 32
            raise _Malformed("'\\c' must be followed by an ASCII letter", start)
        if c == "x":
            digits = self.p[self.i:self.i + 2]
            if len(digits) != 2 or any(d not in _HEX_CHARS for d in digits):
                raise _Malformed("'\\x' must be followed by two hex digits", start)
            self.i += 2
            return int(digits, 16)
        if c == "u":
            cp, self.i = self._unicode_escape(start)
            if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
                try:  # \uHIGH\uLOW is one character
                    low, end = self._unicode_escape(self.i, braces=False)
                except _Malformed:
                    low, end = -1, self.i
                if 0xDC00 <= low <= 0xDFFF:
                    self.i = end
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            return cp
        if c.isalnum():  # \a, \e, \z ... mean different things in other dialects ("\_" is "_")
            raise _Malformed(f"invalid escape '\\{c}'", start)
        # Identity escape: punctuation (and any other non-word character) stands for itself.
        self.i -= 1
        return self.literal_char()

    def _unicode_escape(self, start: int, *, braces: bool = True) -> tuple[int, int]:
        """``\\uHHHH`` or ``\\u{H...}`` at ``start`` (the backslash): (code point, end offset)."""
        i = start + 2
        if braces and self.p[i:i + 1] == "{":
            end = self.p.find("}", i)
            digits = self.p[i + 1:end] if end >= 0 else ""
            if not digits or any(d not in _HEX_CHARS for d in digits):
                raise _Malformed("'\\u{' must hold hex digits and a closing '}'", start)
            cp = int(digits, 16)
            if cp > MAX_CODE_POINT:
                raise _Malformed(f"code point '\\u{{{digits}}}' is above U+10FFFF", start)
            return cp, end + 1
        digits = self.p[i:i + 4]
        if len(digits) != 4 or any(d not in _HEX_CHARS for d in digits):
            raise _Malformed("'\\u' must be followed by four hex digits or '{hex}'", start)
        return int(digits, 16), i + 4

    # -- classes

    def char_class(self) -> Ranges:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        acc: list[tuple[int, int]] = []
        while True:
            if self.i >= len(self.p):
                raise _Malformed("unterminated character class: '[' is never closed", start)
            if self.peek() == "]":
                self.i += 1
                break
            a_at = self.i
            a = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                b_at = self.i
                b = self.class_atom()
                if isinstance(a, tuple) or isinstance(b, tuple):
                    at = a_at if isinstance(a, tuple) else b_at
                    raise _Malformed("a class escape like '\\d' cannot bound a range", at)
                if a > b:
                    raise _Malformed(f"range out of order in class: '{self.p[a_at:self.i]}'", a_at)
                acc.append((a, b))
            elif isinstance(a, tuple):
                acc.extend(a)
            else:
                acc.append((a, a))
        ranges = self.fold(_normalize(acc))  # fold first: [^a] under a case flag excludes 'A' too
        return _complement(ranges) if negate else ranges

    def class_atom(self) -> "int | Ranges":
        if self.peek() != "\\":
            return self.literal_char()
        c = self.peek(1)
        if c == "-":
            self.i += 2
            return 0x2D
        if c == "B":
            raise _Malformed("invalid escape '\\B' in a class", self.i)
        if c and c in "123456789":
            raise _Malformed(f"invalid escape '\\{c}' in a class (octal escapes are not allowed)", self.i)
        if c == "k":
            raise _Malformed("invalid escape '\\k' in a class", self.i)
        ranges = self.class_escape()
        if ranges is not None:
            return ranges
        return self.char_escape(in_class=True)


def _valid_group_name(name: str) -> bool:
    return bool(name) and (name[0].isalpha() or name[0] in "$_") and all(
        ch.isalnum() or ch in "$_" for ch in name)


# ---------------------------------------------------------------- syntax tree to IR

Branch = tuple[bool, bool, Expr]  # (anchored at start, anchored at end, anchor-free IR)


def _is_anchor(node, kind: str) -> bool:
    return isinstance(node, _Anchor) and node.kind == kind


def _merge(branches: list[Branch]) -> list[Branch]:
    """One branch per anchoring, its IR the alternative of theirs."""
    by_flags: dict[tuple[bool, bool], list[Expr]] = {}
    for sa, ea, ir in branches:
        opts = by_flags.setdefault((sa, ea), [])
        if ir not in opts:
            opts.append(ir)
    return [(sa, ea, alt(*irs)) for (sa, ea), irs in by_flags.items()]


def _branches(node, may_start: bool, may_end: bool, copies: int, canonical: "bool | str") -> list[Branch]:
    """IR branches of ``node``; ``may_start``/``may_end``: an anchor here is at the pattern's edge.

    ``canonical`` picks the leaves' spelling: JSON string contents (every spelling, or
    ``True``: the canonical one) or ``"raw"``: plain UTF-8 text (grammar-file terminals)."""
    if isinstance(node, _Set):
        if canonical == "raw":  # plain text, not JSON string contents
            return [(False, False, raw_set_ir(node.ranges))]
        return [(False, False, char_set_ir(node.ranges, canonical=canonical))]
    if isinstance(node, _Anchor):
        if (node.kind == "^" and not may_start) or (node.kind == "$" and not may_end):
            raise _Unsupported(f"anchor '{node.kind}' that is not at the start ('^') or end ('$') of "
                               "the pattern or of a top-level alternative", node.offset)
        return [(node.kind == "^", node.kind == "$", Lit(b""))]
    if isinstance(node, _Alt):
        return _merge([b for item in node.items for b in _branches(item, may_start, may_end, copies, canonical)])
    if isinstance(node, _Seq):
        items = node.items
        acc: list[tuple[bool, bool, list[Expr]]] = [(False, False, [])]
        for k, item in enumerate(items):
            st = may_start and all(_is_anchor(x, "^") for x in items[:k])
            en = may_end and all(_is_anchor(x, "$") for x in items[k + 1:])
            got = _branches(item, st, en, copies, canonical)
            acc = [(sa or sa2, ea or ea2, irs + [ir]) for sa, ea, irs in acc for sa2, ea2, ir in got]
        return _merge([(sa, ea, seq(*irs) if irs else Lit(b"")) for sa, ea, irs in acc])
    if isinstance(node, _Rep):
        n = node.max if node.max is not None else node.min
        total = copies * max(n, 1)
        if total > MAX_UNROLL:
            raise _Unsupported(f"quantifier '{node.text}' needs {total} unrolled copies (limit "
                               f"{MAX_UNROLL}, counting nested quantifiers multiplied)", node.offset)
        ((_, _, body),) = _branches(node.item, False, False, total, canonical)
        if node.max == 0:
            return [(False, False, Lit(b""))]
        if node.min == node.max == 1:
            return [(False, False, body)]
        return [(False, False, Repeat(body, node.min, node.max))]
    raise AssertionError(f"unexpected node {node!r}")  # pragma: no cover


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, canonical: bool) -> Expr:
    tree = _Parser(pattern).parse()
    any_ = Repeat(char_set_ir([(0, MAX_CODE_POINT)], canonical=True) if canonical else JSON_CHAR, 0, None)
    opts = []
    for sa, ea, ir in _branches(tree, True, True, 1, canonical):
        if not sa and not ea and ir == Lit(b""):
            opts.append(any_)
        else:
            opts.append(seq(Lit(b"") if sa else any_, ir, Lit(b"") if ea else any_))
    return alt(*opts)


def pattern_to_ir(pattern: str, *, pointer: str = "", canonical: bool = False) -> Expr:
    """IR for the bytes between the quotes of a JSON string whose value matches ``pattern``.

    Matching is an ECMA-262 search (``u`` flag): the decoded string must contain a match, unless
    ``^``/``$`` anchor it; every spelling of every character counts (``canonical=True``: only
    the spelling ``json.dumps`` writes, for generation; see :func:`char_set_ir`). The result has no
    :class:`~structgen.core.ir.Ref`, so it can sit anywhere in a grammar. Results are cached.

    Raises
    ------
    SchemaError
        The pattern is malformed; the message says what and at which character offset.
    UnsupportedFeatureError
        The pattern uses lookaround, backreferences, word boundaries, property escapes, inline
        modifiers, an anchor inside the pattern, or a quantifier too large to unroll.

    Example
    -------
    >>> print(pattern_to_ir("^a?$"))
    ("a" | "\\\\u0061")?
    >>> pattern_to_ir("a(?=b)", pointer="/properties/x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    structgen.errors.UnsupportedFeatureError: ... lookahead '(?=', at character offset 1 ...
    """
    if not isinstance(pattern, str):
        raise SchemaError(f"'pattern' must be a string, not {type(pattern).__name__}", pointer=pointer)
    try:
        return _compile(pattern, canonical)
    except _Malformed as e:
        raise SchemaError(f"invalid pattern {pattern!r}: {e.what}, at character offset {e.offset}",
                          pointer=pointer) from None
    except _Unsupported as e:
        hint = f"{e.what}, at character offset {e.offset} of pattern {pattern!r}"
        raise UnsupportedFeatureError("pattern", pointer=pointer, hint=hint) from None
