"""The pushdown runtime: interned call stacks over rule automata, stepped byte by byte.

A *stack* is an interned id for ``(rule, state, parent)``, where ``parent`` is the stack to
resume (already at the call's return state) when the rule completes. A parse position is a
*closed set* of stacks: every stack in it can read a byte now, except the marker ``ACCEPT``
(the start rule has completed, so end-of-sequence is legal). Several stacks live at once
when the grammar is ambiguous so far (``anyOf`` of two objects that both start ``{"ok":``).

Closing a stack expands what needs no input: calls push the callee, completed rules pop.
``ESCAPE`` plays the role of ``ACCEPT`` for stacks built *in isolation* on the marker
``ESCAPE`` as parent: the mask builder walks a rule state alone and records where a token
leaves it, then finishes those few tokens against the real stack.

A rule with a *lookahead* (a lexer's token end, :mod:`structgen.frontends.lark.lexer`) does not return
straight to its caller: it returns through a *guard* frame ``(GUARD, forbidden, parent)``
that reads the next byte as the parent would, unless the byte is forbidden. In a stack built in
isolation, a guard on ``ESCAPE`` marks an escape that the next byte must also pass
(:attr:`StackMachine.escapes` maps each escape marker to the bytes it forbids).

Counted rules keep ``(count, item_state)`` as their state, plus the guard state when they
exclude words; without an upper bound the count is capped at ``min`` (beyond it, counts are
indistinguishable), so stacks stay finite. An item may call rules (an array's elements): the
call returns to ``(count, state)`` and an item completed by a return counts at closure.

Threads: one compiled grammar serves many matchers, possibly in several threads at once, so the
memo tables here are filled by whoever needs an entry first. A memo entry is a pure function of
its key, so two threads filling it store equal values and either is right (a dict store is atomic
under the GIL). What is not a plain store is guarded: interning appends to ``frames`` and
records the id in one step under a lock (two threads must never get one id for two stacks, or
two ids for one; in C it runs no Python code between the lookup and the store, so the GIL is
that lock), and the set of closures in progress, which detects a rule that recurses without
reading input, is kept per thread (another thread's closure in progress is no cycle).

In C: closures of plain frames (no counts, no unordered members), steps, interning and the
crossing reads' walk of remainders (:attr:`StackMachine.walk_keys_in_c`) run in
``compiled_stacks.c`` where it is built, on these same tables and in the same order, so the
stack ids are the ones the Python makes (``tests/test_stacks_kernel.py``). Guards, counted and
unordered frames stay in Python, which calls back into C for the frames they push. A cold mask
of the C-like grammar makes ~3,700 new stacks; in Python that was ~4 of its ~12 ms.

Unordered rules (an object's members in any order) keep ``(written, got, count, state)``: the
call of an item rule pushes a return frame that already counts the item (its slot written), and
only items that may come now are called; a state right after a separator is entered only while
some item may come, and the rule returns only when it may end (``Slots``), so every stack kept
can still finish and the sets of slots are explored only as far as the text goes.
"""

from __future__ import annotations

import os
import threading
from functools import partial

from structgen.core.automaton import GrammarAutomaton
from structgen.core.depth import recursion_room
from structgen.errors import CompileError

try:
    from structgen.engine import compiled_stacks as _kernel  # type: ignore[attr-defined]
except ImportError:  # not built: no C compiler at install
    _kernel = None

__all__ = ["ACCEPT", "ESCAPE", "GUARD", "StackMachine", "stacks_kernel_available"]

#: The ``compiled_stacks.c`` this module speaks to (``STACKS_VERSION`` there).
STACKS_KERNEL_VERSION = 3


def stacks_kernel_available() -> bool:
    """Whether closures of plain frames and interning run in C (``compiled_stacks.c``, built by
    pip at install; ``STRUCTGEN_STACKS_KERNEL=0`` turns it off): same stacks, same ids."""
    return _KERNEL_BUILT and os.environ.get("STRUCTGEN_STACKS_KERNEL", "1") != "0"


