"""A thinking budget: after ``budget`` tokens of reasoning, the end marker is forced.

The grammar of a reasoning answer is ``[start] thinking end answer`` (the thinking free text
never holds the end marker, so it is written once). :class:`ThinkingMatcher` wraps that
grammar's matcher and counts the tokens written inside the thinking; when the count reaches the
budget it allows only the end marker's tokens, in their canonical spelling, one whole token at a
time (a token is never cut; a budget spent inside a multi-byte character lets its remaining bytes
come first, a token or two past the budget). The mask stays a pure function of the tokens so far, so drafted and
step-by-step decoding still produce the same tokens, and the forced marker is forced text, so it
is drafted.

Example
-------
>>> from structgen.engine.compiled import CompiledGrammar
>>> from structgen.engine.vocab import Vocabulary
>>> from structgen.frontends.structural_tag import free_text
>>> from structgen.core.ir import Grammar, Lit, seq
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> g = Grammar.of("root", root=seq(free_text(("</t>",)), Lit(b"</t>ok")))
>>> m = ThinkingMatcher(CompiledGrammar(g, vocab).matcher(), start=None, end=b"</t>", end_ids=list(b"</t>"), budget=2)
>>> m.advance(ord("h")), m.advance(ord("m")), m.advance(ord("m")), m.forced_text()
(True, True, False, '</t>')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from structgen.engine.matcher import Matcher

__all__ = ["ThinkingMatcher"]


@dataclass(frozen=True)
class _Phase:
    """Where the output is: ``before`` the start marker, in the ``thinking`` (with its token
    count), being ``forced`` to end it (tokens of the marker left), or in the ``answer``."""

    name: str
    count: int = 0
    queue: tuple[int, ...] = ()
    seen: bytes = b""  # the output's bytes up to here, kept only while a marker is looked for


def _whole_characters(tail: bytes) -> bool:
    """Whether ``tail`` (the end of the output) ends between UTF-8 characters: the end marker
    cannot follow half a character, so a budget spent inside one waits for its last byte."""
    for back in range(1, min(4, len(tail)) + 1):
        byte = tail[-back]
        if byte < 0x80:
            return True
        if byte >= 0xC0:  # a lead byte: its character needs this many bytes
            return back == (2 if byte < 0xE0 else 3 if byte < 0xF0 else 4)
    return not tail


class ThinkingMatcher:
    """A matcher (see :class:`~structgen.engine.matcher.Matcher`) whose thinking has a budget.

    ``start`` is the start marker the output writes first (``None``: the prompt opened the
    thinking); ``end`` the end marker, ``end_ids`` its canonical tokens; ``budget`` the most
    tokens of thinking (``None``: no limit).
    """

    def __init__(self, inner: Matcher, *, start: bytes | None, end: bytes, end_ids: Sequence[int],
                 budget: int | None) -> None:
        self._inner = inner
        self._start, self._end, self._end_ids, self._budget = start, end, tuple(end_ids), budget
        first = _Phase("before") if start else _Phase("thinking")
        self._phases: list[_Phase] = [self._forcing(first)]
        self.last_rejection: str | None = None
        #: where the thinking starts and ends in the output's tokens (set as they are reached)

    # ---------------------------------------------------------------- the phase machine

    def _forcing(self, phase: _Phase) -> _Phase:
        if phase.name == "thinking" and self._budget is not None and phase.count >= self._budget \
                and _whole_characters(phase.seen):
            return _Phase("forced", phase.count, self._end_ids)
        return phase

    def _after(self, phase: _Phase, token_id: int) -> _Phase:
        data = self._inner.vocabulary.token_bytes([token_id])
        if phase.name == "before":
            seen = phase.seen + data
            if self._start is not None and self._start in seen:
                rest = seen[seen.index(self._start) + len(self._start):]
                return self._forcing(_Phase("thinking", 0, (), rest) if self._end not in rest
                                     else _Phase("answer"))
            return _Phase("before", 0, (), seen[-len(self._start or b""):])
        if phase.name == "thinking":
            seen = phase.seen + data
            if self._end in seen:
                return _Phase("answer")
            return self._forcing(_Phase("thinking", phase.count + 1, (), seen[-max(len(self._end), 4):]))
        if phase.name == "forced":
            queue = phase.queue[1:]
            return _Phase("forced", phase.count, queue) if queue else _Phase("answer")
        return phase

    # ---------------------------------------------------------------- the Matcher interface

    def advance(self, token_id: int) -> bool:
        phase = self._phases[-1]
        if phase.name == "forced" and token_id != phase.queue[0]:
            self.last_rejection = (f"the thinking budget ({self._budget} tokens) is spent: only the end "
                                   f"marker {self._end.decode(errors='replace')!r} may follow")
            return False
        if not self._inner.advance(token_id):
            self.last_rejection = self._inner.last_rejection
            return False
        self.last_rejection = None
        self._phases.append(self._after(phase, token_id))
        return True

    def validate(self, token_ids: Sequence[int]) -> int:
        probe = self.fork()
        for k, t in enumerate(token_ids):
            if not probe.advance(t):
                return k
        return len(token_ids)

    def rollback(self, n: int = 1) -> None:
        self._inner.rollback(n)
        if n > 0:
            del self._phases[-n:]

    def fork(self) -> "ThinkingMatcher":
        other = ThinkingMatcher.__new__(ThinkingMatcher)
        other.__dict__.update(self.__dict__)
        other._inner = self._inner.fork()
        other._phases = list(self._phases)
        other.last_rejection = None
        return other

    def mask_words(self) -> np.ndarray:
        words = self._inner.mask_words()
        phase = self._phases[-1]
        if phase.name != "forced":
            return words
        token = phase.queue[0]
        out = np.zeros_like(words)
        out[token // 32] = words[token // 32] & np.uint32(1 << (token % 32))
        return out

    def allowed_token_ids(self) -> list[int]:
        bits = np.unpackbits(self.mask_words().view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.vocabulary.size]).tolist()

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        if self._phases[-1].name != "forced":
            self._inner.fill_bitmask(bitmask, index)
            return
        probe = self._inner.fork()  # the inner mask's checks and layout, then only the forced token
        probe.fill_bitmask(bitmask, index)
        words = self.mask_words().view(np.int32)
        row = bitmask[index] if len(getattr(bitmask, "shape", ())) == 2 else bitmask
        row[: len(words)] = words if isinstance(row, np.ndarray) else row.new_tensor(words)

    def forced_bytes(self) -> bytes:
        phase = self._phases[-1]
        if phase.name != "forced":
            return self._inner.forced_bytes()
        # the marker alone: its canonical spelling is the queue, and a draft spelling it with
        # what follows could merge a token across the marker's end
        return self.vocabulary.token_bytes(list(phase.queue))

    def forced_text(self) -> str:
        data = self.forced_bytes()
        for cut in range(len(data), max(-1, len(data) - 4), -1):  # whole characters only
            try:
                return data[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return ""

    def completion_length(self, back: int = 0) -> int | None:
        return self._inner.completion_length(back)

    def completion_length_after(self, token_id: int) -> int | None:
        phase = self._phases[-1]
        if phase.name == "forced" and token_id != phase.queue[0]:
            return None
        return self._inner.completion_length_after(token_id)

    def completion_lengths(self) -> np.ndarray:
        lengths = self._inner.completion_lengths()
        phase = self._phases[-1]
        if phase.name != "forced":
            return lengths
        only = np.full_like(lengths, -1)  # the end marker's canonical tokens, one at a time
        only[phase.queue[0]] = lengths[phase.queue[0]]
        return only

    def is_finished(self) -> bool:
        return self._inner.is_finished()

    def can_end(self) -> bool:
        return self._phases[-1].name != "forced" and self._inner.can_end()

    def is_terminated(self) -> bool:
        return self._inner.is_terminated()

    @property
    def token_ids(self) -> list[int]:
        return self._inner.token_ids

    @property
    def vocabulary(self) -> Any:
        return self._inner.vocabulary

    @property
    def machine(self) -> Any:
        return self._inner.machine

    def stacks(self) -> Any:
        return self._inner.stacks()

    def thinking_tokens(self) -> int:
        """Tokens written inside the thinking so far (the forced end marker not counted)."""
        return max((p.count for p in self._phases if p.name in ("thinking", "forced")), default=0)
