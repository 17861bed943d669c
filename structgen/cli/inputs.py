"""What the user gives the command line: files (or ``-`` for stdin), the prompt (an argument or
stdin), chat messages, and the checks that refuse a bad input before the model is loaded.

Every problem here is a :class:`~structgen.cli.output.CliError` (exit code 3, bad input) or a
``click.UsageError`` (exit code 2), with a message that names the file and, for JSON, the line
and column under a caret.

Example
-------
>>> import json, tempfile, os
>>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
...     _ = f.write('{"type": "object",\\n "properties": {"a": {"type": "integer"},}}')
>>> try:
...     read_json_file(f.name, "schema file")
... except CliError as err:
...     print(err.format_message().replace(f.name, "s.json"))
schema file s.json:2:42: not valid JSON: Expecting property name enclosed in double quotes
     "properties": {"a": {"type": "integer"},}}
                                             ^
>>> os.unlink(f.name)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from structgen.cli.output import EXIT_INPUT, CliError
from structgen.core.limits import MAX_INPUT_CHARS, MAX_PROMPT_BYTES, check_input_size
from structgen.engine.compiler import Compiler
from structgen.engine.vocab import Vocabulary
from structgen.errors import InputTooLargeError, MessagesError
from structgen.frontends.sql import read_schema
from structgen.frontends.tool_calls import read_tool_choice, read_tools
from structgen.tasks.chat import utf8_size

__all__ = ["STDIN", "read_text", "read_json_file", "read_prompt", "read_messages", "conversation",
           "check_schema", "check_grammar", "check_regex", "check_tools", "check_database"]

#: the file name that means "read standard input"
STDIN = "-"


def read_text(path: str, what: str, *, limit: int = 4 * MAX_INPUT_CHARS, measured: bool = True) -> str:
    """The text of file ``path`` (``-``: all of stdin), as UTF-8; ``what`` names it in errors.
    At most ``limit`` bytes are read, and ``measured`` text (an input, not a prompt) may hold at
    most ``MAX_INPUT_CHARS`` characters: past either it is refused (the limits of
    :mod:`structgen.core.limits`, the same at every door; a character is up to 4 bytes)."""
    name = "<stdin>" if path == STDIN else repr(path)
    try:
        if path == STDIN:
            stream = getattr(sys.stdin, "buffer", None)
            data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1).encode("utf-8")
        else:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except ValueError as err:  # a NUL character in the name
        raise CliError(f"cannot read {what} {name}: {err}", EXIT_INPUT) from err
    except OSError as err:
        raise CliError(f"cannot read {what} {name}: {err.strerror or err}", EXIT_INPUT) from err
    except UnicodeError as err:  # a text-mode stdin that met bytes that are not UTF-8
        raise CliError(f"{what} {name} is not UTF-8 text: {err}", EXIT_INPUT) from err
    if len(data) > limit:
        raise CliError(f"{what} {name} is over {limit:,} bytes, the most structgen reads", EXIT_INPUT)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CliError(f"{what} {name} is not UTF-8 text: byte {err.start} {err.reason}", EXIT_INPUT) from err
    if measured:
        try:
            check_input_size(text, f"{what} {name}")
        except InputTooLargeError as err:
            raise CliError(str(err), EXIT_INPUT) from err
    return text


def read_json_file(path: str, what: str) -> Any:
    """The JSON document in file ``path``; a syntax error names the line and column, with a caret."""
    text = read_text(path, what)
    name = "<stdin>" if path == STDIN else path
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        lines = text.splitlines()
        line = lines[err.lineno - 1] if err.lineno <= len(lines) else ""  # past a last newline: none
        detail = f"\n    {line}\n    {' ' * (err.colno - 1)}^" if line.strip() else ""
        raise CliError(f"{what} {name}:{err.lineno}:{err.colno}: not valid JSON: {err.msg}{detail}",
                       EXIT_INPUT) from err
    except RecursionError as err:
        raise CliError(f"{what} {name}: its JSON nests too deeply to read", EXIT_INPUT) from err
    except ValueError as err:  # an integer past Python's 4,300 digits
        raise CliError(f"{what} {name}: not valid JSON: {err}", EXIT_INPUT) from err


def read_prompt(prompt: str | None, *, stdin_taken: bool = False) -> str:
    """``prompt``, or, when it is omitted, all of stdin (a usage error when stdin is a terminal,
    already read for a file, or empty)."""
    if prompt is not None:
        try:  # an argument that was not UTF-8 holds lone surrogates: refused before the model loads
            utf8_size(prompt, "PROMPT")
        except MessagesError as err:
            raise CliError(str(err), EXIT_INPUT) from err
        return prompt
    if stdin_taken:
        raise click.UsageError("PROMPT is needed when a file is read from stdin ('-')")
    if sys.stdin is None or sys.stdin.isatty():
        raise click.UsageError("no PROMPT: give it as an argument, or pipe it on stdin")
    text = read_text(STDIN, "prompt", limit=MAX_PROMPT_BYTES, measured=False).strip()
    if not text:
        raise click.UsageError("no PROMPT: stdin was empty")
    return text


def read_messages(path: str) -> list[dict[str, Any]]:
    """An OpenAI-style messages list from a JSON file (each message an object with a ``role``)."""
    messages = read_json_file(path, "messages file")
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise CliError(f"messages file {path!r} must hold a JSON list of messages, each an object with a "
                       '"role" (e.g. [{"role": "user", "content": "..."}])', EXIT_INPUT)
    return messages


def conversation(prompt: str | None, *, system: str | None, messages_file: str | None,
                 stdin_taken: bool = False) -> list[dict[str, Any]] | None:
    """The chat messages that ``--system`` and ``--messages`` ask for (``PROMPT``, if given,
    becomes the last user turn), or None when neither is given (the prompt is plain text).

    Example
    -------
    >>> conversation("Hi", system="Be brief.", messages_file=None)
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}]
    >>> conversation("Hi", system=None, messages_file=None) is None
    True
    """
    if system is None and messages_file is None:
        return None
    messages = read_messages(messages_file) if messages_file is not None else []
    if messages_file is None or prompt is not None:
        messages.append({"role": "user", "content": read_prompt(prompt, stdin_taken=stdin_taken)})
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    return messages


# --------------------------------------------------------------------------------------------
# Checks before the model loads: the same compile on a 256-byte vocabulary refuses exactly what
# the model's compile would (the grammar does not depend on the vocabulary), in milliseconds,
# so a typo costs no model load.
# --------------------------------------------------------------------------------------------

_BYTES: Compiler | None = None


def _byte_compiler() -> Compiler:
    global _BYTES
    if _BYTES is None:
        _BYTES = Compiler(Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256]), disk_cache=False)
    return _BYTES


def check_schema(schema: Any, *, lenient: bool = False) -> None:
    """Raise the SchemaError (or UnsupportedFeatureError) that generating under ``schema`` would."""
    _byte_compiler().json_schema(schema, whitespace="compact", strict=True, canonical=True, lenient=lenient)


def check_grammar(grammar: "str | os.PathLike[str]", *, start: str) -> None:
    """Raise the GrammarError that compiling the Lark grammar (a path, or its text) would."""
    _byte_compiler().grammar_file(grammar, start=start)


def check_regex(pattern: str, *, ignore_case: bool = False, dotall: bool = False) -> None:
    """Raise the RegexSyntaxError (or GrammarError) that compiling ``pattern`` would."""
    _byte_compiler().regex(pattern, ignore_case=ignore_case, dotall=dotall)


def check_structural_tag(spec: Any) -> None:
    """Raise the StructuralTagError (or schema error) that compiling ``spec`` would."""
    _byte_compiler().structural_tag(spec, whitespace="compact", strict=True, canonical=True)


def check_tools(tools: Any, tool_choice: Any) -> None:
    """Raise the ToolSpecError that ``tools`` and ``tool_choice`` would (the arguments' schemas
    are compiled with the model's tool-call format, later)."""
    read_tool_choice(tool_choice, read_tools(tools))


def check_database(path: str) -> None:
    """Refuse a database that is not an existing SQLite file with tables. Checked before anything
    opens it: ``sqlite3.connect`` creates a missing file."""
    if not os.path.isfile(path):
        what = "is a directory, not a SQLite file" if os.path.isdir(path) else "does not exist"
        raise CliError(f"database {path!r} {what}", EXIT_INPUT)
    read_schema(path)  # read-only; SqlError when it is not a database or has no tables
