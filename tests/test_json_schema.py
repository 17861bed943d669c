"""Accept/reject tables for the JSON schema frontend, walked byte by byte on a byte vocabulary."""

from __future__ import annotations

import json

import pytest

import structgen
from structgen import SchemaError, UnsupportedFeatureError
from structgen.vocab import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")


def accepts(schema, text: str, whitespace="flexible") -> bool:
    m = structgen.compile_json_schema(schema, BYTES, whitespace=whitespace).matcher()
    return all(m.advance(b) for b in text.encode()) and m.can_end()


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}}},
    "required": ["name"],
}
TREE = {
    "$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}


@pytest.mark.parametrize("schema,text,ok", [
    ({"type": "string"}, '"hi"', True),
    ({"type": "string"}, '"a\\"b\\u00e9\\ud83d\\ude00"', True),
    ({"type": "string"}, '"\\ud83d"', False),              # lone surrogate refused
    ({"type": "string"}, '"tab\there"', False),            # raw control character
    ({"type": "string"}, '"é😀"', True),
    ({"type": "string", "minLength": 2, "maxLength": 3}, '"ab"', True),
    ({"type": "string", "minLength": 2, "maxLength": 3}, '"a"', False),
    ({"type": "string", "minLength": 2, "maxLength": 3}, '"abcd"', False),
    ({"type": "string", "maxLength": 2}, '"éé"', True),     # code points, not bytes
    ({"type": "string", "maxLength": 2}, '"\\n\\u0041"', True),
    ({"type": "integer"}, "-12", True),
    ({"type": "integer"}, "012", False),
    ({"type": "integer"}, "1.5", False),
    ({"type": "number"}, "-0.5e+10", True),
    ({"type": "number"}, "1.", False),
    ({"type": "boolean"}, "true", True),
    ({"type": "null"}, "null", True),
    ({"type": ["string", "null"]}, "null", True),
    ({"enum": ["red", 1, None, {"a": [1, 2]}]}, '{"a": [1, 2]}', True),
    ({"enum": ["red", 1, None]}, '"blue"', False),
    ({"const": "é"}, '"\\u00e9"', True),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, '"x"', True),
    (PERSON, '{"name": "Ada", "age": 36, "tags": ["a", "abc"]}', True),
    (PERSON, '{"name": "Ada", "tags": ["abcd"]}', False),
    (PERSON, '{"age": 36}', False),                         # required key missing
    (PERSON, '{"name": "", "age": 1}', False),              # minLength
    (PERSON, '{"name": "A", "extra": {"x": [null]}}', True),  # open by default (spec)
    (PERSON, '{"name": "A", "age": "x"}', False),
    (PERSON, '{"name": "A", "a\\u0067e": "x"}', False),     # an escaped defined key is not "extra"
    (PERSON, '{"name": "A", "ag": "x"}', True),
    (TREE, json.dumps({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]}), True),
    (TREE, '{"v": 1, "x": 2}', False),
    (True, '[1, {"a": "b"}, [], {}]', True),
    # numbers: bounds and divisors, every spelling of the value when walking
    ({"type": "integer", "minimum": 1, "maximum": 12}, "12", True),
    ({"type": "integer", "minimum": 1, "maximum": 12}, "13", False),
    ({"type": "integer", "minimum": 1, "maximum": 12}, "12.0", True),
    ({"type": "integer"}, "1.0", True),
    ({"type": "number", "exclusiveMinimum": 0}, "0.01", True),
    ({"type": "number", "exclusiveMinimum": 0}, "-0.0", False),
    ({"type": "number", "minimum": 0, "exclusiveMinimum": True}, "0", False),   # draft 4
    ({"type": "number", "multipleOf": 0.01}, "19.99", True),
    ({"type": "number", "multipleOf": 0.01}, "19.999", False),
    ({"type": ["integer", "string"], "minimum": 5}, "4", False),
    ({"type": ["integer", "string"], "minimum": 5}, '"4"', True),           # bounds bind numbers only
    ({"minimum": 5}, "null", True),
    ({"enum": [1]}, "1.0", True),                                           # JSON equality
    ({"enum": [1.5]}, "1.50", True),
    ({"const": 0}, "-0", True),
    ({"const": "a"}, '"\\u0061"', True),
    ({"type": "object", "properties": {"a": {"type": "null"}}, "required": ["a"],
      "additionalProperties": False}, '{"\\u0061": null}', True),
])
def test_accept_reject(schema, text, ok):
    assert accepts(schema, text) is ok


