"""The pass-cost surface: what a forward pass over ``rows`` rows of ``n`` new positions each
costs, relative to a pass over one position of each.

Decode at low batch is memory-bound, so a pass over several positions costs little more than
over one; a draft pays when its expected accepted tokens outweigh the wider pass
(:meth:`PassCosts.best_length`). As a batch fills, compute saturates and a wider pass costs
nearly its width: the same drafts stop paying (:meth:`PassCosts.best_width`).

Example
-------
>>> from structgen.decoding.costs import PassCosts
>>> PassCosts().best_length(8, acceptance=0.95), PassCosts().best_length(8, acceptance=0.2)
(7, 0)
>>> costs = PassCosts()
>>> [costs.best_width([[1.0] + [1.0 + 0.9 * (k + 1) for k in range(7)]] * rows, rows) for rows in (1, 8, 32)]
[8, 4, 1]
"""

from __future__ import annotations

import hashlib
import json
import math
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
#: Row counts the surface keeps a curve for (between two, the curve is interpolated).
ROWS = (1, 2, 4, 8, 16, 32, 64)
#: How much more a wide pass must promise than a plain step, approached as the batch grows:
#: each padded position leaves a hole in every row's cache that later passes attend over until
#: it is compacted, a cost the surface (timed on full rows) does not see.
BATCH_MARGIN = 0.25
#: Passes of a width seen before its measured cost replaces the default.
MIN_SAMPLES = 8
#: Passes of a width remembered (the median of these is its cost).
WINDOW = 64


