"""Regex syntax: the ECMA-262 (``u`` flag) parser, its syntax tree and the tree lowered to IR.

The Python-``re`` dialect (:mod:`structgen.frontends.regex.python`) subclasses :class:`Parser`;
both lower the tree with :func:`branches`, whose leaves are code-point sets spelt by
:mod:`structgen.frontends.regex.charsets`.

Example
-------
>>> [(start, end, str(ir)) for start, end, ir in branches(Parser("^ab?$").parse(), True, True, 1, "raw")]
[(True, True, '"a" "b"?')]
"""

from __future__ import annotations

from structgen.core.automaton import MAX_UNROLL
from structgen.core.ir import Expr, Lit, Repeat, alt, seq
from structgen.frontends.regex.charsets import MAX_CODE_POINT, Ranges, char_set_ir, complement, normalize, raw_set_ir

__all__ = ["Branch", "HEX_CHARS", "Malformed", "Parser", "Unsupported", "branches"]


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
_DOT: Ranges = complement(((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)))
_CLASS_ESCAPES = {"d": _DIGIT, "D": complement(_DIGIT), "w": _WORD, "W": complement(_WORD),
                  "s": _SPACE, "S": complement(_SPACE)}
_CONTROL_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
HEX_CHARS = "0123456789abcdefABCDEF"


class Malformed(Exception):
    def __init__(self, what: str, offset: int) -> None:
        super().__init__(what, offset)
        self.what, self.offset = what, offset


class Unsupported(Exception):
    def __init__(self, what: str, offset: int) -> None:
        super().__init__(what, offset)
        self.what, self.offset = what, offset


class Parser:
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
            raise Malformed("unbalanced parenthesis: ')' closes no group", self.i)
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
                raise Malformed(f"quantifier after anchor '{c}' (nothing to repeat)", self.i)
            return _Anchor(c, start)
        if c in "*+?":
            raise Malformed(f"quantifier '{c}' with nothing to repeat", start)
        if c == "{":
            if self._at_quantifier():
                raise Malformed("quantifier '{' with nothing to repeat", start)
            raise Malformed("lone '{' (escape it as '\\{')", start)
        if c in "}]":
            raise Malformed(f"lone '{c}' (escape it as '\\{c}')", start)
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
                raise Malformed("incomplete quantifier '{' (escape a literal brace as '\\{')", start)
            end = self.p.index("}", self.i)
            body = self.p[self.i + 1:end]
            self.i = end + 1
            if "," in body:
                a, b = body.split(",")
                lo, hi = int(a), (int(b) if b else None)
            else:
                lo = hi = int(body)
            if hi is not None and lo > hi:
                raise Malformed(f"quantifier {{{body}}} has its numbers out of order", start)
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
                raise Unsupported(f"lookahead '(?{nxt}'", start)
            elif nxt == "<" and self.peek(2) in ("=", "!") and self.peek(2):
                raise Unsupported(f"lookbehind '(?<{self.peek(2)}'", start)
            elif nxt == "<":
                end = self.p.find(">", self.i + 2)
                name = self.p[self.i + 2:end] if end >= 0 else ""
                if end < 0 or not _valid_group_name(name):
                    raise Malformed("invalid group name in '(?<'", start)
                self.i = end + 1
            elif nxt and (nxt.isalpha() or nxt == "-"):
                raise Unsupported(f"inline modifier group '(?{nxt}'", start)
            else:
                raise Malformed("invalid group '(?'", start)
        # Capturing or not is the same language here (captures only matter to backreferences).
        node = self.disjunction()
        if self.peek() != ")":
            raise Malformed("unbalanced parenthesis: '(' is never closed", start)
        self.i += 1
        return node

    # -- escapes

    def atom_escape(self):
        start = self.i
        c = self.peek(1)
        if c in ("b", "B") and c:
            raise Unsupported(f"word boundary '\\{c}'", start)
        if c in "123456789" and c:
            j = self.i + 1
            while j < len(self.p) and self.p[j] in "0123456789":
                j += 1
            raise Unsupported(f"backreference '{self.p[start:j]}'", start)
        if c == "k":
            raise Unsupported("named backreference '\\k'", start)
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
            raise Unsupported(f"unicode property escape '\\{c}{{...}}'", self.i)
        return None

    def char_escape(self, *, in_class: bool) -> int:
        """An escape standing for one character; ``self.i`` is at the backslash."""
        start = self.i
        c = self.peek(1)
        if not c:
            raise Malformed("pattern ends with a lone backslash", start)
        self.i += 2
        if c in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[c]
        if c == "b" and in_class:
            return 0x08
        if c == "0":
            if self.peek().isdigit() and self.peek().isascii():
                raise Malformed("octal escape '\\0" + self.peek() + "' (not allowed in unicode mode)", start)
            return 0
        if c == "c":
            letter = self.peek()
            if letter and letter.isascii() and letter.isalpha():
                self.i += 1
                return ord(letter) % 32
            raise Malformed("'\\c' must be followed by an ASCII letter", start)
        if c == "x":
            digits = self.p[self.i:self.i + 2]
            if len(digits) != 2 or any(d not in HEX_CHARS for d in digits):
                raise Malformed("'\\x' must be followed by two hex digits", start)
            self.i += 2
            return int(digits, 16)
        if c == "u":
            cp, self.i = self._unicode_escape(start)
            if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
                try:  # \uHIGH\uLOW is one character
                    low, end = self._unicode_escape(self.i, braces=False)
                except Malformed:
                    low, end = -1, self.i
                if 0xDC00 <= low <= 0xDFFF:
                    self.i = end
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            return cp
        if c.isalnum():  # \a, \e, \z ... mean different things in other dialects ("\_" is "_")
            raise Malformed(f"invalid escape '\\{c}'", start)
        # Identity escape: punctuation (and any other non-word character) stands for itself.
        self.i -= 1
        return self.literal_char()

    def _unicode_escape(self, start: int, *, braces: bool = True) -> tuple[int, int]:
        """``\\uHHHH`` or ``\\u{H...}`` at ``start`` (the backslash): (code point, end offset)."""
        i = start + 2
        if braces and self.p[i:i + 1] == "{":
            end = self.p.find("}", i)
            digits = self.p[i + 1:end] if end >= 0 else ""
            if not digits or any(d not in HEX_CHARS for d in digits):
                raise Malformed("'\\u{' must hold hex digits and a closing '}'", start)
            cp = int(digits, 16)
            if cp > MAX_CODE_POINT:
                raise Malformed(f"code point '\\u{{{digits}}}' is above U+10FFFF", start)
            return cp, end + 1
        digits = self.p[i:i + 4]
        if len(digits) != 4 or any(d not in HEX_CHARS for d in digits):
            raise Malformed("'\\u' must be followed by four hex digits or '{hex}'", start)
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
                raise Malformed("unterminated character class: '[' is never closed", start)
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
                    raise Malformed("a class escape like '\\d' cannot bound a range", at)
                if a > b:
                    raise Malformed(f"range out of order in class: '{self.p[a_at:self.i]}'", a_at)
                acc.append((a, b))
            elif isinstance(a, tuple):
                acc.extend(a)
            else:
                acc.append((a, a))
        ranges = self.fold(normalize(acc))  # fold first: [^a] under a case flag excludes 'A' too
        return complement(ranges) if negate else ranges

    def class_atom(self) -> "int | Ranges":
        if self.peek() != "\\":
            return self.literal_char()
        c = self.peek(1)
        if c == "-":
            self.i += 2
            return 0x2D
        if c == "B":
            raise Malformed("invalid escape '\\B' in a class", self.i)
        if c and c in "123456789":
            raise Malformed(f"invalid escape '\\{c}' in a class (octal escapes are not allowed)", self.i)
        if c == "k":
            raise Malformed("invalid escape '\\k' in a class", self.i)
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
    by_flags: dict[tuple[bool, bool], dict[Expr, None]] = {}
    for sa, ea, ir in branches:  # a dict, not a list: a 500-name alternation is not 500² compares
        by_flags.setdefault((sa, ea), {})[ir] = None
    return [(sa, ea, alt(*irs)) for (sa, ea), irs in by_flags.items()]


