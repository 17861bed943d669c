"""Staged compilation: a grammar IR and a vocabulary become an immutable :class:`CompiledGrammar`.

``CompiledGrammar`` is picklable (IR, automaton and vocabulary; the memo tables are rebuilt
lazily after unpickling) and hands out per-sequence :class:`~structgen.matcher.Matcher` objects.
A :class:`Compiler` keeps one vocabulary and an in-memory compile cache keyed by the grammar IR.

Example
-------
>>> from structgen.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> compiled = Compiler(vocab).json_schema({"type": "integer"})
>>> m = compiled.matcher()
>>> all(m.advance(t) for t in b"42"), m.can_end()
(True, True)
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from .automaton import GrammarAutomaton, build_automaton
from .errors import SchemaError
from .ir import Grammar
from .masks import MaskBuilder
from .matcher import Matcher
from .pda import ACCEPT, StackMachine, StackSet
from .vocab import Vocabulary, vocabulary_for

__all__ = ["CompiledGrammar", "Compiler", "compile_json_schema", "prepare_vocabulary"]

Whitespace = Literal["flexible", "compact"]
_MAX_FORCED = 4096


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
        Constraints that ``lenient=True`` dropped (keyword, JSON pointer, reason); empty when
        every constraint is honoured.
    """

    def __init__(self, grammar: Grammar, vocabulary: Vocabulary, *, source: Any = None) -> None:
        self.grammar = grammar
        self.vocabulary = vocabulary
        self.source = source
        self.relaxed: tuple = ()
        self.automaton = build_automaton(grammar)
        self._rt: _Runtime | None = None

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
    """Compiles grammars for one tokenizer, caching results by grammar content.

    Parameters
    ----------
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.vocab.Vocabulary`.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.vocabulary = vocabulary_for(tokenizer)
        self._cache: dict[Grammar, CompiledGrammar] = {}

    def grammar(self, grammar: Grammar, *, source: Any = None) -> CompiledGrammar:
        got = self._cache.get(grammar)
        if got is None:
            got = CompiledGrammar(grammar, self.vocabulary, source=source)
            self._cache[grammar] = got
        return got

    def json_schema(self, schema: "dict[str, Any] | bool | str", *,
                    whitespace: Whitespace = "flexible", strict: bool = False,
                    canonical: bool = False, lenient: bool = False) -> CompiledGrammar:
        """Compile a JSON schema (a dict, a bool or a JSON string); see :func:`compile_json_schema`."""
        from .json_schema import translate_schema

        schema = parse_schema(schema)
        grammar, relaxed = translate_schema(schema, whitespace=whitespace, strict=strict,
                                            canonical=canonical, lenient=lenient)
        return self.grammar(grammar, source=schema).described(schema, relaxed)


def parse_schema(schema: Any) -> Any:
    """A schema given as JSON text, parsed; any other value as it is."""
    if not isinstance(schema, str):
        return schema
    try:
        return json.loads(schema)
    except json.JSONDecodeError as err:
        raise SchemaError(f"the schema is not valid JSON: {err}") from err


def compile_json_schema(schema: "dict[str, Any] | bool | str", tokenizer: Any, *,
                        whitespace: Whitespace = "flexible", strict: bool = False,
                        canonical: bool = False, lenient: bool = False) -> CompiledGrammar:
    """Compile a JSON schema into a grammar over ``tokenizer``'s vocabulary.

    Parameters
    ----------
    schema
        A JSON Schema as a dict (or ``True``/``False``, or a JSON string).
    tokenizer
        A Hugging Face tokenizer or a :class:`~structgen.vocab.Vocabulary`.
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
        Drop constraints of :data:`~structgen.json_schema.LENIENT_KEYWORDS` that cannot be
        honoured instead of raising; each is recorded in ``relaxed``. Off by default.

    Raises
    ------
    UnsupportedFeatureError
        For a keyword the compiler cannot honour exactly, naming it and its JSON pointer.

    Example
    -------
    >>> from structgen.vocab import Vocabulary
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
    >>> from structgen.vocab import Vocabulary
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
