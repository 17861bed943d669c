"""The Lark lexer's token split in C (``structgen/core/compiled_dfa.c``) against the same split in
Python (:func:`structgen.core.dfa.split_product` with ``STRUCTGEN_DFA_KERNEL=0``): equal rows,
state numbers included, on random automata and on every terminal of real grammars; the same
budget and state-limit outcomes; malformed input refused."""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import pytest

from structgen.core import dfa, ir
from structgen.core.budget import compile_budget
from structgen.core.ir import ByteClass, Fsm, digest
from structgen.errors import BudgetExceededError, CompileError
from structgen.frontends.lark.reader import read_grammar
from structgen.frontends.sql import read_schema, sql_grammar_text
from sql_data import SQL_DIR

ROOT = Path(__file__).resolve().parents[1]


def both(monkeypatch, *args):
    """``split_product(*args)`` in Python, then in C."""
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
        out.append(dfa.split_product(*args))
    return out


def random_rows(rng: random.Random, n: int):
    """A random grouped DFA of ``n`` states over a few overlapping byte classes."""
    classes = [frozenset(rng.sample(range(8), rng.randint(1, 4))) for _ in range(5)]
    trans = []
    for q in range(n):
        row: dict = {}
        for bs in rng.sample(classes, rng.randint(0, 3)):
            for b in bs:
                row.setdefault(b, rng.randrange(n) if rng.random() < 0.6 else min(n - 1, q + 1))
        trans.append(row)
    return dfa.grouped(trans)


def test_the_kernel_is_built():
    """CI installs with a C compiler: the split must run in C there (Python is the fallback)."""
    assert dfa._kernel is not None and dfa._kernel.VERSION == dfa.KERNEL_VERSION, \
        "structgen/core/compiled_dfa.c was not built: run make setup"


@pytest.mark.parametrize("seed", range(200))
def test_random_products_split_alike(seed, monkeypatch):
    rng = random.Random(seed)
    ra, rb = random_rows(rng, rng.randint(1, 30)), random_rows(rng, rng.randint(1, 30))
    accept_a = [rng.random() < 0.4 for _ in ra]
    class_b = [rng.choice([-1, 0, 1, 2]) for _ in rb]
    python, c = both(monkeypatch, ra, accept_a, rb, class_b, 10_000, "test")
    assert c == python


def test_random_products_do_split_trim_and_shrink(monkeypatch):
    """The random cases exercise what they are there for: several classes, trimmed states,
    and states merged by minimizing (a test of only trivial products would pass anything)."""
    classes = trimmed = merged = 0
    monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", "0")
    for seed in range(200):
        rng = random.Random(seed)
        ra, rb = random_rows(rng, rng.randint(1, 30)), random_rows(rng, rng.randint(1, 30))
        accept_a = [rng.random() < 0.4 for _ in ra]
        class_b = [rng.choice([-1, 0, 1, 2]) for _ in rb]
        rows, order = dfa.product_rows(ra, rb, 10_000, "test")
        got = dfa.split_product(ra, accept_a, rb, class_b, 10_000, "test")
        classes += len(got) > 1
        for c, _, _ in got:
            acc = [accept_a[p] and class_b[q] == c for p, q in order]
            kept = len(dfa.trim_rows(rows, acc)[0])
            trimmed += kept < len(rows)
            merged += len(dfa.minimize_rows(*dfa.trim_rows(rows, acc))[0]) < kept
    assert classes > 30 and trimmed > 50 and merged > 20, (classes, trimmed, merged)


def test_a_long_chain(monkeypatch):
    """As many refinement rounds as states: 3,000 in a row (the C refinement re-signs only
    states whose successor moved, as the Python one does)."""
    chain = [[(dfa.mask_of([97, 98]), q + 1)] for q in range(3000)] + [[]]
    anything = [[(dfa.mask_of(range(256)), 0)]]
    python, c = both(monkeypatch, chain, [q % 7 == 0 for q in range(3001)], anything, [0], 10_000, "chain")
    assert c == python and len(c[0][1]) == 2997  # trimmed after the last accepting state, 2996


@pytest.mark.parametrize("grammar", ["json", "arithmetic", "c-like", "sql"])
def test_real_grammars_lex_alike(grammar, monkeypatch):
    """Every terminal of real grammars: the grammar IR the lexer writes is the same either way."""
    if grammar == "sql":
        text = sql_grammar_text(read_schema(SQL_DIR / "databases" / "car_dealership.sqlite"), strict=False)
    elif grammar == "c-like":
        text = (ROOT / "benchmarks" / "data" / "grammar_c_expr.lark").read_text()
    else:
        text = (ROOT / "structgen" / "grammars" / f"{grammar}.lark").read_text()
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
        out.append(read_grammar(text))
    assert out[0] == out[1]
    assert any("#" in name for name, _ in out[1].rules)  # some token was split by what follows
    # the kernel writes each token's digest text; Python writes it from the nodes
    assert [digest(body) for _, body in out[1].rules] == [digest(body) for _, body in out[0].rules]


