"""Matcher API: advance/validate/rollback/fork, EOS, bitmasks, forced text."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import structgen
from structgen.engine.vocab import Vocabulary

# A small multi-byte vocabulary: single bytes plus tokens crossing rule boundaries.
PIECES = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'","', b'"}', b"true", b"name", b'":"']
EOS = len(PIECES)
VOCAB = Vocabulary(PIECES + [None], eos_ids=[EOS], size=len(PIECES) + 40)  # logits wider than vocab
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "ok": {"type": "boolean"}},
          "required": ["name", "ok"], "additionalProperties": False}


def tid(piece: bytes) -> int:
    return PIECES.index(piece)


@pytest.fixture
def matcher():
    return structgen.compile_json_schema(SCHEMA, VOCAB, whitespace="compact", canonical=True).matcher()


def test_forced_text_and_crossing_tokens(matcher):
    assert matcher.forced_text() == '{"name":"'
    assert matcher.advance(tid(b'{"'))
    assert matcher.advance(tid(b"name"))
    assert matcher.advance(tid(b'":"'))
    assert matcher.advance(ord("x"))
    assert tid(b'","') in matcher.allowed_token_ids()
    assert tid(b'"}') not in matcher.allowed_token_ids()  # "ok" is required
    assert matcher.advance(tid(b'","'))
    assert matcher.forced_text() == 'ok":'


def test_rejection_leaves_state_and_says_why(matcher):
    assert not matcher.advance(tid(b"true"))
    assert "expected one of" in matcher.last_rejection
    assert matcher.token_ids == []
    assert matcher.advance(tid(b'{"'))


def test_eos_only_when_complete_and_ids_past_vocab_masked(matcher):
    text = b'{"name":"a","ok":true}'
    assert matcher.validate(list(text)) == len(text)
    for b in text:
        assert matcher.advance(b)
    assert matcher.can_end() and matcher.is_finished()
    assert matcher.allowed_token_ids() == [EOS]
    assert matcher.advance(EOS) and matcher.is_terminated()
    assert matcher.allowed_token_ids() == []
    assert not matcher.advance(ord(" "))


def test_eos_rejected_early(matcher):
    assert not matcher.advance(EOS)
    assert "not complete" in matcher.last_rejection


def test_validate_rollback_fork(matcher):
    ids = [tid(b'{"'), tid(b"name"), tid(b'":"'), ord("a"), tid(b'"}')]
    assert matcher.validate(ids) == 4  # '"}' would close the object before the required "ok"
    assert matcher.token_ids == []
    for t in ids[:4]:
        matcher.advance(t)
    fork = matcher.fork()
    matcher.rollback(2)
    assert matcher.token_ids == ids[:2]
    assert fork.token_ids == ids[:4]
    with pytest.raises(ValueError):
        matcher.rollback(3)
    matcher.reset()
    assert matcher.forced_text() == '{"name":"'


def test_fill_bitmask_numpy_and_torch(matcher):
    words = (VOCAB.size + 31) // 32
    arr = np.zeros((2, words), dtype=np.int32)
    matcher.fill_bitmask(arr, 1)
    bits = np.unpackbits(arr[1].view(np.uint8), bitorder="little")
    assert np.flatnonzero(bits).tolist() == matcher.allowed_token_ids()
    # a one-row buffer of the exact width (the fast path) and a wider one (its tail disallowed)
    exact, wide = np.full(words, -1, dtype=np.int32), np.full(words + 3, -1, dtype=np.int32)
    matcher.fill_bitmask(exact)
    matcher.fill_bitmask(wide)
    assert np.array_equal(exact, arr[1]) and np.array_equal(wide[:words], arr[1]) and not wide[words:].any()
    torch = pytest.importorskip("torch")
    t = torch.zeros(words, dtype=torch.int32)
    matcher.fill_bitmask(t)
    assert torch.equal(t, torch.from_numpy(arr[1]))


def test_compiled_grammar_pickles():
    compiled = structgen.compile_json_schema(SCHEMA, VOCAB, whitespace="compact", canonical=True)
    again = pickle.loads(pickle.dumps(compiled))
    m = again.matcher()
    assert m.forced_text() == '{"name":"'
    assert again.cache_key == compiled.cache_key


def test_anyof_keeps_two_live_parses():
    schema = {"anyOf": [
        {"type": "object", "properties": {"ok": {"const": True}, "v": {"type": "integer"}},
         "required": ["ok", "v"], "additionalProperties": False},
        {"type": "object", "properties": {"ok": {"const": False}, "err": {"type": "string"}},
         "required": ["ok", "err"], "additionalProperties": False}]}
    m = structgen.compile_json_schema(schema, VOCAB, whitespace="compact", canonical=True).matcher()
    assert m.forced_text() == '{"ok":'
    for b in b'{"ok":f':
        assert m.advance(b)
    assert m.forced_text() == 'alse,"err":"'


def test_masks_stay_exact_when_the_shared_cache_forgets():
    from oracle import check_walk

    vocab = Vocabulary(PIECES + [None], eos_ids=[EOS])
    vocab.mask_cache.maxsize = 2  # every shared fact is evicted almost at once
    vocab.reads_cache.maxsize = 2  # and every crossing read
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}},
              "required": ["name"]}
    compiled = structgen.compile_json_schema(schema, vocab, whitespace="compact", canonical=True)
    ids = [tid(b'{"'), tid(b"name"), tid(b'":"'), ord("a"), tid(b'","'), ord("x"), tid(b'":'),
           ord("1"), ord("}")]
    assert check_walk(compiled.matcher(), ids) == len(ids) + 1
    assert len(vocab.mask_cache) <= 2 and len(vocab.reads_cache) <= 2


def test_masks_handed_out_are_read_only():
    """A mask is memoized and shared by every matcher of the grammar: writing into the array
    mask_words() returns must fail, not make another matcher allow every token (issue 25)."""
    vocab = structgen.Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    compiled = structgen.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, vocab)
    first, second = compiled.matcher(), compiled.matcher()
    words = first.mask_words()
    before = second.allowed_token_ids()
    with pytest.raises(ValueError):
        words[:] = 0xFFFFFFFF
    assert second.allowed_token_ids() == before and 256 not in before
    bits = np.zeros(vocab.words, dtype=np.int32)
    first.fill_bitmask(bits)  # a copy the caller owns stays writable
    bits[:] = -1
    assert second.allowed_token_ids() == before
