"""SQL for one SQLite database: the query grammar specialised to its tables and columns.

``structgen/grammars/sqlite.lark`` reads any SQLite query; :func:`compile_sql` replaces its two name
terminals with one database's names, so a table position takes a real table and a column
position a real column (bare, ``qualifier.column``, quoted in any of SQLite's three ways, in
any case). Names a query makes up itself — aliases, common table expressions, a subquery's
output columns — cannot be checked left to right by a context-free grammar (a table alias is
often used before ``FROM`` declares it), so :meth:`CompiledSql.undeclared_names` checks them
once the text is complete: each made-up name used must be declared somewhere in the query.

The database is only ever read: a path is opened with ``mode=ro``; a ``sqlite3.Connection``
gets an authorizer that allows reads only and a progress-handler time limit while structgen
uses it (see :class:`ReadOnly`). A query's resources are bounded there too: no string or blob
longer than :data:`MAX_VALUE_BYTES`, no LIKE/GLOB pattern longer than
:data:`MAX_LIKE_PATTERN_BYTES`, and the functions in :data:`REFUSED_FUNCTIONS` refused.

Example
-------
>>> import sqlite3, structgen
>>> from structgen.engine.vocab import Vocabulary
>>> con = sqlite3.connect(":memory:")
>>> _ = con.execute("CREATE TABLE singer (name TEXT, age INT)")
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> sql = structgen.compile_sql(con, vocab, strict=True)
>>> def walks(text):
...     m = sql.matcher()
...     return all(m.advance(b) for b in text.encode()) and m.can_end()
>>> walks("SELECT name FROM singer WHERE age > 30"), walks("SELECT nme FROM singer")
(True, False)
>>> sql.undeclared_names("SELECT s.name, s.age FROM singer AS s ORDER BY years")
[('years', 47)]
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from structgen.core.budget import compile_budget
from structgen.errors import CompileError, InputTooLargeError, SqlError

Whitespace = Literal["any", "spaces"]

__all__ = ["SqlSchema", "CompiledSql", "ReadOnly", "SqlError", "read_schema",
           "sql_grammar_text", "SQL_GRAMMAR", "compile_schema", "lex_sql", "Lexeme", "fold_name",
           "MAX_VALUE_BYTES", "MAX_LIKE_PATTERN_BYTES", "REFUSED_FUNCTIONS"]

#: Work units of compile budget each table or column name adds (measured: the strict grammar of
#: Spider's atis, 124 names, takes 670k units; 33 databases take 2,300-3,300 units a name beyond
#: the first 300k).
BUDGET_PER_NAME = 4_000
#: Work units the query grammar itself takes beyond a schema's budget: its lexer's automata read
#: wide byte classes, which the budget charges (core.automaton._units): ~550k for a strict
#: grammar of a dozen names (Spider's singer, 1.4 s here).
SQL_GRAMMAR_UNITS = 600_000
#: The bundled SQLite query grammar (Lark format), package data found through importlib.resources.
SQL_GRAMMAR = files("structgen") / "grammars" / "sqlite.lark"
_NAME_SLOTS = "TABLE_NAME: NAME\nCOLUMN_NAME: NAME\n"
#: What strict=True rewrites: table and column positions, and qualifiers, take only the database's
#: names; tables and subqueries get no alias (``author.name`` stays valid); a made-up name (a
#: column alias, a type) is at most 30 characters, a number 15 digits (and 9 decimals), a
#: string 80 characters, so a small model cannot ramble in one.
_STRICT_RULES = (
    ("table: TABLE_NAME | NAME\n", "table: TABLE_NAME\n"),
    ("column: (qualifier \".\")? (COLUMN_NAME | NAME)\n", "column: (qualifier \".\")? COLUMN_NAME\n"),
    ("qualifier: TABLE_NAME | NAME\n", "qualifier: TABLE_NAME\n"),
    ('table_or_subquery: table ("AS"i? alias)? (("INDEXED"i "BY"i NAME) | ("NOT"i "INDEXED"i))?\n'
     '                 | "(" select_stmt ")" ("AS"i? alias)?\n',
     'table_or_subquery: table\n                 | "(" select_stmt ")"\n'),
    ("NAME: /[A-Za-z_][A-Za-z0-9_$]*/ | QUOTED_NAME\n", "NAME: /[A-Za-z_][A-Za-z0-9_]{0,29}/\n"),
    # Literals of bounded length, so a small model cannot spin out digits or text forever.
    ("NUMBER: /[0-9]+(\\.[0-9]*)?([eE][+-]?[0-9]+)?/ | /\\.[0-9]+([eE][+-]?[0-9]+)?/ | /0[xX][0-9a-fA-F]+/\n",
     "NUMBER: /[0-9]{1,15}(\\.[0-9]{0,9})?/\n"),
    ("STRING: /'([^']|'')*'/\n", "STRING: /'([^'\\n]|''){0,80}'/\n"),
    ("DQ_STRING: /\"([^\"]|\"\")*\"/\n", "DQ_STRING: /\"[^\"\\n]{0,80}\"/\n"),
)
#: What whitespace="spaces" rewrites: whitespace is spaces only (``%ignore`` still allows a run).
_SPACES_ONLY = (("WS: /[ \\t\\r\\n]+/\n", 'WS: " "\n'),)
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
#: What compiling a database's grammar raises when the schema is too large for a limit: a rule's
#: automaton states, the compile budget, or the grammar text's size; compile_schema turns each
#: into a SqlError naming the schema's size.
_TOO_LARGE: tuple[type[Exception], ...] = (CompileError, InputTooLargeError)

#: The longest string or blob, in bytes, a statement may make or read while structgen holds the
#: connection (``SQLITE_LIMIT_LENGTH``; SQLite's own default is 1,000,000,000): a function that
#: would build a longer value (``replace``, ``group_concat``, ``||``, a stored value that large)
#: fails at once with SQLite's "string or blob too big", which structgen reports as a SqlError.
#: Python 3.10 has no ``Connection.setlimit``: there the limit is not set.
MAX_VALUE_BYTES = 1_000_000
#: The longest LIKE or GLOB pattern, in bytes (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``, SQLite's
#: default 50,000): matching costs the value's length times the pattern's inside one step of
#: SQLite's machine, where the time limit cannot stop it (a 20,000-byte GLOB pattern over a
#: 1 MB value takes 27 s here).
MAX_LIKE_PATTERN_BYTES = 1_000
#: Functions a statement may not call while structgen holds the connection, and why; refused at
#: prepare time by the authorizer (so ``EXPLAIN`` refuses them too). The grammar still writes
#: them (it reads any SQLite query); no Spider or defog gold query uses one.
REFUSED_FUNCTIONS = {
    "randomblob": "its result is as long as its argument asks (randomblob(900000000) is 900 MB)",
    "zeroblob": "its result is as long as its argument asks (zeroblob(900000000) is 900 MB)",
    "printf": "a width or precision as large as its argument asks runs for seconds inside one step "
              "of SQLite's machine, where the time limit cannot stop it",
    "format": "a width or precision as large as its argument asks runs for seconds inside one step "
              "of SQLite's machine, where the time limit cannot stop it",
    "json_group_array": "its value grows with every row, past the length limit, until the query ends",
    "json_group_object": "its value grows with every row, past the length limit, until the query ends",
    "load_extension": "it loads native code into the process",
    "fts3_tokenizer": "it reads or registers a native tokenizer by pointer",
}




# ---------------------------------------------------------------------- the database, read only

class ReadOnly:
    """A context manager lending a read-only view of ``database`` (a path or a connection).

    A path opens a new ``mode=ro`` connection, closed on exit. A ``sqlite3.Connection`` gets an
    authorizer that denies everything but reads and a progress handler that stops a statement
    after ``time_limit`` seconds; on exit both are removed. (``sqlite3`` cannot report a handler
    set before, so one of the caller's own is not put back: set it again after the call.)

    Resources are bounded as well: values at most :data:`MAX_VALUE_BYTES` long, LIKE/GLOB
    patterns at most :data:`MAX_LIKE_PATTERN_BYTES` (the connection's own limits, if lower,
    stay; the old ones are put back on exit) and the functions of :data:`REFUSED_FUNCTIONS`
    denied. These failures reach the caller as ``sqlite3`` errors; :meth:`refusal` says, for
    one of them, what was refused and why.

    Example
    -------
    >>> import sqlite3
    >>> con = sqlite3.connect(":memory:")
    >>> with ReadOnly(con) as ro:
    ...     ro.execute("CREATE TABLE t (x)")
    Traceback (most recent call last):
    sqlite3.DatabaseError: not authorized
    >>> guard = ReadOnly(con)
    >>> with guard as ro:
    ...     try:
    ...         ro.execute("SELECT randomblob(900000000)")
    ...     except sqlite3.DatabaseError as err:
    ...         print(guard.refusal(err)[:43])
    randomblob() is refused while structgen rea
    """

    _ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
    _PRAGMAS = {"table_info", "table_xinfo", "foreign_key_list", "index_list", "database_list"}

    def __init__(self, database: "str | os.PathLike[str] | sqlite3.Connection", *,
                 time_limit: float = 10.0) -> None:
        self.database = database
        self.time_limit = time_limit
        self._con: sqlite3.Connection | None = None
        self._deadline = 0.0
        self._limits: list[tuple[int, int]] = []  # (limit, the connection's value before)
        self._refused: str | None = None  # the last function the authorizer denied

    def __enter__(self) -> sqlite3.Connection:
        if isinstance(self.database, sqlite3.Connection):
            con = self.database
            try:
                con.total_changes  # raises on a closed connection
            except sqlite3.ProgrammingError as err:
                raise SqlError(f"the sqlite3 connection cannot be used: {err}; pass an open "
                               "connection or the database's path") from err
        else:
            if not isinstance(self.database, (str, os.PathLike)):
                raise SqlError(f"a database is a path or a sqlite3.Connection, not "
                               f"{type(self.database).__name__} ({self.database!r:.80})")
            path = Path(self.database)
            try:
                found = path.is_file()
            except (OSError, ValueError) as err:  # a name too long, a NUL character
                raise SqlError(f"no SQLite database at {str(path)!r:.120}: {err}") from err
            if not found:
                raise SqlError(f"no SQLite database at {str(path)!r}")
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        self._refused = None
        self._limits = []
        if hasattr(con, "setlimit"):  # Python 3.11+
            for limit, value in ((sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES),
                                 (sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, MAX_LIKE_PATTERN_BYTES)):
                before = con.getlimit(limit)
                con.setlimit(limit, min(before, value))
                self._limits.append((limit, before))
        con.set_authorizer(self._authorize)
        self._deadline = time.monotonic() + self.time_limit
        # Checked every 1,000 steps of SQLite's machine (~10 us): a step that calls a costly
        # function (instr over a long value) cannot be stopped, so the fewer between checks,
        # the less a statement can run past its time.
        con.set_progress_handler(self._progress, 1_000)
        self._con = con
        return con

    def __exit__(self, *exc: Any) -> None:
        con, self._con = self._con, None
        if con is None:
            return
        con.set_authorizer(None)
        con.set_progress_handler(None, 0)
        for limit, before in self._limits:
            con.setlimit(limit, before)
        self._limits = []
        if con is not self.database:
            con.close()

    def refusal(self, error: BaseException) -> str | None:
        """What ``error`` (raised by a statement run inside this context) says was refused for
        its resources, and how to go on; None for any other error.

        A function of :data:`REFUSED_FUNCTIONS` names it; a value over :data:`MAX_VALUE_BYTES`
        or a pattern over :data:`MAX_LIKE_PATTERN_BYTES` names the limit. (The time limit is
        SQLite's ``interrupted``, left to the caller, which knows ``time_limit``.)
        """
        if not isinstance(error, sqlite3.Error):
            return None
        message = str(error)
        named = re.search(r"function: (\w+)", message)  # SQLite 3.40 names it, older ones do not
        name = named.group(1).lower() if named else self._refused
        if message.startswith("not authorized") and name in REFUSED_FUNCTIONS:
            return (f"{name}() is refused while structgen reads a database: {REFUSED_FUNCTIONS[name]} "
                    f"(structgen.frontends.sql.REFUSED_FUNCTIONS); write the query without {name}()")
        if getattr(error, "sqlite_errorname", "") == "SQLITE_TOOBIG" or message == "string or blob too big":
            return (f"a string or blob the query makes or reads would be longer than {MAX_VALUE_BYTES:,} "
                    "bytes, the longest structgen lets SQLite make or read "
                    "(structgen.frontends.sql.MAX_VALUE_BYTES); build shorter values (fewer rows into "
                    "one group_concat, less repetition), and leave out a column that stores longer ones")
        if message == "LIKE or GLOB pattern too complex":
            return (f"a LIKE or GLOB pattern is longer than {MAX_LIKE_PATTERN_BYTES:,} bytes, the longest "
                    "structgen lets SQLite match (structgen.frontends.sql.MAX_LIKE_PATTERN_BYTES); "
                    "use a shorter pattern")
        return None

    def _authorize(self, action: int, arg1: Any, arg2: Any, db: Any, trigger: Any) -> int:
        if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in REFUSED_FUNCTIONS:
            self._refused = str(arg2).lower()
            return sqlite3.SQLITE_DENY
        if action in self._ALLOWED:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() in self._PRAGMAS:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        return int(time.monotonic() > self._deadline)  # non-zero interrupts the statement


# ---------------------------------------------------------------------- the schema

@dataclass(frozen=True)
class SqlSchema:
    """A database's tables, their columns, and the DDL that creates them (shown to models)."""

    tables: dict[str, tuple[str, ...]]
    ddl: str

    @property
    def columns(self) -> list[str]:
        """Every column name, each once (ASCII case kept as first seen)."""
        seen: dict[str, str] = {}
        for cols in self.tables.values():
            for c in cols:
                seen.setdefault(fold_name(c), c)
        return list(seen.values())


def read_schema(database: "str | os.PathLike[str] | sqlite3.Connection") -> SqlSchema:
    """The tables (and views) of ``database`` with their columns, read through :class:`ReadOnly`."""
    with ReadOnly(database) as con:
        try:
            rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'view') "
                               "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
            tables = {name: tuple(r[1] for r in con.execute(f"PRAGMA table_info({_quote(name)})"))
                      for name, _ in rows}
        except sqlite3.DatabaseError as err:
            raise SqlError(f"cannot read the schema of {_describe(database)}: {err}") from err
    if not tables:
        raise SqlError(f"{_describe(database)} has no tables")
    ddl = ";\n".join(sql.strip() for _, sql in rows if sql) + ";"
    return SqlSchema(tables, ddl)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_name(name: str) -> str:
    """``name`` as SQLite compares names: ASCII letters in lower case, every other character kept
    (``"CAFÉ"`` and ``"café"`` are two names to SQLite, ``"Café"`` and ``"café"`` one).

    >>> fold_name("Café"), fold_name("CAFÉ")
    ('café', 'cafÉ')
    """
    return name.translate(_ASCII_LOWER)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _describe(database: Any) -> str:
    return "the connection" if isinstance(database, sqlite3.Connection) else repr(str(database))


# ---------------------------------------------------------------------- the grammar

def sql_grammar_text(schema: SqlSchema, grammar: "str | os.PathLike[str]" = SQL_GRAMMAR, *,
                     strict: bool = False, whitespace: Whitespace = "any") -> str:
    """The Lark text of ``grammar`` with its name terminals set to ``schema``'s tables and columns.

    ``strict`` and ``whitespace`` as in :func:`compile_sql`. The same text can be handed to
    other engines (the benchmark does).
    """
    source = grammar if hasattr(grammar, "read_text") else Path(grammar)  # a path, or package data
    text = source.read_text(encoding="utf-8")
    if _NAME_SLOTS not in text:
        raise SqlError(f"{str(grammar)!r} does not end with the name terminals compile_sql fills in:\n"
                       + _NAME_SLOTS)
    names = (_names_terminal("TABLE_NAME", list(schema.tables))
             + _names_terminal("COLUMN_NAME", schema.columns))
    text = text.replace(_NAME_SLOTS, names)
    rewrites = (_STRICT_RULES if strict else ()) + (_SPACES_ONLY if whitespace == "spaces" else ())
    for loose, tight in rewrites:
        if loose not in text:
            raise SqlError(f"{str(grammar)!r} lacks the line that strict=True or whitespace='spaces' "
                           f"rewrites: {loose!r}")
        text = text.replace(loose, tight)
    return text


def _names_terminal(label: str, names: list[str]) -> str:
    """``LABEL: /bare|names/i | /"quoted"|`names`|[names]/i``, longest names first.

    SQLite compares names without regard to ASCII case only (``"CAFÉ"`` is not ``café``), so a
    name with a character beyond ASCII goes in a regex of its own without the ``i`` flag, its
    ASCII letters written ``[aA]``. Every character is written so the regex stays on one line
    and means itself: regex syntax (and ``/``) escaped, control and other unprintable characters as
    ``\\xHH``/``\\uHHHH``/``\\UHHHHHHHH``.
    """
    names = sorted(names, key=lambda n: (-len(n), n))
    bare = [_regex_literal(n, fold=False) for n in names if _BARE.match(n)]
    quoted: dict[bool, list[str]] = {True: [], False: []}
    for n in names:
        spellings = ['"' + n.replace('"', '""') + '"', "`" + n.replace("`", "``") + "`"]
        if "]" not in n:
            spellings.append(f"[{n}]")
        ascii_only = n.isascii()
        quoted[ascii_only] += [_regex_literal(q, fold=not ascii_only) for q in spellings]
    alts = [f"/{'|'.join(bare)}/i"] if bare else []
    alts += [f"/{'|'.join(quoted[True])}/i"] if quoted[True] else []
    alts += [f"/{'|'.join(quoted[False])}/"] if quoted[False] else []
    return f"{label}: " + " | ".join(alts) + "\n"


def _regex_literal(text: str, *, fold: bool) -> str:
    """``text`` as a Python-``re`` pattern matching exactly it, fit for a one-line ``/.../``
    Lark regex; ``fold`` writes ASCII letters as ``[aA]`` (for a regex without the ``i`` flag)."""
    out = []
    for c in text:
        if c.isascii() and (c.isalnum() or c == "_"):
            out.append(f"[{c.lower()}{c.upper()}]" if fold and c.isalpha() else c)
        elif c.isascii() and c.isprintable():
            out.append("\\/" if c == "/" else re.escape(c))  # punctuation and space
        elif c.isprintable():
            out.append(c)  # a letter, digit or symbol beyond ASCII means itself
        else:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                       else f"\\U{code:08x}")
    return "".join(out)