def _edge_runs(items: list, kind: str, may: bool) -> list[bool]:
    """Per item, whether ``may`` holds and every item before it is an anchor ``kind``."""
    out = []
    for item in items:
        out.append(may)
        may = may and _is_anchor(item, kind)
    return out


def branches(node, may_start: bool, may_end: bool, copies: int, canonical: "bool | str") -> list[Branch]:
    """IR branches of ``node``; ``may_start``/``may_end``: an anchor here is at the pattern's edge.

    ``canonical`` picks the leaves' spelling: JSON string contents (every spelling, or
    ``True``: the canonical one) or ``"raw"``: plain UTF-8 text (grammar-file terminals)."""
    if isinstance(node, _Set):
        if canonical == "raw":  # plain text, not JSON string contents
            return [(False, False, raw_set_ir(node.ranges))]
        return [(False, False, char_set_ir(node.ranges, canonical=canonical))]
    if isinstance(node, _Anchor):
        if (node.kind == "^" and not may_start) or (node.kind == "$" and not may_end):
            raise Unsupported(f"anchor '{node.kind}' that is not at the start ('^') or end ('$') of "
                               "the pattern or of a top-level alternative", node.offset)
        return [(node.kind == "^", node.kind == "$", Lit(b""))]
    if isinstance(node, _Alt):
        return _merge([b for item in node.items for b in branches(item, may_start, may_end, copies, canonical)])
    if isinstance(node, _Seq):
        items = node.items
        # an anchor may stand at item k when only anchors of its kind come before (after) it:
        # one scan each way, not a slice per item (a 60k-character pattern took 13 s)
        starts, ends = _edge_runs(items, "^", may_start), _edge_runs(items[::-1], "$", may_end)[::-1]
        acc: list[tuple[bool, bool, list[Expr]]] = [(False, False, [])]
        for k, item in enumerate(items):
            got = branches(item, starts[k], ends[k], copies, canonical)
            if len(got) == 1:  # the usual case: every branch so far grows in place
                ((sa2, ea2, ir),) = got
                for _, _, irs in acc:
                    irs.append(ir)
                acc = [(sa or sa2, ea or ea2, irs) for sa, ea, irs in acc]
            else:
                acc = [(sa or sa2, ea or ea2, irs + [ir]) for sa, ea, irs in acc for sa2, ea2, ir in got]
        return _merge([(sa, ea, seq(*irs) if irs else Lit(b"")) for sa, ea, irs in acc])
    if isinstance(node, _Rep):
        n = node.max if node.max is not None else node.min
        total = copies * max(n, 1)
        if total > MAX_UNROLL:
            raise Unsupported(f"quantifier '{node.text}' needs {total} unrolled copies (limit "
                               f"{MAX_UNROLL}, counting nested quantifiers multiplied)", node.offset)
        ((_, _, body),) = branches(node.item, False, False, total, canonical)
        if node.max == 0:
            return [(False, False, Lit(b""))]
        if node.min == node.max == 1:
            return [(False, False, body)]
        return [(False, False, Repeat(body, node.min, node.max))]
    raise AssertionError(f"unexpected node {node!r}")  # pragma: no cover
