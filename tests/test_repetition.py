"""Repetition controls inside the decoding loop (``repetition_penalty``,
``no_repeat_ngram_size``, ``logits_processors``) on the real default model: drafted output
equals step-by-step output under them, they change what they should, and
``structgen.drafted_generate`` under them equals plain ``model.generate``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LogitsProcessor as HFLogitsProcessor

import structgen
from structgen.decoding.config import DecodeConfig

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}
COLOUR = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}, "sure": {"type": "boolean"}},
          "required": ["colour", "sure"], "additionalProperties": False}
# both draft (forced keys and punctuation, the name copied from the prompt)
CASES = [(PERSON, "Extract the person: Ada Lovelace, 36, mathematician."),
         (COLOUR, "What colour is grass? Are you sure?")]


class LastTokenPenalty(HFLogitsProcessor):
    """A processor of the user's own that depends on the prefix: it lowers the last token's logit,
    so a drafted position given the wrong prefix would see other scores."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.clone()
        scores[0, input_ids[0, -1]] -= 5.0
        return scores


@pytest.mark.parametrize("options", [{"repetition_penalty": 1.3}, {"no_repeat_ngram_size": 3},
                                     {"logits_processors": [LastTokenPenalty()]}],
                         ids=["repetition_penalty", "no_repeat_ngram_size", "logits_processors"])
def test_drafted_output_equals_step_by_step_under_processors(generator, options):
    for schema, prompt in CASES:
        drafted = generator.json(schema, prompt, max_new_tokens=40, speculate=True, **options)
        step_by_step = generator.json(schema, prompt, max_new_tokens=40, speculate=False, **options)
        assert drafted.stats.drafted_tokens > 0
        assert drafted.token_ids == step_by_step.token_ids, (drafted.text, step_by_step.text)


def test_no_repeat_ngram_size_stops_a_repetition(generator):
    pattern, prompt = r"[a-z ]{10,80}\.", "Repeat the word 'hello' many times."
    plain = generator.regex(pattern, prompt)
    banned = generator.regex(pattern, prompt, no_repeat_ngram_size=2)
    ids = banned.token_ids
    pairs = list(zip(ids, ids[1:]))
    assert banned.text != plain.text and "hello hello hello hello" in plain.text
    assert len(pairs) == len(set(pairs)), banned.text


def test_drafted_generate_applies_generates_processors(generator):
    """``repetition_penalty`` and a processor of the user's own, prepared by ``generate``, run
    inside the drafted loop: the tokens equal plain ``generate`` with structgen's processor."""
    model, tokenizer = generator.model, generator.tokenizer
    schema, prompt = CASES[0]
    compiled = structgen.compile_json_schema(schema, tokenizer, whitespace="compact", strict=True, canonical=True,
                                             model=model)
    ids = generator.prompt_ids(schema, prompt)
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    options = {"max_new_tokens": 40, "do_sample": False, "repetition_penalty": 1.3}
    plain = model.generate(**inputs, **options,
                           logits_processor=[structgen.LogitsProcessor(compiled), LastTokenPenalty()])
    drafted = model.generate(**inputs, **options, logits_processor=[LastTokenPenalty()],
                             custom_generate=structgen.drafted_generate(compiled, tokenizer))
    assert drafted.tolist() == plain.tolist()

    # a left-padded batch: generate's repetition penalty skips each row's padding, so does the loop
    prompts = [generator.prompt_ids(s, p) for s, p in CASES]
    grammars = [structgen.compile_json_schema(s, tokenizer, whitespace="compact", strict=True, canonical=True,
                                              model=model) for s, _ in CASES]
    width = max(len(p) for p in prompts)
    padded = {"input_ids": torch.tensor([[2] * (width - len(p)) + p for p in prompts]),
              "attention_mask": torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts]),
              "pad_token_id": 2}
    plain = model.generate(**padded, **options, logits_processor=[structgen.LogitsProcessor(grammars)])
    drafted = model.generate(**padded, **options, custom_generate=structgen.drafted_generate(grammars, tokenizer))
    assert drafted.tolist() == plain.tolist()


@pytest.mark.parametrize("options, name", [
    ({"repetition_penalty": 0}, "repetition_penalty"), ({"repetition_penalty": -1.0}, "repetition_penalty"),
    ({"repetition_penalty": float("inf")}, "repetition_penalty"), ({"repetition_penalty": "2"}, "repetition_penalty"),
    ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size"), ({"no_repeat_ngram_size": 2.0}, "no_repeat_ngram_size"),
    ({"no_repeat_ngram_size": True}, "no_repeat_ngram_size"),
    ({"logits_processors": LastTokenPenalty()}, "logits_processors"), ({"logits_processors": [3]}, "logits_processors"),
    ({"logits_processors": "abc"}, "logits_processors"),
])
def test_bad_values_are_option_errors(options, name):
    with pytest.raises(structgen.OptionError, match=name):
        DecodeConfig(**options)


def test_processors_keep_the_config_hashable():
    processor = LastTokenPenalty()
    config = DecodeConfig(logits_processors=[processor], no_repeat_ngram_size=2)
    assert config.logits_processors == (processor,) and config.processes and not DecodeConfig().processes
    assert hash(config) == hash(DecodeConfig(logits_processors=(processor,), no_repeat_ngram_size=2))
    assert config != DecodeConfig(logits_processors=(LastTokenPenalty(),), no_repeat_ngram_size=2)


class Recorder(HFLogitsProcessor):
    """Records the prefix length of each call; leaves the scores as they are."""

    def __init__(self):
        self.lengths = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        assert input_ids.shape[0] == scores.shape[0] == 1
        self.lengths.append(input_ids.shape[1])
        return scores


def test_sql_and_tool_calls_take_the_options(generator):
    shop = Path(__file__).resolve().parents[1] / "examples" / "data" / "shop.sqlite"
    recorder = Recorder()
    query = generator.sql("How many customers are there?", shop, max_new_tokens=40, logits_processors=[recorder])
    assert query.sql and recorder.lengths and max(recorder.lengths) > min(recorder.lengths)
    add = {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
    recorder = Recorder()
    turn = generator.tool_calls([add], [{"role": "user", "content": "What is 2 plus 3?"}], tool_choice="required",
                                max_new_tokens=40, logits_processors=[recorder])
    assert turn.message["tool_calls"] and recorder.lengths


@pytest.mark.parametrize("speculate", [True, False])
def test_a_ban_that_leaves_no_allowed_token_is_a_decoding_error(generator, speculate):
    """Forced text whose every spelling is banned (here any token already in the prompt) is an
    error naming the processing, not a token the grammar refuses."""
    schema, prompt = CASES[1]
    with pytest.raises(structgen.DecodingError, match="left no token the grammar allows"):
        generator.json(schema, prompt, no_repeat_ngram_size=1, speculate=speculate)
