"""Rule automata in C (``compiled_dfa.compile_expr``: the Thompson NFA, then the subset
construction; ``compiled_dfa.determinize``: the subset construction of an NFA made in Python)
against the same in Python (:func:`structgen.core.automaton._build` and
``_determinize_in_python``): equal automata, state numbers and row order included, with the same
work units, on random expressions and on every rule of real grammars and schemas; the same
errors, budget and state-limit outcomes; malformed input refused."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path

import pytest

from structgen.core import automaton
from structgen.core.budget import compile_budget
from structgen.core.depth import recursion_room
from structgen.core.dfa_kernel import kernel, kernel_available
from structgen.core.ir import Alt, ByteClass, Counted, Fsm, Lit, Ref, Repeat, Seq
from structgen.errors import BudgetExceededError, CompileError, StructgenError
from structgen.frontends.json_schema.translate import translate_schema
from structgen.frontends.lark.reader import read_grammar
from structgen.frontends.sql import read_schema, sql_grammar_text
from sql_data import SQL_DIR

ROOT = Path(__file__).resolve().parents[1]
MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench" / "maskbench.jsonl.gz"


def nfa_of(expr, name="r"):
    nfa = automaton._NFA(name)
    start, final = automaton._build(nfa, expr, {}, name)
    return nfa, start, final


def shape(rule):
    """Everything a rule automaton is, row order included."""
    return [list(row.items()) for row in rule.trans], rule.calls, rule.accept, rule.units


def dfa_both_ways(monkeypatch, expr, budget=None):
    """``automaton._dfa_of(expr)`` (or what it raised) in Python, then in C."""
    got = []
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
        with compile_budget(budget):
            got.append(outcome(automaton._dfa_of, expr, "r"))
    return got


def outcome(run, *args):
    try:
        return ("ok", shape(run(*args)))
    except BudgetExceededError as err:
        return ("budget", str(err))
    except CompileError as err:
        return ("limit", str(err))


def random_expr(rng: random.Random, depth: int = 0):
    pick = rng.random() if depth < 4 else rng.random() * 0.5
    if pick < 0.2:
        return Lit(bytes(rng.choice(b"abc\"{") for _ in range(rng.randint(1, 4))))
    if pick < 0.35:
        lo = rng.randrange(90, 100)
        return ByteClass(((lo, lo + rng.randrange(5)),))
    if pick < 0.5:
        return Ref(rng.choice("xyz"))
    if pick < 0.7:
        return Seq(tuple(random_expr(rng, depth + 1) for _ in range(rng.randint(2, 4))))
    if pick < 0.85:
        return Alt(tuple(random_expr(rng, depth + 1) for _ in range(rng.randint(2, 4))))
    if pick < 0.95:
        lo = rng.randint(0, 2)
        return Repeat(random_expr(rng, depth + 1), lo, rng.choice([None, lo, lo + 2]))
    return Fsm(((((ByteClass(((97, 98),)), 1),), ((ByteClass(((99, 99),)), 0),))), frozenset({1}))


def test_the_kernel_is_built():
    assert kernel_available(), "structgen/core/compiled_dfa.c was not built: run make setup"


@pytest.mark.parametrize("seed", range(300))
def test_random_expressions_determinize_alike(seed, monkeypatch):
    expr = random_expr(random.Random(seed))
    args = (*nfa_of(expr), "r")
    assert shape(automaton._determinize_in_c(*args)) == shape(automaton._determinize_in_python(*args))
    python, c = dfa_both_ways(monkeypatch, expr)
    assert c == python and c[0] == "ok"


@pytest.mark.parametrize("expr", [
    Repeat(Lit(b"ab"), 0, 5_000),  # past MAX_UNROLL
    Seq((Lit(b"a"), Repeat(Ref("x"), 4_097))),  # unbounded, its minimum past MAX_UNROLL
    Seq((Lit(b"a"), Alt((Ref("x"), Counted(Lit(b"c"), 0, 3))))),  # a node a body does not hold
], ids=["unroll", "unroll-min", "counted"])
def test_errors_alike(expr, monkeypatch):
    python, c = dfa_both_ways(monkeypatch, expr)
    assert c == python and c[0] == "limit", c


@pytest.mark.parametrize("budget", [10, 100, 1_000, 10_000])
def test_a_huge_nfa_stops_at_the_same_budget_check(budget, monkeypatch):
    """_NFA.new checks the budget every 1,024 NFA states, before any DFA state exists."""
    python, c = dfa_both_ways(monkeypatch, Alt((Lit(bytes(range(256)) * 200), Ref("x"))), budget)
    assert c == python, (budget, c)


def test_nesting_deeper_than_the_c_builder_is_built_in_python(monkeypatch):
    expr = Lit(b"x")
    for _ in range(700):  # 1,400 levels: past compile_expr's 1,000, within the compile limit
        expr = Seq((Lit(b"a"), Alt((expr, Ref("b")))))
    with recursion_room():
        python, c = dfa_both_ways(monkeypatch, expr)
    assert c == python and c[0] == "ok"


def test_an_unanchored_pattern_counts_its_closure_visits():
    """`(a|b)*a(a|b){12}`: 8,192 states of many NFA states each; the units are the visits'."""
    ab = ByteClass(((97, 98),))
    args = (*nfa_of(Seq((Repeat(ab), Lit(b"a"), Repeat(ab, 12, 12)))), "r")
    python, c = automaton._determinize_in_python(*args), automaton._determinize_in_c(*args)
    assert shape(c) == shape(python) and len(c.trans) == 8192 and c.units > 8192


