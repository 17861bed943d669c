"""The ``structgen`` command line, driven as a user drives it: ``python -m structgen ...`` in a
subprocess, prompts on stdin, output parsed from stdout, exit codes and stderr checked.

The checks that need no model (help, version, bad inputs, a model directory that is not one)
run in a second or two each: inputs are checked before the model loads. Each generating check
loads the real default model in its own process (~5 s) and decodes a few greedy tokens, so they
combine several options per run.
"""

from __future__ import annotations

import importlib
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from sql_data import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CONCERT_SINGER = DATA_DIR / "sql" / "spider_dev_schema_only" / "databases" / "concert_singer.sqlite"

EXIT_USAGE, EXIT_INPUT, EXIT_INCOMPLETE, EXIT_MODEL = 2, 3, 4, 5


def structgen(*args: str | os.PathLike[str], stdin: str | None = None, cwd: Path | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m structgen ARGS`` on this checkout (PYTHONPATH: the repository root, so the
    worktree's code runs whatever the virtualenv's editable install points at)."""
    # One thread: on a shared 2-core runner, two busy-waiting OpenMP threads made a forward pass
    # 25x slower (13 s against 0.5 s for three passes, measured while other tests ran).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "structgen", *map(str, args)], input=stdin if stdin is not None else "",
                          capture_output=True, text=True, env=env, cwd=cwd or ROOT, timeout=timeout)


def write(path: Path, value: object) -> Path:
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return path


def assert_error(out: subprocess.CompletedProcess[str], code: int, *phrases: str) -> None:
    """Exit ``code``, one ``structgen: error:`` line first on stderr, no traceback, nothing on stdout."""
    assert out.returncode == code, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr
    error = next(line for line in out.stderr.splitlines() if line.startswith("structgen: error: "))
    for phrase in phrases:
        assert phrase in out.stderr, (phrase, out.stderr)
    assert error


# ------------------------------------------------------------------------------ no model needed


def test_help_lists_the_subcommands_and_the_exit_codes():
    out = structgen("--help")
    assert out.returncode == 0 and out.stderr == ""
    for word in ("json", "grammar", "regex", "sql", "tools", "Exit codes:", "bad input", "model could not be loaded"):
        assert word in out.stdout
    sub = structgen("json", "-h")
    assert sub.returncode == 0 and "SCHEMA_FILE [PROMPT]" in sub.stdout and "--stream" in sub.stdout


def test_version():
    import structgen as package

    out = structgen("--version")
    assert (out.returncode, out.stdout) == (0, f"structgen {package.__version__}\n")


def test_the_console_script_resolves_to_main():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["structgen"].partition(":")
    main = getattr(importlib.import_module(module), name)
    from structgen.cli import main as cli_main

    assert main is cli_main and callable(main)


def test_an_invalid_schema_is_bad_input_with_its_pointer(tmp_path):
    schema = write(tmp_path / "bad.json", {"type": "object", "properties": {"a": {"type": "strin"}}})
    out = structgen("json", schema, "Anything.")
    assert_error(out, EXIT_INPUT, "/properties/a/type", "strin")
    assert out.stdout == ""
    # under --output json the failure is also a JSON object on stdout
    out = structgen("json", schema, "Anything.", "-o", "json")
    assert out.returncode == EXIT_INPUT
    error = json.loads(out.stdout)["error"]
    assert (error["type"], error["exit_code"]) == ("SchemaError", EXIT_INPUT) and "/properties/a/type" in error["message"]


def test_a_schema_file_that_is_not_json_shows_where(tmp_path):
    schema = write(tmp_path / "s.json", '{"type": "object",\n "properties": {"a": 1,}}')
    out = structgen("json", schema, "Anything.")
    assert_error(out, EXIT_INPUT, "s.json:2:24: not valid JSON")
    assert out.stderr.splitlines()[-1].strip() == "^"


def test_a_missing_schema_file(tmp_path):
    assert_error(structgen("json", tmp_path / "none.json", "Anything."), EXIT_INPUT,
                 "cannot read schema file", "No such file")


def test_a_missing_database_is_not_created(tmp_path):
    database = tmp_path / "missing.sqlite"
    assert_error(structgen("sql", database, "How many?"), EXIT_INPUT, "does not exist")
    assert not database.exists()
    not_a_database = write(tmp_path / "text.sqlite", "not a database\n" * 100)
    assert_error(structgen("sql", not_a_database, "How many?"), EXIT_INPUT)


@pytest.mark.parametrize("args, phrases", [
    (["regex", "(ab", "Anything."], ["unbalanced parenthesis"]),
    (["grammar", "GRAMMAR", "Anything."], ["undefined rule 'trem'", "^^^^", "Did you mean 'term'?"]),
    (["tools", "TOOLS", "Anything."], ["name"]),
    (["tools", "WEATHER", "Anything.", "--tool-choice", "get_time"], ["get_time"]),
])
def test_bad_grammars_regexes_and_tools_are_bad_input(tmp_path, args, phrases):
    files = {"GRAMMAR": write(tmp_path / "g.lark", 'start: expr\nexpr: expr "+" trem | term\nterm: /[0-9]+/\n'),
             "TOOLS": write(tmp_path / "tools.json", [{"type": "function", "function": {"parameters": {}}}]),
             "WEATHER": write(tmp_path / "weather.json", WEATHER)}
    assert_error(structgen(*[files.get(a, a) for a in args]), EXIT_INPUT, *phrases)


def test_usage_errors(tmp_path):
    schema = write(tmp_path / "s.json", PERSON)
    assert_error(structgen("json", schema), EXIT_USAGE, "no PROMPT")                 # stdin empty
    assert_error(structgen("json", "-", stdin=json.dumps(PERSON)), EXIT_USAGE, "PROMPT is needed")
    assert_error(structgen("json", schema, "Hi", "--max-new-tokens", "0"), EXIT_USAGE, "--max-new-tokens")
    assert_error(structgen("json", schema, "Hi", "--repetition-penalty", "0"), EXIT_USAGE, "--repetition-penalty")
    assert_error(structgen("jsn", schema, "Hi"), EXIT_USAGE, "No such command")


def test_a_messages_file_must_be_a_list_of_messages(tmp_path):
    tools = write(tmp_path / "tools.json", WEATHER)
    messages = write(tmp_path / "m.json", {"role": "user", "content": "Hi"})
    assert_error(structgen("tools", tools, "--messages", messages), EXIT_INPUT, "JSON list of messages")


def test_a_model_directory_that_is_not_a_model(tmp_path):
    schema = write(tmp_path / "s.json", PERSON)
    assert_error(structgen("json", schema, "Hi", "--model", tmp_path / "nothing"), EXIT_MODEL, "not a directory")
    (tmp_path / "empty").mkdir()
    assert_error(structgen("json", schema, "Hi", "--model", tmp_path / "empty"), EXIT_MODEL, "no config.json")
    broken = tmp_path / "broken"
    broken.mkdir()
    write(broken / "config.json", {"model_type": "no-such-architecture"})
    out = structgen("json", schema, "Hi", "--model", broken)
    assert_error(out, EXIT_MODEL, "cannot load the model")
    assert len(out.stderr.splitlines()) == 1, out.stderr  # one line: no transformers warnings or bars


def test_progress_shows_on_a_terminal_only(tmp_path):
    """stderr on a terminal: a spinner names the stage; piped (every other test), nothing."""
    schema = write(tmp_path / "s.json", PERSON)
    (tmp_path / "empty").mkdir()
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-m", "structgen", "json", str(schema), "Hi", "--model",
                             str(tmp_path / "empty")], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=follower, env=env)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process is gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == EXIT_MODEL
    text = seen.decode("utf-8", "replace")
    assert "loading model" in text and "structgen: error: --model" in text
    quiet = subprocess.run([sys.executable, "-m", "structgen", "json", str(schema), "Hi", "-q", "--model",
                            str(tmp_path / "empty")], capture_output=True, text=True, env=env)
    assert "loading model" not in quiet.stderr


# ------------------------------------------------------------------------ on the default model


@pytest.mark.slow
def test_json_reads_the_prompt_from_stdin_and_prints_the_value(tmp_path):
    """The shape an outside check relies on: ``structgen json SCHEMA_FILE`` with the prompt on
    stdin prints the value as one line of JSON, and nothing else anywhere."""
    schema = write(tmp_path / "person.json", PERSON)
    out = structgen("json", schema, "--max-new-tokens", "48", stdin="Extract the person: Ada Lovelace, 36, London.\n")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # no progress (stderr is not a terminal), no third-party bars
    assert out.stdout.count("\n") == 1
    value = json.loads(out.stdout)
    jsonschema.validate(value, PERSON)
    assert value["name"] == "Ada Lovelace"


@pytest.mark.slow
def test_json_stream_with_output_json(tmp_path):
    """``--stream -o json``: a ``{"chunk"}`` line per piece of text, then the result object."""
    schema = write(tmp_path / "person.json", PERSON)
    out = structgen("json", schema, "Extract the person: Grace Hopper, 85.", "--stream", "-o", "json",
                    "--max-new-tokens", "48")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    chunks, final = lines[:-1], lines[-1]
    assert chunks and all(set(c) == {"chunk"} and c["chunk"] for c in chunks)
    assert len(chunks) > 1  # pieces as they are accepted (a drafted run arrives whole)
    assert "".join(c["chunk"] for c in chunks) == final["text"]
    jsonschema.validate(final["value"], PERSON)
    assert json.loads(final["text"]) == final["value"]
    assert final["command"] == "json" and final["finish_reason"] in ("eos", "grammar")
    stats = final["stats"]
    assert final["usage"]["completion_tokens"] == stats["new_tokens"] > 0
    assert stats["forward_passes"] >= 2 and stats["drafted_tokens"] >= stats["accepted_tokens"] >= 0


@pytest.mark.slow
def test_grammar_streams_its_text(tmp_path):
    grammar = write(tmp_path / "assign.lark", 'start: NAME " = " NUM\nNAME: /[a-z]+/\nNUM: /[0-9]+/\n')
    out = structgen("grammar", grammar, "Assign 3 to x.", "--stream", "--max-new-tokens", "16")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    import re

    assert re.fullmatch(r"[a-z]+ = [0-9]+\n", out.stdout), out.stdout


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """The default model as a plain transformers directory (config, safetensors, tokenizer), made
    of links to structgen's own cache of it (``export_default_model`` would copy 540 MB)."""
    from importlib.metadata import version

    from structgen.engine.disk_cache import cache_dir

    tag = f"-tf{version('transformers')}"

    def cached(kind: str) -> list[Path]:
        return sorted(p for p in (cache_dir() / kind).glob(f"smollm2-135m-instruct-*{tag}") if p.is_dir())

    if not cached("models") or not cached("tokenizers"):  # a fresh cache: convert the GGUF once
        subprocess.run([sys.executable, "-c", "from structgen.decoding.models import load_default_model as f; f()"],
                       check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=600)
    directory = tmp_path_factory.mktemp("smollm2-dir")
    for source in (cached("models")[-1], cached("tokenizers")[-1]):
        for file in source.iterdir():
            (directory / file.name).symlink_to(file)
    return directory


@pytest.mark.slow
def test_regex_on_a_model_directory(model_dir):
    """``--model DIR``: any local transformers model directory, loaded without a bar or warning."""
    args = ["regex", "(yes|no)", "Is water wet? Answer yes or no.", "--model", model_dir, "--max-new-tokens", "4", "--threads", "1"]
    out = structgen(*args)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout in ("yes\n", "no\n")


@pytest.mark.slow
@pytest.mark.skipif(not CONCERT_SINGER.is_file(), reason=f"the shared SQL data is not at {CONCERT_SINGER}")
def test_sql_executes_on_a_real_database():
    out = structgen("sql", CONCERT_SINGER, "How many singers are there?", "--execute", "--max-new-tokens", "48")
    assert out.returncode == 0, out.stderr
    query, header, *rows = out.stdout.splitlines()
    assert query.upper().startswith("SELECT") and query.endswith(";")
    assert header and all(len(row.split("\t")) == len(header.split("\t")) for row in rows)


@pytest.mark.slow
def test_json_with_a_system_prompt_and_a_messages_file(tmp_path):
    """``--messages FILE`` (no PROMPT) with ``--system``: the conversation is the prompt."""
    schema = write(tmp_path / "person.json", PERSON)
    messages = write(tmp_path / "messages.json", [{"role": "user", "content": "Extract the person: Grace Hopper, 85."}])
    system = "You read documents and extract the people they name, with their ages, as JSON. " * 4
    out = structgen("json", schema, "--messages", messages, "--system", system, "-o", "json", "--max-new-tokens", "48")
    assert out.returncode == 0, out.stderr  # without the messages file as the prompt, stdin (empty) is refused
    record = json.loads(out.stdout)
    jsonschema.validate(record["value"], PERSON)
    from structgen.decoding.models import load_default_tokenizer

    tokenizer = load_default_tokenizer()
    # the system turn reached the model: the prompt holds both turns' tokens
    turns = len(tokenizer.encode(system)) + len(tokenizer.encode("Extract the person: Grace Hopper, 85."))
    assert record["usage"]["prompt_tokens"] > turns


@pytest.mark.slow
def test_sql_streams_a_retry():
    """A SQL attempt cut off by the budget (``--budget raise``) is abandoned: under ``--stream -o json`` a
    ``{"retry"}`` line says so (the next attempt streams from its start), then the result, or
    the error with every attempt."""
    out = structgen("sql", ROOT / "examples" / "data" / "shop.sqlite", "Names of the customers in London?",
                    "--stream", "-o", "json", "--max-new-tokens", "6", "--budget", "raise",
                    "--max-retries", "1", "--seed", "0")
    assert out.returncode in (0, EXIT_INCOMPLETE), out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    kinds = [next(iter(line)) for line in lines]
    first_retry = kinds.index("retry")
    assert kinds[0] == "chunk" and set(kinds[:first_retry]) == {"chunk"}
    assert lines[first_retry]["retry"]["attempt"] == 1 and "max_new_tokens" in lines[first_retry]["retry"]["error"]
    final = lines[-1]
    if out.returncode == 0:
        assert final["attempts"][0]["error"] == lines[first_retry]["retry"]["error"]
    else:
        assert final["error"]["type"] == "SqlGenerationError" and len(final["attempts"]) == 2


@pytest.mark.slow
def test_tools_prints_the_assistant_message(tmp_path):
    tools = write(tmp_path / "tools.json", WEATHER)
    out = structgen("tools", tools, "What is the weather in Paris?", "--tool-choice", "required", "-o", "json",
                    "--max-new-tokens", "64")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    message = record["message"]
    assert message["role"] == "assistant"
    call = message["tool_calls"][0]["function"]
    assert call["name"] == "get_weather"
    jsonschema.validate(json.loads(call["arguments"]), WEATHER[0]["function"]["parameters"])


@pytest.mark.slow
def test_a_budget_that_runs_out_is_exit_code_4(tmp_path):
    schema = write(tmp_path / "person.json", PERSON)
    out = structgen("json", schema, "Extract the person: Ada Lovelace, 36.", "--max-new-tokens", "3", "--budget", "raise",
                    "-o", "json")
    assert_error(out, EXIT_INCOMPLETE, "max_new_tokens")
    record = json.loads(out.stdout)
    assert record["error"]["type"] == "IncompleteGenerationError"
    assert record["partial_text"].startswith("{")


def test_the_readme_command_lines_parse_and_their_files_exist(monkeypatch):
    """Each ``structgen`` line in the README's ``sh`` blocks is a valid command whose input
    checks pass (files, options, the prompt, piped stdin too), run up to where the model would load."""
    import re
    import shlex

    from click.testing import CliRunner

    import structgen.cli.commands as commands

    checked: list[str] = []
    monkeypatch.setattr(commands, "execute", lambda run, task: checked.append(task.command) or task.check())
    monkeypatch.chdir(ROOT)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```sh\n(.*?)```", readme, re.S) for line in block.splitlines()
             if "structgen " in line and not line.startswith("#")]
    assert len(lines) >= 5
    for line in lines:
        piped, _, command = line.rpartition("| ")
        stdin = shlex.split(piped)[1] if piped.startswith("echo ") else None
        args = shlex.split(command, comments=True)
        assert args[0] == "structgen"
        result = CliRunner().invoke(commands.cli, args[1:], input=stdin)
        assert result.exit_code == 0, (line, result.output)
    assert {"json", "grammar", "regex", "sql", "tools"} <= set(checked)


def test_tag_refuses_a_bad_spec_before_loading_the_model(tmp_path):
    spec = write(tmp_path / "tag.json", {"type": "structural_tag", "format": {"type": "token", "token": "<|x|>"}})
    assert_error(structgen("tag", spec, "hi", "-q"), EXIT_INPUT, "/format/type", "special-token")


@pytest.mark.slow
def test_tag_with_reasoning_prints_segments_and_the_thinking(tmp_path):
    spec = write(tmp_path / "tag.json", {"type": "structural_tag", "format": {
        "type": "tag", "begin": "<n>", "end": "</n>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}}}})
    out = structgen("tag", spec, "What is 6 times 7?", "-q", "-o", "json", "--thinking-markers", "<think>", "</think>",
                    "--thinking-budget", "4", "--max-new-tokens", "24")
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads(out.stdout)
    assert record["reasoning_tokens"] <= 4 and isinstance(record["reasoning"], str)
    assert [s["kind"] for s in record["segments"]] == ["const_string", "json_schema", "const_string"]
    assert record["text"] == "<n>" + record["segments"][1]["text"] + "</n>"
