"""The ``structgen`` command line: structured output from a shell.

``structgen`` (the console script) and ``python -m structgen`` are the same program::

    structgen json person.json "Extract the person: Ada Lovelace, 36."    # prints {"name":...}
    cat page.txt | structgen json person.json                               # the prompt from stdin
    structgen grammar arithmetic.lark "Add 2 and 3." --stream               # text as it comes
    structgen regex "(yes|no)" "Is water wet?" -o json                      # result, stats as JSON
    structgen sql shop.sqlite "How many orders are there?" --execute        # query, then rows
    structgen tools tools.json "Weather in Paris?" --tool-choice required  # assistant message

Subcommands (:mod:`structgen.cli.commands`): ``json SCHEMA_FILE [PROMPT]``, ``grammar
GRAMMAR_FILE [PROMPT]``, ``regex PATTERN [PROMPT]``, ``sql DATABASE [QUESTION]``, ``tools
TOOLS_FILE [PROMPT]``; a file may be ``-`` (stdin), and an omitted prompt is read from stdin.
Options shared by all: ``--model DIR`` (a local transformers model directory; default the
embedded SmolLM2-135M-Instruct), ``--max-new-tokens``, ``--temperature``, ``--seed``,
``--no-speculate``, ``--threads``, ``--stream``, ``--output text|json``, ``--quiet``; ``--system`` and
``--messages FILE`` (chat messages instead of a plain prompt) where the task takes them.

The result goes to stdout. ``--output json`` prints one JSON object (the value or text, the
finish reason, token counts, stats); with ``--stream``, one ``{"chunk": ...}`` line per piece
of text first (``{"retry": ...}`` when a SQL attempt is abandoned), then that object. A failure
under ``--output json`` prints ``{"error": {"type", "message", "exit_code"}, ...}``.

Errors go to stderr as ``structgen: error: ...`` (no traceback), and the exit code says which
kind (:mod:`structgen.cli.output`): 0 success, 2 usage error, 3 bad input (a schema, grammar,
regex, tools, messages or database that is missing, unreadable or invalid; a prompt too long),
4 generation did not complete (token budget, SQL retries), 5 the model could not be loaded,
130 interrupted, 141 stdout closed early (``| head``); 1 is a bug (its traceback is shown).

A spinner on stderr names the stage (loading model, preparing vocabulary, compiling,
generating) when stderr is a terminal; ``--quiet`` or a redirected stderr shows none.

Example
-------
>>> import subprocess, sys
>>> out = subprocess.run([sys.executable, "-m", "structgen", "--version"], capture_output=True, text=True)
>>> out.returncode, out.stdout.startswith("structgen ")
(0, True)
"""

from __future__ import annotations

import os
import sys

import click

from structgen.cli.commands import cli
from structgen.cli.output import EXIT_INTERRUPTED, CliError, StdoutClosed
from structgen.cli.progress import log_to_stderr

__all__ = ["cli", "main"]

#: 128 + SIGPIPE, as a shell reports a program whose reader went away (``structgen ... | head``)
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> None:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``) and exit with its code."""
    log_to_stderr()
    try:
        code = cli.main(args=argv, prog_name="structgen", standalone_mode=False)
    except CliError as err:
        err.show()
        code = err.exit_code
    except click.UsageError as err:
        # click's usage lines, then the error in the same shape as every other error
        if err.ctx is not None:
            click.echo(err.ctx.get_usage(), err=True)
            click.echo(f"Try '{err.ctx.command_path} --help' for help.", err=True)
        click.echo(f"structgen: error: {err.format_message()}", err=True)
        code = err.exit_code
    except click.ClickException as err:
        err.show()
        code = err.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("structgen: interrupted", err=True)
        code = EXIT_INTERRUPTED
    except (BrokenPipeError, StdoutClosed):
        # stdout's reader left: no traceback, and no second error when Python flushes at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    sys.exit(code if isinstance(code, int) else 0)
