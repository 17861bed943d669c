"""Native tool-call formats (structgen/frontends/tool_formats.py), token by token on the default
model's real tokenizer (markers written as text) and on the family's tokenizer: the default
model's with the family's special tokens added (``CallFormat.special_tokens``; the families' own
tokenizers are not installable here), where each marker is one special token:

- the family's published chat template (tests/fixtures/chat_templates) shows the tools, and the
  call it writes for an assistant turn is one the format's grammar accepts (where the template
  and the serving parser disagree, the difference is listed with its reason);
- BFCL's valid example calls (a sample across its call categories), written in the format, walk
  the grammar compiled for their case's tools and read back into exactly the same calls;
- mutants (a wrong function name, a wrong argument type, a missing end tag) are refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import jinja2.sandbox
import pytest

import structgen
from structgen.frontends.structural_tag import read_structural_tag
from structgen.frontends.tool_calls import read_tools
from structgen.frontends.tool_formats import CALL_FORMATS, calls_of, format_structural_tag, write_calls
from structgen.tasks.segments import segments_of
from toolcall_data import CALL_CATEGORIES, canonical, cases, undeclared_keys

TEMPLATES = Path(__file__).resolve().parent / "fixtures" / "chat_templates"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                          "days": {"type": "integer"}}, "required": ["city"]}}}
CALL = {"city": "Paris", "days": 3}

#: format -> (fixture, render options, what the template writes before the call it writes)
FIXTURES = {
    "qwen_3": ("qwen3.jinja", {"enable_thinking": False}),
    "qwen_3_5": ("qwen3_5.jinja", {"enable_thinking": False}),
    "qwen_3_coder": ("qwen3_coder.jinja", {}),
    "kimi": ("kimi_k2.jinja", {}),
    "deepseek_r1": ("deepseek_r1_vllm_tools.jinja", {}),
    "deepseek_v3_1": ("deepseek_v3_1.jinja", {}),
    "harmony": ("gpt_oss.jinja", {}),
    "minimax": ("minimax_m2.jinja", {}),
    "glm_4_7": ("glm_4_7.jinja", {}),
    "exaone": ("exaone4.jinja", {}),
    "mistral": ("mistral_small_3_2.jinja", {}),
    "granite": ("granite.jinja", {}),
    "llama4_pythonic": ("llama4_pythonic.jinja", {}),
    "kimi_k3": ("kimi_k3.jinja", {"thinking": False}),
}
#: where the template writes a call the format's grammar (the serving parser's reading) refuses
KNOWN_DIFFERENCES = {
    "mistral": "the Small 3.2 template writes tokenizer v11's [CALL_ID]...; the format is v13's (no call id)",
    "granite": "vLLM's Granite template writes the call list with tojson(indent=4); the format is json.dumps spacing",
    "llama4_pythonic": "vLLM's template quotes every value (days=\"3\"); its parser reads Python literals (days=3), "
                       "which the format writes",
}
#: templates that take a call's arguments as JSON text (they concatenate it)
TEXT_ARGUMENTS = ("deepseek_v3_1",)
#: templates that render no tool list (structgen shows the tools in the system turn for them)
SHOWS_NO_TOOLS = ("deepseek_v3_1",)
#: formats with no published Jinja template (Python encoders only)
NO_TEMPLATE = ("deepseek_v3_2", "deepseek_v4", "deepseek_v4_1")


def _render(fixture: str, messages: list, **options) -> str:
    env = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                              extensions=["jinja2.ext.loopcontrols"])

    def tojson(value, indent=None, ensure_ascii=False, **_):
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)

    def fail(message):
        raise jinja2.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=fail, strftime_now=lambda fmt: "07 Dec 2026")
    template = env.from_string((TEMPLATES / fixture).read_text())
    return template.render(messages=messages, tools=[WEATHER], bos_token="<s>", eos_token="</s>",
                           add_generation_prompt=False, **options)


def _walk(compiled, text: str, tokenizer) -> str | None:
    m = compiled.matcher()
    ids = tokenizer.encode(text, add_special_tokens=False)
    for k, t in enumerate(ids):
        if not m.advance(t):
            return f"token {k}: {m.last_rejection}"
    if compiled.vocabulary.text_bytes(ids) != text.encode():
        return "the tokens' text is not the text"
    return None if m.can_end() else "incomplete"


_FAMILIES: dict[str, tuple] = {}


def _family(name: str, tokenizer):
    """(the family's tokenizer, its compiler, its special tokens' ids): the default model's
    tokenizer with the format's special tokens added, as the family's vocabulary has them."""
    got = _FAMILIES.get(name)
    if got is None:
        import copy

        from tokenizers import AddedToken

        family = copy.deepcopy(tokenizer)
        specials = CALL_FORMATS[name].special_tokens
        family.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials], special_tokens=True)
        ids = {t: family.convert_tokens_to_ids(t) for t in specials}
        assert all(i >= len(tokenizer) for i in ids.values())
        got = _FAMILIES[name] = (family, structgen.Compiler(family, disk_cache=False), ids)
    return got


def _compiled(compiler, fmt, tools, choice="required"):
    spec = format_structural_tag(fmt, read_tools(tools), choice=choice)
    return spec, compiler.structural_tag(spec, whitespace="spaced", strict=True, canonical=True)


@pytest.fixture(scope="module")
def compiler(smollm2_tokenizer):
    return structgen.Compiler(smollm2_tokenizer, disk_cache=False)


@pytest.mark.parametrize("family", [False, True], ids=["text-markers", "family-tokens"])
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_family_template_shows_tools_and_writes_calls_the_grammar_reads(name, family, compiler, smollm2_tokenizer):
    fixture, options = FIXTURES[name]
    fmt = CALL_FORMATS[name]
    user = {"role": "user", "content": "Weather in Paris for 3 days?"}
    shown = _render(fixture, [user], **options)
    assert ("get_weather" in shown) == (name not in SHOWS_NO_TOOLS)
    call = {"id": "functions.get_weather:0" if name == "kimi" else "a1b2c3d40", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(CALL) if name in TEXT_ARGUMENTS else CALL}}
    turn = _render(fixture, [user, {"role": "assistant", "content": "", "tool_calls": [call]}], **options)
    spec, compiled = _compiled(compiler, fmt, [WEATHER])
    ours = write_calls(fmt, [("get_weather", CALL)])
    begin = turn.rfind(ours.lstrip("\n")[:len(fmt.opens_with.lstrip("\n"))])  # past the system text's example
    if name in KNOWN_DIFFERENCES:
        assert ours not in turn
        return
    assert begin >= 0, turn[-400:]
    written = turn[begin:]
    # the template's call, up to where ours ends (the template goes on with its end of turn)
    tail = ours.lstrip("\n")
    assert written.startswith(tail), (written[:300], tail)
    if not family:
        assert _walk(compiled, ours, smollm2_tokenizer) is None
        return
    tokenizer, family_compiler, special = _family(name, smollm2_tokenizer)
    # the whole rendered conversation tokenizes with the family's special tokens, and its call walks
    rendered = tokenizer.encode(turn, add_special_tokens=False)
    used = {t for t, i in special.items() if i in rendered}
    assert used == {t for t in special if t in turn}
    _, compiled = _compiled(family_compiler, fmt, [WEATHER])
    assert compiled.vocabulary.marked_ids <= set(special.values())
    assert _walk(compiled, ours, tokenizer) is None


COHERE = json.loads((TEMPLATES / "cohere_cmd5.json").read_text())


@pytest.mark.parametrize("family", [False, True], ids=["text-markers", "family-tokens"])
@pytest.mark.parametrize("case", COHERE["cases"], ids=lambda c: f"{c['label']}-{'think' if c['reasoning'] else 'plain'}")
def test_cohere_calls_are_written_as_its_renderer_writes_them(case, family, compiler, smollm2_tokenizer):
    """Cohere's CMD5 has no Jinja template: its renderer's output (cohere-melody's render_cmd5,
    kept in the fixture) shows the tools, opens or closes the thinking in the generation prompt,
    and writes exactly the calls the format writes (nested dict and list values, raw text
    with quotes and ``&&``), which walk the grammar and read back."""
    fmt = CALL_FORMATS["cohere"]
    tools = [{"type": "function", "function": t} for t in case["tools"]]
    calls = [(name, args) for name, args in case["calls"]]
    assert all(t["name"] in case["prompt"] for t in case["tools"])
    assert case["prompt"].endswith(fmt.thinking[0] if case["reasoning"] else "".join(fmt.thinking))
    ours = write_calls(fmt, calls)
    assert ours + "<|END_OF_TURN_TOKEN|>" in case["conversation"]
    tokenizer, compiler = (smollm2_tokenizer, compiler) if not family else _family("cohere", smollm2_tokenizer)[:2]
    spec, compiled = _compiled(compiler, fmt, tools, choice="auto")
    assert _walk(compiled, ours, tokenizer) is None
    assert calls_of(fmt, segments_of(read_structural_tag(spec), ours)) == (None, calls)


def _sample():
    """Every 40th case of BFCL's call categories whose example calls are all valid (and use
    only keys their schema declares: tool arguments are closed objects)."""
    n = 0
    for category in CALL_CATEGORIES:
        for case in cases(category):
            by = {t["function"]["name"]: t["function"]["parameters"] for t in case["tools"]}
            if all(c["valid_against_normalized_schema"] and not undeclared_keys(by[c["name"]], c["arguments"])
                   for c in case["example_calls"]):
                if n % 40 == 0:
                    yield case
                n += 1


SAMPLE = list(_sample())


@pytest.mark.parametrize("name", sorted(CALL_FORMATS))
def test_bfcl_calls_walk_read_back_and_mutants_are_refused(name, smollm2_tokenizer):
    """On the family's tokenizer: every marker the calls write is its special token."""
    fmt = CALL_FORMATS[name]
    tokenizer, compiler, special = _family(name, smollm2_tokenizer)
    walked = exact = refused = 0
    unsupported = []
    for case in SAMPLE:
        by = {t["function"]["name"]: t["function"]["parameters"] for t in case["tools"]}
        calls = [(c["name"], canonical(by[c["name"]], c["arguments"])) for c in case["example_calls"]]
        try:
            spec, compiled = _compiled(compiler, fmt, case["tools"])
        except structgen.UnsupportedFeatureError as err:  # XML styles: raw strings cannot check a format
            unsupported.append((case["id"], err.keyword))
            continue
        text = write_calls(fmt, calls)
        assert _walk(compiled, text, tokenizer) is None, (case["id"], text)
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert {i for t, i in special.items() if t in text} <= set(ids)
        walked += 1
        back_text = compiled.vocabulary.text_bytes(ids).decode()  # the answer's text, from its tokens
        _, back = calls_of(fmt, segments_of(read_structural_tag(spec), back_text))
        assert back == calls, case["id"]
        exact += 1
        first_name, first_args = calls[0]
        mutants = [write_calls(fmt, [(first_name + "_x", first_args)]),  # no such tool
                   write_calls(fmt, calls)[:-max(1, len((fmt.section or ("", ""))[1]) + len(fmt.call_end))]]
        for key, value in first_args.items():
            if isinstance(value, str):  # a string where the schema wants a string: make it a number's place
                continue
            mutants.append(write_calls(fmt, [(first_name, {**first_args, key: "not a " + type(value).__name__})]))
            break
        if not fmt.call_end and not fmt.section:
            del mutants[1]  # a format without an end marker (mistral): a cut call may still be a call
        for mutant in mutants:
            why = _walk(compiled, mutant, tokenizer)
            if why is None:
                schema = by[first_name]
                # a string value replaced by text: still valid where the schema allows strings
                assert any(t == "string" or (isinstance(t, list) and "string" in t)
                           for t in [schema.get("properties", {}).get(k, {}).get("type") for k in first_args]), \
                    (case["id"], mutant)
            else:
                refused += 1
    assert walked + len(unsupported) == len(SAMPLE) and exact == walked
    assert walked >= len(SAMPLE) * 0.8, unsupported
    assert refused >= walked


