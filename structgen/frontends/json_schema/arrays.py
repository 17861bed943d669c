"""Arrays of a JSON schema as grammar rules: items by position, counts, ``contains``, ``uniqueItems``.

An array is a sequence of elements; what element ``i`` may be is fixed by ``prefixItems`` (the
array form of ``items`` in older drafts) and then ``items``. Counts and the other array
keywords are read as a small automaton over *element classes*:

- no ``contains``/``uniqueItems``: one rule, the elements by position, the rest a
  :class:`~structgen.core.ir.Counted` rule of ``, item`` (``minItems``/``maxItems``): the count lives
  beside the rule's state, so ``maxItems: 10000`` costs no more states than ``maxItems: 10``;
- ``contains``: each element is either one that matches the ``contains`` subschema or one that
  does not (``not`` of it, which must be exact, see :mod:`structgen.frontends.json_schema.negation`), and the
  state counts the matches up to ``maxContains + 1``; with several ``contains`` (merged from
  ``allOf``, or left by a negation) an element is classed by the subset it matches, and the
  state counts each;
- ``uniqueItems``: each element is one literal of a finite set (an ``enum``, booleans, null),
  and the state is the set already written.

States are ``(elements written, matches per contains, literals used)``, capped where larger counts behave
alike; a rule per state says what may follow it. States from which no accepting end can be
reached are pruned, so a mask never lets a token into a dead end. At most
:data:`MAX_ARRAY_STATES` states, else :class:`~structgen.errors.UnsupportedFeatureError`.

Example
-------
>>> from structgen.frontends.json_schema.translate import schema_to_grammar
>>> g = schema_to_grammar({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
...                       whitespace="compact")
>>> from structgen.engine.compiled import CompiledGrammar
>>> from structgen.engine.vocab import Vocabulary
>>> m = CompiledGrammar(g, Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])).matcher()
>>> all(m.advance(b) for b in b'["b","a"') and m.forced_text()
']'
"""

from __future__ import annotations

from collections import deque
from typing import Any

from structgen.core.budget import charge
from structgen.errors import SchemaError, UnsupportedFeatureError, no_value
from structgen.core.ir import Counted, Expr, Lit, Ref, Repeat, Seq, alt, seq
from structgen.frontends.json_schema.facts import Merged
from structgen.frontends.json_schema.lowering import Lowering
from structgen.frontends.json_schema.scalars import literal
from structgen.frontends.json_schema.terms import Conj, Part
from structgen.frontends.json_schema.values import json_equal


__all__ = ["array_expr", "MAX_ARRAY_STATES", "MAX_UNIQUE_LITERALS", "MAX_CONTAINS"]

#: Bound on the states of one array's counting automaton (items x matches x literal sets).
MAX_ARRAY_STATES = 4096
#: More ``contains`` on one array than this are refused (each element is classed by the
#: subset of them it matches: 2**n classes).
MAX_CONTAINS = 3
#: ``uniqueItems`` over more literals than this is refused (the sets written grow as 2**n).
MAX_UNIQUE_LITERALS = 12


def array_expr(cv: Lowering, m: Merged) -> Expr:
    """The grammar of the arrays ``m`` allows (``m`` is one merged alternative of type array)."""
    lo, hi = m.min_items, m.max_items
    if hi is not None and hi < lo:
        raise no_value(SchemaError("maxItems is below minItems: no array fits", pointer=m.max_items_pointer))
    positions = [cv.position_or_none(conj) for conj in m.prefix]
    rest = cv.position_or_none(m.items if m.items is not None else Conj())
    # the most elements there can be: past an impossible position, or the prefix without a rest
    longest = hi
    for i, place in enumerate(positions + [rest]):
        if place is None:
            longest = i if longest is None else min(longest, i)
            break
    if longest is not None and lo > longest:
        where = m.min_items_pointer or m.pointer
        raise no_value(SchemaError(f"no array of at least {lo} items fits the item schemas", pointer=where))
    # a contains with minContains 0 and no maxContains holds for every array
    counted = [c for c in m.contains if c[1] > 0 or c[2] is not None]
    if len(counted) > MAX_CONTAINS:
        cv.refuse("contains", counted[MAX_CONTAINS][0].pointer,
                  f"{len(counted)} contains apply to one array (limit {MAX_CONTAINS})")
        counted = counted[:MAX_CONTAINS]
    if counted:
        classes = _contains_classes(cv, m, counted, positions, rest)
        if classes is not None:
            if m.unique is not None and (longest is None or longest > 1):
                cv.refuse("uniqueItems", m.unique, "uniqueItems beside contains is not supported")
            return _automaton(cv, m, counted, classes, lo, longest)
    if m.unique is not None and (longest is None or longest > 1):
        classes = _unique_classes(cv, m, positions, rest)
        if classes is not None:
            return _automaton(cv, m, [], classes, lo, longest)
    return _counted(cv, positions, rest, lo, longest)


