"""Forced-text drafts on the real SmolLM2 tokenizer (no model needed)."""

from __future__ import annotations

import structgen
from structgen.decoding.drafts import forced_draft
from structgen.engine.vocab import vocabulary_for

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "kind": {"enum": ["alpha", "beta"]}},
          "required": ["name", "kind"]}


def _matcher(tok):
    return structgen.compile_json_schema(SCHEMA, tok, whitespace="compact", strict=True, canonical=True).matcher()


def test_draft_spells_a_legal_prefix_of_the_forced_text(smollm2_tokenizer):
    vocab = vocabulary_for(smollm2_tokenizer)
    m = _matcher(smollm2_tokenizer)
    draft = forced_draft(m, smollm2_tokenizer, vocab)
    spelled = b"".join(vocab.tokens[t] for t in draft)
    assert draft and m.forced_bytes().startswith(spelled)
    assert m.validate(draft) == len(draft)


def test_draft_backs_off_where_a_longer_token_could_extend_it(smollm2_tokenizer):
    vocab = vocabulary_for(smollm2_tokenizer)
    m = _matcher(smollm2_tokenizer)
    for t in smollm2_tokenizer.encode('{"name":"x","kind":"', add_special_tokens=False):
        assert m.advance(t)
    # only "alpha" or "beta" may follow: nothing is forced yet
    assert forced_draft(m, smollm2_tokenizer, vocab) == []
    assert m.advance(smollm2_tokenizer.convert_tokens_to_ids("al"))
    draft = forced_draft(m, smollm2_tokenizer, vocab)
    text = b"".join(vocab.tokens[t] for t in draft)
    assert b'pha"}'.startswith(text)
    # the last draft token is never one that a longer legal token starts with
    if draft:
        probe = m.fork()
        for t in draft[:-1]:
            probe.advance(t)
        last = vocab.tokens[draft[-1]]
        allowed = probe.allowed_token_ids()
        assert not any(vocab.tokens[t] and len(vocab.tokens[t]) > len(last) and vocab.tokens[t].startswith(last)
                       for t in allowed)


def test_no_draft_when_limit_is_zero_or_nothing_forced(smollm2_tokenizer):
    vocab = vocabulary_for(smollm2_tokenizer)
    m = _matcher(smollm2_tokenizer)
    assert forced_draft(m, smollm2_tokenizer, vocab, limit=0) == []
    m2 = structgen.compile_json_schema({"type": "string"}, smollm2_tokenizer, whitespace="compact", canonical=True).matcher()
    m2.advance(smollm2_tokenizer.encode('"', add_special_tokens=False)[0])
    assert forced_draft(m2, smollm2_tokenizer, vocab) == []
