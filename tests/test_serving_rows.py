"""What a serving engine's requests carry (:mod:`structgen.integrations.constraints`) and the rows
of its batch (:mod:`structgen.integrations.rows`), without the engine: the vLLM adapter on top is
tested in its own virtualenv (``tests/with_vllm/``).

The batch is driven the way vLLM drives its persistent batch (requests added, removed, moved,
swapped, preempted and re-added with the tokens they had, a placeholder for a token still being
copied back) by a seeded random schedule on the real SmolLM2 tokenizer, and every mask is
compared with the mask of a fresh matcher walked over the row's tokens.
"""

from __future__ import annotations

import json
import logging
import os
import random

import numpy as np
import pytest
import torch

from structgen.errors import InputTooLargeError, OptionError, SchemaError
from structgen.integrations.constraints import BYTES, compile_constraint, read_constraint
from structgen.integrations.rows import BatchRows

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}}},
          "required": ["name", "tags"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CONSTRAINTS = [{"json_schema": SCHEMA}, {"regex": "[0-9]{1,4}(\\.[0-9]{1,2})?"},
               {"grammar": 'start: "(" start ")" | "x"'}, {"tools": TOOLS}, None]


def _allowed(row_logits: torch.Tensor) -> np.ndarray:
    return np.flatnonzero(torch.isfinite(row_logits).numpy())


def _reference(compiled, output, width):
    matcher = compiled.matcher()
    for t in output:
        assert matcher.advance(t)
    bits = np.unpackbits(matcher.mask_words().view(np.uint8), bitorder="little")[:width]
    return np.flatnonzero(bits)


def test_rows_follow_an_engines_schedule(smollm2_tokenizer):
    vocab_width = len(smollm2_tokenizer) + 64  # padded logits, as many models have
    compiled = [compile_constraint(read_constraint(c), smollm2_tokenizer) if c else None for c in CONSTRAINTS]
    rows = BatchRows(vocab_width, compiled[0].vocabulary.eos_ids)
    rng = random.Random(7)
    batch: dict[int, tuple[int, list[int]]] = {}  # row -> (constraint index, live output)
    parked: list[tuple[int, list[int]]] = []      # preempted requests, with their tokens
    checked = 0
    for step in range(160):
        op = rng.random()
        free = [i for i in range(8) if i not in batch]
        if op < 0.25 and free:  # a request joins: new, or preempted earlier and back with its tokens
            kind, output = parked.pop() if parked and rng.random() < 0.5 else (rng.randrange(len(CONSTRAINTS)), [])
            index = rng.choice(free)
            batch[index] = (kind, output)
            rows.add(index, compiled[kind].matcher() if compiled[kind] else None, output)
        elif op < 0.35 and batch:  # leaves, finished or preempted
            index = rng.choice(sorted(batch))
            kind, output = batch.pop(index)
            rows.remove(index)
            if rng.random() < 0.5:
                parked.append((kind, output))
        elif op < 0.45 and batch:  # moves (condensing the batch) or swaps
            a = rng.choice(sorted(batch))
            b = rng.choice([i for i in range(8) if i != a])
            swap = b in batch
            moved = batch.pop(a)
            if swap:
                batch[a] = batch.pop(b)
            batch[b] = moved
            rows.move(a, b, swap)
        logits = torch.randn(8, vocab_width)
        placeholder = None
        if batch and rng.random() < 0.2:  # a token still being copied back: a -1 placeholder
            placeholder = rng.choice(sorted(batch))
            batch[placeholder][1].append(-1)
        masked = rows.mask(logits.clone())
        if placeholder is not None:
            batch[placeholder][1].pop()
        for index in range(8):
            kind, output = batch.get(index, (None, None))
            if kind is None or compiled[kind] is None:
                assert torch.equal(masked[index], logits[index]), f"step {step}: free row {index} was masked"
                continue
            expected = _reference(compiled[kind], output, vocab_width)
            assert np.array_equal(_allowed(masked[index]), expected), f"step {step}, row {index}"
            checked += 1
            eos = compiled[kind].vocabulary.eos_ids
            choice = int(rng.choice(expected))
            if choice not in eos:  # the engine samples a legal token
                output.append(choice)
            else:  # the request ends
                batch.pop(index)
                rows.remove(index)
    assert checked > 300


def test_a_row_whose_tokens_change_under_it_walks_back_to_the_common_prefix(smollm2_tokenizer):
    compiled = compile_constraint(read_constraint({"json_schema": SCHEMA}), smollm2_tokenizer)
    width = len(smollm2_tokenizer)
    rows = BatchRows(width, compiled.vocabulary.eos_ids)
    prefix = smollm2_tokenizer.encode('{"name":"', add_special_tokens=False)
    output = prefix + smollm2_tokenizer.encode("abcdefg", add_special_tokens=False)
    rows.add(0, compiled.matcher(), output)
    rows.mask(torch.zeros(1, width))
    output[:] = prefix + smollm2_tokenizer.encode("x", add_special_tokens=False)  # 7 letters fewer, then one
    masked = rows.mask(torch.zeros(1, width))
    assert np.array_equal(_allowed(masked[0]), _reference(compiled, output, width))


def test_a_token_outside_the_grammar_leaves_only_end_of_sequence(smollm2_tokenizer, caplog):
    compiled = compile_constraint(read_constraint({"regex": "[0-9]+"}), smollm2_tokenizer)
    width = len(smollm2_tokenizer)
    rows = BatchRows(width, compiled.vocabulary.eos_ids)
    output = smollm2_tokenizer.encode("12", add_special_tokens=False) + smollm2_tokenizer.encode(
        "abc", add_special_tokens=False)  # e.g. a stop string or a token an engine forced
    rows.add(3, compiled.matcher(), output)
    with caplog.at_level(logging.WARNING, logger="structgen.integrations.rows"):
        masked = rows.mask(torch.zeros(4, width))
    assert "outside the grammar" in caplog.text
    assert _allowed(masked[3]).tolist() == sorted(compiled.vocabulary.eos_ids)
    assert torch.equal(masked[:3], torch.zeros(3, width))


def _self_containing() -> dict:
    schema: dict = {"type": "object"}
    schema["properties"] = {"again": schema}
    return schema


def test_constraints_are_read_strictly():
    assert read_constraint('{"json_schema": "{\\"type\\": \\"integer\\"}"}').value == {"type": "integer"}
    assert read_constraint({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}}}
                           ).value == SCHEMA
    assert read_constraint({"response_format": {"type": "json_object"}}).value == {"type": "object"}
    for bad, message in [("{", "not JSON"), ([1], "must be an object"), ({}, "names none"),
                         ({"regex": "a", "grammar": "start: \"a\""}, "exactly one"),
                         ({"regex": "a", "start": "s"}, "unknown key"), ({"sql": 5}, "must be a string"),
                         ({"response_format": {"type": "text"}}, "response_format must be"),
                         ("[" * 100_000, "nests too deeply"),
                         ({"json_schema": "[" * 100_000}, "nests too deeply"),
                         ({"json_schema": {}, "response_format": {"type": "json_object"}}, "both"),
                         ({"json_schema": _self_containing()}, "cannot be written as JSON")]:
        with pytest.raises(OptionError, match=message):
            read_constraint(bad)
    for big in ("x" * 4_000_001, {"json_schema": {"const": "a" * 4_000_000}}):  # text or dict: one limit
        with pytest.raises(InputTooLargeError, match="at most 4,000,000"):
            read_constraint(big)