def random_trans(rng: random.Random, n: int) -> list[dict[int, int]]:
    """Random DFA rows of ``n`` states: empty rows, one target, many, all 256 bytes."""
    trans = []
    for _ in range(n):
        shape = rng.random()
        if shape < 0.1:
            trans.append({})
        elif shape < 0.2:
            trans.append(dict.fromkeys(range(256), rng.randrange(n)))
        else:
            trans.append({b: rng.randrange(min(n, rng.choice([1, 3, 300]))) for b in rng.sample(range(256), rng.randint(1, 256))})
    return trans


@pytest.mark.parametrize("seed", range(100))
def test_rows_group_alike_in_c_and_python(seed):
    if not dfa.kernel_available():
        pytest.skip("compiled_dfa is off or not built")
    trans = random_trans(random.Random(seed), random.Random(seed).randint(1, 40))
    python = dfa.grouped_py(trans)
    assert dfa._kernel.grouped(trans, False) == python
    assert dfa._kernel.grouped(trans, True) == tuple(map(tuple, python))


def test_the_sql_union_of_terminals_groups_alike():
    """The largest automaton grouped in a grammar compile (~1,650 states), bytes 0-255 and all."""
    if not dfa.kernel_available():
        pytest.skip("compiled_dfa is off or not built")
    from structgen.frontends.lark.reader import _load, _Lowering, _terminal_languages

    text = sql_grammar_text(read_schema(SQL_DIR / "databases" / "car_dealership.sqlite"), strict=False)
    defs, _ = _load(text, "<sql>", None)
    terminals = _terminal_languages(_Lowering(defs), {n: d for n, d in defs.items() if d.terminal})
    trans, _ = dfa.dfa_of(ir.alt(*terminals.values()), charged=False)
    assert len(trans) > 1000
    assert dfa.grouped(trans) == dfa.grouped_py(trans)


def test_grouping_refuses_what_is_not_dfa_rows():
    if not dfa.kernel_available():
        pytest.skip("compiled_dfa is off or not built")
    for bad, error in (([{256: 0}], ValueError), ([{97: 1}], ValueError), ([{-1: 0}], ValueError),
                       ([{97: "a"}], TypeError), ([[97]], TypeError), (5, TypeError)):
        with pytest.raises(error):
            dfa._kernel.grouped(bad, False)


@pytest.mark.parametrize("limit", [40, 300, 600])
def test_the_state_limit_and_the_budget_stop_it_alike(limit, monkeypatch):
    """A product past the state limit is a CompileError, and a budget it exceeds is a
    BudgetExceededError, the same in C as in Python, after the same charges."""
    counter = [[(dfa.mask_of([97]), (q + 1) % 500)] for q in range(500)]
    anything = [[(dfa.mask_of(range(256)), 0)]]
    for budget in (None, 1_000, 5_000):
        outcome = []
        for on in ("0", "1"):
            monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
            try:
                with compile_budget(budget):
                    got = dfa.split_product(counter, [True] * 500, anything, [0], limit, "a counter")
                outcome.append(("ok", len(got[0][1])))
            except BudgetExceededError as err:
                outcome.append(("budget", str(err)))
            except CompileError as err:
                outcome.append(("limit", str(err)))
        assert outcome[0] == outcome[1], (budget, outcome)


def test_malformed_input_is_refused():
    kernel = dfa._kernel
    offsets, masks, targets = dfa._packed([[(dfa.mask_of([97]), 0)]])
    with pytest.raises(ValueError, match="malformed"):  # a target past the last state
        kernel.split_product(offsets, masks, array("i", [5]), b"\x01", offsets, masks, targets,
                             array("i", [0]), 10)
    with pytest.raises(ValueError, match="malformed"):  # masks of the wrong length
        kernel.split_product(offsets, masks[:-1], targets, b"\x01", offsets, masks, targets,
                             array("i", [0]), 10)
    overlapping = dfa._packed([[(dfa.mask_of([97, 98]), 0), (dfa.mask_of([98]), 0)]])  # not a DFA's row
    with pytest.raises(ValueError, match="malformed"):
        kernel.split_product(*overlapping, b"\x01", offsets, masks, targets, array("i", [0]), 10)
    with pytest.raises(ValueError, match="wrong size"):
        kernel.split_product(offsets, masks, targets, b"\x01\x01", offsets, masks, targets,
                             array("i", [0]), 10)
    with pytest.raises(ValueError, match="out of range"):
        kernel.split_product(offsets, masks, targets, b"\x01", offsets, masks, targets,
                             array("i", [-2]), 10)


