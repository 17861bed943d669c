"""Key order (issue 25, item 9): walking takes an object's members in any order; generation
writes them in schema order.

JSON objects are unordered, so a validator must accept ``{"b": 1, "a": 2}`` wherever it accepts
``{"a": 2, "b": 1}``. When walking (``compile_json_schema``, ``canonical=False``) every object is
one :class:`structgen.core.ir.Unordered` rule whose frames carry the set of keys written, so any
number of keys is taken in any order, each defined key at most once (a duplicate is refused:
python's ``json`` keeps the last duplicate, so accepting one could accept what a validator
rejects). Verdicts below are python-jsonschema's wherever it can judge (objects of distinct keys).
"""

from __future__ import annotations

import itertools
import json
import random
import re

import jsonschema
import pytest

import structgen
from structgen.engine.vocab import Vocabulary

import maskbench as mb
from oracle import check_walk

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")
_COMPILED: dict[tuple[str, str], structgen.CompiledGrammar] = {}


def compiled(schema, whitespace: str = "compact") -> structgen.CompiledGrammar:
    key = (json.dumps(schema, sort_keys=True), whitespace)
    if key not in _COMPILED:
        _COMPILED[key] = structgen.compile_json_schema(schema, BYTES, whitespace=whitespace)
    return _COMPILED[key]


def walks(schema, text: str, whitespace: str = "compact") -> bool:
    m = compiled(schema, whitespace).matcher()
    return all(m.advance(b) for b in text.encode()) and m.can_end()


def members(pairs) -> str:
    """An object's text from ``(key, value)`` pairs, duplicates kept (``json.dumps`` cannot)."""
    return "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in pairs) + "}"


def judged(schema, pairs) -> bool:
    """python-jsonschema's verdict on an object of distinct keys."""
    assert len({k for k, _ in pairs}) == len(pairs)
    return jsonschema.Draft202012Validator(schema).is_valid(dict(pairs))


# ------------------------------------------------------------------ small objects: every order

SMALL = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                          "c": {"type": "boolean"}, "d": {"type": "null"}},
         "required": ["a", "c"], "additionalProperties": False}
SMALL_VALUES = {"a": 1, "b": "x", "c": True, "d": None}


@pytest.mark.parametrize("keys", list(itertools.permutations("abcd", 4)) + list(itertools.permutations("abc", 3))
                         + list(itertools.permutations("acd", 3)), ids="".join)
@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_every_order_of_a_small_object(keys, whitespace):
    pairs = [(k, SMALL_VALUES[k]) for k in keys]
    assert judged(SMALL, pairs)
    assert walks(SMALL, members(pairs), whitespace)
    assert walks(SMALL, json.dumps(dict(pairs), indent=2), "flexible")


@pytest.mark.parametrize("pairs, why", [
    ([("c", True), ("b", "x")], "a required key missing"),
    ([("b", "x"), ("d", None)], "both required keys missing"),
    ([("c", True), ("a", 1), ("a", 1)], "a key written twice"),
    ([("c", True), ("a", 1), ("b", "x"), ("b", "y")], "an optional key written twice"),
    ([("d", None), ("a", "1"), ("c", True)], "a wrong value"),
    ([("c", True), ("e", 1), ("a", 1)], "an undeclared key (additionalProperties false)"),
])
def test_small_object_rejections(pairs, why):
    assert not walks(SMALL, members(pairs)), why


# ------------------------------------------------------------------ many properties, shuffled

def big_schema(n: int, extra=False, patterns=None, **counts) -> dict:
    props = {}
    for i in range(n):
        props[f"k{i:02d}"] = [{"type": "integer"}, {"type": "string", "maxLength": 3},
                              {"type": "boolean"}, {"enum": ["x", "y"]}][i % 4]
    schema = {"type": "object", "properties": props, "required": [f"k{i:02d}" for i in range(0, n, 3)],
              "additionalProperties": extra, **counts}
    if patterns:
        schema["patternProperties"] = patterns
    return schema


def big_values(n: int) -> dict:
    return {f"k{i:02d}": [7, "ab", False, "y"][i % 4] for i in range(n)}


@pytest.mark.parametrize("n", [12, 40])
def test_many_properties_in_shuffled_orders(n):
    schema = big_schema(n)
    rng = random.Random(n)
    full = list(big_values(n).items())
    for trial in range(8):
        pairs = full[:]
        rng.shuffle(pairs)
        if trial % 2:  # optional ones left out
            pairs = [(k, v) for k, v in pairs if int(k[1:]) % 3 == 0 or rng.random() < 0.5]
        assert judged(schema, pairs)
        assert walks(schema, members(pairs)), members(pairs)
        assert walks(schema, json.dumps(dict(pairs), indent=1), "flexible")
        required = next(i for i, (k, _) in enumerate(pairs) if int(k[1:]) % 3 == 0)
        missing = pairs[:required] + pairs[required + 1:]
        assert not judged(schema, missing) and not walks(schema, members(missing))
        twice = pairs + [pairs[rng.randrange(len(pairs))]]
        assert not walks(schema, members(twice)), "a duplicate key"
        wrong = pairs[:]
        j = rng.randrange(len(wrong))
        wrong[j] = (wrong[j][0], [1, 2])
        assert not judged(schema, wrong) and not walks(schema, members(wrong))
        assert not walks(schema, members(pairs + [("zz", 1)])), "additionalProperties false"


