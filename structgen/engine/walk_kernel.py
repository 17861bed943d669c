"""The trie walk of :mod:`structgen.engine.masks`, compiled: numbered stack sets, rows of steps.

Why a compiled loop: a rule state's facts come from walking the sorted token index from that
state, one step per trie node. In Python each node costs about a microsecond (the recursion, the
memo lookups, reporting an escape), and a cold parse state of a SQL or C-like grammar walks some
10^5 nodes, most of them under identifier-like tokens, where almost every node is a place the
rule may end (an escape). That loop is what made cold masks cost hundreds of milliseconds.

The compiled walk (``compiled_walk.c``, built by pip at install with the machine's C compiler)
does not step the grammar itself. Stack sets are numbered here (:class:`SetRows`), and each
number has a row: for every byte, the number of the set after it and the code of the escape
markers it reached. An entry is filled, by Python, the first time a walk needs it, so the
grammar is only ever stepped where a walk goes, and each step once per grammar. The kernel
returns the same keys and escapes as :func:`structgen.engine.masks.walk_keys`; where the
extension is not built (no compiler) or ``STRUCTGEN_WALK_KERNEL=0``, that Python walk runs
instead.

A lexer token's state met at a node with many keys below is summarized there, once per grammar
(:attr:`FrameRows.summaries`): what it reads alone, and the few escapes a caller could go on
from; later walks reuse that under any caller (``compiled_walk.c`` says why it is exact).
``STRUCTGEN_WALK_SUMMARIES=0`` walks every token again instead.

Example
-------
>>> from structgen.engine.compiler import Compiler
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([b"a", b"ab", b"b", b"ba", None], eos_ids=[4])
>>> sm = Compiler(vocab, disk_cache=False).grammar_file('start: "ab"+').matcher().machine
>>> rows = SetRows(sm, escaping=False)
>>> if kernel_built():  # the tokens that read as a prefix of "abab..."
...     keys, escapes = walk_index(vocab.index, rows, sm.initial())
...     print([vocab.index.keys[i] for i in keys.tolist()])
... else:
...     print([b"a", b"ab"])
[b'a', b'ab']
"""

from __future__ import annotations

import os
import threading
from array import array
from functools import lru_cache

import numpy as np

from structgen.engine.pda import ESCAPE, GUARD, StackMachine, StackSet, frozen_ints
from structgen.engine.vocab import TokenIndex, ids_to_mask

try:
    from structgen.engine import compiled_walk as _kernel  # type: ignore[attr-defined]
except ImportError:  # not built: no C compiler at install
    _kernel = None

__all__ = ["SetRows", "FrameRows", "kernel_built", "kernel_available", "walk_index", "walk_crossings",
           "crossing_keys"]

#: The ``compiled_walk.c`` this module speaks to (``KERNEL_VERSION`` there); an extension left
#: from another version is not used.
KERNEL_VERSION = 6

_DEAD, _UNKNOWN = -1, -2  # row entries as compiled_walk.c reads them
_DEAD_ROW = array("i", [_DEAD] * 256 + [0] * 256)


def kernel_built() -> bool:
    """Whether the compiled walk was built at install (and is the version this module speaks to)."""
    return _kernel is not None and getattr(_kernel, "VERSION", None) == KERNEL_VERSION


def kernel_available() -> bool:
    """Whether the compiled walk is built and switched on (``STRUCTGEN_WALK_KERNEL=0`` turns it off)."""
    return kernel_built() and os.environ.get("STRUCTGEN_WALK_KERNEL", "1") != "0"


