"""The ``structgen`` command group and its subcommands: ``json``, ``grammar``, ``regex``, ``sql``
and ``tools``, each a thin layer over the matching :class:`structgen.Generator` method.

Every subcommand runs the same way (:func:`execute`): check the input (no model needed, so a
typo fails in milliseconds), load the model, prepare its vocabulary, compile, generate, print.
The prompt is the last argument, or stdin when it is omitted.

Example
-------
>>> from click.testing import CliRunner
>>> print(CliRunner().invoke(cli, ["--version"]).output, end="")   # doctest: +ELLIPSIS
structgen ...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import click

from structgen.cli.inputs import (STDIN, check_database, check_grammar, check_regex, check_schema,
                                  check_structural_tag, check_tools,
                                  conversation, read_json_file, read_prompt, read_text)
from structgen.cli.loading import load_model
from structgen.frontends.tool_calls import FORMATS as OWN_FORMATS
from structgen.frontends.tool_formats import CALL_FORMATS

#: the names ``--format`` takes
TOOL_FORMAT_NAMES = sorted({*OWN_FORMATS, "llama", *CALL_FORMATS})
from structgen.cli.output import (EXIT_CODES_HELP, EXIT_MODEL, CliError, as_cli_error, error_record,
                                  result_record, rows_text, write_json_line, write_text)
from structgen.cli.progress import Progress, progress_wanted
from structgen.errors import StructgenError
from structgen.tasks.jobs import Retry
from structgen.version import __version__

__all__ = ["cli", "Run", "Task", "execute"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@dataclass(frozen=True)
class Run:
    """The options every generating subcommand shares."""

    model: str | None
    max_new_tokens: int
    temperature: float
    seed: int | None
    speculate: bool
    stream: bool
    output: str
    quiet: bool
    threads: int | None = None
    top_p: float = 1.0
    top_k: int = 0
    system: str | None = None
    messages: str | None = None
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    budget: str = "complete"
    reasoning: bool = False
    thinking_markers: "tuple[str, str] | None" = None
    thinking_budget: int | None = None

    def decoding(self, *, sampling: bool = True) -> dict[str, Any]:
        """The API's decoding keywords (``sampling``: with ``top_p`` and ``top_k``)."""
        options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                                   "seed": self.seed, "speculate": self.speculate,
                                   "repetition_penalty": self.repetition_penalty,
                                   "no_repeat_ngram_size": self.no_repeat_ngram_size, "budget": self.budget}
        if sampling:
            options.update(top_p=self.top_p, top_k=self.top_k)
        if self.reasoning or self.thinking_markers:
            options.update(reasoning=tuple(self.thinking_markers) if self.thinking_markers else True,
                           thinking_budget=self.thinking_budget)
        elif self.thinking_budget is not None:
            raise CliError("--thinking-budget needs --reasoning (or --thinking-markers)")
        return options


@dataclass
class Task:
    """One subcommand's steps, for :func:`execute`.

    ``check()`` refuses bad input before the model loads; ``compile(gen)`` compiles into the
    generator (its return value is handed to ``generate``); ``generate(gen, compiled, stream)``
    returns a result, or with ``stream=True`` an iterator of text chunks ending with the result;
    ``plain(result)`` is what the default output prints, ``after_stream(result)`` what it prints
    after streamed text (e.g. SQL rows).
    """

    command: str
    check: Callable[[], None]
    compile: Callable[[Any], Any]
    generate: Callable[[Any, Any, bool], Any]
    plain: Callable[[Any], str] = lambda result: result.text
    after_stream: Callable[[Any], str] = lambda result: ""
    #: precompute the vocabulary's shared JSON masks (JSON values and tool arguments use them)
    json_masks: bool = False


