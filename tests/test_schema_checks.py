"""Malformed keyword values are refused, never skipped; identifiers count only in subschemas
(issue 25, item 4: wrong verdicts).

Every schema is checked against its draft's metaschema before compiling
(``structgen/frontends/json_schema/metaschema.py``): a value of the wrong shape is a
``SchemaError`` naming its JSON pointer, ``lenient=True`` or not. A schema that declares no
draft is accepted when the 2020-12, draft-7 or draft-4 metaschema accepts it, so draft-4
spellings keep their draft-4 meaning.
"""

from __future__ import annotations

import json
import time

import pytest

import structgen
import maskbench
from structgen.engine.vocab import Vocabulary
from structgen.errors import SchemaError
from structgen.frontends.json_schema.metaschema import PIECE_DEPTH, check_metaschema, drafts_for

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")
D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def accepts(schema, value) -> bool:
    m = structgen.compile_json_schema(schema, BYTES).matcher()
    text = json.dumps(value).encode()
    return all(m.advance(b) for b in text) and m.can_end()


# (schema, JSON pointer of the bad value, a fragment of the message)
MALFORMED = [
    ({"type": "array", "uniqueItems": 1}, "/uniqueItems", "must be a boolean"),
    ({"properties": {"x": {"type": "array", "uniqueItems": 1}}}, "/properties/x/uniqueItems", "'uniqueItems'"),
    ({"$schema": D2020, "type": "number", "exclusiveMinimum": True}, "/exclusiveMinimum", "must be a number"),
    ({"$schema": D7, "type": "number", "minimum": 0, "exclusiveMinimum": True}, "/exclusiveMinimum", "number"),
    ({"type": "number", "exclusiveMinimum": True}, "/exclusiveMinimum", "must be a number"),  # draft 4 needs minimum
    ({"$schema": D4, "type": "number", "exclusiveMaximum": True}, "/", "'maximum' is a dependency"),
    ({"additionalProperties": None}, "/additionalProperties", "must be an object or a boolean, not null"),
    ({"type": "nope"}, "/type", "'type'"),
    ({"type": ["string", 3]}, "/type/1", "item 1 of 'type' must be one of"),
    ({"type": 5}, "/type", "'type'"),
    ({"enum": 5}, "/enum", "must be an array"),
    ({"enum": "a"}, "/enum", "must be an array"),
    ({"required": "a"}, "/required", "must be an array"),
    ({"required": ["a", 1]}, "/required/1", "item 1 of 'required' must be a string"),
    ({"minLength": -1}, "/minLength", "at least 0"),
    ({"minLength": 1.5}, "/minLength", "must be an integer"),
    ({"maxItems": "3"}, "/maxItems", "must be an integer"),
    ({"minProperties": -2}, "/minProperties", "at least 0"),
    ({"pattern": 5}, "/pattern", "must be a string"),
    ({"format": 5}, "/format", "must be a string"),
    ({"items": None}, "/items", "'items'"),
    ({"$schema": D2020, "items": [{"type": "string"}]}, "/items", "'items'"),  # 2020-12: prefixItems
    ({"properties": []}, "/properties", "must be an object"),
    ({"properties": {"a": 3}}, "/properties/a", "must be an object or a boolean"),
    ({"patternProperties": {"^a": "string"}}, "/patternProperties/^a", "must be an object or a boolean"),
    ({"$ref": 5}, "/$ref", "string"),
    ({"allOf": []}, "/allOf", "at least 1"),
    ({"anyOf": {}}, "/anyOf", "must be an array"),
    ({"oneOf": [3]}, "/oneOf/0", "must be an object or a boolean"),
    ({"not": "x"}, "/not", "must be an object or a boolean"),
    ({"multipleOf": 0}, "/multipleOf", "above 0"),
    ({"multipleOf": "2"}, "/multipleOf", "must be a number"),
    ({"maximum": "10"}, "/maximum", "must be a number"),
    ({"const": 1, "contains": 5}, "/contains", "must be an object or a boolean"),
    ({"dependencies": {"a": 5}}, "/dependencies/a", "'a'"),
    ({"dependentRequired": {"a": "b"}}, "/dependentRequired/a", "must be an array"),
    ({"type": "array", "contains": 5}, "/contains", "must be an object or a boolean"),  # not a draft-4 keyword
    ({"type": "array", "items": [{}], "prefixItems": 5}, "/prefixItems", "must be an array"),
    ({"$defs": {"a": {"type": "strin"}}}, "/$defs/a/type", "'type'"),
    ({"definitions": {"a": {"minItems": -1}}}, "/definitions/a/minItems", "at least 0"),
    ({"$schema": 5}, "/$schema", "must be a string"),
    ({"$schema": D2020, "$defs": {"n": {"$id": "#num"}}}, "/$defs/n/$id", "'$id' must match"),
]


