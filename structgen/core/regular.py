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

from array import array
from typing import Callable

from structgen.core.budget import once_per_compile
from structgen.core.dfa import (DEFAULT_STATE_LIMIT, Rows, as_fsm, dfa_of, explore_rows, fsm_of_rows,
                                kernel_available, minimize, minimize_rows, product_rows, rows_of, split_fsms, split_product,
                                trim, trim_rows)
from structgen.core.ir import Expr, Fsm
from structgen.core.memo import Recent

__all__ = ["to_fsm", "intersect", "difference", "shortest_matches", "matches", "state_count", "length_range",
           "DEFAULT_STATE_LIMIT"]

#: Minimization (Moore, pure Python) is skipped above this many states: it only saves masks.
MINIMIZE_UP_TO = 4_000

def to_fsm(e: Expr) -> Fsm:
    """The minimal trimmed DFA of a reference-free expression, as an IR node."""
    trans, accept = dfa_of(e)
    return as_fsm(*minimize(*trim(trans, accept)))


def intersect(*exprs: Expr, limit: int = DEFAULT_STATE_LIMIT, what: str = "intersection") -> Fsm:
    """The language of strings every expression matches, as a minimal DFA (made once per
    compile for the same expressions).

    Raises :class:`~structgen.errors.CompileError` naming ``what`` when the product would
    exceed ``limit`` states.
    """
    return once_per_compile(("intersect", exprs, limit), lambda: _intersect(exprs, limit, what))


def _intersect(exprs: tuple[Expr, ...], limit: int, what: str) -> Fsm:
    rows, accept = rows_of(exprs[0])
    for k, e in enumerate(exprs[1:], 2):
        rb, ab = rows_of(e)
        if kernel_available():
            classes = [0 if x else -1 for x in ab]
            if k == len(exprs):  # the last product: the kernel writes the IR node itself
                return _kernel_fsm(rows, accept, rb, classes, limit, what)
            rows, accept = _kernel_product(rows, accept, rb, classes, limit, what)
            continue
        rows, order = product_rows(rows, rb, limit, what)
        rows, accept = _minimal(*trim_rows(rows, [accept[p] and ab[q] for p, q in order]))
    return fsm_of_rows(rows, accept)


def _minimal(rows: Rows, accept: list[bool]) -> tuple[Rows, list[bool]]:
    """Minimized, unless too large for Moore refinement in Python (then only trimmed)."""
    return minimize_rows(rows, accept) if len(rows) <= MINIMIZE_UP_TO else (rows, accept)


def _kernel_product(ra: Rows, aa: list[bool], rb: Rows, class_b: list[int], limit: int,
                    what: str) -> tuple[Rows, list[bool]]:
    """The product accepting where ``a`` does and ``class_b`` is 0, trimmed and minimized in C
    (:func:`~structgen.core.dfa.split_product`: the same rows as the Python path below
    :data:`MINIMIZE_UP_TO` states, and minimized above it too)."""
    got = split_product(ra, aa, rb, class_b, limit, what)
    return (got[0][1], got[0][2]) if got else ([[]], [False])


def _kernel_fsm(ra: Rows, aa: list[bool], rb: Rows, class_b: "list[int] | array", limit: int, what: str, *,
                minimal: bool = True) -> Fsm:
    """:func:`_kernel_product` as an IR :class:`Fsm` node, whose edges (and digest text) the kernel
    writes itself (:func:`~structgen.core.dfa.split_fsms`): converting the rows in Python, then
    writing them out for the digest, cost as much as the product (the date-time format under
    ``not``, a 5,500-state difference: 47 ms in all before, 15 ms now, rows already made)."""
    got = split_fsms(ra, aa, rb, class_b, limit, what, minimal=minimal)
    return got[0][1] if got else fsm_of_rows([[]], [False])


