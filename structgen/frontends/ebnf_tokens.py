"""The tokens of an xgrammar EBNF / llama.cpp GBNF grammar: literals and classes decoded, repeat
bounds read, and every lexical mistake a :class:`~structgen.errors.GrammarError` with line and
column (:meth:`structgen.frontends.lark.syntax.Source.error`). :mod:`structgen.frontends.ebnf`
parses the tokens.

Example
-------
>>> [(t.kind, t.value) for t in tokenize(Source('r ::= "ab" [^a-c]{2,}', "<grammar>"))]
[('name', 'r'), ('::=', None), ('str', 'ab'), ('class', ((0, 96), (100, 1114111))), ('rep', (2, None)), ('eof', None)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from structgen.core.automaton import MAX_UNROLL
from structgen.frontends.lark.syntax import Source
from structgen.frontends.regex.charsets import MAX_CODE_POINT, Ranges, complement, normalize

__all__ = ["Tok", "tokenize"]

_SPACE = re.compile(r"(?:\s+|#[^\n]*)*")
_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
_OPTIONS = re.compile(r"\[[^\]\n]*\][ \t]*::=")
_BOUNDS = re.compile(r"\{\s*(\d+)\s*(?:(,)\s*(\d+|-1)?\s*)?\}")
_NO_LOWER_BOUND = re.compile(r"\{\s*,")
_HEX = re.compile(r"[0-9a-fA-F]*")
_CONTROL = {"n": 10, "r": 13, "t": 9, "b": 8, "f": 12, "a": 7, "v": 11, "0": 0, "e": 27}
_ITSELF = frozenset("\"\\/'?[]-")
_ITSELF_IN_CLASS = _ITSELF | frozenset("^$.*+(){}|")
_ESCAPES_HINT = ("Escapes are \\n \\r \\t \\b \\f \\a \\v \\0 \\e \\xHH \\uXXXX \\UXXXXXXXX and a "
                 "backslash before \" \\ / ' ? [ ] - (in a class also ^ $ . * + ( ) { } |).")


@dataclass
class Tok:
    #: "name", "def" (a name before ::=), "::=", "str", "class", "any" (.), "rep" ({m,n}), "eof",
    #: or the operator itself: ( (= ) | * + ? , =
    kind: str
    pos: int
    end: int
    value: Any = None


def tokenize(src: Source) -> list[Tok]:
    """The tokens of ``src``, whitespace and ``#`` comments left out, ending with an "eof" token."""
    text, pos, out = src.text, 0, []
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            out.append(Tok("eof", pos, pos))
            return out
        c, value, end = text[pos], None, pos + 1
        name = _NAME.match(text, pos)
        if c == '"':
            kind, (value, end) = "str", _string(src, pos)
        elif c == "[":
            kind, (value, end) = "class", _class(src, pos)
        elif text.startswith("::=", pos):
            kind, end = "::=", pos + 3
        elif text.startswith("(=", pos):
            kind, end = "(=", pos + 2
        elif c in "()|*+?,=":  # ',' and '=' only in xgrammar's macros, refused by the parser
            kind = c
        elif c == "{":
            kind, (value, end) = "rep", _bounds(src, pos)
        elif name is not None:
            kind, value, end = "name", name.group(), name.end()
            if _OPTIONS.match(text, end):
                raise src.error(f"rule options '{text[end:text.index(']', end) + 1]}' are not supported", end,
                                "structgen cannot honour xgrammar's rule options (max_tokens, max_chars, capture, "
                                "lazy, temperature); remove the block to read the rule without them.")
        elif c == ".":
            kind = "any"
        elif c in "<!":
            raise src.error("token matches (<[id]>, <token>, !<...>) are not supported", pos,
                            "structgen grammars match text, not token ids: write the token's text as a literal.")
        else:
            raise src.error(f"unexpected character {c!r}", pos, "A rule is 'name ::= body'; literals are "
                            "\"quoted\" and character classes [bracketed].")
        out.append(Tok(kind, pos, end, value))
        pos = end


def _string(src: Source, start: int) -> tuple[str, int]:
    text, i, out = src.text, start + 1, []
    while True:
        if i >= len(text) or text[i] == "\n":
            raise src.error("unterminated string literal", start,
                            "Close it with '\"' on the same line (write \\n for a newline inside it).")
        if text[i] == '"':
            return "".join(out), i + 1
        cp, nxt = _char(src, i, in_class=False)
        if 0xD800 <= cp <= 0xDFFF:
            raise src.error(f"U+{cp:04X} is a surrogate, not a character", i, "UTF-8 text cannot hold it.")
        out.append(chr(cp))
        i = nxt


