"""A fuzz harness for the doors (issue 60, item 6): Hypothesis properties over every entry point a
caller (a client of a server, a user at a shell, an engine) hands values to.

The property, for every door: whatever the input, the call returns normally or raises a
:class:`~structgen.errors.StructgenError`; never a builtin exception (``TypeError``,
``ValueError``, ``RecursionError``, ``UnicodeError``, ``IndexError``, ...). The command line
exits with one of its documented codes (0, 2, 3, 4, 5, 130, 141) and never prints a traceback.
Where a door returns, a few checks say that what it returned is right (masks equal a fresh
matcher's, text is UTF-8, a boolean option is a boolean), since a silently wrong answer is the
other way to fail.

The doors:

- the serving constraint parser (``read_constraint``) and its compile (``compile_constraint``
  over the 256-byte vocabulary ``BYTES``; inputs are kept small so each compile is fast);
- the command line: its readers (:mod:`structgen.cli.inputs`) in-process, and ``main(argv)``
  with stdin bytes. A CLI example never loads a model: every ``main`` call ends its options with
  ``--model`` naming a folder that does not exist, so an input that passes every check exits 5
  before anything is loaded;
- the processors' inputs: :class:`~structgen.integrations.rows.BatchRows` (a schedule of
  add/remove/move/mask with any row indices, outputs and logits) and
  :class:`structgen.LogitsProcessor` (input ids and scores of any rank, dtype and width);
- the tool and chat-message readers (``read_tools``, ``read_tool_choice``, ``chat_messages``,
  ``tool_prompt`` and the assistant ``tool_calls`` reader).

Every test has a fixed, derandomized budget (:func:`fuzz`), so ``make test`` runs the same
examples everywhere; the file runs in about 20 seconds when every property holds.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import io
import itertools
import json
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import click
import numpy as np
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import structgen
from structgen.cli import inputs as cli_inputs
from structgen.cli import main as cli_main
from structgen.cli.commands import Run, grammar_command, json_command, regex_command, tools_command
from structgen.decoding.config import DecodeConfig
from structgen.engine.vocab import Vocabulary
from structgen.errors import StructgenError
from structgen.frontends.tool_calls import FORMATS, read_tool_choice, read_tools
from structgen.integrations.constraints import BYTES, SQL_DIRS_VARIABLE, compile_constraint, read_constraint
from structgen.integrations.rows import BatchRows
from structgen.tasks import tool_calls as tool_tasks
from structgen.tasks.chat import chat_messages, content_text, with_instruction


def fuzz(examples: int) -> settings:
    """A test's fixed budget: ``examples`` examples, the same ones on every run (derandomized, no
    example database), no deadline (the first compile of a kind warms caches)."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=False)


#: What the command line documents as its exit codes (1 is a bug: a traceback).
EXIT_CODES = {0, 2, 3, 4, 5, 130, 141}
REFUSED = object()


def door(call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, or :data:`REFUSED` when it raised a typed structgen error. Any other
    exception propagates: that is the failure this file looks for."""
    try:
        return call(*args, **kwargs)
    except StructgenError:
        return REFUSED


def cli_door(call: Any, *args: Any, **kwargs: Any) -> Any:
    """:func:`door` for the command line's readers, which also refuse with ``click``'s errors
    (a ``CliError`` or a ``UsageError``) carrying a documented exit code."""
    try:
        return call(*args, **kwargs)
    except StructgenError:
        return REFUSED
    except click.ClickException as err:
        assert err.exit_code in EXIT_CODES, (err.exit_code, err.format_message())
        return REFUSED


def is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ============================================================================== strategies
#
# Values that reach the interesting corners: the special strings (NUL, lone surrogates, strings
# where booleans or keywords belong), integers past int64 and past Python's 4,300-digit
# conversion limit, NaN and infinities, generators and tuples where lists belong, None where a
# value belongs, and nesting far deeper than the recursion limit.

SPECIAL_TEXT = ["", " ", "\x00", "a\x00b", "\ud800", "\udcff", "x\udfffy", "\udc80\udc81", "false", "true", "0",
                "-1", "1e999", "null", "None", "NaN", "auto", "required", "none", "hermes", "json", "llama3",
                "start", "object", "string", "function", "\u2028", "\r\n", "é", "\U0001F600", "{", "[", '"', "\\",
                "<tool_call>"]


class Huge(int):
    """An int past Python's 4,300-digit ``str()`` limit that Hypothesis can still print."""

    def __repr__(self) -> str:
        return "Huge(10**5000)"


HUGE_INTS = [2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), Huge(10**5000)]

texts = st.one_of(st.sampled_from(SPECIAL_TEXT), st.text(st.characters(exclude_categories=()), max_size=10))
ints = st.one_of(st.integers(-3, 300), st.sampled_from(HUGE_INTS), st.integers())
# no subnormals: the model sets torch.set_flush_denormal(True), which Hypothesis cannot draw under
floats = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts)


class gen:  # noqa: N801 - it reads as the call that makes it
    """An iterator where a list belongs: consumed once, no ``len``, no indexing (what a generator
    expression gives), printed as the call that made it."""

    def __init__(self, items: list) -> None:
        self.items = list(items)
        self._it = iter(self.items)

    def __iter__(self) -> "gen":
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def __repr__(self) -> str:
        return f"gen({self.items!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


class _Shown:
    """A short repr for a value nested too deep for Hypothesis to print."""

    shown = ""

    def __repr__(self) -> str:
        return self.shown

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.shown)


class DeepList(_Shown, list):
    pass


class DeepDict(_Shown, dict):
    pass


def nested(depth: int, shape: str, leaf: Any = 1) -> Any:
    """``leaf`` inside ``depth`` lists or objects, built without recursion (the outermost a
    ``list``/``dict`` subclass that prints as the call that made it)."""
    value = leaf
    for _ in range(depth - 1):
        value = [value] if shape == "list" else {"a": value}
    outer = DeepList([value]) if shape == "list" else DeepDict(a=value)
    outer.shown = f"nested({depth}, {shape!r})"
    return outer


def nested_text(depth: int, shape: str) -> str:
    return "[" * depth + "1" + "]" * depth if shape == "list" else '{"a":' * depth + "1" + "}" * depth


