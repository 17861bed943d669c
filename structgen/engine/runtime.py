"""The memo tables one compiled grammar shares among its matchers: stacks, steps, masks, forced text.

Example
-------
>>> from structgen.core.automaton import build_automaton
>>> from structgen.core.ir import Grammar, Lit
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> rt = GrammarRuntime(build_automaton(Grammar((("start", Lit(b"ok")),), "start")), vocab)
>>> rt.forced(rt.machine.initial())
b'ok'
"""

from __future__ import annotations

import numpy as np

from structgen.core.automaton import GrammarAutomaton
from structgen.engine.completion import shortest_path, spell
from structgen.engine.masks import MaskBuilder
from structgen.engine.pda import ACCEPT, StackMachine, StackSet
from structgen.engine.vocab import Vocabulary

__all__ = ["GrammarRuntime", "MAX_COMPLETIONS", "MAX_FORCED", "MAX_LENGTH_TABLES"]

#: Longest forced text worked out at once (bytes).
MAX_FORCED = 4096

#: Parse positions whose shortest completion is remembered (the memo starts over past it).
MAX_COMPLETIONS = 50_000

#: Parse positions whose per-token completion lengths are remembered (one vocabulary-wide table each).
MAX_LENGTH_TABLES = 64


class GrammarRuntime:
    """Memo tables of one compiled grammar: stacks, byte steps, token steps, masks, forced text."""

    def __init__(self, automaton: GrammarAutomaton, vocab: Vocabulary) -> None:
        self.vocabulary = vocab
        self.machine = StackMachine(automaton)
        self.masks = MaskBuilder(self.machine, vocab)
        self._tokens = vocab.tokens
        self._advance: dict[tuple[StackSet, int], StackSet] = {}
        self._forced: dict[StackSet, bytes] = {}
        self._completions: dict[StackSet, int | None] = {}
        self._lengths: dict[StackSet, np.ndarray] = {}

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
            while len(out) < MAX_FORCED and s and ACCEPT not in s:
                nxt = self.machine.next_bytes(s)
                if len(nxt) != 1:
                    break
                (b,) = nxt
                out.append(b)
                s = self.machine.step_set(s, b)
            got = bytes(out)
            self._forced[state] = got
        return got

    def completion_length(self, state: StackSet) -> int | None:
        """Tokens of the shortest completion from ``state`` (its smallest shortest byte path,
        spelled in the fewest tokens; ``0`` where the output may end), or ``None`` when none is found within
        :data:`~structgen.engine.completion.LIMIT` positions or a byte has no token."""
        if state in self._completions:
            return self._completions[state]
        path = shortest_path(self.machine, state)
        tokens = None if path is None else spell(self.vocabulary, path)
        got = None if tokens is None else len(tokens)
        if len(self._completions) >= MAX_COMPLETIONS:
            self._completions.clear()
        self._completions[state] = got
        return got

    def completion_lengths(self, state: StackSet, words: np.ndarray) -> np.ndarray:
        """:meth:`completion_length` after each token ``words`` allows from ``state``, as one
        read-only ``int32`` array over the vocabulary: ``-1`` where the token is refused or no
        completion is found, ``0`` for an allowed end of sequence. Steps are not memoized (a
        free-text position allows most of the vocabulary); the table is, per position."""
        got = self._lengths.get(state)
        if got is None:
            size = self.vocabulary.size
            allowed = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:size])
            got = np.full(size, -1, dtype=np.int32)
            eos = self.vocabulary.eos_ids
            for token in allowed.tolist():
                data = self._tokens[token]
                if token in eos:
                    got[token] = 0
                elif data:
                    nxt = self.machine.step_bytes(state, data)
                    n = self.completion_length(nxt) if nxt else None
                    got[token] = -1 if n is None else n
            got.setflags(write=False)
            if len(self._lengths) >= MAX_LENGTH_TABLES:
                self._lengths.clear()
            self._lengths[state] = got
        return got
