"""Text to SQL: a question and a SQLite database in, a query that runs out.

The model sees the database's DDL and the question through the chat template and writes under
the strict SQL grammar (:func:`structgen.compile_sql` with ``strict=True``): only real tables
and columns fit where they go. What a grammar cannot check left to right — that a column
belongs to a table named later in ``FROM``, that an alias is declared — is checked when the
query is complete: first :meth:`~structgen.CompiledSql.undeclared_names`, then a read-only
``EXPLAIN`` (and, with ``execute=True``, the query itself). On an error that names an
identifier, decoding backtracks to it and bans the token chosen there; otherwise it samples
again. Each failed attempt is kept in :attr:`SqlResult.attempts`. A query refused for its
resources (a function of :data:`~structgen.frontends.sql.REFUSED_FUNCTIONS`, a value over
:data:`~structgen.frontends.sql.MAX_VALUE_BYTES`, rows over :data:`MAX_RESULT_BYTES`) is not
retried: it raises :class:`~structgen.SqlError` at once.

Example
-------
>>> gen = structgen.Generator()                                              # doctest: +SKIP
>>> r = gen.sql("How many singers are there?", "concert_singer.sqlite", execute=True)  # doctest: +SKIP
>>> r.sql, r.rows, r.retries                                                 # doctest: +SKIP
('SELECT count(*) FROM singer', [(6,)], 0)
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from structgen.decoding.config import DecodeConfig
from structgen.decoding.stats import GenerationStats
from structgen.errors import IncompleteGenerationError, OptionError, SqlError, SqlGenerationError
from structgen.frontends.sql import CompiledSql, ReadOnly, compile_schema, fold_name, lex_sql, read_schema
from structgen.tasks.context import ModelContext
from structgen.tasks.jobs import Decode, Job, run_job
from structgen.tasks.results import Result

__all__ = ["SqlAttempt", "SqlResult", "SqlGenerationError", "backtrack", "generate_sql_with", "locate",
           "resume_point", "sql_job", "sql_prompt", "MAX_RESULT_BYTES"]

#: The most text and blob bytes (characters of text) the rows ``execute=True`` returns may hold
#: in all; a query whose rows hold more raises SqlError (each value is at most
#: :data:`~structgen.frontends.sql.MAX_VALUE_BYTES`, but ``max_rows`` of them could be a GB).
MAX_RESULT_BYTES = 16_000_000


@dataclass
class SqlAttempt:
    """One query that was written and refused: its text and why."""

    sql: str
    error: str


@dataclass(kw_only=True)
class SqlResult(Result):
    """A query that passed the checks (``EXPLAIN``; with ``execute=True`` it also ran).

    ``text`` (also ``sql``) is the query; ``finish_reason`` is how its decoding ended
    (``"stop"``: at its ``;``). ``rows`` and ``columns`` are filled by ``execute=True`` (at most
    ``max_rows`` rows); ``attempts`` are the refused queries before this one, so
    ``retries == len(attempts)`` and ``first_try`` is ``retries == 0``. ``stats`` add up every
    attempt's decoding.
    """

    attempts: list[SqlAttempt] = field(default_factory=list)
    rows: list[tuple] | None = None
    columns: list[str] | None = None

    @property
    def sql(self) -> str:
        """The query (same as ``text``)."""
        return self.text

    @property
    def retries(self) -> int:
        return len(self.attempts)

    @property
    def first_try(self) -> bool:
        return not self.attempts




def sql_prompt(question: str, ddl: str) -> str:
    """The user turn the model gets: the schema, the question and what to answer with."""
    return (f"Here is the schema of a SQLite database:\n\n{ddl}\n\n"
            f"Write one SQLite query that answers this question: {question}\n"
            "Answer with only the SQL query.")


def generate_sql_with(context: ModelContext, question: str,
                      database: "str | os.PathLike[str] | sqlite3.Connection", config: DecodeConfig, *,
                      execute: bool = False, max_retries: int = 4, max_rows: int = 1000,
                      time_limit: float = 10.0, retry_temperature: float = 0.8, strict: bool = True) -> SqlResult:
    """:meth:`structgen.Generator.sql` on ``context`` (see there); ``config`` decodes the first
    attempt (a retry from scratch samples at ``retry_temperature`` at least, seeded
    ``config.seed + attempt``)."""
    return run_job(context, sql_job(context, question, database, config, execute=execute, max_retries=max_retries,
                                    max_rows=max_rows, time_limit=time_limit, retry_temperature=retry_temperature,
                                    strict=strict))


def sql_job(context: ModelContext, question: str, database: "str | os.PathLike[str] | sqlite3.Connection",
            config: DecodeConfig, *, execute: bool = False, max_retries: int = 4, max_rows: int = 1000,
            time_limit: float = 10.0, retry_temperature: float = 0.8, strict: bool = True) -> Job[SqlResult]:
    """:func:`generate_sql_with` as a job (:mod:`structgen.tasks.jobs`): each attempt is one
    decoding, batched with the other jobs' decodings of the same round."""
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise OptionError(f"max_retries must be an int >= 0, not {max_retries!r}")
    schema = read_schema(database)
    compiled = compile_schema(schema, context.compiler, strict=strict, whitespace="spaces")
    prompt_ids = context.chat_ids(sql_prompt(question, schema.ddl))
    vocab = context.vocabulary
    max_new_tokens = config.max_new_tokens

    def ends_query(tokens: list[int]) -> bool:  # a ";" ends the query: nothing but spaces may follow
        return (vocab.tokens[tokens[-1]] or b"").rstrip().endswith(b";")

    attempts: list[SqlAttempt] = []
    total = GenerationStats(prefill_tokens=len(prompt_ids))
    prefix: list[int] = []
    banned: dict[tuple[int, ...], set[int]] = {}
    for attempt in range(max_retries + 1):
        prefix, matcher = resume_point(compiled, prefix, banned)
        temperature = config.temperature if attempt == 0 or prefix else max(config.temperature, retry_temperature)
        run = replace(config, max_new_tokens=max_new_tokens - len(prefix), temperature=temperature,
                      seed=None if config.seed is None else config.seed + attempt)
        try:
            new, finish, stats = yield Decode(matcher, prompt_ids + prefix, run,
                                              banned_first=banned.get(tuple(prefix), ()), stop=ends_query,
                                              output_prefix=prefix,
                                              retry_reason=attempts[-1].error if attempts else "")
        except IncompleteGenerationError as err:
            total.add(err.stats)
            attempts.append(SqlAttempt(vocab.token_bytes(prefix).decode("utf-8", "replace") + err.partial_text,
                                       f"max_new_tokens={max_new_tokens} ran out"))
            prefix = []
            continue
        total.add(stats)
        tokens = prefix + new
        text = vocab.token_bytes(tokens).decode("utf-8")
        error, offset, rows, columns = _check(compiled, database, text, execute, max_rows, time_limit)
        if error is None:
            return SqlResult(text=text, token_ids=tokens, finish_reason=finish, stats=total, attempts=attempts,
                             rows=rows, columns=columns)
        if not any(a.error == error for a in attempts):  # the first time: maybe the table is wrong
            offset = _table_to_blame(compiled, text, error, offset)
        attempts.append(SqlAttempt(text, error))
        prefix = backtrack(vocab, tokens, offset, banned)
    raise SqlGenerationError(
        f"no query passed the checks in {max_retries + 1} attempts; the last: "
        f"{attempts[-1].sql!r}: {attempts[-1].error}", attempts=attempts)