@pytest.mark.parametrize("name", sorted(CALL_FORMATS))
def test_auto_lets_text_come_first_and_none_is_text_only(name, compiler, smollm2_tokenizer):
    fmt = CALL_FORMATS[name]
    call = write_calls(fmt, [("get_weather", {"city": "Oslo"})])
    spec, auto = _compiled(compiler, fmt, [WEATHER], choice="auto")
    assert _walk(auto, "Sure, let me look." + fmt.text_end, smollm2_tokenizer) is None
    if fmt.text_end:  # Kimi-K3: a text answer closes its blocks
        assert _walk(auto, "Sure, let me look.", smollm2_tokenizer) == "incomplete"
    if not fmt.text_first:  # text or calls: the serving parser reads only an answer that is all calls
        assert _walk(auto, call, smollm2_tokenizer) is None
        assert _walk(auto, "Let me look." + call, smollm2_tokenizer) is not None
        return
    assert _walk(auto, "Let me look." + call, smollm2_tokenizer) is None
    content, calls = calls_of(fmt, segments_of(read_structural_tag(spec), "Let me look." + call))
    assert (content, calls) == ("Let me look.", [("get_weather", {"city": "Oslo"})])
    _, none = _compiled(compiler, fmt, [WEATHER], choice="none")
    assert _walk(none, "Just text." + fmt.text_end, smollm2_tokenizer) is None