def _counted(cv: Lowering, positions: list[Ref | None], rest: Ref | None, lo: int,
             longest: int | None) -> Expr:
    """``[`` the prefix elements, then ``, rest`` repeated: ``lo`` to ``longest`` in all."""
    ws = cv.ws
    comma = cv.comma
    n_prefix = len(positions)

    def tail(i: int) -> Expr:  # what may follow once i >= 1 elements are written
        if longest is not None and i >= longest:
            return Seq(())
        if i >= n_prefix:
            if rest is None:
                return Seq(())
            more = (max(lo - i, 0), None if longest is None else longest - i)
            if more in ((0, None), (0, 1)):
                return Repeat(seq(comma, rest), *more)
            # the count lives beside the rule's state: any bound costs the same states
            name = f"{rest.name}_count_{more[0]}_{'' if more[1] is None else more[1]}"
            return cv.rule(name, Counted(seq(comma, rest), *more))
        step = seq(comma, positions[i], tail(i + 1))
        return step if i < lo else Repeat(step, 0, 1)

    first = positions[0] if positions else rest
    options: list[Expr] = []
    if lo == 0:
        options.append(seq(Lit(b"["), ws, Lit(b"]")))
    if longest != 0 and first is not None:
        options.append(seq(Lit(b"["), ws, first, tail(1), ws, Lit(b"]")))
    tail = None  # type: ignore[assignment]  # it calls itself through its cell: emptied, freed at once
    return alt(*options)


# -- element classes: (expression, which contains it matches, literal index) per position

Class = tuple  # (expression, tuple[bool, ...] per counted contains, literal index or -1)


def _contains_classes(cv: Lowering, m: Merged, counted: list[tuple[Part, int, int | None]],
                      positions: list[Ref | None], rest: Ref | None) -> list[list[Class]] | None:
    """Per position (the last stands for every later one), the elements by which ``contains``
    subschemas they match (each combination: that subschema or its ``not``); None when
    ``lenient`` dropped the keyword."""
    negated = [Part({"not": part.schema}, part.pointer + "~not") for part, _, _ in counted]  # "~n" never occurs in a pointer
    out = []
    for i, place in enumerate(positions + [rest]):
        base = (m.prefix[i] if i < len(m.prefix) else m.items or Conj()).parts
        if place is None:
            out.append([])
            continue
        options = []
        for combo in range(1 << len(counted)):
            matches = tuple(bool(combo >> j & 1) for j in range(len(counted)))
            extra = tuple(part if hit else neg for (part, _, _), neg, hit in zip(counted, negated, matches))
            try:
                ref = cv.position_or_none(Conj(base + extra))
            except UnsupportedFeatureError as err:
                cv.refuse("contains", counted[0][0].pointer,
                          f"the items that do not match contains cannot be described exactly ({err.hint})")
                return None
            if ref is not None:
                options.append((ref, matches, -1))
        out.append(options)
    return out


def _unique_classes(cv: Lowering, m: Merged, positions: list[Ref | None],
                    rest: Ref | None) -> list[list[Class]] | None:
    """Per position, one class per literal it may hold (``uniqueItems`` over finite sets)."""
    literals: list[Any] = []
    out = []
    for i, place in enumerate(positions + [rest]):
        conj = m.prefix[i] if i < len(m.prefix) else (m.items or Conj())
        values = None if place is None else _finite_values(cv, conj)
        if place is not None and values is None:
            cv.refuse("uniqueItems", m.unique, "uniqueItems is exact only where every item is one of a "
                                               "finite set of values (enum, const, boolean, null)")
            return None
        options = []
        for v in values or []:
            k = next((j for j, u in enumerate(literals) if json_equal(u, v)), None)
            if k is None:
                k = len(literals)
                literals.append(v)
            options.append((literal(cv, v, conj.key[0] if conj.parts else m.pointer), (), k))
        out.append(options)
    if len(literals) > MAX_UNIQUE_LITERALS:
        cv.refuse("uniqueItems", m.unique, f"uniqueItems over {len(literals)} values (limit "
                                           f"{MAX_UNIQUE_LITERALS}: the automaton tracks the set written)")
        return None
    return out


