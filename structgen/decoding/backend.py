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

    # Optional: ``max_positions`` (int or None), the longest sequence the model takes; the loop
    # refuses a prompt that cannot fit with its token budget before any pass (getattr, so a
    # backend without it is not checked).


def logits_width(model: Any) -> int:
    """How many logits ``model`` writes per position: its output layer's width (which may
    exceed the tokenizer's vocabulary), else ``config.vocab_size``."""
    head = model.get_output_embeddings()
    width = getattr(head, "out_features", None)  # nn.Linear, and its quantized forms
    if width is None and head is not None:
        shape = getattr(getattr(head, "weight", None), "shape", None)
        width = shape[0] if shape is not None else None
    return int(width) if width is not None else int(model.config.vocab_size)


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
    if getattr(config, "sliding_window", None) and (not layer_types or "sliding_attention" in layer_types):
        try:
            from transformers.cache_utils import DynamicSlidingWindowLayer
        except ImportError:  # transformers before 5
            return "the model has sliding-window attention layers, whose cache cannot be rolled back"
        if not hasattr(DynamicSlidingWindowLayer, "activate_past_recording"):
            return ("the model has sliding-window attention layers, and this transformers cannot keep "
                    "their evicted positions for a rollback")
    return ""


class TransformersBackend:
    """:class:`ModelBackend` over a transformers causal LM and a ``DynamicCache``.

    Rolling back is ``DynamicCache.crop(-n)``; sliding-window layers record the last pass's
    positions so that it stays exact (see :func:`rollback_refusal`). One row per batch for now: rows of a
    ``DynamicCache`` share one length, so rows rolled back by different counts need padding
    and position bookkeeping that this class does not do yet (more rows raise
    :class:`~structgen.errors.OptionError`). Call it under ``torch.no_grad()``.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self._device = next(model.parameters()).device
        self._width = logits_width(model)
        self._refusal = rollback_refusal(model)
        self._cache: Any = None

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
    def max_positions(self) -> int | None:
        """The model's context window (``max_position_embeddings`` or ``n_positions``), if known."""
        config = getattr(self.model, "config", None)
        for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def prefill(self, rows: Sequence[Sequence[int]]) -> "torch.Tensor":
        import torch
        from transformers import DynamicCache

        _one_row(len(rows))
        self._cache = DynamicCache(config=self.model.config)
        for layer in getattr(self._cache, "layers", ()):
            # A sliding-window layer keeps each pass's positions past its window until the next
            # crop, so refused draft positions can be rolled back exactly.
            if getattr(layer, "is_sliding", False) and hasattr(layer, "activate_past_recording"):
                layer.activate_past_recording()
        out = self.model(input_ids=torch.tensor([list(rows[0])], device=self._device),
                         past_key_values=self._cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1]

    def extend(self, new_ids: Sequence[Sequence[int]]) -> "list[torch.Tensor]":
        import torch

        _one_row(len(new_ids))
        out = self.model(input_ids=torch.tensor([list(new_ids[0])], device=self._device),
                         past_key_values=self._cache, use_cache=True)
        return [out.logits[0]]

    def rollback(self, counts: Sequence[int]) -> None:
        _one_row(len(counts))
        if counts[0]:
            self._cache.crop(-counts[0])
        else:  # trims sliding-window layers back to their window (full layers are untouched)
            for layer in getattr(self._cache, "layers", ()):
                if getattr(layer, "is_sliding", False) and getattr(layer, "record_past", False):
                    layer.crop(0)


def _one_row(rows: int) -> None:
    if rows != 1:
        raise OptionError(f"TransformersBackend decodes one row at a time, not {rows}; "
                          "decode the sequences one by one")