@dataclass
class CompiledSql:
    """The SQL grammar compiled for one database and one vocabulary.

    ``grammar`` is the :class:`~structgen.CompiledGrammar` (``matcher()`` walks tokens through
    it), ``schema`` what it was specialised to, ``text`` its Lark text.
    """

    grammar: Any
    schema: SqlSchema
    text: str
    _tables: dict[str, frozenset[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._tables = {fold_name(t): frozenset(fold_name(c) for c in cols)
                        for t, cols in self.schema.tables.items()}

    def matcher(self) -> Any:
        """A fresh :class:`~structgen.Matcher` at the start of a query."""
        return self.grammar.matcher()

    @property
    def vocabulary(self) -> Any:
        """The vocabulary the grammar is compiled over."""
        return self.grammar.vocabulary

    def undeclared_names(self, sql: str) -> list[tuple[str, int]]:
        """Made-up names ``sql`` uses but never declares, as ``(name, offset)``; [] when none.

        A made-up name is declared after ``AS``, right after a table or a subquery (an alias
        without ``AS``), as a common table expression (``name AS (`` or ``name (a, b) AS (``) or
        in its column list. Real tables, columns, functions, keywords and double-quoted text that
        SQLite reads as a string are never reported. ``t.column``, where ``t`` is a real table
        or an alias of one, must name a column of that table.
        """
        return undeclared_names(sql, self._tables)


def compile_schema(schema: SqlSchema, compiler: Any, *, strict: bool = False, whitespace: Whitespace = "any",
                   grammar: "str | os.PathLike[str]" = SQL_GRAMMAR) -> CompiledSql:
    """:func:`compile_sql` for a schema already read, on a :class:`~structgen.Compiler` (which
    keeps the compiled grammar for the same names).

    The grammar grows with the database, so its compile budget does too: the compiler's budget
    plus :data:`SQL_GRAMMAR_UNITS` plus :data:`BUDGET_PER_NAME` work units per table and column
    name (an outer budget is the one that counts, see :func:`~structgen.core.budget.compile_budget`)."""
    text = sql_grammar_text(schema, grammar, strict=strict, whitespace=whitespace)
    columns = len({fold_name(c) for cols in schema.tables.values() for c in cols})
    names = len(schema.tables) + columns
    limit = None if compiler.budget is None else compiler.budget + SQL_GRAMMAR_UNITS + BUDGET_PER_NAME * names
    try:
        with compile_budget(limit):
            return CompiledSql(compiler.grammar_file(text, start="start"), schema, text)
    except _TOO_LARGE as err:
        total = sum(len(cols) for cols in schema.tables.values())
        raise SqlError(
            f"the SQL grammar for a database of {len(schema.tables):,} tables and {total:,} columns "
            f"({columns:,} distinct column names) cannot be compiled: every table and column name "
            f"is in the grammar, and compiling them hit a limit ({err}). compile_sql reads every "
            "table of the database, so compile for a smaller schema: a database holding only the "
            "tables the queries need (e.g. a copy made from their CREATE TABLE statements)") from err


# ---------------------------------------------------------------------- the name check

_LEXEME = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^']|'')*'?)
  | (?P<dq>"(?:[^"]|"")*"?)
  | (?P<quoted>`(?:[^`]|``)*`?|\[[^\]]*\]?)
  | (?P<blob>[xX]'[0-9a-fA-F]*'?)
  | (?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<punct>\|\||->>|->|<>|<=|>=|==|!=|<<|>>|.)
""", re.VERBOSE | re.DOTALL)


@functools.lru_cache(maxsize=None)
def _keywords() -> frozenset[str]:
    """The grammar's keywords, lower case (read on first use, not when structgen is imported)."""
    words = re.findall(r'"([A-Za-z_]+)"i', SQL_GRAMMAR.read_text(encoding="utf-8"))
    return frozenset(w.lower() for w in words)


_COLLATIONS = frozenset({"nocase", "binary", "rtrim"})


@dataclass
class Lexeme:
    kind: str
    text: str
    offset: int

    @property
    def name(self) -> str | None:
        """The identifier this lexeme names (unquoted, ASCII letters in lower case), or None."""
        if self.kind == "word" and self.text.lower() not in _keywords():
            return self.text.lower()
        if self.kind in ("quoted", "dq") and len(self.text) >= 2:
            inner = self.text[1:-1]
            if self.text[0] == '"':
                inner = inner.replace('""', '"')
            elif self.text[0] == "`":
                inner = inner.replace("``", "`")
            return fold_name(inner)
        return None

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.lower() in words


