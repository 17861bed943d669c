"""Which source drafts at each step, and how long: measured payoff decides.

One :class:`DraftController` per row. Each step it asks the cheap sources (forced text, prompt
lookup) for their drafts, and the costly ones (a draft model, whose every token is a pass of its
own) only where their expected payoff could beat the best cheap draft. A draft is scored by the
expected tokens it yields per unit of cost, from the acceptance measured so far for each of its
tokens' labels (``forced`` text, ``lookup`` copies, ``model`` guesses: regions of the grammar,
in effect) and the pass-cost curve (:meth:`~structgen.decoding.costs.PassCosts.best_cut`); it is
cut where that peaks, and only proposed when it beats a plain step (one token per 1-position
pass). Acceptance is learned per label, as a running estimate over the positions judged.

Example
-------
>>> from structgen.decoding.controller import Acceptance
>>> a = Acceptance(prior=0.9)
>>> a.record(("forced", "forced", "lookup"), kept=2)
>>> round(a["forced"], 3), round(a["lookup"], 3), a["model"]
(0.919, 0.81, 0.9)
"""

from __future__ import annotations

from typing import Sequence

from structgen.decoding.costs import PassCosts
from structgen.decoding.drafts import Draft, DraftSource
from structgen.engine.matcher import Matcher

__all__ = ["Acceptance", "DraftController"]

#: Weight of one judged position in a label's running acceptance estimate.
STEP = 0.1


class Acceptance:
    """Running acceptance per label: the chance a draft token of that label is kept, given the
    tokens before it were. Starts at ``prior`` (or at ``start[label]``)."""

    def __init__(self, prior: float, start: dict[str, float] | None = None) -> None:
        self.prior = prior
        self.rates: dict[str, float] = dict(start or {})

    def __getitem__(self, label: str) -> float:
        return self.rates.get(label, self.prior)

    def record(self, labels: Sequence[str], kept: int) -> None:
        """A draft with these token labels kept its first ``kept`` tokens: each position up to
        and including the first refused one was judged."""
        for i, label in enumerate(labels[:kept + 1]):
            self.rates[label] = (1 - STEP) * self[label] + STEP * (i < kept)


class DraftController:
    """Chooses each step's draft for one row among ``sources`` (see the module notes)."""

    def __init__(self, sources: Sequence[DraftSource], costs: PassCosts, acceptance: Acceptance) -> None:
        # cheap sources first: their drafts set the bar a costly source must beat
        self.sources = sorted(sources, key=lambda s: getattr(s, "cost_per_token", 0.0))
        self.costs = costs
        self.acceptance = acceptance

    def propose(self, matcher: Matcher, tokens: Sequence[int], limit: int, costs: PassCosts | None = None, *,
                cheap_only: bool = False) -> Draft:
        """The best draft to verify after ``tokens`` (empty when a plain step pays more), judged
        by ``costs`` (default: the controller's curve; a batch passes its curve at the batch's
        size, :meth:`PassCosts.at`). It is not cut: the pass's width cuts it, chosen for the
        whole batch from every row's :meth:`expected` tokens
        (:meth:`PassCosts.best_width`). ``cheap_only`` leaves out the sources with a cost per
        token (a draft model: in a batch it would run one pass per row per token)."""
        costs = costs or self.costs
        best, best_rate = Draft((), ""), 1.0
        for source in self.sources:
            per_token = getattr(source, "cost_per_token", 0.0)
            ask = limit
            if per_token > 0 and cheap_only:
                continue
            if per_token > 0:
                # Expected payoff before paying for it: only run it where it could win.
                ask, rate = costs.best_cut([self.acceptance[source.name]] * limit, per_token)
                if ask == 0 or rate <= best_rate:
                    continue
            draft = source.propose(matcher, tokens, ask)
            if not draft.tokens:
                continue
            k, rate = costs.best_cut([self.acceptance[draft.label(i)] for i in range(len(draft))])
            if k and rate > best_rate:
                best, best_rate = draft, rate
        return best

    def expected(self, draft: Draft) -> list[float]:
        """Tokens a pass verifying the first ``k`` tokens of ``draft`` is expected to yield, for
        ``k = 0 .. len(draft)`` (the chosen token, then each draft token while all before it
        were kept)."""
        out, chance = [1.0], 1.0
        for i in range(len(draft)):
            chance *= self.acceptance[draft.label(i)]
            out.append(out[-1] + chance)
        return out

    def record(self, draft: Draft, kept: int, choice: int | None = None) -> None:
        """``draft`` was verified and kept ``kept`` tokens (the model wrote ``choice`` at the
        first refused one): learn from it."""
        self.acceptance.record([draft.label(i) for i in range(len(draft))], kept)
        for source in self.sources:
            if source.name == draft.source:
                source.record(draft, kept, choice)
