"""Staged compilation: a grammar IR and a vocabulary become an immutable :class:`CompiledGrammar`.

A :class:`Compiler` keeps one vocabulary and two compile caches: in memory (keyed by the grammar
IR, and for JSON schemas also by the schema), and on disk for JSON schemas, so that a schema
compiled once is loaded, not compiled, by later processes (see :class:`Compiler`).

Example
-------
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> compiled = Compiler(vocab).json_schema({"type": "integer"})
>>> m = compiled.matcher()
>>> all(m.advance(t) for t in b"42"), m.can_end()
(True, True)
"""

from __future__ import annotations

import contextlib
import json
import os
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from structgen.core.budget import DEFAULT_COMPILE_BUDGET, compile_budget, name_of
from structgen.core.depth import recursion_room
from structgen.core.ir import Grammar
from structgen.core.limits import check_input_size
from structgen.engine.collector import gc_paused
from structgen.engine.compile_cache import entry_key, entry_path, load_entry, store_entry
from structgen.engine.compiled import CompiledGrammar
from structgen.engine.disk_cache import DISK_CACHE_ENV as DISK_CACHE_ENV  # named here as before
from structgen.engine.disk_cache import disk_cache_enabled
from structgen.engine.lru import LRUCache
from structgen.engine.vocab import Vocabulary, vocabulary_for
from structgen.errors import CompileError, EmptyLanguageError, GrammarError, SchemaError, shown

__all__ = ["Compiler", "compiler_for", "is_response_format", "parse_schema", "pydantic_model", "read_grammar_source",
           "response_format_schema"]

Whitespace = Literal["flexible", "compact", "spaced"]

#: Compiled grammars a :class:`Compiler` keeps in memory (the most recently used ones).
MEMORY_CACHE_ENTRIES = 256


