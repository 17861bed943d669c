"""Regular expressions over plain text (Python ``re`` dialect) compiled to grammar IR.

Grammar-file terminals (``/[a-z_]\\w*/i``) and :func:`structgen.compile_regex` match *text*,
not JSON string contents, and are read as Python's ``re`` reads them, because Lark grammars are
written for it. The syntax tree is the one of :mod:`structgen.frontends.regex.ecma` (same parser, a subclass
for the dialect); its leaves become UTF-8 byte sequences.

A pattern matches a whole terminal (``re.fullmatch``), so ``^``/``$`` have nothing to say and
are refused, as are lookaround, backreferences, ``\\b``/``\\B``/``\\A``/``\\Z`` and inline flag
groups. Flags come from the grammar (``/.../is``): ``i`` folds case with the simple Unicode
case mapping (``c.lower()``/``c.upper()`` when one character; Python also folds ``ſ``→``s``,
``K`` (Kelvin)→``k`` and ``ı``→``i``, structgen does not, so a query keyword stays ASCII),
``s`` lets ``.`` match a newline; ``m`` and ``u`` change nothing here; ``x`` and ``l`` are
refused. ``\\d``, ``\\w`` and ``\\s`` are Unicode classes, as in Python.

Example
-------
>>> from structgen.core.regular import matches
>>> e = text_regex_to_ir("[a-z_]\\\\w*", ignore_case=True)
>>> [matches(e, s.encode()) for s in ("Name_1", "_", "1x", "caf\\u00e9")]
[True, True, False, True]
"""

from __future__ import annotations

import functools
import re

from structgen.core.budget import affordable_text
from structgen.errors import RegexSyntaxError
from structgen.core.ir import Expr, alt, seq
from structgen.frontends.regex.charsets import MAX_CODE_POINT, Ranges, complement, normalize, raw_set_ir
from structgen.frontends.regex.syntax import HEX_CHARS, Malformed, Parser, Unsupported, branches

__all__ = ["text_regex_to_ir", "is_lazy", "RegexSyntaxError"]




@functools.lru_cache(maxsize=None)
def _unicode_class(kind: str) -> Ranges:
    """Python's Unicode ``\\d`` (decimal digits), ``\\w`` (alphanumeric and ``_``), ``\\s``."""
    test = {"d": str.isdecimal, "w": lambda c: c.isalnum() or c == "_", "s": str.isspace}[kind]
    out: list[tuple[int, int]] = []
    for cp in range(MAX_CODE_POINT + 1):
        if test(chr(cp)):
            if out and out[-1][1] == cp - 1:
                out[-1] = (out[-1][0], cp)
            else:
                out.append((cp, cp))
    return tuple(out)


class _LazyClasses(dict):
    """``\\d \\D \\w \\W \\s \\S`` built on first use (each scans every code point once)."""

    def __contains__(self, key: object) -> bool:
        return key in ("d", "D", "w", "W", "s", "S")

    def __getitem__(self, key: str) -> Ranges:
        base = _unicode_class(key.lower())
        return base if key.islower() else complement(base)


def _case_variants(cp: int) -> set[int]:
    c = chr(cp)
    out = {cp}
    for v in (c.lower(), c.upper(), c.lower().upper(), c.upper().lower()):
        if len(v) == 1:
            out.add(ord(v))
    return out


@functools.lru_cache(maxsize=4096)
def _fold(ranges: Ranges) -> Ranges:
    extra: list[tuple[int, int]] = list(ranges)
    for lo, hi in ranges:
        for cp in range(lo, min(hi, 0x1FFFF) + 1):  # no cased letters above the SMP
            for v in _case_variants(cp):
                if not lo <= v <= hi:
                    extra.append((v, v))
    return normalize(extra)


