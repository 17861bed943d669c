"""The constraint a serving request carries, read and compiled the way structgen's own tasks compile.

A serving engine (vLLM, :mod:`structgen.integrations.vllm`) hands structgen one small JSON object
per request. Exactly one of these keys says what the output must be:

- ``"json_schema"``: a JSON Schema (a dict, or its JSON text); compiled as
  :meth:`structgen.Generator.json` does (strict objects, canonical spelling, ``"whitespace"``
  ``"compact"`` unless given). The OpenAI shape ``"response_format": {"type": "json_schema",
  "json_schema": {"schema": ...}}`` is read the same way;
- ``"grammar"``: Lark-style grammar text (``"start"`` names the start rule);
- ``"regex"``: a Python regular expression the whole output must match;
- ``"sql"``: the path of a SQLite database under a folder of ``STRUCTGEN_SQL_DIRS`` (the
  operator's list; unset, ``sql`` is refused); the query grammar specialised to its tables and
  columns (strict names, single spaces), as :meth:`structgen.Generator.sql` uses;
- ``"tools"``: OpenAI tool specs, with ``"tool_choice"`` (``"required"`` by default, ``"auto"``,
  ``"none"`` or ``{"type": "function", "function": {"name": ...}}``), ``"parallel_tool_calls"``
  and ``"format"`` (the tokenizer's own tool format when its chat template has one, else
  ``"json"``), as :meth:`structgen.Generator.tool_calls` decodes them;
- ``"structural_tag"``: a structural tag in xgrammar's JSON format (what vLLM's own
  ``structured_outputs.structural_tag`` takes), compiled as :meth:`structgen.Generator.structural`
  does.

Beside any of them, ``"reasoning"`` (``true``: the chat template's markers; or ``[start, end]``)
and ``"thinking_budget"`` (tokens) let the model think first, as ``reasoning=`` does in
:class:`structgen.Generator` (:func:`constraint_matcher`); ``"budget"`` is ``"complete"`` (the
default: the last tokens of the request's ``max_tokens`` leave a completion that fits, so the
answer ends valid instead of cut, :func:`~structgen.decoding.budget.within_budget`) or
``"none"``.

Over HTTP the object travels as JSON text (vLLM's ``vllm_xargs`` only carries strings and numbers).
A malformed object is an :class:`~structgen.errors.OptionError` naming the key; a schema, grammar
or database the compiler refuses raises its own typed error.

Example
-------
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> spec = read_constraint('{"regex": "(yes|no)!"}')
>>> spec.kind, compile_constraint(spec, vocab).matcher().advance(ord("y"))
('regex', True)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structgen.api.compile import compile_sql
from structgen.core.limits import check_input_size
from structgen.engine.compiled import CompiledGrammar
from structgen.engine.compiler import compiler_for, response_format_schema
from structgen.engine.lru import LRUCache
from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError, SchemaError
from structgen.frontends.tool_calls import FORMATS, ToolFormat, read_tool_choice, read_tools, tool_call_grammar
from structgen.frontends.tool_formats import CallFormat, ending_at_eos, format_structural_tag
from structgen.tasks.tool_calls import read_format, template_format

__all__ = ["Constraint", "KINDS", "read_constraint", "compile_constraint", "constraint_matcher", "allowed_database",
           "tool_format",
           "BYTES", "SQL_DIRS_VARIABLE"]

#: The keys that name a constraint, one per request.
KINDS = ("json_schema", "grammar", "regex", "sql", "tools", "structural_tag")
_OPTIONS = {"json_schema": {"whitespace"}, "grammar": {"start"}, "regex": set(), "sql": set(),
            "tools": {"tool_choice", "parallel_tool_calls", "format"}, "structural_tag": {"whitespace"}}
#: options every kind takes: thinking before the constrained answer, the token budget's rule
_THINKING = {"reasoning", "thinking_budget"}
_COMMON = _THINKING | {"budget"}
#: the values of ``"budget"``
BUDGETS = ("complete", "none")
#: 256 one-byte tokens: a constraint compiled over it is checked without the model's tokenizer.
BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")
#: The folders a ``sql`` constraint may name databases in (:func:`allowed_database`).
SQL_DIRS_VARIABLE = "STRUCTGEN_SQL_DIRS"


@dataclass(frozen=True)
class Constraint:
    """One request's constraint: its ``kind`` (from :data:`KINDS`), the value of that key and the
    options beside it. ``key`` is its canonical JSON text, what compiled grammars are cached by."""

    kind: str
    value: Any
    options: tuple[tuple[str, Any], ...]
    key: str

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)


def read_constraint(spec: Any) -> Constraint:
    """A :class:`Constraint` from a request's object (a dict or its JSON text).

    Example
    -------
    >>> read_constraint({"json_schema": '{"type": "integer"}'}).value
    {'type': 'integer'}
    """
    if isinstance(spec, str):
        spec = _json_text(spec, "the structgen constraint")
    if not isinstance(spec, dict):
        raise OptionError(f"the structgen constraint must be an object naming one of {KINDS}, "
                          f"not {type(spec).__name__}")
    spec = dict(spec)
    if "response_format" in spec:
        if "json_schema" in spec:
            raise OptionError("the structgen constraint names both json_schema and response_format; give one")
        spec["json_schema"] = _response_format_schema(spec.pop("response_format"))
    kinds = [k for k in KINDS if k in spec]
    if len(kinds) != 1:
        raise OptionError(f"the structgen constraint must name exactly one of {KINDS}; it names {kinds or 'none'}")
    kind = kinds[0]
    unknown = set(spec) - {kind} - _OPTIONS[kind] - _COMMON
    if unknown:
        raise OptionError(f"unknown key(s) {sorted(unknown)} in a {kind!r} constraint; "
                          f"it takes {sorted(_OPTIONS[kind] | _COMMON)}")
    _check_thinking(spec.get("reasoning"), spec.get("thinking_budget"))
    if spec.get("budget", "complete") not in BUDGETS:
        raise OptionError(f"the constraint's 'budget' is one of {BUDGETS}, not {spec['budget']!r:.40}")
    value = spec[kind]
    if kind in ("json_schema", "tools", "structural_tag") and isinstance(value, str):
        value = _json_text(value, f"the constraint's {kind!r}")
    if kind in ("grammar", "regex", "sql") and not isinstance(value, str):
        raise OptionError(f"the constraint's {kind!r} must be a string, not {type(value).__name__}")
    options = tuple(sorted((k, v) for k, v in spec.items() if k != kind))
    try:
        # not sort_keys: a schema's properties are written in their order, so two orders are two grammars
        key = json.dumps([kind, value, [o for o in options if o[0] != "budget"]], ensure_ascii=False, default=repr)
    except (ValueError, RecursionError, TypeError) as err:  # contains itself, nests too deeply, mixed key types
        raise OptionError(f"the structgen constraint cannot be written as JSON: {err}") from err
    check_input_size(key, "the structgen constraint (as JSON text)")  # a dict is measured as text is
    return Constraint(kind, value, options, key)


def _check_thinking(reasoning: Any, budget: Any) -> None:
    if reasoning not in (None, True, False) and not (
            isinstance(reasoning, (list, tuple)) and len(reasoning) == 2
            and all(isinstance(m, str) and m for m in reasoning)):
        raise OptionError(f"the constraint's 'reasoning' is true or [start, end] marker strings, not {reasoning!r:.80}")
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise OptionError(f"the constraint's 'thinking_budget' is an integer >= 0, not {budget!r:.40}")
        if not reasoning:
            raise OptionError("the constraint's 'thinking_budget' needs 'reasoning'")


def constraint_matcher(spec: Constraint, vocabulary: Any, tokenizer: Any = None, prompt_ids: Any = ()) -> Any:
    """A matcher for one request: its compiled constraint's, behind a thinking block when the
    constraint asks for ``reasoning`` (the start marker left out where the prompt, ``prompt_ids``,
    already opened the thinking).

    >>> spec = read_constraint({"regex": "yes|no", "reasoning": ["<t>", "</t>"], "thinking_budget": 2})
    >>> m = constraint_matcher(spec, BYTES)
    >>> all(m.advance(b) for b in b"<t>hm"), m.forced_text()
    (True, '</t>')
    """
    compiled = compile_constraint(spec, vocabulary, tokenizer)
    reasoning = spec.option("reasoning")
    if not reasoning:
        return compiled.matcher()
    from structgen.tasks.reasoning import ThinkingGrammar, prompt_opened, thinking_markers

    start, end = thinking_markers(tokenizer, True if reasoning is True else tuple(reasoning))
    vocab = compiled.vocabulary
    opened = prompt_opened(vocab, prompt_ids, start)
    key = (vocab.fingerprint, spec.key, opened)
    got = _THINKING_GRAMMARS.get(key)
    if got is None:
        end_ids = list(tokenizer.encode(end, add_special_tokens=False)) if hasattr(tokenizer, "encode") else None
        got = _THINKING_GRAMMARS[key] = ThinkingGrammar(compiled, (start, end), opened=opened,
                                                        budget=spec.option("thinking_budget"), end_ids=end_ids)
    return got.matcher()


def _json_text(text: str, what: str) -> Any:
    """The JSON value of a request's ``text``, measured first; what cannot be read is an
    :class:`OptionError` naming ``what``."""
    check_input_size(text, what)
    try:
        return json.loads(text)
    except RecursionError as err:
        raise OptionError(f"{what} nests too deeply to read") from err
    except ValueError as err:  # not JSON, or an integer past Python's 4,300 digits
        raise OptionError(f"{what} is not JSON: {err}") from err


def _response_format_schema(response_format: Any) -> Any:
    """The schema of an OpenAI ``response_format`` (``{"type": "json_schema", "json_schema":
    {"schema": ...}}``; ``{"type": "json_object"}`` is any JSON object)."""
    if isinstance(response_format, str):
        response_format = _json_text(response_format, "response_format")
    try:
        return response_format_schema(response_format)
    except SchemaError as err:
        raise OptionError(str(err)) from err


# One process compiles a constraint once per vocabulary (the compiler caches grammars too; this
# also skips re-reading tools and databases).
_COMPILED: LRUCache = LRUCache(256)
_THINKING_GRAMMARS: LRUCache = LRUCache(256)


def compile_constraint(spec: Constraint, vocabulary: Any, tokenizer: Any = None) -> CompiledGrammar:
    """``spec`` compiled over ``vocabulary`` (a :class:`Vocabulary` or a tokenizer), cached per
    process. ``tokenizer`` (default: ``vocabulary`` when it is one) picks the tool-call format
    from its chat template."""
    compiler = compiler_for(vocabulary)
    if tokenizer is None and not isinstance(vocabulary, Vocabulary):
        tokenizer = vocabulary
    if spec.kind == "sql":  # checked on every request, cached grammar or not
        allowed_database(spec.value)
    cache_key = (compiler.vocabulary.fingerprint, spec.key)
    got = _COMPILED.get(cache_key)
    if got is None:
        got = _compile(spec, compiler, tokenizer)
        _COMPILED[cache_key] = got
    return got


def allowed_database(path: str) -> Path:
    """``path`` resolved, when it lies under a folder of ``STRUCTGEN_SQL_DIRS``.

    A served request names a file on the server: without a list of folders it may read, a client
    could have any SQLite file's tables and columns written out by the model. So a ``sql``
    constraint is refused unless the operator lists the folders (``os.pathsep``-separated).
    """
    folders = [Path(p).resolve() for p in os.environ.get(SQL_DIRS_VARIABLE, "").split(os.pathsep) if p]
    if not folders:
        raise OptionError(f"a 'sql' constraint needs {SQL_DIRS_VARIABLE}, the folders of the databases "
                          "requests may name (unset here)")
    try:
        target = Path(path).resolve()
    except (ValueError, OSError) as err:  # a NUL character, a name too long for the system
        raise OptionError(f"the database path {path!r:.80} cannot name a file: {err}") from err
    if not any(target.is_relative_to(folder) for folder in folders):
        raise OptionError(f"the database {path!r} is not under a folder of {SQL_DIRS_VARIABLE}")
    return target


def tool_format(spec: Constraint, tokenizer: Any = None) -> "ToolFormat | CallFormat":
    """The call format of a ``tools`` constraint: its ``format``, else ``tokenizer``'s chat
    template's, else ``"json"``."""
    return read_format(spec.option("format")) or (template_format(tokenizer) if tokenizer is not None else None) \
        or FORMATS["json"]


