"""Accept/reject tables for the JSON schema frontend, walked byte by byte on a byte vocabulary."""

from __future__ import annotations

import json

import pytest

import structgen
from structgen import SchemaError, UnsupportedFeatureError
from structgen.engine.vocab import Vocabulary

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


@pytest.mark.parametrize("schema", [
    {"not": {"multipleOf": 2}},
    {"type": "integer", "not": {"multipleOf": 3}},
    {"not": {"multipleOf": 0.5}, "minimum": -3, "maximum": 3},
    {"enum": [1, 2, 3, 4, "x"], "not": {"multipleOf": 2}},
    {"anyOf": [{"multipleOf": 2}, {"multipleOf": 3}], "not": {"multipleOf": 6}},
    {"oneOf": [{"multipleOf": 2}, {"multipleOf": 3}]},  # "exactly one" needs the negation
], ids=json.dumps)
def test_not_multiple_of_is_exact_without_exponents(schema):
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    for text in ["0", "1", "2", "3", "4", "6", "-4", "-3", "1.5", "2.0", "2.5", "0.5", "7", "12", '"x"',
                 "null", "-0", "3.0", "6.00", "-1.50"]:
        assert accepts(schema, text) is validator.is_valid(json.loads(text)), text
    assert accepts({"not": {"multipleOf": 2}}, "1e0") is False  # exponents left out (sound)


_D7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize("schema,texts", [
    ({"not": {"contains": {"const": 1}}}, ["[]", "[1]", "[2]", "[2, 1]", "[2, 3]", "1", "{}"]),
    ({"type": "array", "not": {"contains": {"const": 1}, "minContains": 2}}, ["[]", "[1]", "[1, 1]", "[2, 1, 3]"]),
    ({"type": "array", "not": {"contains": {"const": 1}, "maxContains": 1}}, ["[]", "[1]", "[1, 1]", "[1, 2, 1]"]),
    ({"not": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}}, ["1", "2", "1.5", "2.5", '"x"', "0.5"]),
    # an object value: the negation of the schema matching exactly it
    ({"not": {"const": {"a": 1}}}, ["{}", '{"a": 1}', '{"a": 2}', '{"a": 1, "b": 1}', '{"b": 1}', "1", '{"a": 1.0}']),
    ({"not": {"enum": [{"a": {"b": "x"}}, 3, {}]}},
     ["{}", '{"a": {"b": "x"}}', '{"a": {"b": "y"}}', '{"a": {"b": "x", "c": 1}}', "3", "4", '{"c": 1}']),
    # several contains on one array: each element classed by the subset it matches
    ({"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}, "maxContains": 1}]},
     ["[]", "[1]", "[2]", "[1, 2]", "[2, 1]", "[1, 2, 2]", "[3, 2, 3, 1, 1]"]),
    ({"type": "array", "oneOf": [{"items": {"type": "integer"}}, {"contains": {"type": "string"}}]},
     ["[]", "[1]", '["s"]', '[1, "s"]', "[null]"]),
    ({"type": "object", "not": {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}},
     ["{}", '{"a": 1}', '{"b": 1}', '{"a": 1, "b": 1}']),
    ({"$schema": _D7, "type": "object", "not": {"dependencies": {"a": ["b", "c"]}}},
     ["{}", '{"a": 1}', '{"a": 1, "b": 1}', '{"a": 1, "b": 1, "c": 1}', '{"b": 1}']),
    ({"type": "object", "not": {"dependentSchemas": {"a": {"required": ["b"]}}}},
     ["{}", '{"a": 1}', '{"a": 1, "b": 1}', '{"b": 1}']),
    ({"$schema": _D7, "type": "object", "oneOf": [{"required": ["a"]}, {"dependencies": {"b": ["a"]}}]},
     ["{}", '{"a": 1}', '{"b": 1}', '{"a": 1, "b": 1}']),
], ids=lambda x: json.dumps(x)[:50])
def test_not_over_contains_oneof_and_dependencies_is_exact(schema, texts):
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    for text in texts:
        assert accepts(schema, text) is validator.is_valid(json.loads(text)), text


# not over a keyword about members: an object with some member that breaks it
_SOME_MEMBER = [
    ({"not": {"additionalProperties": False}}, ['{}', '{"a": 1}', '1', '"x"']),
    ({"properties": {"a": {}}, "not": {"properties": {"a": {}}, "additionalProperties": False}},
     ['{}', '{"a": 1}', '{"a": 1, "b": 2}', '{"b": 2}']),
    ({"not": {"patternProperties": {"^x": {"type": "integer"}}}},
     ['{}', '{"x1": 1}', '{"x1": "s"}', '{"y": "s"}', '{"y": 1, "x": null}']),
    ({"not": {"propertyNames": {"maxLength": 2}}}, ['{}', '{"ab": 1}', '{"abc": 1}', '{"ab": 1, "abcd": 2}']),
    ({"properties": {"p": {"type": "string"}, "q": {}}, "required": ["p"],
      "not": {"propertyNames": {"pattern": "^[pq]$"}}},
     ['{"p": "s"}', '{"p": "s", "q": 1}', '{"p": "s", "r": 1}', '{"p": "s", "q": 1, "zz": 2}']),
    ({"properties": {"a": {"type": "integer"}}, "not": {"additionalProperties": {"type": "string"}}},
     ['{"a": 1}', '{"a": 1, "b": "s"}', '{"a": 1, "b": 2}', '{"b": "x", "c": 3}']),
    # the branches overlap on {}: each is "itself and not the other", so a key of the other's
    ({"oneOf": [{"properties": {"a": {}}, "additionalProperties": False},
                {"properties": {"b": {}}, "additionalProperties": False}]},
     ['{}', '{"a": 1}', '{"b": 1}', '{"a": 1, "b": 1}', '{"c": 1}']),
    # two members asked for: one member may be both
    ({"not": {"additionalProperties": False}, "allOf": [{"not": {"propertyNames": {"maxLength": 3}}}]},
     ['{}', '{"a": 1}', '{"abcd": 1}', '{"a": 1, "abcd": 2}']),
    ({"properties": {"a": {}, "b": {}},
      "not": {"anyOf": [{"propertyNames": {"pattern": "^a"}}, {"propertyNames": {"pattern": "^b"}}]}},
     ['{"c": 1}', '{"a": 1, "b": 2}', '{"a": 1}', '{"ab": 1}', '{"a": 1, "ab": 2}', '{"b": 1, "ab": 2}']),
    # properties merged from two conjuncts: keys in any order, the member asked for anywhere
    ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}}}],
      "not": {"propertyNames": {"enum": ["a", "b"]}}},
     ['{"a": 1}', '{"b": 1, "a": 1}', '{"b": 1, "z": 1, "a": 1}', '{"z": 1}', '{"a": "s", "z": 1}']),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}}}],
      "not": {"anyOf": [{"propertyNames": {"pattern": "^a"}}, {"propertyNames": {"pattern": "^b"}}]}},
     ['{"a": 1}', '{"b": 1, "a": 1}', '{"a": 1, "c": 2}', '{"b": 1}']),
]