def as_json(value: Any, *, ensure_ascii: bool = True) -> str:
    """``value`` as JSON text, whatever it holds: integers of any length written out (past the
    4,300-digit limit), other objects by their repr, too deep as a truncated text."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(value, default=repr, ensure_ascii=ensure_ascii)
    except (ValueError, TypeError, RecursionError):  # keys that are not strings, nesting
        return "[" * 2_000
    finally:
        sys.set_int_max_str_digits(limit)


DEPTHS = st.sampled_from([2, 40, 300, 1_100, 5_000, 100_000])
deep_values = st.builds(nested, DEPTHS, st.sampled_from(["list", "dict"]))
deep_texts = st.builds(nested_text, DEPTHS, st.sampled_from(["list", "dict"]))

json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(texts, inner, max_size=4)),
                           max_leaves=10)
#: what a Python caller can pass where JSON belongs: tuples, generators, bytes, sets, keys that are
#: not strings
python_values = st.recursive(
    st.one_of(scalars, st.binary(max_size=4), st.just(object()), st.just(b"\xff")),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.builds(gen, st.lists(inner, max_size=3)),
                            st.frozensets(st.integers(0, 3), max_size=2),
                            st.dictionaries(st.one_of(texts, st.integers(-2, 2), st.none()), inner, max_size=3)),
    max_leaves=8)
anything = st.one_of(json_values, python_values, deep_values)

# -- JSON schemas: mostly real keywords with good or bad values, so compiles go deep

TYPES = st.one_of(st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object",
                                   "strnig", ["string", "null"], [], ["integer", "integer"]]), scalars)
PATTERNS = st.one_of(st.sampled_from(["^[a-z]+$", "a|b", "(", "[z-a]", "\\d{2,3}", "\\p{L}", "(?=a)", "\ud800",
                                      "a\x00", "x{3}", "a" * 40]), st.text("ab()[]{}|*+?.^$\\-0123,", max_size=12))


def schemas(depth: int = 2) -> st.SearchStrategy:
    leaf = st.one_of(st.sampled_from([{}, True, False, {"type": "string"}, {"type": "integer"},
                                      {"enum": ["a", 1, None]}, {"const": "x"}, {"$ref": "#"},
                                      {"$ref": "#/$defs/missing"}, {"format": "date-time"}]),
                     st.fixed_dictionaries({"type": TYPES}))
    if depth == 0:
        return leaf
    inner = schemas(depth - 1)
    keyword = st.fixed_dictionaries({}, optional={
        "type": TYPES, "properties": st.dictionaries(texts, inner, max_size=3), "required": st.one_of(
            st.lists(texts, max_size=3), scalars, st.builds(gen, st.lists(texts, max_size=2))),
        "items": inner, "prefixItems": st.lists(inner, max_size=2), "enum": st.lists(json_values, max_size=3),
        "const": json_values, "pattern": PATTERNS, "minLength": ints, "maxLength": ints, "minimum": st.one_of(
            ints, floats), "maximum": st.one_of(ints, floats), "multipleOf": st.one_of(ints, floats),
        "minItems": ints, "maxItems": ints, "anyOf": st.lists(inner, max_size=3), "oneOf": st.lists(
            inner, max_size=2), "allOf": st.lists(inner, max_size=2), "not": inner,
        "additionalProperties": st.one_of(st.booleans(), inner, texts), "format": texts,
        "$defs": st.dictionaries(texts, inner, max_size=2), "$ref": st.sampled_from(
            ["#", "#/$defs/a", "#/properties/a", "http://example.com/s", "#/$defs/\ud800"]),
        "minProperties": ints, "maxProperties": ints, "uniqueItems": st.one_of(st.booleans(), texts)})
    return st.one_of(leaf, keyword)


SCHEMAS = st.one_of(schemas(), anything, st.builds(gen, st.lists(schemas(0), max_size=2)))
REGEXES = st.one_of(PATTERNS, st.sampled_from(["(?P<x>a)(?P=x)", "a{2,1}", "a{99999999999999999999}", "\\x00",
                                               "[\ud800-\udfff]", "\\N{NOPE}", "(?i)a", "a**", "(?<=a)b", "\\1",
                                               "a{0,65536}", "(a|b)*a(a|b){12}", "\\U0010ffff", "[^\\x00-\\xff]"]),
                    texts)
GRAMMARS = st.one_of(
    st.sampled_from(['start: "a"', 'start: start "a" | "b"', "start: x\nx: /[0-9]+/", "start: a\na: b\nb: a",
                     'start: "(" start ")" | "x"', "%import common.WS\nstart: WS", "%import nope.X\nstart: X",
                     'start: "a"~99999999999999999999', 'start: "a"~3..1', 'start: /(?<=a)b/', 'start: "\x00"',
                     "start: \ud800", 'start: "a" | ', "start: ", "?start: a*\na: \"x\"", 'start: "a"{2,3}']),
    st.builds(lambda body: "start: " + body, st.text('ab"/|()*+?~.:[]{}0123 \n%_' + "xy", max_size=30)),
    texts)
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
NAMES = st.one_of(st.sampled_from(["f", "get_weather", "math.factorial", "a-b", "x" * 65, "", "bad name", "\ud800"]),
                  scalars)


def tools_lists() -> st.SearchStrategy:
    function = st.fixed_dictionaries({}, optional={"name": NAMES, "description": st.one_of(texts, scalars),
                                                   "parameters": st.one_of(schemas(1), scalars, python_values)})
    tool = st.one_of(st.fixed_dictionaries({"type": st.one_of(st.just("function"), texts)},
                                           optional={"function": st.one_of(function, scalars)}),
                     function, scalars)
    return st.one_of(st.just(WEATHER), st.lists(tool, max_size=3), st.builds(gen, st.lists(tool, max_size=2)),
                     st.builds(tuple, st.lists(tool, max_size=2)), anything)


TOOLS = tools_lists()
TOOL_CHOICES = st.one_of(st.sampled_from(["auto", "required", "none", "Auto", "", "f", None, 1, ["auto"]]),
                         st.fixed_dictionaries({"type": st.one_of(st.just("function"), texts)},
                                               optional={"function": st.one_of(
                                                   st.fixed_dictionaries({"name": NAMES}), scalars)}),
                         texts)
BOOLEAN_ISH = st.one_of(st.booleans(), st.sampled_from(["false", "true", "False", "0", "", 0, 1, 2, None, [], [False],
                                                        0.0, "no"]))

# ============================================================================ (a) serving


def _workdir() -> Path:
    """A folder for the files the examples write (removed at exit), with a tiny real SQLite
    database and a file that is not one."""
    folder = Path(tempfile.mkdtemp(prefix="structgen-fuzz-doors-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    con = sqlite3.connect(folder / "shop.sqlite")
    con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, price REAL)")
    con.commit()
    con.close()
    (folder / "notes.txt").write_text("not a database")
    return folder


WORKDIR = _workdir()


def sql_paths(folder: Path) -> st.SearchStrategy:
    return st.one_of(st.sampled_from([str(folder / "shop.sqlite"), str(folder / "notes.txt"), str(folder),
                                      str(folder / "missing.sqlite"), str(folder / "a\x00b.sqlite"),
                                      str(folder / "\ud800.sqlite"), str(folder / ".." / "shop.sqlite"),
                                      str(folder / ("x" * 300)), "", "\x00", "/"]),
                     st.builds(lambda name: str(folder / name), texts))


def constraint_objects(folder: Path) -> st.SearchStrategy:
    """Request objects: one kind with good or bad values and options, or several, or none."""
    json_text = st.builds(as_json, json_values)
    values = {
        "json_schema": st.one_of(SCHEMAS, st.builds(as_json, schemas()), deep_texts,
                                 json_text),
        "grammar": st.one_of(GRAMMARS, scalars),
        "regex": st.one_of(REGEXES, scalars),
        "sql": st.one_of(sql_paths(folder), scalars),
        "tools": st.one_of(TOOLS, st.builds(as_json, tools_lists()), deep_texts),
        "response_format": st.one_of(
            st.fixed_dictionaries({"type": st.sampled_from(["json_schema", "json_object", "text"])},
                                  optional={"json_schema": st.one_of(st.fixed_dictionaries(
                                      {"schema": SCHEMAS}, optional={"name": texts, "strict": BOOLEAN_ISH}),
                                      scalars)}),
            deep_texts, json_text, anything),
    }
    options = {
        "json_schema": {"whitespace": st.one_of(st.sampled_from(["compact", "flexible", "spaced", "wide"]), scalars)},
        "response_format": {"whitespace": st.sampled_from(["compact", "flexible", 5])},
        "grammar": {"start": st.one_of(st.sampled_from(["start", "s", "x", ""]), scalars)},
        "regex": {}, "sql": {},
        "tools": {"tool_choice": TOOL_CHOICES, "parallel_tool_calls": BOOLEAN_ISH,
                  "format": st.one_of(st.sampled_from(["hermes", "llama3", "json", "xml"]), scalars)},
    }
    one_kind = st.sampled_from(sorted(values)).flatmap(lambda kind: st.fixed_dictionaries(
        {kind: values[kind]}, optional=options[kind]))
    several = st.dictionaries(st.one_of(st.sampled_from(sorted(values) + ["start", "bogus"]), texts), anything,
                              max_size=3)
    return st.one_of(one_kind, one_kind, one_kind, several)


@contextlib.contextmanager
def sql_dirs(folder: Path) -> Iterator[None]:
    """The operator's ``STRUCTGEN_SQL_DIRS`` naming ``folder``, for the length of one example."""
    before = os.environ.get(SQL_DIRS_VARIABLE)
    os.environ[SQL_DIRS_VARIABLE] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SQL_DIRS_VARIABLE, None)
        else:
            os.environ[SQL_DIRS_VARIABLE] = before


