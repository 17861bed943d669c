"""The immutable :class:`CompiledGrammar` and its lazily built memo tables (:class:`GrammarRuntime`).

``CompiledGrammar`` is picklable (IR, automaton and vocabulary; the memo tables are rebuilt
lazily after unpickling) and hands out per-sequence :class:`~structgen.engine.matcher.Matcher`
objects, which share its runtime.

Example
-------
>>> from structgen.core.ir import Grammar, Lit
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> m = CompiledGrammar(Grammar((("start", Lit(b"hi")),), "start"), vocab).matcher()
>>> m.forced_text()
'hi'
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from structgen.core.automaton import GrammarAutomaton, build_automaton
from structgen.core.ir import Grammar
from structgen.engine.matcher import Matcher
from structgen.engine.runtime import GrammarRuntime
from structgen.engine.vocab import Vocabulary

__all__ = ["CompiledGrammar"]

#: Builds runtimes one at a time, so that threads starting matchers of a new compiled grammar
#: at once share one runtime (one set of memo tables), not one each.
_RUNTIME_LOCK = threading.Lock()


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
        self._rt: GrammarRuntime | None = None

    @classmethod
    def restored(cls, grammar: Grammar, vocabulary: Vocabulary, automaton: GrammarAutomaton,
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
        twin._rt = self.runtime()  # one runtime (and its memo tables) for both
        twin.source, twin.relaxed = source, relaxed
        return twin

    @property
    def cache_key(self) -> tuple[Grammar, str]:
        return (self.grammar, self.vocabulary.fingerprint)

    def matcher(self) -> Matcher:
        """A new :class:`Matcher` at the start of the grammar."""
        matcher = Matcher(self.runtime())
        matcher.compiled = self  # what a wrapper (a thinking budget) builds on
        return matcher

    def runtime(self) -> GrammarRuntime:
        rt = self._rt
        if rt is None:
            with _RUNTIME_LOCK:
                if self._rt is None:
                    self._rt = GrammarRuntime(self.automaton, self.vocabulary)
                rt = self._rt
        return rt

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_rt"] = None
        return state

    def __repr__(self) -> str:
        return f"CompiledGrammar({len(self.grammar.rules)} rules, {self.vocabulary!r})"
