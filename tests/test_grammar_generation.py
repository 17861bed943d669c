"""Generation under grammar files and regexes on the real default model.

Drafted greedy decoding must produce the same tokens as step-by-step decoding (the forced text
of a grammar, keywords and punctuation, is drafted exactly as for JSON), and what comes out is
in the language: Lark parses it, ``re.fullmatch`` matches it.
"""

from __future__ import annotations

import re
from pathlib import Path

import lark
import pytest
import torch

import structgen
from structgen import IncompleteGenerationError

GRAMMARS = Path(__file__).resolve().parent.parent / "structgen" / "grammars"
NEAR_TIE = 1e-4  # as in tests/test_decoding.py: a logit gap this small may flip under batching

SQL = r'''
start: "SELECT " cols " FROM " TABLE (" WHERE " cond)? ";"
cols: COLUMN (", " COLUMN)*
cond: COLUMN " = " (NUMBER | STRING)
TABLE: "people" | "cities"
COLUMN: "name" | "age" | "city"
NUMBER: /[0-9]{1,3}/
STRING: /'[A-Za-z ]{1,20}'/
'''

CASES = [
    ("sql", SQL, "Write an SQL query for the names of people aged 36."),
    ("arithmetic", GRAMMARS / "arithmetic.lark", "Write an arithmetic expression that adds 2 and 3."),
    ("json", GRAMMARS / "json.lark", "Give a JSON object with a name and an age for Ada."),
    ("list", 'start: "- " ITEM ("\\n- " ITEM)~2\nITEM: /[A-Za-z][a-z ]{0,15}/',
     "List three fruits."),
]


def _gap(gen, prompt, prefix, a, b):
    ids = gen.chat_ids(prompt) + prefix
    with torch.no_grad():
        logits = gen.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    return abs(float(logits[a] - logits[b]))


def _lark_text(grammar) -> str:
    return grammar.read_text() if isinstance(grammar, Path) else grammar


@pytest.mark.parametrize("name,grammar,prompt", CASES, ids=[c[0] for c in CASES])
def test_drafted_equals_step_by_step_and_output_parses(generator, name, grammar, prompt):
    outs = {}
    for speculate in (False, True):
        try:
            r = generator.grammar(grammar, prompt, max_new_tokens=48, speculate=speculate)
            outs[speculate] = (r.token_ids, r.stats, True, r.text)
        except IncompleteGenerationError as err:
            outs[speculate] = (err.token_ids, err.stats, False, err.partial_text)
    (step, step_stats, step_done, _), (spec, spec_stats, spec_done, text) = outs[False], outs[True]
    if step != spec:
        k = next(i for i in range(min(len(step), len(spec))) if step[i] != spec[i])
        assert _gap(generator, prompt, step[:k], step[k], spec[k]) < NEAR_TIE, f"diverged at token {k}"
        return
    assert step_done == spec_done
    assert spec_stats.forward_passes <= step_stats.forward_passes
    if spec_done:
        lark.Lark(_lark_text(grammar), parser="earley", lexer="basic").parse(text)


def test_forced_text_is_drafted(generator):
    r = generator.grammar(SQL, "Write an SQL query for the names of people aged 36.", max_new_tokens=48)
    assert r.text.startswith("SELECT ") and r.text.endswith(";")
    assert r.stats.drafted_tokens > 0 and r.stats.accepted_tokens > 0
    assert r.stats.forward_passes < r.stats.new_tokens


def test_regex_generation(generator):
    for speculate in (False, True):
        r = generator.regex(r"\(\d{3}\) \d{3}-\d{4}", "Make up a US phone number.", speculate=speculate)
        assert re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", r.text)
        assert r.finish_reason in ("eos", "grammar")


def test_budget_keeps_the_partial_text(generator):
    with pytest.raises(IncompleteGenerationError) as info:
        generator.grammar(GRAMMARS / "json.lark", "Give a long JSON list of numbers.", max_new_tokens=3,
                          budget="raise")
    assert info.value.partial_text and len(info.value.token_ids) == 3


def test_grammar_errors_come_before_decoding(generator):
    with pytest.raises(structgen.GrammarError, match="undefined rule 'b'"):
        generator.grammar("start: b", "anything")
    with pytest.raises(structgen.GrammarError, match="lookahead"):
        generator.regex("a(?=b)", "anything")
