"""A serving engine's batch of rows, each with its own matcher, masked in one call.

Engines like vLLM keep a persistent batch: requests join a row, leave it, move to another row
(or swap), are preempted and come back later with the tokens they had. :class:`BatchRows` mirrors
that: a row holds the request's matcher and a live reference to its output tokens, and
:meth:`BatchRows.mask` first brings each matcher to its row's tokens (advancing the new ones,
rolling back to the common prefix if the tokens changed under it) and then masks every
constrained row of the logits in one call. So the mask is a pure function of each row's
output so far, whatever the engine did in between.

Example
-------
>>> import torch
>>> from structgen.engine.vocab import Vocabulary
>>> from structgen.engine.compiler import Compiler
>>> vocab = Vocabulary([b"a", b"b", None], eos_ids=[2])
>>> rows = BatchRows(3, vocab.eos_ids)
>>> out = []                                    # the engine's live list of row 0's output
>>> rows.add(0, Compiler(vocab).regex("ab").matcher(), out)
>>> rows.mask(torch.zeros(2, 3))[0].tolist()    # row 1 is unconstrained
[0.0, -inf, -inf]
>>> out.append(0); rows.mask(torch.zeros(2, 3))[0].tolist()
[-inf, 0.0, -inf]
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from structgen.decoding.masking import Masker
from structgen.engine.matcher import Matcher

if TYPE_CHECKING:
    import torch

__all__ = ["BatchRows", "Row"]

log = logging.getLogger(__name__)


@dataclass
class Row:
    """One request in the batch: its matcher and the engine's (live) list of its output tokens.
    ``refused`` is set when the output left the grammar (a token the mask did not allow, e.g. a
    stop string the engine inserted): ``(position, token)``. While the output holds that token
    there the row only allows end-of-sequence; an output rolled back before it (transformers'
    assisted generation checks drafts that way) walks on from the tokens it shares."""

    matcher: Matcher
    output: Sequence[int]
    refused: tuple[int, int] | None = None

    @property
    def dead(self) -> bool:
        return self.refused is not None


class BatchRows:
    """The constrained rows of an engine's batch, by row index; rows not added are left alone.

    ``width`` is the logits' width (a model's logits may be wider than its vocabulary);
    ``eos_ids`` are what a row that cannot go on may still take.
    """

    def __init__(self, width: int, eos_ids: Sequence[int]) -> None:
        self.masker = Masker(width)
        self.rows: dict[int, Row] = {}
        self.eos_only = self.masker.words(1)
        for eos in eos_ids:
            self.eos_only[0, eos // 32] |= np.uint32(1 << (eos % 32))

    def add(self, index: int, matcher: Matcher | None, output: Sequence[int]) -> None:
        """Row ``index`` now holds a request (replacing what was there); ``matcher=None`` for an
        unconstrained one. ``output`` is the engine's live list of its tokens, possibly not
        empty (a preempted request coming back)."""
        if matcher is None:
            self.rows.pop(index, None)
        else:
            self.rows[index] = Row(matcher, output)

    def remove(self, index: int) -> None:
        self.rows.pop(index, None)

    def move(self, source: int, target: int, swap: bool) -> None:
        """Row ``source`` goes to ``target``; with ``swap``, ``target``'s row goes to ``source``."""
        a, b = self.rows.pop(source, None), self.rows.pop(target, None)
        if a is not None:
            self.rows[target] = a
        if swap and b is not None:
            self.rows[source] = b

    def mask(self, logits: "torch.Tensor") -> "torch.Tensor":
        """``logits`` (``(rows, width)``) with every constrained row masked, in place."""
        if not self.rows:
            return logits
        indices = sorted(i for i in self.rows if i < logits.shape[0])
        words = self.masker.words(len(indices))
        for k, index in enumerate(indices):
            row = self.rows[index]
            _sync(row)
            if row.dead:
                words[k] = self.eos_only[0]
            else:
                self.masker.fill(words, k, row.matcher)
        selected = logits[indices]
        masked, alive = self.masker.apply(selected, words)
        for k in np.flatnonzero(~alive.cpu().numpy()):  # a dead end: let the row end rather than sample junk
            masked[k] = self.masker.apply(selected[k:k + 1], self.eos_only)[0][0]
        logits[indices] = masked.to(logits.dtype)
        return logits


def _sync(row: Row) -> None:
    """Bring ``row.matcher`` to ``row.output``: keep the common prefix, advance the rest."""
    output = list(row.output)
    if output and output[-1] < 0:  # an engine placeholder for a token still being copied back
        output = output[: next(i for i, t in enumerate(output) if t < 0)]
    if row.refused is not None:
        position, token = row.refused
        if position < len(output) and output[position] == token:
            return
        row.refused = None
    walked = row.matcher.token_ids
    if output[:len(walked)] == walked:  # the usual step: tokens were only appended
        same = len(walked)
    else:
        same = next(i for i, (a, b) in enumerate(zip(walked, output + [None])) if a != b)
    if same < len(walked):
        row.matcher.rollback(len(walked) - same)
    for position in range(same, len(output)):
        if not row.matcher.advance(output[position]):
            log.warning("structgen: token %d at output position %d is outside the grammar (%s); "
                        "the row may only end now", output[position], position, row.matcher.last_rejection)
            row.refused = (position, output[position])
            return

