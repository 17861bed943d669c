"""The shortest way to finish: from a parse position, the fewest bytes (and tokens) that make the
output complete.

This is the groundwork of budget-aware completion (issue 24): knowing, at every step, how many
tokens the shortest complete continuation needs, decoding can keep a complete value within
``max_new_tokens``. The search runs on the stack machine itself
(:class:`~structgen.engine.pda.StackMachine`): a breadth-first search over parse positions (closed
sets of stacks), one byte per edge, so counters, unordered members, lexer lookaheads and
recursion count exactly as they do when walking. Positions are interned, so string contents or
digits that lead back to one position are explored once; the search stops at ``limit``
positions (``None``: not found within it).

In tokens: every byte of both families structgen reads is a token of its own (byte-level BPE's
256 bytes, SentencePiece's ``<0xNN>``), so the byte count bounds the tokens needed; the path is
also spelled in the fewest tokens whose bytes make it up (:func:`spell`), a smaller count that is
still achievable. It is an upper bound on the fewest tokens of any completion (a longer byte
path might take fewer tokens), exact on the small grammars the tests search by brute force.

Example
-------
>>> from structgen.engine.vocab import Vocabulary
>>> from structgen.engine.compiler import Compiler
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [b'":', None], eos_ids=[257])
>>> m = Compiler(vocab).json_schema({"type": "object", "properties": {"a": {"type": "integer"}},
...                                  "required": ["a"]}, whitespace="compact", strict=True).matcher()
>>> m.advance(ord("{")), shortest_completion(m)
(True, b'"a":0}')
>>> len(completion_tokens(m))     # '"', 'a', '":' (one token), '0', '}'
5
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Protocol

from structgen.engine.pda import ACCEPT, StackMachine, StackSet
from structgen.engine.vocab import Vocabulary


class Position(Protocol):
    """What the searches read from a matcher (a protocol, so the runtime below the matcher can
    use this module without importing it back)."""

    machine: StackMachine
    vocabulary: Vocabulary

    def stacks(self) -> StackSet | None: ...

__all__ = ["LIMIT", "completion_tokens", "shortest_completion", "shortest_path", "spell"]

#: Parse positions one search may visit before it gives up.
LIMIT = 20_000


def shortest_completion(matcher: Position, limit: int = LIMIT) -> bytes | None:
    """The shortest bytes that complete ``matcher``'s output (``b""`` when it may end now), the
    smallest byte first among equals; ``None`` when none is found within ``limit`` positions
    (or the sequence already ended)."""
    start = matcher.stacks()
    return None if start is None else shortest_path(matcher.machine, start, limit)


def completion_tokens(matcher: Position, limit: int = LIMIT) -> list[int] | None:
    """Token ids that spell :func:`shortest_completion` in the fewest tokens (:func:`spell`), or ``None`` when there is no completion within ``limit`` or some byte of
    it has no token of its own."""
    path = shortest_completion(matcher, limit)
    return None if path is None else spell(matcher.vocabulary, path)


def shortest_path(machine: StackMachine, start: StackSet, limit: int = LIMIT) -> bytes | None:
    """:func:`shortest_completion` from a parse position of ``machine``.

    Breadth-first with the bytes of each position in increasing order, so the path found is the
    smallest of the shortest ones; hence the path from any position along it is the rest of it
    (a shorter or smaller one from there would give a shorter or smaller one from ``start``),
    which keeps :meth:`~structgen.engine.matcher.Matcher.completion_length` falling by one
    along its own path.
    """
    if ACCEPT in start:
        return b""
    came: dict = {start: None}
    queue = deque([start])
    while queue and len(came) <= limit:
        position = queue.popleft()
        for byte in sorted(machine.next_bytes(position)):
            nxt = machine.step_set(position, byte)
            if not nxt or nxt in came:
                continue
            came[nxt] = (position, byte)
            if ACCEPT in nxt:
                return _path(came, nxt)
            queue.append(nxt)
    return None


def spell(vocab: Vocabulary, path: bytes) -> list[int] | None:
    """``path`` in the fewest tokens (the longest first token among the fewest), or ``None`` when
    some byte has no token of its own. Any fewest spelling minus its first token is a fewest
    spelling of the rest, which keeps the count falling by one along it.

    >>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [b"ab", b"bcd"], eos_ids=[0])
    >>> [vocab.tokens[t] for t in spell(vocab, b"abcd")]    # the longest first ('ab') takes 3
    [b'a', b'bcd']
    """
    by_bytes, longest = _token_of(vocab)
    n = len(path)
    fewest: list[int | None] = [None] * n + [0]  # fewest[i]: tokens to spell path[i:]
    first: list[int] = [0] * n
    for i in range(n - 1, -1, -1):
        for k in range(min(longest, n - i), 0, -1):
            rest = fewest[i + k]
            if rest is not None and (path[i:i + k] in by_bytes) and (fewest[i] is None or rest + 1 < fewest[i]):
                fewest[i], first[i] = rest + 1, k
    if fewest[0] is None:
        return None  # a byte with no token of its own: the tokens cannot be counted
    out, at = [], 0
    while at < n:
        out.append(by_bytes[path[at:at + first[at]]])
        at += first[at]
    return out


_TOKEN_OF: "weakref.WeakKeyDictionary[Vocabulary, tuple[dict[bytes, int], int]]" = weakref.WeakKeyDictionary()


def _token_of(vocab: Vocabulary) -> tuple[dict[bytes, int], int]:
    """A token id for each distinct token byte string (the lowest id), and the longest one's
    length; built once per vocabulary."""
    got = _TOKEN_OF.get(vocab)
    if got is None:
        index = vocab.index
        by_bytes = {key: min(ids) for key, ids in zip(index.keys, index.ids)}
        got = _TOKEN_OF[vocab] = (by_bytes, max(map(len, by_bytes), default=0))
    return got


def _path(came: dict, end: object) -> bytes:
    out = bytearray()
    step = came[end]
    while step is not None:
        position, byte = step
        out.append(byte)
        step = came[position]
    return bytes(reversed(out))
