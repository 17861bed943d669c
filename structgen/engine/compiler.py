"""Staged compilation: a grammar IR and a vocabulary become an immutable :class:`CompiledGrammar`.

``CompiledGrammar`` is picklable (IR, automaton and vocabulary; the memo tables are rebuilt
lazily after unpickling) and hands out per-sequence :class:`~structgen.engine.matcher.Matcher` objects.
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
import copy
import gc
import hashlib
import json
import os
import pickle
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from structgen.engine.disk_cache import atomic_write_bytes, cache_dir, code_digest
from structgen.core.automaton import GrammarAutomaton, build_automaton
from structgen.core.budget import DEFAULT_COMPILE_BUDGET, compile_budget
from structgen.errors import GrammarError, SchemaError
from structgen.core.ir import Grammar
from structgen.engine.masks import MaskBuilder
from structgen.engine.matcher import Matcher
from structgen.engine.pda import ACCEPT, StackMachine, StackSet
from structgen.engine.vocab import Vocabulary, vocabulary_for

__all__ = ["CompiledGrammar", "Compiler", "compile_json_schema", "prepare_vocabulary"]

Whitespace = Literal["flexible", "compact"]
_MAX_FORCED = 4096

#: ``STRUCTGEN_DISK_CACHE=0`` (or ``false``, ``no``, ``off``) turns the compile cache on disk off.
DISK_CACHE_ENV = "STRUCTGEN_DISK_CACHE"
#: Layout of a compile-cache entry; bump it when the entry's header or payload changes.
CACHE_FORMAT = 1
#: Compiled grammars a :class:`Compiler` keeps in memory (the most recently used ones).
MEMORY_CACHE_ENTRIES = 256
_MAGIC = b"structgen-compiled"


class _Runtime:
    """Memo tables of one compiled grammar: stacks, byte steps, token steps, masks, forced text."""

    def __init__(self, automaton: GrammarAutomaton, vocab: Vocabulary) -> None:
        self.machine = StackMachine(automaton)
        self.masks = MaskBuilder(self.machine, vocab)
        self._tokens = vocab.tokens
        self._advance: dict[tuple[StackSet, int], StackSet] = {}
        self._forced: dict[StackSet, bytes] = {}

    def advance(self, state: StackSet, token_id: int) -> StackSet:
        key = (state, token_id)
        got = self._advance.get(key)
        if got is None:
            data = self._tokens[token_id] if 0 <= token_id < len(self._tokens) else None
            got = self.machine.step_bytes(state, data) if data else frozenset()
            self._advance[key] = got
        return got

    def forced(self, state: StackSet) -> bytes:
        got = self._forced.get(state)
        if got is None:
            out = bytearray()
            s = state
            while len(out) < _MAX_FORCED and s and ACCEPT not in s:
                nxt = self.machine.next_bytes(s)
                if len(nxt) != 1:
                    break
                (b,) = nxt
                out.append(b)
                s = self.machine.step_set(s, b)
            got = bytes(out)
            self._forced[state] = got
        return got


class CompiledGrammar:
    """A grammar compiled against one vocabulary; immutable and picklable.

    Attributes
    ----------
    grammar : Grammar
        The IR (its content is the compile-cache key, with the vocabulary fingerprint).
    vocabulary : Vocabulary
    source : Any
        What the grammar was compiled from (e.g. the JSON schema), for error messages.
    relaxed : tuple[Relaxed, ...]
        Constraints left unchecked (keyword, JSON pointer, reason): what ``lenient=True``
        dropped, and custom ``format`` names (annotations); empty when every keyword is honoured.
    """

    def __init__(self, grammar: Grammar, vocabulary: Vocabulary, *, source: Any = None) -> None:
        self.grammar = grammar
        self.vocabulary = vocabulary
        self.source = source
        self.relaxed: tuple = ()
        self.automaton = build_automaton(grammar)
        self._rt: _Runtime | None = None

    @classmethod
    def _restored(cls, grammar: Grammar, vocabulary: Vocabulary, automaton: GrammarAutomaton,
                  *, source: Any = None) -> "CompiledGrammar":
        """A compiled grammar from an automaton built earlier (the disk cache), not rebuilt."""
        self = cls.__new__(cls)
        self.grammar, self.vocabulary, self.source = grammar, vocabulary, source
        self.relaxed, self.automaton, self._rt = (), automaton, None
        return self

    def described(self, source: Any, relaxed: tuple = ()) -> "CompiledGrammar":
        """This compiled grammar with another source and relaxation record (shares the rest)."""
        if source is self.source and relaxed == self.relaxed:
            return self
        twin = copy.copy(self)
        twin._rt = self._runtime()  # one runtime (and its memo tables) for both
        twin.source, twin.relaxed = source, relaxed
        return twin

    @property
    def cache_key(self) -> tuple[Grammar, str]:
        return (self.grammar, self.vocabulary.fingerprint)

    def matcher(self) -> Matcher:
        """A new :class:`Matcher` at the start of the grammar."""
        return Matcher(self)

    def _runtime(self) -> _Runtime:
        if self._rt is None:
            self._rt = _Runtime(self.automaton, self.vocabulary)
        return self._rt

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_rt"] = None
        return state

    def __repr__(self) -> str:
        return f"CompiledGrammar({len(self.grammar.rules)} rules, {self.vocabulary!r})"


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

    Security: entries are pickles, and unpickling runs code, so the cache directory must be
    writable only by you. It is your own cache folder (``STRUCTGEN_CACHE_DIR``, default
    ``~/.cache/structgen``), entries are created readable by you only; do not point
    ``STRUCTGEN_CACHE_DIR`` at a folder other users can write to.

    Parameters
    ----------
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    disk_cache
        Use the compile cache on disk (default). It is also off while the environment variable
        ``STRUCTGEN_DISK_CACHE`` is ``0`` (read on each compile). The memory cache is always on
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
        self._cache: _Recent[Grammar, CompiledGrammar] = _Recent(MEMORY_CACHE_ENTRIES)
        self._schemas: _Recent[str, CompiledGrammar] = _Recent(MEMORY_CACHE_ENTRIES)
        self._grammar_files: _Recent[tuple, Grammar] = _Recent(MEMORY_CACHE_ENTRIES)

    def grammar(self, grammar: Grammar, *, source: Any = None) -> CompiledGrammar:
        got = self._cache.get(grammar)
        if got is None:
            with self._compiling():
                got = CompiledGrammar(grammar, self.vocabulary, source=source)
            self._cache[grammar] = got
        return got

    def grammar_file(self, grammar: "str | os.PathLike[str] | Grammar", *, start: str = "start") -> CompiledGrammar:
        """Compile a Lark-style grammar (text, a path, or IR); see :func:`compile_grammar`."""
        from structgen.core.cfg import remove_left_recursion

        if isinstance(grammar, Grammar):
            with self._compiling():
                return self.grammar(remove_left_recursion(grammar), source=grammar)
        from structgen.frontends.lark.reader import read_grammar

        text, name, base = read_grammar_source(grammar)
        key = (text, name, str(base), start)  # the text, not its imports: those are read once
        ir = self._grammar_files.get(key)
        if ir is None:
            with self._compiling():
                ir = read_grammar(text, start=start, name=name, base=base)
            self._grammar_files[key] = ir
        return self.grammar(ir, source=grammar)

    def regex(self, pattern: str, *, ignore_case: bool = False, dotall: bool = False) -> CompiledGrammar:
        """Compile a regular expression over text; see :func:`compile_regex`."""
        from structgen.frontends.regex.python import text_regex_to_ir

        if not isinstance(pattern, str):
            raise GrammarError(f"the pattern must be a string, not {type(pattern).__name__}")
        body = text_regex_to_ir(pattern, ignore_case=ignore_case, dotall=dotall)
        return self.grammar(Grammar((("regex", body),), "regex"), source=pattern)

    def json_schema(self, schema: "dict[str, Any] | bool | str", *,
                    whitespace: Whitespace = "flexible", strict: bool = False,
                    canonical: bool = False, lenient: bool = False) -> CompiledGrammar:
        """Compile a JSON schema (a dict, a bool or a JSON string); see :func:`compile_json_schema`.

        Looks in memory, then on disk (see :class:`Compiler`), then compiles and stores.
        """
        from structgen.frontends.json_schema.translate import translate_schema

        schema = parse_schema(schema)
        options = {"whitespace": whitespace, "strict": strict, "canonical": canonical,
                   "lenient": lenient}
        key = _entry_key(schema, options, self.vocabulary.fingerprint)
        if key is None:  # not plain JSON data: no content key, compile (the IR cache still works)
            with self._compiling():
                grammar, relaxed = translate_schema(schema, **options)
                return self.grammar(grammar, source=schema).described(schema, relaxed)
        got = self._schemas.get(key)
        if got is not None:
            return got.described(schema, got.relaxed)
        path = _entry_path(key) if self._disk_cache_on() else None
        entry = _load_entry(path, key) if path is not None else None
        if entry is not None:
            grammar, relaxed, automaton = entry
            compiled = self._cache.get(grammar)
            if compiled is None:
                compiled = CompiledGrammar._restored(grammar, self.vocabulary, automaton, source=schema)
                self._cache[grammar] = compiled
        else:
            with self._compiling():
                grammar, relaxed = translate_schema(schema, **options)
                compiled = self.grammar(grammar, source=schema)
            if path is not None:
                _store_entry(path, key, (grammar, relaxed, compiled.automaton))
        got = compiled.described(schema, relaxed)
        self._schemas[key] = got
        return got

    @contextlib.contextmanager
    def _compiling(self) -> Iterator[None]:
        """One compile: under this compiler's work budget, with the cyclic collector paused."""
        with compile_budget(self.budget), _gc_paused():
            yield

    def _disk_cache_on(self) -> bool:
        return self.disk_cache and os.environ.get(DISK_CACHE_ENV, "1").strip().lower() not in (
            "0", "false", "no", "off")


