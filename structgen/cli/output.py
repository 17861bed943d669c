"""What the command line writes: results on stdout (plain or ``--output json``), errors on
stderr as one ``structgen: error:`` line, and the exit code that says which kind of failure.

Exit codes
----------
====  ======================================================================================
0     success
1     an unexpected error (a bug: its traceback is shown)
2     usage error: unknown option, missing argument, a value out of range (click's code)
3     bad input: a schema, grammar, regex, tools or messages file that is missing, unreadable,
      not JSON or not valid (SchemaError, GrammarError, ToolSpecError, ...), a database that
      cannot be read, a prompt too long for the model
4     generation did not complete: the token budget ran out (IncompleteGenerationError), no SQL
      query passed its checks within the retries (SqlGenerationError), or decoding failed
5     the model could not be loaded: the default model is not installed, or ``--model DIR`` is
      not a transformers model directory
130   interrupted (Ctrl-C)
141   stdout was closed before everything was written (``structgen ... | head -c 10``)
====  ======================================================================================

Example
-------
>>> from structgen.errors import SchemaError
>>> error = as_cli_error(SchemaError("'type' must be a string", pointer="/properties/a"))
>>> error.exit_code, error.format_message()
(3, "'type' must be a string (at JSON pointer '/properties/a')")
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

import click

from structgen.errors import (CompileError, ContextLengthError, DecodingError, GrammarError, MessagesError,
                              ModelNotInstalledError, OptionError, SchemaError, SqlError, StructgenError)

__all__ = ["StdoutClosed", "EXIT_OK", "EXIT_INTERNAL", "EXIT_USAGE", "EXIT_INPUT", "EXIT_INCOMPLETE", "EXIT_MODEL",
           "EXIT_INTERRUPTED", "EXIT_CODES_HELP", "CliError", "as_cli_error", "result_record", "error_record",
           "write_json_line", "write_text", "rows_text"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INCOMPLETE = 4
EXIT_MODEL = 5
EXIT_INTERRUPTED = 130

#: the epilog of ``structgen --help`` (click rewraps paragraphs; \b keeps this one as written)
EXIT_CODES_HELP = """\b
Exit codes:
  0    success
  1    an unexpected error (a bug; its traceback is shown)
  2    usage error (unknown option, missing argument, value out of range)
  3    bad input (schema, grammar, regex, tools, messages or database:
       missing, unreadable, not JSON or not valid; prompt too long)
  4    generation did not complete (token budget, SQL retries, decoding)
  5    the model could not be loaded
  130  interrupted
  141  stdout closed early (e.g. piped into head)"""


class CliError(click.ClickException):
    """An error the command line reports as ``structgen: error: ...`` with its own exit code.

    ``record`` is extra machine-readable detail for ``--output json`` (e.g. the partial text of
    an incomplete generation).
    """

    def __init__(self, message: str, exit_code: int = EXIT_INPUT, *, kind: str = "InputError",
                 record: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.kind = kind
        self.record = record or {}

    def show(self, file: IO[Any] | None = None) -> None:
        # The first line says what failed; a structgen error's own detail (a caret under the
        # offending text, a "Did you mean") follows as it is.
        click.echo(f"structgen: error: {self.format_message()}", file=file or sys.stderr)


def as_cli_error(error: BaseException) -> CliError:
    """The :class:`CliError` (message, exit code) for a structgen error, by its kind."""
    kind = type(error).__name__
    if isinstance(error, CliError):
        return error
    if isinstance(error, OptionError):
        return CliError(str(error), EXIT_USAGE, kind=kind)
    if isinstance(error, ModelNotInstalledError):
        return CliError(str(error), EXIT_MODEL, kind=kind)
    if isinstance(error, DecodingError):  # IncompleteGenerationError, SqlGenerationError
        record: dict[str, Any] = {}
        if hasattr(error, "partial_text"):
            record["partial_text"] = error.partial_text
        if getattr(error, "stats", None) is not None:
            record["stats"] = stats_record(error.stats)
        if hasattr(error, "attempts"):
            record["attempts"] = [{"sql": a.sql, "error": a.error} for a in error.attempts]
        return CliError(str(error), EXIT_INCOMPLETE, kind=kind, record=record)
    if isinstance(error, (SchemaError, GrammarError, SqlError, MessagesError, ContextLengthError, CompileError)):
        return CliError(str(error), EXIT_INPUT, kind=kind)
    if isinstance(error, StructgenError):
        return CliError(str(error), EXIT_INPUT, kind=kind)
    raise TypeError(f"not a structgen error: {error!r}")


def stats_record(stats: Any) -> dict[str, Any]:
    """A :class:`~structgen.GenerationStats` as JSON-ready numbers (per-pass steps left out)."""
    return {
        "forward_passes": stats.forward_passes,
        "prefill_tokens": stats.prefill_tokens,
        "new_tokens": stats.new_tokens,
        "drafted_tokens": stats.drafted_tokens,
        "accepted_tokens": stats.accepted_tokens,
        "rejected_drafts": stats.rejected_drafts,
        "acceptance_rate": round(stats.acceptance_rate, 4),
        "passes_per_token": round(stats.passes_per_token, 4),
        "seconds": round(stats.seconds, 4),
        "speculation": stats.speculation,
        "by_source": {name: {"drafted_tokens": d.drafted_tokens, "accepted_tokens": d.accepted_tokens,
                             "rejected_drafts": d.rejected_drafts} for name, d in stats.by_source.items()},
        "passes_by_source": dict(stats.passes_by_source),
    }


def result_record(command: str, result: Any) -> dict[str, Any]:
    """The ``--output json`` object of a result: what each command prints plainly, plus
    ``text``, ``finish_reason``, ``usage`` and ``stats``.

    Example
    -------
    >>> from structgen.decoding.stats import GenerationStats
    >>> from structgen.tasks.results import TextResult
    >>> r = TextResult(text="yes", token_ids=[10407], finish_reason="grammar",
    ...                stats=GenerationStats(forward_passes=1, prefill_tokens=30, new_tokens=1))
    >>> record = result_record("regex", r)
    >>> record["text"], record["finish_reason"], record["usage"]
    ('yes', 'grammar', {'prompt_tokens': 30, 'completion_tokens': 1})
    """
    record: dict[str, Any] = {"command": command}
    if command == "json":
        record["value"] = result.value
    elif command == "sql":
        record["sql"] = result.text
        if result.rows is not None:
            record["columns"] = result.columns
            record["rows"] = [list(row) for row in result.rows]
        record["attempts"] = [{"sql": a.sql, "error": a.error} for a in result.attempts]
    elif command == "tools":
        record["message"] = result.message
        record["format"] = result.format
    elif command == "tag":
        record["segments"] = [{"kind": s.kind, "pointer": s.pointer, "text": s.text, "value": s.value, "tag": s.tag}
                              for s in result.segments]
    if getattr(result, "reasoning", None) is not None:
        record["reasoning"] = result.reasoning
        record["reasoning_tokens"] = result.reasoning_tokens
    record["text"] = result.text
    record["finish_reason"] = result.finish_reason
    record["usage"] = {"prompt_tokens": result.stats.prefill_tokens, "completion_tokens": result.stats.new_tokens}
    record["stats"] = stats_record(result.stats)
    return record


def error_record(error: CliError) -> dict[str, Any]:
    """The ``--output json`` object of a failure: ``{"error": {"type", "message", "exit_code"}}``
    plus what the error kept (``partial_text``, ``attempts``, ``stats``)."""
    return {"error": {"type": error.kind, "message": error.format_message(), "exit_code": error.exit_code},
            **error.record}


class StdoutClosed(Exception):
    """stdout's reader went away (``structgen ... | head``). Not an ``OSError``: click's own
    handler turns a broken pipe into exit code 1 before :func:`structgen.cli.main` could say
    141, and this passes through it."""


def write_json_line(record: Any, file: IO[str] | None = None) -> None:
    """One JSON document on one line, flushed (a reader of a stream sees it at once)."""
    write_text(json.dumps(record, ensure_ascii=False, default=_jsonable) + "\n", file)


def write_text(text: str, file: IO[str] | None = None) -> None:
    out = file or sys.stdout
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError as err:
        raise StdoutClosed("stdout was closed") from err


def _jsonable(value: Any) -> Any:
    # SQLite rows may hold bytes (BLOBs): as hex, the way sqlite3's own shell shows them.
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def rows_text(columns: list[str], rows: list[tuple]) -> str:
    r"""Query rows as tab-separated lines under a header of column names (NULL for None).

    Example
    -------
    >>> rows_text(["name", "age"], [("Ada", 36), ("Grace", None)]).splitlines()
    ['name\tage', 'Ada\t36', 'Grace\tNULL']
    """
    def cell(value: Any) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value).hex()
        return str(value).replace("\t", " ").replace("\n", " ")

    lines = ["\t".join(columns)] + ["\t".join(cell(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"
