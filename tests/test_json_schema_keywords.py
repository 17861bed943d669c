"""The keyword registry (structgen/frontends/json_schema/keywords.py) and what it added:
``unevaluatedProperties``/``unevaluatedItems`` where what is evaluated is static, refused
(keyword and JSON pointer named) elsewhere; and the package's import shape."""

from __future__ import annotations

import ast
import json
import pathlib

import pytest
from jsonschema import Draft202012Validator

import structgen
from structgen import SchemaError, UnsupportedFeatureError
from structgen.engine.vocab import Vocabulary
from structgen.frontends.json_schema.keywords import KEYWORDS, LENIENT_KEYWORDS, SUPPORTED_KEYWORDS, keyword_table

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")
PACKAGE = pathlib.Path(structgen.__file__).parent / "frontends" / "json_schema"


def accepts(schema, value, whitespace="flexible") -> bool:
    text = json.dumps(value) if whitespace == "flexible" else json.dumps(value, separators=(",", ":"))
    m = structgen.compile_json_schema(schema, BYTES, whitespace=whitespace).matcher()
    return all(m.advance(b) for b in text.encode()) and m.can_end()


# An OpenAPI-style composition: a base object extended through allOf, closed by
# unevaluatedProperties (additionalProperties: false would close the base alone).
PET = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "allOf": [{"properties": {"id": {"type": "integer"}, "name": {"type": "string"}}, "required": ["id"]}],
    "properties": {"tag": {"type": "string"}},
    "patternProperties": {"^x-": True},
    "unevaluatedProperties": False,
}
# A CSV-ish record: a fixed header tuple, then nothing else.
ROW = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
       "allOf": [{"prefixItems": [True, True, {"type": "boolean"}]}], "unevaluatedItems": False}
# Extra settings must be strings; named ones keep their own schemas (nested object too).
SETTINGS = {"type": "object", "properties": {"retries": {"type": "integer"},
                                             "proxy": {"type": "object", "properties": {"host": {"type": "string"}},
                                                       "unevaluatedProperties": False}},
            "unevaluatedProperties": {"type": "string"}}
# `not` contributes no evaluated keys; its properties are not evaluated.
NOT_EVALUATED = {"properties": {"a": True}, "not": {"properties": {"b": {"type": "string"}}, "required": ["b"]},
                 "unevaluatedProperties": False}
# A nested unevaluatedItems: true evaluates every item for the outer one.
NESTED_ITEMS = {"allOf": [{"prefixItems": [{"type": "string"}]}, {"unevaluatedItems": True}],
                "unevaluatedItems": False}
# items after the prefix are evaluated by items: unevaluatedItems never applies.
WITH_ITEMS = {"prefixItems": [{"type": "string"}], "items": {"type": "number"}, "unevaluatedItems": False}


@pytest.mark.parametrize("schema, value, valid", [
    (PET, {"id": 1}, True),
    (PET, {"id": 1, "name": "rex", "tag": "dog", "x-color": [1]}, True),
    (PET, {"id": 1, "owner": "me"}, False),
    (PET, {"name": "rex"}, False),
    (PET, {"id": 1, "name": 3}, False),
    (ROW, ["a", 1], True),
    (ROW, ["a", 1, True], True),
    (ROW, ["a", 1, True, None], False),
    (ROW, ["a", 1, "no"], False),
    (ROW, [], True),
    (SETTINGS, {"retries": 3, "mode": "fast"}, True),
    (SETTINGS, {"mode": 3}, False),
    (SETTINGS, {"proxy": {"host": "h"}}, True),
    (SETTINGS, {"proxy": {"host": "h", "port": 1}}, False),
    (NOT_EVALUATED, {"a": 1}, True),
    (NOT_EVALUATED, {"a": 1, "b": 2}, False),
    (NESTED_ITEMS, ["x", 1, None], True),
    (NESTED_ITEMS, [1], False),
    (WITH_ITEMS, ["x", 1, 2.5], True),
    (WITH_ITEMS, ["x", "y"], False),
    ({"unevaluatedItems": {"type": "null"}}, [None, None], True),
    ({"unevaluatedItems": {"type": "null"}}, [None, 1], False),
    ({"unevaluatedProperties": False}, "not an object", True),
])
@pytest.mark.parametrize("whitespace", ["flexible", "compact"])
def test_unevaluated_where_static(schema, value, valid, whitespace):
    assert Draft202012Validator(schema).is_valid(value) == valid  # the label, by the reference validator
    assert accepts(schema, value, whitespace) == valid


