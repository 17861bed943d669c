"""Grammar masks on logits: every token the matcher refuses gets ``-inf``.

Example
-------
>>> import torch
>>> from structgen.engine.vocab import Vocabulary
>>> from structgen.engine.compiler import Compiler
>>> from structgen.decoding.masking import Masker
>>> vocab = Vocabulary([b"a", b"b", None], eos_ids=[2])
>>> matcher = Compiler(vocab).regex("b").matcher()
>>> Masker(3).masked(torch.zeros(3), matcher).tolist()
[-inf, 0.0, -inf]

A batch of positions (all rows of a pass, drafted positions included) is masked in one call:

>>> masker = Masker(3)
>>> words = masker.words(2)
>>> masker.fill(words, 0, matcher)                  # row 0: the state before "b"
>>> _ = matcher.advance(1); masker.fill(words, 1, matcher)   # row 1: after it (only EOS)
>>> masked, alive = masker.apply(torch.zeros(2, 3), words)
>>> masked.tolist(), alive.tolist()
([[-inf, 0.0, -inf], [-inf, -inf, 0.0]], [True, True])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from structgen.engine.matcher import Matcher
from structgen.errors import DecodingError

if TYPE_CHECKING:  # torch is imported where a model runs, so compiling grammars never needs it
    import torch

__all__ = ["Masker"]


class Masker:
    """Masked logits for a matcher's current state, ``width`` logits wide (a model's logits may
    be wider than its vocabulary: the extra ones stay masked)."""

    def __init__(self, width: int) -> None:
        self.width = width

    def masked(self, logits: "torch.Tensor", matcher: Matcher) -> "torch.Tensor":
        import torch

        bits = np.unpackbits(matcher.mask_words().view(np.uint8), bitorder="little")[: self.width]
        if bits.size < self.width:  # logits wider than the vocabulary: the rest stays masked
            bits = np.concatenate([bits, np.zeros(self.width - bits.size, np.uint8)])
        allowed = torch.from_numpy(bits.astype(bool)).to(logits.device)
        if not bool(allowed.any()):
            raise DecodingError("the grammar allows no token here: " + (matcher.last_rejection or "dead end"))
        return logits.float().masked_fill(~allowed, float("-inf"))

    def words(self, count: int, words: int | None = None) -> np.ndarray:
        """A zeroed ``(count, words)`` ``uint32`` array of masks to :meth:`fill` (``words``
        defaults to what ``width`` logits need)."""
        return np.zeros((count, words if words is not None else (self.width + 31) // 32), dtype=np.uint32)

    def fill(self, words: np.ndarray, index: int, matcher: Matcher) -> None:
        """Row ``index`` of ``words`` becomes ``matcher``'s current mask."""
        mask = matcher.mask_words()
        words[index, : len(mask)] = mask[: words.shape[1]]
        words[index, len(mask):] = 0

    def apply(self, logits: "torch.Tensor", words: np.ndarray) -> "tuple[torch.Tensor, torch.Tensor]":
        """Mask ``logits`` (``(positions, width)``) with ``words`` (one row each) in one call on
        the logits' device; returns the masked float logits and, per position, whether any
        token is allowed (a dead end is the caller's to report)."""
        import torch

        packed = torch.from_numpy(words.view(np.uint8)).to(logits.device)
        shifts = torch.arange(8, dtype=torch.uint8, device=logits.device)
        bits = ((packed.unsqueeze(-1) >> shifts) & 1).flatten(1).bool()
        if bits.shape[1] < self.width:  # logits wider than the masks: the rest stays masked
            bits = torch.nn.functional.pad(bits, (0, self.width - bits.shape[1]))
        allowed = bits[:, : self.width]
        return logits.float().masked_fill(~allowed, float("-inf")), allowed.any(dim=1)
