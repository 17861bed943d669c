"""Choices that keep a complete output within the token budget (``budget="complete"``).

With ``left`` tokens left at a position (this one included), a token fits when the shortest
completion after it takes at most ``left - 1`` tokens
(:meth:`~structgen.engine.matcher.Matcher.completion_length_after`); an end-of-sequence token
the grammar allows always fits (it is not counted). Starting within the budget, some token
always fits: the first of the shortest completion's own tokens, after which that completion is
one token shorter. So the output is complete when the budget ends.

The rule is applied lazily, to the model's own choice first: away from the budget's end that
choice fits and nothing else is looked at. Where it does not fit, greedy decoding takes the
best token that does (in order of logits, ties to the lower id, as ``argmax``); sampling draws
again from the distribution with the refused tokens taken out, so what is drawn follows the
model's distribution over the tokens that fit. A drafted position makes exactly the same choice
(:mod:`structgen.decoding.loop` draws there as step-by-step decoding would), so drafting stays
lossless under the budget.

Example
-------
>>> import torch, structgen
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> m = structgen.compile_regex("a+b", vocab).matcher()
>>> m.advance(ord("a")), m.completion_length()       # "b" completes it
(True, 1)
>>> logits = torch.full((257,), float("-inf")); logits[ord("a")], logits[ord("b")] = 2.0, 1.0
>>> chr(greedy_within(m, logits, ord("a"), left=5)), chr(greedy_within(m, logits, ord("a"), left=1))
('a', 'b')
"""

from __future__ import annotations

import numpy as np
import torch

from structgen.engine.matcher import Matcher

__all__ = ["REDRAWS", "SLACK", "fits", "greedy_within", "sample_within", "within_budget"]

#: Draws a sampled choice gets before the tokens that fit are listed in full.
REDRAWS = 32

#: How far from the budget's end a mask (:func:`within_budget`) starts checking every token:
#: while ``left - 1`` exceeds the shortest completion by this many tokens, every allowed token
#: is taken to fit (one token would have to start a completion this much longer: a literal of
#: 64 tokens or more that the shortest completion avoids).
SLACK = 64


def fits(matcher: Matcher, token: int, left: int) -> bool:
    """Whether ``token``, chosen with ``left`` tokens left (it included), leaves a completion
    within the rest."""
    if token in matcher.vocabulary.eos_ids:
        return True
    needed = matcher.completion_length_after(token)
    return needed is not None and needed <= left - 1


def greedy_within(matcher: Matcher, masked: torch.Tensor, first: int, left: int) -> int | None:
    """The greedy choice among the tokens that fit: ``first`` (the argmax of ``masked``) if it
    fits, else the best that does; ``None`` when no allowed token fits (the logits processing
    took them all out)."""
    if fits(matcher, first, left):
        return first
    order = torch.argsort(masked, descending=True, stable=True)
    allowed = int(torch.isfinite(masked).sum())
    for token in order[:allowed].tolist():
        if token != first and fits(matcher, token, left):
            return token
    return None


def sample_within(matcher: Matcher, probs: torch.Tensor, first: int, left: int,
                  generator: torch.Generator) -> int | None:
    """A draw from ``probs`` over the tokens that fit, ``first`` being the draw already made:
    it is kept if it fits, else drawn again without it (up to :data:`REDRAWS` times, then from
    every token of ``probs``' support that fits). ``None`` when no token of the support fits."""
    token = first
    probs = probs.clone()
    for _ in range(REDRAWS):
        if fits(matcher, token, left):
            return token
        probs[token] = 0
        if not float(probs.sum()) > 0:
            return None
        token = int(torch.multinomial(probs, 1, generator=generator))
    support = torch.nonzero(probs).flatten().tolist()
    keep = [t for t in support if fits(matcher, t, left)]
    if not keep:
        return None
    only = torch.zeros_like(probs)
    only[keep] = probs[keep]
    return int(torch.multinomial(only, 1, generator=generator))


def within_budget(matcher: Matcher, words: np.ndarray, left: int) -> None:
    """Clear from ``words`` (one row of mask words, bit ``i`` allowing token ``i``) every token
    that, chosen with ``left`` tokens left, leaves no completion within the rest: the rule as a
    mask, for processors that do not see the token the sampler will choose. Greedy choices are
    then those of :func:`greedy_within`. Nothing changes when no completion is found from here
    (the search's limit), or while ``left`` is :data:`SLACK` tokens beyond the shortest
    completion.

    >>> import structgen
    >>> from structgen.engine.vocab import Vocabulary
    >>> vocab = Vocabulary([b"a", b"b", None], eos_ids=[2])
    >>> m = structgen.compile_regex("a+b", vocab).matcher(); m.advance(0)
    True
    >>> words = m.mask_words().copy(); within_budget(m, words, left=1); int(words[0])   # only "b" fits
    2
    """
    needed = matcher.completion_length()
    if needed is None or left - 1 >= needed + SLACK:
        return
    lengths = matcher.completion_lengths()
    fit = (lengths >= 0) & (lengths <= left - 1)
    packed = np.packbits(fit, bitorder="little")
    keep = np.zeros(words.shape[-1] * 4, dtype=np.uint8)
    keep[:min(packed.size, keep.size)] = packed[:keep.size]
    words &= keep.view(np.uint32)
