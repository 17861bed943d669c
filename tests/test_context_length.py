"""A prompt that cannot fit the model's context with its token budget is refused before any
forward pass (issue 25: 500 tools made a 33k-token prompt for an 8k model, and decoding ran for
minutes before failing)."""

from __future__ import annotations

import pytest

import structgen


def _tools(n: int) -> list[dict]:
    return [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Look up record number {i} in the archive of the city library.",
        "parameters": {"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
                       "required": ["id"]}}} for i in range(n)]


def test_500_tools_are_refused_before_decoding(generator):
    with pytest.raises(structgen.ContextLengthError, match="over the model's context of 8192") as info:
        generator.tool_calls(_tools(500), [{"role": "user", "content": "Find record 7."}])
    assert isinstance(info.value, ValueError)
    assert "max_new_tokens" in str(info.value) and "shorten the prompt" in str(info.value)


def test_budget_past_the_context_is_refused_and_one_that_fits_runs(generator):
    with pytest.raises(structgen.ContextLengthError, match="max_new_tokens is 9000"):
        generator.json({"type": "integer"}, "A number:", max_new_tokens=9000)
    assert isinstance(generator.json({"type": "boolean"}, "Is water wet?", max_new_tokens=8).value, bool)