@pytest.mark.parametrize("schema, keyword, pointer", [
    ({"anyOf": [{"properties": {"a": True}}, True], "unevaluatedProperties": False},
     "unevaluatedProperties", "/unevaluatedProperties"),
    ({"$defs": {"b": {"properties": {"a": True}}}, "$ref": "#/$defs/b", "unevaluatedProperties": False},
     "unevaluatedProperties", "/unevaluatedProperties"),
    ({"properties": {"n": {"allOf": [{"if": {"required": ["a"]}, "then": {"properties": {"a": True}}}],
                           "unevaluatedProperties": False}}},
     "unevaluatedProperties", "/properties/n/unevaluatedProperties"),
    ({"dependentSchemas": {"a": {"properties": {"b": True}}}, "unevaluatedProperties": False},
     "unevaluatedProperties", "/unevaluatedProperties"),
    ({"prefixItems": [True], "contains": {"type": "string"}, "unevaluatedItems": False},
     "unevaluatedItems", "/unevaluatedItems"),
    ({"oneOf": [{"prefixItems": [True]}, {"items": False}], "unevaluatedItems": False},
     "unevaluatedItems", "/unevaluatedItems"),
])
def test_unevaluated_refused_where_not_static(schema, keyword, pointer):
    with pytest.raises(UnsupportedFeatureError) as err:
        structgen.compile_json_schema(schema, BYTES)
    assert (err.value.keyword, err.value.pointer) == (keyword, pointer)
    relaxed = structgen.compile_json_schema(schema, BYTES, lenient=True).relaxed
    assert (keyword, pointer) in [(r.keyword, r.pointer) for r in relaxed]


@pytest.mark.parametrize("keyword, extra", [("unevaluatedProperties", b'{"a":1,"b":2}'),
                                            ("unevaluatedItems", b'[1,2]')])
