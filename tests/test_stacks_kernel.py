"""The C closures and steps of stacks (structgen/engine/compiled_stacks.c) against pda.py's Python.

Both intern stacks in the same order, so the same walk must give the same stack ids, the same
frames and the same sets with the kernel on and off, and the same masks. Compared on the
bundled SQL grammar, a C-like grammar with line and block comments (guard frames, which the
Python closes), JSON schemas with arrays and objects (counted and unordered rules: Python
frames that call C for the plain frames they push), and a chain of rules deeper than the C
code recurses (handed back to Python past that depth).
"""

from __future__ import annotations

import gc
from collections import deque

import numpy as np
import pytest

import structgen
from sql_data import pairs
from test_walk_kernel import C_LIKE as WALK_C_LIKE, C_TEXT as WALK_C_TEXT
from structgen.engine.masks import MaskBuilder, walk_keys
from structgen.engine.pda import ACCEPT, StackMachine, frozen_ints, stacks_kernel_available
from structgen.engine.vocab import vocabulary_for

#: test_walk_kernel.py's C-like grammar, with block comments too (a longer ignored run)
C_LIKE = WALK_C_LIKE + r"%ignore /\/\*([^*]|\*+[^*\/])*\*+\//" + "\n"
C_TEXT = WALK_C_TEXT.replace("int t = b;", "int t = b; /* swap */")
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "tags": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    "ok": {"type": "boolean"}, "note": {"type": ["string", "null"]}}, "required": ["name"]}
SCHEMA_TEXT = '{"tags": [1, 22, 333], "name": "Ada", "ok": true}'
#: rules called one from the next, no byte read: the closure of the start goes this deep
CHAIN = 600


def _cases(tokenizer):
    query = next(p for p in pairs("defog") if "JOIN" in p.sql and "GROUP BY" in p.sql)
    chain = "start: r0\n" + "".join(f"r{i}: r{i + 1}\n" for i in range(CHAIN)) + f'r{CHAIN}: "x" | "y" r0\n'
    return {
        "sql": (structgen.compile_sql(query.database, tokenizer).grammar, query.sql),
        "c-like": (structgen.compile_grammar(C_LIKE, tokenizer), C_TEXT),
        "json": (structgen.compile_json_schema(SCHEMA, tokenizer), SCHEMA_TEXT),
        "chain": (structgen.compile_grammar(chain, tokenizer), "yyx"),
    }


def _machine(compiled, kernel: bool, monkeypatch) -> StackMachine:
    monkeypatch.setenv("STRUCTGEN_STACKS_KERNEL", "1" if kernel else "0")
    sm = StackMachine(compiled.automaton)  # the switch is read here
    assert (sm._closure_top is not None) == kernel
    return sm


def _explore(sm: StackMachine, text: bytes, limit: int = 300) -> list:
    """The sets met stepping ``text`` byte by byte, then by every byte they read, breadth first,
    to ``limit`` sets, in the order met."""
    s, met = sm.initial(), [sm.initial()]
    for b in text:
        s = sm.step_set(s, b)
        met.append(s)
    queue, seen = deque(met), set(met)
    while queue and len(seen) < limit:
        s = queue.popleft()
        for b in sorted(sm.next_bytes(s)):
            n = sm.step_set(s, b)
            met.append(n)
            if n not in seen:
                seen.add(n)
                queue.append(n)
    return met


def test_the_kernel_is_built():
    # `make setup` builds it (pip, from pyproject's ext-modules); without it cold masks are slower
    assert stacks_kernel_available(), "structgen/engine/compiled_stacks.c was not built: run make setup"


@pytest.mark.parametrize("case", ["sql", "c-like", "json", "chain"])
def test_the_c_stacks_are_the_python_stacks(request, monkeypatch, case):
    tokenizer = request.getfixturevalue("smollm2_tokenizer")
    compiled, text = _cases(tokenizer)[case]
    rules = compiled.automaton.rules
    if case == "json":  # the Python frames that call back into C are there
        assert any(r.counted for r in rules) and any(r.unordered is not None for r in rules)
    if case == "c-like":
        assert any(r.lookahead for r in rules)  # guard frames
    data = text.encode()
    fast, slow = _machine(compiled, True, monkeypatch), _machine(compiled, False, monkeypatch)
    met_fast, met_slow = _explore(fast, data), _explore(slow, data)
    assert met_fast == met_slow
    assert fast.frames == slow.frames and fast.escapes == slow.escapes
    assert ACCEPT in fast.step_bytes(fast.initial(), data)
    # the masks along the text, which step and close many more stacks (the crossing reads; not
    # the same ones in both: the second builder finds the first one's state facts cached)
    vocab = vocabulary_for(tokenizer)
    masks = []
    for sm in (fast, slow):
        builder, s, out = MaskBuilder(sm, vocab), sm.initial(), []
        for b in data:
            out.append(builder.mask(s))
            s = sm.step_set(s, b)
        masks.append(out)
    assert all(np.array_equal(a, b) for a, b in zip(*masks))


