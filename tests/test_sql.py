"""SQL specialised to a database: gold queries walk, mutants do not, the database stays unwritten.

The gold sets (Spider dev and defog, ``tests/sql_data.py``) are walked token by token through
the grammar compiled for each query's database, on the real SmolLM2 tokenizer; then the name
check runs on the complete text. Generation tests run the default model on the bundled
``examples/data/shop.sqlite``.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

import structgen
from structgen import SqlError, compile_sql
from structgen.frontends.sql import ReadOnly, read_schema, sql_grammar_text
from structgen.tasks.sql import locate
from structgen.engine.vocab import Vocabulary

from sql_data import mutant, pairs

SHOP = Path(__file__).resolve().parents[1] / "examples" / "data" / "shop.sqlite"
BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def rejection(compiled: structgen.CompiledSql, tokenizer, sql: str) -> str | None:
    """Why ``compiled`` refuses ``sql`` walked token by token, then name-checked; None if it accepts."""
    ids = tokenizer.encode(sql, add_special_tokens=False) if not isinstance(tokenizer, Vocabulary) \
        else list(sql.encode())
    m = compiled.matcher()
    for k, t in enumerate(ids):
        if not m.advance(t):
            return f"token {k}: {m.last_rejection}"
    if not m.can_end():
        return "incomplete text"
    undeclared = compiled.undeclared_names(sql)
    return f"undeclared {undeclared}" if undeclared else None


@pytest.fixture(scope="module")
def compiled_for(smollm2_tokenizer):
    cache: dict = {}

    def get(database: Path, strict: bool = False) -> structgen.CompiledSql:
        key = (database, strict)
        if key not in cache:
            cache[key] = compile_sql(database, smollm2_tokenizer, strict=strict)
        return cache[key]
    return get


# ---------------------------------------------------------------------- gold coverage

@pytest.mark.parametrize("name", ["spider", "defog"])
def test_every_gold_query_walks(name, compiled_for, smollm2_tokenizer):
    rejected = [(p.id, why, p.sql) for p in pairs(name)
                if (why := rejection(compiled_for(p.database), smollm2_tokenizer, p.sql))]
    assert not rejected, "\n".join(map(str, rejected))


def test_strict_grammar_takes_every_spider_query(compiled_for, smollm2_tokenizer):
    """strict=True (what generation uses) reads Spider's gold queries once their table aliases
    are spelled out as the tables' own names (strict takes no table aliases): Spider's queries
    name only real tables and columns."""
    spider = pairs("spider")
    rejected = [(p.id, why) for p in spider
                if (why := rejection(compiled_for(p.database, strict=True), smollm2_tokenizer,
                                     _without_table_aliases(p.sql)))]
    assert len(rejected) <= len(spider) // 20, rejected[:20]


def _without_table_aliases(sql: str) -> str:
    """Spider's `FROM singer AS T1 ... T1.name` written as `FROM singer ... singer.name` (strict
    takes no table aliases), when each alias stands for one table."""
    import re

    aliases = dict((a.lower(), t) for t, a in re.findall(r"(\w+)\s+AS\s+(T\d)\b", sql, re.I))
    if len(set(aliases.values())) != len(aliases):
        return sql
    sql = re.sub(r"\s+AS\s+T\d\b", "", sql, flags=re.I)
    return re.sub(r"\bT\d\b", lambda m: aliases.get(m.group().lower(), m.group()), sql)


def test_gemma_tokenizer_walks_defog(gemma_tokenizer):
    """A second tokenizer family (SentencePiece, byte fallback) on one database's gold queries."""
    chosen = [p for p in pairs("defog") if p.database.stem == "car_dealership"]
    compiled = compile_sql(chosen[0].database, gemma_tokenizer)
    rejected = [(p.id, why) for p in chosen if (why := rejection(compiled, gemma_tokenizer, p.sql))]
    assert not rejected and len(chosen) >= 25


# ---------------------------------------------------------------------- mutants