class _Recent(OrderedDict):
    """A dict that keeps its ``limit`` most recently used entries.

    A long-lived process compiling thousands of schemas (a server, a benchmark worker) would
    otherwise keep every grammar with its masks alive, and each full collection of the cyclic
    collector would walk them all (seconds per collection, measured over MaskBench).
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def get(self, key, default=None):  # type: ignore[override]
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the duration.

    Compiling (or unpickling) a large schema allocates 10^5-10^6 objects, which sets off full
    collections over the whole heap, transformers and the vocabulary included: measured on the
    largest Github_ultra schemas, 2-4x the compile time. What compiling drops is freed by
    reference counting; the collector runs again afterwards.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


# ------------------------------------------------------------------ compile cache on disk

def _plain_json(value: Any) -> bool:
    """Whether ``value`` is JSON data its JSON text stands for exactly (dict with ``str`` keys,
    list, str, int, float, bool, None; no subclasses), so that text can be its cache key."""
    # A shared container is checked once; a cycle stops here too, and json.dumps refuses it.
    todo, seen = [value], set()
    while todo:
        v = todo.pop()
        t = type(v)
        if t in (dict, list):
            if id(v) in seen:
                continue
            seen.add(id(v))
        if t is dict:
            if any(type(k) is not str for k in v):
                return False
            todo.extend(v.values())
        elif t is list:
            todo.extend(v)
        elif t not in (str, int, float, bool, type(None)):
            return False
    return True


def _entry_key(schema: Any, options: dict[str, Any], vocab_fingerprint: str) -> str | None:
    """The compile-cache key of a schema (hex sha256), or None when it is not plain JSON data."""
    if not _plain_json(schema):
        return None
    try:
        # Keys in the schema's order (property order is grammar order); NaN/Infinity spelled
        # as json.dumps does; lone surrogates kept (surrogatepass), so the text is exact.
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return None
    # The header line is JSON without raw newlines, so b"\n" separates it from the schema.
    from structgen import __version__

    header = json.dumps([CACHE_FORMAT, __version__, code_digest(), vocab_fingerprint, options],
                        sort_keys=True)
    h = hashlib.sha256(header.encode() + b"\n")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _entry_path(key: str) -> Path:
    return cache_dir() / "compiled" / key[:2] / f"{key}.pickle"


def _entry_header(key: str) -> bytes:
    return b"%s %d %s\n" % (_MAGIC, CACHE_FORMAT, key.encode())


def _load_entry(path: Path, key: str) -> tuple[Grammar, tuple, GrammarAutomaton] | None:
    """The entry at ``path``, or None for a miss: absent, unreadable, truncated, corrupt, written
    for another key or format. Never raises for a bad entry; the caller overwrites it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    header = _entry_header(key)
    if not data.startswith(header) or len(data) < len(header) + 32:
        return None
    digest, payload = data[len(header):len(header) + 32], data[len(header) + 32:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        with _gc_paused():
            entry = pickle.loads(zlib.decompress(payload))
    except Exception:  # noqa: BLE001 - whatever a stale or damaged entry raises, it is a miss
        return None
    if (type(entry) is not tuple or len(entry) != 3 or not isinstance(entry[0], Grammar)
            or type(entry[1]) is not tuple or not isinstance(entry[2], GrammarAutomaton)):
        return None
    return entry


def _store_entry(path: Path, key: str, entry: tuple[Grammar, tuple, GrammarAutomaton]) -> None:
    """Write an entry atomically: header (format, key), sha256 of the payload, zlib'd pickle.

    No fsync: a write cut short by a crash fails the checksum and reads as a miss. A cache that
    cannot be written (read-only, full disk) or an entry that cannot be pickled costs speed only.
    """
    try:
        payload = zlib.compress(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL), 1)
        atomic_write_bytes(path, _entry_header(key) + hashlib.sha256(payload).digest() + payload,
                           fsync=False)
    except (OSError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        pass


def parse_schema(schema: Any) -> Any:
    """A schema given as JSON text, parsed; any other value as it is."""
    if not isinstance(schema, str):
        return schema
    try:
        return json.loads(schema)
    except json.JSONDecodeError as err:
        raise SchemaError(f"the schema is not valid JSON: {err}") from err


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
    if not isinstance(grammar, str):
        raise GrammarError(f"a grammar is text, a path or a structgen.Grammar, not {type(grammar).__name__}")
    return grammar, "<grammar>", None


def compile_grammar(grammar: "str | os.PathLike[str] | Grammar", tokenizer: Any, *,
                    start: str = "start") -> CompiledGrammar:
    """Compile a context-free grammar (Lark-style EBNF) into a grammar over ``tokenizer``'s vocabulary.

    Parameters
    ----------
    grammar
        The grammar text, a path to a ``.lark`` file (e.g. one under ``grammars/``), or IR.
        The format is described in :mod:`structgen.frontends.lark.reader`: Lark's, with a lexer's token
        ends (:mod:`structgen.frontends.lark.lexer`); left recursion and ambiguity are allowed.
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    start
        The start rule.

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
    return _compiler_for(tokenizer).grammar_file(grammar, start=start)


def compile_regex(pattern: str, tokenizer: Any, *, ignore_case: bool = False,
                  dotall: bool = False) -> CompiledGrammar:
    """Compile a regular expression (Python ``re`` dialect) that the whole output must match.

    See :mod:`structgen.frontends.regex.python` for what is supported; lookaround, backreferences, anchors
    and word boundaries raise :class:`GrammarError`.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> m = compile_regex(r"(yes|no)!", vocab).matcher()
    >>> m.advance(ord("y")), m.forced_text()
    (True, 'es!')
    """
    return _compiler_for(tokenizer).regex(pattern, ignore_case=ignore_case, dotall=dotall)


def compile_json_schema(schema: "dict[str, Any] | bool | str", tokenizer: Any, *,
                        whitespace: Whitespace = "flexible", strict: bool = False,
                        canonical: bool = False, lenient: bool = False) -> CompiledGrammar:
    """Compile a JSON schema into a grammar over ``tokenizer``'s vocabulary.

    Parameters
    ----------
    schema
        A JSON Schema as a dict (or ``True``/``False``, or a JSON string).
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.engine.vocab.Vocabulary`.
    whitespace
        ``"flexible"`` (default) accepts any JSON whitespace between tokens, up to a bound per
        gap, so ``json.dumps(value, indent=2)`` is accepted; ``"compact"`` allows none (more
        forced text, no runaway whitespace when generating).
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

    Raises
    ------
    UnsupportedFeatureError
        For a keyword the compiler cannot honour exactly, naming it and its JSON pointer.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    >>> m = compile_json_schema({"enum": ["red", "green"]}, vocab, canonical=True).matcher()
    >>> m.advance(ord('"')), m.advance(ord("g")), m.forced_text()
    (True, True, 'reen"')
    """
    return _compiler_for(tokenizer).json_schema(schema, whitespace=whitespace, strict=strict,
                                                canonical=canonical, lenient=lenient)


def prepare_vocabulary(tokenizer: Any) -> Vocabulary:
    """Build a tokenizer's vocabulary and precompute the masks every JSON grammar shares.

    The token masks of shared primitives (the inside of a JSON string, numbers, whitespace) take
    the longest to compute; this computes them now, and they are cached on disk (see
    ``STRUCTGEN_CACHE_DIR``), so later processes and schemas only pay for what is theirs.

    Example
    -------
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = prepare_vocabulary(Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256]))
    >>> vocab.size
    257
    """
    vocab = vocabulary_for(tokenizer)
    single = {data[0]: tid for tid, data in enumerate(vocab.tokens) if data and len(data) == 1}
    sample = {"k": ["s\u00e9", -1.5e3, 7, True, None, {}, []]}
    for whitespace, text in (("compact", json.dumps(sample, separators=(",", ":"))),
                             ("flexible", json.dumps(sample, indent=2))):
        m = compile_json_schema(True, vocab, whitespace=whitespace).matcher()
        for b in text.encode():
            m.mask_words()
            if b not in single or not m.advance(single[b]):
                break
    return vocab


_COMPILERS: dict[str, Compiler] = {}


def _compiler_for(tokenizer: Any) -> Compiler:
    vocab = vocabulary_for(tokenizer)
    got = _COMPILERS.get(vocab.fingerprint)
    if got is None or got.vocabulary is not vocab:
        got = Compiler(vocab)
        _COMPILERS[vocab.fingerprint] = got
    return got