def execute(run: Run, task: Task) -> None:
    """Check, load, prepare, compile, generate and print ``task`` under ``run``'s options; any
    structgen error leaves as a :class:`CliError` with its exit code (and, under ``--output
    json``, an ``{"error": ...}`` object on stdout)."""
    as_json = run.output == "json"
    line = _Line()
    try:
        task.check()
        with Progress(enabled=progress_wanted(run.quiet)) as progress:
            progress.stage("loading model")
            model, tokenizer = load_model(run.model, threads=run.threads)
            progress.stage("preparing vocabulary")
            gen = _generator(model, tokenizer, json_masks=task.json_masks)
            progress.stage("compiling")
            compiled = task.compile(gen)
            progress.stage("generating")
            if run.stream:
                result = _print_stream(task.generate(gen, compiled, True), progress, as_json, line)
            else:
                result = task.generate(gen, compiled, False)
        if as_json:
            write_json_line(result_record(task.command, result))
        elif run.stream:
            write_text("\n" + task.after_stream(result))
        else:
            write_text(task.plain(result) + "\n")
    except StructgenError as err:
        raise _reported(as_cli_error(err), as_json, line) from err
    except CliError as err:
        raise _reported(err, as_json, line) from None
    except KeyboardInterrupt:
        line.close()
        raise


class _Line:
    """Whether streamed text left stdout in the middle of a line (an error or an interrupt ends
    it first, so the shell prompt and the next reader start on a line of their own)."""

    open = False

    def close(self) -> None:
        if self.open:
            write_text("\n")
            self.open = False


def _reported(error: CliError, as_json: bool, line: _Line) -> CliError:
    line.close()
    if as_json:
        write_json_line(error_record(error))
    return error


def _generator(model: Any, tokenizer: Any, *, json_masks: bool) -> Any:
    """A Generator around the loaded model: its vocabulary is read here, and a tokenizer whose
    vocabulary structgen cannot map exactly is a model problem (exit code 5)."""
    import structgen

    try:
        gen = structgen.Generator(model, tokenizer)
    except StructgenError as err:
        raise CliError(f"cannot use this model: {err}", EXIT_MODEL, kind=type(err).__name__) from err
    if json_masks:
        structgen.prepare_vocabulary(gen.vocabulary)
    return gen