def test_second_rows_checked_once_are_still_checked_when_new():
    """The kernel remembers the last second automaton it checked when given as bytes (the shared
    union of terminals, :func:`dfa._shared_packed`); any other rows are checked again."""
    kernel = dfa._kernel
    offsets, masks, targets = dfa._packed([[(dfa.mask_of([97]), 0)]])
    shared = dfa._shared_packed([[(dfa.mask_of([97]), 0)]])
    assert all(isinstance(x, bytes) for x in shared)
    for _ in range(2):  # checked, then remembered: the same answer
        assert kernel.split_product(offsets, masks, targets, b"\x01", *shared, array("i", [0]), 10)[0] == 1
    bad = (shared[0], shared[1], array("i", [5]).tobytes())  # equal but for a target past the end
    with pytest.raises(ValueError, match="malformed"):
        kernel.split_product(offsets, masks, targets, b"\x01", *bad, array("i", [0]), 10)
    mutable = array("i", targets)  # an array is checked every time: it could change in between
    assert kernel.split_product(offsets, masks, targets, b"\x01", offsets, masks, mutable, array("i", [0]), 10)[0] == 1
    mutable[0] = 5
    with pytest.raises(ValueError, match="malformed"):
        kernel.split_product(offsets, masks, targets, b"\x01", offsets, masks, mutable, array("i", [0]), 10)


def random_fsm(rng: random.Random):
    """A random trimmed, minimized automaton as an IR node (the regular operations' input)."""
    rows = random_rows(rng, rng.randint(1, 25))
    accept = [rng.random() < 0.4 for _ in rows]
    accept[rng.randrange(len(rows))] = True
    return dfa.fsm_of_rows(*dfa.minimize_rows(*dfa.trim_rows(rows, accept)))


@pytest.mark.parametrize("seed", range(100))
def test_differences_and_intersections_alike(seed, monkeypatch):
    """regular.difference and regular.intersect run their products through the same split in C
    (difference completes the second automaton with a sink, so the states are explored in the
    same order as the Python product's)."""
    from structgen.core import regular

    rng = random.Random(seed)
    a, b = random_fsm(rng), random_fsm(rng)
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
        out.append((regular.difference(a, b), regular.intersect(a, b)))
    assert out[0] == out[1]


@pytest.mark.parametrize("seed", range(50))
def test_fsm_of_rows_orders_each_row_by_byte(seed):
    """fsm_of_rows shares byte classes across calls and sorts a row by its classes' lowest
    bytes: the same node as classes made afresh and sorted by their ranges."""
    rng = random.Random(seed)
    rows = random_rows(rng, rng.randint(1, 30))
    accept = [rng.random() < 0.5 for _ in rows]
    edges = tuple(tuple(sorted(((ByteClass(dfa.ranges_of(bs)), t) for bs, t in row), key=lambda e: e[0].ranges))
                  for row in rows)
    assert dfa.fsm_of_rows(rows, accept) == Fsm(edges, frozenset(q for q, a in enumerate(accept) if a))


@pytest.mark.parametrize("seed", range(100))
def test_fsm_nodes_made_in_c_are_those_of_the_rows(seed, monkeypatch):
    """split_fsms in C builds each class's IR node itself: the node fsm_of_rows makes of the
    Python split's rows."""
    rng = random.Random(seed)
    ra, rb = random_rows(rng, rng.randint(1, 30)), random_rows(rng, rng.randint(1, 30))
    accept_a = [rng.random() < 0.4 for _ in ra]
    class_b = [rng.choice([-1, 0, 1, 2]) for _ in rb]
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
        out.append(dfa.split_fsms(ra, accept_a, rb, class_b, 10_000, "test"))
    assert out[1] == out[0]
    assert all(isinstance(fsm, Fsm) for _, fsm in out[1])
    for _, fsm in out[1]:  # its digest came from the kernel's text: the text Python writes
        assert "_fsm_digest" in fsm.__dict__
        assert fsm.__dict__["_fsm_digest"] == ir._fsm_digest(Fsm(fsm.edges, fsm.accept))


