"""Draft sources: who proposes the tokens a pass verifies, and the grammar-forced-text one.

A :class:`DraftSource` looks at a row (its matcher, past the tokens so far) and proposes a
:class:`Draft`, token ids labelled with the source's name; the loop trims it to what the
pass-cost curve pays for, verifies it losslessly and tells the source how many tokens were
kept (:meth:`DraftSource.record`). Statistics are kept per source name
(:attr:`~structgen.decoding.stats.GenerationStats.by_source`).

:class:`ForcedText` drafts the text the grammar forces (keys, punctuation, closing brackets),
tokenized canonically.

Example
-------
>>> from structgen.decoding.drafts import Draft, DraftEnds
>>> Draft((5, 7), "forced")
Draft(tokens=(5, 7), source='forced')
>>> DraftEnds().trim([5, 7])
[5, 7]
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from structgen.decoding.config import MAX_DRAFT
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary, prefix_range_end

__all__ = ["Draft", "DraftEnds", "DraftSource", "ForcedText", "forced_draft"]


@dataclass(frozen=True)
class Draft:
    """Token ids proposed for the next positions of a row, and the name of their source."""

    tokens: tuple[int, ...]
    source: str

    def __len__(self) -> int:
        return len(self.tokens)

    def cut(self, length: int) -> "Draft":
        """The first ``length`` tokens, same source."""
        return self if length >= len(self.tokens) else Draft(self.tokens[:length], self.source)


class DraftSource(Protocol):
    """Proposes drafts for a row; learns from how many of its tokens were kept."""

    #: the label of its drafts in the statistics
    name: str

    def propose(self, matcher: Matcher, tokens: Sequence[int], limit: int) -> Draft:
        """At most ``limit`` tokens to follow ``tokens`` (the row's output so far; ``matcher``
        is past them and must be left there); an empty draft when there is nothing to propose."""

    def record(self, draft: Draft, kept: int) -> None:
        """``draft`` (as verified, perhaps shorter than proposed) kept its first ``kept`` tokens."""


def forced_draft(matcher: Matcher, tokenizer: Any, vocab: Vocabulary, limit: int = MAX_DRAFT) -> list[int]:
    """Canonical tokens of the text the grammar forces from here (possibly empty).

    The forced text is tokenized on its own; tokens are kept while their bytes spell it and the
    matcher accepts them, and trailing tokens that a longer legal token could extend are dropped
    (the model, seeing what follows, would likely pick the longer one).
    """
    text = matcher.forced_text()
    if not text or limit <= 0:
        return []
    data = text.encode("utf-8")
    draft: list[int] = []
    pos = 0
    for tid in tokenizer.encode(text, add_special_tokens=False):
        piece = vocab.tokens[tid] if 0 <= tid < vocab.size else None
        if not piece or data[pos:pos + len(piece)] != piece:
            break
        draft.append(tid)
        pos += len(piece)
        if len(draft) == limit:
            break
    draft = draft[:matcher.validate(draft)]
    while draft and _extendable(matcher, vocab, draft):
        draft.pop()
    return draft


def _extendable(matcher: Matcher, vocab: Vocabulary, draft: list[int]) -> bool:
    """Whether some legal token after ``draft[:-1]`` starts with ``draft[-1]``'s bytes and is longer."""
    probe = matcher.fork()
    for tid in draft[:-1]:
        probe.advance(tid)
    words = probe.mask_words()
    keys, ids = vocab.index.keys, vocab.index.ids
    piece = vocab.tokens[draft[-1]]
    lo = bisect_left(keys, piece)
    hi = prefix_range_end(keys, piece, lo, len(keys))
    for k in range(lo, hi):
        if len(keys[k]) > len(piece) and any(words[t >> 5] >> (t & 31) & 1 for t in ids[k]):
            return True
    return False


class DraftEnds:
    """How often the model refused each token when it ended a draft, learned as it decodes.

    A draft's last token meets free text: the canonical split there is often not the model's
    (SmolLM2 writes ``":`` then ``"New`` rather than ``":"`` then ``New``). A token refused in
    most of at least ``min_seen`` such positions is no longer proposed last; the pass then ends
    one token earlier and the model's own token comes as the bonus, at no loss.
    """

    def __init__(self, min_seen: int = 3, max_refused: float = 0.5) -> None:
        self.min_seen = min_seen
        self.max_refused = max_refused
        self.seen: dict[int, list[int]] = {}  # token -> [times proposed last, times refused]

    def trim(self, draft: list[int]) -> list[int]:
        if draft:
            seen, refused = self.seen.get(draft[-1], (0, 0))
            if seen >= self.min_seen and refused > self.max_refused * seen:
                return draft[:-1]
        return draft

    def record(self, draft: Sequence[int], kept: int) -> None:
        if draft and kept >= len(draft) - 1:  # the last token was judged
            entry = self.seen.setdefault(draft[-1], [0, 0])
            entry[0] += 1
            entry[1] += kept < len(draft)


class ForcedText:
    """:class:`DraftSource` of the text the grammar forces, tokenized canonically
    (:func:`forced_draft`), its last token dropped where the model keeps refusing it
    (:class:`DraftEnds`, shared across generations on one model)."""

    name = "forced"

    def __init__(self, tokenizer: Any, vocab: Vocabulary, ends: DraftEnds | None = None) -> None:
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.ends = ends if ends is not None else DraftEnds()

    def propose(self, matcher: Matcher, tokens: Sequence[int], limit: int) -> Draft:
        draft = self.ends.trim(forced_draft(matcher, self.tokenizer, self.vocab, limit))
        return Draft(tuple(draft), self.name)

    def record(self, draft: Draft, kept: int) -> None:
        self.ends.record(draft.tokens, kept)
