"""Batched decoding: many rows, each with its own grammar, one forward pass per step.

On the real model: each row of a batch (mixed schemas and lengths, drafts on) has the tokens of
that row decoded alone, step by step (a divergence only at a float near-tie: batched and
single passes differ by ~1e-5 in logits, so the two top logits must then be within 1e-4).
Rows that end early, rows that run out of budget, a row whose schema is invalid and a row whose
grammar allows only tokens the model does not want each get their own result or error; the
others complete. Drafts step aside as the batch fills and come back as it thins.
"""

from __future__ import annotations

import json

import pytest
import torch

import structgen
from structgen import BudgetTooSmallError, IncompleteGenerationError, OptionError, SchemaError
from structgen.decoding.backend import TransformersBackend
from structgen.decoding.costs import SIZES, PassCosts

import maskbench as mb

NEAR_TIE = 1e-4
MAX_NEW_TOKENS = 48
SOURCES = ("Github_easy", "Glaiveai2K", "Kubernetes", "BFCL_simple", "JME", "WashingtonPost")


def _pairs():
    out = []
    for case in mb.select(SOURCES, 2, max_chars=150) if mb.available() else []:
        document = "\n".join(mb.document_lines(case.valid[0])) or json.dumps(case.valid[0])
        out.append((case.name, case.schema, f"Extract the data as JSON.\nDocument:\n{document}"))
    return out