def test_unevaluated_under_a_declared_old_draft(keyword, extra):
    """Drafts 3 to 7 have no unevaluated* (their validators ignore it): ignored there as they
    do (the drafts module), so no valid instance of that draft is rejected; applied in 2020-12."""
    body = ({"type": "object", "properties": {"a": {}}} if keyword == "unevaluatedProperties"
            else {"type": "array", "items": [{}]})
    old = {"$schema": "http://json-schema.org/draft-07/schema#", **body, keyword: False}
    compiled = structgen.compile_json_schema(old, BYTES)
    assert compiled.relaxed == ()
    m = compiled.matcher()
    assert all(m.advance(b) for b in extra) and m.can_end()
    new = {**old, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    if "items" in new:  # 2020-12 spells a tuple prefixItems (its metaschema refuses array items)
        new["prefixItems"] = new.pop("items")
    assert structgen.compile_json_schema(new, BYTES).matcher().validate(list(extra)) < len(extra)


def test_unevaluated_must_be_a_schema():
    with pytest.raises(SchemaError, match="'unevaluatedItems' must be an object or a boolean"):  # metaschema
        structgen.compile_json_schema({"unevaluatedItems": 3}, BYTES)


def test_unevaluated_beside_an_enum_checks_values_with_its_allof():
    # The enum value's key is evaluated by the allOf branch: it must stay.
    schema = {"allOf": [{"properties": {"a": True}}], "unevaluatedProperties": False,
              "enum": [{"a": 1}, {"b": 1}]}
    assert accepts(schema, {"a": 1}) and not accepts(schema, {"b": 1})


# -- fixes found while merging the twins


def test_max_length_below_min_length_names_the_keyword():
    # Lengths now keep the keyword's own pointer, as item and property counts did.
    with pytest.raises(SchemaError) as err:
        structgen.compile_json_schema({"type": "string", "minLength": 3, "maxLength": 2}, BYTES)
    assert err.value.pointer == "/maxLength"


def test_not_dependent_required_binds_each_key():
    # not {dependentRequired: {a: [c], c: []}}: an object with a and without c. The negation once
    # compared each required key with the *last* key of the table (a late-bound loop variable),
    # so "c" was dropped from a's alternatives, none was left, and the schema was refused
    # ("`not` of a schema that every value satisfies").
    schema = {"type": "object", "not": {"dependentRequired": {"a": ["c"], "c": []}}}
    assert Draft202012Validator(schema).is_valid({"a": 1})
    assert accepts(schema, {"a": 1})
    assert not accepts(schema, {"a": 1, "c": 2}) and not accepts(schema, {})


# -- the registry


def test_registry_gives_the_sets_and_the_table():
    assert {"unevaluatedProperties", "unevaluatedItems"} <= SUPPORTED_KEYWORDS <= {k.name for k in KEYWORDS}
    assert {"$dynamicRef", "$recursiveRef"} == {k.name for k in KEYWORDS if not k.supported}
    assert LENIENT_KEYWORDS == {k.name for k in KEYWORDS if k.lenient}
    table = keyword_table()
    for kw in KEYWORDS:
        assert f"| `{kw.name}` |" in table
    for kw in KEYWORDS:  # every supported keyword does something somewhere
        if kw.supported and kw.name not in ("$ref", "then", "else"):
            assert kw.merge is not None or kw.expand is not None, kw.name


def test_package_imports_stay_in_their_layer():
    allowed = ("structgen.core", "structgen.errors", "structgen.frontends.json_text", "structgen.frontends.regex",
               "structgen.frontends.json_schema.")
    for path in PACKAGE.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 600, path.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path.name}: relative import"
                if node.module.startswith("structgen"):
                    assert node.module.startswith(allowed), f"{path.name} imports {node.module}"
                if node.module.startswith("structgen.frontends.json_schema."):
                    assert not any(a.name.startswith("_") for a in node.names), f"{path.name}: private import"
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] in ("torch", "transformers") for a in node.names), path.name


# -- references: identifiers and anchors as the declared draft spells them (``referencing``)

D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("schema, value, valid", [
    # draft 7: $id beside $ref is ignored, so "#/definitions/n" resolves against the root
    ({"$schema": D7, "$id": "http://x.org/root.json", "definitions": {"n": {"type": "null"}},
      "properties": {"a": {"$id": "http://x.org/other/", "$ref": "#/definitions/n"}}}, {"a": None}, True),
    ({"$schema": D7, "definitions": {"n": {"$id": "#num", "type": "number"}}, "$ref": "#num"}, 1, True),
    ({"$schema": D2020, "$defs": {"n": {"$anchor": "num", "type": "number"}}, "$ref": "#num"}, "x", False),
    ({"definitions": {"n": {"$id": "#num", "type": "number"}}, "$ref": "#num"}, 1, True),  # no draft: both
    ({"$defs": {"n": {"$anchor": "num", "type": "number"}}, "$ref": "#num"}, 1, True),
])
def test_references_read_as_the_draft_says(schema, value, valid):
    assert accepts(schema, value) == valid


@pytest.mark.parametrize("schema", [
    {"$schema": D7, "definitions": {"n": {"$anchor": "num"}}, "$ref": "#num"},  # $anchor is 2019-09+
    {"$schema": D2020, "$defs": {"n": {"$id": "#num"}}, "$ref": "#num"},  # $id: "#x" is draft 6/7
])
def test_an_anchor_the_declared_draft_does_not_spell_is_not_found(schema):
    # (2020-12's metaschema refuses an $id with a fragment before the reference is looked up)
    with pytest.raises(SchemaError, match="no \\$anchor named 'num'|'\\$id' must match"):
        structgen.compile_json_schema(schema, BYTES)
