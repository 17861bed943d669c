"""structgen.LogitsProcessor under transformers' own ``model.generate`` on the real default
model: greedy (token-identical to structgen's step-by-step decoding), seeded sampling, a
left-padded batch with a schema per row, prompt lookup and an assistant model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import torch

import structgen

SHOP = Path(__file__).resolve().parents[1] / "examples" / "data" / "shop.sqlite"
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}
COLOUR = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}, "sure": {"type": "boolean"}},
          "required": ["colour", "sure"], "additionalProperties": False}
CITIES = {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 2, "maxItems": 3}
CASES = [(PERSON, "Extract the person: Ada Lovelace, 36, mathematician."),
         (COLOUR, "What colour is grass? Are you sure?"),
         (CITIES, "Name two or three cities in France.")]


@pytest.fixture(scope="module")
def hf(generator):
    """(model, tokenizer, compile): the session's model and a compile with generation's options."""
    model, tokenizer = generator.model, generator.tokenizer

    def compile(schema):
        return structgen.compile_json_schema(schema, tokenizer, whitespace="compact", strict=True, canonical=True,
                                             model=model)
    return model, tokenizer, compile


def generate(model, tokenizer, prompts, processor, **options):
    """``model.generate`` over token-id prompts (left-padded); each row's new tokens, EOS and
    padding cut."""
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = model.generate(input_ids=ids, attention_mask=mask, logits_processor=[processor], pad_token_id=pad,
                         max_new_tokens=options.pop("max_new_tokens", 60), **options)
    eos = processor.vocabulary.eos_ids
    rows = []
    for row in out[:, width:].tolist():
        end = next((i for i, t in enumerate(row) if t in eos), len(row))
        rows.append(row[:end])
    return rows


def value_of(tokenizer, tokens):
    return json.loads(tokenizer.decode(tokens))


def test_greedy_equals_structgen_step_by_step(generator, hf):
    model, tokenizer, compile = hf
    for schema, prompt in CASES:
        ours = generator.json(schema, prompt, speculate=False, max_new_tokens=60)
        (theirs,) = generate(model, tokenizer, [generator.prompt_ids(schema, prompt)],
                             structgen.LogitsProcessor(compile(schema)), do_sample=False)
        assert theirs == ours.token_ids, (schema, tokenizer.decode(theirs), ours.text)
        jsonschema.validate(value_of(tokenizer, theirs), schema)


def test_seeded_sampling_stays_valid(generator, hf):
    model, tokenizer, compile = hf
    for seed in range(3):
        for schema, prompt in CASES:
            torch.manual_seed(seed)
            (tokens,) = generate(model, tokenizer, [generator.prompt_ids(schema, prompt)],
                                 structgen.LogitsProcessor(compile(schema)), do_sample=True, temperature=1.0,
                                 max_new_tokens=80)
            jsonschema.validate(value_of(tokenizer, tokens), schema)


def test_padded_batch_of_three_schemas(generator, hf):
    model, tokenizer, compile = hf
    prompts = [generator.prompt_ids(schema, prompt) for schema, prompt in CASES]
    assert len({len(p) for p in prompts}) == 3  # padding differs per row
    processor = structgen.LogitsProcessor([compile(schema) for schema, _ in CASES])
    rows = generate(model, tokenizer, prompts, processor, do_sample=False)
    for (schema, _), tokens in zip(CASES, rows):
        jsonschema.validate(value_of(tokenizer, tokens), schema)


@pytest.mark.parametrize("assisted", ["prompt_lookup", "assistant_model"])
def test_assisted_generation_is_lossless(generator, hf, assisted):
    """transformers checks drafts by calling the processors once per draft position on a
    growing prefix and dropping what it refuses: greedy output equals plain greedy output."""
    from structgen.decoding.draft_model import quantized_model

    model, tokenizer, compile = hf
    options = {"prompt_lookup_num_tokens": 4} if assisted == "prompt_lookup" else {
        "assistant_model": quantized_model(model)}
    for schema, prompt in CASES:
        ids = [generator.prompt_ids(schema, prompt)]
        (plain,) = generate(model, tokenizer, ids, structgen.LogitsProcessor(compile(schema)), do_sample=False)
        (drafted,) = generate(model, tokenizer, ids, structgen.LogitsProcessor(compile(schema)), do_sample=False,
                              **options)
        assert drafted == plain, (tokenizer.decode(drafted), tokenizer.decode(plain))
        if assisted == "assistant_model":  # sampled drafts, verified by transformers' p/q rule
            torch.manual_seed(0)
            (sampled,) = generate(model, tokenizer, ids, structgen.LogitsProcessor(compile(schema)),
                                  do_sample=True, **options)
            jsonschema.validate(value_of(tokenizer, sampled), schema)


def test_grammar_regex_sql_and_tools(generator, hf):
    model, tokenizer, _ = hf
    regex = structgen.compile_regex(r"[0-9]{3}-[0-9]{4}", tokenizer, model=model)
    (tokens,) = generate(model, tokenizer, [generator.chat_ids("Make up a phone number.")],
                         structgen.LogitsProcessor(regex), do_sample=False)
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", tokenizer.decode(tokens))
    sql = structgen.compile_sql(SHOP, tokenizer, strict=True, model=model)
    (tokens,) = generate(model, tokenizer, [generator.chat_ids("Write a SQLite query counting the orders.")],
                         structgen.LogitsProcessor(sql), do_sample=False, max_new_tokens=40)
    assert tokenizer.decode(tokens).upper().startswith(("SELECT", "WITH")) and sql.undeclared_names(
        tokenizer.decode(tokens)) == []
    add = {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
    tools = structgen.compile_tool_calls([add], tokenizer, format="json", parallel_tool_calls=False, model=model)
    (tokens,) = generate(model, tokenizer, [generator.chat_ids("What is 2 plus 3? Call the add tool.")],
                         structgen.LogitsProcessor(tools), do_sample=False, max_new_tokens=60)
    text = tokenizer.decode(tokens)
    assert text.startswith("<tool_call>[") and text.endswith("]</tool_call>")  # the "json" format's markup
    (call,) = json.loads(text[len("<tool_call>"):-len("</tool_call>")])
    assert call == {"name": "add", "arguments": {"a": 2, "b": 3}}


def test_reused_processor_starts_over_on_a_new_prompt(generator, hf):
    model, tokenizer, compile = hf
    processor = structgen.LogitsProcessor(compile(COLOUR))
    first = generate(model, tokenizer, [generator.prompt_ids(COLOUR, CASES[1][1])], processor, do_sample=False)
    again = generate(model, tokenizer, [generator.prompt_ids(COLOUR, "What colour is the sky?")], processor,
                     do_sample=False)
    for (tokens,) in (first, again):
        jsonschema.validate(value_of(tokenizer, tokens), COLOUR)


def test_misuse_is_a_typed_error(hf):
    model, tokenizer, compile = hf
    with pytest.raises(structgen.OptionError, match="takes what structgen.compile_"):
        structgen.LogitsProcessor({"type": "integer"})
    processor = structgen.LogitsProcessor([compile(PERSON), compile(COLOUR)])
    with pytest.raises(structgen.OptionError, match="2 compiled grammars for a batch of 3"):
        processor(torch.zeros(3, 4, dtype=torch.long), torch.zeros(3, 49152))
    with pytest.raises(structgen.OptionError, match="logits are 100 wide"):
        structgen.LogitsProcessor(compile(PERSON))(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 100))


# ------------------------------------------------- structgen's drafted loop behind model.generate

def test_drafted_generate_equals_the_processor(generator, hf):
    """custom_generate=structgen.drafted_generate(...) runs structgen's loop (drafts) and writes
    what plain generate with the processor writes, for one prompt and for a padded batch."""
    from transformers.generation.streamers import BaseStreamer

    class Collect(BaseStreamer):
        def __init__(self):
            self.parts = []

        def put(self, value):
            self.parts.append(value.tolist())

        def end(self):
            self.parts.append("end")

    model, tokenizer, compile = hf
    schema, prompt = CASES[0]
    ids = generator.prompt_ids(schema, prompt)
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    plain = model.generate(**inputs, max_new_tokens=60, do_sample=False,
                           logits_processor=[structgen.LogitsProcessor(compile(schema))])
    streamer = Collect()
    drafted = model.generate(**inputs, max_new_tokens=60, do_sample=False,
                             custom_generate=structgen.drafted_generate(compile(schema), tokenizer, streamer=streamer))
    assert drafted.tolist() == plain.tolist()
    assert streamer.parts[0] == [ids] and streamer.parts[-1] == "end"
    assert sum(streamer.parts[1:-1], []) == drafted[0, len(ids):-1].tolist()  # the new tokens, EOS aside
    assert len(streamer.parts) - 2 < len(drafted[0]) - len(ids) - 1  # drafted runs arrive whole

    prompts = [generator.prompt_ids(s, p) for s, p in CASES]
    grammars = [compile(s) for s, _ in CASES]
    by_processor = generate(model, tokenizer, prompts, structgen.LogitsProcessor(grammars), do_sample=False)
    width = max(len(p) for p in prompts)
    batch = model.generate(input_ids=torch.tensor([[2] * (width - len(p)) + p for p in prompts]),
                           attention_mask=torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts]),
                           max_new_tokens=60, do_sample=False, pad_token_id=2,
                           custom_generate=structgen.drafted_generate(grammars, tokenizer))
    eos = grammars[0].vocabulary.eos_ids
    for row, expected in zip(batch[:, width:].tolist(), by_processor):
        assert row[:next(i for i, t in enumerate(row) if t in eos)] == expected


def test_drafted_generate_refuses_what_it_cannot_apply(hf):
    from transformers import StoppingCriteriaList, StopStringCriteria

    model, tokenizer, compile = hf
    inputs = {"input_ids": torch.tensor([[1, 2, 3]]), "attention_mask": torch.ones(1, 3, dtype=torch.long)}
    # a stopping criterion and a warper the loop cannot apply (repetition_penalty and other
    # processors it applies: tests/test_repetition.py)
    with pytest.raises(structgen.OptionError, match="StopStringCriteria"):
        model.generate(**inputs, max_new_tokens=5,
                       stopping_criteria=StoppingCriteriaList([StopStringCriteria(tokenizer, ["}"])]),
                       custom_generate=structgen.drafted_generate(compile(PERSON), tokenizer))
    with pytest.raises(structgen.OptionError, match="MinPLogitsWarper"):
        model.generate(**inputs, max_new_tokens=5, do_sample=True, min_p=0.1,
                       custom_generate=structgen.drafted_generate(compile(PERSON), tokenizer))
    bytes_only = structgen.Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    with pytest.raises(structgen.OptionError, match="another vocabulary"):
        model.generate(**inputs, max_new_tokens=5,
                       custom_generate=structgen.drafted_generate(structgen.compile_regex("a+", bytes_only), tokenizer))


def test_beam_search_keeps_every_beam_valid(generator, hf):
    """Beams reorder rows between steps; each call re-syncs every row to its own tokens."""
    model, tokenizer, compile = hf
    schema, prompt = CASES[1]
    ids = generator.prompt_ids(schema, prompt)
    out = model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                         max_new_tokens=40, do_sample=False, num_beams=3, num_return_sequences=3,
                         logits_processor=[structgen.LogitsProcessor(compile(schema))])
    eos = generator.vocabulary.eos_ids
    for row in out[:, len(ids):].tolist():
        jsonschema.validate(value_of(tokenizer, row[:next(i for i, t in enumerate(row) if t in eos)]), schema)