class Compiler:
    """Compiles grammars for one tokenizer, caching results in memory and on disk.

    In memory, compiled grammars are kept by grammar IR (two schemas with the same grammar share
    one :class:`CompiledGrammar` and its mask memo tables) and JSON schemas also by content, so a
    schema compiled again by this compiler costs a hash of the schema. On disk, a JSON schema's
    grammar IR, ``relaxed`` record and automaton (translating the schema and building the rule
    automata are what compiling costs; the token masks are computed lazily, and the masks of
    shared primitives have their own disk cache) are stored under
    ``cache_dir()/"compiled"/<key[:2]>/<key>.pickle``, so another process compiling the same
    schema loads it instead (largest MaskBench schemas, SmolLM2 vocabulary: 1.2-76 s to compile,
    0.07-1.1 s to load).

    The key is a sha256 of :data:`CACHE_FORMAT`, structgen's version, a digest of structgen's
    source files (so an edited checkout never reads entries of another), the compile options, the
    vocabulary's fingerprint and the schema as JSON text. Its keys stay in the schema's order,
    not sorted: property order in the grammar follows the schema's order, so two schemas that
    differ only in key order are different entries (in memory they may still share a grammar).
    A schema that is not plain JSON data (tuples, non-string keys, subclasses) is compiled without
    the disk cache. Errors are never cached: a schema that fails raises each time. An entry that
    cannot be read (truncated, corrupt, another format) is a miss and is overwritten; a cache
    directory that cannot be written costs speed, never correctness. Entries are never evicted:
    delete the ``compiled`` folder to reclaim the space.

    Security: entries are pickles, and unpickling runs code, so nothing is unpickled that this
    user did not write. The cache folder (``STRUCTGEN_CACHE_DIR``, default ``~/.cache/structgen``)
    and everything read from it must be yours and writable by no one else (folders are created
    0700, files 0600); otherwise the cache is not read and an
    :class:`~structgen.errors.UnsafeCacheWarning` names the path and the fix. Each entry is sealed
    with an HMAC keyed by a secret file in the cache (``cache.key``, readable by you only), so a
    planted or edited entry is a miss, and it is unpickled by a restricted unpickler that builds
    only the grammar's own classes (:mod:`structgen.engine.sealed`).

    Parameters
    ----------
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    disk_cache
        Use the compile cache on disk (default). It is also off while the environment variable
        ``STRUCTGEN_DISK_CACHE`` is ``0`` (read on each compile; that also stops the token-mask
        facts on disk). The memory cache is always on
        and keeps the :data:`MEMORY_CACHE_ENTRIES` most recently used grammars.
    budget
        Work units (automaton states) one compile may take before it stops with a
        :class:`~structgen.errors.CompileError` naming the schema path it was compiling
        (:mod:`structgen.core.budget`); None: no limit.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
    >>> compiler = Compiler(vocab, disk_cache=False)          # memory cache only
    >>> compiler.json_schema(schema) is compiler.json_schema(schema)
    True
    >>> Compiler(vocab).json_schema(schema).matcher().advance(ord("{"))   # uses the disk cache
    True
    """

    def __init__(self, tokenizer: Any, *, disk_cache: bool = True,
                 budget: int | None = DEFAULT_COMPILE_BUDGET) -> None:
        self.vocabulary = vocabulary_for(tokenizer)
        self.disk_cache = disk_cache
        self.budget = budget
        self._cache: LRUCache[Grammar, CompiledGrammar] = LRUCache(MEMORY_CACHE_ENTRIES)
        self._schemas: LRUCache[str, CompiledGrammar] = LRUCache(MEMORY_CACHE_ENTRIES)
        self._grammar_files: LRUCache[tuple, Grammar] = LRUCache(MEMORY_CACHE_ENTRIES)
        self._tags: LRUCache[str, Grammar] = LRUCache(MEMORY_CACHE_ENTRIES)

    def grammar(self, grammar: Grammar, *, source: Any = None,
                kind: Literal["schema", "grammar", "regex"] | None = None) -> CompiledGrammar:
        """Compile grammar IR (memoized by the IR). A grammar that matches nothing is refused
        as an error of its ``kind`` of input, naming where (:mod:`structgen.core.liveness`)."""
        got = self._cache.get(grammar)
        if got is None:
            with self._compiling():
                try:
                    got = CompiledGrammar(grammar, self.vocabulary, source=source)
                except EmptyLanguageError as err:
                    raise _matches_nothing(err, kind) from err
            self._cache[grammar] = got
        return got

    def grammar_file(self, grammar: "str | os.PathLike[str] | Grammar", *, start: str = "start") -> CompiledGrammar:
        """Compile a Lark-style grammar (text, a path, or IR); see :func:`compile_grammar`."""
        from structgen.core.cfg import remove_left_recursion

        if isinstance(grammar, Grammar):
            with self._compiling():
                # checked first: the rewrite follows references, so a dangling one must be an error
                return self.grammar(remove_left_recursion(grammar.checked()), source=grammar,
                                    kind="grammar")
        from structgen.frontends.lark.reader import read_grammar

        text, name, base = read_grammar_source(grammar)
        check_input_size(text, f"the grammar {name}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise GrammarError(f"the grammar {name} holds a lone surrogate {text[err.start]!r} at character "
                               f"{err.start}: it is not Unicode text") from None
        key = (text, name, str(base), start)  # the text, not its imports: those are read once
        ir = self._grammar_files.get(key)
        if ir is None:
            with self._compiling():
                ir = read_grammar(text, start=start, name=name, base=base)
            self._grammar_files[key] = ir
        return self.grammar(ir, source=grammar, kind="grammar")

    def structural_tag(self, spec: Any, *, whitespace: Whitespace = "flexible", strict: bool = False,
                       canonical: bool = False) -> CompiledGrammar:
        """Compile a structural tag (xgrammar's JSON format); see :func:`compile_structural_tag`.

        The IR is cached by the spec's JSON text and the options: agents send the same tools
        request after request, and reading their schemas again is most of a compile.
        """
        from structgen.frontends.structural_tag import fixed_strings, read_structural_tag, structural_tag_grammar

        try:
            key: str | None = json.dumps([spec, whitespace, strict, canonical])  # key order is meaning: not sorted
        except (TypeError, ValueError, RecursionError):  # not JSON data: read_structural_tag says why
            key = None
        got = self._tags.get(key) if key is not None else None
        if got is None:
            with self._compiling():
                tag = read_structural_tag(spec)
                got = (structural_tag_grammar(tag, whitespace=whitespace, strict=strict, canonical=canonical),
                       self.vocabulary.markers_in(fixed_strings(tag)))
            if key is not None:
                self._tags[key] = got
        ir, markers = got
        return self.marked(markers).grammar(ir, source=spec, kind="grammar")

    def marked(self, markers: Iterable[int]) -> "Compiler":
        """The compiler of this vocabulary with the special tokens ``markers`` spelling their text
        (:meth:`~structgen.engine.vocab.Vocabulary.with_markers`): a format whose markers are
        special tokens of the tokenizer compiles there, so the model's own marker token matches.
        ``self`` when there are none."""
        vocab = self.vocabulary.with_markers(markers)
        if vocab is self.vocabulary:
            return self
        got = _MARKED.get(vocab)
        if got is None:
            got = _MARKED[vocab] = Compiler(vocab, disk_cache=self.disk_cache, budget=self.budget)
        return got

    def regex(self, pattern: str, *, ignore_case: bool = False, dotall: bool = False) -> CompiledGrammar:
        """Compile a regular expression over text; see :func:`compile_regex`."""
        from structgen.frontends.regex.python import text_regex_to_ir

        if not isinstance(pattern, str):
            raise GrammarError(f"the pattern must be a string, not {type(pattern).__name__}")
        check_input_size(pattern, "the regex")
        with self._compiling():
            body = text_regex_to_ir(pattern, ignore_case=ignore_case, dotall=dotall)
        return self.grammar(Grammar((("regex", body),), "regex"), source=pattern, kind="regex")

    def json_schema(self, schema: "dict[str, Any] | bool | str", *,
                    whitespace: Whitespace = "flexible", strict: bool = False,
                    canonical: bool = False, lenient: bool = False) -> CompiledGrammar:
        """Compile a JSON schema (a dict, a bool or a JSON string); see :func:`compile_json_schema`.

        Looks in memory, then on disk (see :class:`Compiler`), then compiles and stores.
        """
        from structgen.frontends.json_schema.translate import check_json_data, translate_schema

        schema = parse_schema(schema)
        # before its JSON text is the cache key: a cycle, 2**40 values
        lists_only = check_json_data(schema)
        options = {"whitespace": whitespace, "strict": strict, "canonical": canonical,
                   "lenient": lenient}
        key = entry_key(schema, options, self.vocabulary.fingerprint)
        if key is None:  # not plain JSON data: no content key, compile (the IR cache still works)
            with self._compiling():
                grammar, relaxed = translate_schema(schema, **options, lists_only=lists_only)
                return self.grammar(grammar, source=schema, kind="schema").described(schema, relaxed)
        got = self._schemas.get(key)
        if got is not None:
            return got.described(schema, got.relaxed)
        path = entry_path(key) if self._disk_cache_on() else None
        entry = load_entry(path, key) if path is not None else None
        if entry is not None:
            grammar, relaxed, automaton = entry
            compiled = self._cache.get(grammar)
            if compiled is None:
                compiled = CompiledGrammar.restored(grammar, self.vocabulary, automaton, source=schema)
                self._cache[grammar] = compiled
        else:
            with self._compiling():
                grammar, relaxed = translate_schema(schema, **options, lists_only=lists_only)
                compiled = self.grammar(grammar, source=schema, kind="schema")
            if path is not None:
                store_entry(path, key, (grammar, relaxed, compiled.automaton))
        got = compiled.described(schema, relaxed)
        self._schemas[key] = got
        return got

    @contextlib.contextmanager
    def _compiling(self) -> Iterator[None]:
        """One compile: under this compiler's work budget, with the cyclic collector paused and
        room for deep inputs (:func:`~structgen.core.depth.recursion_room`). The frontends refuse
        inputs nested past their limits; should a walk still run out of stack, that is a
        :class:`CompileError` saying so, not a bare ``RecursionError``."""
        with compile_budget(self.budget), gc_paused(), recursion_room():
            try:
                yield
            except RecursionError as err:
                raise CompileError("the input nests too deeply to compile (Python ran out of recursion "
                                   "depth); flatten its deepest part, e.g. with \"$ref\" to shared "
                                   "definitions or fewer nested groups") from err

    def _disk_cache_on(self) -> bool:
        return self.disk_cache and disk_cache_enabled()


