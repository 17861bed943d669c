"""The user-facing API: a reusable :class:`Generator` and :func:`generate_json`.

A ``Generator`` owns a :class:`~structgen.tasks.context.ModelContext` (a model, its tokenizer,
their vocabulary, a compile cache, the pass-cost curve and what drafting learned about the
model); each method turns its keyword options into a frozen
:class:`~structgen.decoding.config.DecodeConfig` and hands both to a task
(:mod:`structgen.tasks.json_task`, :mod:`~structgen.tasks.text`, :mod:`~structgen.tasks.sql`,
:mod:`~structgen.tasks.tool_calls`), which compiles, prompts, decodes with drafts
(:mod:`structgen.decoding.loop`) and reads the result.

Example
-------
>>> import structgen                                                          # doctest: +SKIP
>>> schema = {"type": "object", "properties": {"name": {"type": "string"}},
...           "required": ["name"], "additionalProperties": False}        # doctest: +SKIP
>>> structgen.generate_json(schema, "Extract the person: Ada Lovelace, 36.")  # doctest: +SKIP
{'name': 'Ada Lovelace'}
"""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, Sequence

from structgen.decoding.config import DecodeConfig
from structgen.decoding.costs import PassCosts
from structgen.engine.compiler import Compiler
from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError
from structgen.tasks.context import ModelContext
from structgen.api import streaming
from structgen.tasks.jobs import Job, Listener, run_job, run_jobs
from structgen.tasks.json_task import Whitespace, json_job, prompt_ids
from structgen.tasks.results import JsonResult, TextResult
from structgen.tasks.sql import SqlResult, sql_job
from structgen.tasks.structural import StructuralResult, structural_job
from structgen.tasks.text import text_job
from structgen.tasks.tool_calls import ToolCallResult, tool_calls_job

if TYPE_CHECKING:
    import os
    import sqlite3

    from structgen.frontends.tool_calls import ToolFormat

__all__ = ["Generator", "JsonResult", "TextResult", "generate_json", "generate_grammar", "generate_regex",
           "generate_sql", "generate_tool_calls"]


