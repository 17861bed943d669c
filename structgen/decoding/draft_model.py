"""Draft-model drafts under the grammar: a smaller causal LM with the same tokenizer guesses the
next tokens under the same masks, with its own KV cache.

:class:`DraftModel` is a :class:`~structgen.decoding.drafts.DraftSource`. For each row it keeps a
cache of the draft model over the prompt and the output so far; each proposal first brings that
cache level with the row (rolling back what the target refused, feeding what it chose, in one
pass), then guesses one token per pass of the draft model under the grammar mask, greedy or
sampled from the same processed distribution ``q`` the target samples from (the loop then
verifies with ``min(1, p/q)``, :func:`~structgen.decoding.sampling.verify_sampled_draft`). Where
the grammar forces text the model stops guessing and the forced text ends the draft, at no cost.

Every guessed token costs a pass of the draft model: :attr:`DraftModel.cost_per_token` is its
measured time over the target's 1-position pass, and the controller
(:mod:`structgen.decoding.controller`) only runs it where the expected payoff beats the cheap
sources and a plain step, so a draft model that does not pay switches itself off.

With no second model of the same tokenizer at hand, :func:`truncated_model` makes one from the
target: its first layers under its own final norm and head, sharing the weights (no copy).

Example
-------
>>> from structgen import Generator                                       # doctest: +SKIP
>>> from structgen.decoding.models import load_default_model              # doctest: +SKIP
>>> from structgen.decoding.draft_model import truncated_model            # doctest: +SKIP
>>> model, tokenizer = load_default_model()                               # doctest: +SKIP
>>> gen = Generator(model, tokenizer, draft_model=truncated_model(model, 8))  # doctest: +SKIP
>>> gen.json({"type": "string"}, "Name a colour.").stats.by_source        # doctest: +SKIP
{'forced': DraftStats(...), 'model': DraftStats(...)}
"""

from __future__ import annotations

import copy
import secrets
import statistics
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Sequence

from structgen.decoding.backend import TransformersBackend
from structgen.decoding.config import DecodeConfig
from structgen.decoding.costs import PassCosts
from structgen.decoding.drafts import Draft, forced_draft
from structgen.decoding.masking import Masker
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError

if TYPE_CHECKING:  # torch is imported where a model runs, so compiling grammars never needs it
    import torch

__all__ = ["DraftModel", "quantized_model", "truncated_model"]

#: Assumed cost of a draft-model pass relative to a target step before either was timed.
DEFAULT_COST = 0.5


class DraftModel:
    """:class:`~structgen.decoding.drafts.DraftSource` over a draft model (see the module notes).

    Parameters
    ----------
    model
        A transformers causal LM with the target's tokenizer (its logits may be wider).
    tokenizer, vocab
        The target's tokenizer and vocabulary (forced text is spelled with them).
    costs
        The target's pass-cost curve, whose 1-position time prices a draft pass.
    prefer
        How the target splits text the grammar forces (:attr:`DraftEnds.prefer
        <structgen.decoding.drafts.DraftEnds.prefer>`), shared with the other sources.

    Attributes
    ----------
    fixed_cost
        ``None`` (default): :attr:`cost_per_token` is measured; a number: that cost instead
        (e.g. to make the draft model draft wherever its acceptance is good, as tests do).
    """

    fixed_cost: float | None = None

    name = "model"

    def __init__(self, model: Any, tokenizer: Any, vocab: Vocabulary, costs: PassCosts | None = None,
                 prefer: dict[int, int] | None = None) -> None:
        self.model = model
        self.prefer = prefer if prefer is not None else {}
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.costs = costs
        self.pass_seconds: deque[float] = deque(maxlen=64)

    @property
    def cost_per_token(self) -> float:
        """A draft pass's median time over the target's 1-position pass (measured as they run)."""
        if self.fixed_cost is not None:
            return self.fixed_cost
        step = self.costs.step_seconds if self.costs is not None else None
        if not step or not self.pass_seconds:
            return DEFAULT_COST
        return statistics.median(self.pass_seconds) / step

    def for_row(self, prompt_ids: Sequence[int], config: DecodeConfig) -> "_DraftModelRow":
        return _DraftModelRow(self, list(prompt_ids), config)

    def propose(self, matcher: Matcher, tokens: Sequence[int], limit: int) -> Draft:
        raise OptionError("DraftModel drafts per row: the decoding loop calls for_row() first")

    def record(self, draft: Draft, kept: int, choice: int | None = None) -> None:
        """Nothing to learn here: the row's cache is brought level on its next proposal."""


