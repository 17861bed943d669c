"""The shortest way to finish: from a parse position, the fewest bytes (and tokens) that make the
output complete.

This is the groundwork of budget-aware completion (issue 24): knowing, at every step, how many
tokens the shortest complete continuation needs, decoding can keep a complete value within
``max_new_tokens``. The search runs on the stack machine itself
(:class:`~structgen.engine.pda.StackMachine`): a breadth-first search over parse positions (closed
sets of stacks), one byte per edge, so counters, unordered members, lexer lookaheads and
recursion count exactly as they do when walking. Positions are interned, so string contents or
digits that lead back to one position are explored once; the search stops at ``limit``
positions (``None``: not found within it).

In tokens: every byte of both families structgen reads is a token of its own (byte-level BPE's
256 bytes, SentencePiece's ``<0xNN>``), so the byte count bounds the tokens needed; the path is
also spelled in the fewest tokens whose bytes make it up (:func:`spell`), a smaller count that is
still achievable. It is an upper bound on the fewest tokens of any completion (a longer byte
path might take fewer tokens), exact on the small grammars the tests search by brute force.

Example
-------
>>> from structgen.engine.vocab import Vocabulary
>>> from structgen.engine.compiler import Compiler
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [b'":', None], eos_ids=[257])
>>> m = Compiler(vocab).json_schema({"type": "object", "properties": {"a": {"type": "integer"}},
...                                  "required": ["a"]}, whitespace="compact", strict=True).matcher()
>>> m.advance(ord("{")), shortest_completion(m)
(True, b'"a":0}')
>>> len(completion_tokens(m))     # '"', 'a', '":' (one token), '0', '}'
5
"""

from __future__ import annotations

import heapq
import weakref
from typing import Protocol

from structgen.engine.pda import ACCEPT, StackMachine, StackSet
from structgen.engine.vocab import Vocabulary


class Position(Protocol):
    """What the searches read from a matcher (a protocol, so the runtime below the matcher can
    use this module without importing it back)."""

    machine: StackMachine
    vocabulary: Vocabulary

    def stacks(self) -> StackSet | None: ...


__all__ = ["LIMIT", "LowerBounds", "completion_tokens", "shortest_completion", "shortest_path", "spell"]

#: Parse positions one search may visit before it gives up.
LIMIT = 20_000


def shortest_completion(matcher: Position, limit: int = LIMIT) -> bytes | None:
    """The shortest bytes that complete ``matcher``'s output (``b""`` when it may end now), the
    smallest byte first among equals; ``None`` when none is found within ``limit`` positions
    (or the sequence already ended)."""
    start = matcher.stacks()
    return None if start is None else shortest_path(matcher.machine, start, limit)


def completion_tokens(matcher: Position, limit: int = LIMIT) -> list[int] | None:
    """Token ids that spell :func:`shortest_completion` in the fewest tokens (:func:`spell`), or ``None`` when there is no completion within ``limit`` or some byte of
    it has no token of its own."""
    path = shortest_completion(matcher, limit)
    return None if path is None else spell(matcher.vocabulary, path)


def shortest_path(machine: StackMachine, start: StackSet, limit: int = LIMIT) -> bytes | None:
    """:func:`shortest_completion` from a parse position of ``machine``.

    Breadth-first with the bytes of each position in increasing order, so the path found is the
    smallest of the shortest ones; hence the path from any position along it is the rest of it
    (a shorter or smaller one from there would give a shorter or smaller one from ``start``),
    which keeps :meth:`~structgen.engine.matcher.Matcher.completion_length` falling by one
    along its own path.

    The search is pruned by a lower bound on what each position still needs
    (:class:`LowerBounds`): with a bound ``D`` on the whole path, a position reached after ``g``
    bytes is dropped when ``g`` plus its lower bound exceeds ``D``, and ``D`` starts at the
    start's lower bound and grows until a path is found. Dropped positions cannot lie on a path
    of length ``D``, so the path found is the plain search's; but arbitrary JSON values (``[[[[``
    nested without end) no longer make the search give up.
    """
    if ACCEPT in start:
        return b""
    bound = LowerBounds.of(machine)
    budget = limit
    goal = bound.of_set(start)
    while goal is not None:
        path, budget, goal = _pruned_search(machine, bound, start, goal, budget)
        if path is not None:
            return path
    return None