class Generator:
    """A model, its tokenizer and a compile cache, ready to generate structured output.

    Parameters
    ----------
    model, tokenizer
        A transformers causal LM and its tokenizer; both ``None``: the embedded default,
        SmolLM2-135M-Instruct, loaded once per process and shared with ``generate_json`` and
        every other ``Generator()`` (:func:`structgen.decoding.models.default_model`; do not
        mutate ``gen.model`` then).
    device
        Where to run the model (e.g. ``"cpu"``, ``"cuda"``); default: where it is.
    pass_costs
        The forward-pass cost curve that decides draft lengths, used as it is; default: the
        curve saved for this model, device and thread count (else a built-in one), learning from
        the passes it runs. Pass one to make draft decisions independent of the machine's load.
    draft_model
        A smaller transformers causal LM with the same tokenizer, drafting tokens under the
        grammar (e.g. :func:`structgen.decoding.draft_model.truncated_model`); its drafts are
        used only where their measured payoff beats the cheap ones (forced text, copies from the
        prompt) and a plain step.

    Raises
    ------
    OptionError
        A model without a tokenizer, a tokenizer without a model, or a draft model whose
        vocabulary differs from the model's.

    Notes
    -----
    **Batches.** Every generation method takes lists too: ``gen.json(schemas, prompts)`` with
    two lists of the same length (or a list and a single value, shared by every row) decodes
    the rows together, one forward pass per step for the whole batch, each row under its own
    grammar, and returns a list in order. A row that fails holds its exception object in its
    place (an :class:`~structgen.IncompleteGenerationError`, a ``SchemaError``, ...); the
    other rows complete. Each row's output is what the single call would give it (greedy: the
    same tokens, up to float near-ties between batched and single passes). Drafts are sized
    for the batch: they shorten and stop as it fills, and come back as rows finish.
    ``tool_calls`` takes a list of conversations (each a list of messages), ``sql`` lists of
    questions and/or databases.

    Example
    -------
    >>> gen = Generator()                                                # doctest: +SKIP
    >>> r = gen.json({"enum": ["red", "green"]}, "Colour of grass?")     # doctest: +SKIP
    >>> r.value, r.stats.forward_passes < r.stats.new_tokens + 1         # doctest: +SKIP
    ('green', True)
    >>> [r.value for r in gen.json({"type": "integer"}, ["2 + 2?", "3 * 3?"])]  # doctest: +SKIP
    [4, 9]
    """

    def __init__(self, model: Any = None, tokenizer: Any = None, *, device: Any = None,
                 pass_costs: PassCosts | None = None, draft_model: Any = None) -> None:
        if model is None:
            if tokenizer is not None:
                raise OptionError("pass a model with the tokenizer, or neither for the default model")
            from structgen.decoding.models import default_model, load_default_model

            # The process's shared default (one copy of the weights for every caller); a
            # device move would change it for all of them, so that gets a copy of its own.
            model, tokenizer = default_model() if device is None else load_default_model()
        elif tokenizer is None:
            raise OptionError("a tokenizer is needed with the model")
        if device is not None:
            model = model.to(device)
        #: what the tasks decode with (model, tokenizer, vocabulary, compiler, pass costs, drafts)
        if draft_model is not None and device is not None:
            draft_model = draft_model.to(device)
        self.context = ModelContext(model.eval(), tokenizer, pass_costs=pass_costs,
                                    draft_model=draft_model.eval() if draft_model is not None else None)

    @property
    def model(self) -> Any:
        return self.context.model

    @property
    def tokenizer(self) -> Any:
        return self.context.tokenizer

    @property
    def vocabulary(self) -> Vocabulary:
        return self.context.vocabulary

    @property
    def compiler(self) -> Compiler:
        return self.context.compiler

    @property
    def pass_costs(self) -> PassCosts:
        """Relative cost of a forward pass by number of new positions, measured on first use."""
        return self.context.pass_costs

    def measure_pass_costs(self, **options: Any) -> PassCosts:
        """Time the model's forward passes by batch size and width (a few seconds to a minute on
        a CPU) and use the result from now on; it is kept on disk for this model, device and
        thread count (:meth:`PassCosts.measure_surface
        <structgen.decoding.costs.PassCosts.measure_surface>`, whose options these are).
        Without it, the surface is learned from the passes decoding runs, starting from a
        built-in estimate."""
        self.context.pass_costs = PassCosts.measure_surface(self.model, **options)
        return self.context.pass_costs

    def prompt_ids(self, schema: Any, prompt: Any, *, include_schema: bool = True, raw: bool = False) -> list[int]:
        """The token ids fed to the model: the chat template (when the tokenizer has one) around
        the prompt (text, or chat messages), with the schema shown after the user's last turn
        unless ``include_schema=False``; ``raw=True`` encodes a prompt string as it is."""
        return prompt_ids(self.context, schema, prompt, include_schema=include_schema, raw=raw)

    def chat_ids(self, prompt: Any) -> list[int]:
        """``prompt`` (the user's text, or chat messages) in the chat template, up to where the
        assistant's answer starts (the turns' texts without a template)."""
        return self.context.chat_ids(prompt)

    def json(self, schema: Any, prompt: "str | Sequence[Any]", *, max_new_tokens: int = 256, temperature: float = 0.0,
             top_p: float = 1.0, top_k: int = 0, seed: int | None = None, speculate: bool | tuple[str, ...] = True,
             repetition_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
             logits_processors: Sequence[Callable[[Any, Any], Any]] = (), budget: str = "complete",
             reasoning: "bool | tuple[str, str]" = False, thinking_budget: int | None = None,
             whitespace: Whitespace = "compact", strict: bool = True, include_schema: bool = True,
             raw: bool = False, lenient: bool = False, stream: bool = False) -> Any:
        """Generate one JSON value that validates against ``schema`` (or, given lists, one per row).

        Parameters
        ----------
        schema
            A JSON schema (dict or JSON text), an OpenAI ``response_format`` (``{"type":
            "json_schema", "json_schema": {"name": ..., "schema": {...}}}`` or ``{"type":
            "json_object"}``) or a Pydantic model class; a list of them decodes a batch (see
            the class notes).
        prompt
            The user's request, or a conversation: OpenAI-style messages (``system``, ``user``,
            ``assistant`` turns; the schema is shown after the last user turn); see
            :meth:`prompt_ids` for how it reaches the model. A list of prompts (or of
            conversations) decodes a batch.
        max_new_tokens
            Token budget. Under ``budget="complete"`` (default) the value is complete and valid
            within it: near the end only tokens that leave a completion within the tokens left
            are chosen, so a value may be cut short (a string closed early, an array ended);
            ``finish_reason`` is then ``"length"``. A budget below the schema's shortest value
            raises :class:`~structgen.BudgetTooSmallError` before decoding.
        budget
            ``"complete"`` (default) as above; ``"raise"``: the model's choices are left alone
            and running out raises :class:`~structgen.IncompleteGenerationError`.
        temperature, top_p, top_k, seed
            ``temperature=0`` is greedy; otherwise sampling from the masked distribution.
        speculate
            Draft and verify in one pass (default): the text the grammar forces, values copied
            from the prompt, the draft model's guesses, each where it pays. A collection of
            names (``("forced", "lookup")``) drafts from those only; ``False`` decodes one pass
            per token, the reference that drafting reproduces token for token.
        repetition_penalty, no_repeat_ngram_size, logits_processors
            Logits processing before the grammar mask, at every position (drafted ones too, so
            drafting still reproduces ``speculate=False``): transformers' repetition penalty
            (``1`` = off; over the prompt's and the output's tokens, as transformers counts
            them) and n-gram ban (``0`` = off), then any transformers ``LogitsProcessor`` objects
            (``processor(input_ids, scores)``, ``input_ids`` of shape ``(1, prefix length)``:
            prompt + output so far; it must depend on that prefix only). E.g.
            ``gen.json(schema, prompt, no_repeat_ngram_size=3)``. The prompt shows the schema,
            so a small n-gram size can ban every spelling of forced text: a ``DecodingError``.
        whitespace, strict, lenient
            Grammar options (compact whitespace and closed objects by default; values are
            spelled canonically); see :func:`~structgen.compile_json_schema`. Under
            ``lenient=True`` the result lists what was relaxed and whether the value still
            validates.
        reasoning, thinking_budget
            Let the model think first: ``True`` takes the thinking markers from the chat
            template (``<think>``/``</think>``), ``(start, end)`` names them. The thinking is
            free text that never holds the end marker, then the value follows under the schema;
            ``thinking_budget`` (tokens) forces the end marker once spent. The budget and the
            thinking count toward ``max_new_tokens``, and ``budget="complete"`` still ends the
            answer complete. ``result.reasoning`` holds the thinking, ``text`` the value's text
            (:mod:`structgen.tasks.reasoning`).
        stream
            Return an iterator instead: the value's text as it is accepted (``str`` chunks; a
            drafted run arrives as one), then the result (:mod:`structgen.api.streaming`).

        Returns
        -------
        JsonResult or list
            One result; for a batch, a list in order, a failed row holding its exception.

        Raises
        ------
        OptionError
            A decoding option is out of range (e.g. ``max_new_tokens=0``, ``top_p=0``).
        SchemaError, UnsupportedFeatureError
            The schema is invalid, or uses a keyword structgen cannot honour.
        IncompleteGenerationError
            ``budget="raise"`` and the budget ran out; ``partial_text``, ``token_ids`` and
            ``stats`` are kept.
        BudgetTooSmallError
            ``budget="complete"`` and no value fits ``max_new_tokens`` (before decoding).
        DecodingError
            The logits processing left no token the grammar allows at some position.
        """
        config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                              seed=seed, speculate=speculate, repetition_penalty=repetition_penalty,
                              no_repeat_ngram_size=no_repeat_ngram_size, logits_processors=logits_processors,
                              budget=budget, reasoning=reasoning, thinking_budget=thinking_budget)
        return self._run(lambda one_schema, one_prompt: json_job(
            self.context, one_schema, one_prompt, config, whitespace=whitespace, strict=strict,
            include_schema=include_schema, raw=raw, lenient=lenient), stream, schema=schema, prompt=prompt)

    def grammar(self, grammar: Any, prompt: str, *, start: str = "start", **options: Any) -> TextResult:
        """Generate text in the language of a Lark-style grammar (text, path or IR).

        Options are those of :meth:`text`. See :func:`structgen.compile_grammar` for the format.

        Example
        -------
        >>> gen.grammar('start: NAME " = " NUM\\nNAME: /[a-z]+/\\nNUM: /[0-9]+/',
        ...             "Assign 3 to x.").text                             # doctest: +SKIP
        'x = 3'
        """
        return self._text(lambda one: self.compiler.grammar_file(one, start=start), grammar, prompt, options)

    def regex(self, pattern: str, prompt: str, *, ignore_case: bool = False, dotall: bool = False,
              **options: Any) -> TextResult:
        """Generate text that matches ``pattern`` whole (Python ``re`` dialect); options as :meth:`text`.

        Example
        -------
        >>> gen.regex(r"(yes|no)", "Is water wet? Answer yes or no.").text   # doctest: +SKIP
        'yes'
        """
        return self._text(lambda one: self.compiler.regex(one, ignore_case=ignore_case, dotall=dotall), pattern,
                          prompt, options)

    def text(self, compiled: Any, prompt: str, *, max_new_tokens: int = 256, temperature: float = 0.0,
             top_p: float = 1.0, top_k: int = 0, seed: int | None = None, speculate: bool | tuple[str, ...] = True,
             repetition_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
             logits_processors: Sequence[Callable[[Any, Any], Any]] = (), budget: str = "complete",
             reasoning: "bool | tuple[str, str]" = False, thinking_budget: int | None = None,
             raw: bool = False, stream: bool = False) -> TextResult:
        """Generate text under a compiled grammar (:class:`~structgen.CompiledGrammar`).

        ``prompt`` is the user's turn of the chat template, or chat messages (``raw=True``:
        a string encoded as it is). The other options are those of :meth:`json`. Decoding ends when the model ends it where
        the grammar may end, or when the grammar allows nothing more.

        Raises
        ------
        OptionError
            A decoding option is out of range.
        IncompleteGenerationError
            ``budget="raise"`` and the budget ran out before the text was complete; the partial
            output is kept.
        """
        config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                              seed=seed, speculate=speculate, repetition_penalty=repetition_penalty,
                              no_repeat_ngram_size=no_repeat_ngram_size, logits_processors=logits_processors,
                              budget=budget, reasoning=reasoning, thinking_budget=thinking_budget)
        return self._run(lambda one, one_prompt: text_job(self.context, one, one_prompt, config, raw=raw),
                         stream, compiled=compiled, prompt=prompt)

    def structural(self, spec: Any, prompt: Any, *, whitespace: Whitespace = "compact", strict: bool = True,
                   raw: bool = False, stream: bool = False, **decoding: Any) -> StructuralResult:
        """Generate text under a structural tag: free text, triggers and tagged segments whose
        content is a schema, a regex or a grammar (xgrammar's JSON format; see
        :func:`structgen.compile_structural_tag`).

        ``prompt`` is the user's turn, or chat messages (``raw=True``: a string encoded as it
        is). Each ``json_schema`` inside is compiled as :meth:`json` compiles (``whitespace``,
        ``strict``, canonical values); begin and end strings are forced text, so they are
        drafted. The decoding options (``max_new_tokens``, ``temperature``, ``speculate``, ...)
        are those of :meth:`json`.

        Returns
        -------
        StructuralResult
            ``text``, and ``segments``: which format of the spec wrote which part of it, each
            ``json_schema`` segment with its parsed ``value``.

        Raises
        ------
        StructuralTagError, UnsupportedFeatureError
            A malformed or unsupported spec, naming its JSON pointer.

        Example
        -------
        >>> spec = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<calc>"],
        ...         "tags": [{"begin": "<calc>", "end": "</calc>", "content": {
        ...             "type": "json_schema", "json_schema": {"type": "integer"}}}], "at_least_one": True}}
        >>> gen.structural(spec, "What is 6 times 7?").values                     # doctest: +SKIP
        [42]
        """
        config = _decode_config(decoding)
        return self._run(lambda one_spec, one_prompt: structural_job(
            self.context, one_spec, one_prompt, config, whitespace=whitespace, strict=strict, raw=raw),
            stream, spec=spec, prompt=prompt)

    def _text(self, compile: Callable[[Any], Any], source: Any, prompt: Any, options: dict[str, Any]) -> Any:
        """:meth:`text` under what ``compile(source)`` gives; for a batch each row compiles in
        its own job, so a grammar that does not compile fails its row only."""
        if not _is_batch(source) and not _is_batch(prompt):
            return self.text(compile(source), prompt, **options)
        deferred = [_Deferred(compile, one) for one in source] if _is_batch(source) else _Deferred(compile, source)
        return self.text(deferred, prompt, **options)

    def sql(self, question: str, database: "str | os.PathLike[str] | sqlite3.Connection", *,
            execute: bool = False, max_retries: int = 4, max_new_tokens: int = 256, max_rows: int = 1000,
            time_limit: float = 10.0, temperature: float = 0.0, retry_temperature: float = 0.8,
            seed: int | None = None, speculate: bool | tuple[str, ...] = True, strict: bool = True,
            repetition_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
            logits_processors: Sequence[Callable[[Any, Any], Any]] = (), budget: str = "complete",
             reasoning: "bool | tuple[str, str]" = False, thinking_budget: int | None = None, stream: bool = False) -> SqlResult:
        """Write a SQLite query that answers ``question`` on ``database``, and check that it runs.

        The model sees the schema (DDL) and the question; decoding follows the SQL grammar
        specialised to the database (:func:`structgen.compile_sql`, ``strict=True`` by default:
        only real tables and columns). The complete query must declare the names it makes up
        and pass a read-only ``EXPLAIN`` (with ``execute=True`` it also runs, returning at most
        ``max_rows`` rows, each statement stopped after ``time_limit`` seconds). On an error
        that names an identifier, decoding goes back to it and bans the token chosen there;
        otherwise it samples again at ``retry_temperature``. At most ``max_retries`` retries.

        ``database`` is a path or a ``sqlite3.Connection``; it is only read
        (:class:`structgen.frontends.sql.ReadOnly`). The other options are those of :meth:`json`;
        a stream yields a :class:`~structgen.Retry` before each retry's text.

        Raises
        ------
        OptionError
            A decoding option or ``max_retries`` is out of range.
        SqlError
            The database cannot be read.
        SqlGenerationError
            No query passed within the retries; ``attempts`` keeps each query and its error.

        Example
        -------
        >>> r = gen.sql("How many singers are there?", "concert_singer.sqlite", execute=True)  # doctest: +SKIP
        >>> r.sql, r.rows, r.retries, r.first_try                                   # doctest: +SKIP
        ('SELECT count(*) FROM singer', [(6,)], 0, True)
        """
        if reasoning is not False:
            raise OptionError("reasoning= is not supported by sql() yet: its retries resume decoding part-way")
        config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                              speculate=speculate, repetition_penalty=repetition_penalty,
                              no_repeat_ngram_size=no_repeat_ngram_size, logits_processors=logits_processors,
                              budget=budget, reasoning=reasoning, thinking_budget=thinking_budget)
        return self._run(lambda one_question, one_database: sql_job(
            self.context, one_question, one_database, config, execute=execute, max_retries=max_retries,
            max_rows=max_rows, time_limit=time_limit, retry_temperature=retry_temperature, strict=strict),
            stream, question=question, database=database)

    def tool_calls(self, tools: list[dict[str, Any]], messages: list[dict[str, Any]], *,
                   tool_choice: Any = "auto", parallel_tool_calls: bool = True,
                   format: "str | ToolFormat | None" = None, strict: bool = True, max_new_tokens: int = 256,
                   temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                   speculate: bool | tuple[str, ...] = True, stop_repeated_calls: bool = True,
                   repetition_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
                   logits_processors: Sequence[Callable[[Any, Any], Any]] = (), budget: str = "complete",
             reasoning: "bool | tuple[str, str]" = False, thinking_budget: int | None = None,
                   stream: bool = False) -> ToolCallResult:
        """The assistant's next turn: text, tool calls, or both, with arguments that validate.

        Parameters
        ----------
        tools
            OpenAI chat-completions tools: ``{"type": "function", "function": {"name",
            "description", "parameters"}}``; checked first (:class:`~structgen.ToolSpecError`,
            naming the tool and the JSON pointer inside ``tools``).
        messages
            The conversation so far, OpenAI-style: ``system``/``user``/``assistant`` turns,
            assistant turns with ``tool_calls``, and ``tool`` results (``tool_call_id``).
        tool_choice
            ``"auto"`` (default): text, or calls, or text then calls; the text is free until the
            model opens a call and is never empty. ``"required"``: calls only, from the first
            token. ``{"type": "function", "function": {"name": n}}``: calls of ``n`` only.
            ``"none"``: text only. ``{"type": "allowed_tools", "allowed_tools": {"mode": "auto" |
            "required", "tools": [...]}}``: calls of those tools only. Custom tools (``{"type":
            "custom", ...}`` with a lark or regex grammar, or free text) need a native format
            whose call body is not JSON (``"harmony"``, ``"deepseek_v3_1"``, ``"mistral"``).
        parallel_tool_calls
            One or more calls (default); ``False``: exactly one.
        format
            ``"hermes"``, ``"llama3"`` (or ``"llama"``), ``"json"``, a model family's native format
            (``"qwen_3"``, ``"qwen_3_5"``, ``"kimi"``, ``"deepseek_r1"``, ``"harmony"``,
            ``"glm_4_7"``, ``"mistral"``, ...: :data:`structgen.frontends.tool_formats.CALL_FORMATS`),
            or a ``ToolFormat``/``CallFormat``; default: the chat template's own format, else
            ``"json"`` (see :mod:`structgen.tasks.tool_calls`). Whatever the format, ``message``
            holds OpenAI-shaped ``tool_calls``.
        strict
            Objects in the arguments take only the keys they declare unless they say
            ``additionalProperties`` (default, as OpenAI's strict mode; an object that declares
            no keys stays free-form); ``False``: JSON Schema's open objects.
        max_new_tokens, temperature, top_p, top_k, seed, speculate, stream
        repetition_penalty, no_repeat_ngram_size, logits_processors, budget
            As in :meth:`json` (a stream yields the turn's raw text, calls in the format's markup).
        stop_repeated_calls
            End the answer before a call identical to an earlier one (name and arguments), the
            loop small models fall into when parallel calls are allowed (default); the result's
            ``finish_reason`` is then ``"repeated_call"``. ``False``: keep whatever the model
            writes (a loop runs until ``max_new_tokens``).

        Returns
        -------
        ToolCallResult
            ``message`` is the assistant message ``{"role": "assistant", "content": str | None,
            "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}``
            (``arguments`` is JSON text that validates against the tool's parameters;
            ``tool_calls`` is absent for a text answer).

        Raises
        ------
        ToolSpecError, UnsupportedFeatureError, MessagesError, OptionError
            Bad tools, ``tool_choice``, messages, ``format`` or decoding options, before anything
            runs.
        IncompleteGenerationError
            ``budget="raise"`` and the budget ran out; the partial output is kept.

        Example
        -------
        >>> add = {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        ...        "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
        >>> r = gen.tool_calls([add], [{"role": "user", "content": "What is 2 plus 3?"}],
        ...                    tool_choice="required")                                  # doctest: +SKIP
        >>> r.message["tool_calls"][0]["function"]                                      # doctest: +SKIP
        {'name': 'add', 'arguments': '{"a": 2, "b": 3}'}
        """
        config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                              seed=seed, speculate=speculate, repetition_penalty=repetition_penalty,
                              no_repeat_ngram_size=no_repeat_ngram_size, logits_processors=logits_processors,
                              budget=budget, reasoning=reasoning, thinking_budget=thinking_budget)
        conversations = _is_conversations(messages)
        per_row_tools = conversations and isinstance(tools, list) and bool(tools) and all(
            isinstance(t, list) for t in tools)
        return self._run(lambda one_tools, one_messages: tool_calls_job(
            self.context, one_tools, one_messages, config, tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls, format=format, strict=strict,
            stop_repeated_calls=stop_repeated_calls),
            stream, tools=_Rows(tools) if per_row_tools else tools, messages=_Rows(messages) if conversations else messages,
            batch=conversations)

    def _run(self, make: "Callable[..., Job[Any]]", stream: bool = False, batch: bool | None = None,
             **arguments: Any) -> Any:
        """One job from ``arguments``, or, when one of them is a batch (a list; a ``_Rows``), a
        job per row, run together (:func:`structgen.tasks.jobs.run_jobs`); ``stream=True``:
        an iterator of their text, then the result (:mod:`structgen.api.streaming`)."""
        if not isinstance(stream, bool):
            raise OptionError(f"stream is True or False, not {stream!r}")
        for name, value in arguments.items():  # read once or in no order: no batch's rows, nor one value
            if isinstance(value, (Iterator, set, frozenset)):
                raise OptionError(f"{name} is a {type(value).__name__}: give a list for a batch (one row each), "
                                  f"e.g. {name}=list(...)")
        arguments = {name: _Single(value) if name == "prompt" and _is_conversation(value) else value
                     for name, value in arguments.items()}
        lists = {name: list(value) for name, value in arguments.items()
                 if (_is_batch(value) if batch is None else isinstance(value, _Rows))}
        lengths = {name: len(value) for name, value in lists.items()}
        if len(set(lengths.values())) > 1:
            raise OptionError(f"the lists of a batch must have one length, not {lengths}")
        if not lists:
            def run(listener: "Listener | None" = None) -> Any:
                return run_job(self.context, make(*(_resolved(v) for v in arguments.values())), listener)
        else:
            n = next(iter(lengths.values()))
            rows = [[lists[name][i] if name in lists else value for name, value in arguments.items()]
                    for i in range(n)]

            def run(listener: "Listener | None" = None) -> Any:
                return run_jobs(self.context, [_deferring(make, row) for row in rows], listener)
        if stream:
            return streaming.stream(run, self.vocabulary, batch=bool(lists))
        return run()


