"""Tool calls: BFCL's calls walk their grammars, bad ones do not, specs are checked, modes hold.

The grammar tests walk the canonical text of each BFCL example call (``tests/toolcall_data.py``)
token by token on the real SmolLM2 tokenizer. Prompt tests use the real Qwen 2.5 and Llama 3.1
chat templates (``tests/fixtures/chat_templates``) on the SmolLM2 tokenizer. Generation tests
run the default model.
"""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import jsonschema
import pytest

import structgen
from structgen.frontends.tool_calls import (FORMATS, ToolSpecError, call_text, parse_calls, read_tool_choice, read_tools,
                                  tool_call_grammar)
from structgen.tasks.tool_calls import MessagesError, template_format, tool_prompt
from structgen.engine.vocab import Vocabulary

from toolcall_data import CALL_CATEGORIES, canonical, cases, undeclared_keys

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
TEMPLATES = Path(__file__).resolve().parent / "fixtures" / "chat_templates"


def tool(name: str, properties: dict, required: tuple = (), **extra) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"The {name} tool.", "parameters": {
        "type": "object", "properties": properties, "required": list(required), **extra}}}


WEATHER = tool("get_weather", {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}, ("city",))
ADD = tool("add", {"a": {"type": "number"}, "b": {"type": "number"}}, ("a", "b"))
TOOLS = [WEATHER, ADD]


def walk(compiled, text: str, tokenizer=None) -> str | None:
    """Why ``compiled`` refuses ``text`` walked token by token (None: accepted, complete)."""
    ids = list(text.encode()) if tokenizer is None else tokenizer.encode(text, add_special_tokens=False)
    m = compiled.matcher()
    for k, t in enumerate(ids):
        if not m.advance(t):
            return f"token {k}: {m.last_rejection}"
    return None if m.can_end() else "incomplete"


def compiled_for(tools, fmt="json", vocab=BYTES, **options):
    return structgen.Compiler(vocab, disk_cache=False).grammar(
        tool_call_grammar(read_tools(tools), FORMATS[fmt], **options))


def example_text(case, fmt):
    by = {t["function"]["name"]: t["function"]["parameters"] for t in case["tools"]}
    return call_text(fmt, [(c["name"], canonical(by[c["name"]], c["arguments"])) for c in case["example_calls"]])


# --------------------------------------------------------------------------- BFCL walks

def test_every_bfcl_example_call_walks(smollm2_tokenizer):
    """Each valid BFCL example call walks its case's grammar (SmolLM2 tokens, default format).

    With closed objects (the default, ``strict``) exactly the calls using keys their schema does
    not declare are refused, and those walk with ``strict=False``. Every 5th case also walks in
    the Hermes and Llama 3 formats.
    """
    compiler = structgen.Compiler(smollm2_tokenizer, disk_cache=False)
    walked, open_only, refused = 0, [], []
    for category in CALL_CATEGORIES:
        for n, case in enumerate(cases(category)):
            if not all(c["valid_against_normalized_schema"] for c in case["example_calls"]):
                continue
            specs = read_tools(case["tools"])
            formats = ("json", "hermes", "llama3") if n % 5 == 0 else ("json",)
            for name in formats:
                fmt = FORMATS[name]
                why = walk(compiler.grammar(tool_call_grammar(specs, fmt, choice="required")),
                           example_text(case, fmt), smollm2_tokenizer)
                if why is not None and name == "json":
                    by = {s.name: s.parameters for s in specs}
                    if any(undeclared_keys(by[c["name"]], c["arguments"]) for c in case["example_calls"]) and walk(
                            compiler.grammar(tool_call_grammar(specs, fmt, choice="required", strict=False)),
                            example_text(case, fmt), smollm2_tokenizer) is None:
                        open_only.append(case["id"])
                        continue
                if why is not None:
                    refused.append((case["id"], name, why))
            walked += 1
    assert refused == []
    assert walked == 2329  # cases whose every example call is valid
    assert sorted(open_only) == ["live_multiple_189-83-0", "live_multiple_862-181-3"]


