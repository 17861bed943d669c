"""SQL resources (issue 60, item 5): a query structgen runs, and a schema it compiles, stay bounded.

A query checked or run through the SQL task (``tasks.sql._check``, what ``Generator.sql`` calls
on each complete query, with and without ``execute=True``) may not call a function that
allocates or loops as far as its argument asks, nor make or read a value longer than
``MAX_VALUE_BYTES``, nor return rows holding more than ``MAX_RESULT_BYTES``: each is refused at
once with a SqlError naming the function or the limit. A database too large for the grammar
fails compile_sql with a SqlError naming its tables, its columns and the limit it hit. Real
SQLite databases throughout, made in ``tmp_path``.
"""

from __future__ import annotations

import sqlite3

import pytest

import structgen
from structgen import SqlError
from structgen.engine.vocab import Vocabulary
from structgen.errors import CompileError
from structgen.frontends.sql import MAX_LIKE_PATTERN_BYTES, MAX_VALUE_BYTES, ReadOnly
from structgen.tasks.sql import MAX_RESULT_BYTES, _check

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def _ten_to(power: int, seed: str = "a") -> str:
    """An SQL expression for ``seed`` repeated 10**power times, built by nested replace()."""
    expr = f"'{seed}'"
    for _ in range(power):
        expr = f"replace({expr}, '{seed}', '{seed * 10}')"
    return expr


@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """A real database of 200 people, and the grammar compiled for it over bytes."""
    path = tmp_path_factory.mktemp("sql") / "people.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)")
    con.executemany("INSERT INTO people (name) VALUES (?)", [(f"person {i}",) for i in range(200)])
    con.commit()
    con.close()
    return path, structgen.compile_sql(path, BYTES)


def _walks(compiled, sql: str) -> bool:
    m = compiled.matcher()
    return all(m.advance(b) for b in sql.encode()) and m.can_end()


# ---------------------------------------------------------------------- refused functions

@pytest.mark.parametrize("sql, function", [
    ("SELECT randomblob(900000000)", "randomblob"),             # 900 MB, 5 s before
    ("SELECT zeroblob(900000000)", "zeroblob"),
    ("SELECT printf('%.*c', 900000000, 'x')", "printf"),       # 900 MB, 10 s before
    ("SELECT FORMAT('%.*c', 900000000, 'x')", "format"),
    ("SELECT json_group_array(name) FROM people", "json_group_array"),
])
@pytest.mark.parametrize("execute", [True, False])
def test_functions_that_allocate_as_asked_are_refused(people, sql, function, execute):
    """The grammar writes these functions (it reads any SQLite query); the read-only connection
    refuses them when the query is prepared, so even ``EXPLAIN`` (execute=False) raises."""
    path, compiled = people
    assert _walks(compiled, sql)  # the grammar lets a model write it
    with pytest.raises(SqlError, match=rf"{function}\(\) is refused") as got:
        _check(compiled, path, sql, execute, 1000, 10.0)
    assert "REFUSED_FUNCTIONS" in str(got.value) and isinstance(got.value.__cause__, sqlite3.Error)


def test_refusals_and_limits_leave_a_callers_connection_as_it_was(people):
    """On a caller's connection the refusals and limits hold only inside ReadOnly; a lower
    limit the caller set is kept there and put back after."""
    path, _ = people
    con = sqlite3.connect(path)
    con.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 10)
    length = con.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    guard = ReadOnly(con)
    with guard as ro:
        assert ro.execute("SELECT count(*), max(length(name)) FROM people WHERE name LIKE '%1%'").fetchone() == (
            sum("1" in f"person {i}" for i in range(200)), 10)
        assert ro.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == MAX_VALUE_BYTES
        assert ro.getlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH) == 10
        with pytest.raises(sqlite3.DatabaseError) as got:
            ro.execute("SELECT randomblob(16)")
        assert guard.refusal(got.value).startswith("randomblob() is refused")
    assert con.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == length
    assert con.getlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH) == 10
    assert len(con.execute("SELECT randomblob(16)").fetchone()[0]) == 16


# ---------------------------------------------------------------------- limits

@pytest.mark.parametrize("sql", [
    f"SELECT length({_ten_to(7)})",                                                   # replace growth: 10 MB
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 300000) "
    "SELECT length(group_concat(i)) FROM n",                                          # group_concat: ~1.9 MB
    f"SELECT length({_ten_to(6)} || {_ten_to(6)})",                                   # ||: 2 MB
])
def test_a_value_over_the_length_limit_is_refused(people, sql):
    path, compiled = people
    assert _walks(compiled, sql)
    with pytest.raises(SqlError, match=rf"longer than {MAX_VALUE_BYTES:,} bytes.*MAX_VALUE_BYTES"):
        _check(compiled, path, sql, True, 1000, 10.0)


def test_a_long_like_pattern_is_refused(people):
    """Matching costs the value's length times the pattern's in one uninterruptible step."""
    path, compiled = people
    sql = f"SELECT name FROM people WHERE name GLOB {_ten_to(4)}"  # a 10,000-byte pattern
    with pytest.raises(SqlError, match=rf"longer than {MAX_LIKE_PATTERN_BYTES:,} bytes.*MAX_LIKE_PATTERN_BYTES"):
        _check(compiled, path, sql, True, 1000, 10.0)


def test_rows_over_the_result_limit_are_refused(people):
    """200 rows of 100,000 bytes each: every value is within MAX_VALUE_BYTES, all of them not."""
    path, compiled = people
    sql = f"SELECT {_ten_to(5)} || name FROM people"
    assert 200 * 10 ** 5 > MAX_RESULT_BYTES
    with pytest.raises(SqlError, match=rf"more than {MAX_RESULT_BYTES:,} bytes.*max_rows"):
        _check(compiled, path, sql, True, 1000, 10.0)
    # the same query within max_rows runs
    error, _, rows, _ = _check(compiled, path, sql, True, 3, 10.0)
    assert error is None and [len(r[0]) for r in rows] == [10 ** 5 + 8] * 3


# ---------------------------------------------------------------------- a schema too large

@pytest.mark.parametrize("tables", [700, 2000])
def test_a_database_too_large_for_the_grammar_is_a_sql_error(tmp_path, tables):
    """700 tables of 50 columns hit the limit on an automaton's states (~3.5 s here); the
    issue's 2,000 hit the grammar text's size limit (structgen.core.limits, ~1.3 s). Whichever
    limit, the error is a SqlError naming it and the schema."""
    columns = 50
    path = tmp_path / "wide.sqlite"
    con = sqlite3.connect(path)
    con.executescript("BEGIN;" + "".join(
        f"CREATE TABLE t{i} (" + ", ".join(f"c{i}_{j} INT" for j in range(columns)) + ");"
        for i in range(tables)) + "COMMIT;")
    con.close()
    with pytest.raises(SqlError) as got:
        structgen.compile_sql(path, BYTES, strict=True)
    message = str(got.value)
    assert f"{tables:,} tables and {tables * columns:,} columns" in message
    assert str(got.value.__cause__) in message  # the limit hit, as the compiler names it
    assert "only the tables the queries need" in message  # what to do
    if tables == 700:
        assert isinstance(got.value.__cause__, CompileError) and "exceeds 100000 states" in message