SPECIAL = [
    ("short-enum", {"enum": ["red", "green", "blue"]}, "Colour of grass?"),
    ("over-budget", {"type": "array", "items": {"type": "integer"}, "minItems": 40}, "List numbers."),
    ("unwanted-only", {"type": "string", "pattern": "^[~^|]{4}$"}, "Say hello."),
    ("invalid-schema", {"type": "strin"}, "Anything."),
    ("person", {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"]}, "Extract: Ada Lovelace is 36 years old."),
]
ROWS = _pairs() + SPECIAL


def _alone(gen, schema, prompt):
    """(token ids, outcome) of one row decoded alone, step by step."""
    try:
        r = gen.json(schema, prompt, speculate=False, max_new_tokens=MAX_NEW_TOKENS, include_schema=False)
        return r.token_ids, r
    except IncompleteGenerationError as err:
        return err.token_ids, err
    except (SchemaError, BudgetTooSmallError) as err:
        return None, err


def _tokens(outcome):
    if isinstance(outcome, IncompleteGenerationError):
        return outcome.token_ids
    return None if isinstance(outcome, Exception) else outcome.token_ids


def _gap_at(gen, schema, prompt, prefix, a, b):
    """|logit(a) - logit(b)| at the position after ``prefix``, one full pass without cache."""
    ids = gen.prompt_ids(schema, prompt, include_schema=False) + prefix
    with torch.no_grad():
        logits = gen.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    return abs(float(logits[a] - logits[b]))


def _steep(smollm2_model):
    """A generator whose surface makes any wider pass cost its width from 8 rows on."""
    model, tokenizer = smollm2_model
    steep = {rows: {s: float(s) for s in SIZES} for rows in (8, 16, 32, 64)}
    return structgen.Generator(model, tokenizer, pass_costs=PassCosts(by_rows=steep))


@pytest.fixture(scope="module")
def runs(generator, smollm2_model):
    schemas, prompts = [r[1] for r in ROWS], [r[2] for r in ROWS]
    options = {"max_new_tokens": MAX_NEW_TOKENS, "include_schema": False}
    return {
        "alone": [_alone(generator, schema, prompt) for _, schema, prompt in ROWS],
        "batch": generator.json(schemas, prompts, **options),
        "batch-step": generator.json(schemas, prompts, speculate=False, **options),
        "steep": _steep(smollm2_model).json(schemas, prompts, **options),
    }


def test_enough_rows():
    assert len(ROWS) >= 14


@pytest.mark.parametrize("config", ["batch", "batch-step", "steep"])
@pytest.mark.parametrize("i", range(len(ROWS)), ids=[r[0] for r in ROWS])
def test_each_row_equals_that_row_decoded_alone(runs, generator, config, i):
    name, schema, prompt = ROWS[i]
    alone_tokens, alone = runs["alone"][i]
    row = runs[config][i]
    assert type(row) is type(alone), (row, alone)
    if alone_tokens is None:
        return
    tokens = _tokens(row)
    if tokens != alone_tokens:
        k = next((j for j in range(min(len(tokens), len(alone_tokens))) if tokens[j] != alone_tokens[j]), None)
        assert k is not None, "one is a prefix of the other"
        gap = _gap_at(generator, schema, prompt, alone_tokens[:k], alone_tokens[k], tokens[k])
        assert gap < NEAR_TIE, f"diverged at token {k} with a logit gap of {gap:.2e}"


def test_every_row_gets_its_own_result_or_error(runs):
    by_name = dict(zip([r[0] for r in ROWS], runs["batch"]))
    # 40 integers need more than the budget: refused before decoding, the other rows go on
    assert isinstance(by_name["over-budget"], BudgetTooSmallError)
    assert by_name["over-budget"].needed > MAX_NEW_TOKENS == by_name["over-budget"].max_new_tokens
    assert isinstance(by_name["invalid-schema"], SchemaError)
    assert isinstance(by_name["unwanted-only"], structgen.JsonResult)
    assert len(by_name["unwanted-only"].value) == 4 and set(by_name["unwanted-only"].value) <= set("~^|")
    assert by_name["short-enum"].value in {"red", "green", "blue"}
    done = [r for r in runs["batch"] if isinstance(r, structgen.JsonResult)]
    assert len(done) >= len(ROWS) // 2  # the others ran out of budget alone too (see the identity test)
    for (name, schema, _), r in zip(ROWS, runs["batch"]):
        if isinstance(r, structgen.JsonResult):
            assert structgen.tasks.json_task.validation_error(schema, r.value) is None, name


def test_rows_leave_the_batch_as_they_end(runs):
    results = [r for r in runs["batch-step"] if isinstance(r, structgen.JsonResult)]
    first = [r.stats.steps[0].rows for r in results if r.stats.steps]
    assert max(first) == len(ROWS) - 2  # the invalid schema and the budget too small never joined
    short = min(results, key=lambda r: len(r.stats.steps))
    long = max(results, key=lambda r: len(r.stats.steps))
    assert long.stats.steps[-1].rows < long.stats.steps[0].rows  # the batch thinned around it
    assert len(short.stats.steps) < len(long.stats.steps)
    assert all(s.drafted == 0 and s.width == 1 for r in results for s in r.stats.steps)


def test_drafts_step_aside_as_the_batch_fills_and_come_back_as_it_thins(runs):
    steps = [s for r in runs["steep"] if hasattr(r, "stats") and r.stats is not None for s in r.stats.steps]
    full = [s for s in steps if s.rows >= 8]
    thin = [s for s in steps if s.rows <= 6]  # where this surface still lets a 4-token draft pay
    assert full and thin
    assert all(s.width == 1 and s.drafted == 0 for s in full)
    assert any(s.drafted > 0 for s in thin)
    batch = [s for r in runs["batch"] if isinstance(r, structgen.JsonResult) for s in r.stats.steps]
    assert sum(s.drafted for s in batch) > 0 and sum(s.accepted for s in batch) > 0


def test_lists_for_every_task(generator, tmp_path):
    import sqlite3

    assert generator.json({"type": "integer"}, []) == []
    with pytest.raises(OptionError, match="one length"):
        generator.json([{"type": "integer"}] * 2, ["a", "b", "c"])
    texts = generator.regex([r"(yes|no)", r"[0-9]{3}", "(("], "Answer.", max_new_tokens=8)
    assert texts[0].text in {"yes", "no"} and len(texts[1].text) == 3
    assert isinstance(texts[2], structgen.GrammarError)
    grammar = generator.grammar('start: /[a-z]{1,8}/', ["Name a fruit.", "Name a colour."], max_new_tokens=8)
    assert all(isinstance(r, structgen.TextResult) for r in grammar)
    db = tmp_path / "pets.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE pet (name TEXT, age INTEGER)")
    queries = generator.sql(["How many pets are there?", "List the names of the pets."], db, max_new_tokens=32,
                            max_retries=1)
    assert all(isinstance(q, structgen.SqlResult) and "pet" in q.sql for q in queries)
    add = {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
    conversations = [[{"role": "user", "content": "What is 2 plus 3?"}], [{"role": "user", "content": "Add 7 and 8."}]]
    calls = generator.tool_calls([add], conversations, tool_choice="required", max_new_tokens=48)
    alone = generator.tool_calls([add], conversations[1], tool_choice="required", max_new_tokens=48,
                                 speculate=False)
    assert all(c.message["tool_calls"][0]["function"]["name"] == "add" for c in calls)
    assert calls[1].token_ids == alone.token_ids


def test_the_backend_keeps_each_rows_cache_as_a_fresh_pass_would(generator):
    """Rows fed different lengths, rolled back by different counts, one released, holes
    compacted: each row's logits are those of one full pass over that row's kept tokens."""
    model = generator.model
    prompts = [generator.chat_ids(t) for t in ("Hello", "Tell me about the history of computing, briefly.", "x")]
    kept = [list(p) for p in prompts]
    backend = TransformersBackend(model)
    with torch.no_grad():
        backend.prefill(prompts)
        for step in range(12):
            feeds = [[100 + step + k for k in range(1 + (r + step) % 4)] if r != 1 or step < 6 else []
                     for r in range(3)]
            if step == 6:
                backend.release([1])
            outs = backend.extend(feeds)
            for r, feed in enumerate(feeds):
                if not feed:
                    assert outs[r].shape[0] == 0
                    continue
                fresh = model(input_ids=torch.tensor([kept[r] + feed])).logits[0, -len(feed):]
                assert torch.allclose(outs[r], fresh, atol=1e-3), (step, r)
            drop = [(step + r) % len(feed) if feed else 0 for r, feed in enumerate(feeds)]
            backend.rollback(drop)
            for r, feed in enumerate(feeds):
                kept[r] += feed[:len(feed) - drop[r]]
        assert backend.slots < 2 * max(len(kept[0]), len(kept[2]))  # holes were compacted
        with pytest.raises(OptionError, match="released"):
            backend.extend([[1], [2], [3]])