def test_mutants_naming_what_the_database_lacks_are_rejected(compiled_for, smollm2_tokenizer):
    rng = random.Random(8)
    sample = rng.sample(pairs("spider"), 150) + rng.sample(pairs("defog"), 150)
    by_grammar = by_names = 0
    accepted = []
    count = 0
    for p in sample:
        loose, strict = compiled_for(p.database), compiled_for(p.database, strict=True)
        made = mutant(p.sql, loose._tables, rng, p.database)
        if made is None:
            continue
        text, renamed = made
        count += 1
        why = rejection(loose, smollm2_tokenizer, text)
        if why is None:
            accepted.append((p.id, renamed, text))
        elif why.startswith("undeclared"):
            by_names += 1
        else:
            by_grammar += 1
        # The strict grammar refuses every one of them token by token, before the name check.
        strict_why = rejection(strict, smollm2_tokenizer, text)
        assert strict_why is not None and not strict_why.startswith("undeclared"), (p.id, text)
    assert count >= 250
    assert not accepted, accepted
    assert by_grammar + by_names == count


# ---------------------------------------------------------------------- the grammar, by hand

@pytest.fixture(scope="module")
def shop_bytes():
    return compile_sql(SHOP, BYTES), compile_sql(SHOP, BYTES, strict=True)


@pytest.mark.parametrize("sql", [
    "select name from customers",
    "SELECT Name FROM CUSTOMERS;",
    'SELECT "name" FROM "customers"',
    "SELECT [name], `city` FROM [customers]",
    "SELECT c.name FROM customers AS c WHERE c.city = \"London\"",
    "SELECT customers.name, count(*) FROM customers JOIN orders ON customers.id = orders.customer_id "
    "GROUP BY customers.name HAVING count(*) > 1 ORDER BY 2 DESC LIMIT 3 OFFSET 1",
    "SELECT name FROM products WHERE price BETWEEN 5 AND 30 AND category NOT IN ('food') "
    "AND name LIKE 'N%' AND id IS NOT NULL",
    "SELECT CASE WHEN price > 20 THEN 'dear' ELSE 'cheap' END AS band, CAST(price AS INTEGER) FROM products",
    "WITH big AS (SELECT customer_id, SUM(quantity) AS total FROM orders GROUP BY customer_id) "
    "SELECT customers.name, big.total FROM big JOIN customers ON customers.id = big.customer_id",
    "SELECT name, RANK() OVER (PARTITION BY category ORDER BY price DESC) FROM products",
    "SELECT name FROM customers WHERE EXISTS (SELECT 1 FROM orders WHERE orders.customer_id = customers.id) "
    "UNION SELECT name FROM products EXCEPT SELECT city FROM customers",
    "SELECT (SELECT max(price) FROM products) - price FROM products",
    "SELECT p.name FROM products p LEFT JOIN orders o USING (id) CROSS JOIN customers",
    "SELECT strftime('%Y', order_date) AS year, total FROM (SELECT order_date, quantity AS total FROM orders) sub",
    "SELECT\n\tname\n  FROM customers ;",
])
def test_specialised_grammar_takes(sql, shop_bytes):
    loose, _ = shop_bytes
    assert rejection(loose, BYTES, sql) is None
    assert sqlite3.connect(SHOP).execute("EXPLAIN " + sql).fetchall()  # and SQLite agrees


@pytest.mark.parametrize("sql, why", [
    ("SELECT name FROM clients", "undeclared"),              # no such table
    ("SELECT nme FROM customers", "undeclared"),             # no such column
    ("SELECT customers.price FROM customers", "undeclared"),  # a column of another table
    ("SELECT c.price FROM customers AS c", "undeclared"),
    ("SELECT name FROM customers ORDER BY total", "undeclared"),
    ("SELECT name FROM", "incomplete"),
    ("SELECTname FROM customers", "token"),                  # keywords need a gap
    ("SELECT name FROM customers WHERE select = 1", "token"),
    ("SELECT name FROM customers; SELECT 1", "token"),
    ("DELETE FROM customers", "token"),
    ("SELECT name FROM customers -- comment", "token"),
])
def test_specialised_grammar_refuses(sql, why, shop_bytes):
    loose, _ = shop_bytes
    got = rejection(loose, BYTES, sql)
    assert got is not None and got.startswith(why), got


