"""Reasoning before the answer: the thinking markers, the grammar around a task's, the split.

With ``reasoning=`` a task's grammar ``G`` becomes ``start thinking end G``: the thinking is free
text that never holds the end marker (so it is written once), the start marker is left out when
the prompt already opened the thinking (templates that end the generation prompt with
``<think>``), and a ``thinking_budget`` forces the end marker after that many tokens of thinking
(:class:`~structgen.decoding.thinking.ThinkingMatcher`). The task sees only the answer's tokens;
the result's ``reasoning`` holds the thinking.

Markers: ``reasoning=(start, end)`` names them; ``True`` reads them from the chat template's
source (:data:`KNOWN_MARKERS`: ``<think>``/``</think>`` of Qwen 3, DeepSeek-R1, SmolLM3, ...;
harmony's analysis channel; Gemma 4's thought channel; ``[THINK]``; Cohere's) or, for tool calls
in a native format, from the format's family. Markers that are special tokens of the tokenizer
are written with those tokens.

Example
-------
>>> r = Generator().json({"type": "integer"}, "2 + 2?", reasoning=("<think>", "</think>"),
...                      thinking_budget=16)                                   # doctest: +SKIP
>>> r.value, r.reasoning is not None                                           # doctest: +SKIP
(4, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from structgen.core.ir import Grammar, Lit, Ref, seq
from structgen.decoding.thinking import ThinkingMatcher
from structgen.errors import OptionError
from structgen.frontends.structural_tag import free_text

if TYPE_CHECKING:
    from structgen.tasks.context import ModelContext

__all__ = ["KNOWN_MARKERS", "ThinkingGrammar", "prompt_opened", "spelled", "thinking_markers", "with_thinking",
           "split_thinking"]

#: Thinking markers read from chat templates: (what the template's source holds, (start, end)).
KNOWN_MARKERS: tuple[tuple[tuple[str, ...], tuple[str, str]], ...] = (
    (("<think>", "</think>"), ("<think>", "</think>")),  # Qwen 3, DeepSeek-R1, SmolLM3, GLM, MiniMax, Kimi
    # gpt-oss (harmony): the analysis channel, then the final channel's message is the answer
    (("<|channel|>analysis", "<|channel|>final"),
     ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>")),
    (("<|channel>", "<channel|>"), ("<|channel>thought\n", "<channel|>")),  # Gemma 4 (vLLM's gemma4 parser)
    (("[THINK]", "[/THINK]"), ("[THINK]", "[/THINK]")),  # Magistral (mistral-common's think tokens)
    (("<|START_THINKING|>", "<|END_THINKING|>"), ("<|START_THINKING|>", "<|END_THINKING|>")),  # Cohere Command
)


def thinking_markers(tokenizer: Any, reasoning: "bool | tuple[str, str]") -> tuple[str, str]:
    """The (start, end) markers ``reasoning`` means for this tokenizer.

    >>> thinking_markers(None, ("<r>", "</r>"))
    ('<r>', '</r>')
    """
    if isinstance(reasoning, tuple):
        return reasoning
    source = getattr(tokenizer, "chat_template", None)
    source = source if isinstance(source, str) else ""
    for probes, markers in KNOWN_MARKERS:
        if all(p in source for p in probes):
            return markers
    raise OptionError("reasoning=True reads the thinking markers from the chat template (or a tool-call format's "
                      "family), and this tokenizer's has none; pass them: reasoning=('<think>', '</think>')")


class ThinkingGrammar:
    """A compiled grammar behind a thinking block: ``[start] thinking end G``, whose matchers
    keep the thinking budget (:class:`~structgen.decoding.thinking.ThinkingMatcher`). It stands
    where a compiled grammar does (``.matcher()``, ``.vocabulary``), e.g. in
    :class:`structgen.LogitsProcessor`.

    ``opened``: the prompt already wrote the start marker (the output starts inside the thinking).
    ``end_ids``: the end marker's canonical tokens (default: the longest tokens that spell it).
    """

    def __init__(self, compiled: Any, markers: tuple[str, str], *, opened: bool = False,
                 budget: int | None = None, end_ids: "list[int] | None" = None, compiler: Any = None) -> None:
        from structgen.engine.compiler import compiler_for

        start, end = markers
        g = compiled.grammar
        head = [] if opened else [Lit(start.encode())]
        wrapped = Grammar((("thinking'", seq(*head, free_text((end,)), Lit(end.encode()), Ref(g.start))), *g.rules),
                          "thinking'")
        compiler = compiler or compiler_for(compiled.vocabulary)
        # markers that are special tokens of the tokenizer (Qwen 3's <think>) match those tokens
        marked = compiled.vocabulary.marked_ids | compiler.vocabulary.markers_in(markers)
        self.compiled = compiler.marked(marked).grammar(wrapped, source=compiled.source)
        self.vocabulary = self.compiled.vocabulary
        self.markers, self.opened, self.budget = (start.encode(), end.encode()), opened, budget
        self.end_ids = list(end_ids) if end_ids is not None else spelled(self.vocabulary, end.encode())
        if self.vocabulary.token_bytes(self.end_ids) != end.encode():
            raise OptionError(f"the end marker {end!r} is not spelled by its tokens {self.end_ids} in this vocabulary")

    def matcher(self) -> ThinkingMatcher:
        start, end = self.markers
        return ThinkingMatcher(self.compiled.matcher(), start=None if self.opened else start, end=end,
                               end_ids=self.end_ids, budget=self.budget)


def prompt_opened(vocabulary: Any, prompt_ids: Any, start: str) -> bool:
    """Whether the prompt already wrote the start marker (a template whose generation prompt
    opens the thinking), its special tokens read as their text.

    >>> from structgen.engine.vocab import Vocabulary
    >>> prompt_opened(Vocabulary([b"a", None], eos_ids=[], specials={1: b"<t>"}), [0, 1], "<t>")
    True
    """
    ids = [t for t in prompt_ids if 0 <= t < vocabulary.size]
    return vocabulary.text_bytes(ids).rstrip().endswith(start.encode())


def spelled(vocabulary: Any, data: bytes) -> list[int]:
    """``data`` spelled in the longest tokens of ``vocabulary`` (a spelling the grammar allows,
    when no tokenizer gives the canonical one).

    >>> from structgen.engine.vocab import Vocabulary
    >>> spelled(Vocabulary([b"<", b"/", b"t", b">", b"</t", None], eos_ids=[5]), b"</t>")
    [4, 3]
    """
    table: dict[bytes, int] = {}
    for tid in range(vocabulary.size):
        piece = vocabulary.token_bytes([tid])
        if piece and piece not in table:
            table[piece] = tid
    longest = max(map(len, table), default=1)
    out, at = [], 0
    while at < len(data):
        for size in range(min(longest, len(data) - at), 0, -1):
            tid = table.get(data[at:at + size])
            if tid is not None:
                out.append(tid)
                at += size
                break
        else:
            raise OptionError(f"no token of the vocabulary spells {data[at:at + 1]!r} of the marker {data!r}")
    return out


def with_thinking(context: "ModelContext", request: Any) -> tuple[Any, tuple[bytes, bytes, bool, Any]]:
    """``request`` (a :class:`~structgen.tasks.jobs.Decode`) with its grammar behind the thinking
    (and its budget); the markers, whether the prompt opened the thinking and the vocabulary
    the markers are spelled in, for :func:`split_thinking`."""
    from dataclasses import replace

    config = request.config
    inner = request.matcher
    if inner.compiled is None or inner.token_ids:
        raise OptionError("reasoning= is not supported by this task (it decodes from a matcher already under way)")
    start, end = thinking_markers(context.tokenizer, config.reasoning)
    opened = prompt_opened(context.vocabulary, request.prompt_ids, start)
    thinking = ThinkingGrammar(inner.compiled, (start, end), opened=opened, budget=config.thinking_budget,
                               end_ids=list(context.tokenizer.encode(end, add_special_tokens=False)),
                               compiler=context.compiler)
    return replace(request, matcher=thinking.matcher()), (start.encode(), end.encode(), opened, thinking.vocabulary)


def split_thinking(context: "ModelContext", tokens: list[int],
                   markers: tuple[bytes, bytes, bool, Any]) -> tuple[str, list[int]]:
    """(the thinking's text, the answer's tokens) of an output.

    Where one token holds the end of the end marker and the start of the answer, the answer's
    part of it is encoded again (its tokens then differ from the model's for that token only).
    """
    start, end, opened, vocab = markers
    data = vocab.token_bytes(tokens)
    begin = 0 if opened else data.index(start) + len(start)
    stop = data.index(end, begin)
    answer_from = stop + len(end)
    thinking = data[begin:stop].decode("utf-8", errors="replace")
    size = 0
    for k, t in enumerate(tokens):
        if size == answer_from:
            return thinking, list(tokens[k:])
        size += len(vocab.token_bytes([t]))
        if size > answer_from:  # this token crosses into the answer
            tail = data[answer_from:size].decode("utf-8", errors="replace")
            return thinking, list(context.tokenizer.encode(tail, add_special_tokens=False)) + list(tokens[k + 1:])
    return thinking, []
