"""Tokenizer families: the ones structgen reads exactly, the ones it refuses by name, and logits
wider than the tokenizer (``vocab_size=`` / ``model=``).

Every tokenizer here is built locally (``tokenizers`` models wrapped in transformers classes, a
BERT vocabulary file written to a temporary folder, ByT5's byte vocabulary); nothing is downloaded.
"""

from __future__ import annotations

import numpy as np
import pytest

import structgen
from structgen.engine.compiler import compiler_for
from structgen.engine.vocab import BYTE_FALLBACK, BYTE_LEVEL, Vocabulary, _family, vocabulary_for

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: E402

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}
BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]


def _fast(model, *, decoder=None, pre_tokenizer=None, normalizer=None, **special):
    tok = Tokenizer(model)
    if decoder is not None:
        tok.decoder = decoder
    if pre_tokenizer is not None:
        tok.pre_tokenizer = pre_tokenizer
    if normalizer is not None:
        tok.normalizer = normalizer
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **special)


# -- families that are refused --------------------------------------------------------------------

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "w", "o", "r", "l", "d", "##o", "##r", "##l",
         "##d", "world", "hello", "!", "a"]


def bert_from_vocab_file(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return transformers.BertTokenizerFast.from_pretrained(str(tmp_path))


def wordpiece_wrapped(tmp_path):
    vocab = {w: i for i, w in enumerate(WORDS)}
    return _fast(models.WordPiece(vocab, unk_token="[UNK]"), decoder=decoders.WordPiece(),
                 pre_tokenizer=pre_tokenizers.BertPreTokenizer(), unk_token="[UNK]")


def unigram_without_byte_fallback(tmp_path):
    pieces = [("<unk>", 0.0), ("\u2581a", -1.0), ("b", -2.0), ("\u2581", -3.0), ("a", -4.0)]
    return _fast(models.Unigram(pieces, 0, byte_fallback=False), decoder=decoders.Metaspace(),
                 pre_tokenizer=pre_tokenizers.Metaspace(), unk_token="<unk>")


def bpe_without_byte_fallback(tmp_path):
    vocab = {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "\u2581a": 4}
    return _fast(models.BPE(vocab, [("\u2581", "a")], unk_token="<unk>"), decoder=decoders.Metaspace(),
                 pre_tokenizer=pre_tokenizers.Metaspace(), unk_token="<unk>")


def word_level(tmp_path):
    return _fast(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2, "a": 3}, unk_token="[UNK]"),
                 pre_tokenizer=pre_tokenizers.Whitespace(), unk_token="[UNK]")


def bpe_with_end_of_word_suffix(tmp_path):  # CLIP's spelling: 'a</w>' is 'a' at a word's end
    vocab = {"<unk>": 0, "a": 1, "b": 2, "a</w>": 3, "b</w>": 4}
    return _fast(models.BPE(vocab, [], unk_token="<unk>", end_of_word_suffix="</w>"),
                 decoder=decoders.BPEDecoder(suffix="</w>"), unk_token="<unk>")


def byt5_char_level(tmp_path):  # a slow tokenizer whose pieces are characters, not bytes
    return transformers.ByT5Tokenizer()


def byte_fallback_decoder_keeps_metaspace(tmp_path):
    # Passes as SentencePiece with byte fallback, but its decoder never turns '▁' into a space:
    # only the check against the tokenizer's own decoding catches it.
    return _sentencepiece_byte_fallback(decoder=decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()]))


REFUSED = [
    (bert_from_vocab_file, "WordPiece (BERT-style '##' continuations)"),
    (wordpiece_wrapped, "WordPiece (BERT-style '##' continuations)"),
    (unigram_without_byte_fallback, "Unigram (SentencePiece) without byte fallback"),
    (bpe_without_byte_fallback, "BPE without a byte-level decoder or byte fallback"),
    (word_level, "WordLevel"),
    (bpe_with_end_of_word_suffix, "BPE with subword markers ['</w>']"),
    (byt5_char_level, "ByT5Tokenizer (no byte-level map, no byte pieces)"),
    (byte_fallback_decoder_keeps_metaspace, "a tokenizer whose decoding disagrees with its pieces"),
]