@pytest.mark.parametrize("kernel", [True, False])
def test_the_memoized_sets_are_out_of_the_collectors_sight(request, monkeypatch, kernel):
    # sets of ints made by C or by Python (guards, counted and unordered frames) are untracked:
    # a full collection in the middle of a mask visited every one of them (10^5 per grammar)
    tokenizer = request.getfixturevalue("smollm2_tokenizer")
    for case in ("c-like", "json"):
        compiled, text = _cases(tokenizer)[case]
        sm = _machine(compiled, kernel, monkeypatch)
        met = _explore(sm, text.encode())
        memos = [*sm._closure.values(), *sm._step.values(), *sm._next_bytes.values(),
                 *(s for memo in sm._step_set for s in memo.values())]
        assert len(memos) > 1000 and not any(gc.is_tracked(s) for s in [*met, *memos])
        assert all(type(s) is frozenset for s in memos)
    assert gc.is_tracked(frozen_ints([1, "x"]))  # not ints: tracked, as any frozenset


def test_a_chain_deeper_than_the_c_recursion_closes_in_python(request, monkeypatch):
    # past compiled_stacks.c's DEEP (100) closures in progress, the rest of the chain is closed
    # in Python (no C stack per rule)
    tokenizer = request.getfixturevalue("smollm2_tokenizer")
    compiled, _ = _cases(tokenizer)["chain"]
    handed: list[int] = []
    python_deep = StackMachine._closure_deep

    def deep(self, sid, busy):
        handed.append(len(busy))
        return python_deep(self, sid, busy)

    monkeypatch.setattr(StackMachine, "_closure_deep", deep)
    sm = _machine(compiled, True, monkeypatch)
    start = sm.initial()  # the chain's two reading frames: the tokens "x" and "y" on top of it
    assert len(start) == 2 and all(sm.depth(s) > CHAIN for s in start)
    assert handed and min(handed) == 100
    assert sm.next_bytes(start) == frozenset(b"xy")


@pytest.mark.parametrize("case", ["c-like", "json"])
def test_the_c_key_walk_is_the_python_key_walk(request, monkeypatch, case):
    # masks.walk_keys against compiled_stacks.c's walk_keys: the same keys read whole and the same
    # escapes reported, from the sets along the text, over the whole token index (most nodes
    # jump to the few bytes a set reads) and over the short remainder-like tails of tokens
    # (every child visited), with escapes reported and without
    tokenizer = request.getfixturevalue("smollm2_tokenizer")
    compiled, text = _cases(tokenizer)[case]
    sm = _machine(compiled, True, monkeypatch)
    index = tuple(vocabulary_for(tokenizer).index.keys)[::3]  # sorted still
    tails = tuple(sorted({k[len(k) // 2:] for k in index[::7]}))
    # the isolated top frames of the sets along the text (their returns are escapes), as
    # MaskBuilder._isolated_reads walks them, and the whole sets (no escapes)
    sets = _explore(sm, text.encode(), limit=40)[::3]
    alone = {sm.closure(sm.isolated(sid)) for s in sets for sid in s if sid > ACCEPT}
    sets += sorted((s.difference(sm.escapes) for s in alone), key=sorted)[:25]
    read = escapes = 0
    for keys in (index, tails):
        for s in sets:
            found_c, found_py = set(), set()
            got = sm.walk_keys_in_c(keys, s, lambda i, d, f: found_c.add((i, d, f)))
            want = walk_keys(keys, s, sm.step_set, sm.next_bytes,
                             on_escape=lambda i, d, f: found_py.add((i, d, f)), escapes=sm.escapes)
            assert got == want and found_c == found_py
            assert sm.walk_keys_in_c(keys, s, None) == walk_keys(keys, s, sm.step_set, sm.next_bytes)
            read, escapes = read + len(got), escapes + len(found_c)
    assert read and escapes  # both were compared on something
