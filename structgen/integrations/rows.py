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
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from structgen.decoding.budget import within_budget
from structgen.decoding.masking import Masker
from structgen.decoding.thinking import ThinkingMatcher
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError, shown

if TYPE_CHECKING:
    import torch

__all__ = ["BatchRows", "MAX_WIDTH", "Row", "apply_words", "check_logits", "check_width", "fill_row", "sync_row",
           "tensor_shown"]

#: The widest logits a batch takes (the largest vocabularies are ~262k ids).
MAX_WIDTH = 1 << 24

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
    #: the request's token budget (its output's most tokens), for the budget rule; None: no rule
    limit: int | None = None

    @property
    def dead(self) -> bool:
        return self.refused is not None


class BatchRows:
    """The constrained rows of an engine's batch, by row index; rows not added are left alone.

    ``width`` is the logits' width (a model's logits may be wider than its vocabulary);
    ``eos_ids`` are what a row that cannot go on may still take.
    """

    def __init__(self, width: int, eos_ids: Sequence[int]) -> None:
        if not _is_index(width) or not 1 <= width <= MAX_WIDTH:
            raise OptionError(f"BatchRows: width must be an int from 1 to {MAX_WIDTH:,} (the logits' width), "
                              f"not {shown(width, 40)}")
        if not isinstance(eos_ids, Iterable) or isinstance(eos_ids, (str, bytes)):
            raise OptionError(f"BatchRows: eos_ids must be a list of token ids, not {type(eos_ids).__name__}")
        eos_ids = list(eos_ids)  # read twice below: an iterator would be spent by the check
        bad = [e for e in eos_ids if not _is_index(e) or not 0 <= e < width]
        if bad:
            raise OptionError(f"BatchRows: end-of-sequence id {bad[0]!r:.40} is not a column of logits {width} wide")
        self.masker = Masker(width)
        self.rows: dict[int, Row] = {}
        self.eos_only = self.masker.words(1)
        for eos in eos_ids:
            self.eos_only[0, eos // 32] |= np.uint32(1 << (eos % 32))

    def add(self, index: int, matcher: Matcher | None, output: Sequence[int], limit: int | None = None) -> None:
        """Row ``index`` now holds a request (replacing what was there); ``matcher=None`` for an
        unconstrained one. ``output`` is the engine's live list of its tokens, possibly not
        empty (a preempted request coming back); ``limit``, its token budget: its last tokens
        leave a completion that fits (:func:`~structgen.decoding.budget.within_budget`)."""
        _check_row(index)
        if matcher is None:
            self.rows.pop(index, None)
            return
        if not isinstance(matcher, (Matcher, ThinkingMatcher)):
            raise OptionError(f"BatchRows.add: row {index}'s matcher must be a structgen Matcher or None, "
                              f"not {type(matcher).__name__}")
        if not isinstance(output, Sequence) or isinstance(output, (str, bytes)):
            raise OptionError(f"BatchRows.add: row {index}'s output must be a list of token ids, "
                              f"not {type(output).__name__}")
        if limit is not None and (not _is_index(limit) or limit < 1):
            raise OptionError(f"BatchRows.add: row {index}'s limit must be an int >= 1 or None, not {limit!r:.40}")
        self.rows[index] = Row(matcher, output, limit=limit)

    def remove(self, index: int) -> None:
        _check_row(index)
        self.rows.pop(index, None)

    def move(self, source: int, target: int, swap: bool) -> None:
        """Row ``source`` goes to ``target``; with ``swap``, ``target``'s row goes to ``source``."""
        _check_row(source)
        _check_row(target)
        a, b = self.rows.pop(source, None), self.rows.pop(target, None)
        if a is not None:
            self.rows[target] = a
        if swap and b is not None:
            self.rows[source] = b

    def mask(self, logits: "torch.Tensor") -> "torch.Tensor":
        """``logits`` (``(rows, width)``) with every constrained row masked, in place."""
        self._check_logits(logits)
        if not self.rows:
            return logits
        indices = sorted(i for i in self.rows if i < logits.shape[0])
        words = self.masker.words(len(indices))
        for k, index in enumerate(indices):
            row = self.rows[index]
            sync_row(row, index, self.masker.width)
            fill_row(self.masker, words, k, row, self.eos_only)
        return apply_words(self.masker, logits, indices, words, self.eos_only)

    def _check_logits(self, logits: "torch.Tensor") -> None:
        check_logits(logits, "BatchRows.mask: logits")
        if logits.shape[1] != self.masker.width:
            raise OptionError(f"BatchRows.mask: the logits are {logits.shape[1]} wide, the rows were made for "
                              f"{self.masker.width}")


def fill_row(masker: Masker, words: np.ndarray, k: int, row: Row, eos_only: np.ndarray, dead: bool = False) -> None:
    """Row ``k`` of ``words``: the row's matcher's mask, within its budget (end of sequence
    only for a dead row)."""
    if dead or row.dead:
        words[k] = eos_only[0]
        return
    masker.fill(words, k, row.matcher)
    if row.limit is not None:
        within_budget(row.matcher, words[k], row.limit - len(row.matcher.token_ids))


def apply_words(masker: Masker, logits: "torch.Tensor", indices: list[int], words: np.ndarray,
                eos_only: np.ndarray) -> "torch.Tensor":
    """``logits`` with row ``indices[k]`` masked by ``words[k]``, in place; a row the mask
    leaves no token gets ``eos_only`` (let it end rather than sample junk)."""
    selected = logits[indices]
    masked, alive = masker.apply(selected, words)
    for k in np.flatnonzero(~alive.cpu().numpy()):
        masked[k] = masker.apply(selected[k:k + 1], eos_only)[0][0]
    logits[indices] = masked.to(logits.dtype)
    return logits


def check_logits(logits: object, what: str) -> None:
    """Refuse ``logits`` that are not a two-dimensional floating-point tensor (rows, width): an
    integer tensor cannot hold -inf (every masked row came back at its minimum), a row of one
    dimension has no rows."""
    import torch

    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or not logits.is_floating_point():
        raise OptionError(f"{what} must be a 2-dimensional floating-point tensor (rows, width), not "
                          f"{tensor_shown(logits)}")


def tensor_shown(value: object) -> str:
    """What ``value`` is, for an error: a tensor by its rank and dtype."""
    import torch

    if isinstance(value, torch.Tensor):
        return f"a {value.dim()}-dimensional {value.dtype} tensor"
    return type(value).__name__


def check_width(vocabulary: Vocabulary, width: int) -> None:
    """Refuse logits ``width`` wide for a grammar compiled over ``vocabulary``: narrower than
    its tokens, or wider by more than a model pads its embedding rows (Qwen2.5 271 ids, Phi-3
    53; at most 1/64 of the vocabulary or 1,024 here): a grammar for another tokenizer (a
    256-byte grammar on a 49,152-wide model allowed two unrelated tokens). Two tokenizers of
    one width cannot be told apart by width: compile with the model's own tokenizer."""
    slack = max(1024, vocabulary.size // 64)
    if not vocabulary.size <= width <= vocabulary.size + slack:
        raise OptionError(f"the logits are {width} wide but the grammar was compiled for a vocabulary of "
                          f"{vocabulary.size} tokens{f' ({vocabulary.name})' if vocabulary.name else ''}: compile "
                          "it with this model's tokenizer (and model=model for a padded vocabulary)")


def _is_index(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_row(index: object) -> None:
    if not _is_index(index) or index < 0:  # -1 would name the last row of the logits
        raise OptionError(f"BatchRows: a row index must be an int from 0, not {index!r:.40}")


def sync_row(row: Row, index: int, width: int) -> None:
    """Bring ``row.matcher`` to ``row.output``: keep the common prefix, advance the rest."""
    output = list(row.output)
    if output and _is_index(output[-1]) and output[-1] < 0:  # a placeholder for a token still being copied back
        output = output[: next(i for i, t in enumerate(output) if _is_index(t) and t < 0)]
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
    for position in range(same, len(output)):  # the walked ones were checked when they were new
        token = output[position]
        if not _is_index(token) or not 0 <= token < width:
            raise OptionError(f"BatchRows: row {index}'s output holds {token!r:.40} at position {position}, not a "
                              f"token id of logits {width} wide")
        if not row.matcher.advance(output[position]):
            log.warning("structgen: token %d at output position %d is outside the grammar (%s); "
                        "the row may only end now", output[position], position, row.matcher.last_rejection)
            row.refused = (position, output[position])
            return

