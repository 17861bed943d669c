"""Structural tags (xgrammar's format): the examples of xgrammar's documentation
(docs/structural_tag/structural_tag.md at mlc-ai/xgrammar 53da3ff), each compiled and walked
with outputs it allows and outputs it refuses; malformed and unsupported specs refused with the
pointer of the field."""

from __future__ import annotations

import pytest

from structgen import StructuralTagError, UnsupportedFeatureError, compile_structural_tag
from structgen.engine.vocab import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ZONE = {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}


def _call(name, schema, begin="<function={}>", end="</function>"):
    return {"type": "tag", "begin": begin.format(name),
            "content": {"type": "json_schema", "json_schema": schema}, "end": end}


THINK = {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}
WEATHER = {"type": "triggered_tags", "triggers": ["<function="], "tags": [_call("get_weather", CITY)]}
TWO_TOOLS = {"type": "triggered_tags", "triggers": ["<function="],
             "tags": [_call("get_weather", CITY), _call("get_time", ZONE)],
             "at_least_one": False, "stop_after_first": False}
EXACTLY_ONE = {**TWO_TOOLS, "at_least_one": True, "stop_after_first": True}
BOUNDED_THINK = {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "excludes": ["</think>"],
                                                                "max_chars": 12}, "end": "</think>"}
SEQUENCE = {"type": "sequence", "elements": [{"type": "const_string", "value": "Answer: "},
                                             {"type": "json_schema", "json_schema": {"type": "object"}}]}
YES_NO = {"type": "or", "elements": [{"type": "const_string", "value": "yes"},
                                     {"type": "const_string", "value": "no"}]}
REPEAT = {"type": "repeat", "min": 1, "max": 3, "content": {"type": "const_string", "value": "item"}}
SEPARATED = {"type": "tags_with_separator", "separator": ",", "at_least_one": False, "stop_after_first": False,
             "tags": [{"type": "tag", "begin": "<item>", "content": {"type": "json_schema",
                                                                     "json_schema": {"type": "object"}},
                       "end": "</item>"}]}
RESPONSE = {"type": "tag", "begin": "<response>", "end": ["</response>", "</answer>"],
            "content": {"type": "json_schema", "json_schema": {"type": "object"}}}
REASON_THEN_TOOLS = {"type": "sequence", "elements": [THINK, TWO_TOOLS]}
DISPATCH = {"type": "tag", "begin": "<response>", "end": "</response>", "content": {
    "type": "dispatch", "loop": True, "excludes": ["</response>"],
    "rules": [["<function=func1>", {"type": "json_schema", "json_schema": CITY}],
              ["<function=func2>", {"type": "json_schema", "json_schema": ZONE}]]}}
REGEX = {"type": "regex", "pattern": "[A-Z]{3}-[0-9]{4}"}
GRAMMAR_LARK = {"type": "grammar", "grammar": 'start: "yes" | "no"'}
LEGACY = {"type": "structural_tag", "triggers": ["<function="],
          "structures": [{"begin": "<function=get_weather>", "schema": CITY, "end": "</function>"}]}

