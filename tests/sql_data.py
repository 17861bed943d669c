"""The SQL test data: gold queries of Spider dev and defog on their SQLite databases, and mutants.

The data is ``sql/`` in the shared data folder (``../shared/data`` beside the repository, or
``$STRUCTGEN_DATA_DIR``); see its README, section 2. Used by ``tests/test_sql.py`` and
``benchmarks/sql.py``.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from structgen.frontends.sql import ReadOnly, lex_sql

DATA_DIR = Path(os.environ.get("STRUCTGEN_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))
SQL_DIR = DATA_DIR / "sql"
SETS = {
    "spider": (SQL_DIR / "spider_dev_schema_only" / "spider_dev.jsonl", SQL_DIR / "spider_dev_schema_only" / "databases"),
    "defog": (SQL_DIR / "defog_sqlite.jsonl", SQL_DIR / "databases"),
}


@dataclass
class Pair:
    """One gold query: its id, question, SQL text and database file."""

    id: str
    question: str
    sql: str
    database: Path


def pairs(name: str) -> list[Pair]:
    """The gold pairs of set ``name`` ("spider": 1,034 on 20 schema-only databases; "defog": 314
    on 11 databases with rows). A missing data folder raises ``FileNotFoundError``."""
    questions, databases = SETS[name]
    if not questions.is_file():
        raise FileNotFoundError(f"SQL test data not found at {questions}: put the shared data folder "
                                "beside the repository or set STRUCTGEN_DATA_DIR")
    rows = [json.loads(line) for line in questions.open(encoding="utf-8")]
    return [Pair(r["id"], r["question"], r["gold_sql"], databases / f"{r['db_id']}.sqlite") for r in rows]


def mutant(sql: str, tables: dict[str, frozenset[str]], rng: random.Random,
           database: Path | None = None) -> tuple[str, str] | None:
    """``sql`` with one real table or column (picked by ``rng``) renamed, everywhere it is
    written, to a name the database lacks; returns (mutant, renamed name) or None when the
    query names nothing real, or when SQLite still compiles the mutant on ``database`` (the
    name was only an alias the query declares). ``tables`` maps lower-case tables to
    lower-case columns."""
    known = set(tables).union(*tables.values())
    names = sorted({lx.name for lx in lex_sql(sql) if lx.kind in ("word", "quoted") and lx.name in known})
    if not names:
        return None
    target = rng.choice(names)
    suffix = "_zq"
    while any(target + suffix in cols or target + suffix in tables for cols in tables.values()):
        suffix += "q"
    out, last = [], 0
    for lx in lex_sql(sql):
        if lx.kind in ("word", "quoted") and lx.name == target:
            inner = lx.text[1:-1] if lx.kind == "quoted" else lx.text
            renamed = lx.text.replace(inner, inner + suffix, 1)
            out += [sql[last:lx.offset], renamed]
            last = lx.offset + len(lx.text)
    text = "".join(out) + sql[last:]
    if database is not None:
        with ReadOnly(database) as con:
            try:
                con.execute("EXPLAIN " + text)
                return None
            except sqlite3.Error:
                pass
    return text, target