@pytest.mark.parametrize("schema,text", [(schema, text) for schema, texts in _SOME_MEMBER for text in texts])
def test_not_over_member_keywords_is_exact(schema, text):
    import jsonschema

    want = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
    assert accepts(schema, text) is want
    assert accepts(schema, json.dumps(json.loads(text), separators=(",", ":")), whitespace="compact") is want


def test_generation_writes_the_member_not_asks_for():
    # strict generation closes objects, so the member must come from a named key or a pattern
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "patternProperties": {"^x-": {"type": "boolean"}},
              "not": {"properties": {"a": {}, "b": {}}, "additionalProperties": False}}
    compiled = structgen.compile_json_schema(schema, BYTES, whitespace="compact", strict=True, canonical=True)

    def ok(text):
        m = compiled.matcher()
        return all(m.advance(b) for b in text.encode()) and m.can_end()

    assert ok('{"x-1":true}') and ok('{"a":1,"x-1":true}')
    assert not ok('{}') and not ok('{"a":1,"b":2}') and not ok('{"a":1,"c":2}')


@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "object", "properties": {"x": {"type": "number", "multipleOf": 1234567.89}}}, "multipleOf",
     "/properties/x/multipleOf"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
    ({"type": "array", "contains": {"type": "array", "uniqueItems": True}}, "contains", "/contains"),
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
    with pytest.raises(UnsupportedFeatureError):  # never relaxed: $ref is not in the list
        structgen.compile_json_schema({"$ref": "http://example.com/s.json"}, BYTES, lenient=True)


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


def test_a_defined_format_structgen_lacks_is_refused_or_relaxed():
    schema = {"type": "object", "properties": {"c": {"type": "string", "format": "uri-template"}}}
    with pytest.raises(UnsupportedFeatureError, match="'uri-template'") as info:
        structgen.compile_json_schema(schema, BYTES)
    assert info.value.pointer == "/properties/c/format"
    relaxed = structgen.compile_json_schema(schema, BYTES, lenient=True).relaxed
    assert [(r.keyword, r.pointer) for r in relaxed] == [("format", "/properties/c/format")]


@pytest.mark.parametrize("strict", [False, True])
def test_a_custom_format_is_an_annotation_recorded_as_unchecked(strict):
    # OpenAPI's "byte", Kubernetes' "int-or-string": JSON Schema defines no such format, so a
    # validator ignores it (python-jsonschema does) and so does structgen, saying so.
    schema = {"type": "object", "properties": {"data": {"type": "string", "format": "byte"}}}
    compiled = structgen.compile_json_schema(schema, BYTES, strict=strict, canonical=strict)
    assert [(r.keyword, r.pointer) for r in compiled.relaxed] == [("format", "/properties/data/format")]
    assert "custom format 'byte'" in compiled.relaxed[0].reason
    m = compiled.matcher()
    assert all(m.advance(b) for b in b'{"data":"not base64!"}') and m.can_end()
    # under not, an annotation would exclude every string: refused rather than guessed
    with pytest.raises(UnsupportedFeatureError, match="custom format 'byte' under not"):
        structgen.compile_json_schema({"type": "string", "not": {"format": "byte"}}, BYTES)


def test_draft3_format_names_read_as_their_later_names():
    assert accepts({"type": "string", "format": "host-name"}, '"example.com"') is True
    assert accepts({"type": "string", "format": "host-name"}, '"-bad-"') is False
    assert accepts({"type": "string", "format": "ip-address"}, '"10.0.0.1"') is True
    assert accepts({"type": "string", "format": "ip-address"}, '"10.0.0.256"') is False


def test_a_length_too_large_beside_a_format_is_refused_or_relaxed():
    schema = {"type": "string", "format": "email", "maxLength": 254}
    with pytest.raises(UnsupportedFeatureError, match="maxLength"):
        structgen.compile_json_schema(schema, BYTES)
    compiled = structgen.compile_json_schema(schema, BYTES, lenient=True)
    assert [r.keyword for r in compiled.relaxed] == ["maxLength"]
    # lengths a format implies anyway cost nothing and are kept
    assert structgen.compile_json_schema({"type": "string", "format": "date", "maxLength": 64}, BYTES).relaxed == ()


# ---------------------------------------------------------------- combinators (json_schema/dnf.py)

_BASE = {"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}}
_NODE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer"},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node", "required": ["v"]}}}}},
    "$ref": "#/$defs/node"}