CASES = [  # (spec, allowed outputs, refused outputs)
    (THINK, ["<think></think>", "<think>step 1, then 2 </thin k></think>"],
     ["<think>", "<think>a</think>b", "<think>a</think></think>", "think</think>"]),
    (WEATHER, ["", "I will call a tool now. <function=get_weather>{\"city\": \"San Francisco\"}</function>",
               "<function=get_weather>{\"city\": \"Paris\"}</function> and again "
               "<function=get_weather>{\"city\": \"Rome\"}</function> done",
               "text with <function but no trigger"],
     ["<function=get_time>{\"timezone\": \"UTC\"}</function>", "<function=get_weather>{}</function>",
      "<function=get_weather>{\"city\": 1}</function>", "<function=get_weather>{\"city\": \"P\"}",
      "<function=get_weather>{\"city\": \"P\"}</func>"]),
    (TWO_TOOLS, ["<function=get_time>{\"timezone\": \"UTC\"}</function>",
                 "a<function=get_weather>{\"city\": \"P\"}</function>b<function=get_time>{\"timezone\": \"\"}"
                 "</function>"],
     ["<function=get_date>{}</function>"]),
    (EXACTLY_ONE, ["<function=get_time>{\"timezone\": \"UTC\"}</function>"],
     ["", "Sure. <function=get_time>{\"timezone\": \"UTC\"}</function>",
      "<function=get_time>{\"timezone\": \"UTC\"}</function> done"]),
    (BOUNDED_THINK, ["<think>twelve chars</think>", "<think>é</think>"],
     ["<think>thirteen chars</think>"]),
    (SEQUENCE, ["Answer: {}", "Answer: {\"a\": [1, 2]}"], ["Answer: []", "answer: {}", "Answer:{}"]),
    (YES_NO, ["yes", "no"], ["", "yesno", "maybe"]),
    (REPEAT, ["item", "itemitemitem"], ["", "itemitemitemitem"]),
    (SEPARATED, ["", "<item>{}</item>", "<item>{}</item>,<item>{\"a\": 1}</item>"],
     ["<item>{}</item><item>{}</item>", ",<item>{}</item>", "<item>{}</item>,"]),
    (RESPONSE, ["<response>{}</response>", "<response>{\"a\": 1}</answer>"],
     ["<response>{}</respons>", "<response>[]</response>"]),
    (REASON_THEN_TOOLS, ["<think>hmm</think>Calling. <function=get_weather>{\"city\": \"Oslo\"}</function>",
                         "<think></think>"],
     ["Calling. <function=get_weather>{\"city\": \"Oslo\"}</function>"]),
    (DISPATCH, ["<response>hi <function=func1>{\"city\": \"a\"}</function=func1> bye</response>",
                "<response></response>"],
     ["<response><function=func1>{}</response>", "<response>a</response>b"]),
    (REGEX, ["ABC-1234"], ["AB-1234", "ABC-12345", "abc-1234"]),
    (GRAMMAR_LARK, ["yes", "no"], ["yes no", ""]),
    (LEGACY, ["<function=get_weather>{\"city\": \"Paris\"}</function>", "plain"],
     ["<function=get_weather>{\"town\": \"Paris\"}</function>"]),
]


def walk(compiled, text: str) -> str | None:
    """Why ``compiled`` refuses ``text`` byte by byte (None: accepted, complete)."""
    m = compiled.matcher()
    for k, b in enumerate(text.encode()):
        if not m.advance(b):
            return f"byte {k}: {m.last_rejection}"
    return None if m.can_end() else "incomplete"


@pytest.mark.parametrize("spec, good, bad", CASES, ids=[f"{c[0].get('type')}-{i}" for i, c in enumerate(CASES)])
def test_documented_examples(spec, good, bad):
    compiled = compile_structural_tag({"type": "structural_tag", "format": spec}
                                      if "structures" not in spec else spec, BYTES)
    for text in good:
        assert walk(compiled, text) is None, text
    for text in bad:
        assert walk(compiled, text) is not None, text


def test_begin_and_end_strings_are_forced_text():
    compiled = compile_structural_tag(TWO_TOOLS, BYTES, whitespace="compact", strict=True, canonical=True)
    m = compiled.matcher()
    assert all(m.advance(b) for b in b"Let me check. <function=get_t")
    assert m.forced_text() == 'ime>{"timezone":"'
    assert all(m.advance(b) for b in b'ime>{"timezone":"UTC"')
    assert m.forced_text() == "}</function>"


def test_unlimited_content_stops_at_the_tag_end():
    """any_text inside a tag never writes the end: the first end closes the tag."""
    m = compile_structural_tag(THINK, BYTES).matcher()
    assert all(m.advance(b) for b in b"<think>a</think>")
    assert m.can_end() and not m.advance(ord("x"))


@pytest.mark.parametrize("spec, pointer, words", [
    ({"type": "token", "token": "<|call|>"}, "/type", "special-token"),
    ({"type": "sequence", "elements": [{"type": "any_tokens"}]}, "/elements/0/type", "not supported"),
    ({"type": "tag", "begin": "<a>", "content": {"type": "any_text", "max_tokens": 5}, "end": "</a>"},
     "/content/max_tokens", "thinking_budget"),
    ({"type": "json_schema", "json_schema": {}, "style": "gemma"}, "/style", "not supported"),
    ({"type": "json_schema", "json_schema": {}, "any_order": True}, "/any_order", "declared order"),
    ({"type": "const_string", "value": "a", "colour": 1}, "/colour", "unknown field"),
    ({"type": "tag", "begin": "<a>", "content": {"type": "const_string", "value": "x"}}, "", "'end'"),
    ({"type": "optional", "content": {"type": "banana"}}, "/content/type", "unknown format type"),
    ({"type": "triggered_tags", "triggers": ["<f"], "tags": [{"type": "tag", "begin": "<g>", "end": "",
                                                             "content": {"type": "any_text"}}]},
     "/tags/0/begin", "exactly one trigger"),
    ({"type": "repeat", "min": 3, "max": 1, "content": {"type": "const_string", "value": "x"}}, "/max", "below"),
    ({"type": "or", "elements": []}, "/elements", "non-empty"),
    ({"type": "regex", "pattern": "(unclosed"}, "/pattern", "regular expression"),
    ({"type": "grammar", "grammar": "start: undefined_rule"}, "/grammar", "undefined_rule"),
])
def test_refused_with_the_pointer(spec, pointer, words):
    with pytest.raises(StructuralTagError) as err:
        compile_structural_tag({"type": "structural_tag", "format": spec}, BYTES)
    assert err.value.pointer == "/format" + pointer
    assert words in str(err.value)