def check_constraint(spec: Any, folder: Path) -> None:
    """Read ``spec``; when it is read, compile it over ``BYTES``; when that compiles, a ``tools``
    constraint's ``parallel_tool_calls`` was a boolean (``"false"`` is not read as true)."""
    constraint = door(read_constraint, spec)
    if constraint is REFUSED:
        return
    with sql_dirs(folder):
        compiled = door(compile_constraint, constraint, BYTES)
    if compiled is REFUSED:
        return
    assert compiled.matcher() is not None
    if constraint.kind == "tools":
        parallel = constraint.option("parallel_tool_calls", True)
        assert isinstance(parallel, bool), f"parallel_tool_calls={parallel!r} was read as {bool(parallel)}"


@fuzz(250)
@given(spec=constraint_objects(WORKDIR))
@example(spec={"response_format": nested_text(100_000, "list")})  # the repros
@example(spec={"sql": str(WORKDIR / "a\x00.sqlite")})
@example(spec={"tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": "false"})
@example(spec={"json_schema": gen([{"type": "string"}])})
@example(spec={"json_schema": {"": None, 0: None}})  # found by this file: keys JSON cannot sort
@example(spec={"response_format": nested(5_000, "list")})
@example(spec={"sql": str(WORKDIR / ("x" * 300))})
def test_serving_constraint_objects(spec):
    check_constraint(spec, WORKDIR)


@fuzz(200)
@given(text=st.one_of(
    deep_texts,
    st.builds(lambda n: '{"regex": "a", "x": ' + "1" * n + "}", st.sampled_from([10, 4300, 4301, 10_000])),
    st.builds(lambda n: '{"json_schema": {"const": ' + "9" * n + "}}", st.sampled_from([20, 4301])),
    st.builds(lambda inner: '{"json_schema": ' + inner + "}", deep_texts),
    st.builds(lambda inner: '{"tools": ' + json.dumps(inner) + "}", deep_texts),
    st.sampled_from(['{"regex": "\\ud800"}', '{"regex": "a\\u0000"}', '{"grammar": "start: \\"\\ud800\\""}',
                     '{"json_schema": {"enum": [NaN, Infinity]}}', '{"json_schema": {"const": -Infinity}}',
                     '{"regex": "a"', "", "null", "[]", '"regex"', '{"regex": 1e999}',
                     '{"sql": "\\u0000"}', '{"json_schema": {"type": "string", "pattern": "\\ud800"}}',
                     '{"\\ud800": 1}', '{"regex": "a", "regex": "b"}']),
    texts,
    st.builds(partial(as_json, ensure_ascii=False), json_values)))
@example(text='{"json_schema": {"const": ' + "9" * 4301 + "}}")
@example(text='{"grammar": "start: \\"\\ud800\\""}')
def test_serving_constraint_text(text):
    check_constraint(text, WORKDIR)


# ============================================================================ (b) command line