def _matches_nothing(err: EmptyLanguageError, kind: str | None) -> Exception:
    where = name_of(err.rule)
    if kind == "schema":
        return SchemaError(f"no JSON value satisfies the schema at {where}, so none satisfies the whole "
                           "schema (a contradiction, a pattern matching nothing, or a required "
                           "recursion with no way out)", pointer=where.strip("'"), no_value=True)
    if kind in ("grammar", "regex"):
        what = "the pattern" if kind == "regex" else f"rule '{where}'"
        return GrammarError(f"{what} matches no text at all, so no output could be complete; "
                            "check for a character class or a recursion that can never end")
    return err


def pydantic_model(schema: Any) -> Any:
    """``schema`` when it is a Pydantic model class (it has ``model_json_schema``), else None."""
    return schema if isinstance(schema, type) and hasattr(schema, "model_json_schema") else None


def parse_schema(schema: Any) -> Any:
    """A schema given as JSON text, parsed; a Pydantic model class, its JSON schema
    (``model_json_schema()``); an OpenAI ``response_format``, the schema inside it
    (:func:`response_format_schema`); any other value as it is.

    >>> parse_schema({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}})
    {'type': 'integer'}
    """
    if pydantic_model(schema) is not None:
        return schema.model_json_schema()
    if isinstance(schema, str):
        check_input_size(schema, "the schema")
        try:
            schema = json.loads(schema)
        except RecursionError as err:
            raise SchemaError("the schema's JSON text nests too deeply to read") from err
        except ValueError as err:  # not JSON, or an integer past Python's 4,300 digits
            raise SchemaError(f"the schema is not valid JSON: {err}") from err
    if is_response_format(schema):
        return response_format_schema(schema)
    return schema


