"""Which rules can match anything, and pruning what cannot lead to a complete match.

A rule is *productive* when some byte string takes it from its start state to an accepting
state, calling only productive rules on the way. A grammar whose start rule is not productive
matches nothing (``{"type": "array", "items": {"$ref": "#"}, "minItems": 1}``: every value would
have to contain itself); it is refused at compile time, naming the rule to blame. Otherwise
the parts that match nothing (an ``anyOf`` branch whose pattern is ``[]``) are pruned: calls to
unproductive rules and the states that can no longer reach acceptance are dropped, so a matcher
never lets a sequence into a branch it cannot leave.

Rules are read through the attributes every rule automaton has (``trans``, ``calls``,
``accept``, ``counted``, ``min``; ``unordered`` where an object's members come in any order), so
this module needs nothing above it.

Example
-------
>>> from types import SimpleNamespace as R
>>> ok = R(name="ok", trans=[{97: 1}, {}], calls=[(), ()], accept=[False, True], counted=False, min=0)
>>> loop = R(name="loop", trans=[{}, {}], calls=[((1, 1),), ()], accept=[False, True], counted=False, min=0)
>>> productive([ok, loop])
[True, False]
"""

from __future__ import annotations

from typing import Any, Sequence

from structgen.core.dfa_kernel import kernel, kernel_available

__all__ = ["productive", "live_states", "solo_live_states", "liveness", "blame"]


def live_states(rule: Any, alive: Sequence[bool]) -> list[bool]:
    """The states of ``rule`` from which its accepting states can be reached, by bytes or by
    calls to rules ``alive`` says are productive (a call continues at its return state)."""
    n = len(rule.trans)
    back: list[list[int]] = [[] for _ in range(n)]
    for q in range(n):
        for t in set(rule.trans[q].values()):  # up to 256 bytes, most to one or two targets
            back[t].append(q)
        for callee, t in rule.calls[q]:
            if alive[callee]:
                back[t].append(q)
    live = [bool(a) for a in rule.accept]
    todo = [q for q in range(n) if live[q]]
    while todo:
        for p in back[todo.pop()]:
            if not live[p]:
                live[p] = True
                todo.append(p)
    return live


def solo_live_states(rule: Any) -> Sequence[bool]:
    """:func:`live_states` of a rule that calls nothing, by the kernel where it is built (a SQL
    grammar's name rules are ~800 states: 0.65 ms each in Python, 0.09 in C).

    >>> from types import SimpleNamespace as R
    >>> list(solo_live_states(R(trans=[{97: 1, 98: 2}, {}, {}], calls=[(), (), ()], accept=[False, True, False])))
    [True, True, False]
    """
    if kernel_available():
        return kernel.liveness([rule.trans], [rule.calls], [rule.accept], [None], [False], [None])[1][0]
    return live_states(rule, ())


def _matches(rule: Any, alive: Sequence[bool]) -> bool:
    return _matches_given(rule, alive, None)


def _matches_given(rule: Any, alive: Sequence[bool], live: "list[bool] | None") -> bool:
    """Whether ``rule`` matches given ``alive``; ``live``: its live states given ``alive`` (else
    computed)."""
    if rule.counted and rule.min == 0:
        return True  # no item at all is a match
    unordered = getattr(rule, "unordered", None)
    if unordered is not None:  # an object's members in any order: every required one must exist
        slots = unordered.slots
        can = {slots.slots[k] for callee, ks in unordered.item_of.items() if alive[callee] for k in ks}
        if any(slots.required >> s & 1 and s not in can for s in range(slots.n)):
            return False
    return (live if live is not None else live_states(rule, alive))[0]


def liveness(rules: Sequence[Any], solo: "Sequence[Sequence[bool] | None] | None" = None,
             ) -> tuple[list[bool], list[Sequence[bool]]]:
    """``(productive, live)``: per rule, whether it matches some string (least fixpoint: a rule
    that can only match by calling itself, directly or through others, matches nothing), and
    its :func:`live_states` given those.

    ``solo[i]``, where not None, is rule ``i``'s :func:`live_states` already known because it
    calls nothing (a compile keeps it with the rule's automaton); it is returned as it is, not
    copied, so callers must not change the lists they get.

    One backward search per rule, resumed where a callee turns out to match (its call edges
    open then), so every edge is crossed once. (Re-running :func:`live_states` on a caller each
    time one of its callees turned out productive, then once more per rule to prune, was about
    a seventh of the compile of a 7,000-rule schema, profiled.)

    >>> from types import SimpleNamespace as R
    >>> ok = R(trans=[{97: 1}, {}], calls=[(), ()], accept=[False, True], counted=False, min=0)
    >>> wrap = R(trans=[{}, {}], calls=[((0, 1), (1, 1)), ()], accept=[False, True], counted=False, min=0)
    >>> liveness([ok, wrap])
    ([True, True], [[True, True], [True, True]])

    In C when the kernel is there (``compiled_dfa.c``; same result, see :func:`_liveness_in_c`).
    """
    if kernel_available():
        return _liveness_in_c(rules, solo)
    return _liveness_in_python(rules, solo)