@pytest.mark.parametrize("sql", [
    "SELECT nme FROM customers", "SELECT name FROM clients", "SELECT c.name FROM customers AS c",
    "SELECT name FROM customers ORDER BY amount", "SELECT x.name FROM customers",
])
def test_strict_grammar_refuses_made_up_names_at_the_token(sql, shop_bytes):
    _, strict = shop_bytes
    got = rejection(strict, BYTES, sql)
    assert got is not None and got.startswith("token"), got


def test_spaces_only_variant(shop_bytes):
    compiled = compile_sql(SHOP, BYTES, strict=True, whitespace="spaces")
    assert rejection(compiled, BYTES, "SELECT name FROM customers;") is None
    assert rejection(compiled, BYTES, "SELECT name\nFROM customers") is not None
    assert 'WS: " "' in compiled.text and "TABLE_NAME: /customers|products|orders/i" in compiled.text


@pytest.mark.parametrize("sql, expected", [
    ("SELECT a.x FROM t AS a", []),
    ("SELECT total FROM (SELECT sum(x) AS total FROM t)", []),
    ("WITH c(n) AS (SELECT 1) SELECT n FROM c", []),
    ("SELECT count(*) c FROM t ORDER BY c", []),
    ('SELECT x FROM t WHERE x = "text"', []),
    ("SELECT x FROM t ORDER BY x COLLATE nocase", []),
    ("SELECT zz FROM t", [("zz", 7)]),
    ("SELECT t.zz FROM t", [("t.zz", 7)]),
    ("SELECT a.y FROM t AS a", [("a.y", 7)]),
    ("SELECT x FROM u", [("u", 14)]),
])
def test_name_check(sql, expected):
    from structgen.frontends.sql import undeclared_names

    assert undeclared_names(sql, {"t": frozenset({"x"})}) == expected


def test_locate():
    assert locate("SELECT a.x FROM t AS a", "no such column: a.x") == 7
    assert locate("SELECT id FROM a JOIN b", "ambiguous column name: id") == 7
    assert locate("SELECT MAX(x) FROM t WHERE max(x) > 1", "misuse of aggregate: max()") == 7
    assert locate("SELECT rank() FROM t", "misuse of window function rank()") == 7
    assert locate("SELECT x FROM t", "near \"(\": syntax error") is None


def test_backtracking_bans_the_name_and_starts_again_when_nothing_is_left(shop_bytes):
    from structgen.tasks.sql import backtrack, resume_point

    loose, _ = shop_bytes
    sql = "SELECT nme FROM customers"
    tokens = list(sql.encode())
    banned: dict = {}
    prefix = backtrack(BYTES, tokens, locate(sql, "no such column: nme"), banned)
    assert BYTES.token_bytes(prefix) == b"SELECT "
    assert banned[tuple(prefix)] == {ord("n"), ord("N")}  # what would start `nme` again, any case
    assert resume_point(loose, prefix, banned)[0] == prefix
    banned[tuple(prefix)] |= set(resume_point(loose, prefix, banned)[1].allowed_token_ids())
    assert resume_point(loose, prefix, banned)[0] == []


# ---------------------------------------------------------------------- the database, read only

def test_read_only_connection(tmp_path):
    con = sqlite3.connect(tmp_path / "db.sqlite")
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    with ReadOnly(con) as ro:
        assert ro.execute("SELECT x FROM t").fetchall() == [(1,)]
        for statement in ("INSERT INTO t VALUES (2)", "DROP TABLE t", "CREATE TABLE u (y)",
                          "ATTACH DATABASE ':memory:' AS other", "PRAGMA user_version = 3"):
            with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
                ro.execute(statement)
    con.execute("INSERT INTO t VALUES (3)")  # the authorizer is gone afterwards
    assert con.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_read_only_path_and_time_limit(tmp_path):
    path = tmp_path / "db.sqlite"
    shutil.copy(SHOP, path)
    before = path.read_bytes()
    with ReadOnly(path, time_limit=0.2) as ro:
        with pytest.raises(sqlite3.DatabaseError):
            ro.execute("DELETE FROM orders")
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            ro.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                       "SELECT count(*) FROM n").fetchall()
    assert path.read_bytes() == before