@pytest.mark.parametrize("n", [12, 40])
def test_many_properties_with_additional_and_pattern_members(n):
    schema = big_schema(n, extra={"type": "integer"}, patterns={"^x-": {"type": "string"}})
    rng = random.Random(100 + n)
    base = list(big_values(n).items())
    for _ in range(6):
        pairs = base + [("x-a", "s"), ("x-b", "t"), ("other", 3), ("more", -1)]
        rng.shuffle(pairs)
        assert judged(schema, pairs)
        assert walks(schema, members(pairs)), members(pairs)
        bad_pattern = pairs + [("x-c", 1)]  # a pattern key valued outside its schema
        bad_extra = pairs + [("y", "s")]  # an additional key valued outside additionalProperties
        for bad in (bad_pattern, bad_extra):
            rng.shuffle(bad)
            assert not judged(schema, bad) and not walks(schema, members(bad)), members(bad)


EXTRAS = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
          "required": ["b"], "patternProperties": {"^x": {"type": "boolean"}},
          "additionalProperties": {"type": "null"}}
COUNTED = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                            "c": {"type": "integer"}},
           "required": ["c"], "minProperties": 2, "maxProperties": 3}
KEYS = ["a", "b", "c", "x1", "z"]
VALUES = {"a": [1, "s"], "b": [1, "s"], "c": [1], "x1": [True, 1], "z": [None, 1]}


def objects_over(keys, values, size):
    for n in range(size + 1):
        for chosen in itertools.permutations(keys, n):
            for vals in itertools.product(*(values[k] for k in chosen)):
                yield list(zip(chosen, vals))


@pytest.mark.parametrize("schema", [EXTRAS, COUNTED,
                                    {**EXTRAS, "maxProperties": 2}, {**EXTRAS, "minProperties": 3},
                                    {**COUNTED, "additionalProperties": False}],
                         ids=["extras", "counted", "extras-max2", "extras-min3", "counted-closed"])
def test_every_small_object_agrees_with_jsonschema(schema):
    """Every object of up to 3 members over a few keys, in every order, against the validator."""
    checked = 0
    for pairs in objects_over(KEYS, VALUES, 3):
        assert walks(schema, members(pairs)) is judged(schema, pairs), members(pairs)
        checked += 1
    assert checked == 410


def test_no_dead_end_with_counts_and_required():
    """Every prefix the matcher takes can still end: a member is offered only while the object
    can still be finished in range (here: ``maxProperties`` 2 and two required keys)."""
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcd"},
              "required": ["c", "d"], "maxProperties": 2}
    m = compiled(schema).matcher()
    assert all(m.advance(b) for b in b'{"d":1,"')
    assert [m.validate([ord(k)]) for k in "abcd"] == [0, 0, 1, 0]  # only the other required key
    m = compiled(schema).matcher()
    assert m.advance(ord("{")) and m.advance(ord('"')) and not m.advance(ord("a"))  # no room for it
    assert not walks(schema, '{"a":1,"c":1,"d":1}')
    assert walks(schema, '{"d":1,"c":2}') and not walks(schema, '{"a":1}')


def test_nested_objects_in_any_order():
    inner = {"type": "object", "properties": {"p": {"type": "integer"}, "q": {"type": "string"}},
             "required": ["p", "q"], "additionalProperties": False}
    schema = {"type": "object", "properties": {"one": inner, "two": {"type": "array", "items": inner},
                                               "three": {"type": "integer"}},
              "required": ["one", "two"]}
    good = '{"two":[{"q":"a","p":1},{"p":2,"q":"b"}],"three":3,"one":{"q":"z","p":0}}'
    assert walks(schema, good) and jsonschema.validate(json.loads(good), schema) is None
    assert not walks(schema, good.replace('"p":0', '"p":0,"p":1'))  # a duplicate in a nested object
    assert not walks(schema, good.replace('{"q":"a","p":1}', '{"q":"a"}'))  # nested required missing


def test_const_and_enum_objects_in_any_order():
    value = {f"k{i}": i for i in range(9)}  # more keys than the old bound of 6
    keys = list(value)
    random.Random(3).shuffle(keys)
    shuffled = json.dumps({k: value[k] for k in keys})
    assert walks({"const": value}, shuffled, "flexible")
    assert walks({"enum": [1, value]}, shuffled, "flexible")
    assert not walks({"const": value}, shuffled.replace('"k3": 3', '"k3": 4'), "flexible")
    assert not walks({"const": value}, shuffled.replace(', "k3": 3', ""), "flexible")


