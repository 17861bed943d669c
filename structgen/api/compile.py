"""The ``compile_*`` entry points: a grammar, regex, JSON schema or database over a tokenizer.

Each uses the shared :class:`~structgen.engine.compiler.Compiler` of the tokenizer's vocabulary
(:func:`~structgen.engine.compiler.compiler_for`), so compiling the same thing twice is a cache hit.

A model's logits are often wider than its tokenizer (embedding rows padded to a multiple of 64 or
128): pass ``vocab_size=`` (the logits width) or ``model=`` (the width is read from it), and the
masks cover every logit, the padded ids never allowed. The same tokenizer at two widths gives two
vocabularies, each with its own caches.

Example
-------
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> compile_regex(r"[0-9]+", vocab).matcher().advance(ord("7"))
True
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from structgen.core.ir import Grammar
from structgen.decoding.backend import logits_width
from structgen.engine.compiled import CompiledGrammar
from structgen.engine.compiler import Compiler, Whitespace, compiler_for
from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError
from structgen.frontends.sql import SQL_GRAMMAR, CompiledSql, compile_schema, read_schema
from structgen.frontends.sql import Whitespace as SqlWhitespace
from structgen.frontends.tool_calls import FORMATS, ToolFormat, read_tool_choice, read_tools, tool_call_grammar
from structgen.frontends.tool_formats import CallFormat, format_structural_tag
from structgen.tasks.tool_calls import read_format, template_format

__all__ = ["compile_grammar", "compile_json_schema", "compile_regex", "compile_sql", "compile_structural_tag",
           "compile_tool_calls", "prepare_vocabulary"]


def compile_grammar(grammar: "str | os.PathLike[str] | Grammar", tokenizer: Any, *,
                    start: str = "start", vocab_size: int | None = None, model: Any = None) -> CompiledGrammar:
    """Compile a context-free grammar (Lark-style EBNF) into a grammar over ``tokenizer``'s vocabulary.

    Parameters
    ----------
    grammar
        The grammar text, a path to a ``.lark`` file (e.g. one under ``structgen/grammars/``), or IR.
        The format is described in :mod:`structgen.frontends.lark.reader`: Lark's, with a lexer's token
        ends (:mod:`structgen.frontends.lark.lexer`); left recursion and ambiguity are allowed.
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    start
        The start rule.
    vocab_size, model
        The width of the model's logits, or the model to read it from; see
        :func:`compile_json_schema`.

    Raises
    ------
    GrammarError
        A mistake in the grammar, with line, column, a caret under it and how to fix it.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> m = compile_grammar('start: start "+" NUM | NUM\\nNUM: /[0-9]+/', vocab).matcher()
    >>> all(m.advance(b) for b in b"1+22"), m.can_end(), m.advance(ord("+"))
    (True, True, True)
    """
    return _compiler(tokenizer, vocab_size, model).grammar_file(grammar, start=start)


def compile_regex(pattern: str, tokenizer: Any, *, ignore_case: bool = False, dotall: bool = False,
                  vocab_size: int | None = None, model: Any = None) -> CompiledGrammar:
    """Compile a regular expression (Python ``re`` dialect) that the whole output must match.

    See :mod:`structgen.frontends.regex.python` for what is supported; lookaround, backreferences, anchors
    and word boundaries raise :class:`GrammarError`. ``vocab_size`` and ``model`` are as in
    :func:`compile_json_schema`.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> m = compile_regex(r"(yes|no)!", vocab).matcher()
    >>> m.advance(ord("y")), m.forced_text()
    (True, 'es!')
    """
    return _compiler(tokenizer, vocab_size, model).regex(pattern, ignore_case=ignore_case, dotall=dotall)


def compile_json_schema(schema: "dict[str, Any] | bool | str", tokenizer: Any, *,
                        whitespace: Whitespace = "flexible", strict: bool = False,
                        canonical: bool = False, lenient: bool = False,
                        vocab_size: int | None = None, model: Any = None) -> CompiledGrammar:
    """Compile a JSON schema into a grammar over ``tokenizer``'s vocabulary.

    Parameters
    ----------
    schema
        A JSON Schema as a dict (or ``True``/``False``, or a JSON string), or a Pydantic model
        class (its ``model_json_schema()``), as :meth:`Generator.json` takes.
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    whitespace
        ``"flexible"`` (default) accepts any JSON whitespace between tokens, up to a bound per
        gap, so ``json.dumps(value, indent=2)`` is accepted; ``"compact"`` allows none (more
        forced text, no runaway whitespace when generating); ``"spaced"`` allows exactly
        ``json.dumps``'s default spelling, ``{"a": 1, "b": [1, 2]}`` (one space after each
        ``,`` and ``:``, none elsewhere): the style most models saw in training.
    strict
        Close objects to keys their schema does not name unless it says ``additionalProperties``
        (generation turns this on); ``False`` (default) keeps the spec's open objects.
    canonical
        Spell each value one way, as generation does: keys and strings as ``json.dumps`` writes
        them, integers without a fraction, no exponents, no ``-0``. ``False`` (default) accepts
        every JSON spelling of an allowed value (``"\\u0061"`` for ``"a"``, ``1.0`` for ``1``),
        as a validator must. Canonical spelling leaves more text forced, hence drafted.
    lenient
        Drop constraints of :data:`~structgen.frontends.json_schema.translate.LENIENT_KEYWORDS` that cannot be
        honoured instead of raising; each is recorded in ``relaxed``. Off by default.
    vocab_size
        The width of the model's logits (e.g. ``model.config.vocab_size`` or
        ``model.get_output_embeddings().weight.shape[0]``) when it exceeds the tokenizer's
        vocabulary (padded embedding rows); the masks are that wide, and rows past the
        tokenizer's tokens are never allowed. ``None`` (default): the tokenizer's own size.
    model
        A transformers model to read that width from instead (its output layer's width, else
        ``config.vocab_size``); its ``generation_config.eos_token_id`` ids also end a value, as
        in :class:`~structgen.Generator`. Pass ``vocab_size`` or ``model``, not two widths.

    Raises
    ------
    UnsupportedFeatureError
        For a keyword the compiler cannot honour exactly, naming it and its JSON pointer.
    OptionError
        A ``vocab_size`` (or a model's width) smaller than the tokenizer's vocabulary.
    TokenizerError
        A tokenizer whose tokens cannot be mapped to bytes exactly (WordPiece, ...), naming
        its family.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> m = compile_json_schema({"enum": ["red", "green"]}, vocab, canonical=True).matcher()
    >>> m.advance(ord('"')), m.advance(ord("g")), m.forced_text()
    (True, True, 'reen"')

    Logits wider than the vocabulary (here 320 for 257 tokens), from the width or the model:

    >>> wide = compile_json_schema({"type": "boolean"}, vocab, vocab_size=320)
    >>> wide.vocabulary.size, wide.matcher().mask_words().shape
    (320, (10,))
    >>> compiled = compile_json_schema(schema, tokenizer, model=model)   # doctest: +SKIP
    """
    return _compiler(tokenizer, vocab_size, model).json_schema(schema, whitespace=whitespace, strict=strict,
                                                canonical=canonical, lenient=lenient)


def compile_structural_tag(spec: Any, tokenizer: Any, *, whitespace: Whitespace = "flexible",
                           strict: bool = False, canonical: bool = False, vocab_size: int | None = None,
                           model: Any = None) -> CompiledGrammar:
    """Compile a structural tag: free text, triggers and tagged segments (schemas, regexes,
    grammars), in xgrammar's JSON format (the one vLLM, SGLang and TensorRT-LLM accept).

    Parameters
    ----------
    spec
        ``{"type": "structural_tag", "format": {...}}``, a format alone, the older
        ``{"type": "structural_tag", "structures": [...], "triggers": [...]}``, or its JSON text.
        The formats read are listed in :mod:`structgen.frontends.structural_tag`.
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    whitespace, strict, canonical
        How each ``json_schema`` inside is compiled, as in :func:`compile_json_schema`.
    vocab_size, model
        As in :func:`compile_json_schema`.

    Raises
    ------
    StructuralTagError
        A malformed or unsupported format or field, naming its JSON pointer in ``spec``.
    UnsupportedFeatureError
        A schema inside uses a keyword that cannot be honoured (the pointer runs through ``spec``).

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> spec = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
    ...         "tags": [{"type": "tag", "begin": "<f=add>", "end": "</f>", "content": {
    ...             "type": "json_schema", "json_schema": {"type": "integer"}}}]}}
    >>> m = compile_structural_tag(spec, vocab).matcher()
    >>> all(m.advance(b) for b in b"Adding. <f="), m.forced_text()
    (True, 'add>')
    >>> all(m.advance(b) for b in b"add>12</f> done"), m.can_end()
    (True, True)
    """
    return _compiler(tokenizer, vocab_size, model).structural_tag(spec, whitespace=whitespace, strict=strict,
                                                                   canonical=canonical)


def prepare_vocabulary(tokenizer: Any, *, vocab_size: int | None = None, model: Any = None) -> Vocabulary:
    """Build a tokenizer's vocabulary and precompute the masks every JSON grammar shares.

    The token masks of shared primitives (the inside of a JSON string, numbers, whitespace) take
    the longest to compute; this computes them now, and they are cached on disk (see
    ``STRUCTGEN_CACHE_DIR``), so later processes and schemas only pay for what is theirs.
    ``vocab_size`` and ``model`` are as in :func:`compile_json_schema` (prepare the vocabulary
    you will compile with: each width has its own).

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = prepare_vocabulary(Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256]))
    >>> vocab.size
    257
    >>> prepare_vocabulary(vocab, vocab_size=320).size
    320
    """
    vocab = _compiler(tokenizer, vocab_size, model).vocabulary
    single = {data[0]: tid for tid, data in enumerate(vocab.tokens) if data and len(data) == 1}
    sample = {"k": ["s\u00e9", -1.5e3, 7, True, None, {}, []]}
    for whitespace, text in (("compact", json.dumps(sample, separators=(",", ":"))),
                             ("spaced", json.dumps(sample)), ("flexible", json.dumps(sample, indent=2))):
        m = compile_json_schema(True, vocab, whitespace=whitespace).matcher()
        for b in text.encode():
            m.mask_words()
            if b not in single or not m.advance(single[b]):
                break
    return vocab


def compile_sql(database: "str | os.PathLike[str] | sqlite3.Connection", tokenizer: Any, *,
                strict: bool = False, whitespace: SqlWhitespace = "any",
                grammar: "str | os.PathLike[str]" = SQL_GRAMMAR, vocab_size: int | None = None,
                model: Any = None) -> CompiledSql:
    """Compile the SQLite query grammar for ``database``'s tables and columns over ``tokenizer``.

    Parameters
    ----------
    database
        A path to a SQLite file or a ``sqlite3.Connection``; it is only read (:class:`ReadOnly`).
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    strict
        ``False`` (default): a table or column position also takes a made-up name (an alias, a
        common table expression, a subquery's output column), which
        :meth:`CompiledSql.undeclared_names` holds to a declaration once the text is complete.
        ``True``: only the database's tables and columns fit there; made-up names can still be
        declared and used as qualifiers (``T1.name``). Generation uses ``True``.
    whitespace
        ``"any"``: any run of spaces, tabs and newlines between tokens; ``"spaces"``: spaces only
        (what generation uses, so a small model cannot wander off into blank lines).
    grammar
        The query grammar; its last two lines must be ``TABLE_NAME: NAME`` and ``COLUMN_NAME: NAME``.
    vocab_size, model
        The width of the model's logits, or the model to read it from; see
        :func:`compile_json_schema`.

    Raises
    ------
    SqlError
        The database cannot be read or has no tables.

    Example
    -------
    >>> compiled = compile_sql("examples/data/shop.sqlite", tokenizer, strict=True)  # doctest: +SKIP
    >>> compiled.matcher().advance(...)                                              # doctest: +SKIP
    """
    return compile_schema(read_schema(database), _compiler(tokenizer, vocab_size, model), strict=strict,
                          whitespace=whitespace, grammar=grammar)


def compile_tool_calls(tools: list[dict[str, Any]], tokenizer: Any, *, tool_choice: Any = "required",
                       parallel_tool_calls: bool = True, format: "str | ToolFormat | None" = None,
                       strict: bool = True, vocab_size: int | None = None, model: Any = None) -> CompiledGrammar:
    """Compile OpenAI-style ``tools`` into the grammar of an assistant's answer that calls them.

    The answer is what :meth:`structgen.Generator.tool_calls` decodes: calls in the
    ``format``'s markup (default: the one the tokenizer's chat template writes, else
    ``"json"``; a native format such as ``"qwen_3"`` or ``"kimi"`` compiles as a structural tag,
    :mod:`structgen.frontends.tool_formats`), each with arguments that validate against its tool's ``parameters``; under
    ``tool_choice="auto"`` text may come first. Options are those of
    :meth:`~structgen.Generator.tool_calls` (``tool_choice`` defaults to ``"required"`` here:
    a grammar for calls); ``vocab_size`` and ``model`` as in :func:`compile_json_schema`.
    Read the calls back with :func:`structgen.frontends.tool_calls.parse_calls`.

    Raises
    ------
    ToolSpecError, UnsupportedFeatureError, OptionError
        Bad tools, ``tool_choice`` or ``format``.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> add = {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    ...        "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}
    >>> m = compile_tool_calls([add], vocab, format="hermes").matcher()
    >>> all(m.advance(b) for b in b"<tool_call>"), m.forced_text()
    (True, '\\n{"name": "add", "arguments": {"a": ')
    """
    specs = read_tools(tools)
    mode, names = read_tool_choice(tool_choice, specs)
    fmt = read_format(format) or (None if isinstance(tokenizer, Vocabulary) else template_format(tokenizer)) \
        or FORMATS["json"]
    if isinstance(fmt, CallFormat):
        spec = format_structural_tag(fmt, specs, choice=mode, names=names, parallel=parallel_tool_calls)
        return _compiler(tokenizer, vocab_size, model).structural_tag(spec, whitespace="spaced", strict=strict,
                                                                       canonical=True)
    grammar = tool_call_grammar(specs, fmt, choice=mode, names=names, parallel=parallel_tool_calls, strict=strict)
    return _compiler(tokenizer, vocab_size, model).grammar(grammar, source=tools)


def _compiler(tokenizer: Any, vocab_size: Any, model: Any) -> Compiler:
    """The shared compiler of ``tokenizer`` at the logits width given as ``vocab_size`` or read
    from ``model`` (whose generation config's end-of-sequence ids join the tokenizer's)."""
    if model is None:
        return compiler_for(tokenizer, vocab_size=vocab_size)
    width = logits_width(model)
    if vocab_size is not None and vocab_size != width:
        raise OptionError(f"vocab_size={vocab_size!r:.40} and model= disagree: the model's logits are {width} "
                          "wide; pass one of them")
    own = tokenizer.size if isinstance(tokenizer, Vocabulary) else getattr(tokenizer, "__len__", lambda: None)()
    if own is not None and width < own:
        raise OptionError(f"model= has logits {width} wide, fewer than the tokenizer's {own} tokens: is it "
                          "the tokenizer of this model? (the logits need a column for every token id)")
    return compiler_for(tokenizer, vocab_size=width, generation_config=getattr(model, "generation_config", None))
