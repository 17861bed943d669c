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
"""

from __future__ import annotations

from structgen.core.automaton import GrammarAutomaton
from structgen.core.depth import recursion_room
from structgen.errors import CompileError

__all__ = ["ACCEPT", "ESCAPE", "GUARD", "StackMachine"]

ACCEPT = 0
ESCAPE = 1
GUARD = -2  # the rule slot of a guard frame

StackSet = frozenset  # frozenset[int]: a closed set of stack ids


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
        self._closure: dict[int, StackSet] = {ACCEPT: frozenset((ACCEPT,)), ESCAPE: frozenset((ESCAPE,))}
        self._busy: set[int] = set()
        self._step: dict[int, StackSet] = {}  # key: stack id * 256 + byte
        self._step_set: list[dict[StackSet, StackSet]] = [{} for _ in range(256)]  # per byte
        self._next_bytes: dict[StackSet, frozenset[int]] = {}
        self._initial: StackSet | None = None
        #: escape markers of isolated walks: ESCAPE, and guards on ESCAPE, with what they forbid
        self.escapes: dict[int, frozenset[int]] = {ESCAPE: frozenset()}

    # -- stacks

    def intern(self, rule: int, state: object, parent: int) -> int:
        key = (rule, state, parent)
        sid = self._ids.get(key)
        if sid is None:
            sid = len(self.frames)
            self.frames.append(key)
            self._ids[key] = sid
        return sid

    def entry_state(self, rule: int) -> object:
        r = self.rules[rule]
        if not r.counted:
            return 0
        return (0, 0, (0, b"")) if r.guard is not None else (0, 0)

    def guard(self, forbidden: frozenset[int], parent: int) -> int:
        """The guard frame that lets ``parent`` read on unless the next byte is ``forbidden``."""
        sid = self.intern(GUARD, forbidden, parent)
        if parent == ESCAPE:
            self.escapes[sid] = forbidden
        return sid

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
        # a call that starts with a call...: Python frames per call (1,000 chained grammar rules)
        with recursion_room():
            return self._closure_of(sid)

    def _closure_of(self, sid: int) -> StackSet:
        got = self._closure.get(sid)
        if got is not None:
            return got
        if sid in self._busy:  # build_automaton rejects left recursion; this guards the rest
            raise CompileError(f"rule '{self.rules[self.frames[sid][0]].name}' recurses "
                               "without reading input")
        self._busy.add(sid)
        try:
            rule_i, state, parent = self.frames[sid]
            out: set[int] = set()
            if rule_i == GUARD:
                self._closure[sid] = result = self._guard_closure(sid, state, parent)  # type: ignore[arg-type]
                return result
            rule = self.rules[rule_i]
            if rule.counted:
                count, q = state[0], state[1]  # type: ignore[index]
                if rule.accept[q]:  # a called rule returned and completed the item
                    cap = rule.max if rule.max is not None else rule.min
                    out |= self.closure(self.intern(rule_i, (min(count + 1, cap), 0), parent))
                else:
                    if q != 0 or rule.max is None or count < rule.max:
                        if rule.trans[q]:
                            out.add(sid)
                        for callee, ret in rule.calls[q]:
                            ret_sid = self.intern(rule_i, (count, ret), parent)
                            out |= self.closure(self.intern(callee, self.entry_state(callee), ret_sid))
                    if q == 0 and count >= rule.min and not (
                            rule.guard is not None and rule.guard.blocks_end(state[2])):  # type: ignore[index]
                        out |= self.closure(parent)
            else:
                q = state  # type: ignore[assignment]
                if rule.trans[q]:
                    out.add(sid)
                for callee, ret in rule.calls[q]:
                    ret_sid = self.intern(rule_i, ret, parent)
                    out |= self.closure(self.intern(callee, self.entry_state(callee), ret_sid))
                if rule.accept[q]:
                    out |= self.closure(parent if rule.lookahead is None else self.guard(rule.lookahead, parent))
            result = frozenset(out)
        finally:
            self._busy.discard(sid)
        self._closure[sid] = result
        return result

    def _guard_closure(self, sid: int, forbidden: frozenset[int], parent: int) -> StackSet:
        if parent == ESCAPE:
            return frozenset((sid,))
        below = self.closure(parent)
        out: set[int] = set()
        for x in below:
            if x == ACCEPT:
                out.add(ACCEPT)
            elif x in self.escapes:  # an escape below: the next byte must pass both guards
                out.add(self.guard(forbidden | self.escapes[x], ESCAPE))
        if self.next_bytes(below) - forbidden:
            out.add(sid)
        return frozenset(out)

    def step(self, sid: int, byte: int) -> StackSet:
        """Closed set after stack ``sid`` reads ``byte`` (empty when it cannot)."""
        key = sid * 256 + byte
        got = self._step.get(key)
        if got is not None:
            return got
        rule_i, state, parent = self.frames[sid]
        result: StackSet = frozenset()
        if rule_i == GUARD:
            if parent != ESCAPE and byte not in state:  # type: ignore[operator]
                result = self.step_set(self.closure(parent), byte)
        elif rule_i >= 0:
            rule = self.rules[rule_i]
            if rule.counted:
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
                got = frozenset(acc)
            memo[stacks] = got
        return got

    def step_bytes(self, stacks: StackSet, data: bytes) -> StackSet:
        for b in data:
            stacks = self.step_set(stacks, b)
            if not stacks:
                break
        return stacks

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
                    out.update(rule.trans[state[1] if rule.counted else state])  # type: ignore[index]
            got = self._next_bytes[stacks] = frozenset(out)
        return got