@contextlib.contextmanager
def std_streams(stdin: bytes, errors: str) -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """stdin, stdout and stderr as a process has them: stdin and stdout UTF-8 with ``errors``
    (``"strict"`` under a UTF-8 locale, ``"surrogateescape"`` under the C locale or Python's UTF-8
    mode), stderr ``backslashreplace`` (always). Yields the bytes written to stdout and stderr."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    streams = (io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors=errors),
               io.TextIOWrapper(out, encoding="utf-8", errors=errors, write_through=True),
               io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True))
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        for stream in streams:  # the buffers outlive their text wrappers
            with contextlib.suppress(ValueError):
                stream.flush()
            with contextlib.suppress(ValueError):
                stream.detach()


@contextlib.contextmanager
def process_state() -> Iterator[None]:
    """What ``main`` changes in this process, put back: the ``structgen`` logger (it sends it to
    stderr and stops propagation) and torch's thread count (``--threads``)."""
    logger = logging.getLogger("structgen")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def run_cli(argv: list[str], stdin: bytes = b"", errors: str = "strict") -> tuple[int, str, str]:
    """``structgen.cli.main(argv)`` in this process: (exit code, stdout, stderr). An exception
    other than ``SystemExit`` propagates (in a real process: a traceback and exit code 1)."""
    with process_state(), std_streams(stdin, errors) as (out, err):
        try:
            cli_main(argv)
        except SystemExit as exit:
            code = exit.code
        else:  # main always exits
            raise AssertionError("structgen.cli.main returned without exiting")
    return code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")


def assert_documented(code: Any, stdout: str, stderr: str) -> None:
    assert code in EXIT_CODES, (code, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-2000:]


#: What the command line can receive in argv: any text, with the lone surrogates that undecodable
#: bytes become (U+DC80..U+DCFF) but no NUL (an exec argument cannot hold one).
ARGV_TEXT = st.one_of(st.sampled_from([s for s in SPECIAL_TEXT if "\x00" not in s and not any(
    0xD800 <= ord(c) < 0xDC80 or 0xDD00 <= ord(c) <= 0xDFFF for c in s)]),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00") | st.characters(
        min_codepoint=0xDC80, max_codepoint=0xDCFF), max_size=10))
NUMBER_TEXT = st.one_of(st.builds(str, ints), st.builds(repr, floats), st.sampled_from(
    ["", "abc", "1.5", "-0", "0x10", "1_000", "\u0663", " 7 ", "1e309", "nan", "-inf", "inf", "+5", "9" * 5000]))
NO_MODEL = "--model=/nonexistent/structgen-fuzz-no-model"


def file_contents() -> st.SearchStrategy:
    """What a schema, tools, messages or grammar file (or stdin) may hold, as bytes."""
    texts_ = st.one_of(
        st.builds(as_json, st.one_of(schemas(), tools_lists(), json_values)),
        deep_texts, GRAMMARS, ARGV_TEXT,
        st.sampled_from(['{"a":\n', "[1,\n", "{\r\n", '{"type": "string"}\n\n', "\n\n\n{", "\u2028{", "1" * 5000,
                         '{"enum": [' + "9" * 4400 + "]}", '[{"role": "user", "content": "hi"}]',
                         '[{"role": "user"}]', '[{"role": "assistant", "tool_calls": [{"function": {"name": "f", '
                         '"arguments": null}}]}]', '[{"role": "user", "content": [{"type": "text", "text": 5}]}]']))
    return st.one_of(st.builds(lambda t: t.encode("utf-8", "surrogatepass"), texts_),
                     st.binary(max_size=12), st.sampled_from([b"\xff\xfe\xfa", b"{\xff}", b"\xef\xbb\xbf{}", b""]))


_FILES = itertools.count()


def paths(folder: Path, with_content: Any) -> st.SearchStrategy:
    """A file argument: a file written with fuzzed content, stdin, or a path that is no file."""
    def written(content: bytes) -> str:
        path = folder / f"input{next(_FILES)}.txt"
        path.write_bytes(content)
        return str(path)

    return st.one_of(st.builds(written, with_content), st.just("-"), st.sampled_from(
        [str(folder), str(folder / "missing.json"), str(folder / ("x" * 300)), str(folder / "\udcff.json"), ""]))


def cli_arguments(folder: Path) -> st.SearchStrategy:
    """``argv`` for one command line: a subcommand, fuzzed options (always ``--opt=value``, so a
    value never swallows the next argument), ``--model`` naming no folder, then ``--`` and the
    positional arguments."""
    contents = file_contents()
    option = st.one_of(
        st.builds(lambda name, value: f"--{name}={value}", st.sampled_from(
            ["seed", "max-new-tokens", "temperature", "top-p", "top-k", "threads", "repetition-penalty",
             "no-repeat-ngram-size", "max-retries", "max-rows"]), NUMBER_TEXT),
        st.builds(lambda name, value: f"--{name}={value}", st.sampled_from(
            ["tool-choice", "format", "budget", "output", "start", "system"]), ARGV_TEXT),
        st.builds(lambda p: f"--messages={p}", paths(folder, contents)),
        st.sampled_from(["--stream", "--quiet", "--lenient", "--no-schema-in-prompt", "-i", "--dotall", "--execute",
                         "--no-parallel-calls", "--no-speculate", "--bogus", "-o", "-ojson", "--tool-choice=auto",
                         "--output=json", "--budget=raise"]))
    command = st.sampled_from(["json", "grammar", "regex", "sql", "tools", "bogus"])

    def assemble(command: str, options: list[str], first: str, prompt: list[str]) -> list[str]:
        return [command, *options, NO_MODEL, "--", first, *prompt]

    first = st.one_of(paths(folder, contents), REGEXES.filter(lambda s: "\x00" not in s and is_utf8(s)), ARGV_TEXT,
                      st.just(str(folder / "shop.sqlite")))
    return st.builds(assemble, command, st.lists(option, max_size=4), first, st.lists(ARGV_TEXT, max_size=1))


@fuzz(300)
@given(argv=cli_arguments(WORKDIR), stdin=file_contents(), errors=st.sampled_from(["strict", "surrogateescape"]))
@example(argv=["regex", "--threads=2147483648", NO_MODEL, "--", "a", "Prompt."], stdin=b"", errors="strict")
@example(argv=["json", NO_MODEL, "--", "-", "Prompt."], stdin=b'{""\n', errors="strict")
@example(argv=["json", NO_MODEL, "--", "-", "Prompt."], stdin=b"[" * 5_000, errors="strict")
@example(argv=["tools", NO_MODEL, "--", "-", "Prompt."], stdin=b"1" * 5_000, errors="strict")
@example(argv=["json", "-ojson", NO_MODEL, "--", "-", "Prompt."], stdin=b'{"type": "strnig\\ud800"}',
         errors="surrogateescape")
def test_cli_main_exits_with_a_documented_code(argv, stdin, errors):
    assert_documented(*run_cli(argv, stdin, errors))


