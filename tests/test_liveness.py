"""Which rules match anything, and which states stay live: the one-pass search in
:func:`structgen.core.liveness.liveness` against the definition (re-check every rule until
nothing changes), on random rule automata and on the rule automata of real grammars."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

import structgen
from structgen.core import grammar_facts
from structgen.core.dfa_kernel import kernel_available
from structgen.core.liveness import _liveness_in_c, _liveness_in_python, live_states, liveness, solo_live_states
from sql_data import SQL_DIR


def by_rounds(rules):
    """The definition: a rule matches when its start state reaches acceptance through bytes and
    calls of rules known to match; repeat until no rule changes."""
    alive = [False] * len(rules)
    changed = True
    while changed:
        changed = False
        for i, r in enumerate(rules):
            if alive[i]:
                continue
            ok = r.counted and r.min == 0
            u = getattr(r, "unordered", None)
            if not ok and u is not None:
                can = {u.slots.slots[k] for callee, ks in u.item_of.items() if alive[callee] for k in ks}
                if any(u.slots.required >> s & 1 and s not in can for s in range(u.slots.n)):
                    continue
            if ok or live_states(r, alive)[0]:
                alive[i] = changed = True
    return alive, [live_states(r, alive) for r in rules]


def random_rules(rng: random.Random, n: int):
    rules = []
    for _ in range(n):
        states = rng.randint(1, 6)
        trans = [{b: rng.randrange(states) for b in rng.sample(range(4), rng.randint(0, 2))}
                 for _ in range(states)]
        calls = [tuple((rng.randrange(n), rng.randrange(states)) for _ in range(rng.randint(0, 2)))
                 for _ in range(states)]
        accept = [rng.random() < 0.25 for _ in range(states)]
        counted = rng.random() < 0.1
        rules.append(SimpleNamespace(trans=trans, calls=calls, accept=accept, counted=counted,
                                     min=rng.randint(0, 1)))
    return rules


def both_paths(rules, solo=None):
    """The result of the Python search and, where it is built, the kernel's (checked equal)."""
    python = _liveness_in_python(rules, solo)
    if kernel_available():
        alive, live = _liveness_in_c(rules, solo)
        assert (alive, [list(x) for x in live]) == (python[0], [list(x) for x in python[1]])
    return python


@pytest.mark.parametrize("seed", range(300))
def test_random_rule_automata_agree_with_the_definition(seed):
    rng = random.Random(seed)
    rules = random_rules(rng, rng.randint(1, 12))
    assert liveness(rules) == by_rounds(rules)
    assert both_paths(rules) == by_rounds(rules)
    solo = [tuple(live_states(r, ())) if not any(r.calls) else None for r in rules]
    alive, live = both_paths(rules, solo)
    assert (alive, [list(x) for x in live]) == by_rounds(rules)


@pytest.mark.parametrize("seed", range(100))
def test_live_states_of_a_rule_that_calls_nothing_agree(seed):
    """solo_live_states (the kernel where built) against live_states, dead states included."""
    rng = random.Random(seed)
    for r in random_rules(rng, 5):
        r.calls = [()] * len(r.trans)
        assert list(solo_live_states(r)) == live_states(r, ())


def test_some_random_rules_match_nothing():
    """The random cases exercise both outcomes (a test that only saw productive rules would
    pass with an answer of "everything matches")."""
    outcomes = set()
    for seed in range(300):
        rng = random.Random(seed)
        outcomes.update(liveness(random_rules(rng, rng.randint(1, 12)))[0])
    assert outcomes == {True, False}


SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x+$", "maxLength": 3},
                                      "b": {"anyOf": [{"type": "string", "pattern": "[]"},
                                                      {"type": "integer", "minimum": 3}]}},
     "required": ["a"]},
    {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"},
                                                          "v": {"type": "integer"}},
                        "required": ["v"]}},
     "$ref": "#/$defs/node"},
    {"type": "array", "items": {"oneOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#"}}]},
     "minItems": 1, "maxItems": 4},
    {"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
     "properties": {"k": {"enum": ["a", "b"]}}, "minProperties": 2, "maxProperties": 3},
]


@pytest.fixture
def seen_rules(monkeypatch):
    """The rule automata each compile hands to :func:`liveness` (before pruning); each compile's
    result with the live states it knew (rules that call nothing) is checked against a search
    from scratch, so a wrong cached vector fails here."""
    seen = []

    def spy(rules, solo=None):
        got = liveness(rules, solo)
        both_paths(rules, solo)
        assert solo is not None and any(x is not None for x in solo)
        alive, live = got
        assert (alive, [list(x) for x in live]) == liveness(rules)
        seen.append(list(rules))
        return got

    monkeypatch.setattr(grammar_facts, "liveness", spy)
    return seen


@pytest.mark.parametrize("canonical", [False, True])
def test_real_grammars_agree_with_the_definition(smollm2_tokenizer, seen_rules, canonical):
    """Schemas with unordered objects (``canonical=False``), recursion, counted arrays, branches
    that match nothing; and the SQL grammar of a real database."""
    compiler = structgen.Compiler(smollm2_tokenizer, disk_cache=False)
    for schema in SCHEMAS:
        compiler.json_schema(schema, canonical=canonical)
    assert len(seen_rules) == len(SCHEMAS)
    assert any(getattr(r, "unordered", None) is not None for rules in seen_rules for r in rules) != canonical
    assert any(not ok for rules in seen_rules for ok in liveness(rules)[0])  # a pruned branch
    for rules in seen_rules:
        assert liveness(rules) == by_rounds(rules)


def test_sql_grammar_agrees_with_the_definition(smollm2_tokenizer, seen_rules):
    structgen.compile_sql(SQL_DIR / "databases" / "car_dealership.sqlite", smollm2_tokenizer)
    assert seen_rules
    for rules in seen_rules:
        assert liveness(rules) == by_rounds(rules)


def test_a_grammar_that_matches_nothing_is_still_refused(smollm2_tokenizer):
    with pytest.raises(structgen.SchemaError, match="no JSON value"):
        structgen.Compiler(smollm2_tokenizer, disk_cache=False).json_schema(
            {"type": "array", "items": {"$ref": "#"}, "minItems": 1})
