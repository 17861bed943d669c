"""Regular-language tools on reference-free IR: determinize, intersect, trim and minimize.

The JSON-schema frontend needs a few languages that plain regular expressions spell badly:
"a number in this range *and* a multiple of 7", "a string matching this pattern *and* 3 to 10
characters long". Each side is easy alone; their intersection is a product of two DFAs. The
result is an :class:`~structgen.core.ir.Fsm` node that the automaton compiler embeds like any other
expression.

Every product is trimmed (no state that cannot reach an accepting one: the mask builder must
never allow a byte that leads into a dead end) and minimized (fewer states, fewer masks).

Example
-------
>>> from structgen.core.ir import ByteClass, Lit, Repeat, seq
>>> digits = Repeat(ByteClass.of("0-9"), 1, None)
>>> two_or_three = Repeat(ByteClass.of("0-9"), 2, 3)
>>> fsm = intersect(digits, two_or_three)
>>> matches(fsm, b"12"), matches(fsm, b"1234"), len(fsm.edges)
(True, False, 4)
"""

from __future__ import annotations

from typing import Any, Callable

from structgen.core.budget import charge
from structgen.errors import CompileError
from structgen.core.ir import ByteClass, Expr, Fsm

__all__ = ["to_fsm", "intersect", "difference", "shortest_matches", "matches", "state_count", "length_range",
           "DEFAULT_STATE_LIMIT"]

#: Products above this many states raise CompileError instead of exhausting memory.
DEFAULT_STATE_LIMIT = 50_000
#: Minimization (Moore, pure Python) is skipped above this many states: it only saves masks.
MINIMIZE_UP_TO = 4_000

_Dfa = tuple[list[dict[int, int]], list[bool]]


#: Work units (structgen.core.budget) per product state: each carries a row of up to 256 byte
#: transitions through trimming, minimizing and conversion (measured: ~8x a rule DFA state).
PRODUCT_STATE_UNITS = 8


def _dfa(e: Expr) -> _Dfa:
    if isinstance(e, Fsm):
        trans = [{b: t for cls, t in edges for b in cls.bytes()} for edges in e.edges]
        return trans, [q in e.accept for q in range(len(e.edges))]
    from structgen.core.automaton import _regular_dfa  # the automaton module owns determinization

    got = _regular_dfa(e, "regular")
    if any(got.calls):
        raise CompileError("a regular-language operation got an expression that calls a rule")
    charge(len(got.trans))
    return got.trans, got.accept


def to_fsm(e: Expr) -> Fsm:
    """The minimal trimmed DFA of a reference-free expression, as an IR node."""
    trans, accept = _dfa(e)
    return _as_fsm(*_minimize(*_trim(trans, accept)))


def intersect(*exprs: Expr, limit: int = DEFAULT_STATE_LIMIT, what: str = "intersection") -> Fsm:
    """The language of strings every expression matches, as a minimal DFA.

    Raises :class:`~structgen.errors.CompileError` naming ``what`` when the product would
    exceed ``limit`` states.
    """
    trans, accept = _dfa(exprs[0])
    for e in exprs[1:]:
        trans, accept = _trim(*_product((trans, accept), _dfa(e), limit, what))
        if len(trans) <= MINIMIZE_UP_TO:
            trans, accept = _minimize(trans, accept)
    return _as_fsm(trans, accept)


def with_length(e: Expr, char: Expr, lo: int, hi: int | None, *, limit: int = DEFAULT_STATE_LIMIT,
                what: str = "length") -> Fsm:
    """The strings of ``e`` that are ``lo``..``hi`` repetitions of ``char`` (a prefix-free
    language: one character in its spellings), as a minimal DFA.

    The same language as ``intersect(e, Repeat(char, lo, hi))`` (trimmed, not minimized), built without unrolling the
    count: the walk pairs ``e``'s states with the character automaton and the count so far, and
    visits only the pairs ``e`` lets through (a pattern of ASCII letters and a ``maxLength`` of
    146 is a few hundred states, not the 3,000 of 146 unrolled JSON characters).

    >>> from structgen.core.ir import ByteClass, Repeat
    >>> ab = Repeat(ByteClass.of("ab"), 0, None)
    >>> fsm = with_length(ab, ByteClass.of("abc"), 2, 3)
    >>> [matches(fsm, w) for w in (b"a", b"ab", b"aba", b"abab", b"ac")]
    [False, True, True, False, False]
    """
    (ta, aa), (tc, ac) = _dfa(e), _dfa(char)
    cap = hi if hi is not None else lo  # without an upper bound, counts past lo behave alike

    def step(state: tuple[int, int, int]):
        p, c, n = state
        for byte, p2 in ta[p].items():
            c2 = tc[c].get(byte)
            if c2 is None:
                continue
            n2 = n
            if ac[c2]:  # a character complete: count it, start the next
                c2, n2 = 0, min(n + 1, cap) if hi is None else n + 1
                if hi is not None and n2 > hi:
                    continue
            yield byte, (p2, c2, n2)

    trans, order = _explore((0, 0, 0), step, limit, what)
    # Not minimized: the counts are distinct states anyway (exactness needs them), and Moore
    # refinement takes one pass per count to find that out.
    return _as_fsm(*_trim(trans, [aa[p] and c == 0 and n >= lo for p, c, n in order]))