def _compile(spec: Constraint, compiler: Any, tokenizer: Any) -> CompiledGrammar:
    if spec.kind == "json_schema":
        return compiler.json_schema(spec.value, whitespace=spec.option("whitespace", "compact"), strict=True,
                                    canonical=True)
    if spec.kind == "grammar":
        return compiler.grammar_file(spec.value, start=spec.option("start", "start"))
    if spec.kind == "regex":
        return compiler.regex(spec.value)
    if spec.kind == "sql":
        return compile_sql(allowed_database(spec.value), compiler.vocabulary, strict=True, whitespace="spaces")
    if spec.kind == "structural_tag":
        return compiler.structural_tag(spec.value, whitespace=spec.option("whitespace", "compact"), strict=True,
                                       canonical=True)
    specs = read_tools(spec.value)
    mode, names = read_tool_choice(spec.option("tool_choice", "required"), specs)
    fmt = tool_format(spec, tokenizer)
    parallel = spec.option("parallel_tool_calls", True)
    if isinstance(fmt, CallFormat):  # a native format: its structural tag
        fmt = ending_at_eos(fmt, compiler.vocabulary.eos_texts)
        tag = format_structural_tag(fmt, specs, choice=mode, names=names, parallel=parallel)
        return compiler.structural_tag(tag, whitespace="spaced", strict=True, canonical=True)
    grammar = tool_call_grammar(specs, fmt, choice=mode, names=names, parallel=parallel, strict=True)
    return compiler.marked(compiler.vocabulary.markers_in(fmt.markup)).grammar(grammar, source=spec.value)

