"""minItems/maxItems counted beside the rule's state: exact at the bounds, cheap at any size.

Tokens here span several array elements (``,1,1,1``, ``1]``), so one token can cross a bound;
masks are checked against the brute-force oracle (every token walked byte by byte) and
verdicts against python-jsonschema.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from oracle import brute_force_allowed, check_walk, mask_ids

import structgen
from structgen.core.automaton import build_automaton
from structgen.errors import CompileError
from structgen.core.ir import Counted, Grammar, Lit, Ref, alt, seq
from structgen.frontends.json_schema.translate import schema_to_grammar
from structgen.engine.vocab import Vocabulary

PIECES = sorted({bytes([b]) for b in range(256)} | {
    b",1", b",1,1", b",1,1,1", b",1,1,1,1", b"1,", b"1,1", b"1]", b",1]", b"[1", b"[1,1", b"[]", b"]]",
    b"],[", b",[", b"[[", b"]", b", ", b",\n  ", b"\n]", b"2,2,2,2,2,2,2,2"})
VOCAB = Vocabulary(PIECES + [None], eos_ids=[len(PIECES)])


def tokenize(text: str) -> list[int]:
    """Greedy longest match: enough to reach multi-element tokens at every boundary."""
    data, out, i = text.encode(), [], 0
    while i < len(data):
        piece = max((p for p in PIECES if data.startswith(p, i)), key=len)
        out.append(PIECES.index(piece))
        i += len(piece)
    return out


def walks(compiled, text: str) -> bool:
    m = compiled.matcher()
    return all(m.advance(t) for t in tokenize(text)) and m.can_end()


BOUNDS = [(0, 1), (1, 1), (2, 3), (0, 4), (3, None), (5, 6), (1, 9)]


@pytest.mark.parametrize("lo,hi", BOUNDS)
@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_counts_match_jsonschema_and_masks_match_brute_force(lo, hi, whitespace):
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": lo}
    if hi is not None:
        schema["maxItems"] = hi
    compiled = structgen.compile_json_schema(schema, VOCAB, whitespace=whitespace)
    validator = jsonschema.Draft202012Validator(schema)
    for n in range(11):
        value = [1] * n if n % 2 else [1] * (n - 1) + [2] * min(n, 1)
        texts = [json.dumps(value, separators=(",", ":"))]
        if whitespace == "flexible":
            texts += [json.dumps(value, indent=2), json.dumps(value)]
        for text in texts:
            assert walks(compiled, text) is validator.is_valid(value), (schema, text)
            if validator.is_valid(value):
                check_walk(compiled.matcher(), tokenize(text))


def test_nested_and_prefixed_counts():
    schema = {"type": "array", "minItems": 1, "maxItems": 3,
              "items": {"type": "array", "items": {"const": 1}, "minItems": 2, "maxItems": 4}}
    compiled = structgen.compile_json_schema(schema, VOCAB, whitespace="compact")
    validator = jsonschema.Draft202012Validator(schema)
    for value in ([], [[1]], [[1, 1]], [[1, 1], [1, 1, 1, 1]], [[1, 1]] * 3, [[1, 1]] * 4, [[1] * 5]):
        text = json.dumps(value, separators=(",", ":"))
        assert walks(compiled, text) is validator.is_valid(value), text
        if validator.is_valid(value):
            check_walk(compiled.matcher(), tokenize(text))
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"},
              "minItems": 3, "maxItems": 5}
    compiled = structgen.compile_json_schema(schema, VOCAB, whitespace="compact")
    for value in (["a"], ["a", 1], ["a", 1, 1], ["a", 1, 1, 1, 1], ["a", 1, 1, 1, 1, 1], [1, 1, 1]):
        text = json.dumps(value, separators=(",", ":"))
        assert walks(compiled, text) is jsonschema.Draft202012Validator(schema).is_valid(value), text


def _states(schema: dict) -> int:
    return sum(len(r.trans) for r in build_automaton(schema_to_grammar(schema, whitespace="compact")).rules)


def test_a_large_bound_costs_no_more_states_than_a_small_one():
    small = {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 20}
    large = {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 10_000}
    assert _states(large) == _states(small)


def test_exact_at_ten_thousand_items():
    schema = {"type": "array", "items": {"const": 1}, "minItems": 9_998, "maxItems": 10_000}
    compiled = structgen.compile_json_schema(schema, VOCAB, whitespace="compact")
    m = compiled.matcher()
    for t in tokenize("[1" + ",1" * 9_990):  # 9,991 items
        assert m.advance(t)
    close = PIECES.index(b"]")
    assert close not in mask_ids(m) and not m.can_end()  # below minItems
    check_walk(m, tokenize(",1,1,1,1,1,1,1,1,1]"))  # to 10,000: each mask against brute force
    m = compiled.matcher()
    for t in tokenize("[1" + ",1" * 9_999):
        assert m.advance(t)
    allowed = mask_ids(m)
    assert allowed == brute_force_allowed(m)
    assert PIECES.index(b"]") in allowed  # the count is at maxItems: no further element
    assert not any(PIECES[t].startswith(b",") for t in allowed)
    m = compiled.matcher()
    assert not all(m.advance(t) for t in tokenize("[1" + ",1" * 10_000 + "]"))


def test_unbounded_minimum_counts_past_the_token_length():
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 40}
    compiled = structgen.compile_json_schema(schema, VOCAB, whitespace="compact")
    for n in (38, 39, 40, 41, 60):
        assert walks(compiled, json.dumps([2] * n, separators=(",", ":"))) is (n >= 40), n
    check_walk(compiled.matcher(), tokenize(json.dumps([2] * 41, separators=(",", ":"))))


def test_a_counted_item_must_read_input():
    empty = Grammar.of("root", root=Counted(seq(Ref("maybe")), 1, 3), maybe=alt(Lit(b"a"), Lit(b"")))
    with pytest.raises(CompileError, match="read at least one byte"):
        build_automaton(empty)
    ok = Grammar.of("root", root=seq(Lit(b"["), Ref("items"), Lit(b"]")),
                    items=Counted(seq(Lit(b","), Ref("x")), 2, 2), x=alt(Lit(b"a"), Lit(b"bb")))
    compiled = structgen.CompiledGrammar(ok, VOCAB)
    assert walks(compiled, "[,a,bb]") and not walks(compiled, "[,a]") and not walks(compiled, "[,a,a,a]")
