"""Byte DFAs as tables, the one place automata are explored, trimmed, minimized and turned into IR.

A DFA here is ``(trans, accept)``: ``trans[q]`` maps a byte to the next state, ``accept[q]`` says
whether ``q`` accepts; state 0 starts. :func:`explore` builds every product or derived automaton
(regular-language operations, the Lark lexer's token and ignore automata) state by state, under
a state limit and the compile budget (:mod:`structgen.core.budget`), so none of them can grow
without bound unnoticed.

Example
-------
>>> from structgen.core.ir import ByteClass, Repeat
>>> trans, accept = dfa_of(Repeat(ByteClass.of("ab"), 1, 2))
>>> len(trans), accept
(3, [False, True, True])
>>> len(minimize(*trim(trans, accept))[0])
3
"""

from __future__ import annotations

from typing import Any, Callable

from structgen.core.automaton import regular_dfa
from structgen.core.budget import affordable, charge
from structgen.core.ir import ByteClass, Expr, Fsm
from structgen.errors import CompileError

__all__ = ["DEFAULT_STATE_LIMIT", "Dfa", "as_fsm", "dfa_of", "explore", "minimize", "product", "trim"]

#: Explored automata above this many states raise CompileError instead of exhausting memory.
DEFAULT_STATE_LIMIT = 50_000
#: Work units (structgen.core.budget) per explored state: each carries a row of up to 256 byte
#: transitions through trimming, minimizing and conversion (measured: ~8x a rule DFA state).
PRODUCT_STATE_UNITS = 8

Dfa = tuple[list[dict[int, int]], list[bool]]


def dfa_of(e: Expr, what: str = "regular", *, charged: bool = True) -> Dfa:
    """The DFA tables of a reference-free expression (or an :class:`Fsm` node), its states
    charged to the compile budget unless ``charged=False`` (determinizing alone is bounded by
    the automaton's state limit and cached per process; what grows is what :func:`explore`
    builds from it). Raises :class:`CompileError` naming ``what`` if ``e`` calls a rule."""
    if isinstance(e, Fsm):
        trans = [{b: t for cls, t in edges for b in cls.bytes()} for edges in e.edges]
        return trans, [q in e.accept for q in range(len(e.edges))]
    got = regular_dfa(e, what)
    if any(got.calls):
        raise CompileError(f"{what}: a regular-language operation got an expression that calls a rule")
    if charged:
        charge(max(len(got.trans), got.units))
    return got.trans, got.accept


def explore(start: Any, step: Callable[[Any], Any], limit: int, what: str) -> tuple[list[dict[int, int]], list]:
    """The DFA reachable from ``start`` when ``step(state)`` yields its ``(byte, next state)``
    pairs: transition rows and the states in discovery order (state 0 is ``start``). Raises
    :class:`~structgen.errors.CompileError` past ``limit`` states; charges the compile budget
    as it grows, so a budget stops a large product early."""
    index = {start: 0}
    order = [start]
    trans: list[dict[int, int]] = []
    i = 0
    while i < len(order):
        row: dict[int, int] = {}
        for byte, key in step(order[i]):
            t = index.get(key)
            if t is None:
                if len(order) >= limit:
                    raise CompileError(f"{what}: the automaton exceeds {limit} states")
                t = index[key] = len(order)
                order.append(key)
                if not t & 255:
                    charge(256 * PRODUCT_STATE_UNITS, what)
            row[byte] = t
        trans.append(row)
        i += 1
    charge((len(order) & 255) * PRODUCT_STATE_UNITS, what)  # the states since the last charge
    return trans, order


def product(a: Dfa, b: Dfa, limit: int, what: str) -> Dfa:
    """The intersection automaton of ``a`` and ``b`` (untrimmed), explored under the budget."""
    (ta, aa), (tb, ab) = a, b

    def step(state: tuple[int, int]):
        p, q = state
        rb = tb[q]
        for byte, p2 in ta[p].items():
            q2 = rb.get(byte)
            if q2 is not None:
                yield byte, (p2, q2)

    trans, order = explore((0, 0), step, limit, what)
    return trans, [aa[p] and ab[q] for p, q in order]


def trim(trans: list[dict[int, int]], accept: list[bool]) -> Dfa:
    """Drop states that cannot reach an accepting state (state 0 is kept, possibly empty)."""
    back: list[set[int]] = [set() for _ in trans]
    for q, row in enumerate(trans):
        for t in row.values():
            back[t].add(q)
    live = {q for q, ok in enumerate(accept) if ok}
    todo = list(live)
    while todo:
        for p in back[todo.pop()]:
            if p not in live:
                live.add(p)
                todo.append(p)
    keep = [0] + [q for q in range(1, len(trans)) if q in live]
    new = {q: i for i, q in enumerate(keep)}
    return ([{b: new[t] for b, t in trans[q].items() if t in live} for q in keep],
            [accept[q] for q in keep])


def minimize(trans: list[dict[int, int]], accept: list[bool]) -> Dfa:
    """Moore partition refinement; state 0 stays the start state.

    Each row is grouped once into (byte set, target) pairs, the byte sets interned, so an
    iteration costs the number of groups, not 256 bytes, per state: a length counter needs as
    many iterations as it counts. Two states whose rows split their bytes differently over
    equivalent targets may stay apart (the result is then not quite minimal, never wrong).
    """
    interned: dict[frozenset[int], int] = {}
    groups = []
    for row in trans:
        by_target: dict[int, list[int]] = {}
        for b, t in row.items():
            by_target.setdefault(t, []).append(b)
        groups.append([(interned.setdefault(frozenset(bs), len(interned)), t) for t, bs in by_target.items()])
    block = [1 if a else 0 for a in accept]
    rounds = 0
    while True:
        # A chain of n states takes n rounds over n states: a 40,001-state Lark terminal ran for
        # minutes. Stop when that work (a unit per 8 state visits) cannot fit the budget.
        rounds += 1
        affordable(rounds * len(trans) // 8)
        sigs: dict[tuple, int] = {}
        new_block = []
        for q, row_groups in enumerate(groups):
            sig = (block[q], tuple(sorted((k, block[t]) for k, t in row_groups)))
            new_block.append(sigs.setdefault(sig, len(sigs)))
        if len(sigs) == len(set(block)):
            break
        block = new_block
    # renumber so that the start state's block is 0
    order: dict[int, int] = {block[0]: 0}
    for q in range(len(trans)):
        order.setdefault(block[q], len(order))
    n = len(order)
    out: list[dict[int, int]] = [{} for _ in range(n)]
    acc = [False] * n
    for q, row in enumerate(trans):
        k = order[block[q]]
        out[k] = {b: order[block[t]] for b, t in row.items()}
        acc[k] = accept[q]
    return out, acc


def as_fsm(trans: list[dict[int, int]], accept: list[bool]) -> Fsm:
    """The tables as an IR :class:`Fsm` node (byte classes per target)."""
    edges = []
    for row in trans:
        by_target: dict[int, set[int]] = {}
        for b, t in row.items():
            by_target.setdefault(t, set()).add(b)
        edges.append(tuple(sorted(((ByteClass.from_bytes(bs), t) for t, bs in by_target.items()),
                                  key=lambda e: e[0].ranges)))
    return Fsm(tuple(edges), frozenset(q for q, a in enumerate(accept) if a))