class SetRows:
    """A grammar's stack sets, numbered, each with its row of steps (filled when first reached).

    With ``escaping``, escape markers reached by a step are taken out of the next set and named
    by a code instead (:attr:`markers` ``[code]`` is the set of them), as
    :func:`~structgen.engine.masks.walk_keys` reports and drops them; without, they stay in the
    sets like any stack.
    """

    def __init__(self, machine: StackMachine, *, escaping: bool, grouped: bool = False) -> None:
        self.sm = machine
        self.escaping = escaping
        self.grouped = grouped
        #: per set whose bytes fall in groups: (each byte's group number, the groups' bytes)
        self._groups: dict[int, tuple[bytes, list[bytes]]] = {}
        self.sets: list[StackSet] = []
        self.rows: list[bytearray | None] = []  # the kernel reads these; None until first reached
        self.markers: list[frozenset[int]] = [frozenset()]  # code 0: none
        self._numbers: dict[StackSet, int] = {}
        self._codes: dict[frozenset[int], int] = {frozenset(): 0}
        self._lock = threading.Lock()  # numbering appends to three lists together

    def number(self, stacks: StackSet) -> int:
        got = self._numbers.get(stacks)
        if got is None:
            with self._lock:
                got = self._numbers.get(stacks)
                if got is None:
                    got = self._numbered(stacks)
        return got

    def _numbered(self, stacks: StackSet) -> int:
        """The next number, given to ``stacks`` (the caller holds the lock, and found it new)."""
        got = len(self.sets)
        self.sets.append(stacks)
        self.rows.append(None)  # before the number is known: the kernel may read it
        self._numbers[stacks] = got
        return got

    def code_of(self, markers: frozenset[int]) -> int:
        """The code naming this set of escape markers (:attr:`markers` ``[code]``)."""
        return self._interned(self._codes, self.markers, markers)

    def _interned(self, ids: dict, values: list, value, beside: tuple[list, object] | None = None) -> int:
        """``value``'s index in ``values``, appended (and recorded in ``ids``) when new; with
        ``beside`` ``(other list, item)``, the item is appended to the other list first, at the
        same index, for the kernel reads it once it meets the index."""
        got = ids.get(value)
        if got is None:
            with self._lock:
                got = ids.get(value)
                if got is None:
                    got = len(values)
                    if beside is not None:
                        beside[0].append(beside[1])
                    values.append(value)
                    ids[value] = got
        return got

    def _escapes_apart(self, stacks: StackSet) -> tuple[StackSet, int]:
        """``stacks`` without its escape markers, and the code of those markers (0: none)."""
        found = stacks.intersection(self.sm.escapes)  # by the markers, a few, not the stacks, many
        return (frozen_ints(stacks - found), self.code_of(found)) if found else (stacks, 0)

    def _entry(self, stacks: StackSet) -> int:
        """The row entry for a step into ``stacks`` (no markers; not empty)."""
        return self.number(stacks)

    def fill(self, k: int, byte: int) -> None:
        """Make row ``k`` (``byte == -1``) or step set ``k`` by ``byte`` into it (the kernel calls
        this; two threads may both step one entry, equally, but a row is made once).

        With :attr:`grouped`, a step fills the entries of every byte that steps the set alike
        (:meth:`~structgen.engine.pda.StackMachine.byte_groups`): inside a comment, one step
        in Python serves the 127 ASCII bytes the walk meets there, instead of one step each."""
        sm, stacks = self.sm, self.sets[k]
        if byte < 0:
            row = array("i", _DEAD_ROW)
            readable = sm.next_bytes(stacks)
            for b in readable:
                row[b] = _UNKNOWN
            groups = sm.byte_groups(stacks) if self.grouped else None
            with self._lock:
                if self.rows[k] is None:
                    if groups is not None and len(groups) < len(readable):  # some bytes step alike
                        at = bytearray(256)
                        for g, group in enumerate(groups):
                            for b in group:
                                at[b] = g
                        self._groups[k] = (bytes(at), [bytes(group) for group in groups])
                    self.rows[k] = bytearray(row.tobytes())
            return
        nxt, code = sm.step_set(stacks, byte), 0
        if self.escaping:
            nxt, code = self._escapes_apart(nxt)
        entry = self._entry(nxt) if nxt else _DEAD
        view = memoryview(self.rows[k]).cast("i")  # type: ignore[arg-type]
        grouping = self._groups.get(k)
        for b in grouping[1][grouping[0][byte]] if grouping is not None else (byte,):
            view[256 + b] = code  # the code first: the kernel reads it once the step is known
            view[b] = entry


