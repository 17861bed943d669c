"""The rules of one schema's translation: by name, by the pointer each was built for, and merged
where equal.

Large schemas repeat themselves: in Github_ultra o48661, 170 objects each have an ``"enabled":
<boolean>`` member, and 269 ``additionalProperties`` are any value. :meth:`RuleTable.named`
builds a rule once per pointer (or conjunction of pointers) and, as it goes, lets a rule whose
body equals an earlier rule's *be* that rule, and a rule that is one call of another (a ``$ref``
alone) be the other: its pointer then names the rule that stands for it, so the rules that call
it call that rule, and their bodies may be equal in turn (objects whose members were merged).
Equal bodies match equal languages, so the grammar's language is unchanged. A rule referred to
while it was being built (recursion) is kept whatever its body;
:func:`~structgen.core.merge_rules.merge_equal_rules` finds what is left to merge.

Example
-------
>>> from structgen.core.ir import Lit
>>> table = RuleTable()
>>> table.named("/a", lambda: Lit(b"x")), table.named("/b", lambda: Lit(b"x")), table.by_pointer
(Ref(name='s_a'), Ref(name='s_a'), {'/a': 's_a', '/b': 's_a'})
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
from collections.abc import Callable

from structgen.core.budget import place
from structgen.core.ir import Expr, Ref, Seq, nodes

__all__ = ["RuleTable", "UndoOnError"]

#: A rule's body while it is being built (recursion may refer to the rule before it is done)
_BUILDING = Seq(())


class UndoOnError:
    """:meth:`RuleTable.undo_on_error`: a class, not a generator context manager, as a large
    schema enters one per subschema (thousands)."""

    __slots__ = ("tables", "sizes")

    def __init__(self, *tables: dict) -> None:
        self.tables, self.sizes = tables, tuple(map(len, tables))

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:  # BaseException included: forget what was made inside, then raise on
            for table, size in zip(self.tables, self.sizes):  # the entries added since, in order
                for key in list(table)[size:]:
                    del table[key]


class RuleTable:
    """Rules by name (in the order made), the rule of each pointer or conjunction of pointers,
    and the first rule of each body; ``merging=False`` keeps every rule as built (tests compare
    the two)."""

    def __init__(self, merging: bool = True) -> None:
        self.merging = merging
        self.rules: dict[str, Expr] = {}
        self.by_pointer: dict[str | tuple[str, ...], str] = {}
        self.by_body: dict[Expr, str] = {}
        self.called_early: set[str] = set()  # referred to while being built: kept
        self._uids = itertools.count()

    def uid(self) -> int:
        """A number no other call returns, for naming a group of helper rules (never reused,
        even where rules were merged or undone, so a name cannot meet an older rule's)."""
        return next(self._uids)

    def helper(self, name: str, body: Expr, *, mergeable: bool = False) -> Ref:
        """The helper rule ``name`` (an object's members, a string automaton), made with
        ``body`` the first time; ``mergeable``: the caller uses only the returned reference, so
        an earlier rule with an equal body may stand for it (an ``"enabled": <boolean>`` member
        in 170 objects is one rule)."""
        if name not in self.rules:
            same = self.by_body.get(body) if mergeable and self.merging else None
            if same is not None:
                return Ref(same)
            self.rules[name] = body
            self.by_body.setdefault(body, name)
        return Ref(name)

    def undo_on_error(self) -> UndoOnError:
        """Rules and names made inside are forgotten when it raises: a dropped alternative
        leaves no half-built rule behind for a later reference to find."""
        return UndoOnError(self.rules, self.by_pointer, self.by_body)

    def named(self, key: str | tuple[str, ...], build: Callable[[], Expr]) -> Ref:
        """The rule for ``key`` (``""`` is the root), built by ``build`` the first time, or
        the earlier rule that stands for it (see the module)."""
        name = self.by_pointer.get(key)
        if name is not None:
            if self.rules.get(name) is _BUILDING:
                self.called_early.add(name)
            return Ref(name)
        text = key if isinstance(key, str) else "&".join(key)
        name = "root" if key == "" else "s" + re.sub(r"[^A-Za-z0-9_]+", "_", text)
        if not isinstance(key, str) and len(name) > 64:  # several pointers: shortened
            name = name[:48] + "_" + hashlib.sha1(text.encode()).hexdigest()[:10]
        while name in self.rules:
            name += "_"
        with self.undo_on_error(), place(f"'{text or '/'}'"):
            self.by_pointer[key] = name
            self.rules[name] = _BUILDING
            body = build()
            if self.merging and name != "root" and name not in self.called_early:  # nothing refers to it yet
                same = body.name if type(body) is Ref else self.by_body.get(body)
                if same is not None:
                    del self.rules[name]
                    self.by_pointer[key] = same
                    return Ref(same)
            self.rules[name] = body
            self.by_body.setdefault(body, name)
        return Ref(name)

    def describer(self) -> Callable[[str], str]:
        """How a compile budget names a rule: the schema path it was built for (a merged
        rule's first), or for a helper rule (an object's tails, a string automaton) the path
        of the first schema rule using it.

        Worked out on first use: only a refusal names a rule, and walking every rule's IR took
        about 5% of a typical schema's compile."""
        rules, by_pointer = dict(self.rules), self.by_pointer  # as translated (the root is taken out next)

        @functools.cache
        def places() -> dict[str, str]:
            found: dict[str, str] = {}
            for key, name in by_pointer.items():
                found.setdefault(name, key if isinstance(key, str) else " & ".join(key))
            todo = list(found)
            for name in todo:  # breadth first: a helper takes the first schema rule's path
                for node in nodes(rules.get(name, Seq(()))):
                    if isinstance(node, Ref) and node.name not in found:
                        found[node.name] = found[name]
                        todo.append(node.name)
            return found

        def describe(name: str) -> str:
            got = places()
            return f"'{got[name] or '/'}'" if name in got else name
        return describe