@pytest.mark.parametrize("seed", range(100))
def test_unminimized_splits_alike_and_only_trimmed(seed, monkeypatch):
    """minimal=False: the same rows in C and in Python, and those are the product trimmed
    (trim_rows of product_rows: same states, same numbers), nothing merged."""
    rng = random.Random(seed)
    ra, rb = random_rows(rng, rng.randint(1, 30)), random_rows(rng, rng.randint(1, 30))
    accept_a = [rng.random() < 0.4 for _ in ra]
    class_b = [rng.choice([-1, 0]) for _ in rb]
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
        out.append(dfa.split_product(ra, accept_a, rb, class_b, 10_000, "test", minimal=False))
    assert out[1] == out[0]
    rows, order = dfa.product_rows(ra, rb, 10_000, "test")
    trimmed = dfa.trim_rows(rows, [accept_a[p] and class_b[q] == 0 for p, q in order])
    assert out[1] == ([(0, *trimmed)] if any(trimmed[1]) else [])


@pytest.mark.parametrize("pattern", ["^[a-z]+$", "^[^/]+(/[^/]+)*$", "ab", "^(a|é|中)*$", "^x{2,5}y?$"])
@pytest.mark.parametrize("lo, hi", [(0, 0), (1, 1), (2, 5), (0, 40), (3, None)])
def test_lengths_beside_a_pattern_alike_in_c_and_python(pattern, lo, hi, monkeypatch):
    """regular.with_length (a pattern's product with a character counter) gives the same node
    in C and in Python, and the language of the pattern intersected with the unrolled count."""
    from structgen.core import regular
    from structgen.frontends.json_text import JSON_CHAR
    from structgen.frontends.regex.ecma import pattern_to_ir

    e = pattern_to_ir(pattern)
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
        out.append(regular.with_length(e, JSON_CHAR, lo, hi))
    assert out[1] == out[0]
    unrolled = regular.intersect(e, ir.Repeat(JSON_CHAR, lo, hi))
    for one, other in ((out[1], unrolled), (unrolled, out[1])):
        rows, accept = dfa.trim_rows(*dfa.rows_of(regular.difference(one, other)))
        assert not any(accept)


def test_lengths_beside_a_pattern_are_made_and_charged_once_per_compile():
    from structgen.core import regular
    from structgen.core.budget import room
    from structgen.frontends.json_text import JSON_CHAR

    e = ir.Repeat(ByteClass.of("a-z"), 1, None)
    with compile_budget(10**6):
        first = regular.with_length(e, JSON_CHAR, 0, 100)
        spent = 10**6 - room()
        assert regular.with_length(e, JSON_CHAR, 0, 100) is first and 10**6 - room() == spent > 0


def test_ir_automata_and_shared_rows_are_out_of_the_collectors_sight():
    # An Fsm's edges hold ByteClass nodes, which CPython never untracks by itself, and the shared
    # grouped rows were lists: neither can be in a cycle, and tracked, every full collection
    # walked them again (a fifth of what structgen's caches held after 200 MaskBench schemas)
    import gc

    from structgen.core import regular
    from structgen.core.ir import Lit, Repeat, alt

    if not dfa.kernel_available():  # the untracking is the kernel's (STRUCTGEN_DFA_KERNEL=0 goes without)
        pytest.skip("compiled_dfa is off or not built")
    word = Repeat(ByteClass.of("a-z"), 1, 4)
    made_in_python = dfa.fsm_of_rows(*dfa.rows_of(word))  # an Fsm from rows, as to_fsm makes it
    made_in_c = regular.difference(word, alt(Lit(b"no"), Lit(b"x")))  # the kernel writes the edges
    lexer = read_grammar('start: NAME ("," NAME)*\nNAME: /[a-z]+/\n%ignore " "')  # split_fsms per token
    lexed = [body for _, body in lexer.rules if isinstance(body, Fsm)]
    shared = dfa.rows_of(Repeat(ByteClass.of("0-9"), 2, 3))[0]
    gc.collect()  # tuples whose items are all untracked leave the collector's sight at a collection
    fsms = [made_in_python, made_in_c, *lexed]
    assert len(fsms) > 2 and all(len(f.edges) > 1 for f in fsms)
    for fsm in fsms:
        assert not gc.is_tracked(fsm.edges)
        assert not any(gc.is_tracked(row) or any(gc.is_tracked(pair) for pair in row) for row in fsm.edges)
    assert type(shared) is tuple and not any(gc.is_tracked(row) for row in shared) and not gc.is_tracked(shared)
    assert gc.is_tracked((ByteClass.of("a"), 1))  # what untrack_edges is for: not done by CPython
