"""EBNF grammars as xgrammar (``Grammar.from_ebnf``) and llama.cpp (GBNF) write them, read into IR.

The two dialects are near-identical and this reader takes both::

    # a rule per definition; the start rule is ``root``
    root   ::= "[" ws (item ("," ws item)*)? "]"
    item   ::= [a-z]+ | number
    number ::= "-"? [0-9]{1,16}
    ws     ::= | " " | "\\n" [ \\t]{0,20}

* **Rules**: ``name ::= body``. A name is letters, digits, ``-``, ``_`` and inner dots
  (``check-mate``, ``rule_1``, ``a.b``) and must be the first thing on its line; a body runs
  until the next definition, so it may span lines (after ``|``, inside parentheses, anywhere).
  Rules may be used before they are defined; left recursion is fine
  (:func:`structgen.core.cfg.remove_left_recursion`).
* **Elements**: ``"text"`` literals (``""`` is the empty text), ``[a-z]`` / ``[^...]`` classes
  (``[^]``: any character), ``.`` (any character, as in GBNF), rule names, ``( )`` groups,
  ``|`` alternatives (an empty alternative is the empty text), and ``?``, ``*``, ``+``,
  ``{m}``, ``{m,}``, ``{m,n}`` after an element. ``#`` starts a comment.
* **Escapes** in literals and classes: ``\\n \\r \\t \\b \\f \\a \\v \\0 \\e``, ``\\xHH`` (one or
  two hex digits), ``\\uXXXX``, ``\\UXXXXXXXX``, and ``\\" \\\\ \\/ \\' \\? \\[ \\] \\-``; in
  classes also ``\\^ \\$ \\. \\* \\+ \\( \\) \\{ \\} \\|``.
* **Characters** are Unicode code points matched as UTF-8: ``[^"\\\\]`` is any UTF-8 character
  but those two, never a stray byte.
* **Lookahead** ``rule ::= body (= [chars])``, xgrammar's assertion after a body, is honoured
  when it names one character whose set a single byte decides (ASCII characters, or all but
  some ASCII ones): the rule may then end only before such a character or at the end of the
  text (:attr:`~structgen.core.ir.Grammar.lookahead`).

What cannot be honoured is refused, never dropped: longer lookaheads (xgrammar's JSON grammars
write ``(= [ \\n\\t]* [,}\\]:])``; xgrammar itself only prunes token masks with them, so
removing one keeps the texts its parser accepts); xgrammar's rule options
(``name[max_tokens=32] ::=``) and macros (``Regex(...)``, ``TagDispatch(...)``, ...);
GBNF token matches (``<[1000]>``, ``<think>``, ``!<...>``); shorthand classes (``\\d``);
``\\x`` followed by a third hex digit (llama.cpp reads two digits, xgrammar all of them).
Mistakes raise :class:`~structgen.errors.GrammarError` with ``line`` and ``column``, the line
with a caret under the problem, and a hint.

Example
-------
>>> g = read_ebnf('''
... root ::= num ("," num)*   # a list of numbers
... num  ::= "-"? [0-9]+
... ''')
>>> print(g)
root ::= num ("," num)*
num ::= "-"? [0-9]+
>>> read_ebnf('root ::= "a" b')
Traceback (most recent call last):
    ...
structgen.errors.GrammarError: <grammar>:1:14: undefined rule 'b'
    root ::= "a" b
                 ^
Define it ('b ::= ...').
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from structgen.core.automaton import MAX_DFA_STATES
from structgen.core.budget import affordable_text
from structgen.core.cfg import productive_rules, remove_left_recursion, rules_where
from structgen.core.depth import MAX_NESTING, recursion_room
from structgen.core.ir import Alt, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, seq
from structgen.frontends.ebnf_tokens import Tok, tokenize
from structgen.frontends.lark.syntax import Source
from structgen.frontends.regex.charsets import MAX_CODE_POINT, Ranges, normalize, raw_set_ir

__all__ = ["read_ebnf"]

_MACROS = frozenset({"Regex", "Substring", "TagDispatch", "Token", "ExcludeToken", "TokenTagDispatch"})
_ENDS = frozenset({"|", ")", "(=", "def", "eof"})
_ANY: Ranges = ((0, MAX_CODE_POINT),)


@dataclass
class _Part:
    """A parsed expression: its IR, the automaton steps it unrolls to, and its characters when
    it is one character from a set (for lookaheads)."""

    ir: Expr
    steps: int
    chars: "Ranges | None" = None


# ---------------------------------------------------------------- parsing

class _Parser:
    def __init__(self, src: Source, toks: list[Tok], defined: dict[str, int]) -> None:
        self.src, self.toks, self.defined = src, toks, defined
        self.i = 0
        self.depth = 0
        self.refs: list[str] = []  # the rules the current definition calls

    def peek(self) -> Tok:
        return self.toks[self.i]

    def take(self) -> Tok:
        self.i += 1
        return self.toks[self.i - 1]

    def choices(self) -> _Part:
        parts = [self.sequence()]
        while self.peek().kind == "|":
            self.take()
            parts.append(self.sequence())
        if len(parts) == 1:
            return parts[0]
        chars = None if any(p.chars is None for p in parts) else normalize(r for p in parts for r in p.chars)
        return _Part(alt(*(p.ir for p in parts)), max(p.steps for p in parts), chars)

    def sequence(self) -> _Part:
        parts = []
        while self.peek().kind not in _ENDS:
            parts.append(self.item())
        if len(parts) == 1:
            return parts[0]
        return _Part(seq(*(p.ir for p in parts)), sum(p.steps for p in parts))

    def item(self) -> _Part:
        part = self.atom()
        while self.peek().kind in ("*", "+", "?", "rep"):
            t = self.take()
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(t.kind) or t.value
            steps = part.steps * (hi if hi is not None else lo + 1)
            if steps >= MAX_DFA_STATES:
                raise self.src.error(f"repeat unrolls to {steps + 1:,} automaton states, above the limit of "
                                     f"{MAX_DFA_STATES:,} ({part.steps:,} a copy, nested repeats multiplied)",
                                     t.pos, "Lower the bounds, or move the repeated part into a rule of its own.",
                                     width=t.end - t.pos)
            part = _Part(Repeat(part.ir, lo, hi), steps)
        return part

    def atom(self) -> _Part:
        t = self.take()
        if t.kind == "str":
            data = t.value.encode("utf-8")
            if len(data) >= MAX_DFA_STATES:
                raise self.src.error(f"string literal of {len(data):,} bytes is above the limit of "
                                     f"{MAX_DFA_STATES:,} automaton states", t.pos, "Shorten it.")
            chars = ((ord(t.value),) * 2,) if len(t.value) == 1 else None
            return _Part(Lit(data), len(data), chars)
        if t.kind in ("class", "any"):
            chars = t.value if t.kind == "class" else _ANY
            return _Part(raw_set_ir(chars), 1, chars)
        if t.kind == "name":
            if t.value not in self.defined:
                self.undefined(t)
            self.refs.append(t.value)
            return _Part(Ref(t.value), 1)
        if t.kind == "(":
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self.src.error(f"groups nest more than {MAX_NESTING} deep here", t.pos,
                                     "Move the inner part into a rule of its own.")
            part = self.choices() if self.peek().kind != ")" else _Part(Lit(b""), 0)
            if self.peek().kind != ")":
                raise self.src.error("unbalanced '(': no matching ')'", t.pos, "Add ')' to close the group "
                                     f"opened here (found {self.describe(self.peek())}).")
            self.take()
            self.depth -= 1
            return part
        if t.kind in ("*", "+", "?", "rep"):
            raise self.src.error(f"'{self.src.text[t.pos:t.end]}' has nothing to repeat", t.pos,
                                 "Put it after a literal, a class, a rule name or a group.", width=t.end - t.pos)
        raise self.src.error(f"expected an element, found {self.describe(t)}", t.pos,
                             "An element is a \"literal\", a [class], '.', a rule name or a ( group ).")

    def undefined(self, t: Tok) -> None:
        if t.value in _MACROS and self.peek().kind == "(":
            raise self.src.error(f"xgrammar's macro {t.value}(...) is not supported", t.pos,
                                 "Write what it matches as rules (a regular expression as literals, classes "
                                 "and repeats).", width=len(t.value))
        near = difflib.get_close_matches(t.value, list(self.defined), n=1, cutoff=0.6)
        raise self.src.error(f"undefined rule '{t.value}'", t.pos, f"Did you mean '{near[0]}'?" if near else
                             f"Define it ('{t.value} ::= ...').", width=len(t.value))

    def describe(self, t: Tok) -> str:
        if t.kind == "eof":
            return "the end of the grammar"
        return "the next rule" if t.kind == "def" else repr(self.src.text[t.pos:t.end])


# ---------------------------------------------------------------- reading

def _definitions(src: Source, toks: list[Tok]) -> dict[str, int]:
    """Mark the names before ``::=`` as definitions; each rule's token index, in file order."""
    defined: dict[str, int] = {}
    for k, t in enumerate(toks):
        if t.kind != "::=":
            continue
        name = toks[k - 1] if k else None
        if name is None or name.kind != "name":
            raise src.error("'::=' needs a rule name before it", t.pos, "Write 'name ::= body'.", width=3)
        if k >= 2 and "\n" not in src.text[toks[k - 2].end:name.pos]:
            raise src.error(f"rule name '{name.value}' must be the first thing on its line", name.pos,
                            "Start the definition on a new line.", width=len(name.value))
        if name.value in defined:
            line = src.text.count("\n", 0, toks[defined[name.value]].pos) + 1
            raise src.error(f"rule '{name.value}' is defined twice (first at line {line})", name.pos,
                            "Merge the two with '|' between the alternatives, or rename one.",
                            width=len(name.value))
        name.kind = "def"
        defined[name.value] = k - 1
    if toks[0].kind not in ("def", "eof"):
        raise src.error(f"expected a rule definition, found {src.text[toks[0].pos:toks[0].end]!r}", toks[0].pos,
                        "A grammar is a list of 'name ::= body' definitions.")
    return defined


