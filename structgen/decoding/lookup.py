"""Prompt-lookup drafts under the grammar: values copied from the prompt, joined to the text the
grammar forces around them.

In the work structgen is for, values are mostly copied: the name in the document being
extracted, the city in the user's request, the column name in the DDL. :class:`PromptLookup`
finds where the row's output (and the draft so far) continues something in the prompt (or in the
output itself) and proposes what followed there:

* inside a value (the output ends in a word character), the longest suffix of the output, at
  least :data:`MIN_MATCH` bytes, that occurs in the prompt: ``"Ada`` finds ``name: Ada Lovelace``
  and proposes `` Lovelace``;
* right after a key (the output ends in punctuation holding ``:`` or ``=``, e.g. ``"age":``),
  the key's last word followed by a separator in the prompt: ``age: 36`` proposes ``36``.

The copy is cut where the grammar refuses it; where the prompt's value ends there (a newline, a
comma) and the grammar takes a closing quote, the quote is added; then the text the grammar
forces continues the same draft (``,"age":``), and the next value is looked up after it. The
whole text is tokenized once, canonically, and trimmed to what the matcher accepts, so no
position carries a grammar-illegal token. Tokens inside forced text are labelled ``"forced"``,
the others ``"lookup"``, so acceptance is learned per region.

Example
-------
>>> from structgen.decoding.lookup import find_copy
>>> find_copy(b'name: Ada Lovelace\\nage: 36\\n', b'{"name":"Ada')
b' Lovelace\\nage: 36\\n'
>>> find_copy(b'name: Ada Lovelace\\nage: 36\\n', b'{"name":"Ada Lovelace","age":')
b'36\\n'
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from structgen.decoding.config import DecodeConfig
from structgen.decoding.drafts import Draft, DraftEnds, extendable_end, spell
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary

__all__ = ["MIN_MATCH", "PromptLookup", "find_copy", "locate_copy"]

#: Shortest output suffix (bytes) looked up inside a value.
MIN_MATCH = 3
#: Longest output suffix looked up (longer ones are as good as this).
MAX_MATCH = 32
#: Most bytes copied at once.
MAX_COPY = 64
#: Most copied values and forced runs in one draft.
MAX_PIECES = 8
#: Where a copied value ends in the prompt, a closing quote may follow it.
_VALUE_ENDS = frozenset(b"\n\r,;|\t")
_WORD = re.compile(rb"[A-Za-z0-9_]+\Z")
_TRAILING_PUNCT = re.compile(rb"[^A-Za-z0-9_]*\Z")


def _is_word_byte(b: int) -> bool:
    return b >= 0x80 or chr(b).isalnum() or b == 0x5F


def find_copy(haystack: bytes, context: bytes, *, start: int = 0) -> bytes:
    """What follows, in ``haystack``, the end of ``context``: a suffix match inside a value, a
    key match after a key (see the module notes); b"" when nothing matches. Occurrences at or
    after ``start`` are preferred (extraction tends to follow the document's order), then the
    first one (a document is usually shown before the instructions that quote its keys)."""
    at = locate_copy(haystack, context, start=start)
    return haystack[at:at + MAX_COPY] if at >= 0 else b""


def locate_copy(haystack: bytes, context: bytes, *, start: int = 0) -> int:
    """Where in ``haystack`` the copy :func:`find_copy` returns starts, or -1."""
    if not context or not haystack:
        return -1
    if _is_word_byte(context[-1]):
        for n in range(min(MAX_MATCH, len(context)), MIN_MATCH - 1, -1):
            at = haystack.find(context[-n:], start)
            if at < 0:
                at = haystack.find(context[-n:])
            if at >= 0 and at + n < len(haystack):
                return at + n
        return -1
    punct = _TRAILING_PUNCT.search(context)
    assert punct is not None  # it matches the empty string at the end at least
    if b":" not in punct.group() and b"=" not in punct.group():
        return -1
    word = _WORD.search(context[:punct.start()])
    if word is None or len(word.group()) < 2:
        return -1
    pattern = re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(word.group()) + rb"[\"']?[ \t]*[:=][ \t]*")
    matches = [m for m in pattern.finditer(haystack) if m.end() < len(haystack)]
    if not matches:
        return -1
    later = [m for m in matches if m.start() >= start]
    return (later[0] if later else matches[0]).end()


class PromptLookup:
    """:class:`~structgen.decoding.drafts.DraftSource` of values copied from the prompt, joined
    with the grammar's forced text (see the module notes). Call :meth:`for_row` with each row's
    prompt; the row's source keeps where in the prompt the last copy ended."""

    name = "lookup"
    cost_per_token = 0.0

    def __init__(self, tokenizer: Any, vocab: Vocabulary, ends: DraftEnds | None = None,
                 prompt_ids: Sequence[int] = ()) -> None:
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.ends = ends if ends is not None else DraftEnds()
        self.haystack = vocab.token_bytes(prompt_ids)
        #: where in the prompt the last copy the model kept ended: later occurrences are preferred
        self.cursor = 0
        self._copies: list[tuple[int, int]] = []  # the last draft's copies: (byte in the draft, prompt offset)
        quote = spell(tokenizer, vocab, b'"', 1)
        self._quote = quote[0] if quote and vocab.tokens[quote[0]] == b'"' else None

    def for_row(self, prompt_ids: Sequence[int], config: DecodeConfig | None = None) -> "PromptLookup":
        return PromptLookup(self.tokenizer, self.vocab, self.ends, prompt_ids)

    def propose(self, matcher: Matcher, tokens: Sequence[int], limit: int) -> Draft:
        if limit <= 0:
            return Draft((), self.name)
        output = self.vocab.token_bytes(tokens)
        text, spans, tail = self._compose(matcher, output, limit)
        if not any(label == self.name for _, label in spans):
            return Draft((), self.name)  # forced text alone is the forced source's draft
        draft = spell(self.tokenizer, self.vocab, text, limit, self.ends.prefer)
        draft = draft[:matcher.validate(draft)]
        starts, pos = [], 0
        for tid in draft:
            starts.append(pos)
            pos += len(self.vocab.tokens[tid] or b"")
        # Where the draft ends in text the grammar fixed (forced text, a closing quote), the
        # model may join its last token to what follows: drop the tokens a longer one extends.
        # Inside a copied value every token extends, and the copy is the guess.
        keep = len(draft)
        while keep and starts[keep - 1] >= tail and extendable_end(matcher, self.vocab, draft[:keep]):
            keep -= 1
        draft = self.ends.trim(draft[:keep])
        labels = tuple(_label_at(spans, start) for start in starts[:len(draft)])
        if self.name not in labels:
            return Draft((), self.name)
        return Draft(tuple(draft), self.name, labels)

    def record(self, draft: Draft, kept: int, choice: int | None = None) -> None:
        self.ends.record(draft.tokens, kept)
        if kept < len(draft):
            self.ends.record_choice(self.vocab, draft.tokens[kept], choice)
        kept_bytes = len(self.vocab.token_bytes(draft.tokens[:kept]))
        for at, offset in self._copies:
            if at < kept_bytes:  # some of this copy was kept: the document is read from there on
                self.cursor = offset + (kept_bytes - at)

    def _compose(self, matcher: Matcher, output: bytes, limit: int) -> tuple[bytes, list[tuple[int, str]], int]:
        """The draft's text, where each piece starts with its label (forced runs and copied
        values in turn, each advanced through a probe so the next one starts where it ends), and
        where its fixed tail starts (the last forced run or closing quote; the text's length
        when it ends inside a copy)."""
        probe = matcher.fork()
        text = b""
        spans: list[tuple[int, str]] = []
        self._copies = []
        copied_last = False
        tail = 0
        for _ in range(MAX_PIECES):
            forced = probe.forced_text().encode("utf-8")
            if forced:
                piece, label = forced, "forced"
            elif copied_last:
                break  # one copy per value: what ends a value is the model's choice
            else:
                at = locate_copy(self.haystack, output + text, start=self.cursor)
                if at < 0:
                    break
                piece, label = _line(self.haystack[at:at + MAX_COPY]), self.name
                self._copies.append((len(text), at))
            accepted, whole = _advance(probe, spell(self.tokenizer, self.vocab, piece, limit, self.ends.prefer),
                                       self.vocab)
            closed = False
            if label == self.name:
                rest = piece[len(accepted):]
                if (self._quote is not None and (not rest or rest[0] in _VALUE_ENDS)
                        and probe.advance(self._quote)):
                    accepted += b'"'
                    whole = closed = True
            if not accepted:
                break
            spans.append((len(text), label))
            tail = len(text) if label != self.name else len(text) + len(accepted) - (1 if closed else 0)
            text += accepted
            copied_last = label == self.name
            if not whole or len(text) >= limit * 8:
                break
        return text, spans, tail


def _line(piece: bytes) -> bytes:
    """``piece`` up to and including its first line break: a copy ends with its line."""
    ends = [i for i in (piece.find(b"\n"), piece.find(b"\r")) if i >= 0]
    return piece[:min(ends) + 1] if ends else piece


def _advance(probe: Matcher, tokens: list[int], vocab: Vocabulary) -> tuple[bytes, bool]:
    """Advance ``probe`` along ``tokens`` while it accepts them; the bytes accepted, and whether
    all were."""
    accepted = b""
    for tid in tokens:
        if not probe.advance(tid):
            return accepted, False
        accepted += vocab.tokens[tid] or b""
    return accepted, True


def _label_at(spans: list[tuple[int, str]], pos: int) -> str:
    label = spans[0][1] if spans else ""
    for start, name in spans:
        if start > pos:
            break
        label = name
    return label