def test_flagged_invalid_bfcl_calls_are_refused(smollm2_tokenizer):
    """The 22 calls the data flags as breaking their schema are refused, each on its own, while
    the valid calls of the same cases walk (one case's schema has no valid value at all: its
    enum of strings on an array, refused when compiled)."""
    compiler = structgen.Compiler(smollm2_tokenizer, disk_cache=False)
    fmt = FORMATS["json"]
    flagged, valid_beside, unsatisfiable = 0, 0, []
    for category in CALL_CATEGORIES:
        for case in cases(category):
            if all(c["valid_against_normalized_schema"] for c in case["example_calls"]):
                continue
            try:
                compiled = compiler.grammar(tool_call_grammar(read_tools(case["tools"]), fmt, choice="required",
                                                              strict=False))
            except structgen.UnsupportedFeatureError as err:
                unsatisfiable.append((case["id"], err.keyword, err.pointer))
                flagged += sum(c["valid_against_normalized_schema"] is False for c in case["example_calls"])
                continue
            by = {t["function"]["name"]: t["function"]["parameters"] for t in case["tools"]}
            for call in case["example_calls"]:
                text = call_text(fmt, [(call["name"], canonical(by[call["name"]], call["arguments"]))])
                why = walk(compiled, text, smollm2_tokenizer)
                if call["valid_against_normalized_schema"]:
                    assert why is None, (case["id"], why)
                    valid_beside += 1
                else:
                    assert why is not None, case["id"]
                    flagged += 1
    assert flagged == 22 and valid_beside == 5
    assert unsatisfiable == [("live_simple_71-35-0", "enum", "/0/function/parameters/properties/metrics")]


def _mutants(case):
    """(kind, tools, calls) variants of a case's first call that its schema must refuse."""
    call = case["example_calls"][0]
    tools = case["tools"]
    by = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    params = by[call["name"]]
    args = canonical(params, call["arguments"])
    yield "wrong name", tools, [(call["name"] + "_x", args)]
    closed = copy.deepcopy(tools)
    for t in closed:
        t["function"]["parameters"]["additionalProperties"] = False
    yield "extra key", closed, [(call["name"], {**args, "zz_extra": 1})]
    for key, value in args.items():
        kind = params["properties"].get(key, {}).get("type")
        wrong = {"integer": "7", "number": "7.5", "boolean": "true", "string": 7, "array": {}, "object": []}.get(kind)
        if isinstance(kind, str) and wrong is not None:
            yield "wrong type", tools, [(call["name"], {**args, key: wrong})]
            break


def test_negative_walks_are_refused(smollm2_tokenizer):
    """Over simple_python, multiple and parallel: a wrong function name, an extra key under
    ``additionalProperties: false`` and a wrong type are each refused, in open-object mode too."""
    compiler = structgen.Compiler(smollm2_tokenizer, disk_cache=False)
    counts: dict[str, int] = {}
    for category in ("simple_python", "multiple", "parallel"):
        for case in cases(category):
            for kind, tools, calls in _mutants(case):
                text = call_text(FORMATS["json"], calls)
                compiled = compiler.grammar(tool_call_grammar(read_tools(tools), FORMATS["json"], choice="required",
                                                              strict=False))
                assert walk(compiled, text, smollm2_tokenizer) is not None, (case["id"], kind, text)
                counts[kind] = counts.get(kind, 0) + 1
    assert counts == {"wrong name": 800, "extra key": 800, "wrong type": 800}


# ------------------------------------------------------------------------ the grammar modes

