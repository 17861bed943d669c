"""Streams: a generation call's text as it is accepted, then its result.

``stream=True`` on any :class:`~structgen.Generator` method returns an iterator. The call runs
in a worker thread; each step's accepted tokens (a drafted run arrives whole, as one chunk)
are turned into text (bytes held back until they complete a UTF-8 character) and yielded as
``str``; the last item is the result the call would have returned. A SQL retry yields a
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
from structgen.tasks.jobs import Listener, Retry

__all__ = ["Retry", "TextChunks", "is_chunk", "stream"]


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

    def listener(row: int, event: "list[int] | Retry") -> None:
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
        try:
            while True:
                kind, row, value = events.get()
                if kind == "event":
                    if isinstance(value, Retry):
                        texts.pop(row, None)
                        out: Any = value
                    else:
                        out = texts.setdefault(row, TextChunks(vocab)).push(value)
                        if not out:
                            continue
                    yield (row, out) if batch else out
                elif kind == "error":
                    raise value
                else:
                    for row, text in texts.items():
                        tail = text.close()
                        if tail:
                            yield (row, tail) if batch else tail
                    yield value
                    return
        finally:
            # Stop the worker at its next step and wait for it: the model is not safe to share
            # with a call that starts after this one returns.
            closed.set()
            worker.join()

    return items()