def _decode_config(options: dict[str, Any]) -> DecodeConfig:
    """The :class:`DecodeConfig` of keyword options; an unknown name is an :class:`OptionError`."""
    import dataclasses

    known = {f.name for f in dataclasses.fields(DecodeConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise OptionError(f"unknown option {unknown[0]!r}; the decoding options are {', '.join(sorted(known))}")
    return DecodeConfig(**options)


class _Rows(list):
    """A list that is a batch's rows (where a plain list is one argument, as ``tools``)."""


class _Deferred:
    """A compile to run inside a row's job (so that its error fails that row only)."""

    def __init__(self, compile: Callable[[Any], Any], source: Any) -> None:
        self.compile, self.source = compile, source

    def __call__(self) -> Any:
        return self.compile(self.source)


def _is_batch(value: Any) -> bool:
    """Lists are batches: no schema, prompt, grammar, question or database is one."""
    return isinstance(value, (list, tuple)) and not isinstance(value, str)


def _is_conversations(messages: Any) -> bool:
    """A list of conversations (each a list of messages) rather than one conversation."""
    return isinstance(messages, (list, tuple)) and bool(messages) and all(isinstance(m, (list, tuple)) for m in messages)


class _Single:
    """One argument that is a list but not a batch: a conversation given as the prompt."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _is_conversation(prompt: Any) -> bool:
    """Chat messages (a list of dicts) given as one prompt, not a batch of prompts."""
    return isinstance(prompt, (list, tuple)) and bool(prompt) and all(isinstance(m, dict) for m in prompt)


def _resolved(value: Any) -> Any:
    if isinstance(value, _Single):
        return value.value
    return value() if isinstance(value, _Deferred) else value


def _deferring(make: "Callable[..., Job[Any]]", row: list[Any]) -> "Job[Any]":
    """``make(*row)`` as a job, ``_Deferred`` compiles run inside it."""
    return (yield from make(*(_resolved(v) for v in row)))


_DEFAULT: Generator | None = None


def generate_json(schema: Any, prompt: str, **options: Any) -> Any:
    """Generate a JSON value for ``prompt`` that validates against ``schema``, on the default model.

    Options are those of :meth:`Generator.json`; ``stream=True`` returns an iterator of the
    text's chunks, then the value. The default model is loaded on first use and kept for later
    calls.

    Example
    -------
    >>> generate_json({"type": "integer"}, "How many legs has a spider?")   # doctest: +SKIP
    8
    """
    return _pick(_default().json(schema, prompt, **options), "value")


_DEFAULT_LOCK = threading.Lock()


def _default() -> Generator:
    """The Generator behind ``generate_*``: on the shared default model, made once (thread-safe)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = Generator()
    return _DEFAULT


def generate_grammar(grammar: Any, prompt: str, **options: Any) -> str:
    """Generate text in a grammar's language on the default model; options of :meth:`Generator.grammar`.

    Example
    -------
    >>> generate_grammar("start: /[0-9]+/ (\\"+\\" /[0-9]+/)*", "Write a sum of two numbers.")  # doctest: +SKIP
    '1+2'
    """
    return _pick(_default().grammar(grammar, prompt, **options), "text")


def generate_regex(pattern: str, prompt: str, **options: Any) -> str:
    """Generate text matching ``pattern`` on the default model; options of :meth:`Generator.regex`.

    Example
    -------
    >>> generate_regex(r"[0-9]{3}-[0-9]{4}", "Make up a phone number.")   # doctest: +SKIP
    '555-1234'
    """
    return _pick(_default().regex(pattern, prompt, **options), "text")


def generate_sql(question: str, database: "str | os.PathLike[str] | sqlite3.Connection",
                 **options: Any) -> "str | SqlResult":
    """Write a SQLite query answering ``question`` on ``database``, on the default model.

    Returns the query text; with ``execute=True`` the whole :class:`~structgen.SqlResult`
    (``sql``, ``rows``, ``columns``, ``retries``). Options are those of :meth:`Generator.sql`.

    Example
    -------
    >>> generate_sql("How many singers are there?", "concert_singer.sqlite")  # doctest: +SKIP
    'SELECT count(*) FROM singer'
    """
    result = _default().sql(question, database, **options)
    return result if options.get("execute") else _pick(result, "sql")


def generate_tool_calls(tools: list[dict[str, Any]], messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    """The assistant's next message for ``messages`` with ``tools``, on the default model.

    Returns the OpenAI-style assistant message (``content``, ``tool_calls``); options are those
    of :meth:`Generator.tool_calls` (``tool_choice``, ``parallel_tool_calls``, ``format``, ...).

    Example
    -------
    >>> weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
    ...     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    >>> msg = generate_tool_calls([weather], [{"role": "user", "content": "Weather in Oslo?"}],
    ...                           tool_choice="required")                      # doctest: +SKIP
    >>> msg["tool_calls"][0]["function"]["arguments"]                        # doctest: +SKIP
    '{"city": "Oslo"}'
    """
    return _pick(_default().tool_calls(tools, messages, **options), "message")


def _pick(result: Any, name: str) -> Any:
    """``result.<name>``; for a batch, that of each row (a failed row keeps its exception); for
    a stream, its chunks as they are and that of its final result."""
    if isinstance(result, types.GeneratorType):
        return (item if streaming.is_chunk(item) else _pick(item, name) for item in result)
    if isinstance(result, list):
        return [row if isinstance(row, Exception) else getattr(row, name) for row in result]
    return getattr(result, name)