@pytest.mark.parametrize("schema,pointer,fragment", MALFORMED, ids=[json.dumps(m[0])[:60] for m in MALFORMED])
@pytest.mark.parametrize("lenient", [False, True])
def test_a_malformed_keyword_value_is_refused(schema, pointer, fragment, lenient):
    with pytest.raises(SchemaError) as info:
        structgen.compile_json_schema(schema, BYTES, lenient=lenient)
    assert info.value.pointer in (pointer, "" if pointer == "/" else pointer)
    assert f"'{pointer}'" in str(info.value) and fragment in str(info.value)


# (schema, value, valid): well-formed in the draft declared, or in one the undeclared schema fits
WELL_FORMED = [
    ({"type": "number", "minimum": 0, "exclusiveMinimum": True}, 0, False),  # undeclared: draft 4's reading
    ({"type": "number", "minimum": 0, "exclusiveMinimum": True}, 0.5, True),
    ({"$schema": D4, "type": "number", "maximum": 3, "exclusiveMaximum": True}, 3, False),
    ({"$schema": D2020, "type": "number", "exclusiveMinimum": 0}, 0, False),
    ({"type": "array", "items": [{"type": "string"}], "additionalItems": False}, ["a", 1], False),
    ({"type": "array", "items": [{"type": "string"}], "additionalItems": False}, ["a"], True),
    ({"enum": ["a", "a", "b"]}, "b", True),  # duplicates: no meaning lost (draft 4 forbids them)
    ({"type": ["string", "string"]}, "x", True),
    ({"$schema": D4, "type": ["object", "object"], "properties": {"a": {"enum": ["x", "x"]}},
      "required": ["a", "a"]}, {"a": "x"}, True),
    ({"$schema": D2020, "type": ["object", "object"], "required": ["a", "a"]}, {"a": 1}, True),
    ({"$schema": D7, "type": "string", "x-anything": {"$id": 5, "type": 3}}, "x", True),  # data, not a schema
    ({"type": "string", "pattern": "\\p{L}"}, "é", None),  # ECMA-262 pattern: not held to Python's re
]


@pytest.mark.parametrize("schema,value,valid", WELL_FORMED, ids=[json.dumps(w[0])[:60] for w in WELL_FORMED])
def test_a_well_formed_value_is_honoured(schema, value, valid):
    check_metaschema(schema)
    if valid is None:  # only the metaschema check is asserted (the compiler may refuse the pattern)
        return
    assert accepts(schema, value) is valid


def test_the_undeclared_draft_rule():
    assert [c.__name__ for c in drafts_for({})] == ["Draft202012Validator", "Draft7Validator", "Draft4Validator"]
    assert [c.__name__ for c in drafts_for({"$schema": D7})] == ["Draft7Validator"]
    assert [c.__name__ for c in drafts_for({"$schema": "https://json-schema.org/draft-07/schema"})] == ["Draft7Validator"]
    assert drafts_for({"$schema": "https://example.com/my-meta"}) == ()  # refused by the compiler instead
    with pytest.raises(structgen.UnsupportedFeatureError, match=r"\$schema"):
        structgen.compile_json_schema({"$schema": "https://example.com/my-meta"}, BYTES)


def _nested(depth: int, leaf: dict) -> dict:
    schema = leaf
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_deep_schema_is_checked_in_pieces_without_recursion_error():
    check_metaschema(_nested(1000, {"type": "string"}))
    with pytest.raises(SchemaError) as info:
        check_metaschema(_nested(1000, {"type": "string", "maxLength": -1}))
    assert info.value.pointer == "/properties/a" * 1000 + "/maxLength"
    assert PIECE_DEPTH < 100