NOT_UTF8 = st.one_of(st.sampled_from([b"\xff\xfe\xfa", b"caf\xe9", b"\xed\xa0\x80", b"a\x80b", b"\xc0\xaf"]),
                     st.binary(min_size=1, max_size=12).filter(lambda b: not _decodes(b)))


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@fuzz(60)
@given(stdin=NOT_UTF8, errors=st.sampled_from(["strict", "surrogateescape"]),
       argv=st.sampled_from([["regex", "a"], ["json", "-", "Prompt."], ["grammar", "-", "Prompt."],
                             ["regex", "a", "--system=Be brief."], ["tools", "-", "Prompt."]]))
def test_cli_stdin_that_is_not_utf8_is_bad_input(stdin, errors, argv):
    """A prompt (or file) on stdin that is not UTF-8 is refused as bad input before the model loads
    (exit 2 or 3), not handed to the tokenizer."""
    code, stdout, stderr = run_cli([*argv[:1], NO_MODEL, *argv[1:]], stdin, errors)
    assert_documented(code, stdout, stderr)
    assert code in (2, 3), (code, stderr[-2000:])


@fuzz(150)
@given(seed=NUMBER_TEXT, options=st.lists(st.builds(lambda name, value: f"--{name}={value}", st.sampled_from(
    ["max-new-tokens", "temperature", "top-p", "top-k", "repetition-penalty", "no-repeat-ngram-size"]),
    NUMBER_TEXT), max_size=3), command=st.sampled_from([json_command, grammar_command, regex_command, tools_command]))
@example(seed=str(2**70), options=[], command=regex_command)
def test_cli_options_make_a_decode_config_that_runs(seed, options, command):
    """The options click accepts become a decoding configuration, or a typed refusal; a seed it
    accepts seeds torch's generator, as the decoding loop does (``manual_seed``)."""
    args = [f"--seed={seed}", *options, "FILE", "prompt"]
    try:
        ctx = command.make_context(command.name, args)
    except click.ClickException as err:
        assert err.exit_code in EXIT_CODES
        return
    fields = {f.name for f in dataclasses.fields(Run)}
    run = Run(**{k: v for k, v in ctx.params.items() if k in fields})
    config = door(DecodeConfig, **run.decoding())
    if config is not REFUSED and config.seed is not None:
        try:
            torch.Generator().manual_seed(config.seed)
        except (ValueError, RuntimeError, OverflowError) as err:
            raise AssertionError(f"--seed={seed} was accepted but cannot seed the sampler: {err}") from err


def _written(name: str, text: str) -> str:
    (WORKDIR / name).write_text(text, encoding="utf-8")
    return str(WORKDIR / name)


@fuzz(300)
@given(path=st.one_of(paths(WORKDIR, file_contents()),
                      st.sampled_from([str(WORKDIR / "a\x00b"), str(WORKDIR / "\ud800"), "\x00"])),
       stdin=file_contents(), errors=st.sampled_from(["strict", "surrogateescape"]),
       prompt=st.one_of(st.none(), texts), system=st.one_of(st.none(), texts), with_messages=st.booleans(),
       stdin_taken=st.booleans())
@example(path=_written("trailing.json", '{"a":\n'), stdin=b"", errors="strict", prompt="p", system=None,
         with_messages=False, stdin_taken=False)  # a JSON error just after a trailing newline
@example(path=str(WORKDIR / "a\x00b"), stdin=b"", errors="strict", prompt="p", system=None, with_messages=False,
         stdin_taken=False)
@example(path="-", stdin=b"\xff\xfe\xfa", errors="strict", prompt=None, system=None, with_messages=False,
         stdin_taken=False)
@example(path="-", stdin=b"", errors="strict", prompt="\udcff", system=None, with_messages=False,
         stdin_taken=False)  # a PROMPT argument holding a byte that is not UTF-8
def test_cli_file_and_prompt_readers(path, stdin, errors, prompt, system, with_messages, stdin_taken):
    """``read_text``, ``read_json_file``, ``read_prompt``, ``read_messages`` and ``conversation``:
    a value or a ``CliError``/``UsageError``; text they return is UTF-8."""
    messages_file = path if with_messages else None
    for call in (lambda: cli_inputs.read_text(path, "schema file"),
                 lambda: cli_inputs.read_json_file(path, "schema file"),
                 lambda: cli_inputs.read_prompt(prompt, stdin_taken=stdin_taken),
                 lambda: cli_inputs.read_messages(path),
                 lambda: cli_inputs.conversation(prompt, system=system, messages_file=messages_file,
                                                 stdin_taken=stdin_taken)):
        with std_streams(stdin, errors):
            got = cli_door(call)
        if isinstance(got, str):
            assert is_utf8(got), f"returned text that is not UTF-8: {got!r:.200}"
        elif isinstance(got, list):  # messages: checked the way generation checks them
            door(chat_messages, got)


@fuzz(150)
@given(schema=SCHEMAS, lenient=st.booleans(), pattern=REGEXES, ignore_case=st.booleans(), grammar=GRAMMARS,
       start=st.one_of(st.sampled_from(["start", "x", ""]), texts), tools=TOOLS, choice=TOOL_CHOICES)
@example(schema=gen([{"type": "string"}]), lenient=False, pattern="a", ignore_case=False, grammar='start: "a"',
         start="start", tools=[], choice="auto")
@example(schema={"type": Huge(10**5000)}, lenient=False, pattern="a", ignore_case=False, grammar='start: "a"',
         start="start", tools=[], choice="auto")
def test_cli_checks_before_the_model(schema, lenient, pattern, ignore_case, grammar, start, tools, choice):
    """``check_schema``, ``check_regex``, ``check_grammar`` and ``check_tools``: return, or raise the
    typed error generating would."""
    door(cli_inputs.check_schema, schema, lenient=lenient)
    door(cli_inputs.check_regex, pattern, ignore_case=ignore_case)
    door(cli_inputs.check_grammar, grammar, start=start)
    door(cli_inputs.check_tools, tools, choice)


# ============================================================================ (c) processors

COMPILER = structgen.Compiler(BYTES, disk_cache=False)
COMPILED = {
    "number": COMPILER.regex("[0-9]{1,4}(\\.[0-9]{1,2})?"),
    "parens": COMPILER.grammar_file('start: "(" start ")" | "x"'),
    "object": COMPILER.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                   whitespace="compact", strict=True),
}
#: a second, tiny vocabulary: a grammar over it belongs to another tokenizer
TINY = Vocabulary([b"a", b"b", b"(", b")", None], eos_ids=[4], name="tiny")
COMPILED["tiny"] = structgen.Compiler(TINY, disk_cache=False).regex("a+b")
#: bytes the grammars above can take, so rows walk somewhere before they leave the language
TOKEN_BYTES = b'0123456789.x(){}"a:,'
DTYPES = ["float32", "float32", "float32", "float16", "bfloat16", "float64", "int64", "int32", "bool"]


