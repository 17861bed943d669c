"""What every task decodes with: one model, its tokenizer and vocabulary, a compiler, the
pass-cost curve and what drafting has learned about the model.

A :class:`ModelContext` is owned by :class:`structgen.Generator` and handed to the task
functions (:mod:`structgen.tasks.json_task`, :mod:`~structgen.tasks.text`,
:mod:`~structgen.tasks.sql`, :mod:`~structgen.tasks.tool_calls`), so the tasks need nothing
from the API layer.

Example
-------
>>> from structgen.tasks.context import ModelContext                     # doctest: +SKIP
>>> from structgen.decoding.models import load_default_model             # doctest: +SKIP
>>> ctx = ModelContext(*load_default_model())                            # doctest: +SKIP
>>> from structgen.decoding.config import DecodeConfig                   # doctest: +SKIP
>>> m = ctx.compiler.regex("yes|no").matcher()                           # doctest: +SKIP
>>> ctx.decode(m, ctx.chat_ids("Is water wet?"), DecodeConfig())[:2]     # doctest: +SKIP
([10407], 'grammar')
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Collection, Sequence

from structgen.core.limits import check_prompt_bytes
from structgen.decoding.backend import ModelBackend, TransformersBackend, logits_width
from structgen.decoding.config import DecodeConfig
from structgen.decoding.costs import PassCosts
from structgen.decoding.draft_model import DraftModel
from structgen.decoding.drafts import DraftEnds, DraftSource, ForcedText
from structgen.decoding.lookup import PromptLookup
from structgen.decoding.loop import Finish, RowOutcome, RowRequest, check_context, decode, decode_rows
from structgen.decoding.stats import GenerationStats
from structgen.engine.compiler import Compiler
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError
from structgen.tasks.chat import chat_messages, thinking_switches, utf8_size

__all__ = ["ModelContext"]


class ModelContext:
    """A transformers causal LM (in eval mode, where it should run) with its tokenizer, ready
    for the tasks.

    Parameters
    ----------
    model, tokenizer
        The model and its tokenizer.
    pass_costs
        The forward-pass cost curve that sizes drafts, used as it is; ``None``: the curve saved
        for this model, device and thread count (else the default), learning from every pass
        (:meth:`PassCosts.for_model <structgen.decoding.costs.PassCosts.for_model>`).
    draft_model
        A smaller causal LM with the same tokenizer, drafting under the grammar
        (:class:`~structgen.decoding.draft_model.DraftModel`); ``None``: none.
    """

    def __init__(self, model: Any, tokenizer: Any, *, pass_costs: PassCosts | None = None,
                 draft_model: Any = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        width = logits_width(model)
        self.vocabulary = Vocabulary.from_tokenizer(
            tokenizer, vocab_size=width, generation_config=getattr(model, "generation_config", None))
        self.compiler = Compiler(self.vocabulary)
        self._costs = pass_costs
        #: learned per model: which draft ends it tends to refuse
        self.draft_ends = DraftEnds()
        #: learned per model: acceptance per draft label, where each generation starts from
        self.acceptance: dict[str, float] = {}
        self.draft_model = None
        if draft_model is not None:
            _check_draft_model(model, draft_model)
            self.draft_model = DraftModel(draft_model, tokenizer, self.vocabulary, self.pass_costs,
                                          self.draft_ends.prefer)

    @property
    def pass_costs(self) -> PassCosts:
        """Relative cost of a forward pass by number of new positions (see ``pass_costs``)."""
        if self._costs is None:
            self._costs = PassCosts.for_model(self.model)
        return self._costs

    @pass_costs.setter
    def pass_costs(self, costs: PassCosts) -> None:
        self._costs = costs

    def backend(self) -> ModelBackend:
        """A fresh backend (its own cache) over the model, for one generation."""
        return TransformersBackend(self.model)

    def draft_sources(self, config: DecodeConfig | None = None) -> list[DraftSource]:
        """The draft sources ``config.speculate`` asks for (all there are by default): the
        grammar's forced text, values copied from the prompt, the draft model if there is one.

        Raises
        ------
        OptionError
            ``speculate`` names ``"model"`` and there is no draft model.
        """
        wanted = config.drafts if config is not None else ("forced", "lookup", "model")
        if "model" in wanted and self.draft_model is None and config is not None and config.speculate is not True:
            raise OptionError("speculate names the 'model' draft source, but this Generator has no draft_model; "
                              "pass Generator(..., draft_model=...) or leave 'model' out")
        sources: list[DraftSource] = []
        if "forced" in wanted:
            sources.append(ForcedText(self.tokenizer, self.vocabulary, self.draft_ends))
        if "lookup" in wanted:
            sources.append(PromptLookup(self.tokenizer, self.vocabulary, self.draft_ends))
        if "model" in wanted and self.draft_model is not None:
            sources.append(self.draft_model)
        return sources

    def decode(self, matcher: Matcher, prompt_ids: Sequence[int], config: DecodeConfig, *,
               banned_first: Collection[int] = (), stop: Callable[[list[int]], bool] | None = None,
               ) -> tuple[list[int], Finish, GenerationStats]:
        """:func:`structgen.decoding.loop.decode` on this model with its draft sources."""
        sources = self.draft_sources(config) if config.speculate else []
        try:
            return decode(self.backend(), self.vocabulary, matcher, prompt_ids, config, sources=sources,
                          costs=self.pass_costs, banned_first=banned_first, stop=stop, learned=self.acceptance)
        finally:
            self.pass_costs.save()

    def decode_batch(self, requests: Sequence[RowRequest], config: DecodeConfig) -> list[RowOutcome]:
        """:func:`structgen.decoding.loop.decode_rows` on this model with its draft sources:
        the rows decoded together, each with its own outcome."""
        sources = self.draft_sources(config) if config.speculate else []
        try:
            return decode_rows(self.backend(), self.vocabulary, requests, config, sources=sources,
                               costs=self.pass_costs, learned=self.acceptance)
        finally:
            self.pass_costs.save()

    def check_fits(self, prompt_ids: Sequence[int], config: DecodeConfig) -> None:
        """Raise :class:`~structgen.ContextLengthError` now if ``prompt_ids`` and the token
        budget cannot fit the model's context (decoding checks too; this saves the compile)."""
        check_context(self.backend(), [prompt_ids], config)

    def encode(self, text: str) -> list[int]:
        """``text`` as token ids, as it is (no special tokens added)."""
        self._check_size(utf8_size(text, "the prompt"))
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def chat_ids(self, prompt: Any, *, thinking: bool = False) -> list[int]:
        """``prompt`` as the chat template's turns, ending where the assistant's answer starts:
        a string is the user's turn; OpenAI-style messages keep their ``system``, ``user`` and
        ``assistant`` turns (:func:`~structgen.tasks.chat.chat_messages`). Without a chat
        template, the turns' texts joined by blank lines. ``thinking`` sets the template's own
        switch (:func:`~structgen.tasks.chat.thinking_switches`)."""
        messages = chat_messages(prompt)
        self._check_size(sum(len(m["content"].encode("utf-8")) for m in messages))
        if not getattr(self.tokenizer, "chat_template", None):
            text = "\n\n".join(m["content"] for m in messages)
            return list(self.tokenizer.encode(text, add_special_tokens=True))
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                     **thinking_switches(thinking))
        ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
        return list(ids)

    def _check_size(self, size: int) -> None:
        """Refuse text of ``size`` bytes that cannot fit the context before it is tokenized."""
        check_prompt_bytes(size, positions=self._max_positions, longest_token=self._longest_token)

    @functools.cached_property
    def _max_positions(self) -> int | None:
        """The model's context (read once: a backend is made per generation, not per prompt)."""
        return self.backend().max_positions

    @functools.cached_property
    def _longest_token(self) -> int:
        """The most bytes one token spells: the vocabulary's, or an added token's text."""
        added = getattr(self.tokenizer, "get_added_vocab", None)
        texts = added() if callable(added) else {}
        return max([len(t) for t in self.vocabulary.tokens if t] + [len(t.encode("utf-8", "replace")) for t in texts]
                   + [1])

    def text_of(self, tokens: Sequence[int], errors: str = "strict") -> str:
        """The text of ``tokens`` from their bytes (not the tokenizer's text view, which may
        strip or add spaces around SentencePiece pieces)."""
        return self.vocabulary.text_bytes(list(tokens)).decode("utf-8", errors)


def _check_draft_model(model: Any, draft_model: Any) -> None:
    """A draft model must share the target's tokenizer: at least its logits must cover the
    same vocabulary (the tokenizer itself cannot be checked from the model)."""
    if not callable(getattr(draft_model, "get_output_embeddings", None)):
        raise OptionError(f"draft_model must be a transformers causal LM, not {type(draft_model).__name__}")
    sizes = [getattr(getattr(m, "config", None), "vocab_size", None) for m in (model, draft_model)]
    if None not in sizes and sizes[0] != sizes[1]:
        raise OptionError(f"draft_model has a vocabulary of {sizes[1]} tokens and the model {sizes[0]}: "
                          "a draft model must use the model's tokenizer")