def _print_stream(items: Iterable[Any], progress: Progress, as_json: bool, line: _Line) -> Any:
    """Print a stream's chunks as they come (``--output json``: one ``{"chunk": ...}`` line
    each); return its last item, the result. A ``Retry`` (SQL: the attempt streamed so far was
    refused) ends the line and is reported: on stderr, or as a ``{"retry": ...}`` line."""
    result = None
    for item in items:
        if isinstance(item, str):
            progress.stop()
            if as_json:
                write_json_line({"chunk": item})
            else:
                write_text(item)
                line.open = line.open or bool(item)
        elif isinstance(item, Retry):
            progress.stop()
            if as_json:
                write_json_line({"retry": {"attempt": item.attempt, "error": item.error}})
            else:
                line.close()
                click.echo(f"structgen: retry {item.attempt}: the query was refused ({item.error})", err=True)
        else:
            result = item
    progress.stop()
    return result


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def _options(*, sampling: bool = True, chat: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The shared options of a generating subcommand (``sampling``: ``--top-p``/``--top-k``;
    ``chat``: ``--system``/``--messages``)."""
    options = [
        click.option("-m", "--model", metavar="DIR", default=None,
                     help="A local transformers model directory (config, weights, tokenizer). "
                          "Default: the embedded SmolLM2-135M-Instruct."),
        click.option("--max-new-tokens", type=click.IntRange(min=1), default=256, show_default=True,
                     help="Token budget; the output is complete within it (see --budget)."),
        click.option("--budget", type=click.Choice(["complete", "raise"]), default="complete", show_default=True,
                     help="complete: near the end only tokens that leave a complete output within the budget "
                          "(finish reason 'length' when that cut a value short); raise: running out exits "
                          "with code 4."),
        click.option("-t", "--temperature", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
                     help="0 is greedy; above 0 samples from the constrained distribution."),
        click.option("--seed", type=click.IntRange(-(1 << 63), (1 << 64) - 1), default=None,
                     help="Random seed for sampling (what a torch generator takes: -2**63 to 2**64 - 1)."),
        click.option("--speculate/--no-speculate", default=True, show_default=True,
                     help="Draft and verify several tokens per forward pass (the output is the same)."),
        click.option("--repetition-penalty", type=click.FloatRange(min=0.0, min_open=True), default=1.0,
                     show_default=True, help="transformers' repetition penalty over prompt and output (1: off)."),
        click.option("--no-repeat-ngram-size", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Never repeat an n-gram of this many tokens (0: off)."),
        click.option("--stream", is_flag=True,
                     help="Print the text as it is generated (with -o json: one {\"chunk\": ...} line each)."),
        click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
                     help="json: one JSON object with the result, finish reason, token counts and stats."),
        click.option("-q", "--quiet", is_flag=True, help="No progress display on stderr."),
        click.option("--threads", type=click.IntRange(min=1, max=1024), default=None, metavar="N",
                     help="CPU threads for the model (default: torch's; 1 is often fastest on a busy machine)."),
    ]
    if sampling:
        options += [
            click.option("--top-p", type=click.FloatRange(min=0.0, max=1.0, min_open=True), default=1.0,
                         show_default=True, help="Nucleus sampling mass."),
            click.option("--top-k", type=click.IntRange(min=0), default=0, show_default=True,
                         help="Sample among the k likeliest tokens (0: all)."),
        ]
    if chat:
        options += [
            click.option("--reasoning", is_flag=True,
                         help="Let the model think first, between the chat template's thinking markers "
                              "(<think>...</think>); the result's reasoning holds it."),
            click.option("--thinking-markers", nargs=2, metavar="START END", default=None,
                         help="The thinking markers to use (implies --reasoning), e.g. '<think>' '</think>'."),
            click.option("--thinking-budget", type=click.IntRange(min=0), default=None, metavar="N",
                         help="The most tokens of thinking; then the end marker is forced."),
            click.option("--system", metavar="TEXT", default=None, help="A system prompt."),
            click.option("--messages", metavar="FILE", default=None,
                         help="An OpenAI-style messages JSON list, instead of (or before) PROMPT."),
        ]

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def _prompt(run: Run, prompt: str | None, *, stdin_taken: bool = False) -> Any:
    """The prompt: the text (an argument or stdin), or the chat messages ``--system`` and
    ``--messages`` make."""
    messages = conversation(prompt, system=run.system, messages_file=run.messages, stdin_taken=stdin_taken)
    return read_prompt(prompt, stdin_taken=stdin_taken) if messages is None else messages


# --------------------------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------------------------


@click.group(context_settings=CONTEXT, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, "-V", "--version", prog_name="structgen", message="%(prog)s %(version)s")
def cli() -> None:
    """Structured output from a language model: JSON that follows a schema, text in a grammar or
    a regex, SQLite queries over a real database, OpenAI-style tool calls.

    \b
    structgen json person.json "Extract the person: Ada Lovelace, 36."
    echo "Is water wet?" | structgen regex "yes|no"

    The result goes to stdout; errors and progress to stderr. The prompt is read from stdin
    when it is omitted.
    """


@cli.command("json", context_settings=CONTEXT)
@click.argument("schema_file")
@click.argument("prompt", required=False)
@click.option("--lenient", is_flag=True, help="Relax schema keywords structgen cannot enforce (recorded).")
@click.option("--no-schema-in-prompt", "no_schema", is_flag=True,
              help="Do not show the schema to the model in the prompt.")
@_options()
def json_command(schema_file: str, prompt: str | None, lenient: bool, no_schema: bool, **options: Any) -> None:
    """A JSON value that validates against the schema in SCHEMA_FILE ('-': stdin), printed as
    one line of JSON.

    \b
    structgen json person.json "Extract the person: Ada Lovelace, 36."
    cat page.txt | structgen json person.json
    """
    run = Run(**options)
    state: dict[str, Any] = {}

    def check() -> None:
        state["schema"] = read_json_file(schema_file, "schema file")
        check_schema(state["schema"], lenient=lenient)
        state["prompt"] = _prompt(run, prompt, stdin_taken=schema_file == STDIN)

    def compile(gen: Any) -> None:
        # the options Generator.json compiles with, so that its compile finds this one cached
        gen.compiler.json_schema(state["schema"], whitespace="compact", strict=True, canonical=True, lenient=lenient)

    def generate(gen: Any, _: Any, stream: bool) -> Any:
        return gen.json(state["schema"], state["prompt"], lenient=lenient, include_schema=not no_schema,
                        **run.decoding(), **({"stream": True} if stream else {}))

    execute(run, Task("json", check, compile, generate, json_masks=True))


@cli.command("grammar", context_settings=CONTEXT)
@click.argument("grammar_file")
@click.argument("prompt", required=False)
@click.option("--start", default="start", show_default=True, metavar="RULE", help="The start rule.")
@_options()
def grammar_command(grammar_file: str, prompt: str | None, start: str, **options: Any) -> None:
    """Text in the language of the Lark-style grammar in GRAMMAR_FILE ('-': stdin).

    \b
    structgen grammar arithmetic.lark "Add 2 and 3, times 4."
    """
    run = Run(**options)
    # a path keeps %import relative to the grammar's folder; stdin is the text itself
    source: Any = read_text(STDIN, "grammar") if grammar_file == STDIN else Path(grammar_file)
    return _text_command(run, "grammar", prompt, stdin_taken=grammar_file == STDIN,
                         check=lambda: check_grammar(source, start=start),
                         compile=lambda gen: gen.compiler.grammar_file(source, start=start))


@cli.command("regex", context_settings=CONTEXT)
@click.argument("pattern")
@click.argument("prompt", required=False)
@click.option("-i", "--ignore-case", is_flag=True, help="Match letters in either case.")
@click.option("--dotall", is_flag=True, help="'.' matches a newline too.")
@_options()
def regex_command(pattern: str, prompt: str | None, ignore_case: bool, dotall: bool, **options: Any) -> None:
    """Text that matches PATTERN whole (Python re syntax).

    \b
    structgen regex "\\(\\d{3}\\) \\d{3}-\\d{4}" "Make up a US phone number."
    """
    run = Run(**options)
    return _text_command(run, "regex", prompt,
                         check=lambda: check_regex(pattern, ignore_case=ignore_case, dotall=dotall),
                         compile=lambda gen: gen.compiler.regex(pattern, ignore_case=ignore_case, dotall=dotall))


def _text_command(run: Run, command: str, prompt: str | None, *, check: Callable[[], None],
                  compile: Callable[[Any], Any], stdin_taken: bool = False) -> None:
    """``grammar`` and ``regex``: compile, then :meth:`Generator.text` under the compiled grammar."""
    state: dict[str, Any] = {}

    def checked() -> None:
        check()
        state["prompt"] = _prompt(run, prompt, stdin_taken=stdin_taken)

    def generate(gen: Any, grammar: Any, stream: bool) -> Any:
        return gen.text(grammar, state["prompt"], **run.decoding(), **({"stream": True} if stream else {}))

    execute(run, Task(command, checked, compile, generate))


@cli.command("tag", context_settings=CONTEXT)
@click.argument("spec_file")
@click.argument("prompt", required=False)
@_options()
def tag_command(spec_file: str, prompt: str | None, **options: Any) -> None:
    """Text under the structural tag in SPEC_FILE ('-': stdin): xgrammar's JSON format (free
    text, triggers, tagged segments holding a schema, a regex or a grammar).

    \b
    structgen tag calls.json "What is the weather in Paris?"
    """
    run = Run(**options)
    state: dict[str, Any] = {}

    def check() -> None:
        state["spec"] = read_json_file(spec_file, "structural tag file")
        check_structural_tag(state["spec"])
        state["prompt"] = _prompt(run, prompt, stdin_taken=spec_file == STDIN)

    def compile(gen: Any) -> None:
        # the options Generator.structural compiles with, so that its compile finds this one cached
        gen.compiler.structural_tag(state["spec"], whitespace="compact", strict=True, canonical=True)

    def generate(gen: Any, _: Any, stream: bool) -> Any:
        return gen.structural(state["spec"], state["prompt"], **run.decoding(),
                              **({"stream": True} if stream else {}))

    execute(run, Task("tag", check, compile, generate, json_masks=True))


@cli.command("sql", context_settings=CONTEXT)
@click.argument("database")
@click.argument("question", required=False)
@click.option("--execute", "run_query", is_flag=True, help="Run the query and print its rows too.")
@click.option("--max-retries", type=click.IntRange(min=0), default=4, show_default=True,
              help="Queries written again after one fails its checks.")
@click.option("--max-rows", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Rows returned by --execute at most.")
@_options(sampling=False, chat=False)
def sql_command(database: str, question: str | None, run_query: bool, max_retries: int, max_rows: int,
                **options: Any) -> None:
    """A SQLite query over DATABASE (a SQLite file, only read) that answers QUESTION; it names only
    the database's tables and columns and passes EXPLAIN. With --execute, its rows follow,
    tab-separated under a header.

    \b
    structgen sql shop.sqlite "How many orders are there?" --execute
    """
    run = Run(**options)
    state: dict[str, Any] = {}

    def check() -> None:
        check_database(database)
        state["question"] = read_prompt(question)

    def compile(gen: Any) -> None:
        from structgen.frontends.sql import compile_schema, read_schema

        # the grammar Generator.sql decodes under (strict names, spaces), so its compile is cached
        compile_schema(read_schema(database), gen.compiler, strict=True, whitespace="spaces")

    def generate(gen: Any, _: Any, stream: bool) -> Any:
        return gen.sql(state["question"], database, execute=run_query, max_retries=max_retries, max_rows=max_rows,
                       **run.decoding(sampling=False), **({"stream": True} if stream else {}))

    def rows(result: Any) -> str:
        return rows_text(result.columns, result.rows) if result.rows is not None else ""

    def plain(result: Any) -> str:
        return result.text + ("\n" + rows(result).rstrip("\n") if result.rows is not None else "")

    execute(run, Task("sql", check, compile, generate, plain=plain, after_stream=rows))


@cli.command("tools", context_settings=CONTEXT)
@click.argument("tools_file")
@click.argument("prompt", required=False)
@click.option("--tool-choice", default="auto", show_default=True, metavar="auto|required|none|NAME",
              help="Whether to call: the model decides, at least one call, text only, or calls of tool NAME.")
@click.option("--no-parallel-calls", is_flag=True, help="At most one call.")
@click.option("--format", "call_format", type=click.Choice(TOOL_FORMAT_NAMES), default=None,
              help="How calls are written (a model family's native format). Default: the chat template's "
                   "format, else json.")
@_options()
def tools_command(tools_file: str, prompt: str | None, tool_choice: str, no_parallel_calls: bool,
                  call_format: str | None, **options: Any) -> None:
    """The assistant's next message, given the OpenAI tools list in TOOLS_FILE ('-': stdin):
    text, or tool calls whose arguments validate. Printed as one line of JSON.

    \b
    structgen tools tools.json "What is the weather in Paris?" --tool-choice required
    """
    run = Run(**options)
    state: dict[str, Any] = {}
    choice: Any = tool_choice if tool_choice in ("auto", "required", "none") else {
        "type": "function", "function": {"name": tool_choice}}

    def check() -> None:
        state["tools"] = read_json_file(tools_file, "tools file")
        check_tools(state["tools"], choice)
        state["messages"] = conversation(prompt, system=run.system, messages_file=run.messages,
                                         stdin_taken=tools_file == STDIN) or [
            {"role": "user", "content": read_prompt(prompt, stdin_taken=tools_file == STDIN)}]

    def generate(gen: Any, _: Any, stream: bool) -> Any:
        return gen.tool_calls(state["tools"], state["messages"], tool_choice=choice,
                              parallel_tool_calls=not no_parallel_calls, format=call_format, **run.decoding(),
                              **({"stream": True} if stream else {}))

    def message(result: Any) -> str:
        import json

        return json.dumps(result.message, ensure_ascii=False)

    # the calls' grammar depends on the chat template's format: compiled when generating
    execute(run, Task("tools", check, lambda gen: None, generate, plain=message,
                      after_stream=lambda r: message(r) + "\n", json_masks=True))