@dataclasses.dataclass(frozen=True)
class Logits:
    """Logits an engine hands over, printed as what they are: ``shape``, ``dtype`` (a torch dtype's
    name) and the seed of their random values."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    seed: int = 0

    def make(self) -> torch.Tensor:
        values = torch.randn(self.shape, generator=torch.Generator().manual_seed(self.seed))
        dtype = getattr(torch, self.dtype)
        if dtype == torch.bool:
            return values > 0
        return (values * 10).to(dtype) if not dtype.is_floating_point else values.to(dtype)


def logits_specs(width: int) -> st.SearchStrategy:
    """Usually ``(rows, width)`` floats; sometimes rank 0, 1 or 3, integer or bool, narrower or wider."""
    return st.builds(logits_shaped, rank=st.sampled_from([2, 2, 2, 2, 0, 1, 3]), rows=st.integers(0, 5),
                     cols=st.sampled_from([width, width, width, width - 1, width + 1, 1, 0]),
                     dtype=st.sampled_from(DTYPES), seed=st.integers(0, 9))


def logits_shaped(*, rank: int, rows: int, cols: int, dtype: str, seed: int) -> Logits:
    cols = max(cols, 0)
    return Logits({0: (), 1: (cols,), 2: (rows, cols), 3: (rows, 2, cols)}[rank], dtype, seed)


def _allowed_by(compiled: Any, tokens: list[int], width: int, eos: set[int]) -> set[int]:
    """The columns a fresh matcher walked over ``tokens`` allows (end-of-sequence only once a
    token was refused or nothing is left)."""
    matcher = compiled.matcher()
    for t in tokens:
        if not matcher.advance(t):
            return eos
    bits = np.unpackbits(matcher.mask_words().view(np.uint8), bitorder="little")[:width]
    return set(np.flatnonzero(bits).tolist()) or eos


def _clean(output: Any, size: int) -> list[int] | None:
    """``output`` as token ids when it is what an engine should hand over (ids of the vocabulary,
    then possibly ``-1`` placeholders), else None."""
    if not isinstance(output, (list, tuple)):
        return None
    tokens = list(output)
    while tokens and tokens[-1] == -1 and type(tokens[-1]) is int:
        tokens.pop()
    if all(type(t) is int and 0 <= t < size for t in tokens):
        return tokens
    return None


def _valid_index(index: Any) -> bool:
    return isinstance(index, (int, np.integer)) and not isinstance(index, bool) and int(index) >= 0


def fits(size: int, width: Any) -> bool:
    """Whether logits ``width`` wide can belong to a vocabulary of ``size`` tokens: as wide, or
    padded (models round their logits up, by a few hundred columns at most); far wider is another
    tokenizer's (a byte grammar on SmolLM2's 49,152 logits)."""
    return isinstance(width, int) and size <= width and width - size <= max(size, 1024)


def check_masked(before: torch.Tensor, after: Any, constrained: dict[int, set[int] | frozenset[int]],
                 width: int) -> None:
    """``after`` is ``before`` with each row of ``constrained`` masked to its allowed columns (a
    ``set``; a ``frozenset`` where they are not known exactly: the columns it may allow), every
    other row as it was."""
    assert isinstance(after, torch.Tensor) and after.shape == before.shape and after.dtype == before.dtype, (
        "the logits came back with another shape or dtype")
    in_range = {i: a for i, a in constrained.items() if before.dim() >= 1 and i < before.shape[0]}
    if not in_range:
        assert torch.equal(after, before), "logits of rows without a grammar changed"
        return
    assert before.dim() == 2 and before.dtype.is_floating_point and before.shape[1] == width, (
        f"logits of shape {tuple(before.shape)} and dtype {before.dtype} were masked as if (rows, {width}) floats")
    for r in range(before.shape[0]):
        if r not in in_range:
            assert torch.equal(after[r], before[r]), f"row {r} has no grammar but was masked"
            continue
        kept = torch.isfinite(after[r])
        allowed = set(torch.nonzero(kept).flatten().tolist())
        expected = in_range[r]
        if isinstance(expected, frozenset):
            assert allowed <= expected, f"row {r} allows columns past the vocabulary"
        else:
            assert allowed == expected, f"row {r}: allowed {sorted(allowed)[:20]}, expected {sorted(expected)[:20]}"
        assert torch.equal(after[r][kept].float(), before[r][kept].float()), f"row {r}: allowed logits changed"
        assert bool(torch.all(after[r][~kept] == float("-inf"))), f"row {r}: a masked logit is not -inf"


row_indices = st.one_of(st.integers(0, 4), st.sampled_from([-1, -5, 2**70, -(2**70), None, "1", 1.5, np.int64(2)]))
good_tokens = st.sampled_from(list(TOKEN_BYTES))
bad_tokens = st.sampled_from([None, -1, -7, 256, 257, 2**40, 2**70, 1.5, "1", True, np.int64(5)])
outputs = st.one_of(
    st.lists(good_tokens, max_size=5), st.lists(good_tokens, max_size=5),
    st.lists(st.one_of(good_tokens, bad_tokens), max_size=4),
    st.builds(lambda t: (t + [-1]), st.lists(good_tokens, max_size=3)),  # a placeholder being copied back
    st.builds(tuple, st.lists(good_tokens, max_size=3)),
    st.builds(gen, st.lists(good_tokens, max_size=3)), st.sampled_from([None, "123", 5, b"12"]))
#: what ``add`` is given as a row's matcher: a grammar's (by name), none, or something else
MATCHERS = st.one_of(st.sampled_from(["number", "parens", "object"]), st.sampled_from([None, "tiny", "junk"]))


@st.composite
def batch_schedules(draw: Any) -> tuple[Any, Any, list[tuple]]:
    """(width, eos_ids, operations): the engine's calls on one :class:`BatchRows`."""
    width = draw(st.one_of(st.just(BYTES.size), st.just(BYTES.size), st.just(BYTES.size + 63), st.sampled_from(
        [0, 1, 200, BYTES.size - 1, -1, 2**64, 2**100, 1.5, "300", None, True])))
    eos = draw(st.one_of(st.just([256]), st.just([256]), st.sampled_from(
        [[], [300], [-1], [None], "256", [2**70], (256,), [256.0]]), st.builds(gen, st.just([256]))))
    logits = logits_specs(width if isinstance(width, int) and 0 < width < 2000 else 8)
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("add"), row_indices, MATCHERS, outputs),
        st.tuples(st.just("append"), st.integers(0, 4), st.one_of(good_tokens, good_tokens, bad_tokens)),
        st.tuples(st.just("remove"), row_indices),
        st.tuples(st.just("move"), row_indices, row_indices, st.booleans()),
        st.tuples(st.just("mask"), logits)), max_size=7))
    return width, eos, ops + [("mask", draw(logits))]