def _forbidden(src: Source, pos: int, chars: "Ranges | None") -> frozenset[int]:
    """The bytes a lookahead of one character from ``chars`` forbids next, where one byte decides."""
    if chars is not None:
        ascii_ok = {b for b in range(0x80) if any(lo <= b <= hi for lo, hi in chars)}
        wide = normalize([r for r in chars if r[1] >= 0x80] + [(0xD800, 0xDFFF)])
        if wide == ((0xD800, 0xDFFF),):  # no non-ASCII character: no lead byte either
            return frozenset(range(256)) - ascii_ok
        if any(lo <= 0x80 and hi >= MAX_CODE_POINT for lo, hi in wide):  # every non-ASCII character
            return frozenset(range(0x80)) - ascii_ok
    raise src.error("this lookahead assertion cannot be honoured", pos,
                    "structgen honours a lookahead of one character that a single byte decides, such as "
                    "(= [,}\\]]) or (= [^a-z]). xgrammar uses an assertion only to prune its token masks (its "
                    "parser accepts the same texts without it), so removing it keeps that language.", width=2)


def read_ebnf(text: str, *, start: str = "root", name: str = "<grammar>") -> Grammar:
    """Read an xgrammar EBNF or llama.cpp GBNF grammar into IR (the format: the module docstring).

    Parameters
    ----------
    text : str
        The grammar.
    start : str
        The start rule (xgrammar's ``root_rule_name``).
    name : str
        How errors name the text (a file path).

    Returns
    -------
    Grammar
        Checked IR: the rules the start rule reaches, left recursion rewritten away.

    Raises
    ------
    GrammarError
        With ``line`` and ``column`` attributes, a caret under the problem and a hint.
    BudgetExceededError
        Inside a compile budget the text does not fit (a unit per character).

    Example
    -------
    >>> print(read_ebnf('root ::= "a" | "b" root', name="ab.gbnf"))
    root ::= "a" | "b" root
    """
    affordable_text(text, "grammar text")
    src = Source(text, name)
    with recursion_room():
        toks = tokenize(src)
        defined = _definitions(src, toks)
        if start not in defined:
            rules = ", ".join(defined) or "(none: the grammar defines no rules)"
            raise src.error(f"no start rule '{start}'", 0, f"Define '{start} ::= ...', or pass start= one of: {rules}.")
        parser = _Parser(src, toks, defined)
        bodies: dict[str, Expr] = {}
        calls: dict[str, list[str]] = {}
        lookahead: dict[str, frozenset[int]] = {}
        while parser.peek().kind != "eof":
            rule = parser.take()
            parser.take()  # ::=
            parser.refs = []
            body = parser.choices()
            if body.steps >= MAX_DFA_STATES:
                raise src.error(f"rule '{rule.value}' unrolls to {body.steps + 1:,} automaton states, above the "
                                f"limit of {MAX_DFA_STATES:,}", rule.pos, "Move parts into rules of their own.",
                                width=len(rule.value))
            if parser.peek().kind == "(=":
                opener = parser.take()
                assertion = parser.choices()
                if parser.peek().kind != ")":
                    raise src.error("unbalanced '(=': no matching ')'", opener.pos, "Close the assertion with ')'.",
                                    width=2)
                parser.take()
                forbidden = _forbidden(src, opener.pos, assertion.chars)
                if forbidden:
                    lookahead[rule.value] = forbidden
            t = parser.peek()
            if t.kind not in ("def", "eof"):
                what = "unbalanced ')': it closes no group" if t.kind == ")" else \
                    f"unexpected {parser.describe(t)} after the lookahead assertion"
                raise src.error(what, t.pos, "Remove it, or open the group before." if t.kind == ")" else
                                "A lookahead assertion (= ...) ends its rule.")
            bodies[rule.value], calls[rule.value] = body.ir, parser.refs
        return _grammar(src, toks, defined, start, bodies, calls, lookahead)


