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