@fuzz(300)
@given(schedule=batch_schedules())
@example(schedule=(257, [256], [("add", -1, "number", []), ("mask", Logits((3, 257)))]))  # the repros
@example(schedule=(257, [256], [("add", 0, "number", []), ("mask", Logits((2, 257), "int64"))]))
@example(schedule=(257, [256], [("add", 0, "number", []), ("mask", Logits((257,)))]))
@example(schedule=(257, [256], [("add", 0, "number", [None]), ("mask", Logits((1, 257)))]))
@example(schedule=(200, [256], [("add", 0, "number", []), ("mask", Logits((1, 200)))]))
@example(schedule=(257, [300], [("add", 0, "number", []), ("mask", Logits((1, 257)))]))
@example(schedule=(2**64, [256], [("mask", Logits((0, 8)))]))  # found by this file
@example(schedule=(257, gen([256]), [("add", 0, "number", [46]), ("mask", Logits((1, 257)))]))
def test_batch_rows_take_any_schedule(schedule):
    """A schedule of add/append/remove/move/mask on :class:`BatchRows`: each call returns or raises
    a typed error, and every mask that returns equals a fresh matcher's mask on its rows and leaves
    the other rows alone."""
    width, eos, ops = schedule
    rows = door(BatchRows, width, eos)
    if rows is REFUSED:
        return
    eos_set = {e for e in (eos if isinstance(eos, (list, tuple)) else [256])
               if type(e) is int and isinstance(width, int) and 0 <= e < width}
    # the model: row index -> (compiled grammar, or None for a matcher that does not fit, the live output)
    model: dict[int, tuple[Any, Any]] = {}
    for op in ops:
        if op[0] == "add":
            _, index, name, output = op
            output = list(output) if isinstance(output, list) else output  # the live list, shared with rows
            matcher = COMPILED[name].matcher() if name in COMPILED else name
            if door(rows.add, index, matcher, output) is REFUSED or not _valid_index(index):
                continue
            if matcher is None:
                model.pop(int(index), None)
            else:
                model[int(index)] = (COMPILED.get(name), output)
        elif op[0] == "append":
            _, index, token = op
            if index in model and isinstance(model[index][1], list):
                model[index][1].append(token)
        elif op[0] == "remove":
            if door(rows.remove, op[1]) is not REFUSED and _valid_index(op[1]):
                model.pop(int(op[1]), None)
        elif op[0] == "move":
            _, source, target, swap = op
            if door(rows.move, source, target, swap) is REFUSED:
                continue
            a = model.pop(int(source), None) if _valid_index(source) else None
            b = model.pop(int(target), None) if _valid_index(target) else None
            if a is not None and _valid_index(target):
                model[int(target)] = a
            if swap and b is not None and _valid_index(source):
                model[int(source)] = b
        else:
            logits = op[1].make()
            before = logits.clone()
            after = door(rows.mask, logits)
            if after is REFUSED:
                continue
            constrained: dict[int, set[int] | frozenset[int]] = {}
            for index, (compiled, output) in model.items():
                if compiled is None or not fits(compiled.vocabulary.size, width):
                    # a matcher that is not one; logits narrower than its vocabulary, or far wider
                    assert not (before.dim() >= 1 and index < before.shape[0]), (
                        f"row {index} (a matcher that does not fit these logits) was masked without an error")
                    continue
                size = compiled.vocabulary.size
                tokens = _clean(output, size)
                constrained[index] = (_allowed_by(compiled, tokens, width, eos_set) if tokens is not None
                                      else frozenset(range(size)) | eos_set)
            check_masked(before, after, constrained, width if isinstance(width, int) else -1)


#: what ``structgen.LogitsProcessor`` is given: grammars by name, or something else
PROCESSOR_GRAMMARS = st.one_of(
    st.sampled_from(["number", "parens", "object"]),
    st.lists(st.sampled_from(["number", "parens", "object"]), min_size=1, max_size=3),
    st.sampled_from([[], None, "junk", ["number", "tiny"], "tiny", "generator"]))


def processor_input(name: Any) -> Any:
    if isinstance(name, list):
        return [COMPILED[n] for n in name]
    if name == "generator":
        return gen([COMPILED["number"]])
    return COMPILED.get(name, name) if isinstance(name, str) else name


@st.composite
def processor_calls(draw: Any) -> tuple[Any, int, int, list[tuple[Any, str, list[int]]]]:
    """(grammars, batch, prompt length, calls): a prompt of ``batch`` rows, then per call the scores,
    the shape the input ids are handed over in, and the tokens the rows take next."""
    grammars = draw(PROCESSOR_GRAMMARS)
    size = COMPILED["tiny"].vocabulary.size if grammars == "tiny" else BYTES.size
    width = draw(st.sampled_from([size, size, size + 63, size - 1, 49_152, 1]))
    batch = draw(st.integers(1, 4))
    calls = []
    for _ in range(draw(st.integers(1, 4))):
        scores = draw(st.one_of(st.just(Logits((batch, width))), st.just(Logits((batch, width))), logits_specs(width)))
        shape = draw(st.sampled_from(["ok", "ok", "ok", "ok", "rank1", "rank0", "rank3", "float", "bool", "short"]))
        column = draw(st.lists(st.one_of(good_tokens, st.sampled_from([256, 257, 2**40, -1])), min_size=batch,
                               max_size=batch))
        calls.append((scores, shape, column))
    return grammars, batch, draw(st.integers(0, 3)), calls


def _ids_as(ids: torch.Tensor, shape: str) -> torch.Tensor:
    return {"ok": ids, "rank1": ids.flatten(), "rank0": torch.tensor(7), "rank3": ids[:, None, :],
            "float": ids.float(), "bool": ids.bool(), "short": ids[:, :0]}[shape]


