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

from array import array
from itertools import accumulate, groupby
from operator import itemgetter
from typing import Any, Callable

from structgen.core.automaton import regular_dfa, regular_rows
from structgen.core.budget import affordable, charge
from structgen.core.dfa_kernel import KERNEL_VERSION, kernel_available  # noqa: F401 -- KERNEL_VERSION: tests
from structgen.core.dfa_kernel import kernel as _kernel
from structgen.core.ir import ByteClass, Expr, Fsm, written_fsm
from structgen.core.memo import kept_by_id
from structgen.errors import CompileError

__all__ = ["DEFAULT_STATE_LIMIT", "Dfa", "Rows", "as_fsm", "dfa_of", "explore", "explore_rows", "fsm_of_rows",
           "grouped", "kernel_available", "mask_of", "mask_of_ranges", "members", "minimize", "minimize_rows",
           "product_rows", "ranges_of", "rows_of", "shared_grouped", "shared_read_classes", "shared_rows_of", "split_fsms", "split_product",
           "trim", "trim_rows", "ungrouped"]

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


def rows_of(e: Expr, what: str = "regular", *, charged: bool = True) -> tuple["Rows", list[bool]]:
    """:func:`dfa_of` as grouped rows (the same charge): an expression's from
    :func:`shared_grouped`, an :class:`Fsm`'s straight from its byte classes."""
    if isinstance(e, Fsm):
        rows = [_merged_row((mask_of_ranges(cls.ranges), t) for cls, t in edges) for edges in e.edges]
        return rows, [q in e.accept for q in range(len(e.edges))]
    trans, accept = dfa_of(e, what, charged=charged)
    return shared_grouped(trans), accept


def shared_grouped(trans: list[dict[int, int]]) -> "Rows":
    """``grouped(trans)`` made once per process for a DFA of :func:`dfa_of`'s cache: the SQL
    grammar's union of all terminals has 1,669 states, and grouping it with the terminals took
    30 ms of every compile. The rows are shared, so they are tuples: no caller can change them,
    and the cyclic collector stops walking them (a tuple of ints is untracked; the lists were
    42k objects after 200 MaskBench schemas, scanned by every full collection)."""
    return kept_by_id(_ROWS, trans, _frozen_grouped, 4096)


def _frozen_grouped(trans: list[dict[int, int]]) -> "Rows":
    if kernel_available():  # tuples from the start, untracked as they are made
        return _kernel.grouped(trans, True)
    return _untracked(tuple(map(tuple, grouped(trans))))  # type: ignore[return-value]


def _untracked(rows: tuple) -> tuple:
    """``rows`` (an Fsm's edges or grouped rows, tuples of ``(label, target)``) taken out of the
    cyclic collector's sight now, by the kernel (``untrack_edges``), as its own Fsm nodes are:
    no cycle runs through them. Without the kernel, a collection untracks tuples of ints a
    level at a time, and never a pair that holds a ByteClass."""
    if kernel_available():
        _kernel.untrack_edges(rows)
    return rows


def shared_rows_of(e: Expr, what: str = "regular") -> tuple["Rows", list[bool]]:
    """:func:`rows_of` uncharged, made once per process: by the kernel straight as rows where it
    can (no byte dicts made and grouped again), else from :func:`dfa_of`. For an automaton only
    ever read as rows, the Lark lexer's union of all terminals (1,669 states and 200k dict
    entries for a SQL database: making those was half of making it)."""
    got = regular_rows(e, what)
    if got is None:
        trans, accept = dfa_of(e, what, charged=False)
        return shared_grouped(trans), accept
    if any(got.calls):
        raise CompileError(f"{what}: a regular-language operation got an expression that calls a rule")
    return got.trans, got.accept  # type: ignore[return-value]


def shared_read_classes(rows: "Rows") -> tuple[array, list[frozenset[int]]]:
    """``(class of each state, classes)``: the set of bytes each state of grouped ``rows``
    reads, numbered in the order states first show it (``classes[k]`` is set ``k``). Made once
    per rows object, as :func:`shared_rows_of` makes the rows (the Lark lexer's union of
    terminals: 3 ms of a SQL compile).

    >>> shared_read_classes(grouped([{97: 1}, {98: 1}, {97: 0}]))
    (array('i', [0, 1, 0]), [frozenset({97}), frozenset({98})])
    """
    def made(rows: "Rows") -> tuple[array, list[frozenset[int]]]:
        numbers: dict[int, int] = {}  # a row's masks are disjoint: their sum is the set read
        cls = array("i", [numbers.setdefault(sum(map(_byte, row)), len(numbers)) for row in rows])
        return cls, [frozenset(members(m)) for m in numbers]
    return kept_by_id(_READS, rows, made, 4096)


