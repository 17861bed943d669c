"""Context-free grammars on the stack runtime: left recursion rewritten away, language kept.

The runtime (:mod:`structgen.engine.pda`) runs rules top-down on a set of stacks, which covers
ambiguity (several live parses) and right or middle recursion, but a rule that calls itself
before reading a byte (``expr: expr "+" term | term``) would push forever. Grammar files may
say that, so :func:`remove_left_recursion` rewrites such a grammar into one with the same
*language* (the parse trees differ; a matcher only needs the language):

1. Rules that can match the empty string are split: every call of a nullable rule ``X`` becomes
   ``X⁺?``, where ``X⁺`` matches what ``X`` matches minus the empty string. After this no rule
   is nullable, so "leading" means "at the very first position" and hidden left recursion
   (``a: b? a "x"``) is plain left recursion.
2. Within each cycle of leading calls, Paull's algorithm: order the rules, substitute the
   bodies of earlier rules for their leading calls, then turn direct left recursion
   ``A: A α | β`` into ``A: β α*``.

Rule bodies are regular expressions over bytes and calls, so "the part of a body that starts
with a call of ``A``" is a left quotient, computed by :func:`_split`.

Example
-------
>>> from structgen.core.ir import Grammar, Lit, Ref, alt, seq, ByteClass
>>> g = Grammar.of("expr", expr=alt(seq(Ref("expr"), Lit(b"+"), Ref("num")), Ref("num")),
...                num=ByteClass.of("0-9"))
>>> print(remove_left_recursion(g))
expr ::= num ("+" num)*
num ::= [0-9]
"""

from __future__ import annotations

from typing import Callable

from structgen.errors import CompileError
from structgen.core.ir import Alt, ByteClass, Counted, Expr, Fsm, Grammar, Lit, Ref, Repeat, Seq, Unordered, alt, nodes, seq

__all__ = ["remove_left_recursion", "rules_where", "productive_rules"]

_EPS = Lit(b"")


#: how a rule-set property of an expression depends on its parts (:func:`rules_where`):
#: ``("all", parts)`` holds when every part does (no parts: it holds), ``("any", parts)`` when
#: one does (no parts: it never holds); a :class:`Ref` holds when its rule does
Parts = Callable[[Expr], "tuple[str, tuple[Expr, ...]]"]


def rules_where(rules: dict[str, Expr], parts: Parts) -> set[str]:
    """The least set of rule names whose bodies hold under ``parts`` (a fixpoint): nullable
    rules, rules that derive some text.

    Linear in the rules' IR: each node counts the parts it still waits for, and a part that
    comes to hold tells only the nodes above it (a rule's callers through its name), so a chain
    of 2,000 rules each calling the next is 2,000 steps, not 2,000 passes over every rule.

    >>> sorted(rules_where({"a": Ref("b"), "b": Seq((Lit(b"x"), Ref("c"))), "c": Lit(b"y"), "d": Ref("d")},
    ...                    _productive_parts))
    ['a', 'b', 'c']
    """
    waiting: dict[int, int] = {}  # id(node) -> parts it still waits for
    above: dict[int, list[Expr]] = {}  # id(node) -> the nodes it is a part of (once per occurrence)
    callers: dict[str, list[Expr]] = {}  # rule name -> its Ref nodes
    bodies: dict[int, list[str]] = {}  # id(body) -> the rules it is the body of
    holding: list[Expr] = []
    seen: set[int] = set()
    for name, body in rules.items():
        bodies.setdefault(id(body), []).append(name)
        todo = [body]
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if type(node) is Ref:
                waiting[id(node)] = 1
                callers.setdefault(node.name, []).append(node)
                continue
            mode, inner = parts(node)
            waiting[id(node)] = len(inner) if mode == "all" else 1
            if mode == "all" and not inner:
                holding.append(node)
            for part in inner:
                above.setdefault(id(part), []).append(node)
                todo.append(part)
    found: set[str] = set()
    while holding:
        node = holding.pop()
        lifted = list(above.get(id(node), ()))
        for name in bodies.get(id(node), ()):
            if name not in found:
                found.add(name)
                lifted += callers.get(name, ())
        for parent in lifted:
            left = waiting[id(parent)]
            if left > 0:
                waiting[id(parent)] = left - 1
                if left == 1:
                    holding.append(parent)
    return found


def _nullable_rules(rules: dict[str, Expr]) -> set[str]:
    return rules_where(rules, _nullable_parts)


_HOLDS: "tuple[str, tuple[Expr, ...]]" = ("all", ())
_NEVER: "tuple[str, tuple[Expr, ...]]" = ("any", ())


def _nullable_parts(e: Expr) -> "tuple[str, tuple[Expr, ...]]":
    """:data:`Parts` of matching the empty text (:func:`_nullable` for one expression)."""
    if isinstance(e, Lit):
        return _NEVER if e.data else _HOLDS
    if isinstance(e, ByteClass):
        return _NEVER
    if isinstance(e, Fsm):
        return _HOLDS if 0 in e.accept else _NEVER
    if isinstance(e, Seq):
        return "all", e.items
    if isinstance(e, Alt):
        return "any", e.items
    if isinstance(e, (Repeat, Counted)):
        return _HOLDS if e.min == 0 else ("all", (e.item,))
    if isinstance(e, Unordered):
        return "any", e.items
    raise TypeError(e)