def test_deep_recursion_and_indent():
    value: dict = {"v": 0}
    for i in range(1, 21):
        value = {"v": i, "kids": [value]}
    assert accepts(TREE, json.dumps(value, indent=2))
    assert accepts(TREE, json.dumps(value, separators=(",", ":")), whitespace="compact")


def test_indent_16_deep_any_value():
    value: object = 1
    for _ in range(16):
        value = {"k": [value]}
    assert accepts(True, json.dumps(value, indent=2))


def test_compact_allows_no_whitespace():
    assert accepts(PERSON, '{"name":"Ada","age":36}', whitespace="compact")
    assert not accepts(PERSON, '{"name": "Ada"}', whitespace="compact")


@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "object", "properties": {"x": {"type": "number", "multipleOf": 1234567.89}}}, "multipleOf",
     "/properties/x/multipleOf"),
    ({"type": "string", "uniqueItems": True, "not": {}}, "uniqueItems", "/uniqueItems"),
    ({"allOf": [{"type": "string"}]}, "allOf", "/allOf"),
    ({"$ref": "http://example.com/s.json"}, "$ref", "/$ref"),
])
def test_unsupported_keywords_name_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(UnsupportedFeatureError) as info:
        structgen.compile_json_schema(schema, BYTES)
    assert info.value.keyword == keyword
    assert info.value.pointer == pointer
    assert keyword in str(info.value) and pointer in str(info.value)


@pytest.mark.parametrize("schema", [{"type": "strin"}, {"$ref": "#/$defs/missing"},
                                    {"type": "string", "minLength": -1}, {"anyOf": []}])
def test_invalid_schemas_raise_schema_error(schema):
    with pytest.raises(SchemaError):
        structgen.compile_json_schema(schema, BYTES)


def test_annotations_and_unknown_keywords_are_ignored():
    schema = {"type": "object", "title": "t", "x-kubernetes-group-version-kind": [{"k": 1}],
              "id": "draft4-id", "markdownDescription": "**x**",
              "properties": {"a": {"type": "integer", "readonly": True}}}
    assert accepts(schema, '{"a": 1}')


def test_schema_errors_are_value_errors():
    assert issubclass(SchemaError, ValueError) and issubclass(UnsupportedFeatureError, SchemaError)


def test_schema_given_as_json_text():
    assert structgen.compile_json_schema('{"type": "boolean"}', BYTES).matcher().advance(ord("t"))


def test_left_recursion_is_a_compile_error():
    schema = {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"}
    with pytest.raises(structgen.CompileError, match="left recursion"):
        structgen.compile_json_schema(schema, BYTES)


def test_strict_closes_objects_unless_the_schema_opens_them():
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}}
    opened = dict(closed, additionalProperties=True)

    def ok(schema, text):
        m = structgen.compile_json_schema(schema, BYTES, strict=True).matcher()
        return all(m.advance(b) for b in text.encode()) and m.can_end()

    assert ok(closed, '{"a": 1}') and not ok(closed, '{"a": 1, "b": 2}')
    assert ok(opened, '{"a": 1, "b": 2}')
    assert accepts(closed, '{"a": 1, "b": 2}')  # not strict: the spec's open default


def test_schema_text_that_is_not_json_is_a_schema_error():
    with pytest.raises(SchemaError, match="not valid JSON"):
        structgen.compile_json_schema("{'type': 'string'}", BYTES)


def test_canonical_spelling_for_generation():
    def ok(schema, text):
        m = structgen.compile_json_schema(schema, BYTES, canonical=True).matcher()
        return all(m.advance(b) for b in text.encode()) and m.can_end()

    assert ok({"type": "integer"}, "12") and not ok({"type": "integer"}, "12.0")
    assert not ok({"type": "number"}, "1e5") and ok({"type": "number"}, "-0.5")
    assert not ok({"type": "number", "maximum": 3}, "-0")
    assert not ok({"const": "a"}, '"\\u0061"') and ok({"const": "é"}, '"\\u00e9"')
    m = structgen.compile_json_schema({"enum": [10, 20]}, BYTES, canonical=True).matcher()
    assert m.advance(ord("2")) and m.forced_text() == "0"