def resume_point(compiled: CompiledSql, prefix: list[int],
                 banned: dict[tuple[int, ...], set[int]]) -> tuple[list[int], Any]:
    """(prefix, a matcher past it) to decode from: ``prefix`` itself, or [] when every token
    legal after it is banned there (backtracking cannot help: start again)."""
    matcher = compiled.matcher()
    for t in prefix:
        matcher.advance(t)
    if prefix and banned.get(tuple(prefix), set()).issuperset(matcher.allowed_token_ids()):
        return [], compiled.matcher()
    return prefix, matcher


def _table_to_blame(compiled: CompiledSql, sql: str, error: str, offset: int | None) -> int | None:
    """For ``no such column: x`` where ``x`` is a column of a table the query does not name, the
    offset of the first table it names instead (the model more often picked the wrong table
    than the wrong column); else ``offset``.

    Example
    -------
    >>> from structgen.frontends.sql import SqlSchema
    >>> shop = CompiledSql(None, SqlSchema({"people": ("name",), "items": ("price",)}, ""), "")
    >>> _table_to_blame(shop, "SELECT avg(price) FROM people", "no such column: price", 11)
    23
    """
    column = re.fullmatch(r"no such column: (\w+)", error)
    if column is None:
        return offset
    tables = {fold_name(t): {fold_name(c) for c in cols} for t, cols in compiled.schema.tables.items()}
    lexemes = lex_sql(sql)
    named = [lx for lx in lexemes if lx.name in tables]
    owners = {t for t, cols in tables.items() if fold_name(column.group(1)) in cols}
    if not owners or not named or owners & {lx.name for lx in named}:
        return offset
    return named[0].offset