def _class(src: Source, start: int) -> tuple[Ranges, int]:
    text, i, ranges = src.text, start + 1, []
    negated = text.startswith("^", i)
    i += negated
    while True:
        if i >= len(text) or text[i] == "\n":
            raise src.error("unterminated character class", start,
                            "Close it with ']' on the same line (write \\n for a newline inside it).")
        if text[i] == "]":
            break
        lo, nxt = _char(src, i, in_class=True)
        hi = lo
        if text.startswith("-", nxt) and text[nxt + 1:nxt + 2] not in ("]", "", "\n"):
            hi, nxt = _char(src, nxt + 1, in_class=True)
            if hi < lo:
                raise src.error(f"range {text[i:nxt]} is out of order", i, "Write the smaller end first.",
                                width=nxt - i)
        ranges.append((lo, hi))
        i = nxt
    if not ranges and not negated:
        raise src.error("empty character class '[]' matches nothing", start,
                        "Write [^] for any character, or leave the class out.", width=2)
    chars = complement(normalize(ranges)) if negated else normalize(ranges)
    if not [r for r in chars if not (0xD800 <= r[0] and r[1] <= 0xDFFF)]:
        raise src.error("character class matches no character", start, "It excludes every character.",
                        width=i + 1 - start)
    return chars, i + 1


def _char(src: Source, i: int, *, in_class: bool) -> tuple[int, int]:
    """The code point at ``i`` (a character or an escape) and where the next one starts."""
    text = src.text
    if text[i] != "\\":
        if 0xD800 <= ord(text[i]) <= 0xDFFF:
            raise src.error("a lone surrogate in the grammar text", i, "Pass the text as valid Unicode.")
        return ord(text[i]), i + 1
    e = text[i + 1:i + 2]
    if e in _CONTROL:
        return _CONTROL[e], i + 2
    if e in (_ITSELF_IN_CLASS if in_class else _ITSELF):
        return ord(e), i + 2
    if e and e in "xuU":
        digits = _HEX.match(text, i + 2).group()  # type: ignore[union-attr]
        n = {"x": 2, "u": 4, "U": 8}[e]
        if e == "x" and len(digits) > 2:
            raise src.error(f"'\\x{digits}' is ambiguous: llama.cpp reads '\\x{digits[:2]}' then "
                            f"'{digits[2:]}', xgrammar one code point U+{digits.upper()}", i,
                            f"Write \\u or \\U with all the digits, or end the literal after two digits "
                            f"(\"\\x{digits[:2]}\" \"{digits[2:]}\").", width=2 + len(digits))
        if not digits or (e != "x" and len(digits) < n):
            raise src.error(f"'\\{e}' needs {'one or two' if e == 'x' else n} hex digits", i, _ESCAPES_HINT, width=2)
        cp = int(digits[:n], 16)
        if cp > MAX_CODE_POINT:
            raise src.error(f"'\\{e}{digits[:n]}' is past U+10FFFF, the last code point", i,
                            "Unicode has no characters above it.", width=2 + n)
        return cp, i + 2 + min(n, len(digits))
    if e and e in "dDwWsS":
        raise src.error(f"shorthand class '\\{e}' is not supported", i,
                        "Write the characters out: [0-9], [a-zA-Z0-9_], [ \\t\\n\\r].", width=2)
    raise src.error(f"unknown escape '\\{e}'" if e.strip() else "a backslash escapes nothing here", i,
                    _ESCAPES_HINT, width=2)


def _bounds(src: Source, start: int) -> tuple[tuple[int, "int | None"], int]:
    m = _BOUNDS.match(src.text, start)
    if m is None:
        missing = _NO_LOWER_BOUND.match(src.text, start)
        raise src.error("a repeat needs its lower bound" if missing else "malformed repeat", start,
                        "Write {m}, {m,} or {m,n} with whole numbers (at most n times: {0,n}).")
    lo = _count(m.group(1))
    hi = lo if m.group(2) is None else None if m.group(3) in (None, "-1") else _count(m.group(3))
    if hi is not None and hi < lo:
        raise src.error(f"repeat {m.group()} has its bounds out of order", start, "Write the smaller bound first.",
                        width=m.end() - start)
    if max(lo, hi or 0) > MAX_UNROLL:
        raise src.error(f"repeat {m.group()} is above {MAX_UNROLL}, the most copies structgen unrolls", start,
                        "Lower the bound, or repeat with '*' or '+' and check the count after generation.",
                        width=m.end() - start)
    return (lo, hi), m.end()


def _count(digits: str) -> int:
    """A repeat bound; past nine digits, one too large for any repeat (Python's ``int`` refuses
    strings of over 4,300 digits)."""
    return int(digits) if len(digits) <= 9 else MAX_UNROLL + 1
