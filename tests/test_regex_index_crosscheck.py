"""Token masks of :func:`structgen.compile_regex` against outlines-core's ``Index``, on SmolLM2.

outlines-core (the engine behind Outlines) builds, for one regex and one vocabulary, the set of
tokens allowed in every state; it is written independently of structgen (Rust, on
``regex-automata``). For small regexes that its Rust syntax and Python's ``re`` read alike, the
allowed-token sets must be equal at every state: this walks each regex along the canonical
tokenization of a few strings of its language and along seeded random walks through the allowed
tokens, and compares the sets (and whether end-of-sequence is allowed) at every step.

The outlines-core vocabulary is built here, offline, from the tokenizer's own token strings
(GPT-2 byte-to-unicode spelling, inverted with the standard table below, independently of
:mod:`structgen.engine.vocab`): ``outlines_core.Vocabulary(eos_id, {token_bytes: [ids]})``.
``Vocabulary.from_pretrained`` would fetch from the Hub, which tests must not.

Tokens left out of the comparison, and why: the tokenizer's special and added tokens
(``<|im_start|>``, ``<|endoftext|>``, ...). structgen never lets one stand for text (it maps them
to no bytes); outlines-core would read their spelling as literal text and let ``<|im_start|>``
match ``.{0,5}``-like patterns. They are dropped from structgen's set and not given to
outlines-core; end-of-sequence is compared on its own (outlines-core allows its ``eos_id`` in a
final state, structgen its EOS ids when the text can end).

A bug of outlines-core 0.2.14, allowed for precisely (and only while it is there): its ``Index``
drops a token whose text before its *last byte* is a full match and whose full text is not (an
unfinished continuation out of a final state): ``(ab)*`` over the tokens ``a``, ``b`` allows
only end-of-sequence at the start, and ``[a-z]+( [a-z]+)*`` after ``hello`` refuses a lone
space token. The cause is regex-automata's one-byte-delayed match states: 0.2.14 keeps a token
when ``not is_match_state(next)`` or ``is_match_state(next_eoi_state(next))``, and after such a
token ``next`` is a (delayed) match state of the text before the last byte. Per the regex
semantics structgen is right (``ab`` and ``hello world`` are in those languages and can only be
spelt through the dropped tokens). Fixed upstream after 0.2.14 (dottxt-ai/outlines-core commit
2ba0b24, "fix: avoid generating incomplete automata"). :func:`_peer_drops_continuations` detects
the bug; while it is present, a token that only structgen allows must be exactly of that kind
(checked on bytes with the pattern's language), and everything else must agree exactly.

Regex dialects: only ASCII literals and explicit classes; no ``\\d``/``\\w``/``\\s`` (Unicode
classes in both, but from different Unicode versions), no anchors or lookaround.
"""

from __future__ import annotations

import random

import pytest

outlines_core = pytest.importorskip("outlines_core")

pytestmark = pytest.mark.slow  # ~20 s: an outlines-core Index and masks over SmolLM2's 49k tokens per regex

import structgen  # noqa: E402
from structgen.core.regular import matches  # noqa: E402
from structgen.frontends.regex.python import text_regex_to_ir  # noqa: E402

