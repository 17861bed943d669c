"""Lexer rules on a scannerless grammar: tokens end where a lexer would end them.

A grammar file's terminals are matched inside the byte-level grammar, with no separate lexer.
Left alone, that accepts splits no lexer makes: ``SELECTname`` as the keyword ``SELECT``
followed by the column ``name``, ``12`` as two numbers, or a comment that stops before its
line ends. A query written that way does not run. So, like a lexer, a token (or a piece of
ignored text) may only end before a byte that no terminal could read next:

    a token that read the text ``w`` may be followed by the byte ``c`` only if no terminal of
    the grammar (ignored ones included) matches a text that starts with ``w c``.

That is maximal munch looking one byte ahead: ``SELECT`` then ``n`` is refused because an
identifier could read ``SELECTn``; ``a`` then ``1`` is fine when identifiers have no digits.
(A lexer that backtracks further, or Python's first-matching-alternative regex, can differ
when a longer terminal starts to match and then fails: with terminals ``ab``, ``abcd`` and
``c``, the text ``abc`` followed by something else. structgen refuses that split.)

How: the bytes a token forbids next depend only on the state of the union of all terminals'
automata after its text. Each terminal rule is split by that set (most terminals have one or
two), and each part gets a *lookahead* (:attr:`structgen.ir.Grammar.lookahead`): the runtime
checks the next byte when the rule returns (:mod:`structgen.pda`). Between ignored pieces
inside a terminal rule the same check is built into the rule's automaton.

Example
-------
Two words, ignored spaces between: without the lexer rule ``abcd`` would also read as ``ab``
``cd``; with it, a word may not end before a letter:

>>> from structgen.ir import Grammar, Lit, Ref, Repeat, ByteClass, seq
>>> word = Repeat(ByteClass.of("a-z"), 1, None)
>>> g = Grammar.of("two", two=seq(Ref("W"), Ref("W")), W=seq(Repeat(Lit(b" "), 0, None), word))
>>> from structgen.automaton import build_automaton
>>> from structgen.pda import StackMachine, ACCEPT
>>> sm = StackMachine(build_automaton(apply_lexer(g, {"W": word}, Lit(b" "))))
>>> [ACCEPT in sm.step_bytes(sm.initial(), s) for s in (b"ab cd", b"abcd", b" ab  cd")]
[True, False, True]
"""

from __future__ import annotations

from .automaton import _regular_dfa
from .errors import CompileError
from .ir import Alt, Counted, Expr, Grammar, Ref, Repeat, Seq, alt, seq
from .regular import _as_fsm, _minimize, _trim

__all__ = ["apply_lexer", "IGNORE_RULE"]

#: The rule for ignored text at the end of the input.
IGNORE_RULE = "%ignore"

_Dfa = tuple[list[dict[int, int]], list[bool]]
_NONE: _Dfa = ([{}], [False])


def _dfa(e: "Expr | None") -> _Dfa:
    if e is None:
        return _NONE
    got = _regular_dfa(e, "terminal")
    if any(got.calls):
        raise CompileError("internal error: a terminal calls a rule")
    return got.trans, got.accept


