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
two), and each part gets a *lookahead* (:attr:`structgen.core.ir.Grammar.lookahead`): the runtime
checks the next byte when the rule returns (:mod:`structgen.engine.pda`). Ignored whitespace
before a token is written into the calling rule, with the same check built into its automaton
between pieces and before the token; other ignored pieces (comments) are called, like tokens.

Example
-------
Two words, ignored spaces between: without the lexer rule ``abcd`` would also read as ``ab``
``cd``; with it, a word may not end before a letter:

>>> from structgen.core.ir import Grammar, Lit, Ref, Repeat, ByteClass, seq
>>> word = Repeat(ByteClass.of("a-z"), 1, None)
>>> g = Grammar.of("two", two=seq(Ref("W"), Ref("W")), W=seq(Repeat(Lit(b" "), 0, None), word))
>>> from structgen.core.automaton import build_automaton
>>> from structgen.engine.pda import StackMachine, ACCEPT
>>> sm = StackMachine(build_automaton(apply_lexer(g, {"W": word}, [Lit(b" ")])))
>>> [ACCEPT in sm.step_bytes(sm.initial(), s) for s in (b"ab cd", b"abcd", b" ab  cd")]
[True, False, True]
"""

from __future__ import annotations

from array import array
from typing import Sequence

from structgen.core.dfa import (DEFAULT_STATE_LIMIT, Rows, as_fsm, explore_rows, fsm_of_rows, mask_of, mask_of_ranges,
                                minimize, minimize_rows, rows_of, shared_read_classes, shared_rows_of, split_fsms,
                                trim, trim_rows)
from structgen.core.ir import Expr, Fsm, Grammar, Ref, Repeat, alt, seq, substitute

__all__ = ["apply_lexer", "IGNORE_RULE", "IGNORED_PIECE"]

#: The rule for ignored text at the end of the input.
IGNORE_RULE = "%ignore"
#: The rule (one per exit class: ``%ignore.piece#k``) of the ignored pieces that are called,
#: not written into the callers: all but whitespace (see :func:`apply_lexer`).
IGNORED_PIECE = "%ignore.piece"

def _split_by_exit(rows: Rows, order: list, exits) -> dict[frozenset[int], Expr]:
    """``{forbidden bytes: automaton}``: the explored automaton, one copy per exit class, each
    accepting where ``exits(state)`` yields that class."""
    accepts: dict[frozenset[int], list[bool]] = {}
    for q, state in enumerate(order):
        for forbidden in exits(state):
            accepts.setdefault(forbidden, [False] * len(order))[q] = True
    return {f: fsm_of_rows(*minimize_rows(*trim_rows(rows, acc))) for f, acc in accepts.items()}


def _token(term: tuple[Rows, list[bool]], union_rows: Rows, union_class: array,
           classes: list[frozenset[int]]) -> dict[frozenset[int], Expr]:
    """One token of ``term``, split by the bytes it forbids next: ``classes[union_class[u]]``,
    what the union of all terminals reads in its state ``u`` after the token's text. The
    product with the union is explored on rows grouped by target, whose byte classes are few
    (an identifier's row is one or two), so no step visits single bytes."""
    return {classes[c]: fsm for c, fsm in split_fsms(*term, union_rows, union_class, DEFAULT_STATE_LIMIT,
                                                     "a lexer token")}


def _ignored_run(ignore: tuple[Rows, list[bool]], union_rows: Rows, union_class: array,
                 classes: list[frozenset[int]]) -> dict[frozenset[int], Expr]:
    """One or more ignored pieces, each ending only before a byte it cannot read on (the lexer
    rule inside the run), split by what the last piece forbids next.

    A state is a set of threads: ``(piece state, union state)`` inside a piece, or ``(-1, c)``,
    a gap after a piece that forbids the bytes ``classes[c]`` (``c = -1``: the start, nothing
    forbidden). Explored on grouped rows, a block comment's ~250 bytes are one or two masks."""
    rows, accept = ignore
    forbids = [mask_of(c) for c in classes]
    every = (1 << 256) - 1

    def step(threads):
        pieces = []  # (bytes as a mask, the thread they lead to)
        for g, u in threads:
            allowed = every
            if g < 0:  # a gap: the next piece starts, on a byte the last one does not forbid
                allowed = every if u < 0 else every & ~forbids[u]
                g = u = 0
            for mg, g2 in rows[g]:
                for mu, u2 in union_rows[u]:
                    if mg & mu & allowed:
                        pieces.append((mg & mu & allowed, (g2, u2)))
        for m, nxt in _partition(pieces):
            yield m, frozenset(nxt | {(-1, union_class[u]) for g, u in nxt if accept[g]})

    start = frozenset({(-1, -1)})
    grouped_rows, order = explore_rows(start, step, DEFAULT_STATE_LIMIT, "ignored text")
    return _split_by_exit(grouped_rows, order, lambda threads: [classes[c] for g, c in threads if g < 0]
                          if threads != start else [])


def _partition(pieces: list[tuple[int, object]]) -> list[tuple[int, set]]:
    """The bytes of ``pieces`` (``(mask, item)``) split where the same items cover them: each
    part's mask with its items.

    >>> sorted((m, sorted(s)) for m, s in _partition([(0b011, "a"), (0b110, "b")]))
    [(1, ['a']), (2, ['a', 'b']), (4, ['b'])]
    """
    parts: list[tuple[int, set]] = []
    for m, item in pieces:
        out = []
        for pm, items in parts:
            both = pm & m
            if both:
                out.append((both, items | {item}))
                if pm & ~m:
                    out.append((pm & ~m, items))
                m &= ~pm
            else:
                out.append((pm, items))
        if m:
            out.append((m, {item}))
        parts = out
    return parts


def _without_first(fsm: Fsm, first: frozenset[int]) -> "Fsm | None":
    """``fsm`` minus its texts that start with a byte of ``first`` (None: nothing is left)."""
    trans = [{b: t for cls, t in row for b in cls.bytes()} for row in fsm.edges]
    trans[0] = {b: t for b, t in trans[0].items() if b not in first}
    if not trans[0]:
        return None
    return as_fsm(*minimize(*trim(trans, [q in fsm.accept for q in range(len(trans))])))


def _first_mask(fsm: Fsm) -> int:
    """The bytes ``fsm`` may start with, as a mask."""
    m = 0
    for cls, _ in fsm.edges[0]:
        m |= mask_of_ranges(cls.ranges)
    return m


_BLANK = mask_of(b" \t\n\r\f\v")


def _blank_only(piece: Expr) -> bool:
    """Whether ``piece`` reads ASCII whitespace only (so it stays written into the callers)."""
    rows, _ = rows_of(piece, charged=False)
    return all(not m & ~_BLANK for row in rows for m, _ in row)


class _Variants:
    """A terminal's rules, one per exit class, and their copies without some first bytes, made
    when a run of ignored text before a call forbids those (``rules`` and ``lookahead`` gather
    what the grammar gets)."""

    def __init__(self, name: str, by_exit: list[tuple[frozenset[int], Expr]],
                 lookahead: list[tuple[str, frozenset[int]]]) -> None:
        self.names = [name] if len(by_exit) == 1 else [f"{name}#{k}" for k in range(len(by_exit))]
        self.by_exit = by_exit
        self.firsts = [_first_mask(body) for _, body in by_exit]  # type: ignore[arg-type]
        self.lookahead = lookahead
        self.rules: list[tuple[str, Expr]] = []
        for n, (forbidden, body) in zip(self.names, by_exit):
            self.rules.append((n, body))
            if forbidden:
                lookahead.append((n, forbidden))

    def calls(self) -> Expr:
        return alt(*(Ref(n) for n in self.names))

    def calls_after(self, k: int, after_run: frozenset[int], run_mask: int) -> "Expr | None":
        """The calls that may follow run ``k``, which forbids ``after_run`` next (None: none)."""
        calls: list[Expr] = []
        for n, (forbidden, body), first in zip(self.names, self.by_exit, self.firsts):
            if not first & run_mask:
                calls.append(Ref(n))
                continue
            rest = _without_first(body, after_run)  # type: ignore[arg-type]
            if rest is not None:
                calls.append(Ref(f"{n}/{k}"))
                self.rules.append((f"{n}/{k}", rest))
                if forbidden:
                    self.lookahead.append((f"{n}/{k}", forbidden))
        return alt(*calls) if calls else None


def apply_lexer(grammar: Grammar, terminals: dict[str, Expr], ignore: "Sequence[Expr]" = ()) -> Grammar:
    """The grammar with lexer rules applied (see the module docstring).

    ``grammar`` reads bytes only inside its terminal rules (named in ``terminals``, which maps
    each to its language without ignored text) and :data:`IGNORE_RULE`, which it may call at
    the end of the input; ``ignore`` are the pieces of ignored text (``%ignore WS``,
    ``%ignore COMMENT``).

    Each call of a terminal becomes: an optional run of ignored text, then a call of the
    token's rule. Whitespace is written into the calling rule: nearly every token crosses out
    of it (``" int"``), and as a rule of its own those crossings would cost a walk per place
    that calls it. Other pieces (comments) are called, like a token (:data:`IGNORED_PIECE`):
    the walk inside a comment, where nearly every token of the vocabulary is legal, is then
    made once, not once per rule that calls a terminal. (Where no piece is whitespace only,
    all are written in.) Where the run's last piece forbids some first bytes of what comes
    next, the call goes to a copy of that rule without them.
    """
    pieces = list(ignore)
    is_blank = [_blank_only(p) for p in pieces]
    called = [p for p, b in zip(pieces, is_blank) if not b] if any(is_blank) else []
    inline = [p for p, b in zip(pieces, is_blank) if b] if called else pieces
    # The terminals' own DFAs are what the rule automata are built from anyway (charged there);
    # the products explored below are what this module adds, and they are charged.
    union_rows, _ = shared_rows_of(alt(*terminals.values(), *pieces))
    union_class, classes = shared_read_classes(union_rows)  # each distinct set of bytes the union reads
    lookahead: list[tuple[str, frozenset[int]]] = []

    def token(name: str, lang: Expr) -> _Variants:
        by_exit = sorted(_token(rows_of(lang, charged=False), union_rows, union_class, classes).items(),
                         key=lambda kv: sorted(kv[0]))
        return _Variants(name, by_exit, lookahead)

    runs = sorted(_ignored_run(rows_of(alt(*inline), charged=False), union_rows, union_class, classes).items(),
                  key=lambda kv: sorted(kv[0])) if inline else []
    run_masks = [mask_of(after_run) for after_run, _ in runs]  # what each run forbids next

    def after_runs(v: _Variants) -> Expr:
        """``v``'s calls, directly or after a run (of whitespace, where pieces are called)."""
        options = [v.calls()]
        for k, (after_run, run) in enumerate(runs):
            calls = v.calls_after(k, after_run, run_masks[k])
            if calls is not None:
                options.append(seq(run, calls))
        return alt(*options)

    # called pieces: chunks of (whitespace, then) one called piece, repeated, before what the
    # run written in gives; after a chunk, the piece's lookahead checks the next byte, so what
    # follows it is not restricted here
    pieces_rule = token(IGNORED_PIECE, alt(*called)) if called else None
    chunk = after_runs(pieces_rule) if pieces_rule is not None else None
    chunks = Repeat(chunk, 0, None) if chunk is not None else None  # one node, shared by every site
    new_rules: dict[str, list[tuple[str, Expr]]] = {}
    sites: dict[str, Expr] = {}
    for name, lang in terminals.items():
        v = token(name, lang)
        sites[name] = after_runs(v) if chunks is None else seq(chunks, after_runs(v))
        new_rules[name] = v.rules
    if runs:
        sites[IGNORE_RULE] = alt(*(run for _, run in runs))
        if chunks is not None:  # at least one piece: chunks alone, or chunks then a run
            sites[IGNORE_RULE] = alt(Repeat(chunk, 1, None), seq(chunks, sites[IGNORE_RULE]))
    out: list[tuple[str, Expr]] = []
    for name, body in grammar.rules:
        if name in new_rules:
            out += new_rules[name]
        elif name != IGNORE_RULE:
            out.append((name, substitute(body, sites.get)))
    if pieces_rule is not None:
        out += pieces_rule.rules
    return Grammar(tuple(out), grammar.start, tuple(lookahead)).checked()