def difference(a: Expr, b: Expr, *, limit: int = DEFAULT_STATE_LIMIT, what: str = "difference") -> Fsm:
    """The language of strings ``a`` matches and ``b`` does not, as a minimal trimmed DFA.

    >>> from structgen.core.ir import ByteClass, Lit, Repeat, alt
    >>> fsm = difference(Repeat(ByteClass.of("a-z"), 1, 3), alt(Lit(b"no"), Lit(b"x")))
    >>> [matches(fsm, w) for w in (b"no", b"x", b"n", b"nop", b"xy")]
    [False, False, True, True, True]
    """
    (ta, aa), (tb, ab) = _dfa(a), _dfa(b)

    def step(state: tuple[int, int]):
        p, q = state  # q == -1: b can no longer match
        for byte, p2 in ta[p].items():
            yield byte, (p2, tb[q].get(byte, -1) if q >= 0 else -1)

    trans, order = _explore((0, 0), step, limit, what)
    accept = [aa[p] and not (q >= 0 and ab[q]) for p, q in order]
    trans, accept = _trim(trans, accept)
    if len(trans) <= MINIMIZE_UP_TO:
        trans, accept = _minimize(trans, accept)
    return _as_fsm(trans, accept)


def shortest_matches(e: Expr) -> Fsm:
    """The texts of ``e`` that have no proper prefix in ``e`` (where a lazy lexer stops).

    Example
    -------
    >>> from structgen.core.ir import Lit, Repeat, ByteClass, seq
    >>> comment = seq(Lit(b"/*"), Repeat(ByteClass.of("*/a"), 0, None), Lit(b"*/"))
    >>> [matches(shortest_matches(comment), t) for t in (b"/*a*/", b"/*a*/a*/")]
    [True, False]
    """
    trans, accept = _dfa(e)
    cut = [{} if ok else row for row, ok in zip(trans, accept)]
    return _as_fsm(*_minimize(*_trim(cut, accept)))


def state_count(e: Expr) -> int:
    """States of the (unminimized) DFA of a reference-free expression: a size estimate."""
    return len(_dfa(e)[0])


def length_range(e: Expr) -> tuple[int, int | None]:
    """Shortest and longest match in bytes (``None``: unbounded) of a reference-free expression."""
    trans, accept = _trim(*_dfa(e))
    shortest, dist, todo = None, {0: 0}, [0]
    for q in todo:  # breadth first
        if accept[q] and shortest is None:
            shortest = dist[q]
        for t in trans[q].values():
            if t not in dist:
                dist[t] = dist[q] + 1
                todo.append(t)
    longest: dict[int, int] = {}
    on_path: set[int] = set()

    def walk(q: int) -> int | None:  # longest path to an accepting end; None on a cycle
        if q in longest:
            return longest[q]
        if q in on_path:
            return None
        on_path.add(q)
        best = 0 if accept[q] else -1
        for t in set(trans[q].values()):
            sub = walk(t)
            if sub is None:
                return None
            best = max(best, sub + 1)
        on_path.discard(q)
        longest[q] = best
        return best

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * len(trans) + 100))
    try:
        top = walk(0)
    finally:
        sys.setrecursionlimit(limit)
    return shortest or 0, top


def matches(e: Expr, data: bytes) -> bool:
    """Whether the reference-free expression matches ``data`` exactly (for tests and doctests)."""
    return matcher(e)(data)


def matcher(e: Expr) -> "Callable[[bytes], bool]":
    """A function telling whether ``data`` is in the language of ``e`` (its DFA built once)."""
    trans, accept = _dfa(e)

    def match(data: bytes) -> bool:
        q = 0
        for b in data:
            q = trans[q].get(b, -1)
            if q < 0:
                return False
        return accept[q]
    return match


def _explore(start: Any, step: Callable[[Any], Any], limit: int, what: str) -> tuple[list[dict[int, int]], list]:
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
    return trans, order


def _product(a: _Dfa, b: _Dfa, limit: int, what: str) -> _Dfa:
    (ta, aa), (tb, ab) = a, b

    def step(state: tuple[int, int]):
        p, q = state
        rb = tb[q]
        for byte, p2 in ta[p].items():
            q2 = rb.get(byte)
            if q2 is not None:
                yield byte, (p2, q2)

    trans, order = _explore((0, 0), step, limit, what)
    return trans, [aa[p] and ab[q] for p, q in order]


def _trim(trans: list[dict[int, int]], accept: list[bool]) -> _Dfa:
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


def _minimize(trans: list[dict[int, int]], accept: list[bool]) -> _Dfa:
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
    while True:
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


def _as_fsm(trans: list[dict[int, int]], accept: list[bool]) -> Fsm:
    edges = []
    for row in trans:
        by_target: dict[int, set[int]] = {}
        for b, t in row.items():
            by_target.setdefault(t, set()).add(b)
        edges.append(tuple(sorted(((ByteClass.from_bytes(bs), t) for t, bs in by_target.items()),
                                  key=lambda e: e[0].ranges)))
    return Fsm(tuple(edges), frozenset(q for q, a in enumerate(accept) if a))
