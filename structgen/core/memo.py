"""A bounded memo that keeps the entries in use: the process-wide caches of compiled pieces.

Compiles share pieces by content (a JSON schema's strings, numbers and escapes are in every
grammar; keys such as ``"name"`` recur), so rule automata, walked keys and the like are memoized
per process. Each memo must stay bounded in a long-lived process, but emptying it when full
(what these memos did) also dropped the pieces every compile uses, and the next compiles paid
for all of them again: over MaskBench, a third of the rule lookups of a warm pass missed.

:class:`Recent` keeps two generations: lookups look in the young one, then the old one
(moving a hit there to the young one); when the young one is full it becomes the old one and
the previous old one is dropped. An entry used at least once per ``size`` new entries stays,
at most ``2 * size`` entries are held, and a hit costs one dict lookup (no reordering, as an
LRU would do on every hit). Safe to share between threads: a race may lose an entry or compute
one twice, never return a wrong one.

Example
-------
>>> memo = Recent(2)
>>> memo["a"], memo["b"] = 1, 2
>>> memo["c"] = 3                  # the young generation was full: "a" and "b" are now old
>>> memo.get("a"), memo.get("z")   # "a" is used again: it moves back to the young one
(1, None)
>>> memo["d"] = 4; memo["e"] = 5   # "b" was not used: dropped with its generation
>>> memo.get("b"), len(memo)
(None, 4)
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Hashable, TypeVar

__all__ = ["Recent", "kept_by_id"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MISSING = object()


class Recent(Generic[K, V]):
    """A memo of at most ``2 * size`` entries that keeps those used recently (see the module)."""

    __slots__ = ("size", "young", "old")

    def __init__(self, size: int) -> None:
        self.size = size
        self.young: dict[K, V] = {}
        self.old: dict[K, V] = {}

    def get(self, key: K, default: "V | None" = None) -> "V | None":
        got = self.young.get(key, _MISSING)
        if got is _MISSING:
            got = self.old.pop(key, _MISSING)
            if got is _MISSING:
                return default
            self[key] = got  # type: ignore[assignment]
        return got  # type: ignore[return-value]

    def __setitem__(self, key: K, value: V) -> None:
        if len(self.young) >= self.size:
            self.old, self.young = self.young, {}
        self.young[key] = value

    def __len__(self) -> int:
        return len(self.young) + len(self.old)

    def clear(self) -> None:
        self.young, self.old = {}, {}


def kept_by_id(table: dict, obj: Any, make: Callable[[Any], V], most: int) -> V:
    """``make(obj)``, kept in ``table`` by ``id(obj)`` for an object that never changes and
    has no cheap hash (a DFA's rows: lists of dicts). The entry holds ``obj``, so its id is not
    reused while it is there; past ``most`` entries the table starts again empty.

    >>> table, rows = {}, [{97: 1}]
    >>> kept_by_id(table, rows, len, 8), kept_by_id(table, rows, lambda r: 0 / 0, 8)
    (1, 1)
    """
    got = table.get(id(obj))
    if got is None or got[0] is not obj:
        if len(table) > most:
            table.clear()
        got = table[id(obj)] = (obj, make(obj))
    return got[1]