_TAGGED = {"type": "object", "oneOf": [
    {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
    {"properties": {"kind": {"enum": ["b", "c"]}, "y": {"type": "string"}}, "required": ["kind", "y"]}]}


@pytest.mark.parametrize("schema,text,ok", [
    # allOf: types intersected (integer ∩ number = integer)
    ({"allOf": [{"type": ["string", "integer"]}, {"type": "number"}]}, "3", True),
    ({"allOf": [{"type": ["string", "integer"]}, {"type": "number"}]}, "3.5", False),
    ({"allOf": [{"type": ["string", "integer"]}, {"type": "number"}]}, '"a"', False),
    # properties per key, required united; keys of a merged object in any order when walking
    ({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}, '{"a": 1, "b": "x"}', True),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}, '{"b": "x", "a": 1}', True),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}, '{"a": 1}', False),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}, '{"a": "1", "b": "x"}', False),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"minimum": 0}}}]}, '{"a": -1}', False),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"minimum": 0}}}]}, '{"a": 0}', True),
    # a branch's additionalProperties governs the keys *that branch* does not list
    ({"allOf": [{"properties": {"a": {}}, "additionalProperties": False}, {"properties": {"b": {}}}]}, '{"a": 1}', True),
    ({"allOf": [{"properties": {"a": {}}, "additionalProperties": False}, {"properties": {"b": {}}}]}, '{"b": 1}', False),
    ({"allOf": [{"properties": {"a": {}}, "additionalProperties": False}, {"properties": {"b": {}}}]}, '{"c": 1}', False),
    ({"allOf": [{"properties": {"a": {}}}], "additionalProperties": {"type": "boolean"}}, '{"a": true}', True),
    ({"allOf": [{"properties": {"a": {}}}], "additionalProperties": {"type": "boolean"}}, '{"a": 1}', False),
    # numbers: tightest bounds, multipleOf as the least common multiple
    ({"allOf": [{"minimum": 2}, {"maximum": 5, "exclusiveMinimum": 2}]}, "2", False),
    ({"allOf": [{"minimum": 2}, {"maximum": 5, "exclusiveMinimum": 2}]}, "2.5", True),
    ({"allOf": [{"minimum": 2}, {"maximum": 5, "exclusiveMinimum": 2}]}, "5.1", False),
    ({"type": "integer", "allOf": [{"multipleOf": 4}, {"multipleOf": 6}]}, "24", True),
    ({"type": "integer", "allOf": [{"multipleOf": 4}, {"multipleOf": 6}]}, "18", False),
    ({"type": "integer", "allOf": [{"multipleOf": 4}, {"multipleOf": 6}]}, "8", False),
    ({"allOf": [{"multipleOf": 0.5}, {"multipleOf": 0.75}]}, "1.5", True),
    ({"allOf": [{"multipleOf": 0.5}, {"multipleOf": 0.75}]}, "0.75", False),
    # strings: tightest lengths, every pattern kept
    ({"allOf": [{"type": "string", "minLength": 2}, {"maxLength": 3}]}, '"abcd"', False),
    ({"allOf": [{"type": "string", "minLength": 2}, {"maxLength": 3}]}, '"abc"', True),
    ({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}, '"ab"', True),
    ({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}, '"a"', False),
    ({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}, '"b"', False),
    ({"type": "string", "allOf": [{"format": "date"}, {"pattern": "-02-"}]}, '"2024-02-29"', True),
    ({"type": "string", "allOf": [{"format": "date"}, {"pattern": "-02-"}]}, '"2024-03-01"', False),
    # enum/const: the values valid under every branch
    ({"allOf": [{"enum": ["a", "b", 1]}, {"type": "string"}]}, '"a"', True),
    ({"allOf": [{"enum": ["a", "b", 1]}, {"type": "string"}]}, "1", False),
    ({"allOf": [{"enum": [1, 2, 3]}, {"enum": [2, 3, 4]}]}, "2", True),
    ({"allOf": [{"enum": [1, 2, 3]}, {"enum": [2, 3, 4]}]}, "4", False),
    # items merged
    ({"allOf": [{"items": {"type": "integer"}}, {"items": {"minimum": 0}}]}, "[1, 2]", True),
    ({"allOf": [{"items": {"type": "integer"}}, {"items": {"minimum": 0}}]}, "[-1]", False),
    ({"allOf": [{"items": {"type": "integer"}}, {"items": {"minimum": 0}}]}, "[0.5]", False),
    # $ref among allOf branches, and keywords beside $ref (2019-09+: one more assertion)
    (dict(_BASE, allOf=[{"$ref": "#/$defs/base"}, {"properties": {"n": {"type": "string"}}, "required": ["n"]}]),
     '{"id": 1, "n": "x"}', True),
    (dict(_BASE, allOf=[{"$ref": "#/$defs/base"}, {"properties": {"n": {"type": "string"}}, "required": ["n"]}]),
     '{"n": "x"}', False),
    (dict(_BASE, **{"$ref": "#/$defs/base", "properties": {"n": {"type": "string"}}}), '{"n": "x", "id": 2}', True),
    (dict(_BASE, **{"$ref": "#/$defs/base", "properties": {"n": {"type": "string"}}}), '{"id": 2, "n": 3}', False),
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}, '"ab"', True),
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}, '"abc"', False),
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}, "1", False),
    (_NODE, '{"kids": [{"v": 1, "kids": [{"v": 2}]}]}', True),                  # recursion beside a $ref
    (_NODE, '{"kids": [{"v": 1, "kids": [{"kids": []}]}]}', False),
    # anyOf beside other keywords: distributed into each branch; branches matching nothing dropped
    ({"type": "string", "anyOf": [{"maxLength": 2}, {"minLength": 4}]}, '"ab"', True),
    ({"type": "string", "anyOf": [{"maxLength": 2}, {"minLength": 4}]}, '"abc"', False),
    ({"type": "string", "anyOf": [{"maxLength": 2}, {"minLength": 4}]}, '"abcd"', True),
    ({"type": "string", "anyOf": [{"maxLength": 2}, {"minLength": 4}]}, "1", False),
    ({"type": "integer", "anyOf": [{"type": "string"}, {"minimum": 3}]}, "3", True),
    ({"type": "integer", "anyOf": [{"type": "string"}, {"minimum": 3}]}, "2", False),
    ({"anyOf": [False, {"type": "null"}]}, "null", True),
    ({"type": "object", "anyOf": [{"required": ["k"]}, {"required": ["j"]}]}, '{"j": 1}', True),
    ({"type": "object", "anyOf": [{"required": ["k"]}, {"required": ["j"]}]}, "{}", False),
    # oneOf with provably disjoint branches is anyOf
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, '"a"', True),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "null", False),
    ({"oneOf": [{"type": "number", "maximum": 0}, {"type": "number", "exclusiveMinimum": 0}]}, "0", True),
    ({"oneOf": [{"type": "number", "maximum": 0}, {"type": "number", "exclusiveMinimum": 0}]}, "0.5", True),
    ({"type": "string", "oneOf": [{"enum": ["a", "b"]}, {"const": "c"}]}, '"c"', True),
    ({"type": "string", "oneOf": [{"enum": ["a", "b"]}, {"const": "c"}]}, '"d"', False),
    ({"oneOf": [True, False]}, '{"x": [1]}', True),
    (_TAGGED, '{"kind": "a", "x": 1}', True),                                 # a discriminator
    (_TAGGED, '{"kind": "c", "y": "s"}', True),
    (_TAGGED, '{"kind": "a", "y": "s"}', False),
    (_TAGGED, '{"kind": "d", "y": "s"}', False),
    # not
    ({"not": {"type": "integer"}}, '"x"', True),
    ({"not": {"type": "integer"}}, "1", False),
    ({"not": {"type": "integer"}}, "1.0", False),                            # 1.0 is an integer
    ({"not": {"type": "integer"}}, "1.5", True),
    ({"not": {"type": "integer"}}, "null", True),
    ({"not": {"type": ["integer", "boolean"]}}, "true", False),
    ({"type": "string", "not": {"enum": ["a", "b"]}}, '"a"', False),
    ({"type": "string", "not": {"enum": ["a", "b"]}}, '"\\u0061"', False),     # in every spelling
    ({"type": "string", "not": {"enum": ["a", "b"]}}, '"ab"', True),
    ({"type": "string", "not": {"enum": ["a", "b"]}}, '""', True),
    ({"type": "string", "maxLength": 1, "not": {"const": ""}}, '""', False),
    ({"type": "string", "pattern": "^[a-z]+$", "not": {"const": "no"}}, '"no"', False),
    ({"type": "string", "pattern": "^[a-z]+$", "not": {"const": "no"}}, '"nope"', True),
    ({"type": "integer", "not": {"const": 1}}, "1", False),
    ({"type": "integer", "not": {"const": 1}}, "1.0", False),
    ({"type": "integer", "not": {"const": 1}}, "10", True),
    ({"type": "number", "minimum": 0, "not": {"enum": [0, 2.5]}}, "0.0", False),
    ({"type": "number", "minimum": 0, "not": {"enum": [0, 2.5]}}, "2.50", False),
    ({"type": "number", "minimum": 0, "not": {"enum": [0, 2.5]}}, "2.55", True),
    ({"type": "boolean", "not": {"const": True}}, "false", True),
    ({"type": "boolean", "not": {"const": True}}, "true", False),
    ({"not": {"const": None}}, "null", False),
    ({"not": {"const": None}}, "0", True),
    ({"not": {"not": {"type": "string"}}}, '"a"', True),                     # double negation
    ({"not": {"not": {"type": "string"}}}, "1", False),
    ({"not": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "null", False),   # De Morgan
    ({"not": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "[]", True),
    ({"not": False}, "[1]", True),
    ({"properties": {"foo": {"not": {}}}}, '{"foo": 1}', False),              # a forbidden key
    ({"properties": {"foo": {"not": {}}}}, '{"bar": 1}', True),
    ({"properties": {"foo": False}, "additionalProperties": True}, '{"foo": 1}', False),
    # false items, required keys outside properties
    ({"items": False}, "[]", True),
    ({"items": False}, "[1]", False),
    ({"required": ["a"]}, '{"a": [1]}', True),
    ({"required": ["a"]}, '{"b": 1}', False),
    ({"required": ["a"]}, '"not an object"', True),
    ({"required": ["a"], "additionalProperties": {"type": "integer"}}, '{"a": "x"}', False),
    ({"properties": {"p": {}}, "required": ["b", "a"]}, '{"a": 1, "x": 0, "p": 2, "b": 3}', True),  # any order
    ({"properties": {"p": {}}, "required": ["b", "a"]}, '{"a": 1, "p": 2}', False),
])
def test_combinators(schema, text, ok):
    assert accepts(schema, text) is ok