def _liveness_in_c(rules: Sequence[Any], solo: "Sequence[Sequence[bool] | None] | None",
                   ) -> tuple[list[bool], list[Sequence[bool]]]:
    """:func:`liveness` by the kernel: what :func:`_matches_given` reads beyond the live states
    goes as flags (a counted rule with no minimum always matches) and, for an unordered rule,
    per required slot the callees that can fill it (one must match)."""
    always, groups = [], []
    for r in rules:
        always.append(bool(r.counted and r.min == 0))
        unordered = getattr(r, "unordered", None)
        if unordered is None:
            groups.append(None)
            continue
        slots = unordered.slots
        groups.append(tuple(
            tuple(c for c, ks in unordered.item_of.items() if any(slots.slots[k] == s for k in ks))
            for s in range(slots.n) if slots.required >> s & 1))
    return kernel.liveness([r.trans for r in rules], [r.calls for r in rules], [r.accept for r in rules],
                           list(solo) if solo is not None else [None] * len(rules), always, groups)


def _liveness_in_python(rules: Sequence[Any], solo: "Sequence[Sequence[bool] | None] | None",
                        ) -> tuple[list[bool], list[Sequence[bool]]]:
    n = len(rules)
    alive = [False] * n
    live: list[Any] = []  # per rule: its live states (a list while it may still grow)
    back: list[list[list[int]]] = []
    back_calls: list[list[list[tuple[int, int]]]] = []  # per rule, per state: (caller state, callee)
    waiting: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]  # per callee: (rule, from, to)
    for i, r in enumerate(rules):
        known = solo[i] if solo is not None else None
        if known is not None:  # nothing to search: the states are final and no edge waits
            live.append(known)
            back.append([])
            back_calls.append([])
            continue
        live.append([bool(a) for a in r.accept])
        b: list[list[int]] = [[] for _ in r.trans]
        bc: list[list[tuple[int, int]]] = [[] for _ in r.trans]
        for q, row in enumerate(r.trans):
            for t in set(row.values()):  # a row has up to 256 bytes, most to one or two targets
                b[t].append(q)
            for callee, t in r.calls[q]:
                bc[t].append((q, callee))
                waiting[callee].append((i, q, t))
        back.append(b)
        back_calls.append(bc)
    turned: list[int] = []  # rules found productive, whose callers' edges are still closed

    def spread(i: int, todo: list[int]) -> None:
        """Mark live what reaches the live states ``todo`` of rule ``i`` (already marked)."""
        mine, b, bc = live[i], back[i], back_calls[i]
        while todo:
            t = todo.pop()
            for p in b[t]:
                if not mine[p]:
                    mine[p] = True
                    todo.append(p)
            for p, callee in bc[t]:
                if alive[callee] and not mine[p]:
                    mine[p] = True
                    todo.append(p)

    def check(i: int) -> None:
        if not alive[i] and _matches_given(rules[i], alive, live[i]):
            alive[i] = True
            turned.append(i)

    for i in range(n):
        if back[i]:
            spread(i, [q for q, ok in enumerate(live[i]) if ok])
        check(i)
    while turned:
        c = turned.pop()
        for i, q, t in waiting[c]:
            if live[i][t] and not live[i][q]:
                live[i][q] = True
                spread(i, [q])
            check(i)
    return alive, live


def productive(rules: Sequence[Any]) -> list[bool]:
    """Per rule, whether it matches some string (see :func:`liveness`)."""
    return liveness(rules)[0]


def blame(rules: Sequence[Any], alive: Sequence[bool], start: int) -> int:
    """The rule to name when ``start`` matches nothing: the first unproductive rule reachable
    from it (breadth first) that matches nothing even if every rule it calls did; else (the
    rules only fail through one another: recursion with no way out) ``start`` itself."""
    everything = [True] * len(rules)
    seen, order = {start}, [start]
    for i in order:
        if not alive[i] and not _matches(rules[i], everything):
            return i
        for state_calls in rules[i].calls:
            for callee, _ in state_calls:
                if not alive[callee] and callee not in seen:
                    seen.add(callee)
                    order.append(callee)
    return start
