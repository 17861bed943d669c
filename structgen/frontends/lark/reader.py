"""Grammar files (Lark-style EBNF) read into grammar IR.

The format is Lark's, so a grammar written for Lark, xgrammar's Lark mode or llguidance reads
here too::

    // arithmetic, left-recursive as people write it
    ?start: sum
    ?sum: sum "+" product | sum "-" product | product
    ?product: product "*" atom | atom
    ?atom: NUMBER | "-" atom | "(" sum ")"
    NUMBER: /[0-9]+/
    %import common.WS
    %ignore WS

* **Rules** are lower-case (``expr``), **terminals** upper-case (``NUMBER``); a terminal is
  regular: literals, regexes, other terminals, no rule. Prefixes ``?``, ``!``, ``_``, aliases
  ``-> name`` and priorities ``.N`` shape Lark's parse trees and are read and ignored: a matcher
  needs only the language.
* **Expressions**: sequences, ``|`` alternatives (a line that starts with ``|`` continues the
  definition), ``( )`` groups, ``[x]`` and ``x?`` optional, ``x*``, ``x+``, ``x ~ n`` and
  ``x ~ n..m`` repeats, ``"text"`` literals (``"select"i`` ignores case), ``/regex/flags``
  (Python ``re`` dialect, see :mod:`structgen.frontends.regex.python`), ``"a".."z"`` character ranges.
* **Directives**: ``%import common.WS`` (or ``%import common (WS, NUMBER)``, ``-> ALIAS``)
  loads terminals or rules from ``<module>.lark`` beside the importing file, else from the
  bundled ``structgen/grammars/``; ``%ignore WS`` allows the ignored terminals before every
  terminal and at the end; ``//`` and ``#`` start comments.
* **Matching** is on bytes, with a lexer's rules (:mod:`structgen.frontends.lark.lexer`): the text is in the
  language when some split into tokens derives it from the start rule, where a token ends only
  before a byte no terminal could read on, and a pattern terminal never matches a keyword (a
  word-like literal of the grammar). On ordinary grammars that is what Lark's Earley parser
  with ``lexer="basic"`` accepts. Left recursion and ambiguity are fine (:mod:`structgen.core.cfg`).

Mistakes raise :class:`~structgen.errors.GrammarError` with the file, line and column, the
line itself with a caret under the problem, and what to do about it.

Example
-------
>>> g = read_grammar('start: "a"+ NUMBER\\nNUMBER: /[0-9]+/')
>>> [name for name, _ in g.rules]            # a root, the rules, then one rule per terminal
["start'", 'start', 'NUMBER', '"a"']
>>> g.lookahead                                 # a number may not end before a digit
(('NUMBER', frozenset({48, 49, 50, 51, 52, 53, 54, 55, 56, 57})),)
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from structgen.core.automaton import MAX_DFA_STATES
from structgen.core.budget import affordable_text
from structgen.core.dfa import DEFAULT_STATE_LIMIT
from structgen.core.ir import Alt, Expr, Fsm, Grammar, Lit, Ref, Repeat, Seq, alt, seq
from structgen.core.cfg import productive_rules, remove_left_recursion
from structgen.frontends.lark.lexer import IGNORE_RULE, apply_lexer
from structgen.frontends.regex.ecma import raw_set_ir
from structgen.core.regular import difference, matcher, matches, shortest_matches
from structgen.frontends.regex.python import RegexSyntaxError, is_lazy, text_regex_to_ir
from structgen.frontends.lark.syntax import AltN, Def, Name, Parser, Range, Re, RepN, SeqN, Source, Str

__all__ = ["read_grammar", "GRAMMARS_DIR"]

#: Grammar files bundled with structgen (``%import common.WS`` looks here): the package data
#: ``structgen/grammars``, found through importlib.resources wherever structgen is installed
#: (a folder for any ordinary install).
GRAMMARS_DIR = files("structgen") / "grammars"

# ---------------------------------------------------------------- lowering to IR

class _Lowering:
    """Definitions (this file's and the imported ones) to IR rules."""

    def __init__(self, defs: dict[str, Def]) -> None:
        self.defs = defs
        self.terminal_ir: dict[str, Expr] = {}
        self.busy: set[str] = set()
        self.anonymous: dict[str, Def] = {}  # terminals written inline in rules, by spelling

    def terminal(self, name: str) -> Expr:
        """The regular expression of a terminal, terminals it names inlined."""
        got = self.terminal_ir.get(name)
        if got is None:
            d = self.defs[name]
            if name in self.busy:
                raise d.src.error(f"terminal '{name}' refers to itself", d.pos,
                                  "Terminals are regular: write the repetition with '*' or '+', or "
                                  "make it a rule (lower-case name).", width=len(name))
            self.busy.add(name)
            got = self.regular(d.body, d)
            self.busy.discard(name)
            self.terminal_ir[name] = got
        return got

    def regular(self, node, d: Def) -> Expr:
        if isinstance(node, Str):
            return _literal(node)
        if isinstance(node, Re):
            return _regex(node, d.src)
        if isinstance(node, Range):
            return raw_set_ir([(ord(node.lo), ord(node.hi))])
        if isinstance(node, Name):
            if not node.name.lstrip("_")[:1].isupper():
                raise d.src.error(f"terminal '{d.name}' refers to rule '{node.name}'", node.pos,
                                  "A terminal may only use literals, regexes and other terminals; "
                                  "make the definition a rule (lower-case name).", width=len(node.name))
            self.check_defined(node, d)
            return self.terminal(node.name)
        if isinstance(node, SeqN):
            return seq(*(self.regular(x, d) for x in node.items))
        if isinstance(node, AltN):
            return alt(*(self.regular(x, d) for x in node.items))
        if isinstance(node, RepN):
            return Repeat(self.regular(node.item, d), node.min, node.max)
        raise AssertionError(node)  # pragma: no cover

    def rule(self, node, d: Def) -> Expr:
        if isinstance(node, (Str, Re, Range)):  # an anonymous terminal, named by its spelling
            name = _spelling(node)
            if name not in self.anonymous:
                self.anonymous[name] = Def(name, node.pos, node, True, d.src)
            return Ref(name)
        if isinstance(node, Name):
            self.check_defined(node, d)
            return Ref(node.name)
        if isinstance(node, SeqN):
            return seq(*(self.rule(x, d) for x in node.items))
        if isinstance(node, AltN):
            return alt(*(self.rule(x, d) for x in node.items))
        if isinstance(node, RepN):
            return Repeat(self.rule(node.item, d), node.min, node.max)
        raise AssertionError(node)  # pragma: no cover

    def check_size(self, d: Def) -> None:
        """Refuse a definition whose automaton would unroll to more states than it may have
        (:data:`MAX_DFA_STATES` for a rule, the lexer's ``DEFAULT_STATE_LIMIT`` for a terminal):
        a huge literal, repeats nested to a large product. The error points at the part to blame
        and comes before anything is built. Terminals count their bytes; a rule counts each call
        as one step."""
        total = self.size(d.body, d)
        if total >= _limit(d):
            kind = "terminal" if d.terminal else "rule"
            raise d.src.error(f"{kind} '{d.name}' {_too_many(total, d)}", d.pos,
                              "Shorten its literals or lower its repeat bounds"
                              + ("." if d.terminal else ", or move parts into rules of their own."),
                              width=len(d.name))

    def size(self, node, d: Def) -> int:
        """The steps ``node`` unrolls to in ``d``'s automaton (a literal one per byte, a repeat
        its largest count of copies); raises where one part alone is over the limit."""
        if isinstance(node, Name):
            if not d.terminal or node.name not in self.defs:
                return 1
            self.terminal(node.name)  # refuses a terminal that refers to itself
            return self.size(self.defs[node.name].body, d)
        if isinstance(node, (Str, Re, Range)) and not d.terminal:
            return 1  # an anonymous terminal, called (it is checked as a terminal of its own)
        if isinstance(node, Str):
            n = len(node.text.encode("utf-8"))
            if n >= _limit(d):
                raise d.src.error(f"string literal of {n:,} bytes {_too_many(n, d)}", node.pos,
                                  "Shorten it, or split the text between rules.")
            return n
        if isinstance(node, Re):
            n = _ir_size(_regex(node, d.src))
            if n >= _limit(d):
                raise d.src.error(f"regular expression {_too_many(n, d)}", node.pos,
                                  "Shorten it or lower its repeat counts.")
            return n
        if isinstance(node, SeqN):
            return sum(self.size(x, d) for x in node.items)
        if isinstance(node, AltN):
            return max(self.size(x, d) for x in node.items)
        if isinstance(node, RepN):
            item = self.size(node.item, d)
            n = item * (node.max if node.max is not None else node.min + 1)
            if n >= _limit(d):
                raise d.src.error(f"repeat {_too_many(n, d)} ({item:,} steps a copy, nested repeats "
                                  "multiplied)", node.pos,
                                  "Lower the bounds" + ("." if d.terminal else
                                                        ", or move the repeated part into a rule of its own."))
            return n
        return 1

    def check_defined(self, node: Name, d: Def) -> None:
        if node.name in self.defs:
            return
        kind = "terminal" if node.name.lstrip("_")[:1].isupper() else "rule"
        near = _closest(node.name, [n for n in self.defs if (n.lstrip("_")[:1].isupper()) == (kind == "terminal")])
        hint = f"Did you mean '{near}'?" if near else f"Define it ('{node.name}: ...') or %import it."
        raise d.src.error(f"undefined {kind} '{node.name}'", node.pos, hint, width=len(node.name))


def _limit(d: Def) -> int:
    """The most states ``d``'s automaton may have: a terminal's token automaton is built by the
    lexer (``DEFAULT_STATE_LIMIT``), a rule's by the rule compiler (:data:`MAX_DFA_STATES`)."""
    return DEFAULT_STATE_LIMIT if d.terminal else MAX_DFA_STATES


def _too_many(steps: int, d: Def) -> str:
    return f"unrolls to {steps + 1:,} automaton states, above the limit of {_limit(d):,}"


def _ir_size(e: Expr) -> int:
    """:meth:`_Lowering.size` for a regular expression's IR."""
    t = type(e)  # exact types and map: a SQL grammar's function-name pattern is 3,000 nodes
    if t is Lit:
        return len(e.data)  # type: ignore[union-attr]
    if t is Seq:
        return sum(map(_ir_size, e.items))  # type: ignore[union-attr]
    if t is Alt:
        return max(map(_ir_size, e.items))  # type: ignore[union-attr]
    if t is Repeat:
        return _ir_size(e.item) * (e.max if e.max is not None else e.min + 1)  # type: ignore[union-attr]
    if t is Fsm:
        return len(e.edges)  # type: ignore[union-attr]
    return 1


def _spelling(node) -> str:
    """How an anonymous terminal is written: its rule name."""
    if isinstance(node, Str):
        return _show(node.text) + ("i" if node.ignore_case else "")
    if isinstance(node, Re):
        return f"/{node.pattern}/{node.flags}"
    return f"{_show(node.lo)}..{_show(node.hi)}"


def _show(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _token_language(low: "_Lowering", d: Def) -> Expr:
    """The texts one token of terminal ``d`` (or an ignored piece) may read."""
    lang = low.terminal(d.name) if d.name in low.defs else low.regular(d.body, d)
    if matches(lang, b""):
        what = "an ignored piece" if d.name == "%ignore" else f"terminal '{d.name}'"
        raise d.src.error(f"{what} matches the empty text", d.pos,
                          "A token must read something: make the optional part optional where "
                          "the terminal is used (TERM?), not inside it.", width=len(d.name))
    if any(isinstance(x, Re) and is_lazy(x.pattern, ignore_case="i" in x.flags, dotall="s" in x.flags)
           for x in _walk_terminal(d.body, low.defs)):
        lang = shortest_matches(lang)  # a lazy regex ends its token early (/* comments */)
    return lang


def _walk_terminal(node, defs: dict[str, Def], seen: "frozenset[str]" = frozenset()):
    """The nodes of a terminal's definition, through the terminals it names."""
    for x in _walk(node):
        yield x
        if isinstance(x, Name) and x.name in defs and x.name not in seen:
            yield from _walk_terminal(defs[x.name].body, defs, seen | {x.name})


def _is_word(text: str) -> bool:
    return text[:1].isalnum() or text[:1] == "_" or text[-1:].isalnum() or text[-1:] == "_"


def _string_terminal(node) -> "tuple[str, bool] | None":
    """(text, ignore_case) when a terminal is one string (Lark's string terminals), else None."""
    if isinstance(node, Str):
        return node.text, node.ignore_case
    if isinstance(node, SeqN) and all(isinstance(x, Str) for x in node.items) and \
            len({x.ignore_case for x in node.items}) == 1:
        return "".join(x.text for x in node.items), node.items[0].ignore_case
    return None


def _literal(node: Str) -> Expr:
    if not node.ignore_case:
        return Lit(node.text.encode("utf-8"))
    return text_regex_to_ir(re.escape(node.text), ignore_case=True)


def _regex(node: Re, src: Source) -> Expr:
    bad = [c for c in node.flags if c not in "ismu"]
    if bad:
        raise src.error(f"unsupported regular-expression flag '{bad[0]}'",
                        node.pos + 2 + len(node.pattern) + node.flags.index(bad[0]),
                        "structgen reads the flags i (ignore case), s (dot matches a newline), "
                        "m and u (no effect here).")
    try:
        return text_regex_to_ir(node.pattern, ignore_case="i" in node.flags, dotall="s" in node.flags)
    except RegexSyntaxError as e:
        # +1: the opening slash
        raise src.error(str(e), node.pos + 1 + e.offset,
                        "Terminal regexes use Python's re syntax; structgen cannot honour "
                        "lookaround, backreferences, anchors or word boundaries.") from None


def _closest(name: str, names: list[str]) -> str | None:
    import difflib
    got = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return got[0] if got else None


def _load(text: str, name: str, base: "Path | None", seen: "tuple[str, ...]" = (),
          loaded: "dict[str, tuple[dict[str, Def], list]] | None" = None) -> "tuple[dict[str, Def], list]":
    """Definitions of a file and everything it imports; the ignore list of this file. A module
    imported several times (``%import common.WS``, ``%import common.NAME``...) is read once per
    grammar (``loaded``): reading ``common.lark`` again per import was most of reading a grammar."""
    loaded = {} if loaded is None else loaded
    src = Source(text, name)
    p = Parser(src)
    p.parse()
    defs: dict[str, Def] = {}
    origin: dict[str, int] = {}
    for d in p.defs:
        if d.name in defs:
            first = defs[d.name]
            line = first.src.text.count("\n", 0, first.pos) + 1
            raise src.error(f"'{d.name}' is defined twice (first at line {line})", d.pos,
                            "Merge the two into one definition with '|' between the alternatives, "
                            "or rename one.", width=len(d.name))
        defs[d.name] = d
    for module, imported, alias, pos, module_pos in p.imports:
        path = _module_path(module, base)
        if path is None:
            raise src.error(f"cannot find grammar module '{module}'", module_pos,
                            f"Looked for {module.replace('.', '/')}.lark beside this grammar and in {GRAMMARS_DIR}.")
        if str(path) in seen:
            raise src.error(f"grammar module '{module}' imports itself", module_pos)
        sub = loaded.get(str(path))
        if sub is None:
            sub = loaded[str(path)] = _load(path.read_text(encoding="utf-8"), str(path), path.parent,
                                            seen + (str(path),), loaded)
        sub_defs = sub[0]
        if imported not in sub_defs:
            raise src.error(f"'{imported}' is not defined in grammar module '{module}'", pos,
                            f"It defines: {', '.join(sorted(sub_defs))}.", width=len(imported))
        if alias in defs and origin.get(alias) != id(sub_defs[imported]):
            raise src.error(f"'{alias}' is defined twice (here by %import)", pos, width=len(imported))
        # The imported definition and what it names, renamed only at the top.
        for n, sub in _closure(sub_defs, imported).items():
            key = alias if n == imported else n
            if key in defs and defs[key] is not sub and key != alias:
                continue  # a helper with the same name already here: keep the local one
            defs[key] = sub if n != imported else Def(alias, sub.pos, sub.body, sub.terminal, sub.src)
            origin[key] = id(sub)
    return defs, p.ignores


def _closure(defs: dict[str, Def], name: str, *, into_terminals: bool = True) -> dict[str, Def]:
    """``name`` and the definitions it names, transitively; with ``into_terminals=False`` not
    what terminals name (those are inlined into them): the rules and terminals a grammar uses."""
    out: dict[str, Def] = {}
    todo = [name]
    while todo:
        n = todo.pop()
        if n in out or n not in defs:
            continue
        out[n] = defs[n]
        if into_terminals or not defs[n].terminal:
            todo += [x.name for x in _walk(defs[n].body) if isinstance(x, Name)]
    return out


def _walk(node):
    yield node
    if isinstance(node, (SeqN, AltN)):
        for x in node.items:
            yield from _walk(x)
    elif isinstance(node, RepN):
        yield from _walk(node.item)


def _module_path(module: str, base: "Path | None") -> "Path | None":
    *folders, stem = module.split(".")
    for folder in ([base] if base is not None else []) + [GRAMMARS_DIR]:
        path = folder.joinpath(*folders, stem + ".lark")
        if path.is_file():
            return path
    return None


def read_grammar(text: str, *, start: str = "start", name: str = "<grammar>",
                 base: "Path | None" = None) -> Grammar:
    """Read a Lark-style grammar text into IR (see the module docstring for the format).

    ``start`` names the start rule; ``name`` is how errors name the text (a file path);
    ``base`` is the folder ``%import`` looks in first.

    Raises
    ------
    GrammarError
        With ``line``/``column`` attributes and a message that quotes the line, puts a caret under
        the problem and says how to fix it.
    """
    affordable_text(text, "grammar text")
    defs, ignores = _load(text, name, base)
    src = Source(text, name)
    if start not in defs:
        rules = sorted(n for n, d in defs.items() if not d.terminal)
        raise src.error(f"no start rule '{start}'", 0,
                        f"Define '{start}: ...' or pass start= one of: {', '.join(rules) or '(no rules)'}.")
    if defs[start].terminal:
        raise src.error(f"the start '{start}' is a terminal", defs[start].pos, "Start from a rule.")
    low = _Lowering(defs)
    ignored = [_token_language(low, Def("%ignore", pos, body, True, src)) for body, pos in ignores]
    ignore = alt(*ignored) if ignored else None
    used = _closure(defs, start, into_terminals=False)
    rules: list[tuple[str, Expr]] = []
    for n, d in used.items():
        if not d.terminal:
            rules.append((n, low.rule(d.body, d)))
    # Rules in file order, the start first (Grammar keeps order in its cache key), then terminals.
    order = {n: i for i, n in enumerate(defs)}
    rules.sort(key=lambda r: (r[0] != start, order[r[0]]))
    terminal_defs = {n: d for n, d in used.items() if d.terminal}
    terminal_defs.update(low.anonymous)
    for d in [*(d for d in used.values() if not d.terminal), *terminal_defs.values()]:
        low.check_size(d)
    terminals = _terminal_languages(low, terminal_defs)
    rules += terminals.items()  # bodies stand in until apply_lexer writes the token rules
    root = "start'"
    tail = [Repeat(Ref(IGNORE_RULE), 0, 1)] if ignore is not None else []
    rules.insert(0, (root, seq(Ref(start), *tail)))
    if ignore is not None:
        rules.append((IGNORE_RULE, Repeat(ignore, 1, None)))
    grammar = Grammar(tuple(rules), root).checked()
    _check_productive(grammar, used, start)
    return apply_lexer(remove_left_recursion(grammar), terminals, ignored)


def _terminal_languages(low: "_Lowering", defs: dict[str, Def]) -> dict[str, Expr]:
    """Each terminal's language; a pattern terminal loses the keywords it matches (at equal
    priority), as Lark's lexer retypes them.

    Keywords are string terminals made of word characters (``select``, ``int``). Lark also
    retypes punctuation, so that ``ASSIGN: "=" | "+="`` never matches ``=`` once ``"="`` is a
    literal elsewhere; structgen does not (llguidance and xgrammar accept ``x = y`` there too).
    """
    langs = {n: _token_language(low, d) for n, d in defs.items()}
    strings = {n: _string_terminal(d.body) for n, d in defs.items()}
    keywords = {n: (lit[0], defs[n].priority) for n, lit in strings.items()
                if lit is not None and _is_word(lit[0])}
    for n, d in defs.items():
        if strings[n] is not None:
            continue
        same = [(k, text) for k, (text, prio) in keywords.items() if prio == d.priority]
        if not same:
            continue
        match = matcher(langs[n])  # its DFA looked up once for all keywords (~100 in SQL's)
        reserved = [langs[k] for k, text in same if match(text.encode("utf-8"))]
        if reserved:
            langs[n] = difference(langs[n], alt(*reserved), what=f"terminal '{n}' without keywords")
    return langs


def _check_productive(grammar: Grammar, defs: dict[str, Def], start: str) -> None:
    """Raise for rules that can never finish (their language is empty), the start first."""
    done = productive_rules(dict(grammar.rules))
    dead = [n for n in defs if n not in done]
    if not dead:
        return
    first = start if start in dead else dead[0]
    d = defs[first]
    what = "the grammar matches no text" if first == start else f"rule '{first}' matches no text"
    raise d.src.error(f"{what}: every alternative of '{first}' needs "
                      f"{'itself' if len(dead) == 1 else 'one of ' + ', '.join(repr(x) for x in dead)} again",
                      d.pos, "Add an alternative that ends the recursion (a base case).", width=len(first))
