"""Drafts on a sliding-window model: Gemma 3 270M (from its GGUF package; window 512) decodes
with drafts, token-identical to its step-by-step decoding, on a prompt longer than its window,
so refused drafts are rolled back past positions the window had evicted."""

from __future__ import annotations

import pytest

import structgen
from structgen.decoding.costs import PassCosts

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"},
                                           "age": {"type": "integer"},
                                           "bins": {"type": "array", "items": {"type": "integer"}, "maxItems": 4}},
          "required": ["name", "city", "age", "bins"], "additionalProperties": False}
INVENTORY = "\n".join(f"item{i}: part number {i} of the inventory, kept in bin {i * 7}" for i in range(40))
PROMPT = (f"{INVENTORY}\n\nname: Ada Lovelace\ncity: London\nage: 36\n\n"
          "Give the person's name, city and age, and the bins of items 1 to 4, as JSON: ")


@pytest.fixture(scope="module")
def gemma():
    import torch

    from structgen.decoding.models import GEMMA_NAME, gemma_gguf_path, load_gemma_tokenizer, load_model_from_gguf

    torch.set_flush_denormal(True)
    model = load_model_from_gguf(gemma_gguf_path(), GEMMA_NAME)
    return structgen.Generator(model, load_gemma_tokenizer(), pass_costs=PassCosts())


@pytest.mark.slow
def test_drafted_gemma_equals_step_by_step(gemma):
    assert gemma.model.config.sliding_window < len(gemma.context.encode(PROMPT)) < 2000
    runs = {}
    for speculate in (False, True):
        try:
            r = gemma.json(SCHEMA, PROMPT, raw=True, max_new_tokens=48, speculate=speculate)
            runs[speculate] = (r.token_ids, r.stats)
        except structgen.IncompleteGenerationError as err:
            runs[speculate] = (err.token_ids, err.stats)
    (step, step_stats), (drafted, stats) = runs[False], runs[True]
    assert drafted == step
    assert stats.speculation == "on" and stats.drafted_tokens > 0
    assert stats.rejected_drafts > 0  # some draft was refused: the window's rollback was used
    assert stats.forward_passes < step_stats.forward_passes


@pytest.mark.slow
@pytest.mark.parametrize("budget", [0, 16, 64])
def test_gemma_reasons_within_its_budget_drafted_as_stepped(gemma, budget):
    """Gemma 3's template has no thinking markers: explicit ones, each budget, the answer valid."""
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    runs = [gemma.json(schema, "What is 17 + 25? Think first.", reasoning=("<think>", "</think>"),
                       thinking_budget=budget, max_new_tokens=96, speculate=speculate) for speculate in (True, False)]
    drafted, stepped = runs
    assert (drafted.token_ids, drafted.reasoning) == (stepped.token_ids, stepped.reasoning)
    assert set(drafted.value) == {"answer"} and drafted.reasoning_tokens <= budget
    assert "</think>" not in drafted.reasoning + drafted.text