def _productive_parts(e: Expr) -> "tuple[str, tuple[Expr, ...]]":
    """:data:`Parts` of deriving some text: every part of a sequence, one of an alternative."""
    if isinstance(e, Seq):
        return "all", e.items
    if isinstance(e, Alt):
        return "any", e.items
    if isinstance(e, Repeat):
        return _HOLDS if e.min == 0 else ("all", (e.item,))
    return _HOLDS


def productive_rules(rules: dict[str, Expr]) -> set[str]:
    """The rules that derive some text (the rest can never finish)."""
    return rules_where(rules, _productive_parts)


def _nullable(e: Expr, null: "set[str]") -> bool:
    if isinstance(e, Lit):
        return not e.data
    if isinstance(e, ByteClass):
        return False
    if isinstance(e, Fsm):
        return 0 in e.accept
    if isinstance(e, Ref):
        return e.name in null
    if isinstance(e, Seq):
        return all(_nullable(x, null) for x in e.items)
    if isinstance(e, Alt):
        return any(_nullable(x, null) for x in e.items)
    if isinstance(e, (Repeat, Counted)):
        return e.min == 0 or _nullable(e.item, null)
    if isinstance(e, Unordered):
        return any(r.name in null for r in e.items)
    raise TypeError(e)


def _leading_refs(e: Expr, null: "set[str]") -> set[str]:
    """Rules ``e`` may call before reading a byte."""
    if isinstance(e, Ref):
        return {e.name}
    if isinstance(e, Seq):
        out: set[str] = set()
        for x in e.items:
            out |= _leading_refs(x, null)
            if not _nullable(x, null):
                break
        return out
    if isinstance(e, Alt):
        return set().union(*(_leading_refs(x, null) for x in e.items))
    if isinstance(e, (Repeat, Counted)):
        return _leading_refs(e.item, null) if e.max != 0 else set()
    if isinstance(e, Unordered):
        return {r.name for r in e.items}
    return set()


