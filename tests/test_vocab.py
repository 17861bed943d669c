"""Vocabularies read from real tokenizers: byte-level BPE (SmolLM2) and SentencePiece (Gemma 3)."""

from __future__ import annotations

import pickle

import pytest

from structgen.engine.vocab import TokenIndex, Vocabulary, prefix_range_end, vocabulary_for

TEXTS = ['{"name": "Ada Lovelace", "age": 36}', "naïve café — 東京 😀", "tabs\tand\nnewlines  ",
         '{"a":[1,2.5e-3,null,true]}', "\u00e9\\u00e9 \U000f0000"]


@pytest.mark.parametrize("which", ["smollm2", "gemma"])
def test_token_bytes_concatenate_to_the_text(which, smollm2_tokenizer, gemma_tokenizer):
    tok = smollm2_tokenizer if which == "smollm2" else gemma_tokenizer
    vocab = vocabulary_for(tok)
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        assert b"".join(vocab.tokens[i] for i in ids) == text.encode("utf-8"), text


def test_smollm2_vocabulary(smollm2_tokenizer):
    vocab = vocabulary_for(smollm2_tokenizer)
    assert vocab.size == 49152
    assert 2 in vocab.eos_ids  # <|im_end|>
    assert all(vocab.tokens[i] is None for i in range(17))  # <|endoftext|>, <|im_start|>, ...
    assert vocab.tokens[smollm2_tokenizer.convert_tokens_to_ids("Ġthe")] == b" the"


def test_gemma_vocabulary_excludes_control_tokens(gemma_tokenizer):
    vocab = vocabulary_for(gemma_tokenizer)
    assert vocab.size == 262144
    assert 1 in vocab.eos_ids
    unused = gemma_tokenizer.convert_tokens_to_ids("<unused0>")
    image = gemma_tokenizer.convert_tokens_to_ids("<start_of_image>")
    assert vocab.tokens[unused] is None and vocab.tokens[image] is None
    assert sum(t is None for t in vocab.tokens) > 6000
    assert vocab.tokens[gemma_tokenizer.convert_tokens_to_ids("<0x0A>")] == b"\n"
    assert vocab.tokens[gemma_tokenizer.convert_tokens_to_ids("▁the")] == b" the"
    newlines = gemma_tokenizer.convert_tokens_to_ids("\n\n")  # a plain-text added token
    assert vocab.tokens[newlines] == b"\n\n"


def test_logits_wider_than_tokenizer(smollm2_tokenizer):
    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=49152 + 64)
    assert vocab.size == 49216 and vocab.tokens[-1] is None and vocab.words == 49216 // 32


def test_generation_config_eos(smollm2_tokenizer):
    class Config:
        eos_token_id = [0, 2]

    assert Vocabulary.from_tokenizer(smollm2_tokenizer, generation_config=Config()).eos_ids == {0, 2}


def test_vocabulary_is_cached_per_tokenizer_and_pickles(smollm2_tokenizer):
    vocab = vocabulary_for(smollm2_tokenizer)
    assert vocabulary_for(smollm2_tokenizer) is vocab
    again = pickle.loads(pickle.dumps(vocab))
    assert again.fingerprint == vocab.fingerprint and again.tokens == vocab.tokens


@pytest.mark.parametrize("family", ["smollm2", "gemma"])
def test_token_index_common_prefixes_are_exact(family, request):
    """The vectorised common-prefix table against a byte-by-byte count on each real vocabulary
    (Gemma's 262k tokens include byte-fallback and long whitespace runs)."""
    index = TokenIndex(Vocabulary.from_tokenizer(request.getfixturevalue(f"{family}_tokenizer")).tokens)
    keys = index.keys

    def common(a: bytes, b: bytes) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n
    assert index.lcp == [0] + [common(keys[i - 1], keys[i]) for i in range(1, len(keys))]
    assert max(index.lcp) >= 8  # long shared prefixes are in the data, not only short ones


def test_token_index_prefix_skips():
    index = TokenIndex([b"a", b"ab", b"abc", b"b", None, b"ab"])
    assert index.keys == [b"a", b"ab", b"abc", b"b"]
    assert index.ids[1] == (1, 5)
    assert index.lcp == [0, 1, 2, 0]
    assert prefix_range_end(index.keys, b"a", 0, 4) == 3  # past every key starting with "a"
    assert prefix_range_end(index.keys, b"ab", 1, 4) == 3
    assert prefix_range_end([b"\xff", b"\xff\x01"], b"\xff", 0, 2) == 2


def test_marked_variants_are_bounded_and_spell_their_markers():
    """A server's clients may name ever new sets of special tokens in their specs: one vocabulary
    keeps a bounded number of marked variants, and a variant asked again spells the same."""
    from structgen.engine.vocab import MARKED_VARIANTS, Vocabulary

    v = Vocabulary([b"a"] + [None] * 40, eos_ids=[40], specials={i: f"<m{i}>".encode() for i in range(1, 41)})
    for i in range(1, 40):
        marked = v.with_markers([i])
        assert marked.tokens[i] == f"<m{i}>".encode() and marked.tokens[i % 39 + 1] is None
    assert len(v._marked) == MARKED_VARIANTS
    assert v.with_markers([40]) is v  # an end of sequence is never a marker
    assert v.with_markers([1]).with_markers([2]).tokens[1:3] == [b"<m1>", b"<m2>"]
