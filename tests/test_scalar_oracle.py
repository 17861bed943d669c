"""Exact masks on the scalar keywords: numbers, patterns, formats, enums, both tokenizer families.

Each case walks a valid instance token by token with :func:`oracle.check_walk` (the matcher's
mask against every vocabulary token stepped byte by byte, and the forced text against a byte
search), in the walking grammar and in the canonical one generation uses, and checks that a
near miss is rejected.
"""

from __future__ import annotations

import json

import pytest

import structgen

from oracle import check_walk

CASES = [
    ("int-range", {"type": "integer", "minimum": -40, "maximum": 125}, -17, 126),
    ("decimal-excl", {"type": "number", "exclusiveMinimum": 0, "maximum": 99.5}, 12.25, 0),
    ("multiple", {"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 10}, 7.75, 7.7),
    ("int-multiple", {"type": "integer", "multipleOf": 7}, 1001, 1002),
    ("pattern", {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3,5}$"}, "AB-1234", "AB-12"),
    ("pattern-len", {"type": "string", "pattern": "^[a-z_]+$", "maxLength": 8}, "snake_ok", "too_long_x"),
    ("date", {"type": "string", "format": "date"}, "2024-02-29", "2023-02-29"),
    ("date-time", {"type": "string", "format": "date-time"}, "2024-05-01T13:45:00Z", "2024-05-01T25:00:00Z"),
    ("uuid", {"type": "string", "format": "uuid"}, "123e4567-e89b-12d3-a456-426614174000",
     "123e4567-e89b-12d3-a456-42661417400"),
    ("email", {"type": "string", "format": "email"}, "ada.l@example.com", "ada@@example.com"),
    ("ipv4", {"type": "string", "format": "ipv4"}, "192.168.0.1", "192.168.0.256"),
    ("enum-mixed", {"enum": [1.5, "é", {"a": [1, None]}]}, {"a": [1, None]}, {"a": [1]}),
    ("object", {"type": "object", "properties": {
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "host": {"type": "string", "format": "hostname"}}, "required": ["port", "host"],
        "additionalProperties": False}, {"port": 8080, "host": "api.example.org"},
     {"port": 70000, "host": "x"}),
]
#: Gemma's brute force is ~5x SmolLM2's: it walks these cases only.
GEMMA_CASES = {"decimal-excl", "pattern", "date", "enum-mixed", "object"}
TOKENIZERS = {"smollm2": "smollm2_tokenizer", "gemma": "gemma_tokenizer"}


def _params():
    for name, schema, good, bad in CASES:
        for tok in ("smollm2", "gemma") if name in GEMMA_CASES else ("smollm2",):
            for canonical in (False, True):
                yield pytest.param(schema, good, bad, tok, canonical,
                                   id=f"{name}-{tok}-{'canonical' if canonical else 'walking'}")


def _ids(tok, vocab, text):
    ids = tok.encode(text, add_special_tokens=False)
    assert b"".join(vocab.tokens[t] or b"" for t in ids) == text.encode()
    return ids


@pytest.mark.parametrize("schema, good, bad, tok_name, canonical", list(_params()))
def test_masks_match_brute_force(schema, good, bad, tok_name, canonical, request):
    tok = request.getfixturevalue(TOKENIZERS[tok_name])
    vocab = structgen.Vocabulary.from_tokenizer(tok)
    compiled = structgen.compile_json_schema(schema, vocab, whitespace="compact", canonical=canonical)
    text = json.dumps(good, separators=(",", ":"), ensure_ascii=False)
    ids = _ids(tok, vocab, text)
    assert check_walk(compiled.matcher(), ids) == len(ids) + 1
    m = compiled.matcher()
    bad_ids = _ids(tok, vocab, json.dumps(bad, separators=(",", ":"), ensure_ascii=False))
    assert not (all(m.advance(t) for t in bad_ids) and m.can_end()), "a near miss was accepted"
