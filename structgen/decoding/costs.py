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

import hashlib
import json
import os
import platform
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

from structgen.decoding.backend import ModelBackend, TransformersBackend
from structgen.engine.disk_cache import cache_dir, disk_cache_enabled
from structgen.engine.sealed import read_sealed, write_sealed

__all__ = ["PassCosts"]


#: Pass widths the curve keeps (a wider pass costs what the next size up costs).
SIZES = (1, 2, 4, 8, 16, 32)
#: Passes of a width seen before its measured cost replaces the default.
MIN_SAMPLES = 8
#: Passes of a width remembered (the median of these is its cost).
WINDOW = 64


@dataclass
class PassCosts:
    """Cost of a forward pass over ``n`` new positions, relative to a 1-position pass.

    ``PassCosts()`` is the curve measured for SmolLM2 on 2 CPU threads (DESIGN.md), fixed.
    :meth:`for_model` gives a curve that *learns*: the decoding loop times every pass it runs
    (:meth:`observe`); once a width has been seen :data:`MIN_SAMPLES` times (and 1-position
    passes too), its median time over the 1-position median replaces the default, and
    :meth:`save` keeps the curve on disk per model, device and thread count, so the next process
    starts from it. Nothing is timed before the first result. :meth:`measure` times a curve
    on purpose (a benchmark's warm-up).
    """

    relative: dict[int, float] = field(default_factory=lambda: {1: 1.0, 2: 1.6, 4: 1.5, 8: 1.5, 16: 1.7, 32: 2.2})
    learn: bool = False
    key: str = ""
    samples: dict[int, deque] = field(default_factory=dict, repr=False, compare=False)
    _changed: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def for_model(cls, model: Any) -> "PassCosts":
        """The learning curve of ``model`` (a transformers model) on this device and thread count:
        the one saved on disk, else the default."""
        key = model_key(model)
        saved = _load(key)
        return cls(saved if saved else cls().relative, learn=True, key=key)

    @property
    def step_seconds(self) -> float | None:
        """Median seconds of a 1-position pass seen so far (None before any)."""
        ones = self.samples.get(1)
        return statistics.median(ones) if ones else None

    def observe(self, n: int, seconds: float) -> None:
        """Note a pass over ``n`` new positions that took ``seconds``: its time is kept (a draft
        model's pass is priced against the 1-position median) and, when learning, the curve
        follows the medians."""
        if n < 1 or not seconds > 0:
            return
        size = next((s for s in SIZES if n <= s), SIZES[-1])
        window = self.samples.setdefault(size, deque(maxlen=WINDOW))
        window.append(seconds if n <= SIZES[-1] else seconds * SIZES[-1] / n)
        ones = self.samples.get(1)
        if not self.learn or size == 1 or not ones or len(ones) < MIN_SAMPLES or len(window) < MIN_SAMPLES:
            return
        # A wider pass never costs less than the 1-position one (timing noise must not make a
        # draft look free); beyond that the curve is kept as measured.
        value = max(1.0, statistics.median(window) / statistics.median(ones))
        if abs(value - self.relative.get(size, 0.0)) > 0.05:
            self.relative[size] = round(value, 3)
            self._changed = True

    def save(self) -> None:
        """Keep the learned curve on disk (only when it changed; failures are ignored)."""
        if self.learn and self.key and self._changed:
            _save(self.key, self.relative)
            self._changed = False

    def cost(self, n: int) -> float:
        sizes = sorted(self.relative)
        for s in sizes:
            if n <= s:
                return self.relative[s]
        return self.relative[sizes[-1]] * n / sizes[-1]

    def best_length(self, draft_len: int, acceptance: float) -> int:
        """Draft length (0 = no draft) with the most expected tokens per unit of pass cost."""
        return self.best_cut([acceptance] * draft_len)[0]

    def best_cut(self, acceptances: Sequence[float], cost_per_token: float = 0.0) -> tuple[int, float]:
        """How many of a draft's tokens to verify, and the expected tokens per unit of cost then.

        ``acceptances[i]`` is the chance token ``i`` is kept once those before it were; a pass
        over ``k`` draft tokens yields ``1 + a0 + a0*a1 + ...`` tokens on average (one bonus
        token always) and costs ``cost(k + 1)`` plus ``cost_per_token`` for each token the
        source still has to make. ``(0, 1.0)``: no draft pays more than a plain step.
        """
        best, best_rate = 0, 1.0  # no draft: one token per 1-position pass
        expected, chance = 1.0, 1.0
        for k, a in enumerate(acceptances, start=1):
            chance *= a
            expected += chance
            rate = expected / (self.cost(k + 1) + cost_per_token * k)
            if rate > best_rate:
                best, best_rate = k, rate
        return best, best_rate

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


_HEADER = b"structgen pass costs 1\n"


def model_key(model: Any) -> str:
    """What a pass-cost curve depends on: the model's shape and dtype, the device, the torch
    thread count, the CPU and the torch version."""
    import torch

    config = getattr(model, "config", None)
    shape = {name: getattr(config, name, None) for name in (
        "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "vocab_size")}
    try:
        parameter = next(model.parameters())
        where = f"{parameter.device.type}:{parameter.dtype}"
    except (AttributeError, StopIteration):
        where = "unknown"
    facts = [json.dumps(shape, sort_keys=True), where, str(torch.get_num_threads()), platform.machine(),
             platform.processor() or "", str(os.cpu_count()), torch.__version__]
    return hashlib.sha256("|".join(facts).encode()).hexdigest()[:24]


def _path(key: str) -> Any:
    return cache_dir() / "costs" / f"{key}.json"


def _load(key: str) -> dict[int, float] | None:
    if not disk_cache_enabled():
        return None
    data = read_sealed(_path(key), _HEADER)
    try:
        curve = {int(k): float(v) for k, v in json.loads(data).items()} if data else None
    except (ValueError, TypeError, AttributeError):
        return None
    if not curve or 1 not in curve or any(not 1.0 <= v < 1e3 for v in curve.values()):
        return None
    return curve


def _save(key: str, relative: dict[int, float]) -> None:
    if disk_cache_enabled():
        write_sealed(_path(key), _HEADER, json.dumps({str(k): v for k, v in relative.items()}).encode())