def lex_sql(sql: str) -> list[Lexeme]:
    """The words, names, literals and punctuation of ``sql`` as SQLite reads them (spaces dropped).

    >>> [lx.text for lx in lex_sql("SELECT name FROM t WHERE x<>'a b'")]
    ['SELECT', 'name', 'FROM', 't', 'WHERE', 'x', '<>', "'a b'"]
    """
    return [Lexeme(m.lastgroup or "punct", m.group(), m.start())
            for m in _LEXEME.finditer(sql) if m.lastgroup != "space"]


def _declared(lexemes: list[Lexeme], tables: dict[str, frozenset[str]]) -> tuple[set[str], dict[str, str]]:
    """The made-up names ``lexemes`` declare, and which real table each alias stands for."""
    names: set[str] = set()
    bound: dict[str, str] = {}
    for i, lx in enumerate(lexemes):
        name = lx.name
        if name is None:
            continue
        before = lexemes[i - 1] if i else None
        after = lexemes[i + 1] if i + 1 < len(lexemes) else None
        if before is not None and (before.is_word("as") or _ends_operand(before)):
            names.add(name)  # `x AS name`, `table name`, `(subquery) name`, `count(*) name`
            source = lexemes[i - 2] if before.is_word("as") and i >= 2 else before
            qualified = source is not before and i >= 3 and lexemes[i - 3].text == "."
            table = source.name if source.name in tables and not qualified else None
            # `table [AS] alias` (not `t.column AS alias`); an alias bound twice differently is
            # in two scopes, which a lexical check cannot tell apart: then it is left unbound
            bound[name] = table if bound.get(name, table) == table else None
        elif after is not None and after.is_word("as") and i + 2 < len(lexemes) and lexemes[i + 2].text == "(":
            names.add(name)  # `name AS (` : a common table expression or a window
        elif after is not None and after.text == "(" and _cte_columns(lexemes, i + 1, names):
            names.add(name)  # `name (a, b) AS (`
    return names, bound