PATHS = {
    "Vocabulary.from_tokenizer": lambda tok: Vocabulary.from_tokenizer(tok),
    "prepare_vocabulary": lambda tok: structgen.prepare_vocabulary(tok),
    "compile_json_schema": lambda tok: structgen.compile_json_schema(SCHEMA, tok),
    "compile_regex": lambda tok: structgen.compile_regex("[a-z]+", tok, vocab_size=len(tok) + 64),
    "compile_grammar": lambda tok: structgen.compile_grammar('start: "a"+', tok),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("build, family", REFUSED, ids=[b.__name__ for b, _ in REFUSED])
def test_unreadable_tokenizer_is_refused_naming_its_family(build, family, path, tmp_path):
    tok = build(tmp_path)
    with pytest.raises(structgen.TokenizerError) as info:
        PATHS[path](tok)
    err = info.value
    assert isinstance(err, structgen.StructgenError) and isinstance(err, ValueError)
    assert err.family.startswith(family), err.family
    message = str(err)
    assert family in message
    assert BYTE_LEVEL in message and BYTE_FALLBACK in message  # says what structgen does read
    assert "structgen.Vocabulary" in message  # and the way out


def test_wordpiece_used_to_read_as_wrong_bytes(tmp_path):
    # What issue 23 saw: 'world' spelt w ##o ##r ##l ##d read as b'w##o##r##l##d'. Now refused.
    tok = bert_from_vocab_file(tmp_path)
    assert tok.tokenize("wodl") == ["w", "##o", "##d", "##l"]
    with pytest.raises(structgen.TokenizerError, match="WordPiece"):
        vocabulary_for(tok)


# -- families that are read ------------------------------------------------------------------------

def _sentencepiece_byte_fallback(*, decoder):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{p: 3 + i for i, p in enumerate(BYTE_PIECES)}}
    for piece in ["\u2581", "a", "b", "\u2581a", "\u2581b", "ab"]:
        vocab[piece] = len(vocab)
    merges = [("\u2581", "a"), ("\u2581", "b"), ("a", "b")]
    return _fast(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True),
                 decoder=decoder, normalizer=normalizers.Replace(" ", "\u2581"),
                 pre_tokenizer=pre_tokenizers.Split(" ", "merged_with_previous"),
                 unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def sentencepiece_gemma_style():
    return _sentencepiece_byte_fallback(decoder=decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]))


def sentencepiece_llama2_style():  # its decoder strips the text's first space
    return _sentencepiece_byte_fallback(decoder=decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
         decoders.Strip(" ", 1, 0)]))


def byte_level_bpe():
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {"<|endoftext|>": 0, **{c: 1 + i for i, c in enumerate(sorted(alphabet))}}
    vocab["\u0120a"] = len(vocab)
    return _fast(models.BPE(vocab, [("\u0120", "a")]), decoder=decoders.ByteLevel(),
                 pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False),
                 eos_token="<|endoftext|>")


@pytest.mark.parametrize("build, family", [(sentencepiece_gemma_style, BYTE_FALLBACK),
                                           (sentencepiece_llama2_style, BYTE_FALLBACK),
                                           (byte_level_bpe, BYTE_LEVEL)])
