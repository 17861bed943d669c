"""Masks for a batch whose rows are logits rows, not requests: vLLM's Model Runner V2.

There a request lives in a *slot* (reused through a free list), the batch is reordered every
step, and under speculative decoding a request owns one logits row per draft position: row 0
predicts the token after its committed tokens, row ``j`` the one after the committed tokens and
this step's first ``j`` draft tokens (fed as the inputs of its rows 1..j). :class:`SlotRows`
keeps one matcher per constrained slot and, for each step, brings it to the slot's committed
output (read from the engine's token history, so preemption, resumption and slot reuse all come
down to those tokens), then walks each draft row's prefix to mask it and rolls the drafts back.
A draft the grammar refuses will be rejected by the row before it (that row allows it no
probability), so its row and the ones after it only allow end-of-sequence.

Example
-------
>>> import torch
>>> from structgen.engine.compiler import Compiler
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([b"a", b"b", None], eos_ids=[2])
>>> rows = SlotRows(3, vocab.eos_ids)
>>> rows.set(5, Compiler(vocab).regex("ab").matcher())
>>> # slot 5 has no output yet; its row 0 and a draft row whose input is "a" (token 0)
>>> out = rows.mask(torch.zeros(2, 3), slots=[5, 5], local=[0, 1], inputs=[7, 0], committed=lambda s: {5: []})
>>> out.tolist()
[[0.0, -inf, -inf], [-inf, 0.0, -inf]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from structgen.decoding.masking import Masker
from structgen.integrations.rows import BatchRows, Row, apply_words, check_logits, fill_row, sync_row

if TYPE_CHECKING:
    import torch

__all__ = ["SlotRows"]


class SlotRows:
    """Constrained slots of a batch of logits rows (see the module); slots not set are left alone."""

    def __init__(self, width: int, eos_ids: Sequence[int]) -> None:
        checked = BatchRows(width, eos_ids)  # the same checks of width and end-of-sequence ids
        self.masker: Masker = checked.masker
        self.eos_only = checked.eos_only
        self.slots: dict[int, Row] = {}

    def set(self, slot: int, matcher: object | None, limit: int | None = None) -> None:
        """Slot ``slot`` now holds a request (whatever held it before is dropped); None for an
        unconstrained one. ``limit``: its token budget, kept by every row (a draft row's prefix
        counts its drafts)."""
        if matcher is None:
            self.slots.pop(slot, None)
        else:
            self.slots[slot] = Row(matcher, [], limit=limit)  # type: ignore[arg-type]

    def mask(self, logits: "torch.Tensor", *, slots: Sequence[int], local: Sequence[int], inputs: Sequence[int],
             committed: Callable[[list[int]], dict[int, list[int]]]) -> "torch.Tensor":
        """``logits`` with every constrained slot's rows masked, in place.

        Per logits row: ``slots`` its request's slot, ``local`` its offset among that request's
        rows, ``inputs`` the token fed at its position (a draft token for ``local`` > 0).
        ``committed(slots)`` gives each constrained slot's committed output tokens.
        """
        check_logits(logits, "SlotRows.mask: logits")
        rows: dict[int, list[tuple[int, int]]] = {}
        for r, slot in enumerate(slots):
            if slot in self.slots:
                rows.setdefault(int(slot), []).append((int(local[r]), r))
        if not rows:
            return logits
        outputs = committed(sorted(rows))
        order: list[int] = []
        words = self.masker.words(sum(len(v) for v in rows.values()))
        for slot, items in rows.items():
            row = self.slots[slot]
            row.output = outputs[slot]
            sync_row(row, slot, self.masker.width)
            dead, drafted = row.dead, 0
            for position, r in sorted(items):
                if position > 0 and not dead:  # this row's own input is the draft it comes after
                    dead = not row.matcher.advance(int(inputs[r]))
                    drafted += not dead
                fill_row(self.masker, words, len(order), row, self.eos_only, dead=dead)
                order.append(r)
            if drafted:
                row.matcher.rollback(drafted)
        return apply_words(self.masker, logits, order, words, self.eos_only)