def _ends_operand(lx: Lexeme) -> bool:
    """Whether an alias may directly follow ``lx`` (the end of a table, subquery or expression)."""
    if lx.kind in ("quoted", "dq", "string", "number", "blob"):
        return True
    if lx.kind == "word":
        return lx.text.lower() not in _keywords() or lx.text.lower() in ("end", "null", "true", "false")
    return lx.text == ")"


def _cte_columns(lexemes: list[Lexeme], open_at: int, names: set[str]) -> bool:
    """If ``(`` at ``open_at`` opens a CTE's column list (``(a, b) AS (``), add the columns."""
    j, cols = open_at + 1, []
    while j < len(lexemes) and lexemes[j].text != ")":
        if lexemes[j].text != ",":
            if lexemes[j].name is None:
                return False
            cols.append(lexemes[j].name)
        j += 1
    if j + 2 < len(lexemes) and lexemes[j + 1].is_word("as") and lexemes[j + 2].text == "(":
        names.update(cols)
        return True
    return False


def undeclared_names(sql: str, tables: dict[str, frozenset[str]]) -> list[tuple[str, int]]:
    """See :meth:`CompiledSql.undeclared_names`; ``tables`` maps real tables to their columns,
    all lower case."""
    lexemes = lex_sql(sql)
    declared, bound = _declared(lexemes, tables)
    known = set(tables).union(*tables.values())
    problems = []
    for i, lx in enumerate(lexemes):
        name = lx.name
        if name is None:
            continue
        after = lexemes[i + 1] if i + 1 < len(lexemes) else None
        before = lexemes[i - 1] if i else None
        if before is not None and before.text == "." and i >= 2:
            table = lexemes[i - 2].name
            table = bound[table] if table in bound else table
            if table in tables:  # `t.column` with t a real table: a column of t
                if name not in tables[table]:
                    problems.append((f"{lexemes[i - 2].text}.{lx.text}", lexemes[i - 2].offset))
                continue
        if name in known or name in declared:
            continue
        if lx.kind == "dq" and (before is None or before.text != "."):
            continue  # SQLite reads a double-quoted word that names nothing as a string
        if lx.kind == "word" and after is not None and after.text == "(":
            continue  # a function
        if before is not None and before.is_word("collate") and name in _COLLATIONS:
            continue
        problems.append((lx.text, lx.offset))
    return problems