@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "array", "items": {"enum": [1, 2]}, "oneOf": [{"uniqueItems": True}, {"maxItems": 2}]}, "oneOf", "/oneOf"),
    ({"not": {"type": "string", "uniqueItems": True}}, "not", "/not"),
    ({"allOf": [{"not": {"propertyNames": {"pattern": p}}} for p in "abcde"]},
     "not", "/allOf/4/not/propertyNames"),  # five members asked for: four are supported
    ({"not": {}}, "not", "/not"),
    ({"not": True}, "not", "/not"),
    ({"type": "object", "not": {"const": {"a": [1]}}}, "not", "/not/const"),
    ({"allOf": [{"$ref": "https://example.com/s.json"}]}, "$ref", "/allOf/0/$ref"),
    ({"allOf": [{"uniqueItems": True}]}, "uniqueItems", "/allOf/0/uniqueItems"),
    ({"allOf": [{"anyOf": [{"required": [f"k{i}{j}"]} for j in range(4)]} for i in range(4)]}, "allOf", "/allOf"),
    ({"anyOf": [False, False]}, "false", "/anyOf/0"),
    ({"allOf": [True, False]}, "false", "/allOf/1"),
    ({"$schema": "http://example.com/my-metaschema", "type": "string"}, "$schema", "/$schema"),
])
def test_combinator_refusals_name_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(UnsupportedFeatureError) as info:
        structgen.compile_json_schema(schema, BYTES)
    assert (info.value.keyword, info.value.pointer) == (keyword, pointer)


def test_an_allof_of_anyofs_keeps_only_the_possible_alternatives():
    # 4**4 = 256 combinations, of which only the 4 with one type throughout have values
    schema = {"allOf": [{"anyOf": [{"type": t} for t in ("string", "null", "boolean", "array")]}] * 4}
    assert accepts(schema, '"x"') and accepts(schema, "null") and accepts(schema, "[1]")
    assert not accepts(schema, "1") and not accepts(schema, "{}")


def test_unsatisfiable_allof_names_both_pointers():
    with pytest.raises(SchemaError) as info:
        structgen.compile_json_schema({"allOf": [{"type": "string"}, {"type": "integer"}]}, BYTES)
    assert not isinstance(info.value, UnsupportedFeatureError)
    assert "/allOf/0/type" in str(info.value) and "/allOf/1/type" in str(info.value)
    with pytest.raises(SchemaError, match="/not/type"):
        structgen.compile_json_schema({"type": "string", "not": {"type": "string"}}, BYTES)