def test_shared_subschemas_are_checked_once():
    # A small object graph with 2**40 paths: each container is checked once, so this is quick.
    schema: dict = {"type": "string"}
    for _ in range(40):
        schema = {"allOf": [schema, schema]}
    start = time.perf_counter()
    check_metaschema(schema)
    assert time.perf_counter() - start < 5
    bad: dict = {"minLength": "1"}
    for _ in range(40):
        bad = {"anyOf": [bad, bad]}
    with pytest.raises(SchemaError, match="minLength"):
        check_metaschema(bad)


# -- identifiers: only subschemas are resources

UNKNOWN_KEYWORD = {  # JSON-Schema-Test-Suite, draft7/optional/unknownKeyword.json
    "definitions": {
        "id_in_unknown0": {"not": {"array_of_schemas": [
            {"$id": "https://localhost:1234/unknownKeyword/my_identifier.json", "type": "null"}]}},
        "real_id_in_schema": {"$id": "https://localhost:1234/unknownKeyword/my_identifier.json", "type": "string"},
        "id_in_unknown1": {"not": {"object_of_schemas": {"foo": {
            "$id": "https://localhost:1234/unknownKeyword/my_identifier.json", "type": "integer"}}}},
    },
    "anyOf": [{"$ref": "#/definitions/id_in_unknown0"}, {"$ref": "#/definitions/id_in_unknown1"},
              {"$ref": "https://localhost:1234/unknownKeyword/my_identifier.json"}],
}
SIBLING_ID = {  # draft7/ref.json: "$ref prevents a sibling $id from changing the base uri"
    "$schema": D7,
    "$id": "http://localhost:1234/sibling_id/base/",
    "definitions": {
        "foo": {"$id": "http://localhost:1234/sibling_id/foo.json", "type": "string"},
        "base_foo": {"$id": "foo.json", "type": "number"},
    },
    "allOf": [{"$id": "http://localhost:1234/sibling_id/", "$ref": "foo.json"}],
}


@pytest.mark.parametrize("schema,value,valid", [
    (UNKNOWN_KEYWORD, "a string", True),
    (UNKNOWN_KEYWORD, None, False),
    (UNKNOWN_KEYWORD, 1, False),
    ({**UNKNOWN_KEYWORD, "$schema": D2020, "$defs": UNKNOWN_KEYWORD["definitions"]}, "a string", True),
    ({**UNKNOWN_KEYWORD, "$schema": D2020}, None, False),
    (SIBLING_ID, 5, True),
    (SIBLING_ID, "a", False),
    # an $id inside enum data is no identifier either (optional/id.json)
    ({"$schema": D7, "definitions": {"e": {"enum": [{"$id": "http://x.org/i.json", "type": "null"}]},
                                     "real": {"$id": "http://x.org/i.json", "type": "string"}},
      "$ref": "http://x.org/i.json"}, "s", True),
])
def test_identifiers_count_only_in_subschemas(schema, value, valid):
    assert accepts(schema, value) is valid


# ------------------------------------------------------------------ the flat 2020-12 metaschema

#: Wrong values for keywords, put in place of a schema's own to make it malformed.
_WRONG = {"type": "strin", "minItems": -1, "maxLength": 1.5, "properties": [], "required": "a", "items": 3,
          "pattern": 5, "enum": {}, "additionalProperties": None, "$ref": 1, "uniqueItems": 1, "minimum": "0",
          "anyOf": [], "allOf": {}, "description": 7, "format": [], "$defs": [], "definitions": 2,
          "dependencies": {"a": 3}, "const": object, "default": object, "prefixItems": [1]}


