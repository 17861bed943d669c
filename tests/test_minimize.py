"""Minimizing grouped DFA rows: the worklist refinement of :func:`structgen.core.dfa.minimize_rows`
against the definition (Moore: re-sign every state each round until no block splits), on random
automata and on the automata real compiles minimize (the SQL lexer's tokens, JSON schemas)."""

from __future__ import annotations

import random

import pytest

import structgen
from structgen.core import dfa, regular
from structgen.core.dfa import minimize_rows
from structgen.frontends.lark import lexer
from structgen.frontends.sql import read_schema, sql_grammar_text
from sql_data import SQL_DIR


def by_rounds(rows, accept):
    """Moore's refinement as written in the textbooks, over every state every round; the
    result renumbered and merged the way :func:`minimize_rows` does."""
    ids: dict = {}
    groups = [[(ids.setdefault(bs, len(ids)), t) for bs, t in row] for row in rows]
    block = [1 if a else 0 for a in accept]
    while True:
        sigs: dict = {}
        new = [sigs.setdefault((block[q], tuple(sorted((k, block[t]) for k, t in g))), len(sigs))
               for q, g in enumerate(groups)]
        if len(sigs) == len(set(block)):
            break
        block = new
    order = {block[0]: 0}
    for b in block:
        order.setdefault(b, len(order))
    out: list = [None] * len(order)
    acc = [False] * len(order)
    for q, row in enumerate(rows):
        k = order[block[q]]
        if out[k] is None:
            merged: dict = {}
            for bs, t in row:
                k2 = order[block[t]]
                merged[k2] = merged[k2] | bs if k2 in merged else bs
            out[k] = [(bs, t) for t, bs in merged.items()]
            acc[k] = accept[q]
    return out, acc


def random_rows(rng: random.Random):
    n = rng.randint(1, 40)
    classes = [frozenset(rng.sample(range(6), rng.randint(1, 3))) for _ in range(4)]
    rows = []
    for _ in range(n):
        row: dict = {}
        for bs in rng.sample(classes, rng.randint(0, 3)):
            for b in bs:
                row.setdefault(b, rng.randrange(n) if rng.random() < 0.5 else min(n - 1, len(rows) + 1))
        rows.append(row)
    return dfa.grouped(rows), [rng.random() < 0.3 for _ in range(n)]


@pytest.mark.parametrize("seed", range(300))
def test_random_automata_agree_with_the_definition(seed):
    rows, accept = random_rows(random.Random(seed))
    assert minimize_rows(rows, accept) == by_rounds(rows, accept)


def test_random_automata_do_shrink():
    """The cases are not all minimal already (a test that only saw minimal automata would pass
    with the identity)."""
    shrunk = 0
    for seed in range(300):
        rows, accept = random_rows(random.Random(seed))
        shrunk += len(minimize_rows(rows, accept)[0]) < len(rows)
    assert shrunk > 100


def test_a_long_chain_and_a_trie():
    """Rounds as many as the depth: a chain of 1,500 states, and a trie of keywords."""
    chain = [[(dfa.mask_of([97]), q + 1)] for q in range(1500)] + [[]]
    accept = [q % 7 == 0 for q in range(1501)]
    assert minimize_rows(chain, accept) == by_rounds(chain, accept)
    words = [b"select", b"selected", b"set", b"sum", b"substr", b"substring", b"avg", b"abs"]
    trie: list[dict] = [{}]
    ends = set()
    for w in words:
        q = 0
        for b in w:
            if b not in trie[q]:
                trie[q][b] = len(trie)
                trie.append({})
            q = trie[q][b]
        ends.add(q)
    rows, accept = dfa.grouped(trie), [q in ends for q in range(len(trie))]
    got = minimize_rows(rows, accept)
    assert got == by_rounds(rows, accept)
    assert len(got[0]) < len(rows)  # the shared tails "ed", "tr"... merge


@pytest.fixture
def minimized(monkeypatch):
    """Every ``(rows, accept)`` a compile minimizes, through the lexer and the regular operations."""
    seen = []

    def spy(rows, accept):
        seen.append((rows, accept))
        return minimize_rows(rows, accept)

    for module in (dfa, lexer, regular):
        monkeypatch.setattr(module, "minimize_rows", spy)
    return seen


def test_the_sql_lexer_agrees_with_the_definition(smollm2_tokenizer, minimized, monkeypatch):
    # Compiled here, not through compile_sql: its cache would hand other tests a compiled grammar.
    # The lexer's split in Python (in C it minimizes alike: tests/test_dfa_kernel.py).
    monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", "0")
    schema = read_schema(SQL_DIR / "databases" / "car_dealership.sqlite")
    structgen.Compiler(smollm2_tokenizer, disk_cache=False).grammar_file(sql_grammar_text(schema, strict=False))
    assert max(len(rows) for rows, _ in minimized) > 500  # the FUNCTION token's product, trimmed
    for rows, accept in minimized:
        assert minimize_rows(rows, accept) == by_rounds(rows, accept)


def test_regular_operations_agree_with_the_definition(smollm2_tokenizer, minimized, monkeypatch):
    """Patterns intersected (``allOf``), a ``not``-pattern, and an object's other keys (their
    products minimized in Python; in C alike: tests/test_dfa_kernel.py)."""
    monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", "0")
    compiler = structgen.Compiler(smollm2_tokenizer, disk_cache=False)
    compiler.json_schema({"type": "object", "properties": {
        "a": {"type": "string", "allOf": [{"pattern": "^[a-c]+x$"}, {"pattern": "^a.*b"}]},
        "b": {"type": "string", "pattern": "^[a-z]{2,6}$", "not": {"pattern": "^ab"}},
        **{f"key{k}": {"type": "integer"} for k in range(30)}}, "additionalProperties": {"type": "boolean"}})
    assert len(minimized) >= 2
    for rows, accept in minimized:
        assert minimize_rows(rows, accept) == by_rounds(rows, accept)
