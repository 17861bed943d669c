"""The model behind the decoding loop: a protocol, and its transformers implementation.

A backend is one batch's view of a causal LM: :meth:`~ModelBackend.prefill` starts the batch
from rows of prompt ids, :meth:`~ModelBackend.extend` feeds each row some new ids (one chosen
token plus a draft) in one forward pass and returns the logits at every new position, and
:meth:`~ModelBackend.rollback` drops each row's last positions (a refused draft's tail). The
loop (:mod:`structgen.decoding.loop`) talks to nothing else, so another runtime (vLLM, a
llama.cpp binding, a remote server) only has to implement these verbs.

Example
-------
>>> from structgen.decoding.backend import rollback_refusal
>>> class Config:
...     sliding_window, layer_types = None, ["full_attention"]
>>> class Model:
...     config = Config()
>>> rollback_refusal(Model())
''
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

from structgen.errors import OptionError

if TYPE_CHECKING:  # torch is imported where a model runs, so compiling grammars never needs it
    import torch

__all__ = ["ModelBackend", "TransformersBackend", "logits_width", "rollback_refusal"]


@runtime_checkable
class ModelBackend(Protocol):
    """A causal LM decoding a batch of rows with a cache it can roll back per row.

    A backend object holds one batch at a time: :meth:`prefill` starts it (dropping any
    earlier one). Logits are float tensors ``logits_width`` wide, on :attr:`device`.
    """

    @property
    def device(self) -> Any:
        """Where the logits live (a ``torch.device``)."""

    @property
    def logits_width(self) -> int:
        """Number of logits per position (may exceed the tokenizer's vocabulary)."""

    @property
    def rollback_refusal(self) -> str:
        """Why :meth:`rollback` cannot be exact on this model, or ``""`` when it can (drafts are
        only verified where it can)."""

    def prefill(self, rows: Sequence[Sequence[int]]) -> "torch.Tensor":
        """Start a batch from each row's prompt ids; the logits at each row's last position,
        shape ``(len(rows), logits_width)``."""

    def extend(self, new_ids: Sequence[Sequence[int]]) -> "list[torch.Tensor]":
        """Feed row ``r`` its ``new_ids[r]`` (one or more positions) in one pass; for each row,
        the logits at every new position, shape ``(len(new_ids[r]), logits_width)``."""

    def rollback(self, counts: Sequence[int]) -> None:
        """Forget the last ``counts[r]`` positions of row ``r`` (0: keep all)."""

    # Optional (read with getattr, so a backend without them still works):
    # ``max_positions`` (int or None), the longest sequence the model takes: the loop refuses a
    # prompt that cannot fit with its token budget before any pass;
    # ``max_rows`` (int or None), the most rows one batch may hold: the loop decodes more rows
    # in batches of that size;
    # ``release(rows)``: rows that ended leave the batch (extend feeds them ``[]`` from then on).


def logits_width(model: Any) -> int:
    """How many logits ``model`` writes per position: its output layer's width (which may
    exceed the tokenizer's vocabulary), else ``config.vocab_size``. Anything with neither is an
    :class:`~structgen.errors.OptionError`."""
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    width = getattr(head, "out_features", None)  # nn.Linear, and its quantized forms
    if width is None and head is not None:
        shape = getattr(getattr(head, "weight", None), "shape", None)
        width = shape[0] if shape is not None else None
    if width is None:
        width = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(width, bool) or not hasattr(width, "__index__"):
        raise OptionError(f"model must be a transformers model with an output layer "
                          f"(get_output_embeddings()) or a config.vocab_size, not {type(model).__name__} "
                          f"({model!r:.80})")
    return int(width)


def rollback_refusal(model: Any) -> str:
    """Why a transformers model's cache cannot be rolled back exactly ('' when it can).

    Recurrent and linear-attention layers keep a state with no per-position history. A
    sliding-window layer evicts what a rollback would need, unless it keeps the last pass's
    positions until the rollback (transformers' ``activate_past_recording``, used by
    :class:`TransformersBackend`): then rolling back within the last pass is exact.
    """
    config = getattr(model, "config", None)
    layer_types = getattr(config, "layer_types", None) or []
    if any(t not in ("full_attention", "sliding_attention") for t in layer_types):
        return "the model has recurrent or linear-attention layers, whose cache cannot be rolled back"
    if _has_sliding_layers(config):
        try:
            from transformers.cache_utils import DynamicSlidingWindowLayer
        except ImportError:  # transformers before 5
            return "the model has sliding-window attention layers, whose cache cannot be rolled back"
        if not hasattr(DynamicSlidingWindowLayer, "activate_past_recording"):
            return ("the model has sliding-window attention layers, and this transformers cannot keep "
                    "their evicted positions for a rollback")
    return ""


class TransformersBackend:
    """:class:`ModelBackend` over a transformers causal LM and a ``DynamicCache``, any number of rows.

    One row is the plain case: the cache holds that row, and rolling back is
    ``DynamicCache.crop(-n)`` (sliding-window layers record the last pass's positions so that it
    stays exact, see :func:`rollback_refusal`).

    Several rows share one cache whose positions are *slots*: each row has a mask over the slots
    it attends to and its own position ids. Each row's prompt is prefilled alone (so its first
    logits are those of a one-row run) and the caches are merged, left-padded. A pass feeds each
    row its own number of ids, right-padded to the widest; the padding slots and a row's
    rolled-back positions are masked out for that row only, so no row is cropped to another
    row's length, and the slots nobody needs are dropped (the tail at once; holes once they make
    up half the cache, by moving each row's live slots together). A row that ends leaves the
    batch (:meth:`release`). Keys are stored after their rotary embedding, so moving a slot does
    not change what it holds. A model with sliding-window layers decodes one row at a time
    (:attr:`max_rows`): a window counts slots, and holes would shrink it.

    Call it under ``torch.no_grad()``.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self._device = next(model.parameters()).device
        self._width = logits_width(model)
        self._refusal = rollback_refusal(model)
        self._sliding = _has_sliding_layers(getattr(model, "config", None))
        self._cache: Any = None
        self._batch: dict[int, int] = {}  # row -> its index in the cache's batch dimension
        self._gone: set[int] = set()  # batch indices of released rows not yet dropped
        self._live: list[int] = []  # per batch index: positions the row attends to (its next position id)
        self._mask: Any = None  # (batch, slots) bool: which slots each batch index attends to; None: one row

    @property
    def device(self) -> Any:
        return self._device

    @property
    def logits_width(self) -> int:
        return self._width

    @property
    def rollback_refusal(self) -> str:
        return self._refusal

    @property
    def max_rows(self) -> int | None:
        """Most rows one batch may hold: 1 for a model with sliding-window layers, else no limit."""
        return 1 if self._sliding or self._refusal else None

    @property
    def max_positions(self) -> int | None:
        """The model's context window (``max_position_embeddings`` or ``n_positions``), if known."""
        config = getattr(self.model, "config", None)
        for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    @property
    def slots(self) -> int:
        """Cache length in slots (live positions, padding and holes)."""
        return self._cache.get_seq_length() if self._cache is not None else 0

    def prefill(self, rows: Sequence[Sequence[int]]) -> "torch.Tensor":
        import torch

        if self.max_rows is not None and len(rows) > self.max_rows:
            raise OptionError(f"this model decodes at most {self.max_rows} row(s) per batch, not {len(rows)}: "
                              f"{self._refusal or 'its sliding-window layers count slots, not positions'}")
        caches, firsts = [], []
        for ids in rows:
            cache = self._new_cache()
            out = self.model(input_ids=torch.tensor([list(ids)], device=self._device),
                             past_key_values=cache, use_cache=True, logits_to_keep=1)
            caches.append(cache)
            firsts.append(out.logits[0, -1])
        self._batch = {r: r for r in range(len(rows))}
        self._gone = set()
        self._live = [len(ids) for ids in rows]
        self._cache = caches[0]
        self._mask = None
        if len(rows) > 1:
            self._merge(caches)
        return torch.stack(firsts)

    def extend(self, new_ids: Sequence[Sequence[int]]) -> "list[torch.Tensor]":
        import torch

        if self._mask is None:  # one row
            (ids,) = new_ids
            out = self.model(input_ids=torch.tensor([list(ids)], device=self._device),
                             past_key_values=self._cache, use_cache=True)
            self._live[0] += len(ids)
            return [out.logits[0]]
        width = max(len(ids) for ids in new_ids)
        batch = len(self._live)
        feed = torch.zeros((batch, width), dtype=torch.long)
        fed = torch.zeros((batch, width), dtype=torch.bool)
        positions = torch.zeros((batch, width), dtype=torch.long)
        for r, ids in enumerate(new_ids):
            b = self._batch.get(r)
            if b is None:
                if ids:
                    raise OptionError(f"row {r} was released and cannot be fed")
                continue
            feed[b, :len(ids)] = torch.tensor(list(ids), dtype=torch.long)
            fed[b, :len(ids)] = True
            positions[b] = torch.arange(self._live[b], self._live[b] + width)
            self._live[b] += len(ids)
        start = self.slots
        self._mask = torch.cat([self._mask, fed], dim=1)
        out = self.model(input_ids=feed.to(self._device), attention_mask=self._mask.to(self._device),
                         position_ids=positions.to(self._device), past_key_values=self._cache, use_cache=True,
                         cache_position=torch.arange(start, start + width, device=self._device))
        logits = out.logits
        empty = logits.new_empty((0, logits.shape[-1]))
        return [logits[self._batch[r], :len(ids)] if r in self._batch else empty for r, ids in enumerate(new_ids)]

    def rollback(self, counts: Sequence[int]) -> None:
        if self._mask is None:  # one row
            (count,) = counts
            if count:
                self._cache.crop(-count)
            else:  # trims sliding-window layers back to their window (full layers are untouched)
                for layer in getattr(self._cache, "layers", ()):
                    if getattr(layer, "is_sliding", False) and getattr(layer, "record_past", False):
                        layer.crop(0)
            self._live[0] -= count
            return
        for r, count in enumerate(counts):
            b = self._batch.get(r)
            if not count or b is None:
                continue
            live = self._mask[b].nonzero().flatten()
            self._mask[b, live[len(live) - count:]] = False
            self._live[b] -= count
        self._tidy()

    def release(self, rows: Sequence[int]) -> None:
        """Rows that ended leave the batch: they are fed nothing more, and their slots are
        dropped once they make up an eighth of the batch (each drop copies the whole cache, so
        rows that end close together leave in one copy; until then they ride along padded)."""
        import torch

        self._gone.update(self._batch.pop(r) for r in rows if r in self._batch)
        if self._mask is None or not self._gone or len(self._gone) * 8 < len(self._live) and self._batch:
            return
        keep = [b for b in range(len(self._live)) if b not in self._gone]
        self._gone = set()
        if not keep:
            self._cache, self._mask, self._live = None, None, []
            return
        index = torch.tensor(keep, device=self._device)
        for layer in self._cache.layers:
            _select_rows(layer, index)
        self._mask = self._mask[torch.tensor(keep)]
        self._live = [self._live[b] for b in keep]
        renumber = {b: i for i, b in enumerate(keep)}
        self._batch = {r: renumber[b] for r, b in self._batch.items()}
        self._tidy()

    def _new_cache(self) -> Any:
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        cache = DynamicCache(config=self.model.config)
        for layer in getattr(cache, "layers", ()):
            # A sliding-window layer keeps each pass's positions past its window until the next
            # crop, so refused draft positions can be rolled back exactly.
            if getattr(layer, "is_sliding", False) and hasattr(layer, "activate_past_recording"):
                layer.activate_past_recording()
            elif type(layer) is DynamicLayer:
                layer.__class__ = _growing_layer()  # same state, written in place
        return cache

    def _merge(self, caches: list[Any]) -> None:
        """One cache from one-row caches, left-padded to the longest."""
        import torch

        lengths = [cache.get_seq_length() for cache in caches]
        slots = max(lengths)
        self._mask = torch.zeros((len(caches), slots), dtype=torch.bool)
        for b, n in enumerate(lengths):
            self._mask[b, slots - n:] = True
        for i, layer in enumerate(self._cache.layers):
            merged = []
            for name in ("keys", "values"):
                first = getattr(layer, name)
                both = first.new_zeros((len(caches), first.shape[1], slots + _SPARE, first.shape[3]))
                for b, (cache, n) in enumerate(zip(caches, lengths)):
                    both[b, :, slots - n:slots] = getattr(cache.layers[i], name)[0]
                merged.append(both)
            _replace(layer, *merged, length=slots)

    def _tidy(self) -> None:
        """Drop the slots no row attends to at the end, and move live slots together once holes
        make up a third of the cache (a move copies the cache, about half a pass with 32 rows on
        a CPU; holes cost every later pass attention over them)."""
        import torch

        used = self._mask.any(dim=0).nonzero()
        end = int(used[-1]) + 1 if len(used) else 0
        if end < self.slots:
            self._cache.crop(end - self.slots)
            self._mask = self._mask[:, :end]
        slots, longest = self.slots, max(self._live, default=0)
        if slots < 64 or longest * 3 > slots * 2:
            return
        # each row's live slots, right-aligned in a cache as long as the longest row (plus
        # spare capacity, gathered from slot 0 and never read)
        index = torch.zeros((len(self._live), longest + _SPARE), dtype=torch.long)
        mask = torch.zeros((len(self._live), longest), dtype=torch.bool)
        for b, n in enumerate(self._live):
            live = self._mask[b].nonzero().flatten()
            index[b, longest - n:longest] = live
            mask[b, longest - n:] = True
        index = index.to(self._device)
        for layer in self._cache.layers:
            heads, dim = layer.keys.shape[1], layer.keys.shape[3]
            gather = index[:, None, :, None].expand(-1, heads, -1, dim)
            _replace(layer, layer.keys.gather(2, gather), layer.values.gather(2, gather), length=longest)
        self._mask = mask


def _has_sliding_layers(config: Any) -> bool:
    layer_types = getattr(config, "layer_types", None) or []
    return bool(getattr(config, "sliding_window", None)) and (not layer_types or "sliding_attention" in layer_types)


def _select_rows(layer: Any, index: Any) -> None:
    """Keep the batch rows ``index`` of a cache layer (a growing layer keeps its capacity)."""
    if isinstance(layer, _growing_layer()):
        layer.select_rows(index)
    else:
        layer.keys, layer.values = layer.keys[index], layer.values[index]


def _replace(layer: Any, keys: Any, values: Any, length: int | None = None) -> None:
    """Give a cache layer new key and value tensors, of which the first ``length`` positions
    are filled (default: all; a growing layer keeps the rest as capacity)."""
    if isinstance(layer, _growing_layer()):
        layer.reset_buffer(keys, values, length)
    else:
        layer.keys, layer.values = keys[:, :, :length], values[:, :, :length]


#: Positions of spare capacity given to a cache rebuilt from others (merged, compacted).
_SPARE = 64


@functools.cache
def _growing_layer() -> Any:
    """The growing cache layer class (built on first use: transformers is imported only where
    a model runs)."""
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` that writes new positions into spare capacity instead of
        concatenating: ``DynamicLayer.update`` copies the whole cache every pass (with 32 rows
        on a CPU, about a third of decoding time); this one doubles its buffer when full, so a
        pass copies only what it adds. ``keys``/``values`` are views of the filled part."""

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.is_initialized or self.keys is None or self.keys.numel() == 0:
                self.lazy_initialization(key_states, value_states)
                self.reset_buffer(key_states, value_states)
                return self.keys, self.values
            length, new = self.keys.shape[-2], key_states.shape[-2]
            if length + new > self._key_buffer.shape[-2]:
                self._grow(length + new)
            self._key_buffer[:, :, length:length + new] = key_states
            self._value_buffer[:, :, length:length + new] = value_states
            self.keys = self._key_buffer[:, :, :length + new]
            self.values = self._value_buffer[:, :, :length + new]
            return self.keys, self.values

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError("crop takes a negative count of positions to remove")
            if tokens_to_remove == 0 or not self.is_initialized or self.keys is None:
                return
            length = max(0, self.keys.shape[-2] + tokens_to_remove)
            self.keys = self._key_buffer[:, :, :length]
            self.values = self._value_buffer[:, :, :length]

        def reset_buffer(self, keys: Any, values: Any, length: int | None = None) -> None:
            self._key_buffer, self._value_buffer = keys.contiguous(), values.contiguous()
            self.keys = self._key_buffer[:, :, :length]
            self.values = self._value_buffer[:, :, :length]

        def select_rows(self, index: Any) -> None:
            length = self.keys.shape[-2]
            self._key_buffer, self._value_buffer = self._key_buffer[index], self._value_buffer[index]
            self.keys = self._key_buffer[:, :, :length]
            self.values = self._value_buffer[:, :, :length]

        def _grow(self, need: int) -> None:
            capacity = max(need, 2 * self._key_buffer.shape[-2], 64)
            length = self.keys.shape[-2]
            for name in ("_key_buffer", "_value_buffer"):
                old = getattr(self, name)
                grown = old.new_empty((old.shape[0], old.shape[1], capacity, old.shape[3]))
                grown[:, :, :length] = old[:, :, :length]
                setattr(self, name, grown)
            self.keys = self._key_buffer[:, :, :length]
            self.values = self._value_buffer[:, :, :length]

    return GrowingLayer