def test_unknown_format_names_the_known_ones():
    from structgen.tasks.tool_calls import read_format

    with pytest.raises(structgen.OptionError, match="qwen_3"):
        read_format("qwen_9")


CALC = {"type": "custom", "custom": {"name": "calc", "description": "Arithmetic.",
                                     "format": {"type": "grammar", "grammar": {"syntax": "regex",
                                                                                "definition": r"[0-9]+( [+*] [0-9]+)*"}}}}
NOTE = {"type": "custom", "name": "note", "format": {"type": "text"}}  # the Responses API's shape
LOOSE = {"type": "function", "function": {"name": "loose", "strict": False, "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}


def test_custom_tools_write_their_input_raw_under_its_grammar(compiler, smollm2_tokenizer):
    fmt = CALL_FORMATS["harmony"]
    spec, compiled = _compiled(compiler, fmt, [WEATHER, CALC, NOTE])
    good = write_calls(fmt, [("calc", "12 + 3 * 4")])
    assert _walk(compiled, good, smollm2_tokenizer) is None
    assert _walk(compiled, good.replace("12 + 3", "12 - 3"), smollm2_tokenizer) is not None
    assert calls_of(fmt, segments_of(read_structural_tag(spec), good)) == (None, [("calc", "12 + 3 * 4")])
    with pytest.raises(structgen.ToolSpecError, match="custom tools are written raw") as err:
        _compiled(compiler, CALL_FORMATS["qwen_3"], [WEATHER, CALC])
    assert err.value.pointer == "/1"


def test_allowed_tools_and_strict_false(compiler, smollm2_tokenizer):
    from structgen.frontends.tool_calls import read_tool_choice

    specs = read_tools([WEATHER, LOOSE, CALC])
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "loose"}}]}}
    assert read_tool_choice(choice, specs) == ("required", ("loose",))
    assert read_tool_choice({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_weather"}]},
                            specs) == ("auto", ("get_weather",))
    with pytest.raises(structgen.ToolSpecError, match="not among the tools"):
        read_tool_choice({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "nope"}]}, specs)
    fmt = CALL_FORMATS["qwen_3"]
    spec = format_structural_tag(fmt, specs[:2], choice="required", names=("loose",))
    compiled = compiler.structural_tag(spec, whitespace="spaced", strict=True, canonical=True)
    extra = write_calls(fmt, [("loose", {"a": 1, "b": 2})])  # strict: false opens the tool's objects
    assert _walk(compiled, extra, smollm2_tokenizer) is None
    assert _walk(compiled, write_calls(fmt, [("get_weather", {"city": "Oslo"})]), smollm2_tokenizer) is not None