def _finite_values(cv: Lowering, conj: Conj) -> list[Any] | None:
    """The values a place may hold when they are finitely many (deduplicated), else None."""
    values: list[Any] = []
    for alternative in cv.merger.alternatives(conj):
        if alternative.enum is not None:
            found = alternative.enum
        elif alternative.kinds <= {"boolean", "null"}:
            excluded = [v for v, _ in alternative.excluded]
            found = [v for v in ([True, False] if "boolean" in alternative.kinds else [])
                     + ([None] if "null" in alternative.kinds else [])
                     if not any(json_equal(v, x) for x in excluded)]
        else:
            return None
        values += [v for v in found if not any(json_equal(v, u) for u in values)]
    return values


# -- the counting automaton


def _automaton(cv: Lowering, m: Merged, counted: list[tuple[Part, int, int | None]],
               classes: list[list[Class]], lo: int, longest: int | None) -> Expr:
    """Rules over states (elements written, matches per contains, literals used), dead states pruned."""
    # counts that behave alike share a state; 0 (nothing written yet: no comma) stands alone
    n_cap = max(len(classes) - 1, lo, 1) if longest is None else longest
    caps = [hi + 1 if hi is not None else lo_c for _, lo_c, hi in counted]

    def moves(state: tuple[int, tuple[int, ...], frozenset[int]]):
        n, counts, used = state
        if longest is not None and n >= longest:
            return
        for expr, matches, which in classes[min(n, len(classes) - 1)]:
            if which in used:
                continue
            after = tuple(min(c + hit, cap) for c, hit, cap in zip(counts, matches, caps))
            if any(hi is not None and c > hi for c, (_, _, hi) in zip(after, counted)):
                continue
            yield expr, (min(n + 1, n_cap), after, used | {which} if which >= 0 else used)

    def accepting(state: tuple[int, tuple[int, ...], frozenset[int]]) -> bool:
        n, counts, _ = state
        return n >= lo and all(c >= lo_c for c, (_, lo_c, _) in zip(counts, counted))

    start = (0, (0,) * len(counted), frozenset())
    edges: dict[tuple, list[tuple[Expr, tuple]]] = {}
    todo = deque([start])
    while todo:
        s = todo.popleft()
        if s in edges:
            continue
        if len(edges) >= MAX_ARRAY_STATES:
            keyword = "contains" if counted else "uniqueItems"
            where = counted[0][0].pointer if counted else m.unique
            raise UnsupportedFeatureError(keyword, pointer=where,
                                          hint=f"counting it needs over {MAX_ARRAY_STATES} states")
        edges[s] = list(moves(s))
        todo.extend(t for _, t in edges[s] if t not in edges)
    charge(len(edges), m.pointer)
    live = {s for s in edges if accepting(s)}
    changed = True
    while changed:
        changed = False
        for s, out in edges.items():
            if s not in live and any(t in live for _, t in out):
                live.add(s)
                changed = True
    if start not in live:
        where = counted[0][0].pointer if counted else m.pointer
        raise no_value(SchemaError("no array satisfies the item counts and contains together", pointer=where))
    ws = cv.ws
    comma = cv.comma
    uid = cv.uid()
    names = {s: f"arr{uid}_{k}" for k, s in enumerate(s for s in edges if s in live)}
    for s, name in names.items():
        loops = [expr for expr, t in edges[s] if t == s]
        exits = [seq(comma, expr, Ref(names[t])) for expr, t in edges[s] if t != s and t in live]
        if accepting(s):
            exits.append(seq(ws, Lit(b"]")))
        body = alt(*exits)
        if loops:  # a state that repeats: a loop inside the rule, not a deeper stack
            body = seq(Repeat(seq(comma, alt(*loops)), 0, None), body)
        cv.rules[name] = body
    firsts = [seq(expr, Ref(names[t])) for expr, t in edges[start] if t in live and t != start]
    options: list[Expr] = []
    if accepting(start):
        options.append(seq(Lit(b"["), ws, Lit(b"]")))
    if firsts:
        options.append(seq(Lit(b"["), ws, alt(*firsts)))
    return alt(*options)