@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_modes_and_parallel_calls(fmt):
    f = FORMATS[fmt]
    one = call_text(f, [("add", {"a": 1, "b": 2})])
    two = call_text(f, [("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2.5})])
    text_then_call = "Let me add. " + one
    expect = {  # mode: (one call, two calls, plain text, text then a call)
        "required": (True, True, False, False),
        "auto": (True, True, True, True),  # llama3: calls start the answer, later JSON is text
        "none": (False, False, True, not f.text_first),
    }
    for mode, wanted in expect.items():
        compiled = compiled_for(TOOLS, fmt, choice=mode)
        got = tuple(walk(compiled, t) is None for t in (one, two, "Hello there.", text_then_call))
        assert got == wanted, mode
    single = compiled_for(TOOLS, fmt, choice="required", parallel=False)
    assert walk(single, one) is None and walk(single, two) is not None
    named = compiled_for(TOOLS, fmt, choice="required", names=("add",))
    assert walk(named, one) is None and walk(named, call_text(f, [("get_weather", {"city": "Oslo"})])) is not None


@pytest.mark.parametrize("mode", ["auto", "none"])
def test_text_answers_are_never_empty(mode):
    compiled = compiled_for(TOOLS, "hermes", choice=mode)
    m = compiled.matcher()
    assert not m.can_end()  # end-of-sequence is illegal first
    assert walk(compiled, "") and walk(compiled, " \n ")
    assert walk(compiled, "Hi <tool_call> there") is not None  # the trigger opens a call, not text
    assert walk(compiled, "a < b, <tool, tool_call>") is None


def test_required_constrains_from_the_first_token():
    m = compiled_for(TOOLS, "hermes", choice="required").matcher()
    assert m.forced_text() == '<tool_call>\n{"name": "'
    m = compiled_for(TOOLS, "json", choice="required", names=("add",)).matcher()
    assert m.forced_text() == '<tool_call>[{"name": "add", "arguments": {"a": '


def test_free_form_objects_stay_open_and_declared_ones_close():
    t = tool("f", {"meta": {"type": "object"}, "point": {"type": "object", "properties": {"x": {"type": "number"}}}})
    compiled = compiled_for([t], choice="required")
    assert walk(compiled, call_text(FORMATS["json"], [("f", {"meta": {"any": [1]}, "point": {"x": 1}})])) is None
    assert walk(compiled, call_text(FORMATS["json"], [("f", {"point": {"x": 1, "y": 2}})])) is not None


def test_parse_calls_reads_what_call_text_writes():
    for f in FORMATS.values():
        calls = [("get_weather", {"city": "Zürich"}), ("add", {"a": 1e-9, "b": -2})]
        assert parse_calls(f, call_text(f, calls)) == (None, calls)
    assert parse_calls(FORMATS["json"], "Hi.") == ("Hi.", [])


# --------------------------------------------------------------------------- bad tool specs

@pytest.mark.parametrize("tools, tool, pointer, words", [
    ("not a list", None, "", "must be a list"),
    ([{"type": "function", "function": {"parameters": {}}}], None, "/0/function", "no name"),
    ([ADD, tool("add", {})], "add", "/1/function/name", "used twice"),
    ([tool("bad name!", {})], None, "/0/function/name", "letters, digits"),
    ([{"type": "retrieval"}], None, "/0/type", "(\"function\" or \"custom\")"),
    ([tool("f", {"x": {"type": "objec"}})], "f", "/0/function/parameters/properties/x/type", "not a valid JSON schema"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}], "f",
     "/0/function/parameters/type", "must describe an object"),
    ([{"type": "function", "function": {"name": "f", "parameters": [1]}}], "f", "/0/function/parameters",
     "JSON schema object"),
])
def test_bad_tool_specs_name_the_tool_and_path(tools, tool, pointer, words):
    with pytest.raises(ToolSpecError) as err:
        read_tools(tools)
    assert err.value.tool == tool and err.value.pointer == pointer and words in str(err.value)
    assert isinstance(err.value, ValueError)


def test_unsupported_keywords_name_the_tool_and_path():
    t = tool("lookup", {"ids": {"type": "array", "items": {"type": "string"}, "uniqueItems": True,
                                "maxItems": 40}})
    with pytest.raises(structgen.UnsupportedFeatureError) as err:
        compiled_for([ADD, t], choice="required")
    assert err.value.keyword == "uniqueItems" and err.value.tool == "lookup"
    assert err.value.pointer == "/1/function/parameters/properties/ids/uniqueItems"
    assert "tool 'lookup'" in str(err.value)


@pytest.mark.parametrize("choice, words", [
    ("sometimes", "must be"),
    ({"type": "function", "function": {"name": "nope"}}, "not among the tools"),
    ({"type": "function"}, "named tool_choice"),
    (3, "string or a dict"),
])
def test_bad_tool_choice(choice, words):
    with pytest.raises(ToolSpecError, match=words):
        read_tool_choice(choice, read_tools(TOOLS))
    with pytest.raises(ToolSpecError, match="at least one tool"):
        read_tool_choice("required", [])
    assert read_tool_choice({"type": "function", "function": {"name": "add"}}, read_tools(TOOLS)) == (
        "required", ("add",))


# ------------------------------------------------------------------------------ the prompt

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Oslo, and 2+3?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4 C, snow"},
    {"role": "tool", "tool_call_id": "call_2", "content": "5"},
]