_SPLIT = -3  # a row entry _SPLIT - c: configuration c (compiled_walk.c's SPLIT)
#: Leaf rules up to this many states are stepped from tables; up to ``_EAGER_LEAF_STATES``, all
#: their rows are made at once (a 2 KiB row a state; SQL's name token has 436), above it each row
#: when a walk first needs it (a pattern's 3,280-state string: 50 ms and 6.7 MB at once)
_LEAF_STATES = 4096
_EAGER_LEAF_STATES = 1024
#: A frame of a rule with calls gets its row from the rule's steps where it reads at most this
#: many bytes (a key's character: two); else its steps are made by byte, as the walk meets them
_TABLE_ROW_BYTES = 16


class FrameRows(SetRows):
    """:class:`SetRows` for the compiled walk frame by frame (``walk_frames`` in
    ``compiled_walk.c``): a step's row entry is a *configuration*, the set after the step split
    into frame sets, each with the parent it was called from (see the C file). A set's rows are
    then shared by every parent its frames are walked under: a lexer token's states, stepped
    once, serve the token wherever the grammar calls it. Always escaping.
    """

    def __init__(self, machine: StackMachine) -> None:
        super().__init__(machine, escaping=True, grouped=True)
        self.configs: list[bytes] = []  # the kernel reads these: int64 pairs (set, parent)
        self._config_ids: dict[bytes, int] = {}
        self._rebased: dict[tuple[int, int], int] = {}
        self._conts: dict[tuple[int, int], int] = {}
        self._leaf_nums: dict[int, list[int]] = {}
        #: per marker code, the bytes all its markers forbid next (32-byte bit sets; the kernel
        #: reads these to find crossings during the walk): code 0, no marker, lets nothing on
        self.blocked: list[bytes] = [b"\xff" * 32]
        #: rules stepped from their table: plain automata with no calls (lexer tokens), whose
        #: states are sets of their own; and plain rules with calls, whose single frames on the
        #: escape get their rows from the rule's steps (:meth:`_table_row`)
        plain = [not (r.counted or r.unordered is not None) for r in machine.rules]
        self._leafy = [p and not any(r.calls) and len(r.trans) <= _LEAF_STATES
                       for p, r in zip(plain, machine.rules)]
        self._tabled = [p and any(r.calls) for p, r in zip(plain, machine.rules)]
        self._eager = [leaf and len(r.trans) <= _EAGER_LEAF_STATES for leaf, r in zip(self._leafy, machine.rules)]
        self._table_sets: dict[int, tuple[int, dict[int, int]]] = {}  # per rule: code, set of each state
        #: the kernel reads these: ``leafy[k]`` where set ``k`` is a token's state alone, and
        #: ``summaries`` of what such a set reads below a node, made by the first walk that
        #: meets it there (``compiled_walk.c``, "token summaries")
        self.leafy = bytearray()
        self.summaries: dict[tuple[int, int, int], tuple[bytes, bytes]] = {}
        #: ``STRUCTGEN_WALK_SUMMARIES=0``: every walk reads its tokens again (read here, once:
        #: reading the environment costs a few microseconds, as much as a small walk's Python)
        self.summarizing = os.environ.get("STRUCTGEN_WALK_SUMMARIES", "1") != "0"

    def _entry(self, stacks: StackSet) -> int:
        """The row entry for ``stacks``: its set, or ``_SPLIT -`` the configuration it splits into.

        A frame of a *leaf* rule (a lexer token: no calls, no counts) is always a component of
        its own, its state alone under its parent, whose rows are made for all the rule's states
        at once (:meth:`_leaf_set`): the kernel then steps a token without asking Python at all,
        under however many parents. Of the other frames, where all that sit on a call (their
        parent is not the escape) sit on the same one, those frames are one set alone under that
        parent, and the rest (frames on the escape, and guards, which read through their parent)
        another; any other set stays whole: split by parents, it would be stepped once per
        parent at every byte."""
        frames, leafy = self.sm.frames, self._leafy
        pairs: list[tuple[int, int]] = []
        rest: list[int] = []
        for s in stacks:
            rule_i, state, up = frames[s]
            k = self._leaf_set(rule_i, state) if rule_i >= 0 and leafy[rule_i] else _DEAD  # type: ignore[arg-type]
            if k >= 0:
                pairs.append((k, up))
            else:  # not a token, or (never in a closed set) a token state that reads nothing
                rest.append(s)
        if rest:
            pairs += self._rest_pairs(stacks if not pairs else frozen_ints(rest))
        if len(pairs) == 1 and pairs[0][1] == ESCAPE:
            return pairs[0][0]  # one set, under the parent the stepped set had
        return _SPLIT - self._interned(self._config_ids, self.configs, _packed(pairs))

    def _rest_pairs(self, stacks: StackSet) -> list[tuple[int, int]]:
        """``stacks`` (no token frames) as (set, parent) pairs: whole, or split as :meth:`_entry`
        says."""
        sm = self.sm
        frames = sm.frames
        plain: list[int] = []
        called: list[int] = []
        parent = None
        for s in stacks:
            rule_i, _, up = frames[s]
            if rule_i == GUARD or up == ESCAPE:
                plain.append(s)
            elif parent is None or up == parent:
                parent = up
                called.append(s)
            else:  # a second parent: keep the set whole
                called = []
                break
        if called:  # split only where the frames' own rows exist: there, it shares them
            alone = self._numbers.get(frozen_ints([sm.isolated(s) for s in called]))
            if alone is not None and self.rows[alone] is not None:
                out = [(alone, parent)]
                if plain:
                    out.append((self.number(frozen_ints(plain)), ESCAPE))
                return out
        return [(self.number(stacks), ESCAPE)]

    def code_of(self, markers: frozenset[int]) -> int:
        """:meth:`SetRows.code_of`, with :attr:`blocked` kept beside :attr:`markers`."""
        got = self._codes.get(markers)
        if got is None:
            common: frozenset[int] | None = None
            for x in markers:
                forbidden = self.sm.escapes[x]
                common = forbidden if common is None else common & forbidden
            bits = _bits(range(256) if common is None else common)
            got = self._interned(self._codes, self.markers, markers, beside=(self.blocked, bits))
        return got

    def fill(self, k: int, byte: int) -> None:
        """:meth:`SetRows.fill`, where a leaf rule's state alone has its rows made for every
        state of the rule at once, and another plain rule's frame alone its row from the
        rule's steps (:meth:`_table_row`)."""
        if byte < 0 and self.rows[k] is None and len(self.sets[k]) == 1:
            (s,) = self.sets[k]
            rule_i, state, up = self.sm.frames[s]
            if up == ESCAPE and rule_i >= 0:
                if self._eager[rule_i]:
                    self._leaf_set(rule_i, state)  # type: ignore[arg-type]
                elif self._leafy[rule_i] or self._tabled[rule_i]:
                    self._table_row(k, rule_i, state)  # type: ignore[arg-type]
                if self.rows[k] is not None:
                    return
        super().fill(k, byte)

    def _table_row(self, k: int, rule_i: int, q: int) -> None:
        """Make row ``k``, the set of frame ``(rule_i, q)`` alone on the escape, from the rule's
        steps, where ``q`` reads a few bytes: a byte into a state that calls nothing steps to
        that state's frame alone (and the rule's escape marker where it accepts), as a leaf
        rule's; a byte into a state that calls is left unknown, for :meth:`fill` to step. A
        walk along a key (whose states call nothing but after a backslash) then asks Python
        once per state, not per state and byte; the sets it numbers are the ones the steps
        would (the same frame alone). A large leaf rule's rows are made here too, one state at
        a time, whatever it reads."""
        rule = self.sm.rules[rule_i]
        trans, calls, accept = rule.trans, rule.calls, rule.accept
        reads = trans[q]
        if not reads or (len(reads) > _TABLE_ROW_BYTES and not self._leafy[rule_i]):
            return  # many bytes: stepped by fill, only those a walk meets, in groups
        code, sets = self._rule_sets(rule_i)
        row = array("i", _DEAD_ROW)
        for b, t in reads.items():
            if calls[t]:
                row[b] = _UNKNOWN
                continue
            if trans[t]:
                k_t = sets.get(t)
                row[b] = k_t if k_t is not None else self._single_set(rule_i, t)
            if accept[t]:
                row[256 + b] = code
        with self._lock:
            if self.rows[k] is None:
                self.rows[k] = bytearray(row.tobytes())

    def _rule_sets(self, rule_i: int) -> tuple[int, dict[int, int]]:
        """The code of the rule's escape marker, and the sets of its states alone numbered so far."""
        got = self._table_sets.get(rule_i)
        if got is None:
            sm, rule = self.sm, self.sm.rules[rule_i]
            marker = ESCAPE if rule.lookahead is None else sm.guard(rule.lookahead, ESCAPE)
            got = self._table_sets.setdefault(rule_i, (self.code_of(frozenset((marker,))), {}))
        return got

    def _single_set(self, rule_i: int, q: int) -> int:
        """The number of the set of frame ``(rule_i, q)`` alone on the escape (a leaf rule's is
        marked in :attr:`leafy` before the number is returned); ``_DEAD`` for a leaf state that
        reads nothing, as :meth:`_leaf_rows` gives."""
        sets = self._rule_sets(rule_i)[1]
        got = sets.get(q)
        if got is None:
            leaf = self._leafy[rule_i]
            if leaf and not self.sm.rules[rule_i].trans[q]:
                return _DEAD
            got = self.number(frozen_ints((self.sm.intern(rule_i, q, ESCAPE),)))
            if leaf:
                with self._lock:
                    self._mark_leafy((got,))
            sets[q] = got
        return got

    def _mark_leafy(self, ks: "list[int] | tuple[int, ...]") -> None:
        """Mark sets ``ks`` in :attr:`leafy` (the caller holds the lock)."""
        top = max(ks)
        if top >= len(self.leafy):
            self.leafy.extend(bytes(top + 1 - len(self.leafy)))
        for k in ks:
            self.leafy[k] = 1

    def _leaf_set(self, rule_i: int, q: int) -> int:
        """The set number of leaf rule ``rule_i``'s state ``q`` alone on the escape; the first
        call for a rule numbers all its states and makes their rows in one kernel call (a
        state's step is the next state alone, and the rule's escape marker where it accepts);
        a large rule's are numbered one by one, and their rows made as walks reach them."""
        if not self._eager[rule_i]:
            return self._single_set(rule_i, q)
        nums = self._leaf_nums.get(rule_i)
        if nums is None:
            nums = self._leaf_nums.setdefault(rule_i, self._leaf_rows(rule_i))
        return nums[q]

    def _leaf_rows(self, rule_i: int) -> list[int]:
        sm = self.sm
        rule = sm.rules[rule_i]
        code = self._rule_sets(rule_i)[0]
        live = [q for q, row in enumerate(rule.trans) if row]
        if not live:  # no state reads a byte: no set of the rule is ever stepped
            return [_DEAD] * len(rule.trans)
        intern = sm.intern
        sets = [frozen_ints((intern(rule_i, q, ESCAPE),)) for q in live]
        nums = [_DEAD] * len(rule.trans)
        for q, k in zip(live, self._number_all(sets)):
            nums[q] = k
        rows = _kernel.leaf_rows(rule.trans, rule.accept, nums, code)
        with self._lock:
            for q, row in zip(live, rows):
                if self.rows[nums[q]] is None:
                    self.rows[nums[q]] = row
            self._mark_leafy([nums[q] for q in live])
        return nums

    def _number_all(self, sets: list[StackSet]) -> list[int]:
        """:meth:`number` of each of ``sets``: under one lock, the new ones appended together."""
        with self._lock:
            got = self._numbers.get
            return [k if (k := got(s)) is not None else self._numbered(s) for s in sets]

    def rebase(self, sid: int, parent: int) -> int:
        """Stack ``sid`` (its chain ending at the escape) with ``parent`` in the escape's place."""
        got = self._rebased.get((sid, parent))
        if got is None:
            sm, below, x = self.sm, [], sid
            while x > ESCAPE:
                below.append(sm.frames[x])
                x = sm.frames[x][2]
            if x != ESCAPE:
                raise ValueError(f"stack {sid} does not end at the escape")
            got = parent
            for rule_i, state, _ in reversed(below):
                got = sm.intern(rule_i, state, got)
            self._rebased[(sid, parent)] = got
        return got

    def cont(self, code: int, parent: int) -> int:
        """Where frames that returned to the escape through the markers of ``code`` go on when
        the escape is ``parent``: ``entry << 32 | code``, the entry as in a row (read under the
        escape; ``-1``, dead, when nothing goes on) and the code of what escapes the walk there."""
        got = self._conts.get((code, parent))
        if got is not None:
            return got
        sm = self.sm
        out: set[int] = set()
        for x in self.markers[code]:
            out |= sm.closure(parent if x == ESCAPE else sm.guard(sm.escapes[x], parent))
        rest, escaped = self._escapes_apart(frozen_ints(out))
        got = (self._entry(rest) if rest else _DEAD) << 32 | escaped  # the sign stays the entry's
        self._conts[(code, parent)] = got
        return got


