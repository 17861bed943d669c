"""Deep and long inputs (issue 25, item 6): they compile and a valid instance walks, or they are
refused with a structgen error naming where, never a RecursionError. Each probe runs in a worker
process under :data:`hostile.TIME_LIMIT` seconds and :data:`hostile.MEMORY_LIMIT` bytes.

Families: nested properties / items / anyOf / not, many properties, chains of ``$ref``, huge
number bounds, Lark grammars with long rule chains and deep groups, deep tool parameters.
"""

from __future__ import annotations

import json

import pytest

import structgen
from structgen.core.depth import recursion_room
from hostile import Probe, check, registry

PROBES: dict[str, Probe] = {}
probe = registry(PROBES)
_TOKENIZER = []


def encode(text):
    if not _TOKENIZER:
        from structgen.decoding.models import load_default_tokenizer
        _TOKENIZER.append(load_default_tokenizer())
    return _TOKENIZER[0].encode(text, add_special_tokens=False)


def walk(compiled, text):
    m = compiled.matcher()
    for k, t in enumerate(encode(text)):
        assert m.advance(t), f"token {k} of {text[:80]!r}: {m.last_rejection}"
    assert m.can_end(), f"{text[:80]!r} is incomplete"


def schema_walks(vocab, schema, value):
    with recursion_room():  # json.dumps recurses per level, as the compile's own walks do
        text = json.dumps(value, separators=(",", ":"))
    for canonical in (True, False):
        walk(structgen.compile_json_schema(schema, vocab, canonical=canonical), text)


def nested_properties(n):
    s, v = {"type": "integer"}, 1
    for _ in range(n):
        s, v = {"type": "object", "properties": {"a": s}, "required": ["a"]}, {"a": v}
    return s, v


def nested_items(n):
    s, v = {"type": "integer"}, 1
    for _ in range(n):
        s, v = {"type": "array", "items": s, "minItems": 1}, [v]
    return s, v


def nested_any_of(n):
    s = {"type": "integer"}
    for _ in range(n):
        s = {"anyOf": [s, {"type": "string"}]}
    return s, 3


def nested_not(n):
    s = {"type": "integer"}
    for _ in range(n):
        s = {"not": s}
    return s, (3 if n % 2 == 0 else "x")


def chained_refs(n):
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n - 1)}
    defs[f"d{n - 1}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}, 5


def many_properties(n):
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}
    return schema, {"p0": 0, f"p{n - 1}": n - 1}


FAMILIES = {"nested properties": (nested_properties, (70, 200, 500)),
            "nested items": (nested_items, (70, 200, 1000)),
            "nested anyOf": (nested_any_of, (70, 200, 500)),
            "nested not": (nested_not, (70, 200, 1000)),
            "chained $ref": (chained_refs, (70, 300, 1000)),
            "properties in one object": (many_properties, (300, 1000))}

for _family, (_make, _sizes) in FAMILIES.items():
    for _n in _sizes:
        @probe(f"{_family} x{_n}", expect="ok")
        def _(vocab, make=_make, n=_n):
            schema_walks(vocab, *make(n))


@probe("nested properties past the nesting limit", expect="SchemaError", contains="/properties/a/properties/a")
def _(vocab):
    structgen.compile_json_schema(nested_properties(1200)[0], vocab)


@probe("nested arrays in an enum past the nesting limit", expect="SchemaError", contains="/enum/0/0/0")
def _(vocab):
    v = 1
    for _ in range(3000):
        v = [v]
    structgen.compile_json_schema({"enum": [v]}, vocab)


@probe("$ref cycle without input", expect="SchemaError", contains="no JSON value satisfies")
def _(vocab):
    structgen.compile_json_schema({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"},
                                                                  "b": {"$ref": "#/$defs/a"}}}, vocab)


# -- huge and tiny numbers

for _kw, _bound, _value in (("minimum", 1e200, 2 * 10 ** 200), ("maximum", -1e200, -2 * 10 ** 200),
                            ("exclusiveMinimum", 1e100, 10 ** 101), ("maximum", 1e-200, 0),
                            ("minimum", -1e300, -5)):
    @probe(f"number {_kw} {_bound}", expect="ok")
    def _(vocab, kw=_kw, bound=_bound, value=_value):
        schema_walks(vocab, {"type": "number", kw: bound}, value)


for _divisor in (1e200, 1e-200, 1e-300):
    @probe(f"multipleOf {_divisor}", expect="UnsupportedFeatureError", contains="/multipleOf")
    def _(vocab, divisor=_divisor):
        structgen.compile_json_schema({"type": "number", "multipleOf": divisor}, vocab)


# -- Lark grammars

def rule_chain(n):
    g = "\n".join(f'r{i}: r{i + 1} "a"' for i in range(n)) + f'\nr{n}: "b"\nstart: r0\n'
    return g, "b" + "a" * n


for _n in (200, 1000):
    @probe(f"lark rule chain x{_n}", expect="ok")
    def _(vocab, n=_n):
        g, text = rule_chain(n)
        walk(structgen.compile_grammar(g, vocab), text)

    @probe(f"lark nested parentheses x{_n}", expect="ok")
    def _(vocab, n=_n):
        walk(structgen.compile_grammar("start: " + "(" * n + '"a"' + ")" * n + "\n", vocab), "a")

    @probe(f"lark nested optional groups x{_n}", expect="ok")
    def _(vocab, n=_n):
        walk(structgen.compile_grammar("start: " + '["x"' * n + "]" * n + ' "a"\n', vocab), "xxa")

    @probe(f"lark recursion {_n} deep in the text", expect="ok")
    def _(vocab, n=_n):
        walk(structgen.compile_grammar('start: "(" start ")" | "x"\n', vocab), "(" * n + "x" + ")" * n)


@probe("lark groups past the nesting limit", expect="GrammarError", contains="<grammar>:1:")
def _(vocab):
    structgen.compile_grammar("start: " + "(" * 3000 + '"a"' + ")" * 3000 + "\n", vocab)


@probe("regex nested groups x1000", expect="ok")
def _(vocab):
    walk(structgen.compile_regex("(" * 1000 + "a" + ")" * 1000, vocab), "a")


# -- tool parameters

for _n in (80, 200):
    @probe(f"tool parameters {_n} deep", expect="ok")
    def _(vocab, n=_n):
        from structgen.frontends.tool_calls import FORMATS, call_text, read_tools, tool_call_grammar
        schema, value = nested_properties(n)
        specs = read_tools([{"type": "function", "function": {"name": "f", "parameters": schema}}])
        for fmt in ("json", "hermes"):
            g = tool_call_grammar(specs, FORMATS[fmt], choice="required")
            walk(structgen.Compiler(vocab, disk_cache=False).grammar(g), call_text(FORMATS[fmt], [("f", value)]))


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe(name, hostile_worker):
    check(hostile_worker.run(name), PROBES[name])