def with_length(e: Expr, char: Expr, lo: int, hi: int | None, *, limit: int = DEFAULT_STATE_LIMIT,
                what: str = "length") -> Fsm:
    """The strings of ``e`` that are ``lo``..``hi`` repetitions of ``char`` (a prefix-free
    language: one character in its spellings), as a trimmed DFA (made once per compile for the
    same arguments).

    The same language as ``intersect(e, Repeat(char, lo, hi))``, built without unrolling the
    count into IR: the product pairs ``e``'s states with a counter automaton (the character's
    states times the count so far, :func:`_counter_rows`) and visits only the pairs ``e`` lets
    through (a pattern of ASCII letters and a ``maxLength`` of 146 is a few hundred states, not
    the 3,000 of 146 unrolled JSON characters).

    >>> from structgen.core.ir import ByteClass, Repeat
    >>> ab = Repeat(ByteClass.of("ab"), 0, None)
    >>> fsm = with_length(ab, ByteClass.of("abc"), 2, 3)
    >>> [matches(fsm, w) for w in (b"a", b"ab", b"aba", b"abab", b"ac")]
    [False, True, True, False, False]
    """
    return once_per_compile(("length", e, char, lo, hi, limit), lambda: _with_length(e, char, lo, hi, limit, what))


def _with_length(e: Expr, char: Expr, lo: int, hi: int | None, limit: int, what: str) -> Fsm:
    (ra, aa), (rc, ac) = rows_of(e), rows_of(char)  # bytes per target: a step never visits single bytes
    rb, ends = _counter_rows(char, rc, ac, lo, hi)
    # Not minimized: the counts are distinct states anyway (exactness needs them), and Moore
    # refinement takes one round per count to find that out.
    return _kernel_fsm(ra, aa, rb, ends, limit, what, minimal=False)


def _counter_rows(char: Expr, rc: Rows, ac: list[bool], lo: int, hi: int | None) -> tuple[Rows, array]:
    """The automaton of ``lo``..``hi`` repetitions of ``char`` as a counter, and its states'
    classes for :func:`~structgen.core.dfa.split_fsms` (0 where it may end, else -1): state
    ``n * len(rc) + c`` is character state ``c`` after ``n`` whole characters (without an upper
    bound, counts past ``lo`` behave alike and stop at ``lo``). Made once per process for the
    same arguments, the few most recent kept (a ``maxLength`` of 255 recurs across schemas; 34
    states a count for a JSON character)."""
    key = (char, lo, hi)
    got = _COUNTERS.get(key)
    if got is None:
        width, cap = len(rc), hi if hi is not None else lo
        # per character state: (bytes, character state next or -1 where a character completes)
        steps = [[(bs, -1 if ac[c2] else c2) for bs, c2 in row] for row in rc]
        rows: Rows = []
        for n in range(cap + 1):
            done = (n + 1) * width if hi is not None else min(n + 1, cap) * width  # state 0 of the next count
            last = hi is not None and n == hi  # no character may complete past hi
            for row in steps:
                by_target: dict[int, int] = {}
                for bs, c2 in row:
                    if c2 >= 0 or not last:
                        t = n * width + c2 if c2 >= 0 else done
                        by_target[t] = by_target.get(t, 0) | bs
                rows.append([(bs, t) for t, bs in by_target.items()])
        ends = array("i", [0 if c == 0 and n >= lo else -1 for n in range(cap + 1) for c in range(width)])
        got = _COUNTERS[key] = (rows, ends)
    return got


#: ``(char, lo, hi)`` -> counter automaton (:func:`_counter_rows`)
_COUNTERS: Recent[tuple, tuple[Rows, array]] = Recent(4)


def difference(a: Expr, b: Expr, *, limit: int = DEFAULT_STATE_LIMIT, what: str = "difference") -> Fsm:
    """The language of strings ``a`` matches and ``b`` does not, as a minimal trimmed DFA (made
    once per compile for the same expressions).

    >>> from structgen.core.ir import ByteClass, Lit, Repeat, alt
    >>> fsm = difference(Repeat(ByteClass.of("a-z"), 1, 3), alt(Lit(b"no"), Lit(b"x")))
    >>> [matches(fsm, w) for w in (b"no", b"x", b"n", b"nop", b"xy")]
    [False, False, True, True, True]
    """
    return once_per_compile(("difference", a, b, limit), lambda: _difference(a, b, limit, what))