def test_lenient_records_what_it_drops():
    schema = {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 1234567.89},
                                               "tags": {"type": "array", "uniqueItems": True}}}
    compiled = structgen.compile_json_schema(schema, BYTES, lenient=True)
    assert [(r.keyword, r.pointer) for r in compiled.relaxed] == [
        ("multipleOf", "/properties/n/multipleOf"), ("uniqueItems", "/properties/tags/uniqueItems")]
    assert structgen.compile_json_schema(schema, BYTES, lenient=True, whitespace="compact").relaxed
    assert structgen.compile_json_schema({"type": "integer"}, BYTES, lenient=True).relaxed == ()
    with pytest.raises(UnsupportedFeatureError):  # never relaxed: allOf is not in the list
        structgen.compile_json_schema({"allOf": [{}]}, BYTES, lenient=True)


def test_enum_objects_match_in_any_key_order_when_walking():
    schema = {"const": {"a": 1, "b": [True], "c": None}}
    assert accepts(schema, '{"c": null, "a": 1.0, "b": [true]}')
    assert not accepts(schema, '{"c": null, "a": 1}')                # a member missing
    assert not accepts(schema, '{"a": 1, "a": 1, "b": [true], "c": null}')


def test_refs_to_anchors_and_percent_encoded_pointers():
    schema = {"$defs": {"A": {"$anchor": "item", "type": "integer"}, "b%c": {"type": "null"}},
              "type": "array", "items": {"anyOf": [{"$ref": "#item"}, {"$ref": "#/$defs/b%25c"}]}}
    assert accepts(schema, "[1, null]") and not accepts(schema, '["x"]')
    with pytest.raises(SchemaError, match="no \\$anchor"):
        structgen.compile_json_schema({"$ref": "#nowhere"}, BYTES)


@pytest.mark.parametrize("schema,text,ok", [
    ({"type": "string", "pattern": "a"}, '"xax"', True),                 # unanchored search
    ({"type": "string", "pattern": "^a"}, '"xa"', False),
    ({"type": "string", "pattern": "^é+$"}, '"\\u00e9\\u00E9é"', True),  # decoded string counts
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 3}, '"abc"', True),
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 3}, '"abcd"', False),
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 3}, '"a"', False),
    ({"type": "string", "pattern": "^.+$", "maxLength": 2}, '"\\u00e9\\n"', False),  # \n is not .
    ({"type": "string", "pattern": "^.+$", "maxLength": 2}, '"\\u00e9\\t"', True),
    ({"type": "string", "format": "date"}, '"2024-02-29"', True),
    ({"type": "string", "format": "date"}, '"2023-02-29"', False),
    ({"type": "string", "format": "uuid"}, '"123e4567-e89b-12d3-a456-426614174000"', True),
    ({"type": "string", "format": "ipv4"}, '"256.1.1.1"', False),
    ({"type": "string", "format": "email", "pattern": "@example\\.com$"}, '"ada@example.com"', True),
    ({"type": "string", "format": "email", "pattern": "@example\\.com$"}, '"ada@example.org"', False),
    ({"format": "date"}, "12", True),                                    # formats bind strings only
])
def test_patterns_and_formats(schema, text, ok):
    assert accepts(schema, text) is ok


def test_unknown_format_is_refused_or_relaxed():
    schema = {"type": "object", "properties": {"c": {"type": "string", "format": "color-hex"}}}
    with pytest.raises(UnsupportedFeatureError, match="color-hex") as info:
        structgen.compile_json_schema(schema, BYTES)
    assert info.value.pointer == "/properties/c/format"
    relaxed = structgen.compile_json_schema(schema, BYTES, lenient=True).relaxed
    assert [(r.keyword, r.pointer) for r in relaxed] == [("format", "/properties/c/format")]


def test_a_length_too_large_beside_a_format_is_refused_or_relaxed():
    schema = {"type": "string", "format": "email", "maxLength": 254}
    with pytest.raises(UnsupportedFeatureError, match="maxLength"):
        structgen.compile_json_schema(schema, BYTES)
    compiled = structgen.compile_json_schema(schema, BYTES, lenient=True)
    assert [r.keyword for r in compiled.relaxed] == ["maxLength"]
    # lengths a format implies anyway cost nothing and are kept
    assert structgen.compile_json_schema({"type": "string", "format": "date", "maxLength": 64}, BYTES).relaxed == ()