def test_schema_and_errors(tmp_path):
    schema = read_schema(SHOP)
    assert schema.tables["orders"] == ("id", "customer_id", "product_id", "quantity", "order_date")
    assert "CREATE TABLE customers" in schema.ddl
    with pytest.raises(SqlError, match="no SQLite database"):
        compile_sql(tmp_path / "missing.sqlite", BYTES)
    sqlite3.connect(tmp_path / "empty.sqlite").execute("CREATE TABLE t (x)").connection.execute("DROP TABLE t")
    with pytest.raises(SqlError, match="has no tables"):
        compile_sql(tmp_path / "empty.sqlite", BYTES)
    with pytest.raises(SqlError, match="does not end with the name terminals"):
        sql_grammar_text(schema, Path(__file__).resolve().parents[1] / "structgen" / "grammars" / "json.lark")


def test_names_that_need_quotes(tmp_path):
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE "order items" ("unit price" REAL, "select" INT, qty INT)')
    compiled = compile_sql(con, BYTES, strict=True)
    assert rejection(compiled, BYTES, 'SELECT "unit price", [select], qty FROM "order items"') is None
    assert rejection(compiled, BYTES, "SELECT select FROM [order items]") is not None  # a keyword, bare
    assert rejection(compiled, BYTES, "SELECT unit price FROM [order items]") is not None


# Names SQLite takes only quoted: a newline, quotes, a backslash, a slash, spaces, characters
# beyond ASCII (compared with ASCII case folding only: "É" and "é" are two columns), the empty name.
ODD_DDL = (
    'CREATE TABLE "a\nb" ("x y" INTEGER, "q""uote" TEXT, "back\\slash" REAL, "café" TEXT, "日本" INT, '
    '"sl/ash" INT, "tab\tcol" INT, "br]ck" INT, "emoji😀" INT);'
    'CREATE TABLE "my ""odd"" name" (plain INT, "É" INT, "é" INT, "" INT, "\u2028\x7f" INT);'
    'INSERT INTO "a\nb" VALUES (1, \'q\', 2.5, \'c\', 3, 4, 5, 6, 7);'
    'INSERT INTO "my ""odd"" name" VALUES (1, 2, 3, 4, 5)'
)


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory, smollm2_tokenizer):
    path = tmp_path_factory.mktemp("odd") / "odd.sqlite"
    con = sqlite3.connect(path)
    con.executescript(ODD_DDL)
    con.commit()
    con.close()
    return path, compile_sql(path, smollm2_tokenizer), compile_sql(path, smollm2_tokenizer, strict=True)


@pytest.mark.parametrize("sql", [
    'SELECT "x y", "q""uote", "back\\slash" FROM "a\nb" WHERE "café" = \'c\'',
    'SELECT "a\nb"."x y", [日本], `sl/ash`, "tab\tcol", "br]ck", "emoji😀" FROM "a\nb"',
    'SELECT [x y], `q"uote`, [back\\slash] FROM [a\nb] ORDER BY "CAFé"',  # ASCII letters: any case
    'SELECT plain, PLAIN, "plain", "É", "é", "", "\u2028\x7f" FROM "my ""odd"" name"',
    'SELECT "my ""odd"" name"."É" FROM "MY ""ODD"" NAME" JOIN "A\nB" ON "A\nB"."x y" = [my "odd" name].plain',
])
def test_odd_names_walk_in_both_grammars_and_run(sql, odd_names, smollm2_tokenizer):
    path, loose, strict = odd_names
    assert rejection(loose, smollm2_tokenizer, sql) is None
    assert rejection(strict, smollm2_tokenizer, sql) is None
    assert sqlite3.connect(path).execute(sql).fetchall()  # and SQLite runs it, with rows