def test_a_custom_tool_call_on_the_model(generator):
    r = generator.tool_calls([WEATHER, CALC], [{"role": "user", "content": "What is 12 plus 30?"}], format="harmony",
                             tool_choice={"type": "custom", "custom": {"name": "calc"}}, max_new_tokens=48)
    (call,) = r.message["tool_calls"]
    assert call["type"] == "custom" and call["custom"]["name"] == "calc"
    import re

    assert re.fullmatch(r"[0-9]+( [+*] [0-9]+)*", call["custom"]["input"])


@pytest.mark.parametrize("name", ["qwen_3_5", "cohere"])
def test_an_optional_xml_argument_no_value_fits_is_left_out_as_in_json(name):
    """BFCL's live_multiple_148-58-2 has an optional array with an enum of strings: no value."""
    from structgen.engine.vocab import Vocabulary

    vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    never = {"type": "array", "enum": ["a", "b"]}
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}, "m": never}, "required": ["n"]}}}
    fmt = CALL_FORMATS[name]
    spec = format_structural_tag(fmt, read_tools([tool]), choice="required")
    m = structgen.compile_structural_tag(spec, vocab, whitespace="spaced", strict=True, canonical=True).matcher()
    assert all(m.advance(b) for b in write_calls(fmt, [("f", {"n": 1})]).encode()) and m.can_end()
    tool["function"]["parameters"]["required"] = ["n", "m"]
    with pytest.raises(structgen.UnsupportedFeatureError, match="enum") as err:
        structgen.compile_structural_tag(format_structural_tag(fmt, read_tools([tool]), choice="required"), vocab)
    assert err.value.pointer.endswith("/json_schema/properties/m")


