"""Drafted decoding is lossless: on the real model, every draft source on or off gives the
tokens of ``speculate=False`` (greedy), and the same distribution (sampling).

Configurations: step by step; forced text and prompt lookup; all three sources with a draft
model (the default model quantized to int8). Forced text alone is a part of both (and of the
batched runs of ``test_batch.py``). Every draft any source
proposes on the way is checked to be legal all the way (``legal_drafts_only``).

Pairs are MaskBench schemas (several sources) with an extraction prompt built from one of their
valid instances. A divergence is only tolerated at a float near-tie: batched and single-position
passes differ by ~1e-5 in logits, so the two top masked logits must then be within 1e-4.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

import structgen
from structgen import IncompleteGenerationError

import maskbench as mb

SOURCES = ("Github_easy", "Github_trivial", "Glaiveai2K", "Kubernetes", "BFCL_simple", "JME",
           "WashingtonPost", "MCPspec")
PAIRS_PER_SOURCE = 3
MAX_NEW_TOKENS = 64
NEAR_TIE = 1e-4


def _pairs():
    out = []
    for case in mb.select(SOURCES, PAIRS_PER_SOURCE, max_chars=150):
        document = "\n".join(mb.document_lines(case.valid[0])) or json.dumps(case.valid[0])
        out.append((case.name, case.schema, f"Extract the data as JSON.\nDocument:\n{document}"))
    return out


# Recursive schemas (issue 5): a tree and an expression AST, no depth limit in the grammar.
RECURSIVE = [
    ("recursive-tree", {
        "$defs": {"node": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12},
            "children": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/node"}}},
            "required": ["name", "children"], "additionalProperties": False}},
        "$ref": "#/$defs/node"},
     "Write the family tree as JSON: Ada has two children, Byron and Anne; Anne has a child, Ralph."),
    ("recursive-ast", {
        "$defs": {"expr": {"oneOf": [
            {"type": "object", "properties": {"num": {"type": "integer"}}, "required": ["num"],
             "additionalProperties": False},
            {"type": "object", "properties": {"op": {"enum": ["+", "-", "*"]}, "left": {"$ref": "#/$defs/expr"},
                                              "right": {"$ref": "#/$defs/expr"}},
             "required": ["op", "left", "right"], "additionalProperties": False}]}},
        "$ref": "#/$defs/expr"},
     "Write the expression (2 + 3) * (4 - 1) as a JSON syntax tree."),
]
PAIRS = (_pairs() if mb.available() else []) + RECURSIVE


#: name -> (uses the draft generator, speculate)
CONFIGS = {"lookup": (False, ("forced", "lookup")), "all": (True, True)}


def _run(gen, schema, prompt, speculate):
    try:
        r = gen.json(schema, prompt, speculate=speculate, max_new_tokens=MAX_NEW_TOKENS,
                     include_schema=False)  # real schemas are long: keep the prefill short
        return r.token_ids, r.stats, True
    except IncompleteGenerationError as err:
        return err.token_ids, err.stats, False


def _gap_at(gen, schema, prompt, prefix, a, b):
    """|logit(a) - logit(b)| at the position after ``prefix``, one full pass without cache."""
    ids = gen.prompt_ids(schema, prompt, include_schema=False) + prefix
    with torch.no_grad():
        logits = gen.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    return abs(float(logits[a] - logits[b]))


@pytest.fixture(scope="module")
def outcomes(generator, draft_generator, legal_drafts_only):
    results = {}
    for name, schema, prompt in PAIRS:
        runs = {"step": _run(generator, schema, prompt, False)}
        for config, (drafting, speculate) in CONFIGS.items():
            runs[config] = _run(draft_generator if drafting else generator, schema, prompt, speculate)
        results[name] = runs
    assert legal_drafts_only["drafts"] > 0
    return results


def test_enough_pairs_from_enough_sources():
    assert len(PAIRS) >= 24
    assert len({mb.source_of(name) for name, _, _ in PAIRS if not name.startswith("recursive")}) >= 5


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name,schema,prompt", PAIRS, ids=[p[0] for p in PAIRS])
def test_drafted_greedy_equals_step_by_step(outcomes, generator, name, schema, prompt, config):
    (step, step_stats, step_done), (spec, spec_stats, spec_done) = outcomes[name]["step"], outcomes[name][config]
    if step != spec:
        k = next(i for i in range(min(len(step), len(spec))) if step[i] != spec[i])
        gap = _gap_at(generator, schema, prompt, step[:k], step[k], spec[k])
        assert gap < NEAR_TIE, f"diverged at token {k} with a logit gap of {gap:.2e}"
        return
    assert step_done == spec_done
    assert spec_stats.forward_passes <= step_stats.forward_passes
    if step_done:
        value = json.loads(b"".join(generator.vocabulary.tokens[t] for t in spec))
        assert structgen.tasks.json_task.validation_error(schema, value) is None


@pytest.mark.parametrize("config,sources", [("lookup", {"forced", "lookup"}), ("all", {"forced", "lookup", "model"})])
def test_drafting_pays_and_is_sometimes_refused(outcomes, config, sources):
    spec = [runs[config][1] for runs in outcomes.values()]
    drafted = [s for s in spec if s.drafted_tokens]
    assert sum(s.drafted_tokens for s in spec) > 0
    assert sum(s.rejected_drafts for s in spec) > 0
    assert sum(s.forward_passes for s in drafted) < sum(s.new_tokens for s in drafted)
    assert all(s.accepted_tokens <= s.drafted_tokens for s in spec)
    used = {label for s in spec for label, counts in s.by_source.items() if counts.accepted_tokens}
    assert used == sources, used  # each source drafted, and some of its tokens were kept


def test_sampling_with_drafts_keeps_the_distribution(generator):
    """Multi-token enum values: the first token is the model's choice, the rest is forced and
    drafted, so the point-mass rule decides; drafted and undrafted value frequencies agree."""
    schema = {"enum": ["Ada Lovelace", "Charles Babbage", "Alan Turing", "Grace Hopper"]}
    prompt = "Name one computing pioneer."
    n = 40
    counts = {}
    for speculate in (False, True):
        c = Counter()
        drafted = 0
        for i in range(n):
            r = generator.json(schema, prompt, temperature=1.5, seed=1000 + i, speculate=speculate,
                               max_new_tokens=16)
            c[r.value] += 1
            drafted += r.stats.drafted_tokens
        counts[speculate] = c
        if speculate:
            assert drafted > 0
    values = sorted(set(counts[False]) | set(counts[True]))
    table = torch.tensor([[counts[s][v] for v in values] for s in (False, True)], dtype=torch.float64)
    expected = table.sum(1, keepdim=True) * table.sum(0, keepdim=True) / table.sum()
    chi2 = float(((table - expected) ** 2 / expected).sum())
    dof = len(values) - 1
    p = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                      torch.tensor(chi2 / 2, dtype=torch.float64))) if dof else 1.0
    assert p > 1e-3, (counts, chi2, p)