#: whether ``compiled_stacks.c`` was built, in the version this module speaks to
_KERNEL_BUILT = _kernel is not None and getattr(_kernel, "VERSION", None) == STACKS_KERNEL_VERSION
#: ``frozenset`` for sets of ints (stack ids, bytes), kept out of the cyclic collector's sight
#: where the kernel is built (``frozen_ints`` in ``compiled_stacks.c`` says why)
frozen_ints = _kernel.frozen_ints if _KERNEL_BUILT else frozenset

ACCEPT = 0
ESCAPE = 1
GUARD = -2  # the rule slot of a guard frame

StackSet = frozenset  # frozenset[int]: a closed set of stack ids
_EMPTY: StackSet = frozen_ints(())


class StackMachine:
    """Interns stacks and memoizes closure and byte steps for one grammar automaton.

    Example
    -------
    >>> from structgen.core.ir import Grammar, Lit
    >>> from structgen.core.automaton import build_automaton
    >>> sm = StackMachine(build_automaton(Grammar.of("root", root=Lit(b"ab"))))
    >>> s = sm.step_bytes(sm.initial(), b"ab")
    >>> ACCEPT in s
    True
    """

    def __init__(self, automaton: GrammarAutomaton) -> None:
        self.automaton = automaton
        self.rules = automaton.rules
        # frames[sid] = (rule, state, parent); sentinels have rule -1.
        self.frames: list[tuple[int, object, int]] = [(-1, None, -1), (-1, None, -1)]
        self._ids: dict[tuple[int, object, int], int] = {}
        self._closure: dict[int, StackSet] = {ACCEPT: frozen_ints((ACCEPT,)), ESCAPE: frozen_ints((ESCAPE,))}
        self._intern_lock = threading.Lock()
        self._local = threading.local()  # .busy: this thread's closures in progress
        self._step: dict[int, StackSet] = {}  # key: stack id * 256 + byte
        self._step_set: list[dict[StackSet, StackSet]] = [{} for _ in range(256)]  # per byte
        self._next_bytes: dict[StackSet, frozenset[int]] = {}
        self._initial: StackSet | None = None
        #: escape markers of isolated walks: ESCAPE, and guards on ESCAPE, with what they forbid
        self.escapes: dict[int, frozenset[int]] = {ESCAPE: frozenset()}
        self._entries = [self._entry_state(i) for i in range(len(self.rules))]
        #: the closure of a frame not in the memo, inside a closure in progress (``_closure_py``)
        self._closure_of = self._closure_py
        self._closure_top = None  # the same from outside one, in C
        #: ``(keys, start, on_escape) -> indices``: masks.walk_keys on this machine, in C (or None)
        self.walk_keys_in_c = None
        if stacks_kernel_available():  # the same methods in C, on the same tables (compiled_stacks.c)
            plain = [None if r.counted or r.unordered is not None else (r.trans, r.calls, r.accept, r.lookahead)
                     for r in self.rules]
            cls = type(self)
            ctx = (self.frames, self._ids, self._closure, plain, self._entries, self.escapes,
                   partial(self._in_room, self._closure_py), partial(self._in_room, self._closure_deep),
                   self._step, self._step_set, cls.step.__get__(self), self._local, self._next_bytes,
                   self.next_bytes)
            self._closure_of = partial(_kernel.closure, ctx)
            self._closure_top = partial(_kernel.closure_top, ctx)
            self.intern = partial(_kernel.intern, ctx)  # type: ignore[method-assign]
            self.step = partial(_kernel.step, ctx)  # type: ignore[method-assign]
            self.step_set = partial(_kernel.step_set, ctx)  # type: ignore[method-assign]
            self.walk_keys_in_c = partial(_kernel.walk_keys, ctx)

    # -- stacks

    def intern(self, rule: int, state: object, parent: int) -> int:
        """The id of stack ``(rule, state, parent)``, a new one the first time (in C where the
        kernel is built: one step under the GIL, so this lock guards the Python way alone)."""
        key = (rule, state, parent)
        sid = self._ids.get(key)
        if sid is None:
            with self._intern_lock:  # check again: another thread may have interned it meanwhile
                sid = self._ids.get(key)
                if sid is None:
                    sid = len(self.frames)
                    self.frames.append(key)  # before the id is published: frames[sid] exists
                    if rule == GUARD and parent == ESCAPE:  # and a walk meeting it sees an escape
                        self.escapes[sid] = state  # type: ignore[assignment]
                    self._ids[key] = sid
        return sid

    def entry_state(self, rule: int) -> object:
        return self._entries[rule]

    def _entry_state(self, rule: int) -> object:
        r = self.rules[rule]
        if r.unordered is not None:
            return (0, 0, 0, 0)
        if not r.counted:
            return 0
        return (0, 0, (0, b"")) if r.guard is not None else (0, 0)

    def guard(self, forbidden: frozenset[int], parent: int) -> int:
        """The guard frame that lets ``parent`` read on unless the next byte is ``forbidden``."""
        return self.intern(GUARD, forbidden, parent)  # on ESCAPE, intern records the escape

    def isolated(self, sid: int) -> int:
        """The stack with the same top frame as ``sid`` but ``ESCAPE`` as its parent."""
        rule, state, _ = self.frames[sid]
        return self.intern(rule, state, ESCAPE)

    def initial(self) -> StackSet:
        if self._initial is None:
            a = self.automaton
            self._initial = self.closure(self.intern(a.start, self.entry_state(a.start), ACCEPT))
        return self._initial

    def depth(self, sid: int) -> int:
        d = 0
        while sid > ESCAPE:
            sid = self.frames[sid][2]
            d += 1
        return d

    # -- closure and steps

    def closure(self, sid: int) -> StackSet:
        got = self._closure.get(sid)
        if got is not None:
            return got
        local = self._local
        if getattr(local, "roomy", False):
            return self._closure_of(sid, local.busy)
        if self._closure_top is not None:  # C: it makes the room only where Python recurses
            return self._closure_top(sid)
        return self._in_room(self._closure_of, sid, set())

    def _in_room(self, run, sid: int, busy: set[int]) -> StackSet:
        """``run(sid, busy)`` with room to recurse: a call that starts with a call... costs Python
        frames per call (1,000 chained grammar rules), so the room is made once, by the outermost
        closure of this thread (not per nested call); ``busy``: its closures in progress."""
        local = self._local
        if getattr(local, "roomy", False):
            return run(sid, busy)
        with recursion_room():
            local.roomy = True
            local.busy = busy
            try:
                return run(sid, busy)
            finally:
                local.roomy = False

    def _closure_deep(self, sid: int, busy: set[int]) -> StackSet:
        """:meth:`_closure_py` recursing in Python only: the C closure hands over frames past a
        depth, so a chain of a thousand rules does not grow the C stack."""
        return self._closure_py(sid, busy, self._closure_deep)

    def _closure_py(self, sid: int, busy: set[int], rec=None) -> StackSet:
        """The closure of stack ``sid`` (memoized), with ``busy`` this thread's closures in
        progress; frames it pushes are closed by ``rec`` (default: :attr:`_closure_of`)."""
        rec = rec or self._closure_of
        memo = self._closure
        got = memo.get(sid)
        if got is not None:
            return got
        if sid in busy:  # build_automaton rejects left recursion; this guards the rest
            raise CompileError(f"rule '{self.rules[self.frames[sid][0]].name}' recurses "
                               "without reading input")
        busy.add(sid)
        try:
            rule_i, state, parent = self.frames[sid]
            out: set[int] = set()
            if rule_i == GUARD:
                memo[sid] = result = self._guard_closure(sid, state, parent, busy, rec)  # type: ignore[arg-type]
                return result
            rule = self.rules[rule_i]
            if rule.unordered is not None:
                result = self._unordered_closure(sid, rule, state, parent, busy, rec)  # type: ignore[arg-type]
                memo[sid] = result
                return result
            intern, entries = self.intern, self._entries
            if rule.counted:
                count, q = state[0], state[1]  # type: ignore[index]
                if rule.accept[q]:  # a called rule returned and completed the item
                    cap = rule.max if rule.max is not None else rule.min
                    out |= rec(intern(rule_i, (min(count + 1, cap), 0), parent), busy)
                else:
                    if q != 0 or rule.max is None or count < rule.max:
                        if rule.trans[q]:
                            out.add(sid)
                        for callee, ret in rule.calls[q]:
                            ret_sid = intern(rule_i, (count, ret), parent)
                            out |= rec(intern(callee, entries[callee], ret_sid), busy)
                    if q == 0 and count >= rule.min and not (
                            rule.guard is not None and rule.guard.blocks_end(state[2])):  # type: ignore[index]
                        out |= rec(parent, busy)
            else:  # the common case: one call after another, each a memo hit or a closure of its own
                q = state  # type: ignore[assignment]
                if rule.trans[q]:
                    out.add(sid)
                for callee, ret in rule.calls[q]:
                    called = intern(callee, entries[callee], intern(rule_i, ret, parent))
                    got = memo.get(called)
                    out |= got if got is not None else rec(called, busy)
                if rule.accept[q]:
                    after = parent if rule.lookahead is None else self.guard(rule.lookahead, parent)
                    got = memo.get(after)
                    out |= got if got is not None else rec(after, busy)
            result = frozen_ints(out)
        finally:
            busy.discard(sid)
        memo[sid] = result
        return result

    def _unordered_closure(self, sid: int, rule, state: tuple, parent: int, busy: set[int], rec) -> StackSet:
        written, got, count, q = state
        u = rule.unordered
        slots = u.slots
        if u.must_add[q] and not slots.can_add(written, got, count):
            return frozen_ints(())
        out: set[int] = set()
        if any(self._unordered_alive(u, t, state) for t in rule.trans[q].values()):
            out.add(sid)
        rule_i = self.frames[sid][0]
        for callee, ret in rule.calls[q]:
            items = u.item_of.get(callee)
            if items is None:  # whitespace and the like: the slots stay as they are
                if not self._unordered_alive(u, ret, state):
                    continue  # whitespace before a separator when no item may come: a dead end
                ret_sid = self.intern(rule_i, (written, got, count, ret), parent)
                out |= rec(self.intern(callee, self._entries[callee], ret_sid), busy)
                continue
            for k in items:
                nxt = slots.after(k, written, got, count)
                if nxt is not None:
                    ret_sid = self.intern(rule_i, (*nxt, ret), parent)
                    out |= rec(self.intern(callee, self._entries[callee], ret_sid), busy)
        if rule.accept[q] and slots.can_end(written, got, count):
            out |= rec(parent, busy)
        return frozen_ints(out)

    @staticmethod
    def _unordered_alive(u, t: int, state: tuple) -> bool:
        """Whether an unordered rule may enter its state ``t`` (one right after a separator only
        while some item may come)."""
        return not u.must_add[t] or u.slots.can_add(state[0], state[1], state[2])

    def _guard_closure(self, sid: int, forbidden: frozenset[int], parent: int, busy: set[int], rec) -> StackSet:
        if parent == ESCAPE:
            return frozen_ints((sid,))
        below = rec(parent, busy)
        out: set[int] = set()
        for x in below:
            if x == ACCEPT:
                out.add(ACCEPT)
            elif x in self.escapes:  # an escape below: the next byte must pass both guards
                out.add(self.guard(forbidden | self.escapes[x], ESCAPE))
        if self.next_bytes(below) - forbidden:
            out.add(sid)
        return frozen_ints(out)

    def step(self, sid: int, byte: int) -> StackSet:
        """Closed set after stack ``sid`` reads ``byte`` (empty when it cannot)."""
        key = sid * 256 + byte
        got = self._step.get(key)
        if got is not None:
            return got
        rule_i, state, parent = self.frames[sid]
        result: StackSet = _EMPTY
        if rule_i == GUARD:
            if parent != ESCAPE and byte not in state:  # type: ignore[operator]
                result = self.step_set(self.closure(parent), byte)
        elif rule_i >= 0:
            rule = self.rules[rule_i]
            if rule.unordered is not None:
                t = rule.trans[state[3]].get(byte)  # type: ignore[index]
                if t is not None and self._unordered_alive(rule.unordered, t, state):  # type: ignore[arg-type]
                    result = self.closure(self.intern(rule_i, (*state[:3], t), parent))  # type: ignore[index]
            elif rule.counted:
                count, q = state[0], state[1]  # type: ignore[index]
                t = rule.trans[q].get(byte)
                if t is not None:
                    done = rule.accept[t]
                    if done:
                        cap = rule.max if rule.max is not None else rule.min
                        count, t = min(count + 1, cap), 0
                    nxt: tuple = (count, t)
                    if rule.guard is not None:
                        nxt = (count, t, rule.guard.step(state[2], byte, done))  # type: ignore[index]
                    result = self.closure(self.intern(rule_i, nxt, parent))
            else:
                t = rule.trans[state].get(byte)  # type: ignore[call-overload]
                if t is not None:
                    result = self.closure(self.intern(rule_i, t, parent))
        self._step[key] = result
        return result

    def step_set(self, stacks: StackSet, byte: int) -> StackSet:
        memo = self._step_set[byte]
        got = memo.get(stacks)
        if got is None:
            if len(stacks) == 1:
                for sid in stacks:
                    got = self.step(sid, byte)
            else:
                acc: set[int] = set()
                for sid in stacks:
                    acc |= self.step(sid, byte)
                got = frozen_ints(acc)
            memo[stacks] = got
        return got

    def step_bytes(self, stacks: StackSet, data: bytes) -> StackSet:
        for b in data:
            stacks = self.step_set(stacks, b)
            if not stacks:
                break
        return stacks

    def byte_groups(self, stacks: StackSet) -> list[list[int]] | None:
        """The bytes ``stacks`` can read, in groups whose bytes all step it to the same set;
        None where a step depends on the byte itself (guard frames, and counted rules with a
        guard, which steps by the byte).

        A frame steps by a byte to the closure of what its rule's target for that byte makes of
        the frame (a plain rule's target state; a counted rule's count and state; an unordered
        rule's slots and state), so bytes with the same target in every frame lead to the same
        set: of the ~250 bytes a comment or a JSON string reads, the ASCII ones are one group,
        the UTF-8 lead bytes a few more.

        >>> from structgen.core.automaton import build_automaton
        >>> from structgen.core.ir import Grammar, Lit, ByteClass, alt, seq
        >>> g = Grammar.of("r", r=alt(seq(ByteClass.of("a-c"), Lit(b"1")), Lit(b"x2")))
        >>> sm = StackMachine(build_automaton(g))
        >>> [bytes(g) for g in sm.byte_groups(sm.initial())]
        [b'abc', b'x']
        """
        rows = []
        for sid in stacks:
            rule_i, state, _ = self.frames[sid]
            if rule_i >= 0:
                rule = self.rules[rule_i]
                if rule.unordered is not None:
                    rows.append(rule.trans[state[3]])  # type: ignore[index]
                elif rule.counted:
                    if rule.guard is not None:
                        return None
                    rows.append(rule.trans[state[1]])  # type: ignore[index]
                else:
                    rows.append(rule.trans[state])  # type: ignore[index]
            elif rule_i == GUARD:
                return None
        groups: dict[tuple, list[int]] = {}
        for b in sorted(self.next_bytes(stacks)):
            groups.setdefault(tuple([row.get(b) for row in rows]), []).append(b)
        return list(groups.values())

    def next_bytes(self, stacks: StackSet) -> frozenset[int]:
        """Bytes some stack of ``stacks`` can read next (memoized per set)."""
        got = self._next_bytes.get(stacks)
        if got is None:
            out: set[int] = set()
            for sid in stacks:
                rule_i, state, parent = self.frames[sid]
                if rule_i == GUARD:
                    if parent != ESCAPE:
                        out.update(self.next_bytes(self.closure(parent)) - state)  # type: ignore[operator]
                elif rule_i >= 0:
                    rule = self.rules[rule_i]
                    if rule.unordered is not None:
                        out.update(b for b, t in rule.trans[state[3]].items()  # type: ignore[index]
                                   if self._unordered_alive(rule.unordered, t, state))  # type: ignore[arg-type]
                    else:
                        out.update(rule.trans[state[1] if rule.counted else state])  # type: ignore[index]
            got = self._next_bytes[stacks] = frozen_ints(out)
        return got