class _PythonParser(Parser):
    """The parser of :mod:`structgen.frontends.regex.ecma`, reading Python's ``re`` dialect."""

    class_escapes = _LazyClasses()

    def __init__(self, pattern: str, *, ignore_case: bool, dotall: bool) -> None:
        super().__init__(pattern)
        self.ignore_case = ignore_case
        self.dot = ((0, MAX_CODE_POINT),) if dotall else complement(((0x0A, 0x0A),))

    def fold(self, ranges: Ranges) -> Ranges:
        return _fold(ranges) if self.ignore_case else ranges

    def term(self):
        if self.peek() in ("^", "$") and self.peek():
            raise Unsupported(f"anchor '{self.peek()}' (a terminal always matches whole)", self.i)
        return super().term()

    def group(self):
        if self.p.startswith("(?P<", self.i):  # Python's named group
            end = self.p.find(">", self.i)
            if end < 0:
                raise Malformed("invalid group name in '(?P<'", self.i)
            self.p = self.p[:self.i + 2] + self.p[self.i + 3:]  # read it as '(?<name>'
        elif self.p.startswith("(?P=", self.i):
            raise Unsupported("backreference '(?P='", self.i)
        return super().group()

    def atom_escape(self):
        c = self.peek(1)
        if c in ("A", "Z") and c:
            raise Unsupported(f"anchor '\\{c}' (a terminal always matches whole)", self.i)
        return super().atom_escape()

    def char_escape(self, *, in_class: bool) -> int:
        start = self.i
        c = self.peek(1)
        if c == "a":
            self.i += 2
            return 0x07
        if c in ("u", "U") and c:  # Python: \uHHHH, \UHHHHHHHH (no braces)
            n, count = (4, "four") if c == "u" else (8, "eight")
            digits = self.p[self.i + 2:self.i + 2 + n]
            if len(digits) != n or any(d not in HEX_CHARS for d in digits):
                raise Malformed(f"'\\{c}' must be followed by {count} hex digits", start)
            self.i += 2 + n
            return int(digits, 16)
        if c and c in "01234567" and (c == "0" or in_class):
            j = self.i + 1
            while j < len(self.p) and j < self.i + 4 and self.p[j] in "01234567":
                j += 1
            self.i = j
            return int(self.p[start + 1:j], 8)
        if c in ("c", "N") and c:
            raise Unsupported(f"escape '\\{c}'", start)
        return super().char_escape(in_class=in_class)


def text_regex_to_ir(pattern: str, *, ignore_case: bool = False, dotall: bool = False) -> Expr:
    """IR for the UTF-8 text that ``pattern`` matches whole (Python ``re`` dialect).

    Raises :class:`RegexSyntaxError` (a :class:`~structgen.errors.GrammarError`) naming what is
    wrong or unsupported and its character offset.
    """
    affordable_text(pattern, "a regular expression")  # on every call: cached or not
    try:
        return _compile(pattern, ignore_case, dotall)[0]
    except Malformed as e:
        raise RegexSyntaxError(f"invalid regular expression: {e.what}", e.offset) from None
    except Unsupported as e:
        raise RegexSyntaxError(f"unsupported in a regular expression: {e.what}", e.offset) from None


# A pattern of words and '|' only: plain characters, or a backslash before printable ASCII that
# is neither a letter nor a digit (which means that character). No empty word, no surrogate.
_CHAR = r"(?:[^\\|()\[\]{}*+?.^$\ud800-\udfff]|\\[ -/:-@\[-`{-~])"
_WORDS = re.compile(f"{_CHAR}+(?:\\|{_CHAR}+)*", re.S)
_WORD_PIECE = re.compile(r"\\(.)|(\|)|(.)", re.S)


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, ignore_case: bool, dotall: bool) -> tuple[Expr, bool]:
    if _WORDS.fullmatch(pattern):
        return _words(pattern, ignore_case), False
    return _parsed(pattern, ignore_case, dotall)


def _parsed(pattern: str, ignore_case: bool, dotall: bool) -> tuple[Expr, bool]:
    parser = _PythonParser(pattern, ignore_case=ignore_case, dotall=dotall)
    tree = parser.parse()
    lowered = branches(tree, False, False, 1, "raw")  # anchors raise: never at an edge
    return alt(*(seq(ir) for _, _, ir in lowered)), parser.lazy


def _words(pattern: str, ignore_case: bool) -> Expr:
    """The IR the parser gives a pattern of words (:data:`_WORDS`), built without it: a SQL
    grammar's names, functions and ``"SELECT"i`` keywords are most of its regex text, and the
    general parser spent ~10 µs a character on them."""
    words: dict[Expr, None] = {}
    chars: list[Expr] = []
    for escaped, bar, plain in _WORD_PIECE.findall(pattern + "|"):
        if bar:
            words[seq(*chars)] = None
            chars = []
        else:
            chars.append(_char_ir(escaped or plain, ignore_case))
    return seq(alt(*words))


@functools.lru_cache(maxsize=4096)
def _char_ir(char: str, ignore_case: bool) -> Expr:
    cp = ord(char)
    return raw_set_ir(_fold(((cp, cp),)) if ignore_case else ((cp, cp),))


def is_lazy(pattern: str, *, ignore_case: bool = False, dotall: bool = False) -> bool:
    """Whether ``pattern`` has a lazy quantifier (``*?``, ``+?``, ``??``, ``{m,n}?``): matched
    by a lexer, its token ends at the first point it may (``/\\*(.|\\n)*?\\*\\//`` at the first
    ``*/``). The pattern must be valid; pass the flags it was lowered with, so the lowering is
    found in the cache rather than done again (a SQL grammar's ``i`` patterns are 15 ms).

    >>> is_lazy("<.*?>"), is_lazy("[a-z]+", ignore_case=True)
    (True, False)
    """
    return _compile(pattern, ignore_case, dotall)[1]