def test_reference_cycle_without_a_property_is_left_recursion():
    schema = {"$defs": {"a": {"type": "object", "allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}
    with pytest.raises(structgen.CompileError, match="left recursion"):
        structgen.compile_json_schema(schema, BYTES)


def test_draft7_keywords_beside_ref_follow_the_draft_unless_strict():
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
              "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 2}}}
    walking = structgen.compile_json_schema(schema, BYTES)  # as python-jsonschema reads draft 7
    strict = structgen.compile_json_schema(schema, BYTES, strict=True)  # generation: both readings
    for text, spec, both in [('{"a":"xyz"}', True, False), ('{"a":"x"}', True, True), ('{"a":1}', False, False)]:
        for compiled, want in ((walking, spec), (strict, both)):
            m = compiled.matcher()
            assert (all(m.advance(b) for b in text.encode()) and m.can_end()) is want, (text, compiled is strict)
    schema["properties"]["a"]["not"] = {"uniqueItems": True}  # ignored by draft 7, inexact if applied
    assert structgen.compile_json_schema(schema, BYTES)
    with pytest.raises(UnsupportedFeatureError, match="not"):
        structgen.compile_json_schema(schema, BYTES, strict=True)


def test_draft7_allof_and_annotations_beside_ref_still_compile():
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
              "properties": {"a": {"$ref": "#/definitions/s", "description": "a string"},
                             "b": {"allOf": [{"$ref": "#/definitions/s"}, {"maxLength": 1}]}}}
    assert accepts(schema, '{"a": "xyz", "b": "x"}') and not accepts(schema, '{"b": "xy"}')


def test_known_drafts_are_accepted_as_schema_dialects():
    for uri in ("http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema",
                "http://json-schema.org/draft-04/schema", "https://json-schema.org/draft/2019-09/schema#"):
        assert accepts({"$schema": uri, "type": "null"}, "null")


def test_lenient_reads_oneof_as_anyof_and_drops_inexact_not():
    schema = {"properties": {"n": {"type": "array", "items": {"enum": [1, 2]},
                                   "oneOf": [{"uniqueItems": True}, {"maxItems": 2}]},
                             "s": {"type": "string", "not": {"uniqueItems": True}}}}
    compiled = structgen.compile_json_schema(schema, BYTES, lenient=True)
    assert [(r.keyword, r.pointer) for r in compiled.relaxed] == [
        ("oneOf", "/properties/n/oneOf"), ("not", "/properties/s/not")]
    m = compiled.matcher()
    assert all(m.advance(b) for b in b'{"n": [1], "s": "x"}') and m.can_end()
    with pytest.raises(UnsupportedFeatureError):  # allOf is exact or refused, never relaxed
        structgen.compile_json_schema({"allOf": [{"$ref": "https://example.com/s.json"}]}, BYTES, lenient=True)


def test_strict_closes_a_merged_object_to_its_merged_keys():
    schema = {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "string"}}}]}

    def ok(text, **kw):
        m = structgen.compile_json_schema(schema, BYTES, strict=True, **kw).matcher()
        return all(m.advance(b) for b in text.encode()) and m.can_end()

    assert ok('{"a": 1, "b": "x"}') and ok('{"b": "x"}') and not ok('{"a": 1, "c": 2}')
    # generation (canonical) keeps one key order: the merge order
    assert ok('{"a":1,"b":"x"}', canonical=True) and not ok('{"b":"x","a":1}', canonical=True)


def test_merged_alternatives_leave_no_dangling_rules():
    # e has no value; the branch requiring it is dropped, the items that would hold it leave only
    # [], and no half-built rule for e stays behind
    schema = {"$defs": {"e": {"type": "string", "minLength": 3, "maxLength": 1}},
              "anyOf": [{"type": "object", "properties": {"k": {"$ref": "#/$defs/e"}}, "required": ["k"]},
                        {"type": "array", "items": {"$ref": "#/$defs/e"}}]}
    assert accepts(schema, "[]") and not accepts(schema, '["ab"]') and not accepts(schema, '{"k": "ab"}')
    g = structgen.frontends.json_schema.translate.schema_to_grammar(schema)
    assert not [name for name, _ in g.rules if name.startswith("s_defs_e")]


_POOL = [None, True, False, 0, 1, 2, 3, 6, -1, 1.5, 2.5, "", "a", "ab", "abc", "b", [], [1], ["a"],
         [1, "a"], {}, {"a": 1}, {"a": "x"}, {"b": 1}, {"a": 1, "b": 2}, {"a": None}, {"c": 1}]


def _random_schema(rng, depth=0):
    """A small schema of combinators over leaf keywords (the differential test below)."""
    def leaf():
        return rng.choice([
            lambda: {"type": rng.choice(["null", "boolean", "integer", "number", "string", "array", "object"])},
            lambda: {"type": rng.sample(["null", "boolean", "integer", "number", "string"], 2)},
            lambda: {"minimum": rng.choice([0, 1, 1.5])},
            lambda: {"exclusiveMaximum": rng.choice([1, 3, 2.5])},
            lambda: {"multipleOf": rng.choice([2, 3, 0.5])},
            lambda: {"enum": rng.sample(_POOL, 3)},
            lambda: {"const": rng.choice(_POOL)},
            lambda: {"minLength": rng.choice([1, 2])},
            lambda: {"maxLength": rng.choice([0, 1, 2])},
            lambda: {"pattern": rng.choice(["^a", "b", "^[ab]+$"])},
            lambda: {"properties": {k: _random_schema(rng, depth + 1) for k in rng.sample("ab", rng.randint(1, 2))},
                     **({"required": rng.sample("abc", rng.randint(1, 2))} if rng.random() < .5 else {})},
            lambda: {"additionalProperties": rng.choice([False, {"type": "integer"}])},
            lambda: {"required": rng.sample("abc", 1)},
            lambda: {"items": _random_schema(rng, depth + 1)},
            lambda: rng.choice([True, False]),
            lambda: {"not": rng.choice([{"type": rng.choice(["integer", "string", "null", "number"])},
                                        {"enum": rng.sample([1, 2.5, "a", "", True, None], 2)}, {}, False])},
        ])()

    if depth >= 2 or rng.random() < 0.45:
        schema = leaf()
    else:
        schema = {rng.choice(["allOf", "anyOf", "oneOf"]): [_random_schema(rng, depth + 1)
                                                           for _ in range(rng.randint(1, 3))]}
    if isinstance(schema, dict) and depth < 2 and rng.random() < 0.35:
        extra = leaf()
        if isinstance(extra, dict):
            for k, v in extra.items():
                schema.setdefault(k, v)
    return schema


@pytest.mark.parametrize("seed", range(4))
def test_random_combinators_agree_with_jsonschema(seed):
    # Exact or refused: on random combinations, a compiled grammar accepts some key order of every
    # instance python-jsonschema finds valid, and no order of one it finds invalid.
    import itertools
    import random

    from jsonschema import Draft202012Validator

    rng = random.Random(seed)
    compiled = 0
    for _ in range(25):
        schema = _random_schema(rng)
        try:
            c = structgen.compile_json_schema(schema, BYTES)
        except structgen.StructgenError:
            continue
        compiled += 1
        validator = Draft202012Validator(schema)
        for value in _POOL:
            orders = ([dict(p) for p in itertools.permutations(value.items())]
                      if isinstance(value, dict) and len(value) > 1 else [value])
            got = False
            for v in orders:
                m = c.matcher()
                got = got or (all(m.advance(b) for b in json.dumps(v).encode()) and m.can_end())
            assert got is validator.is_valid(value), (schema, value)
    assert compiled >= 10


# -- arrays: positions, counts, contains, uniqueItems (python-jsonschema is the oracle)