def _mutations(schema, rng, n):
    """Up to ``n`` copies of ``schema``, each with one keyword value of one (sub)schema made wrong."""
    spots = []

    def visit(node, path):
        if isinstance(node, dict):
            spots.extend((path, k) for k in node if k in _WRONG and _WRONG[k] is not object)
            for k, v in node.items():
                visit(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                visit(v, path + (i,))

    visit(schema, ())
    for path, key in rng.sample(spots, min(n, len(spots))):
        copy = json.loads(json.dumps(schema))
        node = copy
        for step in path:
            node = node[step]
        node[key] = _WRONG[key]
        yield copy


@pytest.mark.skipif(not maskbench.available(), reason="MaskBench data not present")
def test_the_flat_2020_12_metaschema_finds_what_the_original_finds():
    """The check runs against the 2020-12 metaschema flattened into one document (its
    ``$dynamicRef`` resolution was a fifth of a schema's compile). On MaskBench schemas, valid
    and with one keyword value made wrong (in subschemas, under ``$defs``, in deprecated
    keywords), it reports exactly python-jsonschema's own errors: keyword, place and message
    (each once: the original repeats a subschema's type error once per vocabulary)."""
    import random

    from jsonschema import Draft202012Validator

    from structgen.frontends.json_schema.metaschema import _flat_2020_12

    flat, original = Draft202012Validator(_flat_2020_12()), Draft202012Validator(Draft202012Validator.META_SCHEMA)
    rng = random.Random(0)
    rows = sorted(maskbench.iter_rows(), key=lambda r: maskbench.stable_hash(r["name"]))[:150]
    checked = malformed = 0
    for row in rows:
        for schema in [row["schema"], *_mutations(row["schema"], rng, 3)]:
            def errors(validator):
                # a set: each of the original's seven vocabularies says "not of type 'object', 'boolean'"
                return sorted({(e.validator, tuple(e.absolute_path), e.message) for e in validator.iter_errors(schema)})
            want = errors(original)
            assert errors(flat) == want, (row["name"], want)
            checked += 1
            malformed += bool(want)
    assert checked > 400 and malformed > 200  # the mutations did make most of them malformed


# ------------------------------------------------------------------ the fast first pass

def _candidates(with_maskbench: bool):
    """Schemas and non-schemas to check: MaskBench schemas (every 24th), and every schema
    and instance of the JSON-Schema-Test-Suite (instances are mostly not schemas: numbers,
    strings, arrays, objects with keyword-named members)."""
    import copy
    from pathlib import Path

    for i, row in enumerate(maskbench.iter_rows() if with_maskbench else ()):
        if i % 24 == 0:
            yield row["name"], row["schema"]
    suite = maskbench.DATA_DIR / "json-schema-test-suite" / "tests"
    for path in sorted(Path(suite).rglob("*.json")):
        for g, group in enumerate(json.loads(path.read_text())):
            yield f"{path.name}#{g}", group["schema"]
            for t, test in enumerate(group["tests"]):
                yield f"{path.name}#{g}/{t}", copy.deepcopy(test["data"])
    for m in MALFORMED:
        yield "MALFORMED", m[0]


@pytest.mark.skipif(not maskbench.available(), reason="shared MaskBench data not present")
def test_the_fast_pass_never_passes_what_python_jsonschema_refuses():
    """fastjsonschema's verdict is taken only where it finds nothing wrong: each metaschema's
    fast validator must then agree that nothing is wrong, on every candidate, and must leave
    the candidate as it was (its defaults are not written in)."""
    import copy

    from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator, Draft202012Validator
    from structgen.frontends.json_schema import metaschema

    checked = passed = refused = 0
    for cls in (Draft202012Validator, Draft7Validator, Draft6Validator, Draft4Validator):
        quick, slow = metaschema._fast_checker(cls), metaschema._checker(cls)
        assert quick is not None, cls
        # MaskBench's real schemas (slow to check) under the two drafts most schemas are in
        for name, candidate in _candidates(cls in (Draft202012Validator, Draft7Validator)):
            before = copy.deepcopy(candidate)
            fast_ok = metaschema._passes(quick, candidate)
            assert candidate == before, (cls.__name__, name)
            checked += 1
            if fast_ok:
                passed += 1
                assert not [e for e in slow.iter_errors(candidate) if not metaschema._duplicates_only(e)], \
                    (cls.__name__, name)
            else:
                refused += 1
    assert checked > 15_000 and passed > 2_000 and refused > 5_000, (checked, passed, refused)


def test_tuples_go_to_python_jsonschema():
    """fastjsonschema reads a tuple as an array, python-jsonschema does not: a schema with a
    tuple is checked by python-jsonschema alone (as before: 'enum' must be a list)."""
    from structgen.frontends.json_schema.translate import translate_schema

    with pytest.raises(SchemaError, match="enum"):
        translate_schema({"enum": ("a", "b")})