@fuzz(250)
@given(case=processor_calls())
@example(case=("number", 1, 1, [(Logits((1, 49_152)), "ok", [])]))  # another tokenizer's logits (the issue's)
@example(case=("number", 1, 1, [(Logits((1, 257), "int64"), "ok", [])]))
@example(case=("number", 1, 1, [(Logits((257,)), "rank1", [])]))
def test_logits_processor_takes_any_tensors(case):
    """``structgen.LogitsProcessor``: construction and each call return or raise a typed error; a
    call that returns masks each row to its grammar after the prompt (as a fresh matcher does), or
    leaves an ended row alone; a grammar for another tokenizer (logits far wider than its
    vocabulary) is refused."""
    grammars, batch, prompt_len, calls = case
    processor = door(structgen.LogitsProcessor, processor_input(grammars))
    if processor is REFUSED:
        return
    size = processor.vocabulary.size
    eos = set(processor.vocabulary.eos_ids)
    grammar_list = processor_input(grammars)
    grammar_list = grammar_list if isinstance(grammar_list, list) else [COMPILED["number"] if grammars == "generator"
                                                                        else grammar_list]
    ids = torch.full((batch, prompt_len), 10, dtype=torch.long)
    prompt, width_before, exact = None, None, True
    for spec, shape, column in calls:
        scores = spec.make()
        input_ids = _ids_as(ids, shape)
        after = door(processor, input_ids, scores.clone())
        ids = torch.cat([ids, torch.tensor([[t if -2**63 <= t < 2**63 else 0] for t in column])], dim=1)
        if after is REFUSED:
            continue
        assert isinstance(after, torch.Tensor) and after.shape == scores.shape
        width = scores.shape[-1] if scores.dim() else 0
        assert fits(size, width), (
            f"a grammar over {size} tokens masked logits {width} wide: another tokenizer's logits, silently")
        assert input_ids.dim() == 2 and scores.dim() == 2 and input_ids.shape[0] == scores.shape[0], (
            f"input_ids {tuple(input_ids.shape)} and scores {tuple(scores.shape)} were taken without an error")
        if shape != "ok":  # ids of another dtype: which prompt it measures from after that is its own affair
            exact = False
        if not exact:
            continue
        if prompt is None or width != width_before:  # the first call, or logits of another width: a new prompt
            prompt, width_before = input_ids.shape[1], width
        per = input_ids.shape[0] // len(grammar_list)
        constrained = {}
        for r in range(input_ids.shape[0]):
            tail = input_ids[r, prompt:].tolist()
            if any(t in eos for t in tail):
                continue  # ended: left alone
            ok = all(0 <= t < size for t in tail)
            constrained[r] = _allowed_by(grammar_list[r // per], tail, width, eos) if ok else frozenset(range(size))
        check_masked(scores, after, constrained, width)


# ============================================================================ tool and message readers

CONTENTS = st.one_of(texts, st.none(), st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.one_of(st.just("text"), texts)}, optional={"text": st.one_of(texts, scalars)}),
    scalars), max_size=3), scalars, st.builds(gen, st.lists(texts, max_size=2)))
TOOL_CALLS = st.one_of(st.lists(st.one_of(
    st.fixed_dictionaries({}, optional={"type": st.one_of(st.just("function"), texts), "id": st.one_of(texts, scalars),
                                        "function": st.one_of(st.fixed_dictionaries(
                                            {"name": NAMES}, optional={"arguments": st.one_of(
                                                st.builds(as_json, json_values),
                                                json_values, python_values, deep_texts,
                                                st.sampled_from(["{}", '{"a": 1}', "null", "[1]", "1" * 5000,
                                                                 "{", "\ud800"]))}), scalars)}),
    scalars), max_size=2), scalars, st.builds(gen, st.lists(st.just({"function": {"name": "f"}}), max_size=1)))
MESSAGES = st.one_of(st.lists(st.one_of(
    st.fixed_dictionaries({"role": st.one_of(st.sampled_from(["system", "user", "assistant", "tool"]), texts)},
                          optional={"content": CONTENTS, "tool_calls": TOOL_CALLS, "tool_call_id": st.one_of(
                              texts, scalars), "name": st.one_of(texts, scalars)}),
    scalars), max_size=3), anything, st.builds(gen, st.just([{"role": "user", "content": "hi"}])))


@fuzz(200)
@given(tools=TOOLS, choice=TOOL_CHOICES)
@example(tools=gen([{"type": "function", "function": {"name": "f"}}]), choice="auto")
@example(tools=[{"name": "f", "parameters": {"properties": {1: {"type": 5}, "a": {"type": 6}}}}], choice="auto")
def test_tool_readers(tools, choice):
    specs = door(read_tools, tools)
    if specs is not REFUSED:
        door(read_tool_choice, choice, specs)


@fuzz(200)
@given(prompt=st.one_of(texts, MESSAGES), instruction=texts)
@example(prompt=[{"role": "user", "content": [{"type": "text", "text": 5}]}], instruction="x")
@example(prompt=[{"role": "user", "content": "\ud800"}], instruction="x")
@example(prompt=nested(5_000, "list"), instruction="x")  # found by this file
def test_chat_message_readers(prompt, instruction):
    """``chat_messages`` and ``with_instruction``: messages whose text is UTF-8, or a MessagesError."""
    messages = door(chat_messages, prompt)
    if messages is REFUSED:
        return
    for m in messages:
        assert is_utf8(m["content"]), f"message text that is not UTF-8 was accepted: {m['content']!r}"
    door(with_instruction, messages, instruction)
    for i, message in enumerate(prompt if isinstance(prompt, list) else []):
        if isinstance(message, dict):
            door(content_text, message.get("content"), i)


@fuzz(200)
@given(messages=MESSAGES, fmt=st.sampled_from(sorted(FORMATS)))
@example(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [
    {"function": {"name": "f", "arguments": None}}]}], fmt="json")
@example(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [
    {"function": {"name": "f", "arguments": {"a": {1, 2}}}}]}], fmt="json")
@example(messages=[{"role": "system", "content": None, "tool_calls": True}], fmt="hermes")  # found by this file
@example(messages=nested(5_000, "list"), fmt="hermes")
def test_tool_message_readers(messages, fmt):
    """The messages of a tool-call conversation: an assistant's calls have JSON-object arguments,
    and the prompt rendered from them (``tool_prompt``, no chat template) is UTF-8 text."""
    checked = door(tool_tasks._checked_messages, messages)
    if checked is REFUSED:
        return
    for m in checked:
        for call in m.get("tool_calls", []):
            assert isinstance(call["arguments"], dict), (
                f"tool call arguments {call['arguments']!r:.80} accepted; they must be a JSON object")
    specs = read_tools([{"type": "function", "function": {"name": "f"}}])
    rendered = door(tool_tasks.tool_prompt, None, specs, messages, FORMATS[fmt])
    if rendered is not REFUSED:
        assert is_utf8(rendered[0]), "a prompt that is not UTF-8 was rendered"