def grammars():
    sql = sql_grammar_text(read_schema(SQL_DIR / "databases" / "car_dealership.sqlite"), strict=False)
    yield "sql", read_grammar(sql)
    yield "c-like", read_grammar((ROOT / "benchmarks" / "data" / "grammar_c_expr.lark").read_text())
    for name in ("json", "arithmetic"):
        yield name, read_grammar((ROOT / "structgen" / "grammars" / f"{name}.lark").read_text())
    with gzip.open(MASKBENCH, "rt") as f:
        for line in itertools.islice(f, 0, None, 97):  # ~25 schemas from every source
            row = json.loads(line)
            try:
                yield row["name"], translate_schema(row["schema"])[0]
            except StructgenError:  # refused schemas have no grammar to compare
                continue


def test_real_grammars_determinize_alike(monkeypatch):
    """Every rule of the SQL, C-like, JSON and arithmetic grammars and of a MaskBench sample."""
    seen = 0
    for name, grammar in grammars():
        got = []
        for on in ("0", "1"):
            monkeypatch.setenv("STRUCTGEN_DFA_KERNEL", on)
            automaton._RULES.clear()
            automaton._REGULAR_DFAS.clear()
            got.append([shape(r) for r in automaton.build_automaton(grammar).rules])
        assert got[0] == got[1], name
        seen += 1
    assert seen > 20


@pytest.mark.parametrize("budget", [None, 500, 3_000, 4_500, 6_000])
def test_the_budget_and_the_state_limit_stop_it_alike(budget, monkeypatch):
    """A construction stopped by the budget is a BudgetExceededError at the same check, and one
    past the state limit a CompileError, in C as in Python."""
    ab = ByteClass(((97, 98),))
    args = (*nfa_of(Seq((Repeat(ab), Lit(b"a"), Repeat(ab, 11, 11)))), "big")
    for limit in (100_000, 1_000):
        monkeypatch.setattr(automaton, "MAX_DFA_STATES", limit)
        with compile_budget(budget):
            python = outcome(automaton._determinize_in_python, *args)
        with compile_budget(budget):
            c = outcome(automaton._determinize_in_c, *args)
        assert c == python, (budget, limit)


def test_malformed_nfas_are_refused():
    ok = ([[1], []], [[], []], [[], []])
    assert kernel.determinize(*ok, 0, 1, 10, -1)[0] == 0
    bad = [
        ([[5], []], [[], []], [[], []]),  # an epsilon edge past the last state
        ([[], []], [[(frozenset({300}), 1)], []], [[], []]),  # a byte out of range
        ([[], []], [[(frozenset({97}), 9)], []], [[], []]),  # a target out of range
        ([[], []], [[("a", 1)], []], [[], []]),  # bytes not a set
        ([[], []], [[], []], [[(3, 1)], []]),  # a callee not a name
        ([[]], [[], []], [[], []]),  # lists of different lengths
    ]
    for eps, edges, calls in bad:
        with pytest.raises((ValueError, TypeError)):
            kernel.determinize(eps, edges, calls, 0, len(eps) - 1, 10, -1)
    with pytest.raises(ValueError):
        kernel.determinize(*ok, 7, 1, 10, -1)  # start out of range
    types = automaton._IR_TYPES
    assert kernel.compile_expr(Lit(b"ab"), types, 10, 10, -1)[0] == 0
    for expr in (Lit("ab"), ByteClass(((0, 300),)), Ref(5), Seq([Lit(b"a")]),  # wrong field types
                 Fsm((((ByteClass(((97, 97),)), 4),),), frozenset())):  # an Fsm target out of range
        with pytest.raises((ValueError, TypeError)):
            kernel.compile_expr(expr, types, 10, 10, -1)
    with pytest.raises(ValueError):
        kernel.compile_expr(Lit(b"a"), types[:3], 10, 10, -1)


def _rows_both_ways(expr, budget=-1, max_states=automaton.MAX_DFA_STATES):
    """compile_expr's result with dict rows, its rows grouped by the kernel's `grouped`; and
    the same made as rows (as_rows)."""
    types = automaton._IR_TYPES
    dicts = list(kernel.compile_expr(expr, types, automaton.MAX_UNROLL, max_states, budget))
    if dicts[0] == 0:
        dicts[3] = list(kernel.grouped(dicts[3], True))
    rows = list(kernel.compile_expr(expr, types, automaton.MAX_UNROLL, max_states, budget, True))
    if rows[0] == 0:
        assert all(type(r) is tuple for r in rows[3])
    return dicts, rows


@pytest.mark.parametrize("seed", range(100))
def test_rows_made_as_rows_are_the_dicts_grouped(seed):
    expr = random_expr(random.Random(seed))
    dicts, rows = _rows_both_ways(expr)
    assert rows == dicts and rows[0] == 0


def test_a_lexer_union_made_as_rows_is_its_dicts_grouped():
    """The union of every terminal of real grammars (what the Lark lexer makes as rows)."""
    from structgen.frontends.lark import lexer
    unions = []
    real = lexer.shared_rows_of
    try:
        lexer.shared_rows_of = lambda e, *a: unions.append(e) or real(e, *a)
        for name, _ in itertools.islice(grammars(), 4):  # the SQL, C-like, JSON and arithmetic files
            pass
    finally:
        lexer.shared_rows_of = real
    assert len(unions) == 4
    sizes = []
    for expr in unions:
        dicts, rows = _rows_both_ways(expr)
        assert rows == dicts and rows[0] == 0
        sizes.append(len(rows[3]))
    assert sizes[0] > 1000  # the SQL grammar's
    # stopped alike: by the state limit, and by the budget
    for limit, budget, status in ((100, -1, 2), (automaton.MAX_DFA_STATES, 400, 1), (automaton.MAX_DFA_STATES, 50, 5)):
        dicts, rows = _rows_both_ways(unions[0], budget, limit)
        assert rows[:3] == dicts[:3] and rows[0] == status