def test_readable_families_round_trip(build, family):
    tok = build()
    assert _family(tok, tok.convert_ids_to_tokens(list(range(len(tok))))) == family
    vocab = vocabulary_for(tok)
    for text in ["a b", "ab ba", "naïve ☃ \n", "\x00\xff"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert vocab.token_bytes(ids) == text.encode(), text
    assert vocab.eos_ids == {tok.eos_token_id}


def test_real_tokenizers_read_as_before(smollm2_tokenizer, gemma_tokenizer):
    # Fingerprints as these tokenizers read before the family checks existed (the token bytes,
    # sizes and EOS ids did not change), so disk caches keyed by them stay valid.
    for tok, family, fingerprint in [(smollm2_tokenizer, BYTE_LEVEL, "fa4422652857103772f4"),
                                     (gemma_tokenizer, BYTE_FALLBACK, "8ba72b9c9f31ff2902e0")]:
        assert _family(tok, tok.convert_ids_to_tokens(list(range(len(tok))))) == family
        assert Vocabulary.from_tokenizer(tok).fingerprint == fingerprint
        assert vocabulary_for(tok).fingerprint == fingerprint


# -- logits wider than the tokenizer ---------------------------------------------------------------

PAD = 64
N = 49152


def _bits(words: np.ndarray) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")


def test_padded_width_masks_every_logit(smollm2_tokenizer):
    tok = smollm2_tokenizer
    compiled = structgen.compile_json_schema(SCHEMA, tok, whitespace="compact", vocab_size=N + PAD)
    assert compiled.vocabulary.size == N + PAD and len(tok) == N
    m = compiled.matcher()
    words = (N + PAD + 31) // 32
    buf = np.full((3, words + 2), -1, dtype=np.int32)  # a wider buffer too: the rest disallowed
    eos = tok.eos_token_id
    text = '{"ok":true}'
    ids = tok.encode(text, add_special_tokens=False)
    for step, t in enumerate(ids + [eos]):
        m.fill_bitmask(buf, 1)
        bits = _bits(buf[1])
        assert bits.size >= N + PAD
        assert not bits[N:].any(), "a padded id (or a column past the logits) was allowed"
        assert bool(bits[eos]) == (step == len(ids)), "EOS is allowed exactly at a complete value"
        assert max(m.allowed_token_ids()) < N
        assert bits[t], (step, t)
        assert m.advance(t)
    assert m.is_finished() and (buf[0] == -1).all() and (buf[2] == -1).all()


def test_padded_width_caches_per_width(smollm2_tokenizer):
    tok = smollm2_tokenizer
    plain, wide = vocabulary_for(tok), vocabulary_for(tok, vocab_size=N + PAD)
    assert vocabulary_for(tok, vocab_size=N) is plain  # the tokenizer's own width is the plain one
    assert vocabulary_for(tok, vocab_size=N + PAD) is wide and wide is not plain
    assert wide.fingerprint != plain.fingerprint and wide.tokens[:N] == plain.tokens
    assert compiler_for(tok, vocab_size=N + PAD) is compiler_for(tok, vocab_size=N + PAD)
    assert compiler_for(tok, vocab_size=N + PAD) is not compiler_for(tok)
    a = structgen.compile_regex("[0-9]+", tok, vocab_size=N + PAD)
    b = structgen.compile_regex("[0-9]+", tok)
    assert (a.vocabulary.size, b.vocabulary.size) == (N + PAD, N)
    assert a.matcher().mask_words().size == (N + PAD) // 32 and b.matcher().mask_words().size == N // 32
    assert structgen.prepare_vocabulary(tok, vocab_size=N + PAD) is wide


@pytest.mark.parametrize("width, fragment", [(N - 1, f"vocab_size={N - 1}"), (100, str(N)),
                                             ("wide", "integer"), (True, "integer")])
def test_width_below_the_tokenizer_is_refused(smollm2_tokenizer, width, fragment):
    for call in (lambda: structgen.compile_json_schema(SCHEMA, smollm2_tokenizer, vocab_size=width),
                 lambda: structgen.prepare_vocabulary(smollm2_tokenizer, vocab_size=width)):
        with pytest.raises(structgen.OptionError, match=fragment):
            call()


def test_vocabulary_widened_and_checked():
    vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    wide = structgen.compile_regex("a", vocab, vocab_size=300).vocabulary
    assert wide.size == 300 and wide.eos_ids == vocab.eos_ids and vocab.size == 257
    with pytest.raises(structgen.OptionError, match="vocab_size=200 .*257"):
        structgen.compile_regex("a", vocab, vocab_size=200)


def test_narrow_bitmask_is_a_typed_error(smollm2_tokenizer):
    m = structgen.compile_regex("[0-9]+", smollm2_tokenizer, vocab_size=N + PAD).matcher()
    with pytest.raises(structgen.OptionError, match=f"compiled for {N + PAD} tokens"):
        m.fill_bitmask(np.zeros((1, N // 32), dtype=np.int32))  # sized for the tokenizer, not the logits
    torch = pytest.importorskip("torch")
    with pytest.raises(structgen.OptionError, match="1538 words"):
        m.fill_bitmask(torch.zeros(N // 32, dtype=torch.int32))


def _tiny_padded_model(width: int):
    """A real (random, tiny) transformers causal LM whose logits are ``width`` wide."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=width, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                      eos_token_id=2, bos_token_id=1, pad_token_id=None)
    return transformers.LlamaForCausalLM(config).eval()


def test_model_width_with_a_padded_head(smollm2_tokenizer):
    torch = pytest.importorskip("torch")
    model = _tiny_padded_model(N + PAD)
    compiled = structgen.compile_json_schema({"enum": ["yes", "no"]}, smollm2_tokenizer, model=model,
                                             whitespace="compact", canonical=True)
    assert compiled.vocabulary.size == N + PAD
    assert compiled.vocabulary is vocabulary_for(smollm2_tokenizer, vocab_size=N + PAD,
                                                 generation_config=model.generation_config)
    m = compiled.matcher()
    ids: list[int] = []
    bitmask = torch.zeros(1, (N + PAD + 31) // 32, dtype=torch.int32)
    with torch.no_grad():
        for _ in range(16):
            logits = model(input_ids=torch.tensor([[1] + ids])).logits[0, -1]
            assert logits.shape == (N + PAD,)
            logits[N:] += 1e4  # the padded ids would win: only the mask keeps them out
            m.fill_bitmask(bitmask)
            allowed = torch.from_numpy(_bits(bitmask[0].numpy())[: N + PAD].astype(bool))
            assert not allowed[N:].any()
            token = int(logits.masked_fill(~allowed, float("-inf")).argmax())
            assert token < N and m.advance(token)
            if token in compiled.vocabulary.eos_ids:
                break
            ids.append(token)
    assert m.is_finished() and token in compiled.vocabulary.eos_ids
    assert smollm2_tokenizer.decode(ids) in ('"yes"', '"no"')
    with pytest.raises(structgen.OptionError, match="disagree"):
        structgen.compile_json_schema(SCHEMA, smollm2_tokenizer, model=model, vocab_size=N)
    assert structgen.compile_regex("a", smollm2_tokenizer, model=model, vocab_size=N + PAD).vocabulary.size == N + PAD


def test_model_narrower_than_the_tokenizer_is_refused(smollm2_tokenizer):
    with pytest.raises(structgen.OptionError, match=f"1024 wide, fewer than the tokenizer's {N}"):
        structgen.compile_regex("a", smollm2_tokenizer, model=_tiny_padded_model(1024))


@pytest.mark.parametrize("model", [object(), "SmolLM2", 49216])
def test_model_must_be_a_model(smollm2_tokenizer, model):
    with pytest.raises(structgen.OptionError, match="transformers model"):
        structgen.compile_regex("a", smollm2_tokenizer, model=model)


def test_default_model_width(smollm2_model):
    model, tok = smollm2_model
    compiled = structgen.compile_json_schema(SCHEMA, tok, model=model)
    width = model.get_output_embeddings().weight.shape[0]
    assert compiled.vocabulary.size == width == N
    eos = model.generation_config.eos_token_id
    assert set([eos] if isinstance(eos, int) else eos) | {tok.eos_token_id} <= compiled.vocabulary.eos_ids
    m = compiled.matcher()
    for t in tok.encode('{"ok": false}', add_special_tokens=False):
        assert m.advance(t)
    assert m.can_end() and set(m.allowed_token_ids()) == compiled.vocabulary.eos_ids
