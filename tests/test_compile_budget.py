"""The compile budget: work counted in automaton states, deterministic, naming the schema path."""

from __future__ import annotations

import pytest

import structgen
from structgen.core.budget import BudgetExceededError, DEFAULT_COMPILE_BUDGET
from structgen.engine.vocab import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")

# An unanchored pattern whose DFA must remember the last 11 characters: about 2**11 states.
BLOWUP = {"type": "object", "properties": {
    "name": {"type": "string"},
    "code": {"type": "string", "pattern": "x(a|b)*a(a|b){10}"},
}}


def test_exceeding_the_budget_names_the_schema_path_and_is_deterministic():
    messages = []
    for _ in range(2):
        with pytest.raises(BudgetExceededError) as info:
            structgen.Compiler(BYTES, disk_cache=False, budget=2_000).json_schema(BLOWUP)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "/properties/code" in messages[0] and "of 2000" in messages[0]
    assert isinstance(info.value, structgen.CompileError)


def test_the_default_budget_compiles_it_and_none_means_no_limit():
    assert DEFAULT_COMPILE_BUDGET >= 100_000
    for budget in (DEFAULT_COMPILE_BUDGET, None):
        m = structgen.Compiler(BYTES, disk_cache=False, budget=budget).json_schema(BLOWUP).matcher()
        assert all(m.advance(b) for b in b'{"code": "xa' + b"b" * 10 + b'"}') and m.can_end()


def test_a_compiler_recovers_after_running_out():
    compiler = structgen.Compiler(BYTES, disk_cache=False, budget=2_000)
    with pytest.raises(BudgetExceededError):
        compiler.json_schema(BLOWUP)
    assert compiler.json_schema({"type": "integer"}).matcher().advance(ord("7"))  # a fresh budget


def test_lexer_automata_are_explored_under_the_budget():
    """The Lark lexer's token and ignored-text automata are explored by the one explorer
    (structgen.core.dfa.explore), which charges the compile budget: a product that grows
    stops with BudgetExceededError instead of escaping the budget."""
    from structgen.core.budget import compile_budget
    from structgen.core.ir import ByteClass, Grammar, Lit, Ref, Repeat, seq
    from structgen.frontends.lark.lexer import apply_lexer

    # "...a" or "...b" then 8 more of [ab]: small rule DFAs, a token-by-union product of ~1,500 states
    terminals = {f"T{i}": seq(Repeat(ByteClass.of("ab"), 0, None), Lit(c), Repeat(ByteClass.of("ab"), 8, 8))
                 for i, c in enumerate([b"a", b"b"])}
    grammar = Grammar.of("s", s=seq(Ref("T0"), Ref("T1")), **terminals)
    apply_lexer(grammar, terminals, [Repeat(Lit(b" "), 1, None)])  # no budget: it completes
    with compile_budget(5_000), pytest.raises(BudgetExceededError):
        apply_lexer(grammar, terminals, [Repeat(Lit(b" "), 1, None)])