def _packed(out: list[tuple[int, int]]) -> bytes:
    """A configuration as compiled_walk.c reads it: its (set, parent) pairs, sorted, as int64."""
    return array("q", [x for entry in sorted(out) for x in entry]).tobytes()


def walk_index(index: TokenIndex, rows: SetRows, start: StackSet) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, escapes)``: the numbers of the index keys fully readable from ``start``, and the
    escapes met on the way as rows ``(first key under the node, depth, marker code)``, the code
    negated where the walk went on below the node (a key ending there is among ``keys``).
    With :class:`FrameRows`, a node may report several codes (one per kind of return met)."""
    _require_kernel()
    if not index.keys:
        return np.zeros(0, np.int64), np.zeros((0, 3), np.int64)
    if isinstance(rows, FrameRows):
        inside, events = _kernel.walk_frames(*index.tables(), rows.number(start), rows.rows,
                                             rows.fill, rows, rows.configs)
    else:
        inside, events = _kernel.walk(*index.tables(), rows.number(start), rows.rows, rows.fill,
                                      rows.escaping)
    return np.frombuffer(inside, dtype=np.int64), np.frombuffer(events, dtype=np.int64).reshape(-1, 3)


def walk_crossings(index: TokenIndex, rows: FrameRows, start: StackSet,
                   follow: frozenset[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, crossings)``: :func:`walk_index`'s keys, and instead of its escapes, what
    :func:`crossing_keys` makes of them, found during the walk: rows ``(key, depth)`` of the keys
    that may go on past the walk's escape at depth ``depth`` (ending there, the walk stopped;
    or with a next byte in ``follow`` that not all the escape's markers forbid)."""
    _require_kernel()
    if not index.keys:
        return np.zeros(0, np.int64), np.zeros((0, 2), np.int64)
    inside, pairs = _kernel.walk_frames(*index.tables(), rows.number(start), rows.rows, rows.fill, rows,
                                        rows.configs, _follow_bits(follow), rows.blocked,
                                        rows.summaries if rows.summarizing else None, rows.leafy)
    return np.frombuffer(inside, dtype=np.int64), np.frombuffer(pairs, dtype=np.int64).reshape(-1, 2)