BYTE_VOCAB = structgen.Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def _cohere_tag(parameters):
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    spec = format_structural_tag(CALL_FORMATS["cohere"], read_tools([tool]), choice="required")
    return spec, structgen.compile_structural_tag(spec, BYTE_VOCAB, whitespace="spaced", strict=True, canonical=True)


def test_cohere_values_nest_resolve_references_and_escape_names():
    """Objects and arrays are nested values (through local $refs), a free value is raw text or
    JSON, a mixed enum names each value's own type, and names are XML attributes."""
    point = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    params = {"type": "object", "$defs": {"point": point}, "properties": {
        "path": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 1},
        "any": {}, "mode": {"enum": ["fast", 2, None]}, 'say "hi" & go': {"type": "string"}},
        "required": ["path"]}
    spec, compiled = _cohere_tag(params)
    fmt = CALL_FORMATS["cohere"]
    for args in ({"path": [{"x": 1}, {"x": 2.5}], "any": "some <text>", "mode": 2, 'say "hi" & go': "ok"},
                 {"path": [{"x": 0}], "any": [1, "a"], "mode": None},
                 {"path": [{"x": 0}], "mode": "fast"}):
        text = write_calls(fmt, [("f", args)])
        if isinstance(args.get("any"), list):  # a free value is written as JSON, not as nested values
            text = text.replace('<cofl:value name="any" type="list"><cofl:value type="json">1</cofl:value>'
                                '<cofl:value type="raw">a</cofl:value></cofl:value>',
                                '<cofl:value name="any" type="json">[1, "a"]</cofl:value>')
        m = compiled.matcher()
        assert all(m.advance(b) for b in text.encode()) and m.can_end(), text
        assert calls_of(fmt, segments_of(read_structural_tag(spec), text)) == (None, [("f", args)])
    assert 'name="say &quot;hi&quot; &amp; go"' in write_calls(fmt, [("f", {'say "hi" & go': "ok"})])
    for bad in ('<cofl:value name="path" type="list"></cofl:value>',  # minItems 1
                '<cofl:value name="path" type="list"><cofl:value type="json">{"x": 1}</cofl:value></cofl:value>',
                '<cofl:value name="path" type="list"><cofl:value type="dict"><cofl:value name="x" type="raw">1'
                '</cofl:value></cofl:value></cofl:value>',
                '<cofl:value name="path" type="list"><cofl:value type="dict"><cofl:value name="x" type="json">1'
                '</cofl:value></cofl:value></cofl:value><cofl:value name="mode" type="raw">2</cofl:value>'):
        m = compiled.matcher()
        text = '<cofl:tool_calls><cofl:tool_call id="0" name="f">' + bad + "</cofl:tool_call></cofl:tool_calls>"
        assert not (all(m.advance(b) for b in text.encode()) and m.can_end()), bad


@pytest.mark.parametrize("parameters, keyword, where", [
    ({"type": "object", "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
      "properties": {"head": {"$ref": "#/$defs/n"}}}, "$ref", "/properties/head"),
    ({"type": "object", "properties": {"p": {"type": "array", "prefixItems": [{"type": "string"}]}}},
     "prefixItems", "/properties/p/prefixItems"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "a+"}}}, "pattern", "/properties/s/pattern"),
])
def test_cohere_refuses_what_nested_values_cannot_honour(parameters, keyword, where):
    with pytest.raises(structgen.UnsupportedFeatureError) as err:
        _cohere_tag(parameters)
    assert err.value.keyword == keyword and where in err.value.pointer, (err.value.keyword, err.value.pointer)