class _DraftModelRow:
    """The draft model's cache and sampling generator for one row."""

    name = DraftModel.name

    def __init__(self, parent: DraftModel, prompt_ids: list[int], config: DecodeConfig) -> None:
        import torch

        self.parent = parent
        self.prompt = prompt_ids
        self.config = config
        self.backend = TransformersBackend(parent.model)
        self.masker = Masker(self.backend.logits_width)
        self.cached: list[int] = []  # the ids in the draft model's cache
        seed = config.seed + 7919 if config.seed is not None else secrets.randbits(63)
        self.generator = torch.Generator().manual_seed(seed % (1 << 64))  # the offset may pass the top

    @property
    def cost_per_token(self) -> float:
        return self.parent.cost_per_token

    def propose(self, matcher: Matcher, tokens: Sequence[int], limit: int) -> Draft:
        import torch

        from structgen.decoding import sampling

        if limit <= 0 or matcher.forced_text():
            return Draft((), self.name)  # forced text is the forced source's, and free
        vocab = self.parent.vocab
        with torch.no_grad():
            logits = self._level(self.prompt + list(tokens))
            probe = matcher.fork()
            guessed: list[int] = []
            qs: list[Any] = []
            while True:
                masked = self.masker.masked(logits, probe)
                if self.config.greedy:
                    token, q = sampling.greedy_token(masked), None
                else:
                    q = sampling.target_probs(masked, temperature=self.config.temperature, top_k=self.config.top_k,
                                              top_p=self.config.top_p)
                    token = sampling.sample_token(q, self.generator)
                if token in vocab.eos_ids or not probe.advance(token):
                    break
                guessed.append(token)
                qs.append(q)
                if len(guessed) == limit or probe.is_finished() or probe.forced_text():
                    break
                logits = self._feed([token])
        labels = [self.name] * len(guessed)
        if guessed and len(guessed) < limit:  # the text the grammar forces next ends the draft
            forced = forced_draft(probe, self.parent.tokenizer, vocab, limit - len(guessed),
                                  self.parent.prefer)
            guessed += forced
            labels += ["forced"] * len(forced)
            qs += [None] * len(forced)
        if not guessed:
            return Draft((), self.name)
        return Draft(tuple(guessed), self.name, tuple(labels), () if self.config.greedy else tuple(qs))

    def record(self, draft: Draft, kept: int, choice: int | None = None) -> None:
        """The cache is brought level with the row on the next proposal."""

    def _level(self, ids: list[int]) -> "torch.Tensor":
        """Bring the cache level with ``ids`` (roll back what differs, feed what is missing, at
        least the last id); the logits after ``ids``."""
        if not self.cached:
            self.cached = list(ids)
            return self.backend.prefill([ids])[0]
        common = 0
        for a, b in zip(self.cached, ids):
            if a != b:
                break
            common += 1
        common = min(common, len(ids) - 1)
        if len(self.cached) > common:
            self.backend.rollback([len(self.cached) - common])
            del self.cached[common:]
        return self._feed(ids[common:])

    def _feed(self, ids: list[int]) -> "torch.Tensor":
        started = time.perf_counter()
        logits = self.backend.extend([ids])[0][-1]
        if len(ids) == 1:
            self.parent.pass_seconds.append(time.perf_counter() - started)
        self.cached += ids
        return logits


def truncated_model(model: Any, layers: int) -> Any:
    """``model``'s first ``layers`` decoder layers under its own final norm and head: a draft
    model sharing the target's weights and tokenizer (no copy). For transformers decoder models
    that keep their layers in ``model.model.layers`` (Llama, Mistral, Qwen, Gemma, SmolLM...).

    Raises
    ------
    OptionError
        The model keeps its layers elsewhere, or ``layers`` is not between 1 and their number.
    """
    import torch

    inner = getattr(model, "model", None)
    stack = getattr(inner, "layers", None)
    if not isinstance(stack, torch.nn.ModuleList):
        raise OptionError(f"truncated_model() needs a decoder with model.model.layers; "
                          f"{type(model).__name__} keeps its layers elsewhere")
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= len(stack):
        raise OptionError(f"layers must be an int from 1 to {len(stack)}, not {layers!r}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = layers
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types)[:layers]
    draft_inner = copy.copy(inner)
    draft_inner._modules = dict(inner._modules)
    draft_inner.layers = torch.nn.ModuleList(list(stack)[:layers])
    draft_inner.config = config
    draft = copy.copy(model)
    draft._modules = dict(model._modules)
    draft.model = draft_inner
    draft.config = config
    return draft.eval()


def quantized_model(model: Any) -> Any:
    """A copy of ``model`` with its linear layers dynamically quantized to int8 (torch's eager
    ``quantize_dynamic``, CPU only): a draft model that agrees with the target most of the
    time at about 0.6 of its pass time here (benchmarks/results). Costs a copy of the model.
    """
    import torch
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch announces the move of eager quantization to torchao
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear},
                                                      dtype=torch.qint8).eval()
