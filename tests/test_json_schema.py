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
    ({"type": "string", "pattern": "a+"}, "pattern", "/pattern"),
    ({"type": "object", "properties": {"x": {"type": "string", "format": "email"}}}, "format",
     "/properties/x/format"),
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