#: ``id(trans)`` -> ``(trans, its rows)``, and ``(trans, its read classes)`` (see ``memo.kept_by_id``)
_ROWS: dict[int, tuple[list[dict[int, int]], "Rows"]] = {}
_READS: dict[int, tuple["Rows", tuple[array, list[frozenset[int]]]]] = {}


def explore(start: Any, step: Callable[[Any], Any], limit: int, what: str) -> tuple[list[dict[int, int]], list]:
    """The DFA reachable from ``start`` when ``step(state)`` yields its ``(byte, next state)``
    pairs: transition rows and the states in discovery order (state 0 is ``start``). Raises
    :class:`~structgen.errors.CompileError` past ``limit`` states; charges the compile budget
    as it grows, so a budget stops a large product early."""
    return _explored(start, step, limit, what, dict)


def explore_rows(start: Any, step: Callable[[Any], Any], limit: int, what: str) -> tuple[Rows, list]:
    """:func:`explore` for a ``step`` that yields ``(byte mask, next state)`` pairs: the DFA as
    grouped rows (pairs that reach one state merge), so a product of two grouped automata never
    touches single bytes."""
    return _explored(start, step, limit, what, _merged_row)


def _merged_row(pairs) -> list[tuple[int, int]]:
    """A grouped row from ``(mask, target)`` pairs: the masks of one target merged."""
    by_target: dict[int, int] = {}
    for bs, t in pairs:
        by_target[t] = by_target[t] | bs if t in by_target else bs
    return [(bs, t) for t, bs in by_target.items()]


def _explored(start: Any, step: Callable[[Any], Any], limit: int, what: str,
              row_of: Callable[[Any], Any]) -> tuple[list, list]:
    """Number the states ``step`` reaches from ``start``, in discovery order, under ``limit``
    and the budget; each state's row is ``row_of`` its ``(label, target number)`` pairs."""
    index = {start: 0}
    order = [start]

    def number(key: Any) -> int:
        t = index.get(key)
        if t is None:
            if len(order) >= limit:
                raise CompileError(f"{what}: the automaton exceeds {limit} states")
            t = index[key] = len(order)
            order.append(key)
            if not t & 255:
                charge(256 * PRODUCT_STATE_UNITS, what)
        return t

    rows = []
    i = 0
    while i < len(order):
        rows.append(row_of((label, number(key)) for label, key in step(order[i])))
        i += 1
    charge((len(order) & 255) * PRODUCT_STATE_UNITS, what)  # the states since the last charge
    return rows, order


def product_rows(ra: Rows, rb: Rows, limit: int, what: str) -> tuple[Rows, list[tuple[int, int]]]:
    """The intersection automaton of two grouped automata (untrimmed), explored under the
    budget: its rows and its states as ``(state of a, state of b)`` pairs in discovery order.
    A step pairs byte sets, never single bytes."""

    def step(state: tuple[int, int]):
        p, q = state
        row_b = rb[q]
        for bs, p2 in ra[p]:
            for bs_b, q2 in row_b:
                both = bs & bs_b
                if both:
                    yield both, (p2, q2)

    return explore_rows((0, 0), step, limit, what)


def split_product(ra: Rows, accept_a: list[bool], rb: Rows, class_b: "list[int] | array", limit: int,
                  what: str, *, minimal: bool = True) -> list[tuple[int, Rows, list[bool]]]:
    """The product of two grouped automata, accepting apart by class: a state ``(p, q)`` accepts
    in class ``class_b[q]`` (in none where it is -1) when ``a`` accepts at ``p``. For each class
    (in the order its first state is explored): ``(class, rows, accept)``, trimmed and minimized
    (only trimmed with ``minimal=False``).

    The same as :func:`product_rows`, then :func:`trim_rows` and :func:`minimize_rows` per
    class, states numbered alike, and charged to the budget alike; in C where
    :func:`kernel_available` (the Lark lexer splits every terminal this way: in Python, ~95 of
    the 176 ms of compiling a SQL grammar).

    >>> a = grouped([{97: 1}, {97: 1}])            # a+
    >>> b = grouped([{97: 1}, {97: 2}, {97: 2}])   # a, then aa...
    >>> [(c, len(rows)) for c, rows, _ in split_product(a, [False, True], b, [-1, 0, 1], 100, "x")]
    [(0, 2), (1, 3)]
    """
    if not kernel_available():
        rows, order = product_rows(ra, rb, limit, what)
        classes: dict[int, list[bool]] = {}
        for i, (p, q) in enumerate(order):
            if accept_a[p] and class_b[q] >= 0:
                classes.setdefault(class_b[q], [False] * len(order))[i] = True
        finish = minimize_rows if minimal else _as_they_are
        return [(c, *finish(*trim_rows(rows, acc))) for c, acc in classes.items()]
    return _split_in_c(ra, accept_a, rb, class_b, limit, what, None, minimal)