def _cycles(rules: dict[str, Expr], null: "set[str]") -> list[list[str]]:
    """Strongly connected sets of rules that reach themselves through leading calls, in rule order."""
    succ = {n: _leading_refs(b, null) & rules.keys() for n, b in rules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    order = list(rules)

    def visit(v: str) -> None:  # Tarjan; grammars are small enough for recursion depth
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in succ[v]:
                out.append(sorted(comp, key=order.index))

    for v in order:
        if v not in index:
            visit(v)
    return out


# ---------------------------------------------------------------- step 1: no nullable rule

def _plus(name: str) -> str:
    return name + "+"


class _NoEmpty:
    """Rewrites bodies so that no rule matches the empty string (calls ``X`` become ``X⁺?``)."""

    def __init__(self, rules: dict[str, Expr], null: "set[str]") -> None:
        self.null = null
        self.rules = rules
        self.empty_only: set[str] = set()  # nullable rules that match nothing else

    def sub(self, e: Expr) -> Expr:
        """``e`` with every call of a nullable rule ``X`` replaced by ``X⁺?``."""
        if isinstance(e, Ref):
            if e.name not in self.null:
                return e
            return _EPS if e.name in self.empty_only else Repeat(Ref(_plus(e.name)), 0, 1)
        if isinstance(e, Seq):
            return seq(*(self.sub(x) for x in e.items))
        if isinstance(e, Alt):
            return alt(*(self.sub(x) for x in e.items))
        if isinstance(e, Repeat):
            return Repeat(self.sub(e.item), e.min, e.max)
        if isinstance(e, (Counted, Unordered)):
            raise CompileError("left recursion beside a counted or unordered rule is not supported")
        return e

    def nonempty(self, e: Expr) -> "Expr | None":
        """``e`` minus the empty string, over the rewritten calls; None: nothing is left."""
        if isinstance(e, Lit):
            return e if e.data else None
        if isinstance(e, ByteClass):
            return e
        if isinstance(e, Fsm):
            if 0 not in e.accept:
                return e
            from structgen.core.regular import difference
            return difference(e, _EPS, what="a terminal without its empty match")
        if isinstance(e, Ref):
            if e.name not in self.null:
                return e
            return None if e.name in self.empty_only else Ref(_plus(e.name))
        if isinstance(e, Alt):
            opts = [y for y in (self.nonempty(x) for x in e.items) if y is not None]
            return alt(*opts) if opts else None
        if isinstance(e, Seq):
            head, rest = e.items[0], seq(*e.items[1:]) if len(e.items) > 1 else _EPS
            opts = []
            h = self.nonempty(head)
            if h is not None:
                opts.append(seq(h, self.sub(rest)))
            if _nullable(head, self.null):
                r = self.nonempty(rest)
                if r is not None:
                    opts.append(r)
            return alt(*opts) if opts else None
        if isinstance(e, Repeat):
            if e.max == 0:
                return None
            h = self.nonempty(e.item)
            if h is None:
                return None
            tail = Repeat(self.sub(e.item), max(e.min - 1, 0), None if e.max is None else e.max - 1)
            return seq(h, tail) if tail.max != 0 else h
        raise CompileError("left recursion beside a counted repeat is not supported")

    def run(self, start: str) -> tuple[dict[str, Expr], str]:
        # Rules whose only match is the empty string: find them first (their X⁺ is nothing).
        while True:
            found = {n for n in self.null - self.empty_only if self.nonempty(self.rules[n]) is None}
            if not found:
                break
            self.empty_only |= found
        out: dict[str, Expr] = {}
        for name, body in self.rules.items():
            if name in self.null:
                if name not in self.empty_only:
                    out[_plus(name)] = self.nonempty(body)  # type: ignore[assignment]
            else:
                out[name] = self.sub(body)
        if start in self.null:  # the start keeps its empty match, in a rule nothing calls
            root = "start*"
            out[root] = self.sub(Ref(start))
            return out, root
        return out, start


# ---------------------------------------------------------------- step 2: Paull's algorithm

Split = tuple[dict[str, list[Expr]], list[Expr], bool]


def _split(e: Expr, heads: "set[str]") -> Split:
    """``e`` as ``Σ A·D[A] + Σ R + (ε if nullable)`` for the rules ``A`` in ``heads``: ``D[A]``
    is what follows a leading call of ``A``, ``R`` the options that start otherwise.
    Calls are of non-nullable rules here (step 1 ran)."""
    if isinstance(e, Lit):
        return {}, ([e] if e.data else []), not e.data
    if isinstance(e, ByteClass):
        return {}, [e], False
    if isinstance(e, Fsm):
        if 0 in e.accept:
            from structgen.core.regular import difference
            return {}, [difference(e, _EPS, what="a terminal without its empty match")], True
        return {}, [e], False
    if isinstance(e, Ref):
        return ({e.name: [_EPS]}, [], False) if e.name in heads else ({}, [e], False)
    if isinstance(e, Alt):
        d: dict[str, list[Expr]] = {}
        r: list[Expr] = []
        n = False
        for x in e.items:
            dx, rx, nx = _split(x, heads)
            for k, v in dx.items():
                d.setdefault(k, []).extend(v)
            r += rx
            n = n or nx
        return d, r, n
    if isinstance(e, Seq):
        rest = seq(*e.items[1:]) if len(e.items) > 1 else _EPS
        d0, r0, n0 = _split(e.items[0], heads)
        d = {k: [seq(x, rest) for x in v] for k, v in d0.items()}
        r = [seq(x, rest) for x in r0]
        if not n0:
            return d, r, False
        d1, r1, n1 = _split(rest, heads)
        for k, v in d1.items():
            d.setdefault(k, []).extend(v)
        return d, r + r1, n1
    if isinstance(e, Repeat):
        if e.max == 0:
            return {}, [], True
        tail = Repeat(e.item, max(e.min - 1, 0), None if e.max is None else e.max - 1)
        dx, rx, nx = _split(e.item, heads)
        tail_e: Expr = tail if tail.max != 0 else _EPS
        return ({k: [seq(x, tail_e) for x in v] for k, v in dx.items()}, [seq(x, tail_e) for x in rx],
                e.min == 0 or nx)
    raise CompileError("left recursion beside a counted repeat is not supported")


def _paull(rules: dict[str, Expr], cycle: list[str]) -> None:
    for i, a in enumerate(cycle):
        body = rules[a]
        for b in cycle[:i]:
            d, r, n = _split(body, {b})
            opts = [seq(rules[b], x) for x in d.get(b, [])] + r + ([_EPS] if n else [])
            body = alt(*opts)
        d, r, n = _split(body, {a})
        loop = [x for x in d.get(a, []) if x != _EPS]  # A: A (nothing more) adds no string
        base = r + ([_EPS] if n else [])
        if not base:
            raise CompileError(f"rule '{a}' matches no finite text: each of its alternatives "
                               "starts with the rule itself")
        rules[a] = seq(alt(*base), Repeat(alt(*loop), 0, None)) if loop else alt(*base)


def remove_left_recursion(grammar: Grammar) -> Grammar:
    """The grammar unchanged if no rule is left-recursive, else one with the same language whose
    rules are not (see the module docstring). The rewritten start rule keeps its name unless it
    matches the empty string (then it is ``start*``)."""
    rules = dict(grammar.rules)
    null = _nullable_rules(rules)
    if not _cycles(rules, null):
        return grammar
    rules, start = _NoEmpty(rules, null).run(grammar.start)
    for cycle in _cycles(rules, set()):
        _paull(rules, cycle)
    if _cycles(rules, set()):  # pragma: no cover - Paull's algorithm leaves none
        raise CompileError("internal error: left recursion is left after rewriting")
    used = _reachable(rules, start)
    return Grammar(tuple((n, b) for n, b in rules.items() if n in used), start).checked()


def _reachable(rules: dict[str, Expr], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for node in nodes(rules[todo.pop()]):
            if isinstance(node, Ref) and node.name not in seen:
                seen.add(node.name)
                todo.append(node.name)
    return seen
