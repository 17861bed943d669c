"""Drafted decoding is lossless on tool calls and SQL too: 10 BFCL cases and 6 text-to-SQL
questions on the default model, greedy, give step-by-step decoding's tokens with forced text
and prompt lookup, and with a draft model as well (a divergence only at a float near-tie).
Every draft proposed on the way is checked legal (``legal_drafts_only``)."""

from __future__ import annotations

from itertools import islice

import pytest
import torch

import structgen
from structgen.errors import IncompleteGenerationError, SqlGenerationError

from sql_data import pairs as sql_pairs
from toolcall_data import cases

NEAR_TIE = 1e-4
CONFIGS = {"lookup": (False, ("forced", "lookup")), "all": (True, True)}
BFCL = [c for category, n in (("simple_python", 4), ("multiple", 3), ("live_simple", 3))
        for c in islice(cases(category), n)]
#: Two databases (a new database's SQL grammar is slow to warm up, issue 26), three questions each.
SQL = [p for db in ("restaurants", "geography") for p in [q for q in sql_pairs("defog") if q.database.stem == db][:3]]


def _tools(gen, case, speculate):
    try:
        r = gen.tool_calls(case["tools"], case["messages"], tool_choice="required", max_new_tokens=64,
                           speculate=speculate)
        return r.token_ids, r.stats
    except IncompleteGenerationError as err:
        return err.token_ids, err.stats


def _sql(gen, pair, speculate):
    try:
        r = gen.sql(pair.question, pair.database, max_retries=0, max_new_tokens=64, speculate=speculate)
        return r.token_ids, r.stats
    except SqlGenerationError as err:  # refused by EXPLAIN: compare the query written
        return err.attempts[0].sql, None
    except IncompleteGenerationError as err:
        return err.token_ids, err.stats


def _outcomes(run, items, generator, draft_generator):
    out = []
    for item in items:
        runs = {"step": run(generator, item, False)}
        for name, (drafting, speculate) in CONFIGS.items():
            runs[name] = run(draft_generator if drafting else generator, item, speculate)
        out.append(runs)
    return out


@pytest.fixture(scope="module")
def bfcl(generator, draft_generator, legal_drafts_only):
    return _outcomes(_tools, BFCL, generator, draft_generator)


@pytest.fixture(scope="module")
def sql(generator, draft_generator, legal_drafts_only):
    return _outcomes(_sql, SQL, generator, draft_generator)


def test_enough_cases():
    assert len(BFCL) == 10 and len(SQL) == 6 and len({p.database for p in SQL}) == 2


def _first_gap(gen, prompt_ids, step, spec):
    """The logit gap between the two choices at the first difference (one full pass)."""
    k = next(i for i in range(min(len(step), len(spec))) if step[i] != spec[i])
    with torch.no_grad():
        logits = gen.model(input_ids=torch.tensor([list(prompt_ids) + list(step[:k])])).logits[0, -1].double()
    return abs(float(logits[step[k]] - logits[spec[k]]))


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("i", range(len(BFCL)), ids=[c["id"] for c in BFCL])
def test_bfcl_drafted_equals_step_by_step(bfcl, generator, i, config):
    (step, step_stats), (spec, spec_stats) = bfcl[i]["step"], bfcl[i][config]
    if step != spec:
        from structgen.tasks.tool_calls import read_tools, tool_prompt
        prompt, _, _ = tool_prompt(generator.tokenizer, read_tools(BFCL[i]["tools"]), BFCL[i]["messages"], None)
        gap = _first_gap(generator, generator.context.encode(prompt), step, spec)
        assert gap < NEAR_TIE, f"diverged with a logit gap of {gap:.2e}"
        return
    assert spec_stats.forward_passes <= step_stats.forward_passes


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("i", range(len(SQL)), ids=[p.id for p in SQL])
def test_sql_drafted_equals_step_by_step(sql, i, config):
    assert sql[i]["step"][0] == sql[i][config][0]


def test_tool_calls_draft_from_every_source(bfcl):
    for config, sources in (("lookup", {"forced", "lookup"}), ("all", {"forced", "lookup", "model"})):
        used = {label for runs in bfcl for label, c in runs[config][1].by_source.items() if c.accepted_tokens}
        assert used == sources, (config, used)
    passes = sum(r["lookup"][1].forward_passes for r in bfcl)
    assert passes < sum(r["step"][1].forward_passes for r in bfcl)


def test_a_draft_model_needs_the_same_vocabulary(smollm2_model):
    model, tokenizer = smollm2_model

    class Other(torch.nn.Module):
        config = type("C", (), {"vocab_size": 1000})()

        def get_output_embeddings(self):
            return None

    with pytest.raises(structgen.OptionError, match="vocabulary of 1000"):
        structgen.Generator(model, tokenizer, draft_model=Other())
    with pytest.raises(structgen.OptionError, match="no draft_model"):
        structgen.Generator(model, tokenizer).json({"type": "string"}, "x", speculate=("model",))