def _pruned_search(machine: StackMachine, bound: "LowerBounds", start: StackSet, goal: int,
                   budget: int) -> tuple[bytes | None, int, int | None]:
    """One breadth-first search for a path of at most ``goal`` bytes: (the path or None, the
    positions left of ``budget``, the next goal to try or None: nothing was dropped, or the
    budget is spent)."""
    came: dict = {start: None}
    level = [start]
    depth = 0
    dropped: int | None = None
    while level and depth < goal:
        depth += 1
        nxt_level = []
        for position in level:
            for byte in sorted(machine.next_bytes(position)):
                nxt = machine.step_set(position, byte)
                if not nxt or nxt in came:
                    continue
                need = bound.of_set(nxt)
                if need is None:
                    continue
                if depth + need > goal:
                    dropped = depth + need if dropped is None else min(dropped, depth + need)
                    continue
                came[nxt] = (position, byte)
                if ACCEPT in nxt:
                    return _path(came, nxt), budget, None
                budget -= 1
                if budget <= 0:
                    return None, 0, None
                nxt_level.append(nxt)
        level = nxt_level
    return None, budget, dropped


class LowerBounds:
    """Per grammar: a lower bound on the bytes that complete each stack.

    ``minimum[r]``: the bytes of rule ``r``'s shortest derivation, at least; ``rest[r][q]``: the
    bytes from state ``q`` to the rule's end (a counted rule: to its item's end; an unordered
    rule: its own bytes, its items counted apart), at least. A byte costs one and a call its
    callee's minimum. Required members of an unordered rule, and a counted rule's missing
    items, add their minimums. The values are computed from zero upwards until nothing changes
    (or a round limit), so they are lower bounds at every round. The bound of a stack adds up
    its frames'; a set's is its smallest stack's (``None`` for an empty set).

    >>> from structgen.core.ir import Grammar, Lit, Ref, Seq
    >>> from structgen.core.automaton import build_automaton
    >>> sm = StackMachine(build_automaton(Grammar.of("root", root=Seq((Lit(b"["), Ref("x"), Lit(b"]"))),
    ...                                              x=Lit(b"abc"))))
    >>> LowerBounds.of(sm).of_set(sm.initial())
    5
    """

    ROUNDS = 64

    def __init__(self, machine: StackMachine) -> None:
        self.machine = machine
        rules = machine.rules
        n = len(rules)
        self.minimum = [0] * n
        self.rest: list[list[int]] = [[0] * len(r.trans) for r in rules]
        self._item_rule: list[dict[int, int]] = []  # per unordered rule: item index -> callee
        for r in rules:
            items: dict[int, int] = {}
            if r.unordered is not None:
                for callee, ks in r.unordered.item_of.items():
                    for k in ks:
                        items[k] = callee
            self._item_rule.append(items)
        callers: list[set[int]] = [set() for _ in range(n)]
        for i, r in enumerate(rules):
            for calls in r.calls:
                for callee, _ in calls:
                    callers[callee].add(i)
            for callee in self._item_rule[i].values():
                callers[callee].add(i)
        work = set(range(n))
        for _ in range(self.ROUNDS):
            if not work:
                break
            changed: set[int] = set()
            for i in sorted(work):
                self.rest[i] = self._rest(i)
                low = self._minimum(i)
                if low != self.minimum[i]:
                    self.minimum[i] = low
                    changed.add(i)
            work = {c for i in changed for c in callers[i]}
        self._stack: dict[int, int] = {ACCEPT: 0}

    @staticmethod
    def of(machine: StackMachine) -> "LowerBounds":
        got = _BOUNDS.get(machine)
        if got is None:
            got = _BOUNDS[machine] = LowerBounds(machine)
        return got

    def _rest(self, i: int) -> list[int]:
        """Shortest paths to the accepting states, backwards (Dijkstra over the rule's states)."""
        r = self.machine.rules[i]
        items = r.unordered.item_of if r.unordered is not None else {}
        back: list[list[tuple[int, int]]] = [[] for _ in r.trans]
        for q, trans in enumerate(r.trans):
            for t in set(trans.values()):
                back[t].append((q, 1))
            for callee, ret in r.calls[q]:
                back[ret].append((q, 0 if callee in items else self.minimum[callee]))
        far = 1 << 30
        dist = [0 if a else far for a in r.accept]
        heap = [(0, q) for q, a in enumerate(r.accept) if a]
        while heap:
            d, t = heapq.heappop(heap)
            if d > dist[t]:
                continue
            for q, w in back[t]:
                if d + w < dist[q]:
                    dist[q] = d + w
                    heapq.heappush(heap, (d + w, q))
        return dist

    def _minimum(self, i: int) -> int:
        r = self.machine.rules[i]
        rest = self.rest[i]
        if r.unordered is not None:
            return rest[0] + self._members_needed(i, 0, 0)
        if r.counted:
            return r.min * rest[0]
        return rest[0]

    def _members_needed(self, i: int, written: int, count: int) -> int:
        """Bytes of the members an unordered rule must still write, at least."""
        slots = self.machine.rules[i].unordered.slots  # type: ignore[union-attr]
        items = self._item_rule[i]
        cheapest = {}
        for k, s in enumerate(slots.slots):
            if s >= 0 and slots.required >> s & 1 and not written >> s & 1 and k in items:
                low = self.minimum[items[k]]
                cheapest[s] = min(cheapest.get(s, low), low)
        more = max(0, slots.min - count - len(cheapest))
        least = min((self.minimum[c] for c in items.values()), default=0)
        return sum(cheapest.values()) + more * least

    def of_stack(self, sid: int) -> int:
        got = self._stack.get(sid)
        if got is not None:
            return got
        chain = []  # iteratively: stacks are as deep as the input's nesting
        while sid not in self._stack:
            chain.append(sid)
            sid = self.machine.frames[sid][2]
            if sid < 0:  # ESCAPE's parent: an isolated stack, nothing below
                sid = ACCEPT
        total = self._stack[sid]
        for s in reversed(chain):
            total += self._frame(s)
            self._stack[s] = total
        return total

    def _frame(self, sid: int) -> int:
        rule_i, state, _ = self.machine.frames[sid]
        if rule_i < 0:  # a guard (or a sentinel): nothing of its own
            return 0
        r = self.machine.rules[rule_i]
        rest = self.rest[rule_i]
        if r.unordered is not None:
            written, _, count, q = state  # type: ignore[misc]
            return rest[q] + self._members_needed(rule_i, written, count)
        if r.counted:
            count, q = state[0], state[1]  # type: ignore[index]
            started = 1 if q != 0 else 0
            return (rest[q] if started else 0) + max(0, r.min - count - started) * rest[0]
        return rest[state]  # type: ignore[index]

    def of_set(self, stacks: StackSet) -> int | None:
        if not stacks:
            return None
        if ACCEPT in stacks:
            return 0
        return min(self.of_stack(sid) for sid in stacks)


