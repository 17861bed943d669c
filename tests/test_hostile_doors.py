"""Issue 60's sweep of the doors, one regression test per defect it found: each input gets a
typed error (or a correct result) within bounded time and memory.

The compile-bound and memory-bound cases run as probes in a worker under a time and memory
limit (:mod:`hostile`: 10 s, 2 GB each, on the SmolLM2 vocabulary); the rest call the doors
directly: the serving parser, the processors, the message readers, the generator on the default
model, and the command line in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import structgen
from hostile import Probe, check, registry
from structgen.decoding.config import DecodeConfig
from structgen.errors import (ContextLengthError, InputTooLargeError, MessagesError, OptionError,
                              StructgenError)
from structgen.integrations.constraints import BYTES, compile_constraint, read_constraint
from structgen.integrations.rows import BatchRows
from structgen.tasks.tool_calls import _checked_messages
from test_cli import EXIT_INPUT, EXIT_USAGE, ROOT, assert_error, write
from test_cli import structgen as run_cli

PROBES: dict[str, Probe] = {}
probe = registry(PROBES)


# -- high: compile time no longer quadratic in a long input (each was 13 s to over 110 s)

@probe("a 250k-character pattern", expect="any")
def _(vocab):
    compile_constraint(read_constraint({"json_schema": {"type": "string", "pattern": "^" + "a" * 250_000 + "$"}}),
                       vocab)


@probe("a 60k-character pattern compiles", expect="ok")
def _(vocab):
    schema = {"type": "string", "pattern": "^" + "a" * 60_000 + "$"}
    m = structgen.Compiler(BYTES, disk_cache=False).json_schema(schema, canonical=True).matcher()  # as generation
    assert all(m.advance(b) for b in b'"' + b"a" * 60_000 + b'"') and m.can_end()


@probe("a 3.9M-character regex literal", expect="BudgetExceededError", contains="reading a regular expression")
def _(vocab):
    compile_constraint(read_constraint(json.dumps({"regex": "a" * 3_900_000})), vocab)


@probe("a 300k-character regex literal", expect="CompileError", contains="100000 states")
def _(vocab):
    structgen.compile_regex("a" * 300_000, vocab)


@probe("a chain of 20,000 grammar rules", expect="any")
def _(vocab):
    text = "start: r0\n" + "".join(f'r{k}: "x" r{k + 1}\n' for k in range(20_000)) + 'r20000: "y"\n'
    structgen.compile_grammar(text, vocab)


# -- low: a dict is measured as its text is (an 8M literal peaked at 2 GB before its refusal)

@probe("an 8M-character const as a dict constraint", expect="InputTooLargeError", contains="at most 4,000,000")
def _(vocab):
    compile_constraint(read_constraint({"json_schema": {"const": "a" * 8_000_000}}), vocab)


@probe("an 8M-character const through compile_json_schema", expect="InputTooLargeError", contains="JSON text")
def _(vocab):
    structgen.compile_json_schema({"const": "a" * 8_000_000}, vocab)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe(name, hostile_worker):
    check(hostile_worker.run(name), PROBES[name])


# -- medium: Python's own exceptions no longer escape the serving parser

@pytest.mark.parametrize("spec, message", [
    ({"response_format": "[" * 100_000}, "nests too deeply"),
    ({"response_format": '{"type": "json_schema", "json_schema": {"schema": ' + "[" * 50_000 + "}}"},
     "nests too deeply"),
    ({"tools": [], "parallel_tool_calls": "false"}, None),  # read; refused when compiled, below
])
def test_the_serving_parser_raises_typed_errors(spec, message):
    if message is None:
        with pytest.raises(OptionError, match="parallel_tool_calls must be True or False"):
            compile_constraint(read_constraint({"tools": [{"type": "function", "function": {"name": "f"}}],
                                                "parallel_tool_calls": "false"}), BYTES)
        return
    with pytest.raises(OptionError, match=message):
        read_constraint(spec)


def test_a_database_path_that_names_no_file_is_refused(monkeypatch, tmp_path):
    from structgen.integrations.constraints import allowed_database

    monkeypatch.setenv("STRUCTGEN_SQL_DIRS", str(tmp_path))
    with pytest.raises(OptionError, match="cannot name a file"):
        allowed_database(str(tmp_path / "a\x00b.sqlite"))
    with pytest.raises(OptionError, match="cannot name a file"):  # a request's path, checked on every compile
        compile_constraint(read_constraint({"sql": str(tmp_path / "a\x00b")}), BYTES)


# -- medium: a grammar for another tokenizer is refused by the processor

def test_the_logits_processor_refuses_a_grammar_for_another_vocabulary():
    processor = structgen.LogitsProcessor(structgen.compile_regex("(yes|no)", BYTES))
    with pytest.raises(OptionError, match="compiled for a vocabulary of 257 tokens"):
        processor(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 49_152))  # SmolLM2's width
    # a padded vocabulary (a few hundred ids past the tokenizer) is still taken
    assert processor(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 320)).shape == (1, 320)


@pytest.mark.parametrize("input_ids, scores, message", [
    (torch.zeros(3, dtype=torch.long), torch.zeros(1, 257), "input_ids must be a 2-dimensional integer"),
    (torch.zeros(1, 3), torch.zeros(1, 257), "input_ids must be a 2-dimensional integer"),
    (torch.zeros(1, 3, dtype=torch.long), torch.zeros(257), "scores must be a 2-dimensional floating"),
    (torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 257, dtype=torch.long), "scores must be"),
    (torch.zeros(1, 3, dtype=torch.long), torch.zeros(2, 257), "1 rows of input_ids but 2"),
    (torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 100), "100 wide"),
])
def test_the_logits_processor_checks_its_inputs(input_ids, scores, message):
    processor = structgen.LogitsProcessor(structgen.compile_regex("(yes|no)", BYTES))
    with pytest.raises(OptionError, match=message):
        processor(input_ids, scores)


# -- low: BatchRows no longer trusts what an engine hands it

def _rows() -> tuple[BatchRows, object]:
    rows = BatchRows(257, BYTES.eos_ids)
    return rows, structgen.Compiler(BYTES, disk_cache=False).regex("(yes|no)")


def test_batch_rows_check_indices_ids_and_logits():
    rows, compiled = _rows()
    for index in (-1, 1.5, True, None):
        with pytest.raises(OptionError, match="row index"):
            rows.add(index, compiled.matcher(), [])
    with pytest.raises(OptionError, match="row index"):
        rows.move(0, -1, False)
    with pytest.raises(OptionError, match="Matcher"):
        rows.add(0, compiled, [])
    with pytest.raises(OptionError, match="end-of-sequence id 300"):
        BatchRows(257, [300])
    rows.add(0, compiled.matcher(), [])
    for logits, message in [(torch.zeros(2, 257, dtype=torch.long), "floating-point"),
                            (torch.zeros(257), "2-dimensional"), (torch.zeros(2, 200), "200 wide")]:
        with pytest.raises(OptionError, match=message):
            rows.mask(logits)
    for output in ([None], [ord("y"), 999], [ord("y"), "e"]):
        rows, compiled = _rows()
        rows.add(0, compiled.matcher(), output)
        with pytest.raises(OptionError, match="not a token id"):
            rows.mask(torch.zeros(1, 257))
    rows, compiled = _rows()  # what an engine does hand it still works: a placeholder, then the token
    out = [ord("y"), -1]
    rows.add(0, compiled.matcher(), out)
    assert rows.mask(torch.zeros(1, 257))[0, ord("e")] == 0
    out[-1] = ord("e")
    assert rows.mask(torch.zeros(1, 257))[0, ord("s")] == 0


# -- low: the message readers

@pytest.mark.parametrize("call, message", [
    ({"id": "c1", "type": "function", "function": {"name": "f", "arguments": None}}, "must be a JSON object"),
    ({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}, "must be a JSON object"),
    ({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[" * 100_000}}, "nest too deeply"),
    ({"id": ["c1"], "type": "function", "function": {"name": "f", "arguments": "{}"}}, "id must be a string"),
    ({"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": ' + "9" * 5000 + "}"}},
     "not JSON"),
])
def test_assistant_tool_calls_are_checked(call, message):
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}]
    with pytest.raises(MessagesError, match=message):
        _checked_messages(messages)


def test_prompts_that_are_not_unicode_text_are_refused():
    from structgen.tasks.chat import chat_messages

    with pytest.raises(MessagesError, match="lone surrogate"):
        chat_messages("caf\udce9")
    with pytest.raises(MessagesError, match="message 0 is not valid Unicode"):
        chat_messages([{"role": "user", "content": [{"type": "text", "text": "\ud800"}]}])


def test_seeds_are_checked_where_they_are_given():
    DecodeConfig(seed=(1 << 64) - 1)
    with pytest.raises(OptionError, match="seed must be an int from"):
        DecodeConfig(seed=1 << 64)


# -- on the default model

def test_the_generator_refuses_bad_prompts_and_iterators(generator):
    schema = {"type": "integer"}
    with pytest.raises(MessagesError, match="lone surrogate"):
        generator.json(schema, "caf\udce9", max_new_tokens=4)
    with pytest.raises(ContextLengthError, match="bytes"):  # refused before the tokenizer reads 10 MB
        generator.json(schema, "x" * 10_000_000, max_new_tokens=4)
    with pytest.raises(OptionError, match="generator: give a list"):
        generator.json((s for s in [schema, schema]), ["a", "b"], max_new_tokens=4)
    with pytest.raises(OptionError, match="seed"):
        generator.json(schema, "a", max_new_tokens=4, seed=1 << 70)


# -- the command line: exit codes, no traceback (each refused before the model loads)

def test_the_cli_reads_stdin_as_utf8_and_bounds_it(tmp_path):
    schema = write(tmp_path / "s.json", {"type": "integer"})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "structgen", "json", str(schema)], input=b"\xff\xfe\xfa",
                         capture_output=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == EXIT_INPUT and b"Traceback" not in out.stderr, out.stderr[-2000:]
    assert b"not UTF-8 text" in out.stderr
    assert_error(run_cli("json", schema, "Hi", "--seed", str(1 << 70)), EXIT_USAGE, "--seed")


def test_the_cli_refuses_an_oversized_schema_file(tmp_path):
    schema = write(tmp_path / "s.json", {"const": "a" * 4_100_000})
    assert_error(run_cli("json", schema, "Hi"), EXIT_INPUT, "at most 4,000,000")


def test_a_closed_stdout_exits_141_while_streaming():
    """``structgen ... --stream | head -c 10``: the reader leaves, the exit code says so."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = (f"{sys.executable} -m structgen regex '[a-z ]{{100}}' 'Write a long story.' --stream --no-speculate "
               "--max-new-tokens 200 | head -c 3; echo \" rc=${PIPESTATUS[0]}\"")
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert "rc=141" in out.stdout, (out.stdout, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr


def test_every_error_of_this_sweep_is_a_structgen_error():
    assert issubclass(InputTooLargeError, StructgenError) and issubclass(InputTooLargeError, ValueError)


def test_an_output_integer_past_python_s_digit_limit_is_read():
    """A budget of thousands of tokens can write a JSON integer past the 4,300 digits ``int()``
    takes from text: it is read, and a validation message about it does not raise."""
    from structgen.tasks.json_task import _integer, validation_error

    assert json.loads("9" * 5_000, parse_int=_integer) == 10 ** 5_000 - 1
    assert "does not validate" in validation_error({"type": "integer", "maximum": 5}, 10 ** 5_000)