ARRAY_CASES = [
    ({"type": "array", "contains": {"type": "string", "pattern": "^a"}}, ["[]", '["b"]', '["b","ab"]', "[1]"]),
    ({"type": "array", "minItems": 2, "maxItems": 3}, ["[]", "[1]", "[1,2]", "[1,2,3]", "[1,2,3,4]"]),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
     ["[]", "[1]", '[1,"a"]', '[1,"a",2]', '["a"]']),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
      "items": [{"type": "integer"}], "additionalItems": {"type": "string"}}, ['[1,"a","b"]', "[1,2]", "[]"]),
    ({"type": "array", "contains": {"const": 5}}, ["[]", "[1]", "[5]", "[1,5,2]"]),
    ({"type": "array", "contains": {"const": 5}, "minContains": 2, "maxContains": 3},
     ["[5]", "[5,5]", "[1,5,5,5]", "[5,5,5,5]", "[5,1,5]"]),
    ({"type": "array", "contains": {"type": "string"}, "minContains": 0, "maxContains": 1},
     ["[]", "[1]", '["a",1]', '["a","b"]']),
    ({"type": "array", "contains": {"const": 1}, "minItems": 3, "maxItems": 4},
     ["[1,2]", "[1,2,3]", "[2,3,4]", "[2,2,2,1]", "[1,1,1,1,1]"]),
    ({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
     ["[]", '["a","b"]', '["a","a"]', '["c","b","a"]']),
    ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, ["[true,false]", "[true,true]"]),
    ({"type": "array", "prefixItems": [{"const": 1}], "items": {"enum": [1, 2.0]}, "uniqueItems": True},
     ["[1,2]", "[1,1]", "[1]", "[1,2,2]", "[1,2.0]", "[1,1.0]"]),
    ({"allOf": [{"prefixItems": [{"type": "integer"}]}, {"items": {"minimum": 0}, "maxItems": 2}]},
     ["[-1]", "[1,-2]", "[1,2]", "[1,2,3]", '["a"]']),
]


def test_array_counts_and_sets_that_cannot_be_met_are_errors():
    with pytest.raises(SchemaError, match="maxItems is below minItems"):
        structgen.compile_json_schema({"type": "array", "minItems": 3, "maxItems": 2}, BYTES)
    with pytest.raises(SchemaError, match="at least 3 items"):
        structgen.compile_json_schema({"type": "array", "prefixItems": [{}], "items": False, "minItems": 3}, BYTES)
    with pytest.raises(UnsupportedFeatureError, match="uniqueItems"):  # 13 values: 2**13 sets
        structgen.compile_json_schema({"type": "array", "items": {"enum": list(range(13))}, "uniqueItems": True},
                                      BYTES)
    assert accepts({"type": ["array", "null"], "minItems": 3, "maxItems": 2}, "null")  # arrays dropped


COMBINATOR_CASES = [
    ({"not": {"pattern": "^a"}}, ['"abc"', '"bc"', "1", '""']),
    ({"not": {"type": "string", "pattern": "a"}}, ['"ab"', '"b"', "1", "null"]),
    ({"type": "string", "not": {"format": "date"}}, ['"2020-01-01"', '"x"', '"2020-13-01"']),
    ({"enum": ["ab", "b", "ca"], "not": {"pattern": "a"}}, ['"ab"', '"b"', '"ca"']),
    ({"oneOf": [{"type": "string", "pattern": "^https?://.+$"}, {"type": "string", "pattern": "^\\./.+$"}]},
     ['"http://x"', '"./a"', '"y"']),
    ({"oneOf": [{"pattern": "a"}, {"pattern": "b"}]}, ['"a"', '"b"', '"ab"', '"c"', "1"]),
    ({"not": {"items": {"type": "integer"}}}, ["[]", "[1]", '[1,"a"]', '["a"]', '"x"', "3"]),
    ({"type": "array", "not": {"items": {"not": {"const": 1}}}}, ["[]", "[2]", "[2,1]", "[1]"]),
    ({"if": {"minimum": 10}, "then": {"multipleOf": 2}, "else": {"maximum": 3}}, ["12", "13", "3", "5", '"x"']),
    ({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"}, "y": {"type": "string"}},
      "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}, "else": {"required": ["y"]}},
     ['{"kind":"a","x":1}', '{"kind":"a","y":"s"}', '{"kind":"b","y":"s"}', '{"kind":"b","x":1}', '{"x":1}',
      '{"y":"s"}', "{}"]),
    ({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"a": ["b"]}},
     ["{}", '{"a":1}', '{"a":1,"b":2}', '{"b":2}', '{"a":1,"c":3}']),
    ({"type": "object", "properties": {"a": {}, "b": {"type": "integer"}},
      "dependentSchemas": {"a": {"properties": {"b": {"minimum": 5}}, "required": ["b"]}}},
     ['{"a":1}', '{"a":1,"b":6}', '{"a":1,"b":2}', '{"b":2}']),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {}, "b": {}},
      "dependencies": {"a": ["b"]}}, ['{"a":1}', '{"a":1,"b":2}', "[1]"]),
    ({"not": {"required": ["a"]}}, ["{}", '{"a":1}', '{"b":1}', "1"]),
    ({"not": {"minLength": 3}}, ['"ab"', '"abc"', "1"]),
    ({"not": {"properties": {"a": {"type": "string"}}}}, ["{}", '{"a":1}', '{"a":"s"}', "3"]),
    ({"type": "array", "contains": {"type": "integer", "minimum": 5}}, ["[1,2]", "[1,7]", '["a",5]', "[]"]),
    # oneOf over branches that may overlap: each branch and not the others
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, ["1", "2", "2.5", "1.5", '"x"']),
    ({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
     ['{"a":1}', '{"b":1}', '{"a":1,"b":2}', "{}"]),
    ({"oneOf": [{"type": "string", "minLength": 2}, {"type": "string", "maxLength": 4}]}, ['"a"', '"abc"', '"abcdef"']),
    # a branch inside another is empty once the other is negated: dropped, the rest still count
    ({"oneOf": [{"type": "number"}, {}]}, ["1", '"a"', "null"]),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}, {"type": "string"}]}, ["1", "1.5", '"a"', "null"]),
]


