"""Hostile and careless inputs (issue 25): each gives a result or a structgen error, within
:data:`hostile.TIME_LIMIT` seconds and :data:`hostile.MEMORY_LIMIT` bytes, never a builtin
exception or a hang. Each probe runs in a worker process under those limits (:mod:`hostile`).

Families: self-referencing input objects; work that grows with the input (combinators, counted
repetitions, enums); languages with no value.
"""

from __future__ import annotations

import pytest

import structgen
from hostile import Probe, Worker, check, registry

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


@pytest.fixture(scope="module")
def hostile_worker():
    worker = Worker(__file__)
    yield worker
    worker.close()


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe(name, hostile_worker):
    check(hostile_worker.run(name), PROBES[name])
