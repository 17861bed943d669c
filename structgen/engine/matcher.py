"""The per-sequence matcher: the only mutable grammar object.

A :class:`Matcher` tracks one sequence through a compiled grammar. It never raises on a rejected
token: :meth:`Matcher.advance` returns ``False``, leaves the state unchanged and records why in
:attr:`Matcher.last_rejection`. The decoding loop decides what a rejection means.

Example
-------
>>> import structgen
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> m = structgen.compile_json_schema({"type": "boolean"}, vocab).matcher()
>>> m.forced_text(), m.advance(ord("t")), m.forced_text()
('', True, 'rue')
>>> m.validate([ord(c) for c in "rue"]), m.is_finished()
(3, False)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from structgen.engine.pda import ACCEPT, StackMachine, StackSet
from structgen.engine.runtime import GrammarRuntime
from structgen.engine.vocab import Vocabulary
from structgen.errors import OptionError


__all__ = ["Matcher"]

#: The state after an end-of-sequence token was accepted: nothing else may follow.
_ENDED: StackSet = frozenset((-1,))


class Matcher:
    """Walks token ids through a :class:`~structgen.engine.compiled.CompiledGrammar`.

    Create one with :meth:`CompiledGrammar.matcher`. A matcher is not thread-safe: use one per
    sequence. Matchers of one compiled grammar may run in different threads at once: they share
    its memo tables, which concurrent fillers leave consistent (:mod:`structgen.engine.pda`).
    """

    def __init__(self, runtime: GrammarRuntime) -> None:
        self._vocab = runtime.vocabulary
        self._rt = runtime
        self._states: list[StackSet] = [self._rt.machine.initial()]
        self._tokens: list[int] = []
        #: Why the last rejected token was rejected (``None`` after an accepted one).
        self.last_rejection: str | None = None
        #: the compiled grammar this matcher walks (set by :meth:`CompiledGrammar.matcher`)
        self.compiled: Any = None

    # ------------------------------------------------------------------ state queries

    @property
    def token_ids(self) -> list[int]:
        """The tokens accepted so far."""
        return list(self._tokens)

    @property
    def vocabulary(self) -> Vocabulary:
        """The vocabulary the grammar is compiled over."""
        return self._vocab

    @property
    def machine(self) -> StackMachine:
        """The grammar's stack machine (shared by its matchers; its tables are memos)."""
        return self._rt.machine

    def stacks(self) -> StackSet | None:
        """The parse position: the closed set of stacks now (``None`` once the sequence ended)."""
        state = self._states[-1]
        return None if state is _ENDED else state

    def completion_length(self, back: int = 0) -> int | None:
        """Tokens of the shortest way to complete the output from the position ``back`` tokens
        ago (``0``: now; ``0`` tokens where it may end; ``None`` once ended, or when no
        completion is found within the search's limit). The count spells the smallest shortest
        byte path in the fewest tokens of this vocabulary, so it falls by exactly one when that
        spelling's first token is taken: a budget that covers it can always be kept.

        >>> import structgen
        >>> from structgen.engine.vocab import Vocabulary
        >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [b"ab", None], eos_ids=[257])
        >>> m = structgen.compile_regex("(ab)+c", vocab).matcher()
        >>> m.completion_length(), m.advance(256), m.completion_length(), m.completion_length(back=1)
        (2, True, 1, 2)
        """
        state = self._states[-1 - back]
        return None if state is _ENDED else self._rt.completion_length(state)

    def completion_length_after(self, token_id: int) -> int | None:
        """:meth:`completion_length` after ``token_id``, without taking it (``None`` where it
        is refused; ``0`` for an end-of-sequence token the grammar allows)."""
        reason = self.last_rejection
        nxt = self._next(self._states[-1], token_id)
        self.last_rejection = reason  # only asked: nothing was rejected
        if nxt is None:
            return None
        return 0 if nxt is _ENDED else self._rt.completion_length(nxt)

    def completion_lengths(self) -> np.ndarray:
        """:meth:`completion_length_after` for every token id at once: a read-only ``int32``
        array, ``-1`` where the token is refused or no completion is found (memoized per parse
        position, so a budget can be checked for the whole vocabulary in one array operation).

        >>> import structgen
        >>> from structgen.engine.vocab import Vocabulary
        >>> vocab = Vocabulary([b"a", b"b", None], eos_ids=[2])
        >>> structgen.compile_regex("a+b", vocab).matcher().completion_lengths().tolist()
        [1, -1, -1]
        """
        state = self._states[-1]
        if state is _ENDED:
            return np.full(self._vocab.size, -1, dtype=np.int32)
        return self._rt.completion_lengths(state, self.mask_words())

    def is_finished(self) -> bool:
        """True when nothing but end-of-sequence can follow (or it was already accepted)."""
        s = self._states[-1]
        return s is _ENDED or s == {ACCEPT}

    def can_end(self) -> bool:
        """True when an end-of-sequence token is legal now (the value is complete)."""
        return ACCEPT in self._states[-1]

    def is_terminated(self) -> bool:
        """True once an end-of-sequence token was accepted."""
        return self._states[-1] is _ENDED

    # ------------------------------------------------------------------ transitions

    def _next(self, state: StackSet, token_id: int) -> StackSet | None:
        """State after ``token_id``, or ``None`` (and a recorded reason) when it is illegal."""
        if state is _ENDED:
            self.last_rejection = f"token {token_id}: the sequence already ended"
            return None
        if token_id in self._vocab.eos_ids:
            if ACCEPT in state:
                return _ENDED
            self.last_rejection = f"end-of-sequence token {token_id}: the value is not complete"
            return None
        nxt = self._rt.advance(state, token_id)
        if not nxt:
            self.last_rejection = self._explain(state, token_id)
            return None
        return nxt

    def advance(self, token_id: int) -> bool:
        """Accept ``token_id`` and return True, or return False and leave the state unchanged.

        A token id is an integer: a Python ``int`` or a numpy/torch integer scalar (anything with
        ``__index__``), not a bool, a float or a string (:class:`OptionError`).
        """
        token_id = _token_id(token_id, "advance")
        nxt = self._next(self._states[-1], token_id)
        if nxt is None:
            return False
        self._states.append(nxt)
        self._tokens.append(token_id)
        self.last_rejection = None
        return True

    def validate(self, token_ids: Sequence[int]) -> int:
        """Length of the longest prefix of ``token_ids`` the grammar accepts; no state change."""
        if isinstance(token_ids, (str, bytes)) or not hasattr(token_ids, "__iter__"):
            raise OptionError(f"validate() takes a sequence of token ids, not {type(token_ids).__name__}")
        state = self._states[-1]
        for n, tid in enumerate(token_ids):
            nxt = self._next(state, _token_id(tid, f"validate(), position {n}"))
            if nxt is None:
                return n
            state = nxt
        return len(token_ids)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens (an integer, 0 to the number accepted)."""
        if isinstance(n, bool) or not hasattr(n, "__index__"):
            raise OptionError(f"rollback() takes a whole number of tokens, not {n!r} ({type(n).__name__})")
        n = n.__index__()
        if not 0 <= n <= len(self._tokens):
            raise OptionError(f"cannot roll back {n} tokens: only {len(self._tokens)} were accepted")
        if n:
            del self._states[-n:]
            del self._tokens[-n:]

    def reset(self) -> None:
        """Back to the start of the grammar."""
        self.rollback(len(self._tokens))

    def fork(self) -> "Matcher":
        """An independent copy at the same position (sharing the compiled memo tables)."""
        other = Matcher.__new__(Matcher)
        other._vocab, other._rt = self._vocab, self._rt
        other._states = list(self._states)
        other._tokens = list(self._tokens)
        other.last_rejection = None
        other.compiled = self.compiled
        return other

    # ------------------------------------------------------------------ masks

    def mask_words(self) -> np.ndarray:
        """The current mask as ``uint32`` words (read-only; bit ``i`` allows token ``i``)."""
        s = self._states[-1]
        if s is _ENDED:
            return np.zeros(self._vocab.words, dtype=np.uint32)
        return self._rt.masks.mask(s)

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the current mask into row ``index`` of an ``int32`` bitmask.

        ``bitmask`` is a numpy array or a torch tensor of shape ``(batch, ceil(V / 32))`` or
        ``(ceil(V / 32),)``, the layout xgrammar and llguidance use: bit ``i % 32`` of word
        ``i // 32`` allows token ``i``.

        Anything else (another dtype, shape or type, a row ``index`` out of range, a row
        narrower than the vocabulary's words) is an :class:`OptionError` saying what is expected;
        a wider row (logits wider than the compiled vocabulary) gets zeros past the vocabulary,
        so those ids are never allowed. To compile for a model whose logits are wider than its
        tokenizer, pass ``vocab_size=`` or ``model=`` to the ``compile_*`` functions.

        Example
        -------
        >>> import numpy as np, structgen
        >>> vocab = structgen.Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
        >>> m = structgen.compile_regex("[0-9]", vocab).matcher()
        >>> buf = np.full((2, 10), -1, dtype=np.int32)     # 320 columns, wider than 257 tokens
        >>> m.fill_bitmask(buf, 1)
        >>> int(buf[1, 1]) == 0x03FF0000, int(buf[1, 9]), int(buf[0, 0])   # '0'..'9': bits 48-57
        (True, 0, -1)
        """
        words = self.mask_words().view(np.int32)
        row = _bitmask_row(bitmask, index, len(words), self._vocab.size)
        if isinstance(row, np.ndarray):
            if len(row) == len(words):  # the usual row: no slices to make (~0.6 µs of a warm fill's ~2)
                np.copyto(row, words)
            else:
                np.copyto(row[: len(words)], words)
                row[len(words):] = 0
        else:  # a torch tensor (on any device): built through the tensor, so the engine never imports torch
            try:
                row[: len(words)].copy_(row.new_tensor(words))
                row[len(words):] = 0
            except RuntimeError as err:
                raise OptionError(f"fill_bitmask() cannot write into this tensor: {err}") from err

    def allowed_token_ids(self) -> list[int]:
        """The legal next token ids, end-of-sequence ids included when the value is complete."""
        bits = np.unpackbits(self.mask_words().view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self._vocab.size]).tolist()

    def forced_bytes(self) -> bytes:
        """The bytes every continuation must start with (the grammar allows nothing else)."""
        return self._rt.forced(self._states[-1])

    def forced_text(self) -> str:
        """:meth:`forced_bytes` as text, cut before an incomplete UTF-8 character."""
        data = self.forced_bytes()
        for cut in range(len(data), max(len(data) - 4, -1), -1):
            try:
                return data[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return ""

    # ------------------------------------------------------------------ diagnostics

    def _explain(self, state: StackSet, token_id: int) -> str:
        data = self._vocab.tokens[token_id] if 0 <= token_id < self._vocab.size else None
        if data is None:
            return f"token {token_id} is special or unknown and never matches grammar text"
        sm = self._rt.machine
        s = state
        for k, b in enumerate(data):
            nxt = sm.step_set(s, b)
            if not nxt:
                expected = "".join(sorted(_show(x) for x in sm.next_bytes(s)))
                return (f"token {token_id} ({data!r}) is not allowed: byte {k} ({_show(b)}) "
                        f"does not fit; expected one of [{expected[:80]}]"
                        + (" or end-of-sequence" if ACCEPT in s else ""))
            s = nxt
        return f"token {token_id} ({data!r}) is not allowed here"


def _token_id(value: Any, where: str) -> int:
    """``value`` as a token id: an integer (``__index__``), not a bool."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise OptionError(f"{where}: a token id is an integer, not {value!r} ({type(value).__name__})")
    try:
        return value.__index__()
    except (TypeError, ValueError) as err:  # e.g. a torch tensor of several elements
        raise OptionError(f"{where}: a token id is an integer, not {value!r:.80}") from err


_INT32 = np.dtype(np.int32)  # numpy's native int32 dtype (one object)
_BITMASK_HELP = ("an int32 numpy array or torch tensor of shape (words,) or (batch, words), "
                 "words = ceil(vocabulary size / 32)")


def _bitmask_row(bitmask: Any, index: Any, words: int, vocab_size: int) -> Any:
    """Row ``index`` of ``bitmask`` after checking it is what :meth:`Matcher.fill_bitmask` writes."""
    # str() of a numpy dtype takes ~2.6 us, half of a warm mask: the usual array is checked by identity
    native = type(bitmask) is np.ndarray and bitmask.dtype is _INT32
    if native and bitmask.ndim == 1 and len(bitmask) >= words:  # the usual buffer: nothing else to check
        return bitmask
    dtype = "int32" if native else str(getattr(bitmask, "dtype", ""))
    shape = tuple(getattr(bitmask, "shape", ()))
    if not (hasattr(bitmask, "ndim") and hasattr(bitmask, "dtype")):
        raise OptionError(f"fill_bitmask() needs {_BITMASK_HELP}; got {type(bitmask).__name__}")
    if dtype not in ("int32", "torch.int32"):
        raise OptionError(f"fill_bitmask() needs {_BITMASK_HELP}; got dtype {dtype}")
    if len(shape) not in (1, 2):
        raise OptionError(f"fill_bitmask() needs {_BITMASK_HELP} (words = {words} here); got shape {shape}")
    if shape[-1] < words:  # a bitmask sized for narrower logits than the compiled vocabulary
        raise OptionError(f"fill_bitmask(): the bitmask has shape {shape}, {shape[-1]} words (tokens up to "
                          f"{shape[-1] * 32}), but the grammar was compiled for {vocab_size} tokens, which "
                          f"need {words} words; allocate ceil({vocab_size} / 32) = {words} words per row (or "
                          "more: the extra columns are written as disallowed)")
    if len(shape) == 1:
        return bitmask
    if isinstance(index, (bool, np.bool_)) or not hasattr(index, "__index__") \
            or not -shape[0] <= index.__index__() < shape[0]:
        raise OptionError(f"fill_bitmask(): row index {index!r} is not an integer in range for a batch of {shape[0]}")
    return bitmask[index.__index__()]


def _show(b: int) -> str:
    return chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}"