def _grammar(src: Source, toks: list[Tok], defined: dict[str, int], start: str, bodies: dict[str, Expr],
             calls: dict[str, list[str]], lookahead: dict[str, frozenset[int]]) -> Grammar:
    """The rules ``start`` reaches, checked: each can finish, left recursion rewritten."""
    used, todo = {start}, [start]
    while todo:
        for callee in calls[todo.pop()]:
            if callee not in used:
                used.add(callee)
                todo.append(callee)
    rules = tuple((n, b) for n, b in bodies.items() if n in used)
    rules = _loops_as_rules(rules)
    done = productive_rules(dict(rules))
    dead = [n for n, _ in rules if n not in done]
    if dead:
        first = start if start in dead else dead[0]
        what = "the grammar matches no text" if first == start else f"rule '{first}' matches no text"
        again = "itself" if len(dead) == 1 else "one of " + ", ".join(repr(x) for x in dead)
        raise src.error(f"{what}: every alternative of '{first}' needs {again} again", toks[defined[first]].pos,
                        "Add an alternative that ends the recursion (a base case).", width=len(first))
    grammar = Grammar(rules, start).checked()
    rewritten = remove_left_recursion(grammar)
    kept = tuple((n, f) for n, f in lookahead.items() if n in used)
    if kept and rewritten is not grammar:
        raise src.error(f"rule '{kept[0][0]}' has a lookahead assertion in a left-recursive grammar", toks[
            defined[kept[0][0]]].pos, "Remove the assertion, or write the recursion to the right.",
            width=len(kept[0][0]))
    return Grammar(rewritten.rules, rewritten.start, kept).checked() if kept else rewritten