@pytest.mark.parametrize("sql", [  # brackets: a double-quoted name that names nothing is a string
    'SELECT [x  y] FROM "a\nb"',          # one space too many
    'SELECT "x y" FROM "a\nc"',
    'SELECT "x y" FROM "a b"',             # the newline is part of the name
    'SELECT "q"uote" FROM "a\nb"',         # the quote must be doubled
    'SELECT [CAFÉ] FROM "a\nb"',          # SQLite folds ASCII letters only
    'SELECT x y FROM "a\nb"',             # a name that is not an identifier must be quoted
    'SELECT "É" FROM my "odd" name',
    'SELECT `back\\\\slash` FROM "a\nb"',
])
def test_misspelt_odd_names_are_refused(sql, odd_names, smollm2_tokenizer):
    path, _, strict = odd_names
    got = rejection(strict, smollm2_tokenizer, sql)
    assert got is not None and got.startswith("token"), got
    with pytest.raises(sqlite3.Error):  # SQLite agrees
        sqlite3.connect(path).execute(sql).fetchall()


def test_odd_names_in_the_grammar_text_ddl_and_name_check(odd_names):
    path, loose, strict = odd_names
    for compiled in (loose, strict):
        names = [line for line in compiled.text.splitlines() if line.startswith(("TABLE_NAME:", "COLUMN_NAME:"))]
        assert len(names) == 2 and all("\\x0a" in line for line in names[:1])  # escaped, one line each
    assert set(strict.schema.tables) == {"a\nb", 'my "odd" name'}
    assert {"É", "é", ""} <= set(strict.schema.columns)  # two columns to SQLite, two here
    copy = sqlite3.connect(":memory:")
    copy.executescript(strict.schema.ddl)  # the DDL shown to models creates the same tables
    assert copy.execute("SELECT name FROM sqlite_master ORDER BY rowid").fetchall() == [("a\nb",), ('my "odd" name',)]
    assert loose.undeclared_names('SELECT [x  y], "a\nb"."café" FROM "a\nb"') == [("[x  y]", 7)]
    assert loose.undeclared_names('SELECT t.[CAFÉ] FROM "a\nb" AS t') == [("t.[CAFÉ]", 7)]
    assert loose.undeclared_names('SELECT t.[CAFé] FROM "a\nb" AS t') == []


# ---------------------------------------------------------------------- generation on the model

def test_generate_sql_runs_and_returns_rows(generator):
    result = generator.sql("Which customers live in London?", SHOP, execute=True)
    expected = sqlite3.connect(SHOP).execute(result.sql).fetchall()
    assert result.rows == expected and result.columns
    assert result.retries == len(result.attempts) and result.first_try == (not result.attempts)


def test_generate_sql_drafted_equals_step_by_step(generator):
    q = "How many orders are there?"
    drafted = generator.sql(q, SHOP)
    stepped = generator.sql(q, SHOP, speculate=False)
    assert drafted.token_ids == stepped.token_ids
    assert drafted.stats.forward_passes <= stepped.stats.forward_passes


def test_generate_sql_retries_are_recorded(generator):
    """The default model first answers this with a window function where SQLite refuses one;
    decoding backtracks to that name, bans it there, and the returned query passes."""
    result = generator.sql("What is the total price of all orders per customer city?", SHOP, execute=True)
    assert result.retries >= 1 and not result.first_try
    assert "window function" in result.attempts[0].error
    for attempt in result.attempts:
        assert attempt.error and attempt.sql != result.sql
    assert result.rows == sqlite3.connect(SHOP).execute(result.sql).fetchall()


def test_generate_sql_budget_runs_out(generator):
    with pytest.raises(structgen.SqlGenerationError) as info:
        generator.sql("List every product.", SHOP, max_new_tokens=2, max_retries=1, seed=0, budget="raise")
    assert len(info.value.attempts) == 2  # the retry samples (seeded): any start, same budget
    assert all("max_new_tokens=2 ran out" in a.error and a.sql.strip() for a in info.value.attempts)


def test_generate_sql_within_a_small_budget(generator):
    """Under the default budget a query is complete when the tokens end: here the model's own
    ``SELECT * FROM products`` fits 6 tokens, passes the checks and says it was cut short."""
    result = generator.sql("List every product.", SHOP, max_new_tokens=6, max_retries=0, execute=True)
    assert result.finish_reason == "length" and len(result.token_ids) <= 6
    assert result.sql.split() == ["SELECT", "*", "FROM", "products"]
    assert result.rows == sqlite3.connect(SHOP).execute(result.sql).fetchall()
