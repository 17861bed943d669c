"""Exact token masks from a set of stacks, built from memoized per-rule-state facts.

For one stack, the tokens it accepts split in two (the idea behind xgrammar's adaptive mask
cache, made exact here):

* **inside** tokens never return from the stack's top rule: they depend only on the top
  frame ``(rule, state)``, so they are computed once, by walking the sorted token index from that
  frame in isolation, and shared by every stack, every grammar and every schema that contains
  the same rule (a JSON string body, a number, whitespace) on the same vocabulary;
* **crossing** tokens return from the rule part-way through (``",`` ``"}`` ``]}``): the isolated
  walk records their *remainders* (the bytes after the return point), and only those few
  remainders are read by the real stack below, frame by frame: each frame reads them through
  the closure of its isolated self (memoized per frame) and hands what returns from it on to
  its parent, so nesting depth adds memo lookups, not walks.

The walk from a rule state runs compiled where the extension is built
(:mod:`structgen.engine.walk_kernel`).

The walk prunes a whole subtree of the token trie at the first byte no stack can read, and only
records a crossing where the next byte can follow the rule at all (its ``follow`` set), so the
isolated walk of a JSON string body keeps just the tokens that close the string.

Counted rules (string length bounds, bounded whitespace) store, per token, how many items it
starts: the mask for count ``c`` is the shared inside mask intersected with "starts at most
``max - c`` items", a per-count bitset; crossing remainders carry the item count at their return
point and are kept when ``min <= c + n <= max``. A guard (an object's defined keys excluded from
its extra keys) only restricts where a counted rule may end, so it filters crossing tokens and
never the shared inside mask. A counted rule whose item calls other rules (an array's
``, element``) is walked like a plain rule, its facts keyed by the *class* of its count (how far
the bounds are, capped at what one token can cross), so a 10,000-element bound costs a handful
of walks, not one per count.

Facts are shared through a bounded per-vocabulary cache (each grammar keeps the ones it uses),
and facts that were slow to compute are also kept on disk, keyed by vocabulary and rule, as
numbers only in a sealed entry (:mod:`structgen.engine.state_facts`: loading one can run no
code); ``STRUCTGEN_DISK_CACHE=0`` stops reading and writing them.

Threads: matchers of one grammar may ask for masks from several threads at once. Every memo
entry is a pure function of its key, so concurrent fillers store equal values; facts are
canonical per builder (the first stored is the one every thread goes on with), because crossing
hits (their rows, their bitmask) are memoized by the identity of the facts' remainders.

A set's mask is the union of its stacks' masks, memoized per set; end-of-sequence ids are set
exactly when the set holds ``ACCEPT``.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from pathlib import Path
from typing import Callable

import numpy as np

from structgen.core.depth import recursion_room
from structgen.engine import state_facts
from structgen.engine.disk_cache import cache_dir, disk_cache_enabled
from structgen.engine.pda import ACCEPT, ESCAPE, GUARD, StackMachine, StackSet, frozen_ints
from structgen.engine.state_facts import Remainders, StateFacts, record_crossing
from structgen.engine.vocab import TokenIndex, Vocabulary, ids_to_mask, prefix_range_end
from structgen.engine.walk_kernel import FrameRows, kernel_available, walk_crossings

__all__ = ["MaskBuilder", "walk_keys"]

#: State facts that took longer than this to compute are kept on disk (shared primitives:
#: JSON string bodies, numbers, whitespace), keyed by vocabulary and rule fingerprints.
_DISK_CACHE_AFTER_S = 0.05


def walk_keys(keys: list[bytes], start: StackSet, step_set: Callable[[StackSet, int], StackSet],
              next_bytes: Callable[[StackSet], "frozenset[int]"],
              on_escape: Callable[[int, int, "frozenset[int]"], None] | None = None,
              escapes: "dict[int, frozenset[int]] | None" = None,
              ends: Callable[[int, int], int] | None = None) -> list[int]:
    """Indices of the sorted ``keys`` fully readable from ``start``.

    Walks the implicit trie (keys sharing a prefix are contiguous): each trie node is stepped
    once and a dead node skips its whole subtree. Where the state can read only a few bytes,
    the walk jumps straight to those children by bisection instead of visiting every child.
    With ``on_escape``, a node reached with an escape marker in its set (``escapes``: marker id
    to the bytes that may not come next; default ``ESCAPE`` alone) is reported as
    ``on_escape(i, depth, forbidden)`` (``i`` is the first key below the node), once per marker,
    and the markers are dropped. ``ends(i, d)``, when given, is the subtree end of the node
    ``keys[i][:d]`` (:meth:`TokenIndex.subtree_end`), saving a bisection per child.
    """
    marks = escapes if escapes is not None else {ESCAPE: frozenset()}
    marked = marks.keys()  # a live view: stepping interns new escape markers into ``escapes``
    out: list[int] = []
    if not start or not keys:
        return out

    def escape(nxt: StackSet, i: int, d: int) -> StackSet:
        """Report the escape markers of ``nxt`` (reached at depth ``d`` under key ``i``) and drop them."""
        found = nxt.intersection(marks)  # by the markers, a few, not the stacks
        for x in found:
            on_escape(i, d, marks[x])  # type: ignore[misc]
        return nxt - found

    def visit(s: StackSet, lo: int, hi: int, d: int) -> None:
        # keys[lo:hi] share their first d bytes; s is the state after them.
        if hi - lo == 1:  # one key left: follow its bytes without a call per byte
            key = keys[lo]
            while len(key) > d:
                b = key[d]
                if b not in next_bytes(s):
                    return
                s = step_set(s, b)
                d += 1
                if on_escape is not None and not marked.isdisjoint(s):
                    s = escape(s, lo, d)
                if not s:
                    return
            out.append(lo)
            return
        if len(keys[lo]) == d:  # the key that is exactly the prefix sorts first
            out.append(lo)
            lo += 1
            if lo >= hi:
                return
        readable = next_bytes(s)
        if not readable:
            return
        if len(readable) * 4 < hi - lo:  # few bytes, many keys: jump to each child
            prefix = keys[lo][:d]
            children = []
            for b in sorted(readable):
                child = prefix + bytes((b,))
                a = bisect_left(keys, child, lo, hi)
                if a < hi and keys[a].startswith(child):
                    children.append((b, a, ends(a, d + 1) if ends else prefix_range_end(keys, child, a + 1, hi)))
        else:  # visit every child in order
            children = []
            i = lo
            while i < hi:
                b = keys[i][d]
                z = ends(i, d + 1) if ends else prefix_range_end(keys, keys[i][:d + 1], i + 1, hi)
                if b in readable:
                    children.append((b, i, z))
                i = z
        for b, a, z in children:
            nxt = step_set(s, b)
            if on_escape is not None and not marked.isdisjoint(nxt):
                nxt = escape(nxt, a, d + 1)
            if nxt:
                visit(nxt, a, z, d + 1)

    visit(start, 0, len(keys), 0)
    return out


class MaskBuilder:
    """Computes and memoizes token masks for one grammar's stack machine on one vocabulary."""

    def __init__(self, machine: StackMachine, vocab: Vocabulary) -> None:
        self.sm = machine
        self.vocab = vocab
        self.index: TokenIndex = vocab.index
        self._stack_masks: dict[int, np.ndarray] = {}
        self._set_masks: dict[StackSet, np.ndarray] = {}
        self._hits: dict[tuple[int, int], tuple[int, frozenset[int]]] = {}
        self._key_lists: dict[tuple[bytes, ...], tuple[bytes, ...]] = {}
        self._hit_rows: dict[tuple[int, frozenset[int]], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._hit_masks: dict[tuple[int, frozenset[int]], np.ndarray] = {}
        self._reads_memo: dict[tuple[int, int], frozenset[int]] = {}
        self._iso_reads: dict[tuple[int, int], tuple[frozenset[int], tuple[bytes, ...], list[tuple[int, ...]]]] = {}
        self._facts: dict[tuple, StateFacts] = {}  # what this grammar uses (the shared cache may forget)
        self._empty = np.zeros(vocab.words, dtype=np.uint32)
        self._token_reach: int | None = None
        self._rows = FrameRows(machine)  # the compiled walk's numbered stack sets
        self._compiled_walk = kernel_available()  # read once: the switch is an environment variable

    # ---------------------------------------------------------------- public

    def mask(self, stacks: StackSet) -> np.ndarray:
        """The bitmask of tokens legal from the closed set ``stacks``: read-only, because it is
        memoized and shared by every matcher of the grammar (and some arrays by every grammar on
        the vocabulary), so a caller that wrote into it would change what all of them allow."""
        got = self._set_masks.get(stacks)
        if got is None:
            parts = [self._stack_mask(sid) for sid in stacks]
            if not parts:
                got = self._empty
            elif len(parts) == 1:
                got = parts[0]
            else:  # in place: reduce would first copy every part into one 2-D array
                got = parts[0] | parts[1]
                for part in parts[2:]:
                    np.bitwise_or(got, part, out=got)
            got.flags.writeable = False
            self._set_masks[stacks] = got
        return got

    # ---------------------------------------------------------------- per stack

    def _stack_mask(self, sid: int) -> np.ndarray:
        got = self._stack_masks.get(sid)
        if got is not None:
            return got
        if sid == ACCEPT:
            got = self.vocab.eos_mask
        elif self.sm.frames[sid][0] == GUARD:  # what the stack below reads, but no forbidden first byte
            _, forbidden, parent = self.sm.frames[sid]
            got = self.mask(self.sm.closure(parent)) & ~self._first_byte_mask(forbidden)  # type: ignore[arg-type]
        else:
            rule_i, state, parent = self.sm.frames[sid]
            rule = self.sm.rules[rule_i]
            if rule.counted and not rule.item_calls:
                got = self._counted_stack_mask(rule_i, state, parent)  # type: ignore[arg-type]
            else:
                facts = self._plain_facts(sid)
                got = facts.inside
                # most states: no token returns from them (a key's start)
                crossing = self._crossing_mask(facts.crossing, parent) if facts.crossing.keys else None
                got = got | crossing if crossing is not None else got
        self._stack_masks[sid] = got
        return got

    def _first_byte_mask(self, first: frozenset[int]) -> np.ndarray:
        """Tokens whose first byte is in ``first`` (shared per vocabulary)."""
        cache, key = self.vocab.mask_cache, ("first bytes", first)
        got = cache.get(key)
        if got is None:
            keys = self.index.keys
            spans = []  # the keys that start with each byte: one span of the sorted keys
            for b in sorted(first):
                lo = bisect_left(keys, bytes((b,)))
                spans.append(np.arange(lo, prefix_range_end(keys, bytes((b,)), lo, len(keys))))
            # their token ids in numpy: an identifier's lookahead (63 bytes) is most of the vocabulary
            ids = self.index.token_ids(np.concatenate(spans)) if spans else np.zeros(0, dtype=np.int64)
            got = cache[key] = ids_to_mask(ids, self.vocab.words)
        return got

    def _counted_stack_mask(self, rule_i: int, state: tuple, parent: int) -> np.ndarray:
        rule = self.sm.rules[rule_i]
        count, q = state[0], state[1]
        guard = state[2] if rule.guard is not None else None
        facts = self._counted_facts(rule_i, q)
        room = None if rule.max is None else rule.max - count
        inside = self._inside_upto(facts, room)  # ending is what a guard restricts, not this
        lo, hi = rule.min - count, (None if rule.max is None else rule.max - count)

        def keep(tid: int, n: int, d: int) -> bool:
            return self._guard_allows_end(rule_i, q, guard, self.vocab.tokens[tid][:d])  # type: ignore

        crossing = self._crossing_ids(facts.crossing, parent, keep if guard is not None else None,
                                      counts=(lo, hi))
        return inside | ids_to_mask(crossing, self.vocab.words) if crossing.size else inside

    def _inside_upto(self, facts: StateFacts, room: int | None) -> np.ndarray:
        cache = self.vocab.mask_cache
        key = ("upto", facts.key, room)
        got = cache.get(key)
        if got is None:
            started = facts.inside
            ok = started >= 0 if room is None else (started >= 0) & (started <= room)
            got = np.packbits(np.concatenate([ok, np.zeros(self.vocab.words * 32 - ok.size, bool)]),
                              bitorder="little").view(np.uint32)
            cache[key] = got
        return got

    def _guard_allows_end(self, rule_i: int, q: int, guard: tuple, data: bytes) -> bool:
        """Whether the counted rule may end after reading ``data`` from item state ``q``."""
        rule = self.sm.rules[rule_i]
        g = guard
        for b in data:
            t = rule.trans[q][b]
            done = rule.accept[t]
            g = rule.guard.step(g, b, done)  # type: ignore[union-attr]
            q = 0 if done else t
        return not rule.guard.blocks_end(g)  # type: ignore[union-attr]

    def _crossing_ids(self, rems: Remainders, parent: int,
                      keep: Callable[[int, int, int], bool] | None = None,
                      counts: tuple[int, int | None] | None = None) -> np.ndarray:
        """Token ids whose remainder the stack below can read; ``counts`` bounds their item
        counts (counted rules) and ``keep`` filters what is left (guards)."""
        tids, ns, ds = self._crossing_hits(rems, parent)
        if counts is not None and tids.size:
            lo, hi = counts
            sel = ns >= lo if hi is None else (ns >= lo) & (ns <= hi)
            tids, ns, ds = tids[sel], ns[sel], ds[sel]
        if keep is not None and tids.size:
            ok = [keep(int(t), int(n), int(d)) for t, n, d in zip(tids, ns, ds)]
            tids = tids[np.array(ok, dtype=bool)]
        return tids

    def _crossing_mask(self, rems: Remainders, parent: int) -> "np.ndarray | None":
        """A plain rule's crossing tokens as a bitmask (None: none), once per distinct hit."""
        hit = self._hit(rems, parent)
        got = self._hit_masks.get(hit)
        if got is None:
            tids = self._hit_rows_of(rems, hit)[0]
            if tids.size:
                got = self._hit_masks[hit] = ids_to_mask(tids, self.vocab.words)
        return got

    def _crossing_hits(self, rems: Remainders, parent: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(token ids, item counts, offsets) of the crossing tokens the stack below accepts."""
        return self._hit_rows_of(rems, self._hit(rems, parent))

    def _hit(self, rems: Remainders, parent: int) -> tuple[int, frozenset[int]]:
        """``(id(rems), the indices of the remainders the stack below reads)``: many parents read
        the same remainders alike (nested blocks), so their rows and masks are made once per hit."""
        key = (id(rems), parent)  # rems stays alive: the builder's facts memo holds it
        got = self._hits.get(key)
        if got is None:
            hits: frozenset[int] = frozenset()
            if rems.keys:
                with recursion_room():  # a rest may cross as many frames as the stack is deep
                    hits = self._reads(self._key_list(rems.keys), parent)
            got = self._hits[key] = (id(rems), hits)
        return got

    def _hit_rows_of(self, rems: Remainders,
                     hit: tuple[int, frozenset[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = self._hit_rows.get(hit)
        if got is None:
            arr = rems.rows(sorted(hit[1]))
            got = self._hit_rows[hit] = (arr[:, 0], arr[:, 1], arr[:, 2])
        return got

    # ---------------------------------------------------------------- remainders, frame by frame

    def _key_list(self, keys: "list[bytes] | tuple[bytes, ...]") -> tuple[bytes, ...]:
        """The one tuple of these sorted distinct keys (memos below are keyed by its identity)."""
        t = tuple(keys)
        return self._key_lists.setdefault(t, t)

    def _reads(self, keys: tuple[bytes, ...], sid: int) -> frozenset[int]:
        """Indices of the sorted distinct ``keys`` that the closure of stack ``sid`` reads whole.

        Frame by frame, never building the closure of ``sid`` itself: the keys read by the
        closure of the *isolated* top frame (its calls pushed, its parent an escape), which
        depends on the frame only, and the rests of those that return from it, read (again
        this way) by the parent. So a remainder such as ``"};"`` costs one walk per frame, however
        deep the stacks it is read on (nested blocks, nested arrays).
        """
        memo = (id(keys), sid)  # keys stays alive: _key_lists holds it
        got = self._reads_memo.get(memo)
        if got is not None:
            return got
        sm = self.sm
        rule_i, state, parent = sm.frames[sid] if sid > ESCAPE else (-1, None, -1)
        got = frozen_ints(())
        if rule_i == GUARD and parent > ESCAPE:  # what the stack below reads, no forbidden first byte
            got = frozen_ints(k for k in self._reads(keys, parent) if not keys[k] or keys[k][0] not in state)  # type: ignore[operator]
        elif rule_i >= 0:
            got, rest, owners = self._isolated_reads(keys, sid)
            read = self._reads(rest, parent) if rest else ()
            if read:  # the keys whose rest the parent reads
                got = frozen_ints(got.union(*[owners[j] for j in read]))
        elif sid == ACCEPT and keys and not keys[0]:  # the end: the empty key only
            got = frozen_ints((0,))
        self._reads_memo[memo] = got
        return got

    def _isolated_reads(self, keys: tuple[bytes, ...],
                        sid: int) -> tuple[frozenset[int], tuple[bytes, ...], tuple[tuple[int, ...], ...]]:
        """``(inside, rests, owners)`` of ``keys`` from the closure of stack ``sid``'s isolated
        top frame: the keys read without returning from it, and the sorted distinct rests of the
        keys that may return and go on (after a byte that may follow the rule, or nothing), with
        ``owners[j]`` the keys whose rest is ``rests[j]``."""
        sm = self.sm
        iso = sm.isolated(sid)
        memo = (id(keys), iso)
        got = self._iso_reads.get(memo)
        if got is None:
            # a pure function of the frame's rule state (its fingerprint covers every rule it
            # calls), what may follow the rule, and the keys: shared by every grammar on the
            # vocabulary, as the state facts are, so a new grammar's first masks (a C-like
            # grammar's start: 68 stacks, each a parent of remainders) do not walk them again
            rule_i, state, _ = sm.frames[iso]
            shared = (*self._facts_key(rule_i, state)[1:], keys)
            cache = self.vocab.reads_cache
            got = cache.get(shared)
            if got is None:
                got = cache.setdefault(shared, self._walk_isolated_reads(keys, iso, sm.automaton.follow[rule_i]))
            inside, rests, owners = got  # the rests as this builder's one tuple of them (memos use its id)
            got = self._iso_reads.setdefault(memo, (inside, self._key_list(rests), owners))
        return got

    def _walk_isolated_reads(self, keys: tuple[bytes, ...], iso: int, follow: frozenset[int]
                             ) -> tuple[frozenset[int], tuple[bytes, ...], tuple[tuple[int, ...], ...]]:
        sm = self.sm
        crossing: set[tuple[int, int]] = set()

        def on_escape(i: int, d: int, forbidden: frozenset[int]) -> None:
            hi = prefix_range_end(keys, keys[i][:d], i + 1, len(keys)) if d else len(keys)  # type: ignore[arg-type]
            for j in range(i, hi):
                if len(keys[j]) == d or (keys[j][d] in follow and keys[j][d] not in forbidden):
                    crossing.add((j, d))

        start = sm.closure(iso)
        found = start.intersection(sm.escapes)  # the frame may return before any byte
        for x in found:
            on_escape(0, 0, sm.escapes[x])
        if sm.walk_keys_in_c is not None:  # the same walk in C (compiled_stacks.c)
            inside = sm.walk_keys_in_c(keys, start - found, on_escape)
        else:
            inside = walk_keys(keys, start - found, sm.step_set, sm.next_bytes,  # type: ignore[arg-type]
                               on_escape=on_escape, escapes=sm.escapes)
        by_rest: dict[bytes, list[int]] = {}
        for k, d in crossing:
            by_rest.setdefault(keys[k][d:], []).append(k)
        rests = tuple(sorted(by_rest))
        # all tuples of ints and bytes, beside an untracked set: the shared entry leaves the
        # cyclic collector's sight (16k of them after 200 MaskBench schemas)
        return frozen_ints(inside), rests, tuple(tuple(by_rest[r]) for r in rests)

    # ---------------------------------------------------------------- shared facts

    def _facts_key(self, rule_i: int, state: object) -> tuple:
        a = self.sm.automaton
        return ("facts", a.fingerprints[rule_i], state, a.follow[rule_i])

    def _cached_facts(self, key: tuple, compute: Callable[[], tuple[np.ndarray, Remainders]]) -> StateFacts:
        """Facts from this builder, else the vocabulary's shared cache, else the disk cache, else
        computed (and saved to disk when slow)."""
        got = self._facts.get(key)
        if got is not None:
            return got
        cache = self.vocab.mask_cache
        got = cache.get(key)
        if got is None:
            got = cache.setdefault(key, self._disk_or_computed_facts(key, compute))
        return self._facts.setdefault(key, got)  # the one every thread uses (see the module doc)

    def _disk_or_computed_facts(self, key: tuple,
                                compute: Callable[[], tuple[np.ndarray, Remainders]]) -> StateFacts:
        # The file name (a hash) and the folder (a Path) cost ~20 us, as much as a small state's
        # walk: made only where the folder lists facts or these get saved.
        on = disk_cache_enabled()
        on_disk = self._facts_on_disk() if on else None
        named = state_facts.disk_name(key) if on_disk else None
        if named is not None and named[0] in on_disk:  # type: ignore[operator]
            got = state_facts.load(self._facts_folder() / named[0], key, named[1], self.vocab)
            if got is not None:
                return got
        started = time.perf_counter()
        got = StateFacts(key, *compute())
        if on and time.perf_counter() - started > _DISK_CACHE_AFTER_S:
            name, ident = named or state_facts.disk_name(key)
            if state_facts.save(self._facts_folder() / name, ident, got) and on_disk is not None:
                on_disk.add(name)
        return got

    def _facts_folder(self) -> Path:
        return cache_dir() / "facts" / self.vocab.fingerprint

    def _facts_on_disk(self) -> set[str]:
        """The facts files on disk for this vocabulary, listed once per vocabulary (not per state)."""
        on_disk = self.vocab.facts_on_disk
        if on_disk is None:
            try:
                on_disk = set(os.listdir(self._facts_folder()))
            except OSError:
                on_disk = set()
            self.vocab.facts_on_disk = on_disk
        return on_disk

    def _plain_facts(self, sid: int) -> StateFacts:
        rule_i, state, _ = self.sm.frames[sid]
        rule = self.sm.rules[rule_i]
        if rule.counted:  # an item that calls rules: the facts depend on the count's class only
            state = (self._count_class(rule, state[0]), state[1])  # type: ignore[index]
        return self._cached_facts(
            self._facts_key(rule_i, state),
            lambda: self._walk_plain(self.sm.isolated(sid), self.sm.automaton.follow[rule_i]))

    def _count_class(self, rule, count: int) -> tuple[int, int]:
        """What a token can tell of ``count``: how far ``min`` and ``max`` are, each capped.

        Every item reads a byte, so one token completes at most ``longest token + 1`` items
        (the +1: an item finished by a return before the token's first byte); counts farther
        than that from both bounds behave alike for every token and share their facts.
        """
        if self._token_reach is None:
            self._token_reach = max((len(k) for k in self.index.keys), default=0) + 2
        cap = self._token_reach
        below = min(max(rule.min - count, 0), cap)
        above = cap if rule.max is None else min(rule.max - count, cap)
        return below, above

    def _walk_plain(self, iso: int, follow: frozenset[int]) -> tuple[np.ndarray, Remainders]:
        if self._compiled_walk:
            return self._walk_plain_compiled(iso, follow)
        idx = self.index
        keys = idx.keys
        entries: list[tuple[bytes, int, int, int]] = []

        def on_escape(i: int, d: int, forbidden: frozenset[int]) -> None:
            record_crossing(idx, i, d, follow - forbidden if forbidden else follow, 0, entries)

        start = frozenset((iso,))
        inside = walk_keys(keys, start, self.sm.step_set, self.sm.next_bytes, on_escape=on_escape,
                           escapes=self.sm.escapes, ends=idx.subtree_end)
        ids = [t for i in inside for t in idx.ids[i]]
        return ids_to_mask(ids, self.vocab.words), Remainders.build(entries)

    def _walk_plain_compiled(self, iso: int, follow: frozenset[int]) -> tuple[np.ndarray, Remainders]:
        """:meth:`_walk_plain` with the compiled walk (:mod:`structgen.engine.walk_kernel`)."""
        idx = self.index
        inside, pairs = walk_crossings(idx, self._rows, frozenset((iso,)), follow)
        return ids_to_mask(idx.token_ids(inside), self.vocab.words), Remainders.of_keys(idx, pairs)

    def _counted_facts(self, rule_i: int, q: int) -> StateFacts:
        # Counted facts depend on the item alone (counts and guards are applied afterwards), so
        # every JSON string body shares them, whatever its length bounds or excluded keys.
        rule = self.sm.rules[rule_i]
        key = ("counted", rule.item_digest, q, self.sm.automaton.follow[rule_i])
        return self._cached_facts(key, lambda: self._walk_counted(rule_i, q))

    def _walk_counted(self, rule_i: int, q0: int) -> tuple[np.ndarray, Remainders]:
        """Walk the item DFA alone (no stack): per token, items started; crossings at boundaries."""
        rule = self.sm.rules[rule_i]
        follow = self.sm.automaton.follow[rule_i]
        trans, accept = rule.trans, rule.accept
        idx = self.index
        keys, lcp = idx.keys, idx.lcp
        started = np.full(self.vocab.size, -1, dtype=np.int32)
        entries: list[tuple[bytes, int, int, int]] = []
        if q0 == 0:  # at a boundary before reading anything: every token may return at once
            record_crossing(idx, -1, 0, follow, 0, entries)
        # states[d] = (items completed, item state) after keys[i][:d]
        states: list[tuple[int, int]] = [(0, q0)]
        top, i, hi = 0, 0, len(keys)
        while i < hi:
            key = keys[i]
            d = min(lcp[i], top) if i > 0 else 0
            del states[d + 1:]
            n_done, q = states[d]
            n = len(key)
            alive = True
            while d < n:
                t = trans[q].get(key[d])
                d += 1
                if t is None:
                    alive = False
                    break
                if accept[t]:
                    n_done, q = n_done + 1, 0
                    record_crossing(idx, i, d, follow, n_done, entries, only_longer=True)
                else:
                    q = t
                states.append((n_done, q))
            if alive:
                for tid in idx.ids[i]:
                    started[tid] = n_done + (1 if q != 0 else 0)
                top = n
                i += 1
            else:
                top = d - 1
                i = idx.subtree_end(i, d)
        return started, Remainders.build(entries)
