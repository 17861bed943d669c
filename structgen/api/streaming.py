"""Streams: a generation call's text as it is accepted, then its result.

``stream=True`` on any :class:`~structgen.Generator` method returns an iterator. The call runs
in a worker thread; each step's accepted tokens (a drafted run arrives whole, as one chunk)
are turned into text (bytes held back until they complete a UTF-8 character) and yielded as
``str``; the last item is the result the call would have returned. With ``reasoning=`` the
text comes as :class:`Chunk` strings labelled ``reasoning`` (the thinking, without its markers:
they join into the result's ``reasoning``) or ``answer`` (they join into its ``text``). A SQL retry yields a
:class:`~structgen.tasks.jobs.Retry` first: the text streamed so far was refused. A batch
yields ``(row, chunk)`` pairs, then the list of results. An error is raised where the
iteration is; leaving the loop early stops decoding at the next step.

Example
-------
>>> for item in gen.json({"type": "integer"}, "2 + 2?", stream=True):   # doctest: +SKIP
...     print(repr(item))
'4'
JsonResult(value=4, text='4', ...)
"""

from __future__ import annotations

import codecs
import queue
import threading
from typing import Any, Callable, Iterator

from structgen.engine.vocab import Vocabulary
from structgen.tasks.jobs import Listener, Retry, Thinking

__all__ = ["Chunk", "Retry", "TextChunks", "ThinkingChunks", "is_chunk", "stream"]


class Chunk(str):
    """Streamed text with its ``kind``: ``"reasoning"`` or ``"answer"`` (a ``str`` still)."""

    kind: str

    def __new__(cls, text: str, kind: str) -> "Chunk":
        got = super().__new__(cls, text)
        got.kind = kind
        return got

    def __repr__(self) -> str:
        return f"Chunk({str(self)!r}, {self.kind!r})"


class ThinkingChunks:
    """A thinking row's text split at its markers into labelled :class:`Chunk` pieces; the
    markers themselves are dropped, and text that may be the start of one waits.

    >>> t = ThinkingChunks("<t>", "</t>", opened=False)
    >>> t.push("<t>hm</"), t.push("t>42"), t.close()
    ([Chunk('hm', 'reasoning')], [Chunk('42', 'answer')], [])
    """

    def __init__(self, start: str, end: str, opened: bool) -> None:
        self.start, self.end = start, end
        self.phase = "reasoning" if opened else "before"
        self.pending = ""

    def push(self, text: str) -> "list[Chunk]":
        self.pending += text
        out: list[Chunk] = []
        if self.phase == "before":
            at = self.pending.find(self.start)
            if at < 0:
                return out
            self.pending, self.phase = self.pending[at + len(self.start):], "reasoning"
        if self.phase == "reasoning":
            at = self.pending.find(self.end)
            if at < 0:  # keep what may be the end marker's beginning
                keep = next((k for k in range(min(len(self.end) - 1, len(self.pending)), 0, -1)
                             if self.end.startswith(self.pending[-k:])), 0)
                ready, self.pending = self.pending[:len(self.pending) - keep], self.pending[len(self.pending) - keep:]
                return [Chunk(ready, "reasoning")] if ready else out
            if at:
                out.append(Chunk(self.pending[:at], "reasoning"))
            self.pending, self.phase = self.pending[at + len(self.end):], "answer"
        if self.pending:
            out.append(Chunk(self.pending, "answer"))
            self.pending = ""
        return out

    def close(self) -> "list[Chunk]":
        rest, self.pending = self.pending, ""
        return [Chunk(rest, "reasoning" if self.phase != "answer" else "answer")] if rest else []


class TextChunks:
    """One row's token ids to text, incrementally: bytes that end inside a UTF-8 character wait
    for the token that completes it.

    >>> vocab = Vocabulary([b"a", b"\\xc3", b"\\xa9", None], eos_ids=[3])
    >>> chunks = TextChunks(vocab)
    >>> chunks.push([0, 1]), chunks.push([2])
    ('a', 'é')
    """

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, tokens: list[int]) -> str:
        return self.decoder.decode(self.vocab.text_bytes(tokens))

    def close(self) -> str:
        return self.decoder.decode(b"", final=True)


def is_chunk(item: Any) -> bool:
    """Whether a stream's ``item`` is a chunk (text, a :class:`Retry`, a batch's ``(row,
    chunk)``) rather than its final result."""
    return isinstance(item, (str, Retry)) or (isinstance(item, tuple) and len(item) == 2
                                             and isinstance(item[0], int) and is_chunk(item[1]))


class _Closed(Exception):
    """The consumer left the stream: the worker stops decoding."""


def stream(run: Callable[[Listener], Any], vocab: Vocabulary, *, batch: bool = False) -> Iterator[Any]:
    """Run ``run(listener)`` in a worker thread and yield what the listener hears as text, then
    ``run``'s return value (see the module notes)."""
    events: "queue.Queue[tuple[str, Any, Any]]" = queue.Queue()
    closed = threading.Event()

    def listener(row: int, event: "list[int] | Retry | Thinking") -> None:
        if closed.is_set():
            raise _Closed
        events.put(("event", row, event))

    def work() -> None:
        try:
            events.put(("done", None, run(listener)))
        except _Closed:
            events.put(("closed", None, None))
        except BaseException as err:  # noqa: BLE001 -- handed to the consumer, raised there
            events.put(("error", None, err))

    def items() -> Iterator[Any]:
        worker = threading.Thread(target=work, name="structgen-stream", daemon=True)
        worker.start()
        texts: dict[int, TextChunks] = {}
        thinking: dict[int, ThinkingChunks] = {}

        def labelled(row: int, text: str, last: bool = False) -> list[Any]:
            split = thinking.get(row)
            if split is None:
                return [text] if text else []
            return split.push(text) + (split.close() if last else [])

        try:
            while True:
                kind, row, value = events.get()
                if kind == "event":
                    if isinstance(value, Thinking):
                        thinking[row] = ThinkingChunks(value.start, value.end, value.opened)
                        continue
                    if isinstance(value, Retry):
                        texts.pop(row, None)
                        outs: list[Any] = [value]
                    else:
                        outs = labelled(row, texts.setdefault(row, TextChunks(vocab)).push(value))
                    for out in outs:
                        yield (row, out) if batch else out
                elif kind == "error":
                    raise value
                else:
                    for row, text in texts.items():
                        for tail in labelled(row, text.close(), last=True):
                            yield (row, tail) if batch else tail
                    yield value
                    return
        finally:
            # Stop the worker at its next step and wait for it: the model is not safe to share
            # with a call that starts after this one returns.
            closed.set()
            worker.join()

    return items()
