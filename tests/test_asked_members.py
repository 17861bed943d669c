"""``not`` over keywords about members: the object must have some member that breaks them.

``not {propertyNames: S}`` asks for a key S rejects, ``not {patternProperties: {p: S}}`` for a key
matching p valued outside S, ``not {additionalProperties: S}`` for a key neither named nor
matched valued outside S. Up to three such members, beside min/maxProperties, are compiled
exactly: every object over a small alphabet of keys and values is walked and judged against
python-jsonschema, and every prefix the matcher accepts must still have a way to end (no dead
end, which generation would fall into).
"""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

import structgen
from structgen.engine.pda import ACCEPT
from structgen.engine.vocab import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")
KEYS = ["a", "b", "x1", "x2", "zz"]
VALUES = [1, "s"]

SCHEMAS = [
    {"not": {"propertyNames": {"maxLength": 1}}, "maxProperties": 2},
    {"not": {"propertyNames": {"maxLength": 1}}, "minProperties": 2},
    {"not": {"anyOf": [{"propertyNames": {"pattern": "^a"}}, {"propertyNames": {"pattern": "^b"}}]},
     "maxProperties": 2},
    {"patternProperties": {"^x": {"type": "integer"}}, "not": {"additionalProperties": {"type": "integer"}},
     "minProperties": 2, "maxProperties": 3},
    {"properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a"],
     "not": {"patternProperties": {"^[ab]$": {"type": "integer"}}}, "maxProperties": 2},
    {"propertyNames": {"enum": KEYS}, "allOf": [
        {"not": {"propertyNames": {"pattern": "^[ab]"}}},
        {"not": {"additionalProperties": False, "properties": {"a": {}, "x1": {}}}},
        {"not": {"patternProperties": {"z": {"type": "integer"}}}}]},
    # properties from two conjuncts: walked in any order, the asked-for members anywhere
    {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"x1": {}}}],
     "not": {"anyOf": [{"propertyNames": {"maxLength": 1}}, {"additionalProperties": {"type": "integer"}}]}},
]


def objects(schema: dict, size: int):
    """Every object of up to ``size`` members over KEYS x VALUES, named keys first in schema order."""
    named = list(schema.get("properties", {}))
    for n in range(size + 1):
        for keys in itertools.combinations(KEYS, n):
            keys = sorted(keys, key=lambda k: (named.index(k) if k in named else len(named), KEYS.index(k)))
            for values in itertools.product(VALUES, repeat=n):
                yield dict(zip(keys, values))


def can_end(m) -> bool:
    """Some continuation over the instances' bytes reaches the end (breadth first, bounded)."""
    sm = m._rt.machine
    alphabet = sorted(set(b'{}[]":,.0123456789s ' + "".join(KEYS).encode()))
    frontier, seen = [m._states[-1]], set()
    for _ in range(40):
        if len(seen) > 20000:
            return False  # searched far enough: a live state ends within a few members
        nxt = []
        for state in frontier:
            if ACCEPT in state:
                return True
            for b in alphabet:
                s = sm.step_set(state, b)
                if s and s not in seen:
                    seen.add(s)
                    nxt.append(s)
        frontier = nxt
    return False


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: json.dumps(s)[:60])
def test_asked_members_agree_with_jsonschema_and_never_dead_end(schema):
    compiled = structgen.compile_json_schema(schema, BYTES, whitespace="compact")
    validator = jsonschema.Draft202012Validator(schema)
    checked = 0
    for value in objects(schema, 3):
        text = json.dumps(value, separators=(",", ":"))
        m = compiled.matcher()
        ok = True
        for b in text.encode():
            if not m.advance(b):
                ok = False
                break
            assert can_end(m), f"dead end after {m.token_ids and bytes(m.token_ids)!r} in {text}"
        assert (ok and m.can_end()) is validator.is_valid(value), text
        checked += 1
    assert checked == 131


def test_generation_keeps_one_order_and_still_asks():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
              "patternProperties": {"^x": {"type": "string"}},
              "not": {"propertyNames": {"maxLength": 1}}, "maxProperties": 2}
    compiled = structgen.compile_json_schema(schema, BYTES, whitespace="compact", strict=True, canonical=True)
    m = compiled.matcher()
    assert all(m.advance(b) for b in b'{"a":1,') and m.forced_text() == '"x'  # the only way to end well
    assert can_end(m)
