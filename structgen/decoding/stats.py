"""What one generation cost: passes, tokens, and drafts by source.

Example
-------
>>> from structgen.decoding.stats import GenerationStats
>>> s = GenerationStats(forward_passes=3, new_tokens=6)
>>> s.count_draft("forced", drafted=4, accepted=3)
>>> s.drafted_tokens, s.accepted_tokens, s.by_source["forced"].acceptance_rate, s.passes_per_token
(4, 3, 0.75, 0.3333333333333333)
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DraftStats", "GenerationStats", "StepStats"]


@dataclass(frozen=True)
class StepStats:
    """One decoding pass as a row saw it: ``rows`` in the batch, ``width`` positions fed per row
    (the widest row's; the others padded), this row's ``drafted`` and ``accepted`` tokens, the
    pass's ``pass_seconds`` (shared by the batch) and the loop's own ``overhead_seconds`` for the
    whole batch in that step (masks, matchers, drafts)."""

    rows: int
    width: int
    drafted: int
    accepted: int
    pass_seconds: float
    overhead_seconds: float


@dataclass
class DraftStats:
    """Drafts of one source: tokens proposed, tokens accepted, drafts cut short by a refusal."""

    drafted_tokens: int = 0
    accepted_tokens: int = 0
    rejected_drafts: int = 0

    @property
    def acceptance_rate(self) -> float:
        """Accepted over drafted tokens (0 when nothing was drafted)."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    def add(self, other: "DraftStats") -> None:
        self.drafted_tokens += other.drafted_tokens
        self.accepted_tokens += other.accepted_tokens
        self.rejected_drafts += other.rejected_drafts


@dataclass
class GenerationStats:
    """What one generation cost.

    ``forward_passes`` counts every model call, the prefill included; ``new_tokens`` excludes
    the final end-of-sequence token (an EOS the grammar forces costs no pass at all).
    ``drafted_tokens``, ``accepted_tokens`` and ``rejected_drafts`` are the totals over draft
    sources; ``by_source`` splits them by label (``"forced"`` text, ``"lookup"`` copies,
    ``"model"`` guesses; a composed draft counts each token under its own label).
    ``passes_by_source`` counts decoding passes by the source of the draft they verified
    (``"none"``: a plain step). ``steps`` has one :class:`StepStats` per decoding pass (batch
    size, width, drafted and accepted tokens, times); :attr:`mean_rows` and
    :attr:`mean_draft` summarise them.
    """

    forward_passes: int = 0
    prefill_tokens: int = 0
    new_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    rejected_drafts: int = 0
    seconds: float = 0.0
    speculation: str = "on"
    by_source: dict[str, DraftStats] = field(default_factory=dict)
    passes_by_source: dict[str, int] = field(default_factory=dict)
    steps: list[StepStats] = field(default_factory=list, repr=False)

    @property
    def mean_rows(self) -> float:
        """Mean batch size over the decoding passes (0 before any)."""
        return sum(s.rows for s in self.steps) / len(self.steps) if self.steps else 0.0

    @property
    def mean_draft(self) -> float:
        """Mean draft tokens this row verified per decoding pass (0 before any)."""
        return sum(s.drafted for s in self.steps) / len(self.steps) if self.steps else 0.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted over drafted tokens (0 when nothing was drafted)."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    @property
    def passes_per_token(self) -> float:
        """Decoding passes (prefill excluded) per new token."""
        return (self.forward_passes - 1) / self.new_tokens if self.new_tokens else 0.0

    def count_draft(self, source: str, *, drafted: int, accepted: int, refused: bool | None = None) -> None:
        """Count one verified draft of ``source``: ``drafted`` tokens, ``accepted`` of them kept;
        ``refused``: whether the draft was cut short at one of them (default: some were not kept)."""
        one = DraftStats(drafted, accepted, int(accepted < drafted if refused is None else refused))
        self.drafted_tokens += one.drafted_tokens
        self.accepted_tokens += one.accepted_tokens
        self.rejected_drafts += one.rejected_drafts
        self.by_source.setdefault(source, DraftStats()).add(one)

    def count_pass(self, source: str) -> None:
        """Count a decoding pass that verified a draft of ``source`` (``"none"``: no draft)."""
        self.passes_by_source[source] = self.passes_by_source.get(source, 0) + 1

    def add(self, other: "GenerationStats | None") -> None:
        """Add another run's passes, tokens, drafts and seconds (a retry of the same prompt:
        ``prefill_tokens`` stays); ``speculation`` becomes the other's."""
        if other is None:
            return
        for name in ("forward_passes", "new_tokens", "drafted_tokens", "accepted_tokens", "rejected_drafts"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds
        self.speculation = other.speculation
        for source, counts in other.by_source.items():
            self.by_source.setdefault(source, DraftStats()).add(counts)
        self.steps.extend(other.steps)
        for source, passes in other.passes_by_source.items():
            self.passes_by_source[source] = self.passes_by_source.get(source, 0) + passes