def _as_they_are(rows: Rows, accept: list[bool]) -> tuple[Rows, list[bool]]:
    return rows, accept


def split_fsms(ra: Rows, accept_a: list[bool], rb: Rows, class_b: "list[int] | array", limit: int,
               what: str, *, minimal: bool = True) -> list[tuple[int, Fsm]]:
    """:func:`split_product`, each class's automaton as an IR :class:`Fsm` node (the same node as
    :func:`fsm_of_rows` makes of its rows; in C, the kernel builds the node's edges itself).

    >>> a = grouped([{97: 1}, {97: 1}])
    >>> [(c, len(fsm.edges)) for c, fsm in split_fsms(a, [False, True], grouped([{97: 0}]), [0], 100, "x")]
    [(0, 2)]
    """
    if not kernel_available():
        return [(c, fsm_of_rows(rows, accept)) for c, rows, accept in
                split_product(ra, accept_a, rb, class_b, limit, what, minimal=minimal)]
    got = _split_in_c(ra, accept_a, rb, class_b, limit, what, _class_of_mask, minimal)
    return [(c, written_fsm(edges, accept, text)) for c, edges, accept, text in got]


def _split_in_c(ra: Rows, accept_a: list[bool], rb: Rows, class_b: "list[int] | array", limit: int,
                what: str, byte_class: "Callable[[int], ByteClass] | None", minimal: bool) -> list:
    """compiled_dfa.split_product, charged to the budget as :func:`_explored` and
    :func:`minimize_rows` charge the same work."""
    classes = class_b if isinstance(class_b, array) else array("i", class_b)
    n, visits, got = _kernel.split_product(*_packed(ra), bytes(accept_a), *_shared_packed(rb), classes, limit,
                                           byte_class, minimal)
    # what _explored charges for n states: 256 at a time as they are numbered, the rest at the end
    charge((n - 1) // 256 * 256 * PRODUCT_STATE_UNITS, what)
    if got is None:
        raise CompileError(f"{what}: the automaton exceeds {limit} states")
    charge((n & 255) * PRODUCT_STATE_UNITS, what)
    affordable(visits // 8)  # as minimize_rows checks its refinement
    return got


def _packed(rows: Rows) -> tuple[array, bytes, array]:
    """Grouped rows as compiled_dfa.c reads them: row offsets, 32-byte masks, targets."""
    edges = [edge for row in rows for edge in row]
    return (array("i", accumulate(map(len, rows), initial=0)),
            b"".join([bs.to_bytes(32, "little") for bs, _ in edges]), array("i", map(_target, edges)))


def _shared_packed(rows: Rows) -> tuple[bytes, bytes, bytes]:
    """:func:`_packed`, made once per rows object: the union of a grammar's terminals (1,669
    states for a SQL database) is the second automaton of every token's product."""
    def made(rows: Rows) -> tuple[bytes, bytes, bytes]:
        offsets, masks, targets = _packed(rows)
        # all bytes: immutable, so the kernel checks them once, not once per token
        return offsets.tobytes(), masks, targets.tobytes()
    return kept_by_id(_PACKED, rows, made, 16)


#: ``id(rows)`` -> ``(rows, packed)`` (:func:`~structgen.core.memo.kept_by_id`)
_PACKED: dict[int, tuple[Rows, tuple[bytes, bytes, bytes]]] = {}


def trim(trans: list[dict[int, int]], accept: list[bool]) -> Dfa:
    """Drop states that cannot reach an accepting state (state 0 is kept, possibly empty)."""
    rows, acc = trim_rows(grouped(trans), accept)
    return ungrouped(rows), acc


def minimize(trans: list[dict[int, int]], accept: list[bool]) -> Dfa:
    """Moore partition refinement; state 0 stays the start state (see :func:`minimize_rows`)."""
    rows, acc = minimize_rows(grouped(trans), accept)
    return ungrouped(rows), acc


def as_fsm(trans: list[dict[int, int]], accept: list[bool]) -> Fsm:
    """The tables as an IR :class:`Fsm` node (byte classes per target)."""
    return fsm_of_rows(grouped(trans), accept)


# A DFA's rows grouped by target: ``rows[q]`` lists ``(bytes, target)``, one pair per target,
# the bytes a 256-bit mask (bit ``b`` set: byte ``b``). Exploring, trimming and minimizing touch
# a group per edge instead of a byte, and a product's step is an ``&`` of two ints (frozensets
# cost a hash and an element-wise compare per use): the Lark lexer builds each token's product
# with the union of all terminals this way.
Rows = list[list[tuple[int, int]]]
_byte, _target = itemgetter(0), itemgetter(1)
_BIT = [1 << b for b in range(256)]
_BITS_OF_BYTE = [tuple(j for j in range(8) if v >> j & 1) for v in range(256)]


def mask_of(values) -> int:
    """The mask of distinct byte values. ``mask_of([97, 98]) == 0b11 << 97``"""
    return sum(map(_BIT.__getitem__, values))


def mask_of_ranges(ranges) -> int:
    """The mask of inclusive ``(lo, hi)`` byte ranges (the inverse of :func:`ranges_of`)."""
    m = 0
    for lo, hi in ranges:
        m |= ((1 << (hi - lo + 1)) - 1) << lo
    return m


def members(mask: int) -> list[int]:
    """The bytes of a mask, ascending (the inverse of :func:`mask_of`).

    >>> members(mask_of([99, 0, 255, 97]))
    [0, 97, 99, 255]
    """
    if not mask & (mask - 1):  # none or one
        return [mask.bit_length() - 1] if mask else []
    out: list[int] = []
    for i, v in enumerate(mask.to_bytes(32, "little")):
        if v:
            base = 8 * i
            out += [base + j for j in _BITS_OF_BYTE[v]]
    return out


def ranges_of(mask: int) -> tuple[tuple[int, int], ...]:
    """The runs of a mask as inclusive ``(lo, hi)`` ranges. ``ranges_of(mask_of([1, 2, 3, 7]))``
    is ``((1, 3), (7, 7))``."""
    out = []
    while mask:
        lo = (mask & -mask).bit_length() - 1
        run = mask >> lo
        n = (run ^ (run + 1)).bit_length() - 1  # the run's length: its trailing ones
        out.append((lo, lo + n - 1))
        mask &= ~(((1 << n) - 1) << lo)
    return tuple(out)


def grouped(trans: list[dict[int, int]]) -> Rows:
    """Each row's bytes gathered per target, as a mask.

    >>> grouped([{97: 1, 98: 1, 99: 0}, {}]) == [[(mask_of([99]), 0), (mask_of([97, 98]), 1)], []]
    True
    """
    if kernel_available():  # the same rows, 5-10x faster (tests/test_dfa_kernel.py compares)
        return _kernel.grouped(trans, False)
    return grouped_py(trans)


def grouped_py(trans: list[dict[int, int]]) -> Rows:
    """:func:`grouped` in Python: the reference the kernel is tested against."""
    out: Rows = []
    for row in trans:
        targets = set(row.values())
        if len(targets) == 1:  # an identifier's or a string's inside: one class, no byte loop
            (t,) = targets
            out.append([(mask_of(row), t)])
            continue
        # sorted by target, then each run's bytes summed: the loops run in C
        out.append([(mask_of(map(_byte, pairs)), t)
                    for t, pairs in groupby(sorted(row.items(), key=_target), key=_target)])
    return out


def ungrouped(rows: Rows) -> list[dict[int, int]]:
    """The per-byte tables of grouped rows (the inverse of :func:`grouped`)."""
    return [{b: t for bs, t in row for b in members(bs)} for row in rows]


def trim_rows(rows: Rows, accept: list[bool]) -> tuple[Rows, list[bool]]:
    """:func:`trim` on grouped rows."""
    back: list[list[int]] = [[] for _ in rows]
    for q, row in enumerate(rows):
        for _, t in row:
            back[t].append(q)
    live = {q for q, ok in enumerate(accept) if ok}
    todo = list(live)
    while todo:
        for p in back[todo.pop()]:
            if p not in live:
                live.add(p)
                todo.append(p)
    keep = [0] + [q for q in range(1, len(rows)) if q in live]
    new = {q: i for i, q in enumerate(keep)}
    return ([[(bs, new[t]) for bs, t in rows[q] if t in live] for q in keep],
            [accept[q] for q in keep])


def minimize_rows(rows: Rows, accept: list[bool]) -> tuple[Rows, list[bool]]:
    """Moore partition refinement on grouped rows; state 0 stays the start state.

    Byte sets are interned to ids, so a signature costs the number of groups, not 256 bytes.
    Each round re-signs only the states with a successor that changed block in the round
    before (the others' signatures are unchanged), so a trie or a length counter, whose
    rounds are as many as its depth, costs about one visit per state and edge, not one per
    state and round. Two states whose rows split their bytes differently over equivalent
    targets may stay apart (the result is then not quite minimal, never wrong).
    """
    ids: dict[int, int] = {}  # masks to small ids: shorter signatures
    groups = [[(ids.setdefault(bs, len(ids)), t) for bs, t in row] for row in rows]
    preds: list[list[int]] = [[] for _ in rows]
    for q, row_groups in enumerate(groups):
        for _, t in row_groups:
            preds[t].append(q)
    block = [1 if a else 0 for a in accept]
    size = {0: block.count(0), 1: block.count(1)}
    # Every member of a block has its block's signature, except the states re-signed this round.
    signature: dict[int, tuple] = {}
    dirty: "range | set[int]" = range(len(rows))
    visits = 0
    while dirty:
        visits += len(dirty)
        affordable(visits // 8)  # a unit per 8 state visits: stop a huge refinement early
        by_block: dict[int, dict[tuple, list[int]]] = {}
        for q in dirty:
            sig = tuple(sorted((k, block[t]) for k, t in groups[q]))
            by_block.setdefault(block[q], {}).setdefault(sig, []).append(q)
        moved: list[int] = []
        for b, parts in by_block.items():
            if sum(map(len, parts.values())) == size[b]:  # all re-signed: the first part keeps b
                signature[b] = next(iter(parts))
            kept = signature.get(b)
            for sig, part in parts.items():
                if sig == kept:
                    continue
                nb = len(size)  # a new block: only where b really splits, so at most n of them
                size[nb] = len(part)
                size[b] -= len(part)
                signature[nb] = sig
                for q in part:
                    block[q] = nb
                moved += part
        dirty = {p for q in moved for p in preds[q]}
    # renumber so that the start state's block is 0
    order: dict[int, int] = {block[0]: 0}
    for q in range(len(rows)):
        order.setdefault(block[q], len(order))
    n = len(order)
    out: Rows = [[] for _ in range(n)]
    acc = [False] * n
    done = [False] * n
    for q, row in enumerate(rows):
        k = order[block[q]]
        if done[k]:
            continue
        done[k] = True
        out[k] = _merged_row((bs, order[block[t]]) for bs, t in row)  # equivalent targets merge
        acc[k] = accept[q]
    return out, acc


def fsm_of_rows(rows: Rows, accept: list[bool]) -> Fsm:
    """Grouped rows as an IR :class:`Fsm` node (each row's edges in byte order)."""
    edges = []
    for row in rows:
        if len(row) == 1:
            edges.append(((_byte_class(row[0][0])[1], row[0][1]),))
            continue
        # a row's classes are disjoint: ordered by their lowest byte, never by the class itself
        edges.append(tuple((cls, t) for (_, cls), t in sorted((_byte_class(bs), t) for bs, t in row)))
    return Fsm(_untracked(tuple(edges)), frozenset(q for q, a in enumerate(accept) if a))


def _byte_class(mask: int) -> tuple[int, ByteClass]:
    """``(lowest byte + 1, the ByteClass)`` of a mask, made once per process: the Lark lexer
    turns ~10,000 edges into IR per SQL compile, over a few hundred distinct byte sets."""
    got = _CLASSES.get(mask)
    if got is None:
        if len(_CLASSES) > 65_536:
            _CLASSES.clear()
        got = _CLASSES[mask] = ((mask & -mask).bit_length(), ByteClass(ranges_of(mask)))
    return got


_CLASSES: dict[int, tuple[int, ByteClass]] = {}


def _class_of_mask(mask: int) -> ByteClass:
    return _byte_class(mask)[1]
