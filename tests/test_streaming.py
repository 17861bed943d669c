"""Streaming (``stream=True`` on every generation method) and OpenAI-shaped inputs (chat
messages, ``response_format``) on the real default model."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import structgen
from structgen.api.streaming import TextChunks
from structgen.engine.vocab import Vocabulary

SHOP = Path(__file__).resolve().parents[1] / "examples" / "data" / "shop.sqlite"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
PROMPT = "Extract the person: Ada Lovelace, 36."


def collect(items):
    """(the streamed text, after retries; the chunks; the final item)."""
    *chunks, final = list(items)
    text = ""
    for chunk in chunks:
        text = "" if isinstance(chunk, structgen.Retry) else text + chunk
    return text, chunks, final


def test_json_stream_is_the_result_text_in_chunks(generator):
    text, chunks, final = collect(generator.json(PERSON, PROMPT, stream=True))
    plain = generator.json(PERSON, PROMPT)
    assert isinstance(final, structgen.JsonResult) and final.token_ids == plain.token_ids
    assert text == final.text and all(isinstance(c, str) and c for c in chunks)
    # one chunk per step: a drafted run arrives whole, so there are fewer chunks than tokens
    assert len(chunks) <= final.stats.forward_passes < len(final.token_ids)


def test_stream_of_each_method(generator):
    for items, kind in [
        (generator.regex(r"(yes|no)", "Is water wet? Answer yes or no.", stream=True), structgen.TextResult),
        (generator.grammar('start: NAME " = " NUM\nNAME: /[a-z]+/\nNUM: /[0-9]+/', "Assign 3 to x.",
                           stream=True), structgen.TextResult),
        (generator.sql("How many orders are there?", SHOP, stream=True), structgen.SqlResult),
        (generator.tool_calls([ADD], [{"role": "user", "content": "What is 2 plus 3?"}], tool_choice="required",
                              stream=True), structgen.ToolCallResult),
    ]:
        text, chunks, final = collect(items)
        assert isinstance(final, kind) and chunks
        assert text == final.text


ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}


def test_sql_stream_says_when_a_retry_starts_again(generator):
    """The default model's first query here is refused by SQLite (a window function): the
    stream yields a Retry, and the text after the last one is the returned query's."""
    text, chunks, final = collect(generator.sql("What is the total price of all orders per customer city?",
                                                SHOP, execute=True, stream=True))
    retries = [c for c in chunks if isinstance(c, structgen.Retry)]
    assert len(retries) == final.retries >= 1
    assert [r.attempt for r in retries] == list(range(1, final.retries + 1))
    assert "window function" in retries[0].error
    assert text == final.text


def test_batch_stream_yields_rows_then_the_list(generator):
    *pairs, results = list(generator.json([PERSON, {"type": "integer"}], [PROMPT, "How many legs has a cat?"],
                                          stream=True))
    assert [type(r) for r in results] == [structgen.JsonResult] * 2
    for row, result in enumerate(results):
        assert "".join(chunk for i, chunk in pairs if i == row) == result.text


def test_stream_errors_are_raised_where_the_iteration_is(generator):
    items = generator.json(PERSON, PROMPT, max_new_tokens=3, budget="raise", stream=True)
    with pytest.raises(structgen.IncompleteGenerationError) as info:
        list(items)
    assert info.value.partial_text.startswith('{"')


def test_leaving_a_stream_early_stops_it_and_the_generator_goes_on(generator):
    items = generator.json(PERSON, PROMPT, stream=True)
    first = next(items)
    items.close()  # waits for the worker to stop at its next step
    assert first and generator.json({"enum": [3, 4, 5]}, "2 + 2?").value in (3, 4, 5)


def test_text_chunks_wait_for_whole_characters():
    vocab = Vocabulary([b"\xe2", b"\x82", b"\xac", b"x", None], eos_ids=[4])
    chunks = TextChunks(vocab)
    assert [chunks.push([0]), chunks.push([1]), chunks.push([2, 3]), chunks.close()] == ["", "", "€x", ""]


def test_stream_option_is_checked(generator):
    with pytest.raises(structgen.OptionError, match="stream"):
        generator.json(PERSON, PROMPT, stream="yes")


# ------------------------------------------------------------------------- OpenAI-shaped inputs

MESSAGES = [{"role": "system", "content": "You extract people from text as JSON."},
            {"role": "user", "content": "Ada Lovelace, 36."}]


def test_chat_messages_reach_the_template(generator):
    ids = generator.prompt_ids(PERSON, MESSAGES)
    text = generator.tokenizer.decode(ids)
    assert "You extract people from text as JSON." in text
    assert text.index("Ada Lovelace, 36.") < text.index("follows this JSON schema")
    # a string prompt is the one-user-turn conversation
    assert generator.chat_ids("Hi") == generator.chat_ids([{"role": "user", "content": "Hi"}])
    result = generator.json(PERSON, MESSAGES)
    jsonschema.validate(result.value, PERSON)


def test_messages_with_content_parts_and_an_assistant_turn(generator):
    messages = [{"role": "user", "content": [{"type": "text", "text": "Name a colour."}]},
                {"role": "assistant", "content": "Red."},
                {"role": "user", "content": "Another one, as a JSON string."}]
    value = generator.json({"type": "string", "maxLength": 20}, messages).value
    assert isinstance(value, str)
    assert generator.regex(r"(yes|no)", [{"role": "user", "content": "Is water wet?"}]).text in ("yes", "no")


def test_a_batch_of_conversations(generator):
    results = generator.json(PERSON, [MESSAGES, [{"role": "user", "content": "Bob, 5."}]])
    assert len(results) == 2 and all(isinstance(r, structgen.JsonResult) for r in results)


@pytest.mark.parametrize("prompt, match", [
    ({"role": "user", "content": "x"}, "non-empty list"),
    ([{"role": "tool", "content": "x"}], "message 0: needs a role"),
    ([{"role": "user"}], "message 0: no content"),
    ([{"role": "user", "content": 5}], "content must be text"),
])
def test_bad_messages_are_typed_errors(generator, prompt, match):
    with pytest.raises(structgen.MessagesError, match=match):
        generator.json(PERSON, prompt)


def test_raw_takes_text_only(generator):
    with pytest.raises(structgen.OptionError, match="raw=True"):
        generator.json(PERSON, MESSAGES, raw=True)


def test_response_format_is_a_schema_everywhere(generator, smollm2_tokenizer):
    response_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    result = generator.json(response_format, PROMPT)
    assert result.token_ids == generator.json(PERSON, PROMPT).token_ids
    compiled = structgen.compile_json_schema(response_format, smollm2_tokenizer)
    assert compiled is structgen.compile_json_schema(PERSON, smollm2_tokenizer)
    value = generator.json({"type": "json_object"}, "Describe a cat as a JSON object.", max_new_tokens=80).value
    assert isinstance(value, dict)
    for bad in ({"type": "text"}, {"type": "json_schema", "json_schema": {"name": "x"}}):
        with pytest.raises(structgen.SchemaError, match="response_format must be"):
            generator.json(bad, PROMPT)


def test_generate_functions_stream_too(generator, monkeypatch):
    monkeypatch.setattr(structgen.api.generator, "_DEFAULT", generator)
    *chunks, value = list(structgen.generate_json(PERSON, PROMPT, stream=True))
    assert json.loads("".join(chunks)) == value and isinstance(value, dict)
    *chunks, text = list(structgen.generate_regex(r"(yes|no)", "Is water wet?", stream=True))
    assert "".join(chunks) == text in ("yes", "no")
