"""structgen's drafted decoding loop behind ``model.generate``, through transformers'
``custom_generate`` hook.

``model.generate(**inputs, custom_generate=structgen.drafted_generate(compiled, tokenizer))``
prepares the inputs as usual, then decodes with structgen's loop: masks
from ``compiled`` (one grammar, or a list with one per prompt), and the text the grammar
forces and values copied from the prompt checked as drafts, several tokens per forward pass.
The output is what :class:`~structgen.integrations.hf_processor.LogitsProcessor` under plain
``model.generate`` gives (greedy: the same tokens; sampling: the same distribution), in
fewer passes. It returns ``generate``'s usual tensor: each row's prompt (as padded), its new
tokens and its end-of-sequence token, rows right-padded with ``pad_token_id``. A row that runs
out of ``max_new_tokens`` keeps what it wrote, as ``generate`` does.

Greedy (``do_sample=False``) and sampling (``temperature``, ``top_k``, ``top_p``) are honoured
by the loop itself. The other logits processors ``generate`` prepares (``repetition_penalty``,
``no_repeat_ngram_size``, a ``logits_processor=[...]`` of your own) run inside the loop on each
position's raw logits before the mask, drafted positions included, each seeing the row as
``generate`` would (the prompt as padded, then the output so far); they must depend on that
prefix only, and are called one row at a time (batch index 0; transformers' repetition
penalty gets each row's own padding length). Other warpers (``min_p``, ``typical_p``, ...) and
stopping criteria the loop cannot apply (``stop_strings``, ...) are refused (an
``OptionError`` naming them). A ``streamer`` given to ``drafted_generate`` (one prompt)
receives each pass's accepted tokens.

Example
-------
>>> import structgen                                                           # doctest: +SKIP
>>> compiled = structgen.compile_json_schema(schema, tokenizer, model=model)  # doctest: +SKIP
>>> out = model.generate(**inputs, max_new_tokens=40,
...                      custom_generate=structgen.drafted_generate(compiled, tokenizer))  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable

import torch

from structgen.decoding.config import DecodeConfig
from structgen.decoding.loop import RowRequest
from structgen.errors import IncompleteGenerationError, OptionError
from structgen.tasks.context import ModelContext

__all__ = ["drafted_generate"]

#: what ``generate`` prepares that the loop honours itself (from ``do_sample``, ``temperature``,
#: ``top_k``, ``top_p``, ``max_new_tokens`` and the end-of-sequence ids; structgen's own
#: ``LogitsProcessor``, whose grammar is the one given here)
_HONOURED = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "LogitsProcessor",
             "MaxLengthCriteria", "EosTokenCriteria", "MaxTimeCriteria")

_CONTEXTS: dict[tuple[int, int], ModelContext] = {}
_LOCK = threading.Lock()


def drafted_generate(grammar: Any, tokenizer: Any, *, streamer: Any = None,
                     budget: str = "raise") -> Callable[..., torch.LongTensor]:
    """A ``custom_generate`` for ``model.generate`` that decodes under ``grammar`` with
    structgen's drafted loop (see the module notes).

    Parameters
    ----------
    grammar
        What ``structgen.compile_*`` returns, compiled for this model's tokenizer (with
        ``model=model``); or a list of them, one per prompt.
    tokenizer
        The model's tokenizer (drafts are spelled with it).
    streamer
        A transformers streamer (e.g. ``TextStreamer``) for one prompt: it receives the prompt,
        then each pass's accepted tokens. (``generate`` does not hand its own ``streamer=`` to
        a ``custom_generate`` function, so it goes here.)
    budget
        ``"raise"`` (default, as ``generate``): a row that reaches ``max_new_tokens`` ends there,
        unfinished, exactly as under :class:`structgen.LogitsProcessor`. ``"complete"``: the
        choices near the end keep each row's output complete within ``max_new_tokens``
        (structgen's own default; see :class:`~structgen.decoding.config.DecodeConfig`).

    Raises
    ------
    OptionError
        At ``generate``: a grammar compiled over another vocabulary than the model's, a list of
        grammars that does not divide the batch, or a warper or stopping criterion the loop does
        not apply.
    """
    grammars = list(grammar) if isinstance(grammar, (list, tuple)) else [grammar]
    if not grammars or not all(callable(getattr(g, "matcher", None)) for g in grammars):
        raise OptionError("drafted_generate takes what structgen.compile_* returns (or a list, one per prompt)")
    DecodeConfig(budget=budget)  # checked now, not at generate

    def generate(model: Any, input_ids: torch.LongTensor, logits_processor: Any, stopping_criteria: Any,
                 generation_config: Any, **model_kwargs: Any) -> torch.LongTensor:
        return _generate(model, input_ids, logits_processor, stopping_criteria, generation_config, grammars,
                         tokenizer, streamer, budget, model_kwargs)
    return generate


def _generate(model: Any, input_ids: torch.LongTensor, logits_processor: Any, stopping_criteria: Any,
              generation_config: Any, grammars: list[Any], tokenizer: Any, streamer: Any, budget: str,
              model_kwargs: dict[str, Any]) -> torch.LongTensor:
    processors = [p for p in logits_processor or [] if type(p).__name__ not in _HONOURED]
    # generate runs warpers after the mask and temperature; the loop would run them before: refuse
    _refuse_unknown([p for p in processors if type(p).__name__.endswith("Warper")] + list(stopping_criteria or []))
    context = _context(model, tokenizer)
    rows = input_ids.shape[0]
    if rows % len(grammars):
        raise OptionError(f"{len(grammars)} grammars for a batch of {rows} rows: give one per prompt")
    for one in grammars:
        if getattr(getattr(one, "vocabulary", None), "fingerprint", None) != context.vocabulary.fingerprint:
            raise OptionError("the grammar is compiled over another vocabulary than this model's: compile it with "
                              "structgen.compile_*(..., tokenizer, model=model)")
    mask = model_kwargs.get("attention_mask")
    prompts = [row[mask[r].bool()].tolist() if mask is not None else row.tolist() for r, row in enumerate(input_ids)]
    config = replace(_config(generation_config, input_ids.shape[1], processors), budget=budget)
    # processors see each row as generate's do: the prompt as padded, then the output
    requests = [RowRequest(grammars[r // (rows // len(grammars))].matcher(), prompts[r],
                           history=input_ids[r].tolist() if processors else None,
                           config=replace(config, logits_processors=_for_row(processors, r)) if processors else None)
                for r in range(rows)]
    if streamer is not None:
        if rows > 1:
            raise OptionError("a streamer takes one prompt (as in transformers)")
        streamer.put(input_ids.cpu())
        requests[0].on_tokens = lambda tokens: streamer.put(torch.tensor(tokens))
    outcomes = context.decode_batch(requests, config)
    if streamer is not None:
        streamer.end()
    eos = _first(generation_config.eos_token_id)
    if eos is None:
        eos = min(context.vocabulary.eos_ids)
    pad = _first(generation_config.pad_token_id)
    pad = eos if pad is None else pad
    new = []
    for outcome in outcomes:
        if isinstance(outcome.error, IncompleteGenerationError):
            new.append(list(outcome.error.token_ids))  # the budget ran out: what was written, as generate does
        elif outcome.error is not None:
            raise outcome.error
        else:
            new.append(outcome.tokens + [eos])
    width = max(len(tokens) for tokens in new)
    tail = torch.tensor([tokens + [pad] * (width - len(tokens)) for tokens in new], dtype=input_ids.dtype)
    return torch.cat([input_ids, tail.to(input_ids.device)], dim=1)


def _refuse_unknown(parts: list[Any]) -> None:
    unknown = sorted({type(p).__name__ for p in parts if type(p).__name__ not in _HONOURED})
    if unknown:
        raise OptionError(f"structgen.drafted_generate does not apply {', '.join(unknown)} inside its drafted loop; "
                          "use model.generate with logits_processor=[structgen.LogitsProcessor(compiled)] instead")


def _for_row(processors: list[Any], r: int) -> list[Any]:
    """The processors for row ``r`` alone (the loop calls them one row at a time): transformers'
    repetition penalty holds every row's padding length, which becomes row ``r``'s own."""
    from transformers import RepetitionPenaltyLogitsProcessor

    own = []
    for processor in processors:
        ignore = getattr(processor, "prompt_ignore_length", None)
        if isinstance(processor, RepetitionPenaltyLogitsProcessor) and isinstance(ignore, torch.Tensor):
            processor = RepetitionPenaltyLogitsProcessor(processor.penalty, prompt_ignore_length=int(ignore[r]))
        own.append(processor)
    return own


def _config(generation_config: Any, prompt_width: int, processors: list[Any]) -> DecodeConfig:
    budget = generation_config.max_new_tokens
    if budget is None:
        budget = generation_config.max_length - prompt_width
    if not generation_config.do_sample:
        return DecodeConfig(max_new_tokens=budget, logits_processors=processors)
    return DecodeConfig(max_new_tokens=budget, temperature=generation_config.temperature or 1.0,
                        top_p=generation_config.top_p if generation_config.top_p is not None else 1.0,
                        top_k=generation_config.top_k or 0, logits_processors=processors)


def _context(model: Any, tokenizer: Any) -> ModelContext:
    """One context per (model, tokenizer): the vocabulary is read once, drafting learns across calls."""
    key = (id(model), id(tokenizer))
    with _LOCK:
        context = _CONTEXTS.get(key)
        if context is None or context.model is not model or context.tokenizer is not tokenizer:
            if len(_CONTEXTS) >= 4:
                _CONTEXTS.pop(next(iter(_CONTEXTS)))
            context = _CONTEXTS[key] = ModelContext(model, tokenizer)
    return context


def _first(ids: Any) -> int | None:
    if ids is None:
        return None
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    return ids[0] if isinstance(ids, (list, tuple)) else int(ids)

