"""structgen behind ``vllm serve`` (vLLM's OpenAI server), reached with the official ``openai``
client: a JSON schema and a grammar through ``extra_body={"vllm_xargs": {"structgen": ...}}``,
plain OpenAI ``tools`` through structgen's tool parser, SQL on a real database, and a batch of
concurrent requests of every kind. Every answer is checked by :func:`cases.problem`."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from transformers import AutoTokenizer

from structgen.integrations.vllm import EXTRA_ARG

from cases import COLORS_GRAMMAR, DATE_REGEX, SUM_GRAMMAR, extraction_pairs, problem, sql_requests
from toolcall_data import cases as bfcl_cases

MODEL = "smollm2"


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key="unused", timeout=300, max_retries=0)


def _ask(client, content: str, constraint=None, **kwargs):
    extra = {"vllm_xargs": {EXTRA_ARG: json.dumps(constraint)}} if constraint is not None else None
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                          temperature=0, max_tokens=200, extra_body=extra, **kwargs).choices[0]


def test_json_schema_through_extra_body(client):
    pair = extraction_pairs(1)[0]
    choice = _ask(client, pair["prompt"], {"json_schema": pair["schema"]})
    assert choice.finish_reason == "stop"
    assert problem({"json_schema": pair["schema"]}, choice.message.content, "stop") is None


def test_openai_response_format_shape_is_read_too(client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                               "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    constraint = {"response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": schema}}}
    choice = _ask(client, "Paris has about 2 million inhabitants. Give the city as JSON.", constraint)
    assert problem({"json_schema": schema}, choice.message.content, choice.finish_reason) is None
    assert json.loads(choice.message.content)["city"] == "Paris"


@pytest.mark.parametrize("constraint,content", [
    ({"grammar": SUM_GRAMMAR}, "Write a sum of small numbers and its result."),
    ({"grammar": COLORS_GRAMMAR}, "Name the colors of the French flag."),
    ({"regex": DATE_REGEX}, "On what date did Apollo 11 land on the Moon?"),
])
def test_grammar_and_regex(client, constraint, content):
    choice = _ask(client, content, constraint)
    assert choice.finish_reason == "stop"
    assert problem(constraint, choice.message.content, "stop") is None


@pytest.mark.parametrize("tool_choice", ["required", "named", "auto"])
def test_plain_openai_tools_come_back_as_tool_calls(client, tool_choice):
    case = next(bfcl_cases("simple_python"))
    tools = case["tools"]
    choice_arg = ({"type": "function", "function": {"name": tools[0]["function"]["name"]}}
                  if tool_choice == "named" else tool_choice)
    # One call: the default model repeats a call until max_tokens when it may make several.
    choice = client.chat.completions.create(model=MODEL, messages=case["messages"], tools=tools,
                                            tool_choice=choice_arg, parallel_tool_calls=False, temperature=0,
                                            max_tokens=200).choices[0]
    message = choice.message
    if tool_choice == "auto" and not message.tool_calls:  # text is a legal answer to "auto"
        assert message.content
        return
    assert message.tool_calls, message
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    for call in message.tool_calls:
        assert call.function.name in by_name
        arguments = json.loads(call.function.arguments)
        assert problem({"json_schema": by_name[call.function.name]["parameters"]},
                       json.dumps(arguments, separators=(",", ":")), "stop") is None


@pytest.mark.parametrize("tool_choice", ["required", "auto"])
def test_streamed_tool_calls_arrive_whole(client, tool_choice):
    case = next(bfcl_cases("simple_python"))
    stream = client.chat.completions.create(model=MODEL, messages=case["messages"], tools=case["tools"],
                                            tool_choice=tool_choice, parallel_tool_calls=False, temperature=0,
                                            max_tokens=200, stream=True)
    calls, content, finish = [], "", None
    for chunk in stream:
        delta = chunk.choices[0].delta
        content += delta.content or ""
        calls += delta.tool_calls or []
        finish = chunk.choices[0].finish_reason or finish
    if tool_choice == "auto" and not calls:
        assert content and finish == "stop"
        return
    assert finish == "tool_calls" and "<tool_call>" not in content
    (call,) = calls
    parameters = case["tools"][0]["function"]["parameters"]
    assert call.function.name == case["tools"][0]["function"]["name"] and call.id
    assert problem({"json_schema": parameters}, call.function.arguments.replace(", ", ",").replace(": ", ":"),
                   "stop") is None


def test_sql_explains_on_the_real_database(client, model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for prompt, constraint in sql_requests(tokenizer, 2):
        response = client.completions.create(model=MODEL, prompt=prompt, temperature=0, max_tokens=120,
                                             extra_body={"vllm_xargs": {EXTRA_ARG: json.dumps(constraint)}})
        choice = response.choices[0]
        assert problem(constraint, choice.text, choice.finish_reason) is None


def test_a_refused_constraint_is_a_400_naming_the_problem(client):
    with pytest.raises(openai.BadRequestError) as err:
        _ask(client, "x", {"json_schema": {"type": "object", "properties": {"a": {"type": "strnig"}}}})
    assert err.value.status_code == 400
    assert "structgen refused the constraint" in str(err.value) and "/properties/a/type" in str(err.value)
    with pytest.raises(openai.BadRequestError, match="not under a folder of STRUCTGEN_SQL_DIRS"):
        _ask(client, "x", {"sql": "/etc/passwd"})
    with pytest.raises(openai.BadRequestError, match="not JSON"):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=4,
                                       extra_body={"vllm_xargs": {EXTRA_ARG: "{json_schema: "}})


def test_concurrent_requests_of_every_kind(client):
    """Sixteen requests at once: the server batches them; constrained and free rows mix."""
    jobs = [(p["prompt"], {"json_schema": p["schema"]}) for p in extraction_pairs(8)]
    jobs += [("Write a sum of small numbers and its result.", {"grammar": SUM_GRAMMAR}),
             ("Name the colors of the Italian flag.", {"grammar": COLORS_GRAMMAR}),
             ("When did the Berlin wall fall?", {"regex": DATE_REGEX}),
             ("Is ice cold? Answer yes or no.", {"regex": "(yes|no)"})]
    jobs += [("Say hello in French.", None), ("Write a haiku about rain.", None)]
    jobs += [(c["messages"][0]["content"], {"tools": c["tools"], "tool_choice": "required"})
             for c in list(bfcl_cases("simple_python"))[1:3]]
    with ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(lambda job: _ask(client, *job), jobs))
    problems = [f"{c}: {err}" for (_, c), a in zip(jobs, answers) if c is not None
                and (err := problem(c, a.message.content, a.finish_reason))]
    assert not problems, "\n".join(problems)
    free = [a.message.content for (_, c), a in zip(jobs, answers) if c is None]
    assert all(free)