def with_template(tokenizer, name):
    twin = copy.copy(tokenizer)
    twin.chat_template = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    return twin


def test_smollm2_template_ignores_tools_so_structgen_renders_them(smollm2_tokenizer):
    assert template_format(smollm2_tokenizer) is None
    specs = read_tools(TOOLS)
    text, fmt, by = tool_prompt(smollm2_tokenizer, specs, CONVERSATION)
    assert (fmt.name, by) == ("json", "structgen")
    assert '"name": "get_weather"' in text and "You are terse." in text
    assert '<tool_call>[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add"' in text
    assert "The function get_weather returned: 4 C, snow\nThe function add returned: 5<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_qwen_template_renders_tools_calls_and_results(smollm2_tokenizer):
    tok = with_template(smollm2_tokenizer, "qwen2.5_instruct")
    assert template_format(tok) is FORMATS["hermes"]
    text, fmt, by = tool_prompt(tok, read_tools(TOOLS), CONVERSATION)
    assert (fmt.name, by) == ("hermes", "template")
    assert "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"" in text
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>' in text
    assert "<tool_response>\n4 C, snow\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_llama3_template_renders_tools_and_falls_back_for_two_calls(smollm2_tokenizer):
    tok = with_template(smollm2_tokenizer, "llama3.1_instruct")
    assert template_format(tok) is FORMATS["llama3"]
    one_call = CONVERSATION[:2] + [{**CONVERSATION[2], "tool_calls": CONVERSATION[2]["tool_calls"][:1]},
                                   CONVERSATION[3]]
    text, fmt, by = tool_prompt(tok, read_tools(TOOLS), one_call)
    assert (fmt.name, by) == ("llama3", "template")
    assert '{"name": "get_weather", "parameters": {"city": "Oslo"}}<|eot_id|>' in text
    assert "<|start_header_id|>ipython<|end_header_id|>" in text
    # Llama 3.1's template refuses two calls in one turn: structgen renders the turn itself.
    text, fmt, by = tool_prompt(tok, read_tools(TOOLS), CONVERSATION)
    assert (fmt.name, by) == ("llama3", "structgen")
    assert '{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "add"' in text
    assert '{"output": "4 C, snow"}' in text


@pytest.mark.parametrize("messages, words", [
    ([], "non-empty list"),
    ([{"role": "robot", "content": "x"}], "needs a role"),
    ([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "1"}], "tool_call_id"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "add", "arguments": "{"}}]}],
     "not JSON"),
    ([{"role": "user", "content": None}], "no content"),
])
def test_bad_messages(smollm2_tokenizer, messages, words):
    with pytest.raises(MessagesError, match=words):
        tool_prompt(smollm2_tokenizer, read_tools(TOOLS), messages)


# ------------------------------------------------------------------- on the default model

def check_message(message, tools=TOOLS):
    """An OpenAI-style assistant message whose calls name given tools and validate."""
    assert message["role"] == "assistant" and set(message) <= {"role", "content", "tool_calls"}
    by = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for call in message.get("tool_calls", []):
        assert call["type"] == "function" and call["id"].startswith("call_")
        jsonschema.validate(json.loads(call["function"]["arguments"]), by[call["function"]["name"]])
    return message.get("tool_calls", [])


ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_required_and_named_calls(generator):
    calls = check_message(generator.tool_calls(TOOLS, ASK, tool_choice="required", max_new_tokens=64).message)
    assert calls and calls[0]["function"]["name"] == "get_weather"
    named = generator.tool_calls(TOOLS, ASK, tool_choice={"type": "function", "function": {"name": "add"}},
                                 max_new_tokens=64)
    assert [c["function"]["name"] for c in check_message(named.message)] == ["add"]
    assert named.message["content"] is None