#: The ``type`` values of an OpenAI ``response_format``; none is a JSON Schema type, so a dict
#: with one of them is never a schema.
RESPONSE_FORMAT_TYPES = ("json_schema", "json_object", "text")


def is_response_format(value: Any) -> bool:
    """Whether ``value`` has the shape of an OpenAI ``response_format`` object."""
    return isinstance(value, dict) and value.get("type") in RESPONSE_FORMAT_TYPES


def response_format_schema(response_format: Any) -> Any:
    """The schema of an OpenAI ``response_format``: ``{"type": "json_schema", "json_schema":
    {"name": ..., "schema": {...}}}`` gives its ``schema``; ``{"type": "json_object"}`` any
    JSON object. ``{"type": "text"}`` constrains nothing, so it is no schema.

    >>> response_format_schema({"type": "json_object"})
    {'type': 'object'}
    """
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_object":
        return {"type": "object"}
    body = response_format.get("json_schema") if kind == "json_schema" else None
    if not isinstance(body, dict) or "schema" not in body:
        raise SchemaError('a response_format must be {"type": "json_schema", "json_schema": {"schema": {...}}} '
                          f'or {{"type": "json_object"}}, not {shown(response_format, 120)}')
    return body["schema"]


def read_grammar_source(grammar: "str | os.PathLike[str]") -> tuple[str, str, Path | None]:
    """(text, name for errors, folder for imports) of a grammar given as text or as a path.

    A :class:`~pathlib.Path` (or any path-like) is a file; so is a one-line string ending in
    ``.lark``. Any other string is the grammar itself.
    """
    if isinstance(grammar, os.PathLike) or (isinstance(grammar, str) and "\n" not in grammar
                                            and grammar.strip().endswith(".lark")):
        path = Path(grammar)
        try:
            return path.read_text(encoding="utf-8"), str(path), path.resolve().parent
        except OSError as err:
            raise GrammarError(f"cannot read grammar file {str(path)!r}: {err.strerror or err}") from err
        except UnicodeDecodeError as err:
            raise GrammarError(f"grammar file {str(path)!r} is not UTF-8 text: byte {err.start} "
                               f"(0x{err.object[err.start]:02x}) {err.reason}; save it as UTF-8") from err
    if not isinstance(grammar, str):
        raise GrammarError(f"a grammar is text, a path or a structgen.Grammar, not {type(grammar).__name__}")
    return grammar, "<grammar>", None


COMPILERS: dict[str, Compiler] = {}
#: compilers of marked vocabularies (:meth:`Compiler.marked`), living as long as the vocabulary
_MARKED: "weakref.WeakKeyDictionary[Vocabulary, Compiler]" = weakref.WeakKeyDictionary()


def compiler_for(tokenizer: Any, *, vocab_size: int | None = None, generation_config: Any = None) -> Compiler:
    """The shared :class:`Compiler` of ``tokenizer``'s vocabulary (one per vocabulary and process).

    ``vocab_size`` and ``generation_config`` are :func:`~structgen.engine.vocab.vocabulary_for`'s:
    the same tokenizer at two logits widths has two vocabularies (their fingerprints differ), so
    two compilers and two sets of caches.
    """
    vocab = vocabulary_for(tokenizer, vocab_size=vocab_size, generation_config=generation_config)
    got = COMPILERS.get(vocab.fingerprint)
    if got is None or got.vocabulary is not vocab:
        got = Compiler(vocab)
        COMPILERS[vocab.fingerprint] = got
    return got
