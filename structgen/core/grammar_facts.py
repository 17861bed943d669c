"""Facts of a whole grammar, derived once per compile from its rule automata.

:func:`prune_dead` refuses a grammar that matches nothing and drops what cannot lead to a
complete match (:mod:`structgen.core.liveness`); :func:`nullable` says which rules may read
nothing; :func:`check_left_recursion` refuses a rule that can call itself before reading a
byte; :func:`first_and_follow` gives the bytes that may come right after each rule returns;
:func:`fingerprints` gives each rule a digest of its IR and of everything it can call (the
mask caches' key). Rules are :class:`~structgen.core.automaton.RuleAutomaton` values
(``trans``, ``calls``, ``accept`` and the counted-rule fields).

Example
-------
>>> from structgen.core.automaton import build_automaton
>>> from structgen.core.ir import Grammar, Lit, Ref, Repeat, seq
>>> g = build_automaton(Grammar.of("list", list=seq(Lit(b"["), Repeat(Ref("item"), 0, None), Lit(b"]")),
...                                item=Lit(b"x")))
>>> [sorted(chr(b) for b in f) for f in g.follow], g.nullable
([[], [']', 'x']], [False, False])
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from structgen.core.dfa_kernel import kernel, kernel_available
from structgen.core.liveness import blame, liveness
from structgen.core.memo import kept_by_id
from structgen.errors import CompileError, EmptyLanguageError

#: a :class:`~structgen.core.automaton.RuleAutomaton` (that module imports this one)
Rule = Any

__all__ = ["prune_dead", "nullable", "check_left_recursion", "first_and_follow", "fingerprints"]


def prune_dead(rules: list[Rule], start: int,
                solo: "list[tuple[bool, ...] | None] | None" = None) -> list[Rule]:
    """Refuse a grammar that matches nothing; drop the calls and states that cannot lead to a
    complete match (:mod:`structgen.core.liveness`), so no mask lets a sequence into them.
    ``solo``: the live states of rules that call nothing, where known (see :func:`liveness`)."""
    alive, live_per_rule = liveness(rules, solo)
    if not alive[start]:
        culprit = rules[blame(rules, alive, start)].name
        raise EmptyLanguageError(f"rule '{culprit}' matches nothing, so the grammar matches nothing",
                                 rule=culprit)
    out = []
    for r, live in zip(rules, live_per_rule):
        if all(live) and all(alive[c] for qc in r.calls for c, _ in qc):
            out.append(r)
            continue
        trans = [{b: t for b, t in row.items() if live[t]} if live[q] else {} for q, row in enumerate(r.trans)]
        calls = [tuple((c, t) for c, t in qc if alive[c] and live[t]) if live[q] else ()
                 for q, qc in enumerate(r.calls)]
        out.append(dataclasses.replace(r, trans=trans, calls=calls))
    return out


def nullable(rules: list[Rule]) -> list[bool]:
    null = [r.counted and r.min == 0 for r in rules]
    changed = True
    while changed:
        changed = False
        for i, r in enumerate(rules):
            if null[i] or r.counted:
                continue
            if _state_nullable(r, 0, null, set()):
                null[i] = changed = True
    for i, r in enumerate(rules):
        if r.item_calls and _state_nullable(r, 0, null, set()):
            raise CompileError(f"counted rule '{r.name}': an item may read nothing (through the "
                               "rules it calls); each item must read at least one byte")
    return null


def _state_nullable(r: Rule, q: int, null: list[bool], seen: set[int]) -> bool:
    if r.accept[q]:
        return True
    seen.add(q)
    return any(null[c] and t not in seen and _state_nullable(r, t, null, seen) for c, t in r.calls[q])


def check_left_recursion(rules: list[Rule], null: list[bool]) -> None:
    # Edge r -> c when r can call c before reading any byte.
    graph: list[set[int]] = []
    for r in rules:  # a counted rule's later items come after bytes: only its first item counts
        succ: set[int] = set()
        todo, seen = [0], {0}
        while todo:
            q = todo.pop()
            for c, t in r.calls[q]:
                succ.add(c)
                if null[c] and t not in seen:
                    seen.add(t)
                    todo.append(t)
        graph.append(succ)
    color = [0] * len(rules)

    def visit(i: int, path: list[int]) -> None:
        color[i] = 1
        for j in graph[i]:
            if color[j] == 1:
                cycle = " -> ".join(rules[k].name for k in path[path.index(j):] + [j])
                raise CompileError(f"left recursion: {cycle} can call itself without reading "
                                   "input; rewrite it so each loop reads at least one byte")
            if color[j] == 0:
                visit(j, path + [j])
        color[i] = 2

    for i in range(len(rules)):
        if color[i] == 0:
            visit(i, [i])


def _reach(r: Rule, q: int, null: list[bool]) -> tuple[set[int], set[int], bool]:
    """From state ``q`` of ``r``, skipping calls to nullable rules: the bytes it may read, the
    rules it may call, and whether it may complete without reading."""
    byts: set[int] = set()
    calls: set[int] = set()
    done = False
    todo, seen = [q], {q}
    while todo:
        s = todo.pop()
        byts.update(r.trans[s])
        done = done or r.accept[s]
        for c, t in r.calls[s]:
            calls.add(c)
            if null[c] and t not in seen:
                seen.add(t)
                todo.append(t)
    return byts, calls, done


def _propagate(sets: list[set[int]], flows: list[set[int]]) -> None:
    """Least fixpoint of ``sets[j] ⊇ sets[i]`` for every ``j`` in ``flows[i]`` (a worklist, so
    each set grows at most 256 times however long the chains are)."""
    todo = list(range(len(sets)))
    queued = [True] * len(sets)
    while todo:
        i = todo.pop()
        queued[i] = False
        for j in flows[i]:
            if not sets[i] <= sets[j]:
                sets[j] |= sets[i]
                if not queued[j]:
                    queued[j] = True
                    todo.append(j)


def first_and_follow(rules: list[Rule], null: list[bool]) -> list[frozenset[int]]:
    """The bytes that may come right after each rule returns (``follow``).

    Linear in the grammar: each (rule, state) is explored once, then sets flow along a
    dependency graph (a rule's first bytes into its callers', a caller's follow into a callee
    called last), instead of re-walking every rule until nothing changes. In C when the kernel
    is there (``compiled_dfa.c``: the same sets, as 256-bit masks; ~100 ms of Python on the
    largest JSON schemas), else :func:`_first_and_follow_in_python`.
    """
    if kernel_available():
        return kernel.first_and_follow([packed_rows(r.trans) for r in rules], [r.calls for r in rules],
                                       [r.accept for r in rules], [bool(x) for x in null],
                                       [bool(r.counted) for r in rules])
    return _first_and_follow_in_python(rules, null)


def packed_rows(trans: list[dict[int, int]]) -> bytes:
    """A rule's rows as the kernel reads them (``rows_read`` in ``compiled_dfa.c``: each state's
    bytes and targets), made once per rows object: a rule's automaton is cached and shared by
    every grammar that has the rule, and reading its dicts again was most of
    :func:`first_and_follow` (2 ms of a SQL compile, whose name tokens are ~1,000 states)."""
    # about as many as the rule cache keeps (it holds the rows too)
    return kept_by_id(_PACKED_ROWS, trans, kernel.rows_read, 2048)


#: ``id(trans)`` -> ``(trans, packed)`` (:func:`~structgen.core.memo.kept_by_id`)
_PACKED_ROWS: dict[int, tuple[list[dict[int, int]], bytes]] = {}


def _first_and_follow_in_python(rules: list[Rule], null: list[bool]) -> list[frozenset[int]]:
    # first[i]: bytes rule i may read first (through calls)
    first = [set() for _ in rules]
    into_first: list[set[int]] = [set() for _ in rules]  # c -> rules whose first includes c's
    for i, r in enumerate(rules):
        byts, calls, _ = _reach(r, 0, null)
        first[i] = byts
        for c in calls:
            into_first[c].add(i)
    _propagate(first, into_first)
    follow = [set() for _ in rules]
    into_follow: list[set[int]] = [set() for _ in rules]  # i -> callees i may return through
    for i, r in enumerate(rules):
        after: dict[int, tuple[set[int], bool]] = {}
        for q in range(len(r.trans)):
            for c, t in r.calls[q]:
                if t not in after:
                    byts, calls, done = _reach(r, t, null)
                    if done and r.counted:  # the item ends: another may start, or the rule end
                        more_bytes, more_calls, _ = _reach(r, 0, null)
                        byts, calls = byts | more_bytes, calls | more_calls
                    for d in calls:
                        byts |= first[d]
                    after[t] = (byts, done)
                byts, done = after[t]
                follow[c] |= byts
                if done:
                    into_follow[i].add(c)
    _propagate(follow, into_follow)
    return [frozenset(f) for f in follow]


def fingerprints(rules: list[Rule], digests: list[str]) -> list[str]:
    """A digest per rule of its IR and that of every rule it can call (names included).

    Computed over strongly connected components in reverse topological order: a component's
    digest covers its members' IR and the digests of the components it calls, so the work is
    linear in the grammar (a rule-by-rule walk of everything reachable is quadratic).
    """
    callees = [sorted({c for state_calls in r.calls for c, _ in state_calls}) for r in rules]
    own = [rules[i].name + "=" + d for i, d in enumerate(digests)]
    out = [""] * len(rules)
    # callees' components come first; in C (compiled_dfa.c, step for step) when it is there
    for component in kernel.components(callees) if kernel_available() else _components(callees):
        if len(component) == 1:  # most rules: no recursion through them
            i = component[0]
            outside = sorted({out[c] for c in callees[i] if c != i})
            shared = hashlib.sha1("\n".join([own[i]] + outside).encode()).hexdigest()
        else:
            members = set(component)
            outside = sorted({out[c] for i in component for c in callees[i] if c not in members})
            shared = hashlib.sha1("\n".join(sorted(own[i] for i in component) + outside).encode()).hexdigest()
        for i in component:
            out[i] = hashlib.sha1((own[i] + "\n" + shared).encode()).hexdigest()[:20]
    return out


def _components(succ: list[list[int]]) -> list[list[int]]:
    """Strongly connected components (Tarjan, iterative), each after those it reaches."""
    index = [-1] * len(succ)
    low = [0] * len(succ)
    on_stack = [False] * len(succ)
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(len(succ)):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, k = work.pop()
            if k == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if k < len(succ[v]):
                work.append((v, k + 1))
                w = succ[v][k]
                if index[w] < 0:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if work:  # v is done: pass its low link to the parent
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                out.append(component)
    return out
