"""A compile budget in work units, so that a schema too large to compile fails fast and the same
way on every machine.

Work is counted, not timed: one unit per automaton state built (each rule's DFA, each regular
expression's), eight per state of a product automaton (patterns, formats and key languages
intersected: each state carries a row of up to 256 byte transitions). Compiling a schema runs under a budget
(:data:`DEFAULT_COMPILE_BUDGET`, or ``Compiler(..., budget=...)``); exceeding it raises
:class:`~structgen.errors.CompileError` naming the schema path being compiled when it ran out.
Outside a budget (the grammar engine used on its own) nothing is counted.

Example
-------
>>> from structgen.errors import CompileError
>>> with compile_budget(10, describe=lambda rule: f"/properties/{rule}"):
...     charge(8, "a")
...     try:
...         charge(8, "b")
...     except CompileError as err:
...         print(err)
compile budget exceeded: 16 work units of 10, while compiling /properties/b; simplify the input there, or raise the budget (Compiler(..., budget=...))
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from structgen.errors import BudgetExceededError

__all__ = ["DEFAULT_COMPILE_BUDGET", "BudgetExceededError", "affordable", "compile_budget", "charge", "affordable_text",
           "room", "describe_with", "place", "name_of", "once_per_compile"]

#: Work units one schema may take: a few seconds of work on this 2-core machine. Measured on
#: MaskBench (SmolLM2, flexible whitespace): the largest real schemas take a few hundred
#: thousand (Github_hard o82555, ten patterned strings of up to 255 characters, about 3 s);
#: a handwritten nest of patterns under not/anyOf (allany22) runs out after 2 s instead of
#: compiling for 32.
DEFAULT_COMPILE_BUDGET = 600_000




@dataclass
class _Budget:
    limit: int
    describe: Callable[[str], str]
    spent: int = 0
    places: list[str] = field(default_factory=list)  # what is being compiled, innermost last
    made: dict[Hashable, Any] = field(default_factory=dict)  # see once_per_compile


_CURRENT: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("structgen_budget", default=None)


@contextlib.contextmanager
def compile_budget(limit: int | None, describe: Callable[[str], str] = str) -> Iterator[None]:
    """Count work inside the block against ``limit`` (None: no limit). ``describe`` turns what
    :func:`charge` names (a rule, a pointer) into the schema path the error names. Inside
    another budget, the outer one keeps counting (one compile, one budget)."""
    if _CURRENT.get() is not None:
        yield
        return
    token = _CURRENT.set(None if limit is None else _Budget(limit, describe))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def describe_with(describe: Callable[[str], str]) -> None:
    """Replace how the current budget names places (the rule names are known after translation)."""
    budget = _CURRENT.get()
    if budget is not None:
        budget.describe = describe


def name_of(rule: str) -> str:
    """How the current budget names ``rule`` (a schema path in quotes), or ``rule`` outside one."""
    budget = _CURRENT.get()
    return rule if budget is None else budget.describe(rule)


class place:
    """Name what the work inside the block is for (a schema path), for charges that do not.

    A class, not a generator context manager: a large schema's translation enters one per
    subschema (thousands), and the generator's set-up cost more than the block's work."""

    __slots__ = ("where", "budget")

    def __init__(self, where: str) -> None:
        self.where = where
        self.budget = _CURRENT.get()

    def __enter__(self) -> None:
        if self.budget is not None:
            self.budget.places.append(self.where)

    def __exit__(self, *exc: object) -> None:
        if self.budget is not None:
            self.budget.places.pop()


T = TypeVar("T")


def once_per_compile(key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, made (and charged) once per compile for equal keys; outside a budget, every time.

    For pure constructions a schema may ask for twice: two properties under ``not: {format:
    date-time}`` take the same 5,000-state difference. Kept with the compile, not the process,
    so a schema's charges never depend on what an earlier compile made.

    >>> with compile_budget(100):
    ...     made = [once_per_compile("k", lambda: charge(8) or object()) for _ in range(2)]
    ...     print(made[0] is made[1], room())
    True 92
    """
    budget = _CURRENT.get()
    if budget is None:
        return make()
    got = budget.made.get(key, budget)
    if got is budget:  # not made yet (a failed make is not kept: it fails again)
        got = budget.made[key] = make()
    return got


def charge(units: int, where: str | None = None) -> None:
    """Spend ``units`` on ``where`` (default: the innermost :func:`place`); raise
    :class:`BudgetExceededError` when the budget is exceeded."""
    budget = _CURRENT.get()
    if budget is None:
        return
    budget.spent += units
    _refuse_past(budget, budget.spent, where)


def affordable_text(text: str, what: str, where: str | None = None) -> None:
    """Refuse ``text`` before a frontend reads it when a unit per character would not fit
    what is left of the budget (``what`` names it: "a pattern", "grammar text"). Nothing is
    spent: the automata the text becomes are charged as they are built, so a schema's total
    does not change; but reading and lowering are linear in the text, and an input this large
    would be refused only after all that work (a 3.9M-character regex literal: seconds).

    >>> with compile_budget(1_000):
    ...     try:
    ...         affordable_text("a" * 5_000, "a regular expression")
    ...     except BudgetExceededError as err:
    ...         print(str(err).split("; ")[0])
    compile budget exceeded: 5000 work units of 1000, while compiling the grammar (reading a regular expression of 5,000 characters, at least a unit each)
    """
    affordable(len(text), where, stage=f"reading {what} of {len(text):,} characters, at least a unit each")


def affordable(units: int, where: str | None = None, *, stage: str | None = None) -> None:
    """Raise :class:`BudgetExceededError` if spending ``units`` more would exceed the budget,
    without spending them: for a construction that charges its total once it is done (so that a
    cached result is charged the same), to stop it early when that total cannot fit. ``stage``
    says what the units would pay for when it is not building automaton states."""
    budget = _CURRENT.get()
    if budget is not None:
        _refuse_past(budget, budget.spent + units, where, stage)


def room() -> int | None:
    """The units still affordable (None outside a budget): a compiled loop that cannot call
    :func:`affordable` compares its work with this, and stops where :func:`affordable` would raise."""
    budget = _CURRENT.get()
    return None if budget is None else budget.limit - budget.spent


def _refuse_past(budget: _Budget, spent: int, where: str | None, stage: str | None = None) -> None:
    if spent > budget.limit:
        if where is None:
            where = budget.places[-1] if budget.places else "the grammar"
        doing = f" ({stage})" if stage else ""
        raise BudgetExceededError(f"compile budget exceeded: {spent} work units of {budget.limit}, "
                                  f"while compiling {budget.describe(where)}{doing}; simplify the input there, "
                                  "or raise the budget (Compiler(..., budget=...))")