OBJECT_CASES = [
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
     ['{"x-a":1}', '{"x-a":"s"}', '{"y":1}', "{}"]),
    ({"type": "object", "properties": {"x-id": {"minimum": 5}}, "patternProperties": {"^x-": {"type": "integer"}}},
     ['{"x-id":6}', '{"x-id":3}', '{"x-id":6.5}', '{"x-b":1,"z":"q"}', '{"x-b":"q"}']),
    ({"patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 3}}, "additionalProperties": {"type": "string"}},
     ['{"ab":4}', '{"ab":2}', '{"a":1.5}', '{"b":2.5}', '{"c":"s"}', '{"c":1}']),
    ({"propertyNames": {"maxLength": 3}}, ["{}", '{"abc":1}', '{"abcd":1}', '{"a":1,"bcde":2}']),
    ({"propertyNames": {"pattern": "^a"}, "properties": {"b": {}}}, ['{"b":1}', '{"ab":1}', '{"c":1}']),
    ({"propertyNames": {"enum": ["x", "y"]}}, ['{"x":1,"y":2}', '{"z":1}']),
    ({"propertyNames": False}, ["{}", '{"a":1}']),
    ({"minProperties": 2}, ["{}", '{"a":1}', '{"a":1,"b":2}']),
    ({"maxProperties": 2, "properties": {"a": {}, "b": {}, "c": {}}},
     ['{"a":1,"b":2}', '{"a":1,"b":2,"c":3}', '{"a":1,"z":2}', '{"a":1,"b":2,"z":3}']),
    ({"minProperties": 1, "maxProperties": 1, "properties": {"a": {}, "b": {}}, "additionalProperties": False},
     ["{}", '{"a":1}', '{"b":1}', '{"a":1,"b":2}']),
    ({"required": ["a"], "minProperties": 2, "properties": {"a": {}}}, ['{"a":1}', '{"a":1,"x":2}']),
]


STRUCTURE_CASES = ARRAY_CASES + COMBINATOR_CASES + OBJECT_CASES


@pytest.mark.parametrize("schema,texts", STRUCTURE_CASES, ids=[json.dumps(s)[:60] for s, _ in STRUCTURE_CASES])
def test_structure_keywords_agree_with_jsonschema(schema, texts):
    """Arrays, objects, conditionals, dependencies, negations and oneOf: accepted exactly when
    python-jsonschema says valid, compact and indent=2."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema, format_checker=jsonschema.FormatChecker())
    for text in texts:
        for spelled in (text, json.dumps(json.loads(text), indent=2)):
            assert accepts(schema, spelled) == validator.is_valid(json.loads(text)), spelled


def test_strict_opens_objects_only_where_the_schema_names_keys():
    schema = {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}}
    compiled = structgen.compile_json_schema(schema, BYTES, strict=True, whitespace="compact")

    def ok(text):
        m = compiled.matcher()
        return all(m.advance(b) for b in text.encode()) and m.can_end()
    assert ok('{"x-a":1}') and not ok('{"y":1}')


def test_refs_resolve_against_id_base_uris_inside_the_document():
    by_id = {"$id": "http://example.com/root.json", "$defs": {"a": {"$id": "nested/a.json", "type": "integer"}},
             "properties": {"x": {"$ref": "nested/a.json"}, "y": {"$ref": "http://example.com/nested/a.json"}}}
    assert accepts(by_id, '{"x": 1, "y": 2}') and not accepts(by_id, '{"x": "s"}')
    urn = {"$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed", "$defs": {"s": {"type": "string"}},
           "$ref": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed#/$defs/s"}
    assert accepts(urn, '"a"') and not accepts(urn, "1")
    inner = {"$id": "http://example.com/", "$defs": {"b": {"$id": "b/", "$defs": {"c": {"type": "null"}},
                                                              "$ref": "#/$defs/c"}}, "$ref": "b/"}
    assert accepts(inner, "null") and not accepts(inner, "1")  # "#/$defs/c" inside b/, not the root
    old_anchor = {"$schema": "http://json-schema.org/draft-07/schema#",
                  "definitions": {"n": {"$id": "#num", "type": "number"}}, "$ref": "#num"}
    assert accepts(old_anchor, "1.5") and not accepts(old_anchor, '"x"')
    with pytest.raises(UnsupportedFeatureError, match="outside this document") as info:
        structgen.compile_json_schema({"$id": "http://example.com/r.json", "$ref": "other.json"}, BYTES)
    assert info.value.pointer == "/$ref"


# -- recursion without a depth limit: trees, expression ASTs, linked lists

AST = {
    "$defs": {"expr": {"oneOf": [
        {"type": "object", "properties": {"num": {"type": "number"}}, "required": ["num"],
         "additionalProperties": False},
        {"type": "object", "properties": {"op": {"enum": ["+", "-", "*", "/"]},
                                          "left": {"$ref": "#/$defs/expr"}, "right": {"$ref": "#/$defs/expr"}},
         "required": ["op", "left", "right"], "additionalProperties": False},
    ]}},
    "$ref": "#/$defs/expr",
}
LINKED_LIST = {"$defs": {"list": {"anyOf": [
    {"type": "null"},
    {"type": "object", "properties": {"head": {"type": "integer"}, "tail": {"$ref": "#/$defs/list"}},
     "required": ["head", "tail"], "additionalProperties": False}]}},
    "$ref": "#/$defs/list"}


def _ast(depth: int, op: str = "+"):
    if depth == 0:
        return {"num": 1.5}
    return {"op": op if depth != 3 else "*", "left": _ast(depth - 1, op), "right": {"num": depth}}


def _linked(n: int):
    value = None
    for i in range(n):
        value = {"head": i, "tail": value}
    return value


def _tree(depth: int, leaf):
    value = {"v": leaf}
    for i in range(depth):
        value = {"v": i, "kids": [{"v": -i}, value]}
    return value


@pytest.mark.parametrize("schema,value,valid", [
    (TREE, _tree(20, 0), True),
    (TREE, _tree(20, "deep"), False),           # a wrong type 20 levels down
    (TREE, {"kids": [_tree(19, 0)]}, False),    # the root lacks "v"
    (AST, _ast(6), True),
    (AST, _ast(6, "%"), False),                  # an unknown operator at every level
    (AST, {"op": "+", "left": _ast(5), "right": {"num": 1, "op": "-"}}, False),  # num with op
    (LINKED_LIST, _linked(30), True),
    (LINKED_LIST, {"head": 0, "tail": {"head": "x", "tail": None}}, False),
])
def test_recursive_schemas_accept_deep_values_and_reject_malformed_ones(schema, value, valid):
    import jsonschema

    assert jsonschema.Draft202012Validator(schema).is_valid(value) is valid  # the oracle agrees
    assert accepts(schema, json.dumps(value, indent=2)) is valid
    assert accepts(schema, json.dumps(value, separators=(",", ":")), whitespace="compact") is valid
    assert accepts(schema, json.dumps(value), whitespace="spaced") is valid


@pytest.mark.parametrize("value", [
    {"name": "Ada", "age": 36, "tags": ["x", "yz"]},
    {"tags": [], "name": "é"},                      # members in another order, an empty array
    {"name": "B", "extra": {"k": [1, {"a": None}]}},  # an open object's free value
])
def test_spaced_whitespace_is_json_dumps_spacing_exactly(value):
    """``"spaced"`` takes ``json.dumps``'s default spelling and no other one."""
    assert accepts(PERSON, json.dumps(value, ensure_ascii=False), whitespace="spaced")
    assert not accepts(PERSON, json.dumps(value, ensure_ascii=False, separators=(",", ":")), whitespace="spaced")
    assert not accepts(PERSON, json.dumps(value, ensure_ascii=False, indent=1), whitespace="spaced")
    assert not accepts(PERSON, json.dumps(value, ensure_ascii=False), whitespace="compact")


