"""The pass-cost curve: what a forward pass over ``n`` new positions costs, relative to one.

Decode at low batch is memory-bound, so a pass over several positions costs little more than
over one; a draft pays when its expected accepted tokens outweigh the wider pass
(:meth:`PassCosts.best_length`).

Example
-------
>>> from structgen.decoding.costs import PassCosts
>>> PassCosts().best_length(8, acceptance=0.95), PassCosts().best_length(8, acceptance=0.2)
(7, 0)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from structgen.decoding.backend import ModelBackend, TransformersBackend

__all__ = ["PassCosts"]


@dataclass
class PassCosts:
    """Cost of a forward pass over ``n`` new positions, relative to a 1-position pass.

    Measured once per model and device (:meth:`measure`); the default is the curve measured for
    SmolLM2 on 2 CPU threads (DESIGN.md).
    """

    relative: dict[int, float] = field(default_factory=lambda: {1: 1.0, 2: 1.6, 4: 1.5, 8: 1.5, 16: 1.7, 32: 2.2})

    def cost(self, n: int) -> float:
        sizes = sorted(self.relative)
        for s in sizes:
            if n <= s:
                return self.relative[s]
        return self.relative[sizes[-1]] * n / sizes[-1]

    def best_length(self, draft_len: int, acceptance: float) -> int:
        """Draft length (0 = no draft) with the most expected tokens per unit of pass cost."""
        best, best_rate = 0, 1.0  # no draft: one token per 1-position pass
        expected = 1.0
        for k in range(1, draft_len + 1):
            expected += acceptance ** k
            rate = expected / self.cost(k + 1)
            if rate > best_rate:
                best, best_rate = k, rate
        return best

    @staticmethod
    def measure(model: "ModelBackend | Any", *, context: int = 256, sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32),
                repeats: int = 3) -> "PassCosts":
        """Time passes over ``sizes`` new positions after ``context`` cached ones (best of ``repeats``).

        ``model`` is a :class:`~structgen.decoding.backend.ModelBackend` or a transformers
        causal LM (wrapped in a :class:`~structgen.decoding.backend.TransformersBackend`).
        """
        import torch

        backend = model if isinstance(model, ModelBackend) else TransformersBackend(model)
        seconds: dict[int, float] = {}
        with torch.no_grad():
            backend.prefill([[1] * context])
            for n in sizes:
                best = float("inf")
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    backend.extend([[1] * n])
                    best = min(best, time.perf_counter() - t0)
                    backend.rollback([n])
                seconds[n] = best
        base = seconds[min(sizes)]
        # A wider pass never costs less than the 1-position one (timing noise, e.g. another
        # process on the cores, must not make a draft look free); beyond that the curve is kept
        # as measured: on CPUs a 4-position pass can cost less than a 2-position one.
        return PassCosts({n: max(1.0, s / base) for n, s in seconds.items()})
