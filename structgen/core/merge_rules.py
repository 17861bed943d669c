"""Rules that say the same thing become one rule: fewer automata to build and fewer stacks to walk.

A JSON schema's translation makes a rule per subschema, and large schemas repeat themselves: in
Github_ultra o48661, 170 objects each have an ``"enabled": <boolean>`` member, and 269
``additionalProperties`` are any value, so 7,261 rules have 2,636 distinct bodies. Each rule
costs an automaton at compile time, and each distinct rule a stack of its own at mask time (a
cold state walks it again).

:func:`merge_equal_rules` keeps the first of rules with equal bodies and points every call of the
others at it, then looks again, since bodies that called merged rules may now be equal too
(objects whose members were merged), until nothing changes. A rule whose body is one call of
another rule (an alias) is replaced by that rule. Equal bodies match equal languages, so the
grammar's language is unchanged. Rules with a lookahead are merged only with rules with the
same lookahead; an alias with a lookahead of its own is kept, and so is the start rule (errors
about the whole grammar name it).

Example
-------
>>> from structgen.core.ir import Grammar, Lit, Ref, seq
>>> g = Grammar.of("root", root=seq(Ref("a"), Ref("b"), Ref("c")), a=Lit(b"x"), b=Lit(b"x"), c=Ref("a"))
>>> print(merge_equal_rules(g))
root ::= a a a
a ::= "x"
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Callable

from structgen.core.ir import Alt, Expr, Grammar, Ref, Seq, alt, seq, shape, substitute

__all__ = ["merge_equal_rules"]


def merge_equal_rules(grammar: Grammar) -> Grammar:
    """``grammar`` with equal rules merged and aliases resolved (see the module); the same
    object when there is nothing to merge."""
    bodies = dict(grammar.rules)
    lookahead = dict(grammar.lookahead)
    position = {name: i for i, (name, _) in enumerate(grammar.rules)}
    position[grammar.start] = -1  # the start rule is never merged into another
    callees: dict[str, set[str]] = {}
    callers: defaultdict[str, set[str]] = defaultdict(set)
    merged: dict[str, str] = {}  # a merged rule -> the rule that stands for it (maybe merged later)

    def final(name: str) -> str:
        while name in merged:
            name = merged[name]
        return name

    first: dict[tuple[Expr, frozenset[int] | None], str] = {}  # a body -> the first rule with it
    keep = {grammar.start, *lookahead}  # aliases kept: errors name the start rule; a lookahead is the rule's own
    order = [name for name, _ in grammar.rules]
    todo = order
    while todo:
        new: list[str] = []
        for name in sorted(todo, key=position.__getitem__):
            if name in merged:
                continue
            body = bodies[name]
            if type(body) is Ref and name not in keep and final(body.name) != name:
                merged[name] = body.name  # an alias
                new.append(name)
                continue
            key = (body, lookahead.get(name))
            kept = first.setdefault(key, name)
            if kept == name:
                continue
            if position[kept] > position[name]:  # the first keeps its name, whichever changed last
                first[key], kept, name = name, name, kept
            merged[name] = kept
            new.append(name)
        if new and not callees:  # after the first round: the calls of the rules left (their
            # shapes are the compile's, kept on the bodies; most merged rules are never walked)
            for name in order:
                if name not in merged:
                    callees[name] = called = {callee for _, callee in shape(bodies[name])[0]}
                    for callee in called:
                        callers[callee].add(name)
        # the bodies that call a rule merged in this round: their calls renamed, compared again
        changed = sorted({caller for rule in new for caller in callers[rule] if caller not in merged},
                         key=position.__getitem__)
        renamed = _Renamer(merged, final)
        for name in changed:
            key = (bodies[name], lookahead.get(name))
            if first.get(key) == name:
                del first[key]
            bodies[name] = renamed(bodies[name])
            callees[name] = called = {final(callee) for callee in callees[name]}
            for callee in called:
                callers[callee].add(name)
        todo = changed
    if not merged:
        return grammar
    return Grammar(tuple((name, bodies[name]) for name in order if name not in merged), final(grammar.start),
                   tuple((name, f) for name, f in grammar.lookahead if name not in merged))


class _Renamer:
    """A body with its calls of merged rules renamed; parts shared between bodies (a key's
    characters are shared nodes) are renamed once per round. A class, not a closure that calls
    itself (a reference cycle that would keep every part it saw until the cyclic collector runs)."""

    def __init__(self, merged: dict[str, str], final: Callable[[str], str]) -> None:
        self.merged, self.final = merged, final
        self.done: dict[int, tuple[Expr, Expr]] = {}  # id(part) -> (part, renamed part): live parts only

    def renamed(self, called: str) -> Expr | None:
        return Ref(self.final(called)) if called in self.merged else None

    def __call__(self, e: Expr) -> Expr:
        got = self.done.get(id(e))
        if got is None:
            got = self.done[id(e)] = (e, substitute(e, self.renamed) if type(e) is not Seq and type(e) is not Alt
                                      else _rebuilt(e, [self(x) for x in e.items]))
        return got[1]


def _rebuilt(e: "Seq | Alt", items: list[Expr]) -> Expr:
    if all(map(operator.is_, items, e.items)):
        return e
    return seq(*items) if type(e) is Seq else alt(*dict.fromkeys(items))  # a | a: a