@pytest.mark.parametrize("schema,pointer", [
    ({"type": "object", "properties": {1: {"type": "string"}}}, "/properties"),
    ({"enum": [{"a": {2: 3}}]}, "/enum/0/a"),
    ({"properties": {"a/b": {"enum": [[1, {"~x": {3: 4}}]]}}}, "/properties/a~1b/enum/0/1/~0x"),
])
def test_non_string_keys_in_a_python_schema_are_schema_errors(schema, pointer):
    with pytest.raises(SchemaError, match="keys must be strings") as info:
        structgen.compile_json_schema(schema, BYTES)
    assert info.value.pointer == pointer


@pytest.mark.parametrize("draft,later", [
    ("http://json-schema.org/draft-04/schema#", False), ("http://json-schema.org/draft-03/schema#", False),
    ("http://json-schema.org/draft-07/schema#", True), ("https://json-schema.org/draft/2020-12/schema", True)])
def test_integer_spellings_follow_the_draft(draft, later):
    # draft 4: "a JSON number without a fraction or exponent part"; from draft 6 on, 1.0 is one
    import jsonschema

    for extra in ({}, {"minimum": 0, "maximum": 100}):
        schema = {"$schema": draft, "type": "integer", **extra}
        validator = jsonschema.validators.validator_for(schema)(schema)
        for text in ("12", "-0", "12.0", "12.00"):
            assert accepts(schema, text) is validator.is_valid(json.loads(text)) is (later or "." not in text)
    schema = {"$schema": draft, "type": "integer"}
    assert accepts(schema, "1e1") is later  # (with bounds, exponents are refused in every draft)


@pytest.mark.parametrize("schema,pointer,message", [
    ({"properties": {"": {"enum": [{1, 2}]}}}, "/properties//enum/0", "set is not JSON data"),
    ({"items": [{"const": object()}]}, "/items/0/const", "object is not JSON data"),
])
def test_values_json_cannot_spell_are_schema_errors_naming_where(schema, pointer, message):
    with pytest.raises(SchemaError, match=message) as info:
        structgen.compile_json_schema(schema, BYTES)
    assert info.value.pointer == pointer


def test_translating_leaves_no_reference_cycles():
    """What a translation made and dropped is freed at once, not by the cyclic collector: the
    errors of options left out (whose tracebacks hold the frames that caught them, first_error),
    the converter (its merger calls back into it), helpers that call themselves."""
    import gc

    from structgen.frontends.json_schema.translate import translate_schema

    branches = [{"type": "string", "pattern": "[]"}, {"type": "integer", "minimum": 2, "maximum": 1}]
    schema = {"anyOf": branches + [{"type": ["boolean", "string"], "enum": [True]}],
              "$defs": {"o": {"type": "object", "properties": {"a": {"anyOf": branches + [{"type": "null"}]},
                                                               "b": {"type": "array", "prefixItems": [{}, {}],
                                                                     "minItems": 3}}}},
              "properties": {"b": {"$ref": "#/$defs/o"}, "c": {"$ref": "#/$defs/o"}}}
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for canonical in (False, True):
            translate_schema(schema, canonical=canonical)
        gc.collect()
        garbage = [(type(g).__name__, getattr(g, "__qualname__", None) or getattr(getattr(g, "f_code", None),
                                                                                "co_name", "")) for g in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    ours = [(kind, name) for kind, name in garbage
            if kind == "_Converter" or name in ("first_of", "either", "resolve")
            or name.startswith(("object_of.", "_counted.", "merge_equal_rules."))]
    assert not ours, ours


SCALAR_SHORTCUT_CASES = [
    {"type": "object", "properties": {"a": {"type": "string", "description": "d"}, "b": {"type": "integer"},
                                      "c": {"type": "number", "title": "t"}, "d": {"type": "boolean"},
                                      "e": {"type": "null"}, "f": {"type": ["string", "null"]}},
     "required": ["a", "b"]},
    {"$schema": "http://json-schema.org/draft-04/schema#",  # integers without a fraction part
     "type": "array", "items": {"type": "integer"}},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": {"type": "boolean"}},
    {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]},
    {"$defs": {"s": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/s"}}},
]


@pytest.mark.parametrize("options", [{"whitespace": "compact"}, {"whitespace": "flexible", "strict": True},
                                     {"whitespace": "spaced", "canonical": True}])
def test_a_type_alone_names_the_rule_the_merge_path_makes(options, monkeypatch):
    """``{"type": "string"}`` (beside annotations only) goes straight to the type's rule
    (``_Converter.scalar``); the grammar is the one the merge path makes, rule for rule, on
    small cases and on real MaskBench schemas full of such properties."""
    import maskbench as mb
    from structgen.frontends.json_schema import translate

    wanted = {"BFCL_multiple_106.json", "Github_hard---o46173.json", "Snowplow---sp_162_Normalized.json",
              "JsonSchemaStore---buildinfo-schema.json", "Kubernetes---kb_314_Normalized.json",
              "MCPspec---InitializeResult.json", "WashingtonPost---wp_2_Normalized.json"}
    rows = [row["schema"] for row in mb.iter_rows() if row["name"] in wanted] if mb.available() else []
    schemas = SCALAR_SHORTCUT_CASES + rows
    shortcut = [translate.translate_schema(s, **options) for s in schemas]
    monkeypatch.setattr(translate, "_SCALAR_TYPES", frozenset())
    merged = [translate.translate_schema(s, **options) for s in schemas]
    assert shortcut == merged
    assert len(rows) == len(wanted)  # the data is there, and these names are in it