_BOUNDS: "weakref.WeakKeyDictionary[StackMachine, LowerBounds]" = weakref.WeakKeyDictionary()


def spell(vocab: Vocabulary, path: bytes) -> list[int] | None:
    """``path`` in the fewest tokens (the longest first token among the fewest), or ``None`` when
    some byte has no token of its own. Any fewest spelling minus its first token is a fewest
    spelling of the rest, which keeps the count falling by one along it.

    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [b"ab", b"bcd"], eos_ids=[0])
    >>> [vocab.tokens[t] for t in spell(vocab, b"abcd")]    # the longest first ('ab') takes 3
    [b'a', b'bcd']
    """
    by_bytes, longest = _token_of(vocab)
    n = len(path)
    fewest: list[int | None] = [None] * n + [0]  # fewest[i]: tokens to spell path[i:]
    first: list[int] = [0] * n
    for i in range(n - 1, -1, -1):
        for k in range(min(longest, n - i), 0, -1):
            rest = fewest[i + k]
            if rest is not None and (path[i:i + k] in by_bytes) and (fewest[i] is None or rest + 1 < fewest[i]):
                fewest[i], first[i] = rest + 1, k
    if fewest[0] is None:
        return None  # a byte with no token of its own: the tokens cannot be counted
    out, at = [], 0
    while at < n:
        out.append(by_bytes[path[at:at + first[at]]])
        at += first[at]
    return out


_TOKEN_OF: "weakref.WeakKeyDictionary[Vocabulary, tuple[dict[bytes, int], int]]" = weakref.WeakKeyDictionary()


def _token_of(vocab: Vocabulary) -> tuple[dict[bytes, int], int]:
    """A token id for each distinct token byte string (the lowest id), and the longest one's
    length; built once per vocabulary."""
    got = _TOKEN_OF.get(vocab)
    if got is None:
        index = vocab.index
        by_bytes = {key: min(ids) for key, ids in zip(index.keys, index.ids)}
        got = _TOKEN_OF[vocab] = (by_bytes, max(map(len, by_bytes), default=0))
    return got


def _path(came: dict, end: object) -> bytes:
    out = bytearray()
    step = came[end]
    while step is not None:
        position, byte = step
        out.append(byte)
        step = came[position]
    return bytes(reversed(out))
