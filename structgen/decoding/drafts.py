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
Draft(tokens=(5, 7), source='forced', labels=(), q=())
>>> DraftEnds().trim([5, 7])
[5, 7]
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from structgen.decoding.config import MAX_DRAFT
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary, prefix_range_end

__all__ = ["Draft", "DraftEnds", "DraftSource", "ForcedText", "extendable_end", "forced_draft", "spell", "trim_extendable"]


@dataclass(frozen=True)
class Draft:
    """Token ids proposed for the next positions of a row, and the name of their source.

    A composed draft crosses regions: ``labels`` names, per token, whose guess it is (the text
    the grammar forces inside a prompt-lookup draft is ``"forced"``); empty means every token is
    ``source``'s. ``q`` holds, per token, the distribution a draft model sampled it from (a
    probability tensor over the vocabulary), or None for a point mass; empty means all point
    masses. Acceptance is learned and reported per label.
    """

    tokens: tuple[int, ...]
    source: str
    labels: tuple[str, ...] = ()
    q: tuple[Any, ...] = ()

    def __len__(self) -> int:
        return len(self.tokens)

    def label(self, i: int) -> str:
        """Whose guess token ``i`` is."""
        return self.labels[i] if self.labels else self.source

    def distribution(self, i: int) -> Any:
        """The draft distribution token ``i`` was sampled from, or None for a point mass."""
        return self.q[i] if self.q else None

    def cut(self, length: int) -> "Draft":
        """The first ``length`` tokens, same source."""
        if length >= len(self.tokens):
            return self
        return Draft(self.tokens[:length], self.source, self.labels[:length], self.q[:length])


class DraftSource(Protocol):
    """Proposes drafts for a row; learns from how many of its tokens were kept.

    A source that keeps state per row (the prompt it copies from, a draft model's cache)
    also has ``for_row(prompt_ids, config)`` returning the source for one row; the loop calls it
    once per row before decoding. ``cost_per_token`` (optional, default 0) is what proposing
    one token costs, relative to a 1-position pass of the model: the controller runs a costly
    source only where its expected payoff beats the cheap ones.
    """

    #: the label of its drafts in the statistics
    name: str

    def propose(self, matcher: Matcher, tokens: Sequence[int], limit: int) -> Draft:
        """At most ``limit`` tokens to follow ``tokens`` (the row's output so far; ``matcher``
        is past them and must be left there); an empty draft when there is nothing to propose."""

    def record(self, draft: Draft, kept: int, choice: int | None = None) -> None:
        """``draft`` (as verified, perhaps shorter than proposed) kept its first ``kept`` tokens;
        ``choice`` is the model's own token at the first refused position (None: all kept)."""


def spell(tokenizer: Any, vocab: Vocabulary, data: bytes, limit: int = MAX_DRAFT,
          prefer: Mapping[int, int] | None = None) -> list[int]:
    """Canonical tokens of ``data`` (tokenized on its own), kept while their bytes spell it;
    at most ``limit``. An incomplete UTF-8 character at the end is left out.

    ``prefer`` maps a canonical token to the one the model was seen to write in its place (a
    shorter or longer token of the same text, :attr:`DraftEnds.prefer`): where the text
    allows it, that token is used and the rest is tokenized again after it.
    """
    data = data.decode("utf-8", "ignore").encode("utf-8")
    tokens: list[int] = []
    pos = 0
    for _ in range(8):  # at most this many re-tokenizations after a preferred token
        if pos >= len(data) or len(tokens) >= limit:
            break
        switched = False
        for tid in tokenizer.encode(data[pos:].decode("utf-8", "ignore"), add_special_tokens=False):
            piece = vocab.tokens[tid] if 0 <= tid < vocab.size else None
            if not piece or data[pos:pos + len(piece)] != piece:
                return tokens
            alt = prefer.get(tid) if prefer else None
            if alt is not None and vocab.tokens[alt] and data.startswith(vocab.tokens[alt], pos):
                tid, piece, switched = alt, vocab.tokens[alt], True
            tokens.append(tid)
            pos += len(piece)
            if len(tokens) == limit or switched:
                break
        if not switched:
            break
    return tokens


def forced_draft(matcher: Matcher, tokenizer: Any, vocab: Vocabulary, limit: int = MAX_DRAFT,
                 prefer: Mapping[int, int] | None = None) -> list[int]:
    """Canonical tokens of the text the grammar forces from here (possibly empty).

    The forced text is tokenized on its own (:func:`spell`); tokens are kept while the matcher
    accepts them, and trailing tokens that a longer legal token could extend are dropped (the
    model, seeing what follows, would likely pick the longer one).
    """
    draft = spell(tokenizer, vocab, matcher.forced_text().encode("utf-8"), limit, prefer)
    return trim_extendable(matcher, vocab, draft[:matcher.validate(draft)])


def trim_extendable(matcher: Matcher, vocab: Vocabulary, draft: list[int]) -> list[int]:
    """``draft`` (legal from ``matcher``) without the trailing tokens some longer legal token
    could extend."""
    while draft and extendable_end(matcher, vocab, draft):
        draft.pop()
    return draft


def extendable_end(matcher: Matcher, vocab: Vocabulary, draft: Sequence[int]) -> bool:
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
        #: drafted token -> the token the model wrote instead, a shorter or longer spelling of
        #: the same text (SmolLM2 writes ``":`` where the canonical split is ``":"``)
        self.prefer: dict[int, int] = {}

    def trim(self, draft: list[int]) -> list[int]:
        if draft:
            seen, refused = self.seen.get(draft[-1], (0, 0))
            if seen >= self.min_seen and refused > self.max_refused * seen:
                return draft[:-1]
        return draft

    def record_choice(self, vocab: Vocabulary, refused: int, choice: int | None) -> None:
        """The model wrote ``choice`` where ``refused`` was drafted: remember it when one spells
        a prefix of the other (a different split of the same text)."""
        if choice is None or choice == refused:
            return
        a, b = vocab.tokens[refused], vocab.tokens[choice]
        if a and b and (a.startswith(b) or b.startswith(a)):
            self.prefer[refused] = choice

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
        # the grammar's vocabulary: a format's markers may be special tokens spelled there only
        vocab = getattr(matcher, "vocabulary", None) or self.vocab
        draft = self.ends.trim(forced_draft(matcher, self.tokenizer, vocab, limit, self.ends.prefer))
        return Draft(tuple(draft), self.name)

    def record(self, draft: Draft, kept: int, choice: int | None = None) -> None:
        self.ends.record(draft.tokens, kept)
        if kept < len(draft):
            self.ends.record_choice(self.vocab, draft.tokens[kept], choice)