def test_single_call_when_parallel_calls_are_off(generator):
    ask = [{"role": "user", "content": "Weather in Paris, in Oslo and in Rome?"}]
    r = generator.tool_calls(TOOLS, ask, tool_choice="required", parallel_tool_calls=False, max_new_tokens=64)
    assert len(check_message(r.message)) == 1


def test_text_only_answers_under_auto_and_none(generator):
    hello = [{"role": "user", "content": "Hello! How are you today?"}]
    auto = generator.tool_calls(TOOLS, hello, tool_choice="auto", max_new_tokens=96)
    assert "tool_calls" not in auto.message and auto.message["content"].strip()
    none = generator.tool_calls(TOOLS, ASK, tool_choice="none", max_new_tokens=96)
    assert "tool_calls" not in none.message and none.message["content"].strip()
    assert "<tool_call>" not in none.text


def test_multi_turn_with_tool_results(generator):
    r = generator.tool_calls(TOOLS, CONVERSATION, tool_choice="none", max_new_tokens=96)
    assert "tool_calls" not in r.message and r.message["content"]
    again = generator.tool_calls(TOOLS, CONVERSATION + [r.message, {"role": "user", "content": "And 7+8?"}],
                                 tool_choice="required", max_new_tokens=64)
    assert check_message(again.message)


def test_drafted_calls_equal_step_by_step_calls(generator):
    ask = [{"role": "user", "content": "Add 12 and 30, and tell me the weather in Lima."}]
    fast = generator.tool_calls(TOOLS, ask, tool_choice="required", max_new_tokens=96)
    slow = generator.tool_calls(TOOLS, ask, tool_choice="required", max_new_tokens=96, speculate=False)
    assert fast.token_ids == slow.token_ids
    assert fast.stats.forward_passes < slow.stats.forward_passes


@pytest.mark.parametrize("template, fmt", [("qwen2.5_instruct", "hermes"), ("llama3.1_instruct", "llama3")])
def test_real_templates_on_the_default_model(generator, smollm2_tokenizer, template, fmt):
    gen = structgen.Generator(generator.model, with_template(smollm2_tokenizer, template),
                              pass_costs=generator.pass_costs)
    r = gen.tool_calls(TOOLS, ASK, tool_choice="required", max_new_tokens=96)
    assert (r.format, r.rendered_by) == (fmt, "template")
    assert check_message(r.message)


def test_generate_tool_calls_returns_the_message(generator, monkeypatch):
    monkeypatch.setattr(structgen.api.generator, "_DEFAULT", generator)
    message = structgen.generate_tool_calls([ADD], [{"role": "user", "content": "2+2?"}], tool_choice="required",
                                            max_new_tokens=48)
    assert [c["function"]["name"] for c in check_message(message, [ADD])] == ["add"]


def test_a_repeated_call_ends_the_answer(generator):
    """BFCL parallel_12: the model writes its two calls, then repeats them until the budget ends;
    by default the answer ends before the first repeat, with the grammar's own close."""
    case = next(itertools.islice(cases("parallel"), 12, None))
    r = generator.tool_calls(case["tools"], case["messages"], tool_choice="required", max_new_tokens=160)
    calls = check_message(r.message, case["tools"])
    assert r.finish_reason == "repeated_call" and len(calls) == 2
    assert len({c["function"]["arguments"] for c in calls}) == 2
    assert r.text.endswith("}]</tool_call>") and parse_calls(FORMATS[r.format], r.text)[1]
    with pytest.raises(structgen.IncompleteGenerationError):
        generator.tool_calls(case["tools"], case["messages"], tool_choice="required", max_new_tokens=160,
                             stop_repeated_calls=False, budget="raise")