@dataclass
class PassCosts:
    """Cost of a forward pass over ``n`` new positions per row, relative to a 1-position pass
    over as many rows.

    ``relative`` is the one-row curve; ``by_rows`` holds a curve per batch size of
    :data:`ROWS` (measured or learned), and a batch size without one costs what one row costs
    over ``rows * n`` positions (compute grows with the positions fed, whatever the rows).
    ``PassCosts()`` is the curve measured for SmolLM2 on 2 CPU threads (DESIGN.md), fixed.
    :meth:`for_model` gives a surface that *learns*: the decoding loop times every pass it runs
    (:meth:`observe`); once a width has been seen :data:`MIN_SAMPLES` times at a batch size (and
    1-position passes too), its median time over the 1-position median replaces the default,
    and :meth:`save` keeps the surface on disk per model, device and thread count, so the next
    process starts from it. Nothing is timed before the first result. :meth:`measure` and
    :meth:`measure_surface` time it on purpose (a benchmark's warm-up,
    :meth:`structgen.Generator.measure_pass_costs`).
    """

    relative: dict[int, float] = field(default_factory=lambda: {1: 1.0, 2: 1.6, 4: 1.5, 8: 1.5, 16: 1.7, 32: 2.2})
    learn: bool = False
    key: str = ""
    by_rows: dict[int, dict[int, float]] = field(default_factory=dict)
    samples: dict[tuple[int, int], deque] = field(default_factory=dict, repr=False, compare=False)
    _changed: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def for_model(cls, model: Any) -> "PassCosts":
        """The learning curve of ``model`` (a transformers model) on this device and thread count:
        the one saved on disk, else the default."""
        key = model_key(model)
        saved = _load(key)
        if not saved:
            return cls(learn=True, key=key)
        return cls(saved.pop(1), learn=True, key=key, by_rows=saved)

    @property
    def step_seconds(self) -> float | None:
        """Median seconds of a one-row 1-position pass seen so far (None before any)."""
        ones = self.samples.get((1, 1))
        return statistics.median(ones) if ones else None

    def observe(self, n: int, seconds: float, rows: int = 1) -> None:
        """Note a pass over ``rows`` rows of ``n`` new positions that took ``seconds``: its time
        is kept (a draft model's pass is priced against the one-row 1-position median) and, when
        learning, the curve of that batch size follows the medians."""
        if n < 1 or rows < 1 or not seconds > 0:
            return
        size = next((s for s in SIZES if n <= s), SIZES[-1])
        bucket = _bucket(rows)
        window = self.samples.setdefault((bucket, size), deque(maxlen=WINDOW))
        window.append(seconds * (bucket / rows) * (SIZES[-1] / n if n > SIZES[-1] else 1))
        ones = self.samples.get((bucket, 1))
        if not self.learn or size == 1 or not ones or len(ones) < MIN_SAMPLES or len(window) < MIN_SAMPLES:
            return
        # A wider pass never costs less than the 1-position one (timing noise must not make a
        # draft look free); beyond that the curve is kept as measured.
        value = max(1.0, statistics.median(window) / statistics.median(ones))
        curve = self.relative if bucket == 1 else self.by_rows.setdefault(bucket, self._default_curve(bucket))
        if abs(value - curve.get(size, 0.0)) > 0.05:
            curve[size] = round(value, 3)
            self._changed = True

    def save(self) -> None:
        """Keep the learned surface on disk (only when it changed; failures are ignored)."""
        if self.learn and self.key and self._changed:
            _save(self.key, {1: self.relative, **self.by_rows})
            self._changed = False

    def cost(self, n: int, rows: int = 1) -> float:
        """A pass over ``rows`` rows of ``n`` new positions, relative to one over 1 position each."""
        if rows <= 1:
            return _on_curve(self.relative, n)
        below = max(b for b in ROWS if b <= rows) if rows < ROWS[-1] else ROWS[-1]
        above = min((b for b in ROWS if b >= rows), default=ROWS[-1])
        low, high = _on_curve(self._curve(below), n), _on_curve(self._curve(above), n)
        if above == below:
            return low
        share = (math.log2(rows) - math.log2(below)) / (math.log2(above) - math.log2(below))
        return low + share * (high - low)

    def at(self, rows: int) -> "PassCosts":
        """The curve at ``rows`` rows, as a fixed one-row curve (for :meth:`best_cut`)."""
        return self if rows <= 1 else PassCosts({s: self.cost(s, rows) for s in SIZES})

    def best_width(self, expected: Sequence[Sequence[float]], rows: int) -> int:
        """Positions per row for the next pass over ``rows`` rows (1: no drafts).

        ``expected[r][k]`` is the tokens row ``r`` expects from a pass that verifies the first
        ``k`` tokens of its draft (``expected[r][0]`` is 1: the token chosen). Each row's draft
        is cut to the width, the others padded to it, so the width that yields the most
        expected tokens per unit of pass cost wins; in a batch, a wide pass must beat a plain
        step by a margin that grows with the rows to :data:`BATCH_MARGIN`.
        """
        longest = max((len(e) for e in expected), default=1)
        plain = len(expected) / self.cost(1, rows)
        best, best_rate = 1, plain * (1 + BATCH_MARGIN * (1 - 1 / max(rows, 1)))
        for width in range(2, longest + 1):
            tokens = sum(e[min(width, len(e)) - 1] for e in expected)
            rate = tokens / self.cost(width, rows)
            if rate > best_rate * (1 + 1e-9):
                best, best_rate = width, rate
        return best

    def _curve(self, rows: int) -> dict[int, float]:
        if rows <= 1:
            return self.relative
        return self.by_rows.get(rows) or self._default_curve(rows)

    def _default_curve(self, rows: int) -> dict[int, float]:
        base = _on_curve(self.relative, rows)
        return {s: max(1.0, _on_curve(self.relative, rows * s) / base) for s in SIZES}

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

    @classmethod
    def measure_surface(cls, model: Any, *, rows: Sequence[int] = (1, 2, 4, 8, 16, 32),
                        sizes: Sequence[int] = (1, 2, 4, 8, 16), context: int = 256, repeats: int = 5,
                        save: bool = True) -> "PassCosts":
        """Time passes over ``rows`` × ``sizes`` on a transformers causal LM, after ``context``
        cached positions per row: for each batch size, one untimed pass, then ``repeats``
        rounds over the widths in turn (so a slow moment hits them alike), the median kept. The
        result learns on and, with ``save``, is kept on disk for :meth:`for_model` (per model,
        device and thread count)."""
        import torch

        key = model_key(model)
        surface: dict[int, dict[int, float]] = {}
        with torch.no_grad():
            for count in rows:
                backend = TransformersBackend(model)
                if backend.max_rows is not None and count > backend.max_rows:
                    break
                backend.prefill([[1] * context] * count)
                backend.extend([[1]] * count)
                backend.rollback([1] * count)
                times: dict[int, list[float]] = {n: [] for n in sizes}
                for _ in range(repeats):
                    for n in sizes:
                        t0 = time.perf_counter()
                        backend.extend([[1] * n] * count)
                        times[n].append(time.perf_counter() - t0)
                        backend.rollback([n] * count)
                seconds = {n: statistics.median(t) for n, t in times.items()}
                base = seconds[min(sizes)]
                surface[count] = {n: round(max(1.0, s / base), 3) for n, s in seconds.items()}
        costs = cls(surface.pop(1, cls().relative), learn=True, key=key, by_rows=surface)
        if save:
            costs._changed = True
            costs.save()
        return costs

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


_HEADER = b"structgen pass costs 2\n"


def _bucket(rows: int) -> int:
    return next((b for b in ROWS if rows <= b), ROWS[-1])


def _on_curve(curve: dict[int, float], n: int) -> float:
    sizes = sorted(curve)
    for s in sizes:
        if n <= s:
            return curve[s]
    return curve[sizes[-1]] * n / sizes[-1]


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


def _load(key: str) -> dict[int, dict[int, float]] | None:
    """The saved surface: batch size -> {positions: relative cost}; None when absent or damaged."""
    if not disk_cache_enabled():
        return None
    data = read_sealed(_path(key), _HEADER)
    try:
        surface = {int(r): {int(k): float(v) for k, v in curve.items()}
                   for r, curve in json.loads(data).items()} if data else None
    except (ValueError, TypeError, AttributeError):
        return None
    if not surface or 1 not in surface or any(
            not curve or 1 not in curve or not all(1.0 <= v < 1e3 for v in curve.values())
            for curve in surface.values()):
        return None
    return surface


def _save(key: str, surface: dict[int, dict[int, float]]) -> None:
    if disk_cache_enabled():
        data = {str(r): {str(k): v for k, v in curve.items()} for r, curve in surface.items()}
        write_sealed(_path(key), _HEADER, json.dumps(data).encode())