def test_compiled_as_generation_compiles_and_cached():
    spec = read_constraint({"json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}})
    compiled = compile_constraint(spec, BYTES)
    assert compile_constraint(read_constraint(json.dumps({"json_schema": {"type": "object", "properties": {
        "a": {"type": "integer"}}}})), BYTES) is compiled
    m = compiled.matcher()
    assert all(m.advance(b) for b in b'{"a":1')
    assert not m.advance(ord(","))  # strict objects: no key the schema does not name
    assert m.forced_text() == ""
    with pytest.raises(SchemaError):
        compile_constraint(read_constraint({"json_schema": {"type": "strnig"}}), BYTES)


def test_property_order_is_two_constraints_and_structural_tags_are_one_kind():
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
    ba = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}, "required": ["a", "b"]}
    first, second = (compile_constraint(read_constraint({"json_schema": s}), BYTES) for s in (ab, ba))
    assert first.matcher().forced_text() == '{"a":' and second.matcher().forced_text() == '{"b":'
    tag = {"type": "structural_tag", "format": {"type": "tag", "begin": "<n>", "end": "</n>",
                                                "content": {"type": "json_schema", "json_schema": {"type": "integer"}}}}
    m = compile_constraint(read_constraint(json.dumps({"structural_tag": tag})), BYTES).matcher()
    assert m.forced_text() == "<n>" and all(m.advance(b) for b in b"<n>42</n>") and m.can_end()


