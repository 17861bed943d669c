"""Grammar-file syntax: the tokenizer, the syntax tree and the recursive-descent parser.

:mod:`structgen.frontends.lark.reader` lowers what :class:`Parser` reads into grammar IR.
Errors carry line, column and a caret (:meth:`Source.error`).

Example
-------
>>> parser = Parser(Source('start: "a" B*\\nB: /[0-9]/', "<grammar>"))
>>> parser.parse()
>>> [(d.name, d.terminal) for d in parser.defs]
[('start', False), ('B', True)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from structgen.core.automaton import MAX_UNROLL
from structgen.core.depth import MAX_NESTING
from structgen.errors import GrammarError

__all__ = ["AltN", "Def", "Name", "Parser", "Range", "Re", "RepN", "SeqN", "Source", "Str", "Tok"]


_TOKEN = re.compile(r"""
    (?P<ws>[ \t\f\r]+|\\\n)
  | (?P<comment>(//|\#)[^\n]*)
  | (?P<nl>\n)
  | (?P<string>"(?:[^"\\\n]|\\.)*"i?)
  | (?P<regex>/(?!/)(?:[^/\\\n]|\\.)+/[imslux]*)
  | (?P<op>->|\.\.|[:|()\[\]?!*+~,.])
  | (?P<number>-?[0-9]+)
  | (?P<directive>%[a-z]+)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
""", re.VERBOSE)


@dataclass
class Tok:
    kind: str
    text: str
    pos: int


#: The most characters of a line an error quotes (a window around the column of a longer one).
_SHOWN = 160


class Source:
    """A grammar text with its name, for errors that point into it."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name

    def error(self, message: str, pos: int, hint: str = "", width: int = 1) -> GrammarError:
        line = self.text.count("\n", 0, pos) + 1
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        text_line = self.text[start:end if end >= 0 else len(self.text)]
        col = pos - start + 1
        shown, at = text_line, col
        if len(text_line) > _SHOWN:  # a window of a long line around the column
            left = max(0, min(col - 1 - _SHOWN // 2, len(text_line) - _SHOWN))
            shown = ("..." if left else "") + text_line[left:left + _SHOWN] + \
                ("..." if left + _SHOWN < len(text_line) else "")
            at = col - left + (3 if left else 0)
        caret = " " * (at - 1) + "^" * max(1, min(width, len(shown) - at + 1))
        full = f"{self.name}:{line}:{col}: {message}\n    {shown}\n    {caret}"
        if hint:
            full += f"\n{hint}"
        err = GrammarError(full)
        err.line, err.column, err.source_name = line, col, self.name  # type: ignore[attr-defined]
        return err


def _lex(src: Source) -> list[Tok]:
    out: list[Tok] = []
    pos = 0
    text = src.text
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            if ch == '"':
                raise src.error("unterminated string literal", pos, 'Close it with \'"\' on the same line.')
            if ch == "/":
                raise src.error("unterminated regular expression", pos, "Close it with '/' on the same line.")
            raise src.error(f"unexpected character {ch!r}", pos)
        kind = m.lastgroup or ""
        if kind not in ("ws", "comment"):
            out.append(Tok(kind, m.group(), pos))
        pos = m.end()
    out.append(Tok("nl", "", len(text)))
    out.append(Tok("eof", "", len(text)))
    return out


@dataclass(frozen=True)
class Name:
    name: str
    pos: int


@dataclass(frozen=True)
class Str:
    text: str
    ignore_case: bool
    pos: int


@dataclass(frozen=True)
class Re:
    pattern: str
    flags: str
    pos: int


@dataclass(frozen=True)
class Range:
    lo: str
    hi: str
    pos: int


@dataclass(frozen=True)
class SeqN:
    items: tuple


@dataclass(frozen=True)
class AltN:
    items: tuple


@dataclass(frozen=True)
class RepN:
    item: object
    min: int
    max: "int | None"
    pos: int = -1  # the operator ('?', '*', '+', '~')


@dataclass
class Def:
    name: str
    pos: int
    body: object
    terminal: bool
    src: Source
    priority: int = 0


class Parser:
    def __init__(self, src: Source) -> None:
        self.src = src
        self.toks = _lex(src)
        self.i = 0
        self.defs: list[Def] = []
        self.imports: list[tuple[str, str, str, int, int]] = []  # (module, name, alias, pos, module pos)
        self.ignores: list[tuple[object, int]] = []

    def peek(self, skip_nl: bool = False) -> Tok:
        j = self.i
        if skip_nl:
            while self.toks[j].kind == "nl":
                j += 1
        return self.toks[j]

    def take(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str, what: str, opener: "Tok | None" = None) -> Tok:
        t = self.peek()
        if t.text != text:
            if opener is not None:
                raise self.src.error(f"unbalanced '{opener.text}': no matching '{text}'", opener.pos,
                                     f"Add '{text}' to close the group opened here (found "
                                     f"{_describe(t)} at {self._where(t)}).")
            raise self.src.error(f"expected {what}, found {_describe(t)}", t.pos)
        return self.take()

    def _where(self, t: Tok) -> str:
        line = self.src.text.count("\n", 0, t.pos) + 1
        return f"line {line}, column {t.pos - self.src.text.rfind(chr(10), 0, t.pos)}"

    def parse(self) -> None:
        while True:
            t = self.take()
            if t.kind == "eof":
                return
            if t.kind == "nl":
                continue
            if t.text in ("?", "!") and self.peek().kind == "name" and self.peek().pos == t.pos + 1:
                t = self.take()  # '?expr:' / '!expr:' prefixes shape Lark's trees only
            if t.kind == "directive":
                self.directive(t)
            elif t.kind == "name":
                self.definition(t)
            else:
                raise self.src.error(f"expected a rule or terminal definition, found {_describe(t)}", t.pos,
                                     "A definition starts with a name and a colon: 'expr: term \"+\" term'.")

    def definition(self, t: Tok) -> None:
        name = t.text
        terminal = name.lstrip("_")[:1].isupper()
        if self.peek().text == "{":  # pragma: no cover - '{' is not even a token
            raise self.src.error("rule templates are not supported", t.pos)
        priority = 0
        if self.peek().text == ".":  # priority: decides between parses (and keyword reservation)
            self.take()
            priority = self.expect_number()
        if self.peek().text != ":":
            raise self.src.error(f"expected ':' after the name '{name}', found {_describe(self.peek())}",
                                 self.peek().pos, f"Write '{name}: ...'.")
        self.take()
        body = self.expansions()
        self.end_of_line()
        self.defs.append(Def(name, t.pos, body, terminal, self.src, priority))

    def repeat_bound(self) -> int:
        t = self.peek()
        n = self.expect_number()
        if n < 0:
            raise self.src.error(f"repeat bound {n} is negative", t.pos, "A repeat count is 0 or more.",
                                 width=len(t.text))
        return n

    def expect_number(self) -> int:
        t = self.peek()
        if t.kind != "number":
            raise self.src.error(f"expected a number, found {_describe(t)}", t.pos)
        return int(self.take().text)

    def end_of_line(self) -> None:
        t = self.peek()
        if t.kind not in ("nl", "eof"):
            if t.text in (")", "]"):
                raise self.src.error(f"unbalanced '{t.text}': it closes no group", t.pos,
                                     "Remove it or open the group before.")
            raise self.src.error(f"unexpected {_describe(t)}", t.pos)

    def expansions(self):
        opts = [self.alias()]
        while self.peek(skip_nl=True).text == "|":
            while self.peek().kind == "nl":
                self.take()
            self.take()
            opts.append(self.alias())
        return opts[0] if len(opts) == 1 else AltN(tuple(opts))

    def alias(self):
        items = []
        while True:
            t = self.peek()
            if t.kind in ("string", "regex", "name") or t.text in ("(", "["):
                items.append(self.item())
            else:
                break
        if self.peek().text == "->":
            self.take()
            t = self.take()
            if t.kind != "name":
                raise self.src.error(f"expected an alias name after '->', found {_describe(t)}", t.pos)
        return items[0] if len(items) == 1 else SeqN(tuple(items))

    def item(self):
        atom = self.atom()
        while True:
            t = self.peek()
            if t.text == "?":
                self.take()
                atom = RepN(atom, 0, 1, t.pos)
            elif t.text == "*":
                self.take()
                atom = RepN(atom, 0, None, t.pos)
            elif t.text == "+":
                self.take()
                atom = RepN(atom, 1, None, t.pos)
            elif t.text == "~":
                self.take()
                lo = self.repeat_bound()
                hi = lo
                if self.peek().text == "..":
                    self.take()
                    hi = self.repeat_bound()
                if hi < lo:
                    raise self.src.error(f"repeat '~ {lo}..{hi}' has its bounds out of order", t.pos)
                if hi > MAX_UNROLL:
                    raise self.src.error(
                        f"repeat bound {hi} is above {MAX_UNROLL}, the most copies structgen unrolls", t.pos,
                        f"Lower the bound to at most {MAX_UNROLL}, or write the repetition with '*' or '+' "
                        "and check the count after generation.")
                atom = RepN(atom, lo, hi, t.pos)
            else:
                return atom

    def atom(self):
        t = self.take()
        if t.text in ("(", "["):
            self.depth = getattr(self, "depth", 0) + 1
            if self.depth > MAX_NESTING:
                raise self.src.error(f"groups nest more than {MAX_NESTING} deep here", t.pos,
                                     "Move the inner part into a rule of its own.")
            inner = self.expansions()
            self.expect(")" if t.text == "(" else "]", "')'" if t.text == "(" else "']'", opener=t)
            self.depth -= 1
            return inner if t.text == "(" else RepN(inner, 0, 1)
        if t.kind == "string":
            lit = Str(_unescape(self.src, t), t.text.endswith("i"), t.pos)
            if self.peek().text == "..":
                self.take()
                hi_t = self.take()
                if hi_t.kind != "string":
                    raise self.src.error(f"expected a string after '..', found {_describe(hi_t)}", hi_t.pos)
                hi = _unescape(self.src, hi_t)
                if len(lit.text) != 1 or len(hi) != 1:
                    raise self.src.error("a range needs one character on each side, as in \"a\"..\"z\"", t.pos)
                if lit.text > hi:
                    raise self.src.error(f"range \"{lit.text}\"..\"{hi}\" is out of order", t.pos)
                return Range(lit.text, hi, t.pos)
            return lit
        if t.kind == "regex":
            body, _, flags = t.text[1:].rpartition("/")
            return Re(body, flags, t.pos)
        if t.kind == "name":
            return Name(t.text, t.pos)
        if t.text in (")", "]"):
            raise self.src.error(f"unbalanced '{t.text}': it closes no group", t.pos,
                                 "Remove it or open the group before.")
        raise self.src.error(f"expected an expression, found {_describe(t)}", t.pos)

    def directive(self, t: Tok) -> None:
        kind = t.text[1:]
        if kind == "ignore":
            body = self.expansions()
            self.ignores.append((body, t.pos))
        elif kind == "import":
            self.import_(t)
        else:
            raise self.src.error(f"directive '%{kind}' is not supported", t.pos,
                                 "structgen reads %import and %ignore.", width=len(t.text))
        self.end_of_line()

    def import_(self, t: Tok) -> None:
        parts = [self.take()]
        if parts[0].kind != "name":
            raise self.src.error(f"expected a module name after %import, found {_describe(parts[0])}", parts[0].pos)
        while self.peek().text == ".":
            self.take()
            parts.append(self.take())
        if self.peek().text == "(":
            self.take()
            module = ".".join(p.text for p in parts)
            while True:
                n = self.take()
                if n.kind != "name":
                    raise self.src.error(f"expected a name to import, found {_describe(n)}", n.pos)
                self.imports.append((module, n.text, n.text, n.pos, parts[0].pos))
                if self.peek().text == ",":
                    self.take()
                    continue
                self.expect(")", "')'")
                break
            return
        if len(parts) < 2:
            raise self.src.error("write '%import module.NAME' or '%import module (A, B)'", t.pos)
        module = ".".join(p.text for p in parts[:-1])
        alias = parts[-1].text
        if self.peek().text == "->":
            self.take()
            alias = self.take().text
        self.imports.append((module, parts[-1].text, alias, parts[-1].pos, parts[0].pos))


def _describe(t: Tok) -> str:
    if t.kind == "eof":
        return "the end of the file"
    if t.kind == "nl":
        return "the end of the line"
    return repr(t.text)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0", "\\": "\\", '"': '"',
            "'": "'", "a": "\a", "b": "\b"}


def _unescape(src: Source, t: Tok) -> str:
    body = t.text[1:-2] if t.text.endswith("i") else t.text[1:-1]
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        elif e in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[e]
            digits = body[i + 2:i + 2 + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise src.error(f"'\\{e}' needs {n} hex digits", t.pos + 1 + i)
            out.append(chr(int(digits, 16)))
            i += 2 + n
        else:  # as Python: an unknown escape keeps its backslash
            out.append("\\" + e)
            i += 2
    if not out:
        raise src.error("empty string literal", t.pos, "Leave it out, or use [ ] for an optional part.")
    return "".join(out)
