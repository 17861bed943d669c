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
also spelled greedily with the longest tokens whose bytes follow it, a shorter count that is
still achievable (each token's bytes are the path's).

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
from typing import TYPE_CHECKING

from structgen.engine.pda import ACCEPT
from structgen.engine.vocab import Vocabulary

if TYPE_CHECKING:
    from structgen.engine.matcher import Matcher

__all__ = ["LIMIT", "completion_tokens", "shortest_completion"]

#: Parse positions one search may visit before it gives up.
LIMIT = 20_000


def shortest_completion(matcher: "Matcher", limit: int = LIMIT) -> bytes | None:
    """The shortest bytes that complete ``matcher``'s output (``b""`` when it may end now), the
    smallest byte first among equals; ``None`` when none is found within ``limit`` positions
    (or the sequence already ended)."""
    start = matcher.stacks()
    if start is None:
        return None
    if ACCEPT in start:
        return b""
    machine = matcher.machine
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


def completion_tokens(matcher: "Matcher", limit: int = LIMIT) -> list[int] | None:
    """Token ids that spell :func:`shortest_completion` (the longest token that follows the
    path at each point), or ``None`` when there is no completion within ``limit`` or some byte of
    it has no token of its own."""
    path = shortest_completion(matcher, limit)
    if path is None:
        return None
    vocab = matcher.vocabulary
    by_bytes = _token_of(vocab)
    longest = max(map(len, by_bytes), default=0)
    out: list[int] = []
    at = 0
    while at < len(path):
        for k in range(min(longest, len(path) - at), 0, -1):
            token = by_bytes.get(path[at:at + k])
            if token is not None:
                out.append(token)
                at += k
                break
        else:
            return None  # a byte with no token of its own: the tokens cannot be counted
    return out


_TOKEN_OF: "weakref.WeakKeyDictionary[Vocabulary, dict[bytes, int]]" = weakref.WeakKeyDictionary()


def _token_of(vocab: Vocabulary) -> dict[bytes, int]:
    """A token id for each distinct token byte string (the lowest id), built once per vocabulary."""
    got = _TOKEN_OF.get(vocab)
    if got is None:
        index = vocab.index
        got = _TOKEN_OF[vocab] = {key: min(ids) for key, ids in zip(index.keys, index.ids)}
    return got


def _path(came: dict, end: object) -> bytes:
    out = bytearray()
    step = came[end]
    while step is not None:
        position, byte = step
        out.append(byte)
        step = came[position]
    return bytes(reversed(out))
