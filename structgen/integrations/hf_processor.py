"""A transformers ``LogitsProcessor``: any ``model.generate`` call, constrained by a compiled grammar.

``model.generate(..., logits_processor=[LogitsProcessor(compiled)])`` masks every step's logits
so that each row's new tokens stay in the language of ``compiled`` (a schema, grammar, regex,
SQL or tool-call grammar from ``structgen.compile_*``), and end-of-sequence comes only where
the output is complete.

The processor is a pure function of each row's tokens: every call brings the row's matcher to
the tokens after the prompt (advancing the new ones, rolling back to the common prefix when
the tokens changed), then masks. transformers' assisted generation relies on that: with
``prompt_lookup_num_tokens`` or an ``assistant_model`` it calls the processors once per draft
position on a growing prefix, then drops the refused positions, and prompt lookup probes
candidates with them. Greedy, sampling, beams and left-padded batches need nothing more.

The prompt is what the first call sees; a later call whose first tokens differ (the same
processor reused for another ``generate``) starts over. A batch may give each row its own
grammar: a list of compiled grammars, one per prompt (``num_return_sequences`` copies of a
prompt share its grammar). After a row's end-of-sequence token its logits are left alone
(transformers pads the row from there).

Compile with ``model=model`` (``compile_json_schema(schema, tokenizer, model=model)``) so that
the grammar's end-of-sequence ids include those of the model's generation config; the mask
follows the logits' width (columns past the tokenizer's tokens are never allowed).

Example
-------
>>> import structgen                                                         # doctest: +SKIP
>>> compiled = structgen.compile_json_schema({"type": "integer"}, tokenizer, model=model)  # doctest: +SKIP
>>> out = model.generate(**inputs, max_new_tokens=20,
...                      logits_processor=[structgen.LogitsProcessor(compiled)])  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import torch
import transformers

from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError
from structgen.integrations.rows import BatchRows, check_logits, check_width, tensor_shown

__all__ = ["LogitsProcessor"]


class LogitsProcessor(transformers.LogitsProcessor):
    """Masks ``model.generate``'s logits to a compiled grammar (see the module notes).

    Parameters
    ----------
    compiled
        A compiled grammar (:func:`structgen.compile_json_schema`, ``compile_grammar``,
        ``compile_regex``, ``compile_sql``, ``compile_tool_calls``), shared by every row; or a
        list of them, one per prompt of the batch. All must share one vocabulary.
    reasoning, thinking_budget
        ``(start, end)`` thinking markers: each row first thinks (free text that never holds
        ``end``; the start marker is left out where the prompt already ends with it), then
        follows its grammar; after ``thinking_budget`` tokens of thinking the end marker is
        forced (:mod:`structgen.tasks.reasoning`), as :meth:`structgen.Generator.json` does.
    tokenizer
        Spells the end marker canonically (default: the vocabulary's longest tokens).
    max_new_tokens
        The generation's ``max_new_tokens``: given, each row's last tokens leave a completion that
        fits (the budget rule of ``budget="complete"``,
        :func:`~structgen.decoding.budget.within_budget`), so the output ends complete instead of
        cut; greedy choices are those of :meth:`structgen.Generator.json`'s. Without it, none.

    Raises
    ------
    OptionError
        Nothing compiled, grammars over different vocabularies, a batch whose size the list
        does not divide, logits narrower than the vocabulary or wider than a padded one (a
        grammar for another tokenizer), or inputs of the wrong rank or dtype.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> import structgen, torch
    >>> vocab = Vocabulary([b"a", b"b", None], eos_ids=[2])
    >>> processor = LogitsProcessor(structgen.compile_regex("ab", vocab))
    >>> prompt = torch.tensor([[2]])                 # any prompt: one token here
    >>> processor(prompt, torch.zeros(1, 3)).tolist()
    [[0.0, -inf, -inf]]
    >>> processor(torch.tensor([[2, 0, 1]]), torch.zeros(1, 3)).tolist()   # complete: only EOS
    [[-inf, -inf, 0.0]]
    """

    def __init__(self, compiled: Any, *, reasoning: "tuple[str, str] | None" = None,
                 thinking_budget: int | None = None, tokenizer: Any = None, max_new_tokens: int | None = None) -> None:
        if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)
                                           or max_new_tokens < 1):
            raise OptionError(f"LogitsProcessor: max_new_tokens must be an int >= 1 or None, not {max_new_tokens!r:.40}")
        self.max_new_tokens = max_new_tokens
        grammars = list(compiled) if isinstance(compiled, (list, tuple)) else [compiled]
        if not grammars:
            raise OptionError("LogitsProcessor needs a compiled grammar (or a list of them, one per prompt)")
        for k, grammar in enumerate(grammars):
            if not callable(getattr(grammar, "matcher", None)) or not isinstance(
                    getattr(grammar, "vocabulary", None), Vocabulary):
                where = f" (item {k})" if len(grammars) > 1 else ""
                raise OptionError(f"LogitsProcessor takes what structgen.compile_* returns{where}, "
                                  f"not {type(grammar).__name__}")
        prints = {grammar.vocabulary.fingerprint for grammar in grammars}
        if len(prints) > 1:
            raise OptionError("the compiled grammars use different vocabularies; compile them all with the "
                              "model's tokenizer (and the same model= or vocab_size=)")
        self.grammars = grammars
        self.vocabulary: Vocabulary = grammars[0].vocabulary
        self._thinking = _thinking_options(reasoning, thinking_budget, tokenizer)
        self._thinking_grammars: dict[tuple[int, bool], Any] = {}
        self._prompt: torch.Tensor | None = None
        self._width = 0
        self._rows: BatchRows | None = None
        self._outputs: list[list[int]] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        _check_inputs(input_ids, scores)
        if self._rows is None or self._is_new(input_ids, scores):
            self._start(input_ids, scores)
        assert self._prompt is not None and self._rows is not None
        tail = input_ids[:, self._prompt.shape[1]:].tolist()
        eos = self.vocabulary.eos_ids
        for r, tokens in enumerate(tail):
            end = next((i for i, token in enumerate(tokens) if token in eos), None)
            # the live list the row's matcher follows, changed in place
            self._outputs[r][:] = tokens if end is None else ()
            if end is None and r not in self._rows.rows:
                self._rows.add(r, self._matcher_for(r, len(tail)), self._outputs[r], limit=self.max_new_tokens)
            elif end is not None:
                self._rows.remove(r)  # ended: transformers pads it, its logits do not matter
        return self._rows.mask(scores)

    def _is_new(self, input_ids: torch.Tensor, scores: torch.Tensor) -> bool:
        """Whether this call belongs to another ``generate`` than the last (another prompt)."""
        prompt = self._prompt
        assert prompt is not None
        return (input_ids.shape[0] != prompt.shape[0] or input_ids.shape[1] < prompt.shape[1]
                or scores.shape[1] != self._width
                or not torch.equal(input_ids[:, :prompt.shape[1]], prompt.to(input_ids.device)))

    def _start(self, input_ids: torch.Tensor, scores: torch.Tensor) -> None:
        rows, width = input_ids.shape[0], scores.shape[1]
        if rows % len(self.grammars):
            raise OptionError(f"{len(self.grammars)} compiled grammars for a batch of {rows} rows: give one per "
                              "prompt (num_return_sequences copies of a prompt share its grammar)")
        check_width(self.vocabulary, width)
        self._prompt = input_ids.detach().clone()
        self._width = width
        self._rows = BatchRows(width, sorted(self.vocabulary.eos_ids))
        self._outputs = [[] for _ in range(rows)]

    def _matcher_for(self, row: int, rows: int) -> Any:
        k = row // (rows // len(self.grammars))
        if self._thinking is None:
            return self.grammars[k].matcher()
        from structgen.tasks.reasoning import ThinkingGrammar, prompt_opened

        markers, budget, end_ids = self._thinking
        assert self._prompt is not None
        opened = prompt_opened(self.vocabulary, self._prompt[row].tolist(), markers[0])
        got = self._thinking_grammars.get((k, opened))
        if got is None:
            got = ThinkingGrammar(self.grammars[k], markers, opened=opened, budget=budget, end_ids=end_ids)
            self._thinking_grammars[(k, opened)] = got
        return got.matcher()


def _thinking_options(reasoning: Any, budget: Any, tokenizer: Any) -> "tuple[tuple[str, str], int | None, Any] | None":
    """The processor's thinking: markers, budget and the end marker's canonical tokens."""
    if reasoning is None:
        if budget is not None:
            raise OptionError("thinking_budget needs reasoning=(start, end)")
        return None
    if not (isinstance(reasoning, (tuple, list)) and len(reasoning) == 2 and all(isinstance(m, str) and m
                                                                                  for m in reasoning)):
        raise OptionError(f"reasoning must be a (start, end) pair of marker strings, not {reasoning!r:.80}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise OptionError(f"thinking_budget must be an int >= 0, not {budget!r:.40}")
    end_ids = list(tokenizer.encode(reasoning[1], add_special_tokens=False)) if tokenizer is not None else None
    return (reasoning[0], reasoning[1]), budget, end_ids


def _check_inputs(input_ids: Any, scores: Any) -> None:
    """What ``model.generate`` hands a processor: (rows, length) integer ids and (rows, width)
    floating-point scores."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.is_floating_point() \
            or input_ids.dtype == torch.bool:
        raise OptionError(f"LogitsProcessor: input_ids must be a 2-dimensional integer tensor, not "
                          f"{tensor_shown(input_ids)}")
    check_logits(scores, "LogitsProcessor: scores")
    if scores.shape[0] != input_ids.shape[0]:
        raise OptionError(f"LogitsProcessor: {input_ids.shape[0]} rows of input_ids but {scores.shape[0]} of scores")