def test_unsupported_schema_keyword_names_its_path_through_the_spec():
    spec = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "x"},
        {"type": "json_schema", "json_schema": {"type": "string", "pattern": "(?<=a)b"}}]}}
    with pytest.raises(UnsupportedFeatureError, match="lookbehind") as err:
        compile_structural_tag(spec, BYTES)
    assert err.value.pointer == "/format/elements/1/json_schema/pattern"


def test_the_spec_as_json_text_and_its_cache():
    import json

    text = json.dumps({"type": "structural_tag", "format": YES_NO})
    assert compile_structural_tag(text, BYTES) is compile_structural_tag(json.loads(text), BYTES)
    with pytest.raises(StructuralTagError, match="not JSON"):
        compile_structural_tag("{nope", BYTES)


@pytest.mark.parametrize("spec, good, bad", CASES, ids=[f"{c[0].get('type')}-{i}" for i, c in enumerate(CASES)])
def test_segments_cut_the_output_whole(spec, good, bad):
    from structgen.frontends.structural_tag import read_structural_tag
    from structgen.tasks.segments import segments_of

    tag = read_structural_tag({"type": "structural_tag", "format": spec} if "structures" not in spec else spec)
    for text in good:
        found = segments_of(tag, text)
        assert "".join(s.text for s in found) == text
        assert all(text[s.start:s.end] == s.text for s in found)


def test_segments_name_their_format_and_tag():
    from structgen.frontends.structural_tag import read_structural_tag
    from structgen.tasks.segments import segments_of

    text = 'a<function=get_weather>{"city": "P"}</function>b<function=get_time>{"timezone": ""}</function>'
    found = segments_of(read_structural_tag(TWO_TOOLS), text)
    values = [(s.pointer, s.value, s.tag) for s in found if s.kind == "json_schema"]
    assert values == [("/tags/0/content", {"city": "P"}, "<function=get_weather>"),
                      ("/tags/1/content", {"timezone": ""}, "<function=get_time>")]
    assert [s.text for s in found if s.kind == "any_text"] == ["a", "b"]


@pytest.mark.slow
def test_generate_reasoning_then_one_call_drafted_as_stepped(generator):
    spec = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        THINK, {**EXACTLY_ONE, "tags": [_call("get_weather", {**CITY, "additionalProperties": False})]}]}}
    prompt = "What is the weather in Paris? Think in <think> tags, then call get_weather."
    drafted = generator.structural(spec, prompt, max_new_tokens=48)
    stepped = generator.structural(spec, prompt, max_new_tokens=48, speculate=False)
    assert drafted.token_ids == stepped.token_ids
    assert drafted.text.startswith("<think>") and drafted.text.endswith("</function>")
    assert [type(v) for v in drafted.values] == [dict] and set(drafted.values[0]) == {"city"}
    assert drafted.stats.forward_passes < stepped.stats.forward_passes


def test_property_order_is_part_of_the_cache_key():
    """Two specs that differ only in the order of a schema's properties are two grammars
    (generation writes properties in their declared order)."""
    def spec(order):
        props = {k: {"type": "integer"} for k in order}
        return {"type": "json_schema", "json_schema": {"type": "object", "properties": props, "required": list(order),
                                                       "additionalProperties": False}}

    ab = compile_structural_tag(spec("ab"), BYTES, whitespace="compact", strict=True, canonical=True)
    ba = compile_structural_tag(spec("ba"), BYTES, whitespace="compact", strict=True, canonical=True)
    assert walk(ab, '{"a":1,"b":2}') is None and walk(ba, '{"b":1,"a":2}') is None
    assert walk(ab, '{"b":1,"a":2}') is not None
