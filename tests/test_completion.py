"""The shortest completion of a parse position (structgen.engine.completion), checked against a
brute-force search over strings on small grammars, and spelled in real tokens."""

from __future__ import annotations

import pytest

import structgen
from structgen.engine.completion import completion_tokens, shortest_completion
from structgen.engine.vocab import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def brute_force(matcher, alphabet: bytes, longest: int) -> int | None:
    """Length of the shortest string over ``alphabet`` (up to ``longest``) that completes the
    matcher: every string tried, level by level, a prefix the matcher refuses cut off with all its
    extensions (they cannot complete either). Strings that lead to the same parse position are
    kept once (what follows them is the same), with no bound or ordering of any kind."""
    level = [matcher]
    for n in range(longest + 1):
        if any(m.can_end() for m in level):
            return n
        following, seen = [], set()
        for m in level:
            for b in alphabet:
                child = m.fork()
                if child.advance(b) and child.stacks() not in seen:
                    seen.add(child.stacks())
                    following.append(child)
        level = following
    return None


CASES = [  # (compiled, alphabet, prefixes walked before the search)
    (lambda: structgen.compile_regex(r"(ab|c)+d", BYTES), b"abcd", [b"", b"a", b"ab", b"c"]),
    (lambda: structgen.compile_grammar('start: "(" start ")" | "x"', BYTES), b"()x", [b"", b"(((", b"((x"]),
    (lambda: structgen.compile_grammar('start: NAME ("," NAME)*\nNAME: /[a-z]+/', BYTES), b"ab,",
     [b"", b"ab,", b"a"]),
    (lambda: structgen.compile_json_schema({"type": "array", "items": {"enum": [1, 22]}, "minItems": 3},
                                           BYTES, whitespace="compact"), b"[],12", [b"", b"[", b"[22,"]),
    (lambda: structgen.compile_json_schema(
        {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"const": 1}}, "required": ["a", "b"]},
        BYTES, whitespace="compact", strict=True), b'{}":,ab1true', [b"{", b'{"b":1', b'{"a":']),
    (lambda: structgen.compile_json_schema(  # any value under "m": nesting without end
        {"type": "object", "properties": {"m": {}, "c": {"const": 0}}, "required": ["c"]},
        BYTES, whitespace="compact", strict=True), b'{}[]":,mc0', [b"", b'{"m":[[', b'{"m":{"m":']),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_shortest_completion_equals_brute_force(case):
    compile, alphabet, prefixes = CASES[case]
    compiled = compile()
    for prefix in prefixes:
        m = compiled.matcher()
        assert all(m.advance(b) for b in prefix), prefix
        found = shortest_completion(m)
        assert found is not None
        expected = brute_force(m, alphabet, len(found))
        assert len(found) == expected, (prefix, found)
        walked = m.fork()
        assert all(walked.advance(b) for b in found) and walked.can_end()


def test_complete_and_impossible_positions():
    m = structgen.compile_regex("ab", BYTES).matcher()
    assert m.advance(ord("a")) and m.advance(ord("b"))
    assert shortest_completion(m) == b"" and completion_tokens(m) == []
    assert m.advance(256)  # ended: nothing more to say
    assert shortest_completion(m) is None


def test_tokens_of_a_real_vocabulary(smollm2_tokenizer):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {
        "type": "array", "items": {"type": "string"}, "minItems": 2}}, "required": ["name", "tags"]}
    compiled = structgen.compile_json_schema(schema, smollm2_tokenizer, whitespace="compact", strict=True)
    m = compiled.matcher()
    for token in smollm2_tokenizer.encode('{"name":"Ada', add_special_tokens=False):
        assert m.advance(token)
    path = shortest_completion(m)
    tokens = completion_tokens(m)
    assert path == b'","tags":["",""]}' and tokens is not None and len(tokens) < len(path)
    assert all(m.advance(t) for t in tokens) and m.can_end()


def test_free_values_do_not_stop_the_search():
    """Under a member that takes any JSON value, positions nest without end (``[[[[``, ``{"m":{"m":``);
    a plain breadth-first search spends its whole limit among them before it reaches a
    28-byte completion, the pruned one walks straight to it (the default model's extraction
    pair p09 had no budget count at all before)."""
    from structgen.engine.completion import LIMIT, LowerBounds, _pruned_search

    schema = {"type": "object", "required": ["completion"], "properties": {
        "_meta": {"type": "object", "additionalProperties": {}},
        "completion": {"type": "object", "required": ["values"], "properties": {
            "total": {"type": "integer"}, "values": {"type": "array", "items": {"type": "string"}}}}}}
    m = structgen.compile_json_schema(schema, BYTES, whitespace="compact").matcher()
    assert shortest_completion(m) == b'{"completion":{"values":[]}}'
    plain = _pruned_search(m.machine, LowerBounds.of(m.machine), m.stacks(), 10**9, LIMIT)  # no pruning
    assert plain[0] is None
    for prefix in (b'{"_meta":{"a":[[', b'{"completion":{"total":1'):
        m = structgen.compile_json_schema(schema, BYTES, whitespace="compact").matcher()
        assert all(m.advance(b) for b in prefix)
        rest = shortest_completion(m)
        assert rest is not None and rest.endswith(b'"completion":{"values":[]}}' if b"_meta" in prefix else b',"values":[]}}')
