"""Prompt-lookup drafts: what they copy, how they join the grammar's forced text, and that no
draft source ever proposes a token the matcher refuses (walked along real MaskBench instances,
with the real SmolLM2 tokenizer; no model needed)."""

from __future__ import annotations

import json

import pytest

from structgen.decoding.drafts import DraftEnds, ForcedText, spell
from structgen.decoding.lookup import PromptLookup, find_copy, locate_copy
from structgen.engine.compiler import Compiler
from structgen.engine.vocab import Vocabulary

import maskbench as mb

DOC = b"Extract.\nname: Ada Lovelace\nage: 36\ncity: London\n"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "city": {"type": "string"}},
          "required": ["name", "age", "city"], "additionalProperties": False}


@pytest.mark.parametrize("context,expected", [
    (b'{"name":"Ada', b" Lovelace\nage: 36\ncity: London\n"),  # inside a value: longest suffix
    (b'{"name":"', b"Ada Lovelace\nage: 36\ncity: London\n"),   # after a key
    (b'{"age":', b"36\ncity: London\n"),
    (b'{"city": "', b"London\n"),
    (b'{"zip":"', b""),                                          # no such key
    (b'{"', b""),                                                # no key yet
    (b'{"name":"Xy', b""),                                       # suffix shorter than MIN_MATCH
    (b"London\n", b""),                                          # a line break ends no value
])
def test_find_copy(context, expected):
    assert find_copy(DOC, context) == expected


def test_later_occurrences_are_preferred_then_the_first():
    doc = b"a.name: Ada\nb.name: Bob\n"
    assert find_copy(doc, b'"name":"') == b"Ada\nb.name: Bob\n"
    assert find_copy(doc, b'"name":"', start=doc.index(b"b.name")) == b"Bob\n"
    assert locate_copy(doc, b'"name":"', start=len(doc) - 1) == doc.index(b"Ada")
    assert find_copy(b"name: Ada", b'"Ada') == b""  # nothing follows the match


@pytest.fixture(scope="module")
def vocab(smollm2_tokenizer):
    return Vocabulary.from_tokenizer(smollm2_tokenizer)


def test_a_copied_value_and_the_forced_text_after_it_make_one_draft(smollm2_tokenizer, vocab):
    grammar = Compiler(vocab).json_schema(PERSON, whitespace="compact", canonical=True)
    source = PromptLookup(smollm2_tokenizer, vocab).for_row(smollm2_tokenizer.encode(DOC.decode()))
    matcher = grammar.matcher()
    for tid in smollm2_tokenizer.encode('{"name":"Ada'):
        assert matcher.advance(tid)
    draft = source.propose(matcher, matcher.token_ids, 16)
    text = vocab.token_bytes(draft.tokens)
    assert text.startswith(b' Lovelace","age":36'), text
    assert set(draft.labels) == {"lookup", "forced"} and draft.source == "lookup"
    assert matcher.validate(draft.tokens) == len(draft)


def test_preferred_splits_are_spelled(smollm2_tokenizer, vocab):
    canonical = spell(smollm2_tokenizer, vocab, b'":"Ada')
    assert vocab.token_bytes(canonical) == b'":"Ada'
    ends = DraftEnds()
    short = smollm2_tokenizer.encode('":')[0]
    ends.record_choice(vocab, canonical[0], short)  # the model wrote `":` where `":"` was drafted
    again = spell(smollm2_tokenizer, vocab, b'":"Ada', prefer=ends.prefer)
    assert again[0] == short and vocab.token_bytes(again) == b'":"Ada'
    ends.record_choice(vocab, canonical[0], smollm2_tokenizer.encode("x")[0])  # unrelated: not learned
    assert ends.prefer == {canonical[0]: short}


CASES = mb.select(("Github_easy", "Glaiveai2K", "Kubernetes", "BFCL_simple", "JME", "WashingtonPost"), 4,
                  max_chars=200) if mb.available() else []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_no_source_proposes_a_token_the_matcher_refuses(case, smollm2_tokenizer, vocab):
    """Walk a valid instance token by token; at every position each cheap source's draft is
    legal all the way and leaves the matcher where it was."""
    grammar = Compiler(vocab).json_schema(case.schema, whitespace="compact", canonical=True)
    instance = case.valid[0]
    document = "\n".join(mb.document_lines(instance))
    prompt = smollm2_tokenizer.encode(f"Extract as JSON.\n{document}\n")
    ends = DraftEnds()
    sources = [ForcedText(smollm2_tokenizer, vocab, ends), PromptLookup(smollm2_tokenizer, vocab, ends).for_row(prompt)]
    matcher = grammar.matcher()
    text = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    walked = [t for t in smollm2_tokenizer.encode(text) if matcher.advance(t)]
    matcher.reset()
    proposed = 0
    for tid in walked:
        before = list(matcher.token_ids)
        for source in sources:
            draft = source.propose(matcher, before, 16)
            assert matcher.validate(draft.tokens) == len(draft), (source.name, vocab.token_bytes(before))
            assert matcher.token_ids == before
            proposed += len(draft)
            if draft.tokens:  # learn as the loop would: the walked token is the model's choice
                kept = next((i for i, (a, b) in enumerate(zip(draft.tokens, walked[len(before):])) if a != b),
                            min(len(draft), len(walked) - len(before)))
                source.record(draft, kept, walked[len(before) + kept] if len(before) + kept < len(walked) else None)
        assert matcher.advance(tid)
    assert proposed > 0
