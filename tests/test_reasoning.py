"""Reasoning before the answer: the thinking markers, a thinking budget that forces the end
marker (whole tokens, never more thinking than the budget), the answer valid after it, and
drafted output identical to step-by-step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structgen import OptionError
from structgen.core.ir import Grammar, Lit, seq
from structgen.decoding.config import DecodeConfig
from structgen.decoding.thinking import ThinkingMatcher
from structgen.engine.compiled import CompiledGrammar
from structgen.engine.vocab import Vocabulary
from structgen.frontends.structural_tag import free_text
from structgen.tasks.reasoning import thinking_markers

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
          "additionalProperties": False}
TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"


def _thinking(budget, opened=False):
    g = Grammar.of("root", root=seq(*(() if opened else (Lit(b"<t>"),)), free_text(("</t>",)), Lit(b"</t>ok")))
    return ThinkingMatcher(CompiledGrammar(g, BYTES).matcher(), start=None if opened else b"<t>", end=b"</t>",
                           end_ids=list(b"</t>"), budget=budget)


@pytest.mark.parametrize("budget", [0, 1, 5])
def test_the_budget_forces_the_end_marker(budget):
    m = _thinking(budget)
    assert all(m.advance(b) for b in b"<t>")
    for _ in range(budget):
        assert m.advance(ord("x"))
    assert not m.advance(ord("x")) and "budget" in m.last_rejection
    assert m.allowed_token_ids() == [ord("<")]
    assert m.forced_text() == "</t>"
    assert all(m.advance(b) for b in b"</t>ok") and m.can_end()
    assert m.thinking_tokens() == budget


def test_rollback_and_fork_restore_the_phase():
    m = _thinking(2, opened=True)
    assert m.advance(ord("a")) and m.advance(ord("b"))
    assert m.allowed_token_ids() == [ord("<")]
    other = m.fork()
    m.rollback(1)
    assert m.advance(ord("c"))  # one token of thinking left again
    assert other.allowed_token_ids() == [ord("<")]


def test_ending_early_leaves_the_budget_unused():
    m = _thinking(10)
    assert all(m.advance(b) for b in b"<t>hm</t>")
    assert m.forced_text() == "ok" and m.thinking_tokens() == 5  # h, m and the marker's first three bytes


def test_options_are_checked():
    with pytest.raises(OptionError, match="needs reasoning"):
        DecodeConfig(thinking_budget=4)
    with pytest.raises(OptionError, match="thinking_budget"):
        DecodeConfig(reasoning=True, thinking_budget=-1)
    with pytest.raises(OptionError, match="pair of marker"):
        DecodeConfig(reasoning=("<think>",))


def test_markers_from_a_chat_template_that_has_them(smollm2_tokenizer):
    import copy

    qwen = copy.copy(smollm2_tokenizer)
    qwen.chat_template = (TEMPLATES / "qwen3.jinja").read_text()
    assert thinking_markers(qwen, True) == ("<think>", "</think>")
    with pytest.raises(OptionError, match="has none"):
        thinking_markers(smollm2_tokenizer, True)


@pytest.mark.parametrize("budget", [0, 16, 64])
def test_reasoning_then_a_valid_answer_drafted_as_stepped(generator, budget):
    runs = [generator.json(ANSWER, "What is 17 + 25? Think step by step first.", max_new_tokens=96,
                           reasoning=("<think>", "</think>"), thinking_budget=budget, speculate=speculate)
            for speculate in (True, False)]
    drafted, stepped = runs
    assert (drafted.token_ids, drafted.reasoning) == (stepped.token_ids, stepped.reasoning)
    assert set(drafted.value) == {"answer"} and json.loads(drafted.text) == drafted.value
    assert drafted.reasoning_tokens <= budget
    assert "</think>" not in drafted.reasoning and "<think>" not in drafted.text
    if budget:
        assert drafted.stats.forward_passes < stepped.stats.forward_passes


def test_structural_and_tool_calls_take_reasoning(generator):
    spec = {"type": "structural_tag", "format": {"type": "const_string", "value": "done"}}
    r = generator.structural(spec, "Say done.", reasoning=("<think>", "</think>"), thinking_budget=4,
                             max_new_tokens=16)
    assert r.text == "done" and r.reasoning_tokens <= 4 and [s.text for s in r.segments] == ["done"]
    add = {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}
    r = generator.tool_calls([add], [{"role": "user", "content": "Add 2."}], tool_choice="required",
                             reasoning=("<think>", "</think>"), thinking_budget=8, max_new_tokens=64)
    assert r.message["tool_calls"][0]["function"]["name"] == "add" and r.reasoning_tokens <= 8


def test_the_processor_thinks_as_the_generator_does(generator):
    import torch

    import structgen

    prompt = "What is 17 + 25? Think step by step first."
    compiled = structgen.compile_json_schema(ANSWER, generator.tokenizer, whitespace="compact", strict=True,
                                             canonical=True, model=generator.model)
    processor = structgen.LogitsProcessor(compiled, reasoning=("<think>", "</think>"), thinking_budget=8,
                                          tokenizer=generator.tokenizer)
    ids = generator.prompt_ids(ANSWER, prompt)
    out = generator.model.generate(torch.tensor([ids]), logits_processor=[processor], max_new_tokens=48,
                                   do_sample=False, pad_token_id=generator.tokenizer.eos_token_id)
    new = [t for t in out[0, len(ids):].tolist() if t not in generator.vocabulary.eos_ids]
    r = generator.json(ANSWER, prompt, reasoning=("<think>", "</think>"), thinking_budget=8, max_new_tokens=48,
                       speculate=False)
    assert generator.tokenizer.decode(new) == "<think>" + r.reasoning + "</think>" + r.text
    with pytest.raises(OptionError, match="needs reasoning"):
        structgen.LogitsProcessor(compiled, thinking_budget=4)


def test_a_budget_spent_inside_a_character_waits_for_its_end():
    m = _thinking(1)
    assert all(m.advance(b) for b in b"<t>")
    assert m.advance("é".encode()[0])  # the budget is spent on half a character
    assert m.allowed_token_ids() != [ord("<")] and m.advance("é".encode()[1])
    assert m.allowed_token_ids() == [ord("<")]
