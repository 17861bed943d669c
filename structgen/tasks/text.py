"""Text in a grammar's or a regex's language: a compiled grammar and a prompt in, text out.

Decoding ends when the model ends it where the grammar may end, or when the grammar allows
nothing more.

Example
-------
>>> from structgen.tasks.text import generate_text_with                        # doctest: +SKIP
>>> from structgen.decoding.config import DecodeConfig                         # doctest: +SKIP
>>> generate_text_with(ctx, ctx.compiler.regex("yes|no"), "Is water wet?",
...                    DecodeConfig()).text                                    # doctest: +SKIP
'yes'
"""

from __future__ import annotations

from typing import Any

from structgen.decoding.config import DecodeConfig
from structgen.errors import OptionError
from structgen.tasks.context import ModelContext
from structgen.tasks.jobs import Decode, Job, run_job
from structgen.tasks.results import TextResult

__all__ = ["generate_text_with", "text_job"]


def generate_text_with(context: ModelContext, compiled: Any, prompt: str, config: DecodeConfig, *,
                       raw: bool = False) -> TextResult:
    """:meth:`structgen.Generator.text` on ``context``: ``prompt`` is the user's turn of the chat
    template (``raw=True``: encoded as it is)."""
    return run_job(context, text_job(context, compiled, prompt, config, raw=raw))


def text_job(context: ModelContext, compiled: Any, prompt: str, config: DecodeConfig, *,
             raw: bool = False) -> Job[TextResult]:
    """:func:`generate_text_with` as a job (:mod:`structgen.tasks.jobs`), to run in a batch."""
    if raw and not isinstance(prompt, str):
        raise OptionError("raw=True encodes a prompt string as it is; chat messages need the chat template")
    ids = context.encode(prompt) if raw else context.chat_ids(prompt, thinking=bool(config.reasoning))
    tokens, finish, stats = yield Decode(compiled.matcher(), ids, config)
    return TextResult(text=context.text_of(tokens), token_ids=tokens, finish_reason=finish, stats=stats)