def _difference(a: Expr, b: Expr, limit: int, what: str) -> Fsm:
    # Bytes per target (an object's "any other key" is a JSON string, ~250 bytes a row, against
    # a trie of a few hundred defined keys: a step per byte was 10^6 steps).
    (ra, aa), (rb, ab) = rows_of(a), rows_of(b)
    if kernel_available():
        return _kernel_fsm(ra, aa, *_completed(rb, ab), limit, what)
    b_reads = [sum(m for m, _ in row) for row in rb]  # a row's masks are disjoint

    def step(state: tuple[int, int]):
        p, q = state  # q == -1: b can no longer match
        if q < 0:
            for bs, p2 in ra[p]:
                yield bs, (p2, -1)
            return
        for bs, p2 in ra[p]:
            for bs_b, q2 in rb[q]:
                both = bs & bs_b
                if both:
                    yield both, (p2, q2)
            rest = bs & ~b_reads[q]
            if rest:
                yield rest, (p2, -1)

    rows, order = explore_rows((0, 0), step, limit, what)
    return fsm_of_rows(*_minimal(*trim_rows(rows, [aa[p] and not (q >= 0 and ab[q]) for p, q in order])))


def _completed(rb: Rows, ab: list[bool]) -> tuple[Rows, array]:
    """``b`` completed by a sink state (where it can no longer match), and its states' classes
    for the product (0 where ``a``'s strings are kept: ``b`` rejects), made once per rows
    object: a format's automaton under ``not`` (10,000 states for date-time) recurs in every
    property it is in, and its rows are shared (:func:`~structgen.core.dfa.rows_of`)."""
    got = _COMPLETED.get(id(rb))
    if got is None or got[0] is not rb or got[1] is not ab:
        sink, every = len(rb), (1 << 256) - 1
        completed = []
        for row in rb:
            reads = sum(m for m, _ in row)  # a row's masks are disjoint
            completed.append([*row, (every & ~reads, sink)] if reads != every else row)
        completed.append([(every, sink)])
        if len(_COMPLETED) >= 16:
            _COMPLETED.clear()
        got = _COMPLETED[id(rb)] = (rb, ab, completed, array("i", [-1 if x else 0 for x in ab] + [0]))
    return got[2], got[3]


#: ``id(rows)`` -> ``(rows, accept, completed rows, classes)`` (:func:`_completed`; the entry
#: holds the rows, so the id is not reused while it is there)
_COMPLETED: dict[int, tuple[Rows, list[bool], Rows, array]] = {}


def shortest_matches(e: Expr) -> Fsm:
    """The texts of ``e`` that have no proper prefix in ``e`` (where a lazy lexer stops).

    Example
    -------
    >>> from structgen.core.ir import Lit, Repeat, ByteClass, seq
    >>> comment = seq(Lit(b"/*"), Repeat(ByteClass.of("*/a"), 0, None), Lit(b"*/"))
    >>> [matches(shortest_matches(comment), t) for t in (b"/*a*/", b"/*a*/a*/")]
    [True, False]
    """
    trans, accept = dfa_of(e)
    cut = [{} if ok else row for row, ok in zip(trans, accept)]
    return as_fsm(*minimize(*trim(cut, accept)))


def state_count(e: Expr) -> int:
    """States of the (unminimized) DFA of a reference-free expression: a size estimate."""
    return len(e.edges) if isinstance(e, Fsm) else len(dfa_of(e)[0])


def length_range(e: Expr) -> tuple[int, int | None]:
    """Shortest and longest match in bytes (``None``: unbounded) of a reference-free expression."""
    # on rows grouped by target: a pattern's automaton of thousands of states (an intersection
    # of formats) is not spelled out byte by byte (110 ms each, four in Github_ultra o44225)
    rows, accept = trim_rows(*rows_of(e))
    trans = [[t for _, t in row] for row in rows]
    shortest, dist, todo = None, {0: 0}, [0]
    for q in todo:  # breadth first
        if accept[q] and shortest is None:
            shortest = dist[q]
        for t in trans[q]:
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
        for t in trans[q]:  # a row's targets are distinct
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
    if isinstance(e, Fsm):  # its byte classes as masks: spelling out thousands of rows byte by byte costs more
        rows, final = rows_of(e)

        def match_rows(data: bytes) -> bool:
            q = 0
            for b in data:
                bit = 1 << b
                q = next((t for m, t in rows[q] if m & bit), -1)
                if q < 0:
                    return False
            return final[q]
        return match_rows
    trans, accept = dfa_of(e)  # a cached DFA: its rows of byte -> target are already there

    def match(data: bytes) -> bool:
        q = 0
        for b in data:
            q = trans[q].get(b, -1)
            if q < 0:
                return False
        return accept[q]
    return match