def test_many_keys_stay_small():
    """The grammar is linear in the properties: 40 keys do not make 2**40 rules, and a long walk
    visits only the sets of keys it writes."""
    schema = big_schema(40)
    grammar = compiled(schema)
    assert len(grammar.grammar.rules) < 200
    pairs = list(big_values(40).items())
    random.Random(0).shuffle(pairs)
    assert walks(schema, members(pairs))


# ------------------------------------------------------------------ generation keeps one order

def test_generation_writes_schema_order():
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
              "required": ["b", "a"], "additionalProperties": False}
    gen = structgen.compile_json_schema(schema, BYTES, whitespace="compact", canonical=True)
    m = gen.matcher()
    assert m.forced_text() == '{"b":'
    assert all(m.advance(b) for b in b'{"b":1,')
    assert m.forced_text() == '"a":'
    m = gen.matcher()
    assert m.advance(ord("{")) and m.advance(ord('"')) and not m.advance(ord("a"))  # out of order
    walk = compiled(schema).matcher()
    assert all(walk.advance(b) for b in b'{"a":1,"b":2}') and walk.can_end()


# ------------------------------------------------------------------ exact masks on a real vocabulary

def test_masks_exact_on_shuffled_members(smollm2_tokenizer):
    """Token masks inside an unordered object equal brute force at every position (the mask
    facts of an object state are keyed by the keys written)."""
    vocab = structgen.Vocabulary.from_tokenizer(smollm2_tokenizer)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                               "id": {"type": "integer"}, "ok": {"type": "boolean"}},
              "required": ["id", "name"], "additionalProperties": {"type": "integer"}, "maxProperties": 5}
    for text in ['{"ok":true,"id":3,"name":"Al","x":1,"age":2}', '{"name": "B", "id": 1}']:
        g = structgen.compile_json_schema(schema, vocab, whitespace="flexible")
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert check_walk(g.matcher(), ids) > 5


# ------------------------------------------------------------------ MaskBench instances, shuffled

SAMPLE_SIZE, SEED = 200, 0  # the first 200 of the sample of tests/test_maskbench_sample.py
_NAME = re.compile(r'^\{"name": ?"((?:[^"\\]|\\.)*)"')


def shuffled(data, rng: random.Random):
    if isinstance(data, dict):
        items = [(k, shuffled(v, rng)) for k, v in data.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(data, list):
        return [shuffled(v, rng) for v in data]
    return data


@pytest.fixture(scope="module")
def sample_rows():
    if not mb.available():
        pytest.fail(f"MaskBench data not found at {mb.MASKBENCH}")
    import gzip

    with gzip.open(mb.MASKBENCH, "rt", encoding="utf-8") as f:  # names first: no full parse
        names = [json.loads(f'"{_NAME.match(line).group(1)}"') for line in f]
    wanted = set(mb.sample(names, SAMPLE_SIZE, SEED))
    return [row for row in mb.iter_rows() if row["name"] in wanted]


def test_maskbench_instances_walk_in_any_key_order(sample_rows):
    """Valid instances with every object's keys shuffled are accepted wherever the instance in
    schema order is, and invalid ones stay rejected."""
    rng = random.Random(SEED)
    disagreeing = mb.disagreeing_schemas()
    valid = shuffled_valid = raw_rejected = 0
    lost, accepted_invalid = [], []
    for row in sample_rows:
        try:
            grammar = structgen.compile_json_schema(row["schema"], BYTES, whitespace="compact")
        except structgen.StructgenError:
            continue
        kept, _, _ = mb.judge_tests(row["schema"], row.get("tests") or [], row["name"] in disagreeing)

        def walk(data) -> bool:
            m = grammar.matcher()
            return all(m.advance(b) for b in mb.compact(data).encode()) and m.can_end()

        for i, expected in kept:
            data = row["tests"][i]["data"]
            try:
                json.dumps(data, allow_nan=False)
            except ValueError:
                continue
            mixed = shuffled(data, rng)
            if expected:
                if walk(mb.schema_order(data, row["schema"])):
                    valid += 1
                    ok = walk(mixed)
                    shuffled_valid += ok
                    if not ok:
                        lost.append(f"{row['name']} #{i}: {mb.compact(mixed)[:100]}")
                    raw_rejected += not walk(data)
            elif walk(mixed) or walk(data):
                accepted_invalid.append(f"{row['name']} #{i}: {mb.compact(mixed)[:100]}")
    print(f"\nkey order: {valid} valid instances accepted in schema order; {shuffled_valid} of them "
          f"shuffled, {valid - raw_rejected} in the data's own order")
    assert valid >= 200
    assert not lost, "\n".join(lost)
    assert not accepted_invalid, "\n".join(accepted_invalid)