def _loops_as_rules(rules: tuple[tuple[str, Expr], ...]) -> tuple[tuple[str, Expr], ...]:
    """Each unbounded repeat of an item that calls rules and may match the empty text (``a*``
    with ``a ::= "" | "b"``) as a rule of its own, ``r ::= "" | item r``: in place, the loop
    would call ``a`` again without reading a byte, which the stack runtime cannot do, while as a
    rule it is a leading-call cycle that :func:`remove_left_recursion` rewrites (``item{m,}`` is
    ``item*`` when the item may be empty). Bodies without such a loop are kept as they are."""
    null = rules_where(dict(rules), _empty_parts)
    extra: list[tuple[str, Expr]] = []
    facts: dict[int, tuple[bool, bool]] = {}  # id(node) -> (calls a rule, may match the empty text)

    def fact(e: Expr) -> tuple[bool, bool]:
        got = facts.get(id(e))
        if got is None:
            if isinstance(e, (Seq, Alt)):
                parts = [fact(x) for x in e.items]
                got = any(c for c, _ in parts), (all if isinstance(e, Seq) else any)(n for _, n in parts)
            elif isinstance(e, Repeat):
                calls, empty = fact(e.item)
                got = calls, e.min == 0 or empty
            else:
                got = isinstance(e, Ref), isinstance(e, Lit) and not e.data or isinstance(e, Ref) and e.name in null
            facts[id(e)] = got
        return got

    def walk(e: Expr, rule: str) -> Expr:
        if isinstance(e, (Seq, Alt)):
            items = [walk(x, rule) for x in e.items]
            same = all(a is b for a, b in zip(items, e.items))
            return e if same else (seq if isinstance(e, Seq) else alt)(*items)
        if not isinstance(e, Repeat):
            return e
        item = walk(e.item, rule)
        if e.max is not None or fact(item) != (True, True):
            return e if item is e.item else Repeat(item, e.min, e.max)
        name = f"{rule}*{len(extra) + 1}"  # '*': no name in the grammar text has one
        extra.append((name, alt(Lit(b""), seq(item, Ref(name)))))
        return Ref(name)

    return tuple((n, walk(b, n)) for n, b in rules) + tuple(extra)


def _empty_parts(e: Expr) -> "tuple[str, tuple[Expr, ...]]":
    """How matching the empty text depends on the parts of ``e`` (see :func:`rules_where`)."""
    if isinstance(e, (Seq, Alt)):
        return ("all" if isinstance(e, Seq) else "any"), e.items
    if isinstance(e, Repeat):
        return "all", (() if e.min == 0 else (e.item,))
    return ("all" if isinstance(e, Lit) and not e.data else "any"), ()
