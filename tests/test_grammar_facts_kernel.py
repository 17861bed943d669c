"""The follow bytes in C (``compiled_dfa.c``) against the Python sets they replace
(``grammar_facts._first_and_follow_in_python``): random rule automata, and every grammar that
real schemas, the SQL grammar of a database and the C-like grammar compile to."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import structgen
from structgen.core import automaton, grammar_facts
from structgen.core.dfa_kernel import kernel, kernel_available
from structgen.frontends.sql import read_schema, sql_grammar_text
from sql_data import SQL_DIR
from test_liveness import SCHEMAS, random_rules

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not kernel_available(), reason="compiled_dfa.c was not built")


def in_c(rules, null):
    return grammar_facts.first_and_follow(rules, null)  # the kernel's path: the module skips without it


@pytest.mark.parametrize("seed", range(300))
def test_random_rule_automata(seed):
    rng = random.Random(seed)
    rules = random_rules(rng, rng.randint(1, 12))
    null = [rng.random() < 0.3 for _ in rules]
    assert in_c(rules, null) == grammar_facts._first_and_follow_in_python(rules, null)


def test_random_cases_have_follow_bytes_and_empty_ones():
    """Not a vacuous comparison: the random cases give both empty and non-empty follow sets."""
    seen = set()
    for seed in range(300):
        rng = random.Random(seed)
        rules = random_rules(rng, rng.randint(1, 12))
        seen.update(bool(f) for f in in_c(rules, [rng.random() < 0.3 for _ in rules]))
    assert seen == {True, False}


def test_real_grammars(smollm2_tokenizer, monkeypatch):
    compared = []

    def spy(rules, null):
        python = grammar_facts._first_and_follow_in_python(rules, null)
        assert in_c(rules, null) == python
        compared.append(sum(map(len, python)))
        return python

    monkeypatch.setattr(automaton, "first_and_follow", spy)
    compiler = structgen.Compiler(smollm2_tokenizer, disk_cache=False)  # a fresh one: no compile cached
    for schema in SCHEMAS:
        compiler.json_schema(schema)
    compiler.grammar_file(sql_grammar_text(read_schema(SQL_DIR / "databases" / "car_dealership.sqlite"), strict=False))
    compiler.grammar_file(ROOT / "benchmarks" / "data" / "grammar_c_expr.lark")
    assert len(compared) == len(SCHEMAS) + 2 and all(compared)


@pytest.mark.parametrize("seed", range(200))
def test_components_step_for_step(seed):
    """Tarjan in C gives the Python's components in the Python's order (random graphs with
    cycles, self-loops and repeated edges)."""
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    succ = [[rng.randrange(n) for _ in range(rng.randint(0, 3))] for _ in range(n)]
    assert kernel.components(succ) == grammar_facts._components(succ)


def test_components_of_a_deep_chain_and_a_big_cycle():
    chain = [[i + 1] for i in range(99_999)] + [[]]
    cycle = [[(i + 1) % 100_000] for i in range(100_000)]
    assert kernel.components(chain) == grammar_facts._components(chain) == [[i] for i in reversed(range(100_000))]
    assert kernel.components(cycle) == grammar_facts._components(cycle)


def test_grammar_automata_are_the_same_with_and_without_the_kernel(monkeypatch):
    """End to end: every fact build_automaton derives (pruned rules, nullable, follow bytes,
    fingerprints) is the same whether the kernel or the Python computes it."""
    from structgen.core.automaton import build_automaton
    from structgen.frontends.json_schema.translate import translate_schema

    grammars = [translate_schema(s)[0] for s in SCHEMAS] + [translate_schema(s, canonical=True)[0] for s in SCHEMAS]
    with_kernel = [build_automaton(g) for g in grammars]
    monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", "0")
    assert not kernel_available()
    for g, got in zip(grammars, with_kernel):
        want = build_automaton(g)
        assert (got.nullable, got.follow, got.fingerprints) == (want.nullable, want.follow, want.fingerprints)
        assert [(r.trans, r.calls, r.accept) for r in got.rules] == [(r.trans, r.calls, r.accept) for r in want.rules]


def test_packed_rows_read_as_the_dicts_and_are_checked():
    """``rows_read`` packs a rule's rows once (``grammar_facts.packed_rows``); the kernel reads
    them like the dicts, and checks them before reading: a truncated table, a target or a
    state count out of range, offsets that go back are a ValueError, not a read past the end."""
    import struct

    rows = [{97: 1, 98: 2}, {99: 2}, {}]
    calls = [[(), (), ()]]
    packed = kernel.rows_read(rows)
    assert grammar_facts.packed_rows(rows) == packed and grammar_facts.packed_rows(rows) is grammar_facts.packed_rows(rows)
    same = kernel.first_and_follow([rows], calls, [[False, False, True]], [False], [False])
    assert kernel.first_and_follow([packed], calls, [[False, False, True]], [False], [False]) == same
    n = 3
    tstart_at = 8 + n * 32
    bad = {
        "truncated": packed[:-4],
        "target out of range": packed[:-4] + struct.pack("<i", 7),
        "too many states": struct.pack("<i", 1 << 20) + packed[4:],
        "offsets go back": packed[:tstart_at + 4] + struct.pack("<i", 5) + packed[tstart_at + 8:],
        "empty": b"",
    }
    for what, table in bad.items():
        with pytest.raises(ValueError):
            kernel.first_and_follow([table], calls, [[False, False, True]], [False], [False])
            pytest.fail(what)
    for not_rows in ([1, 2], [{300: 0}], [{0: 5}], "ab"):
        with pytest.raises((ValueError, TypeError)):
            kernel.rows_read(not_rows)
