"""Each keyword read with the meaning of the draft the schema declares, or refused (issue 25).

python-jsonschema's validator for the schema (``validator_for``: the declared draft's, 2020-12's
when none is declared) is the oracle: structgen's verdict on each instance, walked byte by byte,
must equal it, or structgen must refuse the schema with a :class:`~structgen.StructgenError`.
Cases: draft 3's own keywords (``divisibleBy``, ``type: "any"``, schema entries in ``type``,
``disallow``, ``extends``, per-property ``required``, one-name ``dependencies``); keywords of
later drafts under a declared older one (``prefixItems``, ``dependentRequired``,
``dependentSchemas``, ``minContains``, ``const``, ``contains``, ``if`` ...), which its
validators ignore; draft-4 ``items`` arrays, ``additionalItems`` and ``dependencies`` under
2020-12, which it ignores; draft-4 ``id`` in an undeclared schema.
"""

from __future__ import annotations

import json

import pytest
from jsonschema import validators

import structgen
from structgen.engine.vocab import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")

D3 = "http://json-schema.org/draft-03/schema#"
D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"

#: (name, schema, instances): every instance's verdict must be the oracle's.
CASES = [
    # draft 3's own keywords
    ("d3 divisibleBy", {"$schema": D3, "type": "integer", "divisibleBy": 3}, [3, 4, 0, -6]),
    ("d3 type any", {"$schema": D3, "type": "any"}, [1, "a", None, {}, []]),
    ("d3 type list with any", {"$schema": D3, "type": ["string", "any"]}, [1, "a"]),
    ("d3 type schema entries", {"$schema": D3, "type": ["string", {"type": "integer", "minimum": 3}]},
     ["a", 2, 3, 4.5, None]),
    ("d3 type one schema", {"$schema": D3, "type": {"type": "integer", "maximum": 3}}, [2, 4, "a"]),
    ("d3 disallow", {"$schema": D3, "disallow": ["string", "null"]}, ["a", None, 1, {}]),
    ("d3 disallow schema", {"$schema": D3, "disallow": [{"type": "integer", "minimum": 3}]}, [2, 3, "a"]),
    ("d3 disallow any", {"$schema": D3, "type": "integer", "disallow": "any"}, [1]),
    ("d3 extends", {"$schema": D3, "extends": {"type": "string"}, "maxLength": 2}, ["ab", "abc", 1]),
    ("d3 extends list", {"$schema": D3, "extends": [{"minimum": 2}, {"maximum": 4}]}, [1, 3, 5, "x"]),
    ("d3 required", {"$schema": D3, "type": "object",
                     "properties": {"a": {"type": "integer", "required": True}, "b": {"required": False}}},
     [{"a": 1}, {"b": 1}, {}, {"a": 1, "b": 2}, {"a": "x"}]),
    ("d3 dependencies string", {"$schema": D3, "dependencies": {"a": "b", "c": ["d"], "e": {"required": True}}},
     [{"a": 1}, {"a": 1, "b": 2}, {"c": 1}, {"c": 1, "d": 1}, {"e": 1}, {}]),
    ("d3 ignores later keywords", {"$schema": D3, "anyOf": [{"type": "string"}], "const": 1,
                                   "minProperties": 3, "multipleOf": 7}, [{}, 2]),
    ("d3 $ref into extends", {"$schema": D3, "extends": {"type": "integer"},
                              "properties": {"p": {"$ref": "#/extends"}}}, [{"p": 1}, {"p": "a"}]),
    # later keywords under an older declared draft: ignored by its validators
    ("d7 prefixItems", {"$schema": D7, "prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
     [[1, 2], ["a"], []]),
    ("d7 dependentRequired", {"$schema": D7, "dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 1}]),
    ("d7 dependentSchemas", {"$schema": D7, "dependentSchemas": {"a": {"required": ["b"]}}}, [{"a": 1}]),
    ("d7 minContains", {"$schema": D7, "contains": {"type": "integer"}, "minContains": 2, "maxContains": 2},
     [[1], [1, 2], [1, 2, 3], ["a"]]),
    ("d6 if", {"$schema": D6, "if": {"type": "integer"}, "then": {"minimum": 3}}, [1, 4]),
    ("d4 const contains propertyNames", {"$schema": D4, "const": 1, "contains": {"type": "string"},
                                         "propertyNames": {"maxLength": 1}}, [2, [1], {"ab": 1}]),
    ("d4 exclusive bounds", {"$schema": D4, "minimum": 1, "exclusiveMinimum": True}, [1, 2]),
    ("d7 $defs by pointer", {"$schema": D7, "$defs": {"a": {"prefixItems": [{"type": "string"}]}},
                             "$ref": "#/$defs/a"}, [[1], ["a"]]),
    ("d7 $ref into prefixItems", {"$schema": D7, "prefixItems": [{"type": "string"}],
                                  "properties": {"p": {"$ref": "#/prefixItems/0"}}}, [{"p": 1}, {"p": "a"}]),
    ("d2019 minContains", {"$schema": D2019, "contains": {"type": "integer"}, "minContains": 2}, [[1], [1, 2]]),
    ("d2019 prefixItems dependencies", {"$schema": D2019, "prefixItems": [{"type": "string"}],
                                        "dependencies": {"a": ["b"]}}, [[1], {"a": 1}]),
    ("d2019 array items", {"$schema": D2019, "items": [{"type": "string"}], "additionalItems": False},
     [["a"], ["a", 1], [1]]),
    ("d2020 dependencies additionalItems", {"$schema": D2020, "dependencies": {"a": ["b"]},
                                            "additionalItems": False, "prefixItems": [{}]},
     [{"a": 1}, [1, 2]]),
    ("d2020 array items", {"$schema": D2020, "items": [{"type": "string"}]}, [[1]]),
    # draft-4 id in an undeclared schema
    ("undeclared id base", {"id": "http://x.org/root.json",
                            "definitions": {"a": {"id": "a.json", "definitions": {"b": {"type": "integer"}},
                                                  "properties": {"p": {"$ref": "#/definitions/b"}}},
                                            "b": {"type": "string"}},
                            "$ref": "#/definitions/a"}, [{"p": 1}, {"p": "s"}]),
    ("undeclared id by uri", {"definitions": {"a": {"id": "http://x.org/a.json", "type": "integer"}},
                              "properties": {"p": {"$ref": "http://x.org/a.json"}}}, [{"p": 1}, {"p": "s"}]),
    ("undeclared id anchor", {"definitions": {"a": {"id": "#foo", "type": "integer"}},
                              "properties": {"p": {"$ref": "#foo"}}}, [{"p": 1}, {"p": "s"}]),
    ("undeclared id harmless", {"id": "thing", "definitions": {"b": {"type": "integer"}},
                                "properties": {"p": {"$ref": "#/definitions/b"}}}, [{"p": 1}, {"p": "s"}]),
    ("declared d4 id", {"$schema": D4, "definitions": {"a": {"id": "http://x.org/a.json", "type": "integer"}},
                        "properties": {"p": {"$ref": "http://x.org/a.json"}}}, [{"p": 1}, {"p": "s"}]),
]


def _verdict(compiled: structgen.CompiledGrammar, instance: object, indent: int | None) -> bool:
    m = compiled.matcher()
    return all(m.advance(b) for b in json.dumps(instance, indent=indent).encode()) and m.can_end()


def _oracle(schema: dict, instance: object) -> bool | None:
    """python-jsonschema's verdict, or None where it cannot resolve the schema's references."""
    cls = validators.validator_for(schema)
    try:
        return cls(schema).is_valid(instance)
    except Exception:  # an unresolvable reference: no verdict to match
        return None


@pytest.mark.parametrize("name,schema,instances", CASES, ids=[c[0] for c in CASES])
def test_verdicts_match_the_declared_draft(name, schema, instances):
    try:
        compiled = structgen.compile_json_schema(schema, BYTES)
    except structgen.StructgenError:
        return  # refused: no verdict to be wrong
    for instance in instances:
        want = _oracle(schema, instance)
        if want is None:
            continue
        for indent in (None, 2):
            assert _verdict(compiled, instance, indent) is want, (name, instance, indent, want)


#: Cases that must compile (the keyword is honoured or ignored as its draft says, not refused).
MUST_COMPILE = {"d3 divisibleBy", "d3 type any", "d3 type schema entries", "d3 disallow", "d3 extends",
                "d3 required", "d3 dependencies string", "d3 ignores later keywords", "d7 prefixItems",
                "d7 dependentRequired", "d7 minContains", "d6 if", "d4 const contains propertyNames",
                "d2019 minContains", "d2020 dependencies additionalItems", "d7 $ref into prefixItems",
                "undeclared id by uri", "undeclared id anchor", "undeclared id harmless", "declared d4 id",
                "d3 $ref into extends"}


@pytest.mark.parametrize("name", sorted(MUST_COMPILE))
def test_compiles(name):
    schema = next(c[1] for c in CASES if c[0] == name)
    structgen.compile_json_schema(schema, BYTES)


def test_ambiguous_undeclared_id_is_refused_naming_the_ref():
    # "#/definitions/b" is /definitions/a/definitions/b in draft 4 (the base is a.json) and
    # /definitions/b in 2020-12 (id is no identifier there): refused, never a guess
    schema = next(c[1] for c in CASES if c[0] == "undeclared id base")
    with pytest.raises(structgen.SchemaError) as err:
        structgen.compile_json_schema(schema, BYTES)
    assert err.value.pointer == "/definitions/a/properties/p/$ref"


def test_array_items_under_2020_12_is_malformed():
    with pytest.raises(structgen.SchemaError):
        structgen.compile_json_schema({"$schema": D2020, "items": [{"type": "string"}]}, BYTES)
