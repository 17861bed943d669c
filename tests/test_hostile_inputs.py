"""Hostile and careless inputs (issue 25): each gives a result or a structgen error, within
:data:`hostile.TIME_LIMIT` seconds and :data:`hostile.MEMORY_LIMIT` bytes, never a builtin
exception or a hang. Each probe runs in a worker process under those limits (:mod:`hostile`).

Families: self-referencing input objects; work that grows with the input (combinators, counted
repetitions, enums); languages with no value.
"""

from __future__ import annotations

import pytest

import structgen
from hostile import Probe, check, registry

PROBES: dict[str, Probe] = {}
probe = registry(PROBES)


def compile_schema(vocab, schema, **options):
    return structgen.compile_json_schema(schema, vocab, **options)


# -- input objects that contain themselves

@probe("dict that contains itself", expect="SchemaError", contains="/properties/a")
def _(vocab):
    s = {"type": "object"}
    s["properties"] = {"a": s}
    compile_schema(vocab, s)


@probe("list that contains itself in an enum", expect="SchemaError")
def _(vocab):
    e = [1, 2]
    e.append(e)
    compile_schema(vocab, {"enum": e})


@probe("shared containers 40 levels deep (a DAG, not a cycle)", expect="any")
def _(vocab):
    node = {"type": "integer"}
    for _ in range(40):
        node = {"anyOf": [node, node]}
    compile_schema(vocab, node)


# -- work that grows with the input: the compile budget must see it

def _nested_one_of(depth):
    node = {"type": "integer"}
    for i in range(depth):
        node = {"oneOf": [node, {"type": "string", "maxLength": i + 1}]}
    return node


for _depth in (10, 30):
    @probe(f"{_depth} nested oneOf", expect="any")
    def _(vocab, depth=_depth):
        compile_schema(vocab, _nested_one_of(depth))


@probe("oneOf of 30 overlapping objects", expect="any")
def _(vocab):
    compile_schema(vocab, {"oneOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}},
                                      "required": [f"k{i}"]} for i in range(30)]})


# the issue's repro, a long optional run, and a subset blow-up: refused by the budget in ~5 s here
for _pattern in ("[\\s\\S]{1000,}", "[a-z]{1,2000}x", "(ab?){1000}"):
    @probe(f"pattern {_pattern}", expect="any")
    def _(vocab, pattern=_pattern):
        compile_schema(vocab, {"type": "string", "pattern": pattern})


for _n in (5_000, 50_000):
    @probe(f"enum of {_n} strings", expect="any")
    def _(vocab, n=_n):
        compile_schema(vocab, {"enum": [f"value-{i}-{i * 7919 % 10007}" for i in range(n)]})


@probe("enum of 50000 integers", expect="any")
def _(vocab):
    compile_schema(vocab, {"enum": list(range(0, 500_000, 10))})


@probe("2000 properties", expect="any")
def _(vocab):
    compile_schema(vocab, {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}})


@probe("string with maxLength 1000000", expect="any")
def _(vocab):
    compile_schema(vocab, {"type": "string", "minLength": 999_000, "maxLength": 1_000_000})


@probe("array with minItems 100000", expect="any")
def _(vocab):
    compile_schema(vocab, {"type": "array", "items": {"type": "integer"}, "minItems": 100_000})


@probe("regex (a|aa){50}b", expect="any")
def _(vocab):
    structgen.compile_regex("(a|aa){50}b", vocab)


@probe("regex x{1000000}", expect="any")
def _(vocab):
    structgen.compile_regex("x{1000000}", vocab)


@probe("Lark terminal of 40,001 states (minimizing it took minutes)", expect="any")
def _(vocab):
    structgen.compile_grammar('start: A\nA: ("a" ~ 200) ~ 200', vocab)


@probe("grammar with a 100000-long literal", expect="any")
def _(vocab):
    structgen.compile_grammar('start: "' + "ab" * 50_000 + '"', vocab)


# -- languages with no value: refused at compile time, naming where

#: schema -> where the error points; or, where only part of the language is empty, the byte
#: that would enter that part (it must be refused from the first position).
EMPTY_SCHEMAS = {
    "anyOf with an empty pattern branch": (
        {"anyOf": [{"type": "string", "pattern": "[]"}, {"type": "integer"}]}, b'"'),
    "nonempty array of itself": ({"type": "array", "items": {"$ref": "#"}, "minItems": 1}, "/"),
    "a lone surrogate pattern": ({"type": "string", "pattern": "\\ud800"}, "/"),
    "required member with an empty pattern": (
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "[]"}}, "required": ["a"]},
        "/properties/a"),
    "mutually recursive required members": (
        {"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}, "required": ["b"]},
                   "b": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}},
         "$ref": "#/$defs/a"}, "/"),
    "optional member that can never be written": (
        {"type": "object", "additionalProperties": False,
         "properties": {"a": {"type": "array", "items": {"$ref": "#/properties/a"}, "minItems": 1}}},
        b'{"'),
}

for _name, (_schema, _where) in EMPTY_SCHEMAS.items():
    if isinstance(_where, bytes):
        @probe(f"schema: {_name}", expect="ok")
        def _(vocab, schema=_schema, dead=_where):
            for canonical in (False, True):
                m = compile_schema(vocab, schema, canonical=canonical).matcher()
                token = vocab.tokens.index(dead)
                assert not m.validate([token]), f"{dead!r} enters a part with no value"
    else:
        @probe(f"schema: {_name}", expect="SchemaError", contains=f"at JSON pointer '{_where}'")
        def _(vocab, schema=_schema):
            compile_schema(vocab, schema)


@probe("objects that require themselves: {\"x\": 1} is one", expect="ok")
def _(vocab):
    m = compile_schema(vocab, {"properties": {"x": {"$ref": "#"}}, "required": ["x"]}).matcher()
    assert all(m.advance(vocab.tokens.index(bytes([b]))) for b in b'{"x":{"x":1}}') and m.can_end()


@probe("grammar whose only terminal matches nothing", expect="GrammarError")
def _(vocab):
    structgen.compile_grammar("start: /[^\\s\\S]/", vocab)


@probe("grammar whose start rule never ends", expect="GrammarError", contains="start")
def _(vocab):
    structgen.compile_grammar('start: "a" start', vocab)


@probe("regex that matches nothing", expect="GrammarError")
def _(vocab):
    structgen.compile_regex("[^\\s\\S]", vocab)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe(name, hostile_worker):
    check(hostile_worker.run(name), PROBES[name])
