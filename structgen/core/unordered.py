"""The bookkeeping of an :class:`~structgen.core.ir.Unordered` rule: which item may come next.

An unordered rule (a JSON object's members, in any order) keeps ``(written, got, count)`` beside
its automaton state: the bitmask of slots written, the bits of ``full`` the items written gave
(members that ``not`` asks for), and the number of items (capped at ``min`` without a ``max``:
beyond it counts behave alike). :class:`Slots` answers, per such triple and memoized, whether the
rule may end now, whether an item may start, and what the triple becomes after item ``k``; an
item is offered only while the rule can still end after it, so no state is a dead end.

Example
-------
>>> from structgen.core.ir import Ref, Lit, Unordered
>>> book = Slots.of(Unordered((Ref("a"), Ref("b")), (0, 1), Lit(b","), required=0b10))
>>> book.after(0, 0, 0, 0), book.can_end(0b01, 0, 0), book.can_end(0b11, 0, 0)  # no min: counts stay 0
((1, 0, 0), False, True)
>>> book.after(0, 0b01, 0, 0) is None  # slot 0 is written already
True
"""

from __future__ import annotations

from structgen.core.ir import Unordered
from structgen.core.memo import Recent
from structgen.errors import CompileError

__all__ = ["Slots"]

State = tuple[int, int, int]  # written, got, count

_SLOTS: "Recent[Unordered, Slots]" = Recent(2048)


class Slots:
    """Which items of an unordered rule may come next, per ``(written, got, count)``."""

    def __init__(self, body: Unordered) -> None:
        gives = body.gives or (0,) * len(body.items)
        self.slots, self.gives = body.slots, gives
        self.required, self.full, self.min, self.max = body.required, body.full, body.min, body.max
        n = max(body.slots, default=-1) + 1
        self.n = n
        self.all = (1 << n) - 1
        options: list[set[int]] = [set() for _ in range(n)]
        for s, g in zip(body.slots, gives):
            if s >= 0:
                options[s].add(g)
        missing = [s for s in range(n) if 0 not in options[s]]
        if missing or body.required & ~self.all or any(g & ~body.full for g in gives):
            raise CompileError(f"unordered rule {body}: every slot needs an item that gives nothing, "
                               "and required slots and given bits must exist")
        self.options = [sorted(o) for o in options]
        self.extra_plain = any(s < 0 and g == 0 for s, g in zip(body.slots, gives))
        self.extra_hits = sorted({g for s, g in zip(body.slots, gives) if s < 0 and g})
        self._plans: dict[tuple[int, int], tuple[tuple[int, float], ...]] = {}
        self._feasible: dict[State, bool] = {}
        self._can_add: dict[State, bool] = {}

    @staticmethod
    def of(body: Unordered) -> "Slots":
        """The bookkeeping of ``body``, shared per process (memos fill as states are reached)."""
        got = _SLOTS.get(body)
        if got is None:
            got = _SLOTS[body] = Slots(body)
        return got

    def __getstate__(self) -> dict:  # memos are rebuilt on demand, not pickled
        return {k: ({} if k.startswith("_") else v) for k, v in self.__dict__.items()}

    # -- per state

    def can_end(self, written: int, got: int, count: int) -> bool:
        return not self.required & ~written and got == self.full and count >= self.min

    def after(self, k: int, written: int, got: int, count: int) -> State | None:
        """The state after item ``k``, or None when it may not come now (its slot is written,
        it gives a bit already got, or the rule could not end well after it)."""
        s, g = self.slots[k], self.gives[k]
        if (s >= 0 and written >> s & 1) or g & got:
            return None
        count += 1
        if self.max is None:
            count = min(count, self.min)
        nxt = (written | (1 << s if s >= 0 else 0), got | g, count)
        return nxt if self.feasible(*nxt) else None

    def can_add(self, written: int, got: int, count: int) -> bool:
        """Whether some item may come now."""
        key = (written, got, count)
        hit = self._can_add.get(key)
        if hit is None:
            hit = self._can_add[key] = any(self.after(k, written, got, count) is not None
                                           for k in range(len(self.slots)))
        return hit

    def feasible(self, written: int, got: int, count: int) -> bool:
        """Whether the rule can still end from this state (with zero or more further items)."""
        key = (written, got, count)
        hit = self._feasible.get(key)
        if hit is None:
            low = self.min - count
            high = float("inf") if self.max is None else self.max - count
            hit = self._feasible[key] = any(a <= high and top >= low for a, top in self._plan(written, got))
        return hit

    def _plan(self, written: int, got: int) -> tuple[tuple[int, float], ...]:
        """Intervals ``[fewest, most]`` of further item counts that end the rule well.

        Every slot has an item that gives nothing, so from a way of ending with ``a`` items the
        free slots can be added one by one (and plain extra items without bound): each way of
        covering the bits still missing gives an interval.
        """
        key = (written, got)
        hit = self._plans.get(key)
        if hit is not None:
            return hit
        top_extra = float("inf") if self.extra_plain else 0
        if got == self.full:  # nothing to cover: the required slots, then anything (no list of
            # free slots: an object of 100+ properties asks this for every key it could add)
            fewest = bin(self.required & ~written).count("1")
            plan = [(fewest, self.n - bin(written & self.all).count("1") + top_extra)]
        else:
            free = [s for s in range(self.n) if not written >> s & 1]
            # fewest items, per bits got, over the free slots (required ones must be written)
            best: dict[int, int] = {got: 0}
            for s in free:
                req = self.required >> s & 1
                nxt: dict[int, int] = {}
                for g, a in best.items():
                    if not req and a < nxt.get(g, 1 << 30):
                        nxt[g] = a
                    for b in self.options[s]:
                        if (b or req) and not b & g and a + 1 < nxt.get(g | b, 1 << 30):
                            nxt[g | b] = a + 1
                best = nxt
            plan = []
            for g, a in best.items():
                for e in self._covers(self.full & ~g, 0):
                    plan.append((a + e, len(free) + e + top_extra))
        # a tuple of numbers: out of the cyclic collector's sight (a list is always in it, and
        # an object of 130 optional properties makes 16,000 plans)
        got_plan = self._plans[key] = tuple(plan)
        return got_plan

    def _covers(self, missing: int, used: int) -> list[int]:
        """Numbers of extra items (each giving disjoint bits) that give exactly ``missing``."""
        if not missing:
            return [used]
        low = missing & -missing  # the lowest missing bit: some extra item must give it
        out: list[int] = []
        for b in self.extra_hits:
            if b & low and not b & ~missing:
                out += self._covers(missing & ~b, used + 1)
        return sorted(set(out))