def _token_rule(term: _Dfa, ignore: _Dfa, union: _Dfa, *, tail: bool = False) -> dict[frozenset[int], Expr]:
    """Ignored pieces then one token of ``term``, with the lexer rule between them, split by
    what the token forbids next: ``{forbidden bytes: automaton}``. ``tail``: ignored text only
    (at least one piece), for the end of the input."""
    tt, ta = term
    gt, ga = ignore
    ut, _ = union

    def close(threads: set) -> frozenset:
        for th in list(threads):  # a completed ignored piece leaves a gap: a new token may start
            if th[0] == "ig" and ga[th[1]]:
                threads.add(("gap", frozenset(ut[th[2]])))
        return frozenset(threads)

    def step(threads: frozenset, b: int) -> frozenset:
        out: set = set()
        for th in threads:
            if th[0] == "gap":
                if b in th[1]:
                    continue
                if b in gt[0] and b in ut[0]:
                    out.add(("ig", gt[0][b], ut[0][b]))
                if not tail and b in tt[0] and b in ut[0]:
                    out.add(("t", tt[0][b], ut[0][b]))
            else:
                table = gt if th[0] == "ig" else tt
                if b in table[th[1]] and b in ut[th[2]]:
                    out.add((th[0], table[th[1]][b], ut[th[2]][b]))
        return close(out)

    start = frozenset({("gap", frozenset())})
    index = {start: 0}
    order = [start]
    trans: list[dict[int, int]] = []
    i = 0
    while i < len(order):
        row = {}
        readable = set()
        for th in order[i]:
            if th[0] == "gap":
                readable.update(gt[0])
                if not tail:
                    readable.update(tt[0])
            else:
                readable.update((gt if th[0] == "ig" else tt)[th[1]])
        for b in readable:
            nxt = step(order[i], b)
            if nxt:
                j = index.get(nxt)
                if j is None:
                    j = index[nxt] = len(order)
                    order.append(nxt)
                row[b] = j
        trans.append(row)
        i += 1
    accepts: dict[frozenset[int], list[bool]] = {}
    for q, threads in enumerate(order):
        for th in threads:
            if tail and th[0] == "gap" and q:
                accepts.setdefault(frozenset(), [False] * len(order))[q] = True
            elif th[0] == "t" and ta[th[1]]:
                accepts.setdefault(frozenset(ut[th[2]]), [False] * len(order))[q] = True
    return {f: _as_fsm(*_minimize(*_trim(trans, acc))) for f, acc in accepts.items()}


def _substitute(e: Expr, parts: dict[str, list[str]]) -> Expr:
    if isinstance(e, Ref):
        names = parts.get(e.name)
        return e if names is None else alt(*(Ref(n) for n in names))
    if isinstance(e, Seq):
        return seq(*(_substitute(x, parts) for x in e.items))
    if isinstance(e, Alt):
        return alt(*(_substitute(x, parts) for x in e.items))
    if isinstance(e, Repeat):
        return Repeat(_substitute(e.item, parts), e.min, e.max)
    if isinstance(e, Counted):
        return Counted(_substitute(e.item, parts), e.min, e.max, e.exclude)
    return e


def apply_lexer(grammar: Grammar, terminals: dict[str, Expr], ignore: "Expr | None") -> Grammar:
    """The grammar with lexer rules applied (see the module docstring).

    ``grammar`` reads bytes only inside its terminal rules (named in ``terminals``, which maps
    each to its language without ignored text) and :data:`IGNORE_RULE`; ``ignore`` is one
    piece of ignored text (any number may come before each token), or None.
    """
    union = _dfa(alt(*terminals.values(), *([ignore] if ignore is not None else [])))
    ignore_dfa = _dfa(ignore)
    rules = dict(grammar.rules)
    parts: dict[str, list[str]] = {}
    lookahead: list[tuple[str, frozenset[int]]] = []
    new_bodies: dict[str, list[tuple[str, Expr]]] = {}
    for name, lang in terminals.items():
        split = _token_rule(_dfa(lang), ignore_dfa, union)
        names = [name] if len(split) == 1 else [f"{name}#{k}" for k in range(len(split))]
        parts[name] = names
        new_bodies[name] = []
        for n, (forbidden, body) in zip(names, sorted(split.items(), key=lambda kv: sorted(kv[0]))):
            new_bodies[name].append((n, body))
            if forbidden:
                lookahead.append((n, forbidden))
    if IGNORE_RULE in rules:
        (_, tail_body), = _token_rule(_NONE, ignore_dfa, union, tail=True).items()
        rules[IGNORE_RULE] = tail_body
    out: list[tuple[str, Expr]] = []
    for name, body in rules.items():
        if name in new_bodies:
            out += new_bodies[name]
        else:
            out.append((name, _substitute(body, parts) if name != IGNORE_RULE else body))
    return Grammar(tuple(out), grammar.start, tuple(lookahead)).checked()