def _check(compiled: CompiledSql, database: Any, sql: str, execute: bool, max_rows: int,
           time_limit: float) -> tuple[str | None, int | None, list[tuple] | None, list[str] | None]:
    """(error, offset of the identifier it names, rows, columns) for a complete query; raises
    SqlError for a query refused for its resources (see :meth:`ReadOnly.refusal`,
    :data:`MAX_RESULT_BYTES`), which another attempt is not given."""
    undeclared = compiled.undeclared_names(sql)
    if undeclared:
        name, offset = undeclared[0]
        return f"no such table or column: {name}", offset, None, None
    guard = ReadOnly(database, time_limit=time_limit)
    with guard as con:
        try:
            con.execute("EXPLAIN " + sql).fetchall()
            if not execute:
                return None, None, None, None
            cursor = con.execute(sql)
            rows = _fetch(cursor, sql, max_rows)
            return None, None, rows, [d[0] for d in cursor.description or ()]
        except sqlite3.Error as err:
            refused = guard.refusal(err)
            if refused is not None:
                raise SqlError(f"the query {sql!r:.300} was refused: {refused}") from err
            message = str(err)
            if message == "interrupted":
                message = f"the query ran over time_limit={time_limit} s"
            return message, locate(sql, message), None, None


def _fetch(cursor: sqlite3.Cursor, sql: str, max_rows: int) -> list[tuple]:
    """At most ``max_rows`` rows of ``cursor``, holding at most :data:`MAX_RESULT_BYTES`."""
    rows: list[tuple] = []
    size = 0
    while len(rows) < max_rows:
        row = cursor.fetchone()
        if row is None:
            break
        size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row)
        if size > MAX_RESULT_BYTES:
            raise SqlError(f"the rows of the query {sql!r:.300} hold more than {MAX_RESULT_BYTES:,} bytes "
                           f"(structgen.tasks.sql.MAX_RESULT_BYTES) within the first {len(rows) + 1:,} rows; "
                           "ask for fewer rows (max_rows) or shorter values")
        rows.append(row)
    return rows


def locate(sql: str, message: str) -> int | None:
    """Offset in ``sql`` of the identifier an SQLite error message names (``no such column: t.x``,
    ``ambiguous column name: x``, ``misuse of aggregate: max()``, ``wrong number of arguments to
    function f()``), or None.

    Example
    -------
    >>> locate("SELECT a.x FROM t AS a", "no such column: a.x")
    7
    """
    named = re.search(r"function (\w+)\(\)$", message) or re.search(r": (.+)$", message)
    if named is None:
        return None
    wanted = fold_name(named.group(1).strip().rstrip("()")).split(".")
    lexemes = lex_sql(sql)
    for i in range(len(lexemes)):
        parts = lexemes[i:i + 2 * len(wanted) - 1]
        names = [p.name if p.name is not None else fold_name(p.text) for p in parts[::2]]
        if names == wanted and all(p.text == "." for p in parts[1::2]):
            return lexemes[i].offset
    return None


def backtrack(vocab: Any, tokens: list[int], offset: int | None,
               banned: dict[tuple[int, ...], set[int]]) -> list[int]:
    """The tokens to resume from: those before the one holding byte ``offset``; [] (start
    again) when there is no offset.

    At that position every token that would start writing the same name again, in any letter
    case and any split into tokens (`` price``, `` pric`` + ``E``), is banned from now on.
    """
    if offset is None:
        return []
    text = vocab.token_bytes(tokens)
    name = lex_sql(text[offset:].decode("utf-8", "replace"))
    if not name:
        return []
    start = 0
    for k, t in enumerate(tokens):
        end = start + len(vocab.tokens[t] or b"")
        if end > offset:
            rewrite = text[start:offset + len(name[0].text.encode())].lower()
            reach = offset - start  # a banned token must reach into the name
            banned.setdefault(tuple(tokens[:k]), set()).update(
                i for i, data in enumerate(vocab.tokens)
                if data and len(data) > reach and rewrite.startswith(data.lower()))
            return tokens[:k]
        start = end
    return []