def test_cohere_raw_text_never_holds_what_its_reader_takes_for_a_close():
    """melody ends a value at ``</\\s*cofl:value\\s*>``: raw text holds no ``</`` + white space."""
    _, compiled = _cohere_tag({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]})
    head = '<cofl:tool_calls><cofl:tool_call id="0" name="f"><cofl:value name="s" type="raw">'
    for inner, ok in (("a </b> c", True), ("a </ cofl:value>", False), ("a </\u3000x", False), ("</cofl:valuex", False)):
        m = compiled.matcher()
        text = head + inner + "</cofl:value></cofl:tool_call></cofl:tool_calls>"
        assert (all(m.advance(b) for b in text.encode()) and m.can_end()) == ok, inner


@pytest.mark.parametrize("name", ["llama4_pythonic", "llama", "hermes", "cohere"])
def test_named_formats_on_the_model_return_openai_calls(generator, name):
    r = generator.tool_calls([WEATHER], [{"role": "user", "content": "Weather in Paris for 3 days?"}], format=name,
                             tool_choice="required", max_new_tokens=96 if name == "cohere" else 48)
    (call,) = r.message["tool_calls"][:1]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"])["city"], str)


def test_hermes_markers_on_a_tokenizer_that_has_them(smollm2_tokenizer):
    """hermes (a ToolFormat, not a structural tag) finds its markers among the special tokens too."""
    import copy

    from tokenizers import AddedToken

    from structgen.frontends.tool_calls import FORMATS, call_text
    from structgen.integrations.constraints import compile_constraint, read_constraint

    family = copy.deepcopy(smollm2_tokenizer)
    family.add_tokens([AddedToken(t, special=True, normalized=False) for t in ("<tool_call>", "</tool_call>")],
                      special_tokens=True)
    compiled = compile_constraint(read_constraint({"tools": [WEATHER], "format": "hermes"}), family)
    text = call_text(FORMATS["hermes"], [("get_weather", {"city": "Oslo"})])
    ids = family.encode(text, add_special_tokens=False)
    assert set(family.convert_tokens_to_ids(["<tool_call>", "</tool_call>"])) <= set(ids)
    assert _walk(compiled, text, family) is None


def test_harmony_ends_a_call_with_gpt_oss_end_of_sequence(smollm2_tokenizer):
    """gpt-oss's generation config ends generation at <|call|>: there the call is left open for
    that token to end it (one call per answer), rather than spelled out before another end."""
    from structgen.engine.vocab import Vocabulary
    from structgen.integrations.constraints import compile_constraint, read_constraint

    family, _, special = _family("harmony", smollm2_tokenizer)
    call = special["<|call|>"]
    vocab = Vocabulary.from_tokenizer(family, eos_ids=[call])
    compiled = compile_constraint(read_constraint({"tools": [WEATHER], "format": "harmony"}), vocab, family)
    text = write_calls(CALL_FORMATS["harmony"], [("get_weather", {"city": "Oslo"})])
    assert text.endswith("<|call|>")
    m = compiled.matcher()
    ids = family.encode(text[:-len("<|call|>")], add_special_tokens=False)
    assert all(m.advance(t) for t in ids) and m.can_end()
    assert call in m.allowed_token_ids() and m.advance(call)


def test_keys_are_attribute_values_escaped_as_the_family_writes_them():
    """Kimi-K3's template escapes ``&`` and ``"`` in a key; Cohere's renderer also ``<`` and
    ``>``; both read back to the key."""
    args = {'say "hi" & <go>': "x"}
    user = {"role": "user", "content": "Hi"}
    call = {"id": "a1b2c3d40", "type": "function", "function": {"name": "get_weather", "arguments": args}}
    turn = _render("kimi_k3.jinja", [user, {"role": "assistant", "content": "", "tool_calls": [call]}], thinking=False)
    ours = write_calls(CALL_FORMATS["kimi_k3"], [("get_weather", args)])
    assert 'key="say &quot;hi&quot; &amp; <go>"' in ours and ours in turn
    assert 'name="say &quot;hi&quot; &amp; &lt;go&gt;"' in write_calls(CALL_FORMATS["cohere"], [("f", args)])
    for name in ("kimi_k3", "cohere"):
        tool = {"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {k: {"type": "string"} for k in args}, "required": list(args)}}}
        spec = format_structural_tag(CALL_FORMATS[name], read_tools([tool]), choice="required")
        text = write_calls(CALL_FORMATS[name], [("f", args)])
        assert calls_of(CALL_FORMATS[name], segments_of(read_structural_tag(spec), text)) == (None, [("f", args)])