@lru_cache(maxsize=1024)
def _follow_bits(follow: frozenset[int]) -> bytes:
    """:func:`_bits` of a rule's follow bytes, kept: every walk from the rule's states asks."""
    return _bits(follow)


def _bits(byte_set) -> bytes:
    """A set of bytes as 32 bytes, bit ``b & 7`` of byte ``b >> 3`` (a 256-token mask)."""
    return ids_to_mask(np.fromiter(byte_set, dtype=np.int64), 8).tobytes()


def crossing_keys(index: TokenIndex, escapes: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Rows ``(key, depth)``: for each escape ``(i, d, code)``, the key ending at node
    ``keys[i][:d]`` (unless ``code < 0``: it is inside) and every key under a child whose byte is
    in ``allowed[abs(code)]`` (a ``(codes, 32)`` uint8 bit table): the tokens that may go on past
    the rule's end there."""
    _require_kernel()
    if not escapes.size:
        return np.zeros((0, 2), np.int64)
    out = _kernel.crossings(*index.tables(), np.ascontiguousarray(escapes, dtype=np.int64),
                            np.ascontiguousarray(allowed, dtype=np.uint8))
    return np.frombuffer(out, dtype=np.int64).reshape(-1, 2)


def _require_kernel() -> None:
    if not kernel_built():
        raise RuntimeError("structgen's compiled walk (structgen/engine/compiled_walk.c) is not built")