def test_tool_constraints_take_the_templates_format(smollm2_tokenizer):
    compiled = compile_constraint(read_constraint({"tools": TOOLS}), smollm2_tokenizer)
    assert compiled.matcher().forced_text().startswith('<tool_call>[{"name": "get_weather"')  # SmolLM2: "json"
    hermes = compile_constraint(read_constraint({"tools": TOOLS, "format": "hermes"}), smollm2_tokenizer)
    assert hermes.matcher().forced_text().startswith('<tool_call>\n{"name": "get_weather"')


def test_native_formats_and_reasoning_in_a_constraint(smollm2_tokenizer):
    from structgen.integrations.constraints import constraint_matcher

    kimi = compile_constraint(read_constraint({"tools": TOOLS, "format": "kimi"}), smollm2_tokenizer)
    assert kimi.matcher().forced_text().startswith("<|tool_calls_section_begin|><|tool_call_begin|>functions.")
    spec = read_constraint({"json_schema": {"type": "integer"}, "reasoning": ["<think>", "</think>"],
                            "thinking_budget": 3})
    m = constraint_matcher(spec, smollm2_tokenizer, smollm2_tokenizer)
    head = smollm2_tokenizer.encode("<think>a b c", add_special_tokens=False)
    assert all(m.advance(t) for t in head) and m.forced_text() == "</think>"
    opened = constraint_matcher(spec, smollm2_tokenizer, smollm2_tokenizer,
                                smollm2_tokenizer.encode("Q?<think>", add_special_tokens=False))
    assert opened.advance(smollm2_tokenizer.encode("x", add_special_tokens=False)[0])  # already thinking
    for bad, message in [({"regex": "a", "reasoning": "yes"}, "'reasoning' is true or"),
                         ({"regex": "a", "thinking_budget": 4}, "needs 'reasoning'"),
                         ({"regex": "a", "reasoning": True, "thinking_budget": -1}, "integer >= 0")]:
        with pytest.raises(OptionError, match=message):
            read_constraint(bad)


def test_sql_constraints_read_only_the_operators_folders(monkeypatch, tmp_path):
    from sql_data import SQL_DIR

    database = SQL_DIR / "databases" / "restaurants.sqlite"
    spec = read_constraint({"sql": str(database)})
    monkeypatch.delenv("STRUCTGEN_SQL_DIRS", raising=False)
    with pytest.raises(OptionError, match="needs STRUCTGEN_SQL_DIRS"):
        compile_constraint(spec, BYTES)
    monkeypatch.setenv("STRUCTGEN_SQL_DIRS", str(tmp_path))
    with pytest.raises(OptionError, match="not under a folder of STRUCTGEN_SQL_DIRS"):
        compile_constraint(spec, BYTES)
    outside = read_constraint({"sql": str(tmp_path / ".." / database.name)})  # no way out through ".."
    with pytest.raises(OptionError, match="not under a folder"):
        compile_constraint(outside, BYTES)
    monkeypatch.setenv("STRUCTGEN_SQL_DIRS", f"{tmp_path}{os.pathsep}{database.parent}")
    m = compile_constraint(spec, BYTES).matcher()
    assert all(m.advance(b) for b in b"SELECT name FROM restaurant") and m.can_end()
    monkeypatch.setenv("STRUCTGEN_SQL_DIRS", str(tmp_path))  # narrowed: the cached grammar is not served
    with pytest.raises(OptionError, match="not under a folder"):
        compile_constraint(spec, BYTES)
