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


@pytest.mark.parametrize("fixture, markers", [
    ("qwen3.jinja", ("<think>", "</think>")),
    ("kimi_k2_thinking.jinja", ("<think>", "</think>")),
    ("gpt_oss.jinja", ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>")),
    ("cohere_command_r7b.jinja", ("<|START_THINKING|>", "<|END_THINKING|>")),
])
def test_markers_from_a_chat_template_that_has_them(fixture, markers, smollm2_tokenizer):
    import copy

    family = copy.copy(smollm2_tokenizer)
    family.chat_template = (TEMPLATES / fixture).read_text()
    assert thinking_markers(family, True) == markers
    with pytest.raises(OptionError, match="has none"):
        thinking_markers(smollm2_tokenizer, True)


def test_the_templates_thinking_switch_follows_reasoning(smollm2_tokenizer):
    """Qwen 3's enable_thinking: off, the prompt closes an empty thinking block, so the answer
    starts where the model expects it; on, the model opens the thinking itself."""
    import copy

    from structgen.frontends.tool_calls import read_tools
    from structgen.frontends.tool_formats import CALL_FORMATS
    from structgen.tasks.tool_calls import tool_prompt

    qwen = copy.copy(smollm2_tokenizer)
    qwen.chat_template = (TEMPLATES / "qwen3.jinja").read_text()
    tools = read_tools([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    messages = [{"role": "user", "content": "Call f."}]
    off, _, by = tool_prompt(qwen, tools, messages, CALL_FORMATS["qwen_3"], thinking=False)
    on, _, _ = tool_prompt(qwen, tools, messages, CALL_FORMATS["qwen_3"], thinking=True)
    assert by == "template" and off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert on.endswith("<|im_start|>assistant\n")


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


def test_markers_that_are_special_tokens_are_written_with_those_tokens(smollm2_tokenizer):
    """Qwen 3, DeepSeek and Kimi have <think> and </think> as single special tokens: on such a
    tokenizer (the default model's with them added) the thinking starts and ends with them, and
    the budget forces the end marker's own token."""
    import copy

    from tokenizers import AddedToken

    import structgen
    from structgen.tasks.reasoning import ThinkingGrammar

    family = copy.deepcopy(smollm2_tokenizer)
    family.add_tokens([AddedToken(t, special=True, normalized=False) for t in ("<think>", "</think>")],
                      special_tokens=True)
    start, end = family.convert_tokens_to_ids(["<think>", "</think>"])
    compiler = structgen.Compiler(family, disk_cache=False)
    compiled = compiler.json_schema(ANSWER, whitespace="compact")
    assert compiled.vocabulary.tokens[start] is None  # a special token never matches JSON text
    think = ThinkingGrammar(compiled, ("<think>", "</think>"), budget=3, compiler=compiler,
                            end_ids=family.encode("</think>", add_special_tokens=False))
    assert think.end_ids == [end] and think.vocabulary.token_bytes([start, end]) == b"<think></think>"
    m = think.matcher()
    head = family.encode("<think>a b c", add_special_tokens=False)
    assert head[0] == start and len(head) == 4
    assert all(m.advance(t) for t in head)
    assert m.allowed_token_ids() == [end]
    answer = family.encode('</think>{"answer":4}', add_special_tokens=False)
    assert answer[0] == end and all(m.advance(t) for t in answer) and m.can_end()
    # the answer's JSON cannot hold the markers' tokens
    m = think.matcher()
    assert all(m.advance(t) for t in family.encode('<think>x</think>{"answer":', add_special_tokens=False))
    assert not m.advance(start) and not m.advance(end)


def test_reasoning_true_reads_a_bundled_templates_markers(generator):
    """The default model with Qwen 3's chat template (tests/fixtures): reasoning=True finds
    <think>/</think> there and turns the template's enable_thinking on; the thinking is kept
    apart, within its budget, and drafted output is identical to step-by-step."""
    import copy

    import structgen

    qwen = copy.copy(generator.tokenizer)
    qwen.chat_template = (TEMPLATES / "qwen3.jinja").read_text()
    g = structgen.Generator(generator.model, qwen)
    runs = [g.json(ANSWER, "What is 17 + 25?", reasoning=True, thinking_budget=12, max_new_tokens=64,
                   speculate=speculate) for speculate in (True, False)]
    assert (runs[0].token_ids, runs[0].reasoning) == (runs[1].token_ids, runs[1].reasoning)
    r = runs[0]
    assert set(r.value) == {"answer"} and r.reasoning_tokens <= 12 and "</think>" not in r.reasoning
    ids = g.prompt_ids(ANSWER, "What is 17 + 25?")  # reasoning off: the template closed an empty block
    assert qwen.decode(ids).endswith("<think>\n\n</think>\n\n")


def test_a_stream_labels_reasoning_and_answer(generator):
    from structgen.api.streaming import Chunk

    items = list(generator.json(ANSWER, "What is 17 + 25? Think step by step first.", max_new_tokens=64,
                                reasoning=("<think>", "</think>"), thinking_budget=16, stream=True))
    result, chunks = items[-1], items[:-1]
    assert chunks and all(isinstance(c, Chunk) for c in chunks)
    assert "".join(c for c in chunks if c.kind == "reasoning") == result.reasoning
    assert "".join(c for c in chunks if c.kind == "answer") == result.text
    kinds = [c.kind for c in chunks]
    assert kinds == sorted(kinds, key=["reasoning", "answer"].index)  # thinking first, then the answer
