"""The shape of a keyword's registry entry (:class:`Keyword`) and the table of them (:class:`Registry`).

Why: a keyword's support status, ``lenient`` rule, README note, merge, negation, expansion and
lowering are one entry, so a new keyword is one change in one place
(:mod:`structgen.frontends.json_schema.keywords` holds the entries). This module holds no
keyword itself, so the merger can be handed a registry without importing the entries.

Example
-------
>>> reg = Registry([Keyword("minLength", "string", note="code points", lenient=True)])
>>> sorted(reg.supported), sorted(reg.lenient), reg["minLength"].kind
(['minLength'], ['minLength'], 'string')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal

__all__ = ["Keyword", "Registry", "Kind"]

Kind = Literal["any", "object", "array", "string", "number", "applicator", "reference"]


@dataclass(frozen=True)
class Keyword:
    """One JSON Schema keyword that constrains instances.

    ``note``: how structgen reads it (the README's keyword table); ``None``: refused with an
    :class:`~structgen.errors.UnsupportedFeatureError` naming it and its JSON pointer.
    ``lenient``: whether ``lenient=True`` may drop it where it cannot be honoured (each only
    narrows what is valid, so dropping one widens the language; recorded).
    ``merge(gathering, part, keyword)``: folds the keyword of one subschema into the merged facts
    (:mod:`~structgen.frontends.json_schema.facts`); one function may serve a group of keywords
    read together (it runs once per subschema). ``expand(merger, part, keyword, terms, stack)``:
    for an applicator, its terms in the disjunctive normal form
    (:mod:`~structgen.frontends.json_schema.dnf`). ``negate``: its exact negation
    (:mod:`~structgen.frontends.json_schema.negation`); ``None``: ``not`` over it is refused.
    ``lower``: the lowering that reads its facts (one per kind, e.g. ``object_expr``).
    ``checked_with``: keywords a value check must see beside it (``enum`` values are checked
    by python-jsonschema against each subschema's local keywords).
    """

    name: str
    kind: Kind
    note: str | None = None
    lenient: bool = False
    merge: Callable[..., None] | None = None
    expand: Callable[..., list] | None = None
    negate: Callable[..., Any] | None = None
    lower: Callable[..., Any] | None = None
    checked_with: frozenset[str] = field(default_factory=frozenset)

    @property
    def supported(self) -> bool:
        return self.note is not None


class Registry:
    """The keywords in order (merges and expansions run in this order), with the sets read from them."""

    def __init__(self, entries: Iterable[Keyword]) -> None:
        self._entries: dict[str, Keyword] = {}
        for entry in entries:
            if entry.name in self._entries:
                raise ValueError(f"keyword {entry.name!r} registered twice")
            self._entries[entry.name] = entry
        supported = [e for e in self._entries.values() if e.supported]
        #: every keyword that constrains instances (supported or refused)
        self.assertions = frozenset(self._entries)
        self.supported = frozenset(e.name for e in supported)
        self.lenient = frozenset(e.name for e in self._entries.values() if e.lenient)
        #: keywords merged into facts (checked on enum values): each constrains one kind of value
        self.local = frozenset(e.name for e in supported if e.merge is not None)
        self.negatable = frozenset(e.name for e in supported if e.negate is not None)
        self.checked_with = {e.name: e.checked_with for e in supported if e.checked_with}
        self._merges = [(e.name, e.merge) for e in supported if e.merge is not None]
        self._merge_names = frozenset(name for name, _ in self._merges)
        # by the merged keywords a subschema has: a term's merge asks once per part (~50k
        # times in a large schema's translation), for a few hundred distinct keyword sets
        self._merges_by_names: dict[frozenset[str], tuple[tuple[str, Callable[..., None]], ...]] = {}
        self.expansions = [(e.name, e.expand) for e in supported if e.expand is not None]

    def __getitem__(self, name: str) -> Keyword:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Keyword]:
        return iter(self._entries.values())

    def merges_for(self, schema: dict) -> tuple[tuple[str, Callable[..., None]], ...]:
        """The merges a subschema's keywords call, in registry order, each function once."""
        names = self._merge_names.intersection(schema)
        got = self._merges_by_names.get(names)
        if got is None:
            seen: set[int] = set()
            out = []
            for name, merge in self._merges:
                if name in names and id(merge) not in seen:
                    seen.add(id(merge))
                    out.append((name, merge))
            got = self._merges_by_names[names] = tuple(out)
        return got