#: (regex, strings of its language to walk along)
CASES = [
    (r"[0-9]{1,4}", ["7", "2024", "509"]),
    (r"(yes|no|maybe)", ["yes", "no", "maybe"]),
    (r"[a-z]+( [a-z]+)*", ["hello world", "the quick brown fox"]),
    (r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", ["-12.5", "0", "31415.9265"]),
    (r'"[^"]*"', ['"Oslo, Norway"', '"naïve café"', '""']),
    (r"[A-Z][a-z]{2,8}", ["Paris", "Amsterdam"]),
    (r"(ab|cd)*e", ["ababcde", "e"]),
    (r"https?://[a-z]+\.(com|org)", ["https://example.com", "http://python.org"]),
    (r".{0,5}", ["héllo", "a b", ""]),
    (r"[^a-z]{2,3}x", ["AB x", "ÉÉx", "12x"]),
    (r"(true|false|null)", ["true", "null"]),
    (r"\((a|b)+\)", ["(abba)", "(b)"]),
]


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted (the tokenizer spells each byte as one character)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@pytest.fixture(scope="module")
def peer(smollm2_tokenizer):
    return peer_vocabulary(smollm2_tokenizer)


def peer_vocabulary(tok):
    """``(outlines_core.Vocabulary, eos id, ids left out, {id: bytes})`` for a byte-level BPE tokenizer."""
    left_out = set(tok.all_special_ids) | {int(i) for i in tok.added_tokens_decoder}
    decoder = _byte_decoder()
    by_bytes: dict[bytes, list[int]] = {}
    token_bytes: dict[int, bytes] = {}
    for piece, tid in tok.get_vocab().items():
        if tid in left_out:
            continue
        token_bytes[tid] = bytes(decoder[c] for c in piece)
        by_bytes.setdefault(token_bytes[tid], []).append(tid)
    eos = tok.eos_token_id
    assert eos in left_out
    return outlines_core.Vocabulary(eos, by_bytes), eos, left_out, token_bytes


def _peer_drops_continuations() -> bool:
    """Whether this outlines-core has 0.2.14's bug: ``(ab)*`` over ``a``, ``b`` allows no ``a``."""
    index = outlines_core.Index("(ab)*", outlines_core.Vocabulary(9, {b"a": [0], b"b": [1]}))
    return index.get_allowed_tokens(index.get_initial_state()) == [9]


PEER_DROPS_CONTINUATIONS = _peer_drops_continuations()


def _compare(m, index, state, eos, eos_ids, left_out, where: str, *, language, text: bytes,
             token_bytes) -> list[int]:
    ours = set(m.allowed_token_ids())
    theirs = set(index.get_allowed_tokens(state))
    assert (bool(ours & eos_ids)) == (eos in theirs) == m.can_end() == index.is_final_state(state), where
    ours -= eos_ids | left_out
    theirs -= {eos}
    only_ours = ours - theirs
    if PEER_DROPS_CONTINUATIONS:  # see the module docstring: drop exactly the tokens 0.2.14 drops
        only_ours = {t for t in only_ours
                     if not (matches(language, text + token_bytes[t][:-1])
                             and not matches(language, text + token_bytes[t]))}
    assert not only_ours and theirs <= ours, (
        f"{where}: only structgen allows {sorted(only_ours)[:20]}, "
        f"only outlines-core allows {sorted(theirs - ours)[:20]}")
    return sorted(theirs)


@pytest.mark.parametrize("pattern,strings", CASES, ids=[c[0] for c in CASES])
def test_masks_equal_outlines_core_index(pattern, strings, smollm2_tokenizer, peer):
    vocab, eos, left_out, token_bytes = peer
    index = outlines_core.Index(pattern, vocab)
    grammar = structgen.compile_regex(pattern, smollm2_tokenizer)
    eos_ids = set(grammar.vocabulary.eos_ids)
    assert eos in eos_ids
    language = text_regex_to_ir(pattern)
    tok = smollm2_tokenizer
    rng = random.Random(pattern)
    # the canonical tokenization of each string, then seeded random walks through what both allow
    walks = [tok.encode(s, add_special_tokens=False) for s in strings] + [None] * 4
    compared = 0
    for ids in walks:
        m = grammar.matcher()
        state = index.get_initial_state()
        text = b""
        for tid in (ids if ids is not None else [None] * 8) + ["end"]:
            where = f"{pattern!r} after {text!r}"
            allowed = _compare(m, index, state, eos, eos_ids, left_out, where, language=language,
                               text=text, token_bytes=token_bytes)
            compared += 1
            if tid == "end":
                assert ids is None or m.can_end(), where
                break
            if tid is None:
                if not allowed:
                    break
                tid = rng.choice(allowed)
            assert m.advance(tid), f"{where}: structgen refuses token {tid} ({token_bytes[tid]!r})"
            if tid not in allowed:  # a token only outlines-core 0.2.14's bug refuses: it cannot follow
                assert PEER_DROPS_CONTINUATIONS, where
                break
            state = index.get_next_state(state, tid)
            assert state is not None, f"{where}: outlines-core refuses token {tid} ({token_bytes[tid]!r})"
            text += token_bytes[tid]
    assert compared >= 10


def test_the_peer_bug_allowance_is_narrow():
    """While the allowance is on, it excuses only continuations out of a final state."""
    vocab = outlines_core.Vocabulary(9, {b"a": [0], b"b": [1], b"ab": [2]})
    index = outlines_core.Index("(ab)*", vocab)
    theirs = set(index.get_allowed_tokens(index.get_initial_state()))
    assert {2, 9} <= theirs  # "ab" leads to a final state: kept
    if PEER_DROPS_CONTINUATIONS:
        assert 0 not in theirs
        language = text_regex_to_ir("(ab)*")
        assert matches(language, b"") and not matches(language, b"a")  # what _compare excuses
