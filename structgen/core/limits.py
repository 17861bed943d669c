"""One size policy for every door: the largest input structgen reads, however it arrives.

A schema, grammar, regex, tool list or serving constraint is refused past
:data:`MAX_INPUT_CHARS` whether it comes as text, a dict (measured as its JSON text), a file,
stdin or an engine's request; a prompt read from a file or stdin past :data:`MAX_PROMPT_BYTES`;
a prompt's text before it is tokenized when its UTF-8 bytes could not fit the model's context
even at the longest token (:func:`check_prompt_bytes`). Nesting is bounded by
:data:`~structgen.core.depth.MAX_NESTING`, work by the compile budget
(:mod:`structgen.core.budget`), which also charges a unit per character of pattern, regex and
grammar text. Each refusal is an :class:`~structgen.errors.InputTooLargeError` (or a
:class:`~structgen.errors.ContextLengthError` for a prompt) naming the input, its size and the
limit.

Example
-------
>>> check_input_size("x" * 10, "the schema")
>>> try:
...     check_input_size("x" * (MAX_INPUT_CHARS + 1), "the schema")
... except InputTooLargeError as err:
...     print(err)
the schema is 4,000,001 characters; at most 4,000,000 are read (structgen.core.limits.MAX_INPUT_CHARS)
"""

from __future__ import annotations

from structgen.core.depth import MAX_NESTING
from structgen.errors import ContextLengthError, InputTooLargeError

__all__ = ["MAX_INPUT_CHARS", "MAX_NESTING", "MAX_PROMPT_BYTES", "check_input_size", "check_prompt_bytes"]

#: Characters of one input's text (a JSON value: its JSON text): a large real schema is ~1 MB.
MAX_INPUT_CHARS = 4_000_000
#: Bytes of a prompt read from a file or stdin (what is read; the tokenizer sees less, below).
MAX_PROMPT_BYTES = 64 << 20


def check_input_size(text: str, what: str) -> None:
    """Raise :class:`InputTooLargeError` when ``text`` is over :data:`MAX_INPUT_CHARS`."""
    if len(text) > MAX_INPUT_CHARS:
        raise InputTooLargeError(f"{what} is {len(text):,} characters; at most {MAX_INPUT_CHARS:,} are read "
                                 "(structgen.core.limits.MAX_INPUT_CHARS)")


def check_prompt_bytes(size: int, *, positions: int | None, longest_token: int) -> None:
    """Raise :class:`ContextLengthError` when a prompt of ``size`` UTF-8 bytes cannot fit
    ``positions`` tokens even if every token spelt ``longest_token`` bytes: refused before the
    tokenizer reads it (a 10 MB prompt took 11.7 s and 1.7 GB to tokenize, then failed the
    context check). ``positions`` None: the model states no context, nothing is checked."""
    if positions and size > positions * max(longest_token, 1):
        raise ContextLengthError(f"the prompt is {size:,} bytes: more than the model's context of {positions:,} "
                                 f"tokens can hold even at {longest_token} bytes a token (its longest); shorten it")
