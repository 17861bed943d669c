"""Grammar-file (Lark CFG) compile time and token-mask time: structgen next to llguidance and xgrammar.

Run (one CPU thread, the same tokenizer, grammar texts and sample texts for every engine)::

    .venv/bin/python benchmarks/grammar.py
    .venv/bin/python benchmarks/grammar.py --cases json,arithmetic --reps 5 --engines structgen,xgrammar

Cases (:data:`CASES`, a grammar file and 3-5 valid sample texts each; adding one is one line):
``json`` (``structgen/grammars/json.lark``), ``arithmetic`` (``structgen/grammars/arithmetic.lark``, left-recursive),
``large`` (``benchmarks/data/grammar_c_expr.lark``: a C-like language, 12 left-recursive
operator levels, ``%ignore`` whitespace and ``//`` / ``/* */`` comments), and two cases of
``structgen/grammars/sqlite.lark`` specialised to one database by ``structgen.frontends.sql.sql_grammar_text(schema,
strict=False)`` (its ``TABLE_NAME`` / ``COLUMN_NAME`` terminals become the database's names,
``/.../i`` regexes): ``sql`` (defog's ``car_dealership``) and ``sql-spider`` (Spider's
``world_1``), 5 gold queries each. The SQL cases read the databases from ``../shared/data/sql``
next to the repository (not in it) and stop with a message when they are missing; leave them
out with ``--cases``. Every engine reads the same Lark text, unchanged (both peers take the
``/.../i`` and ``"..."i`` flags as they are): structgen ``Compiler.grammar_file``, llguidance
``LLMatcher.grammar_from_lark``, xgrammar ``Grammar.from_lark``; ``%import common.X`` resolves in
each engine's own ``common`` library.

What is measured, per engine and case:

* **compile** -- time to first mask: parse the Lark text (read from its file, and specialised, beforehand), compile
  it, make a matcher, fill the first token bitmask. Each (engine, case) runs in a new worker process, forked from
  the parent after it loaded the tokenizer (and before it compiled anything): the worker builds the engine's
  per-tokenizer state, compiles a tiny warm-up grammar (reported separately), then compiles the case ``--reps`` times, each time with a fresh compiler (structgen: ``Compiler(vocab, disk_cache=False)``; llguidance:
  a fresh ``LLMatcher``; xgrammar: one ``GrammarCompiler`` with ``cache_enabled=False``, ``max_threads=1``, eager
  masks). **first** is the first compile of the case in its worker: what a grammar new to the process costs (the
  median over ``--firsts`` workers; all but the last compile it once and stop).
  **recompile** is the p50 of the other reps: the same text again in the same process. There structgen reuses what it
  keeps per process and per vocabulary, keyed by content, not by compiler (rule automata, lowered regexes, terminal
  rows, and the facts of states its first compile visited, in memory and in the run's new cache folder); llguidance
  and xgrammar keep nothing between their reps, so for them the two figures measure the same work.
* **mask** -- every bitmask filled while walking each sample text (encoded without special
  tokens) through a matcher of the last compiled grammar: one mask after each accepted token,
  the last at the end-of-sequence position; the mask at position 0 counts as compile. Pooled
  over the case's samples, a rejected walk's masks up to the rejection included; cold states
  included (matchers of one grammar share its caches). structgen/peer ratios of mask p50s pool
  only the walks both engines completed.
* A walk is **rejected** when the mask excludes the sample's next token, the matcher refuses it,
  or the last mask does not allow end-of-sequence.
* A compile or walk running over ``--timeout`` seconds (default 60), or growing the address space
  by ``--mem-gib`` (default 4), is an **error** of that case (reported with its text), not the
  end of the run; the engine's per-tokenizer state is then rebuilt for the next case.

The markdown report goes to stdout and to ``benchmarks/results/grammar.md``.
"""

from __future__ import annotations

import os
import sys
import tempfile

# Cold by default: structgen keeps slow state facts on disk (STRUCTGEN_CACHE_DIR/facts), and
# facts an earlier run saved would hide what a grammar's first masks cost (each worker gets a
# new folder: in_worker). --warm keeps the user's own folder, which engine.py would replace.
if "--warm" in sys.argv:
    os.environ.setdefault("STRUCTGEN_CACHE_DIR", os.path.expanduser("~/.cache/structgen"))

import engine  # noqa: E402  first: sets the one-thread environment before any engine loads

import argparse
import concurrent.futures
import contextlib
import datetime
import functools
import gc
import multiprocessing
import platform
import resource
import shlex
import signal
import time
import traceback
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from _report import choose, cpu_model, git_commit, markdown_table, package_versions, publish
from engine import fmt, load_tokenizer, native_stderr_silenced, pct

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
DATA = Path(__file__).resolve().parent / "data"
SQL_DATA = ROOT.parent / "shared" / "data" / "sql"  # not in the repository: benchmarks never run in CI
WARMUP = 'start: item+\nitem: NUMBER | "(" item+ ")"\n%import common.NUMBER\n%import common.WS\n%ignore WS\n'

# ---------------------------------------------------------------------------------- samples
# Hand-written, valid in every engine's reading of its grammar; none starts or ends with
# whitespace or a comment (there the engines' %ignore handling differs).

JSON_SAMPLES = [
    '{"id": 1042, "name": "Ada Lovelace", "email": "ada@example.org", "active": true,\n'
    ' "score": -12.5e-3, "tags": ["math", "engine", "notes"], "manager": null,\n'
    ' "address": {"street": "12 St James\'s Square", "city": "London", "zip": "SW1Y 4JH"},\n'
    ' "history": [{"year": 1843, "event": "Notes on the \\"Analytical Engine\\""}]}',
    '[{"sku":"A-100","qty":3,"price":19.99,"dims":[10,20.5,3e2]},{"sku":"B-7","qty":0,'
    '"price":0.5,"dims":[]},{"sku":"C-42","qty":12,"price":1E+3,"dims":[1,2,3,4,5,6]},'
    '{"sku":"\\u00e9t\\u00e9","qty":-1,"price":-0.0,"dims":[0.001]}]',
    '{\n  "query": "caf\\u00e9 near me",\n  "results": [\n    {\n      "title": "Café Zürich 🍰",\n'
    '      "rating": 4.7,\n      "open": false,\n      "hours": {"mon": "8-18", "sun": null}\n'
    '    },\n    {\n      "title": "Tab\\tand\\\\slash\\/ok",\n      "rating": 3,\n'
    '      "open": true,\n      "hours": {}\n    }\n  ],\n  "page": 1\n}',
    '[[[[1, [2, [3, [4, []]]]]]], {"a": {"b": {"c": {"d": [true, false, null, "x"]}}}}, "", 0, '
    '-0.25, 123456789012345678901234567890, "line\\nbreak and \\r\\n", {"": [{}]}]',
]
ARITHMETIC_SAMPLES = [
    "1 + 2 * 3 - 4 / 5",
    "f(x, 2 ^ -y) / (3.5e2 - g()) * h(1, 2, 3) + alpha_1 ^ beta ^ 2",
    "((a + b) * (c - d)) / -(e ^ 2 + sqrt(f * f + g * g)) - 0.001 * max(x1, x2, x3, x4)",
    "-(-(-7)) + 10e-3 * pow(2, 8) / (n - 1) - .5 + 6. * sin(pi / 4) ^ 2 + cos(theta)",
]
C_SAMPLES = [
    "int gcd(int a, int b) {\n    while (b != 0) { int t = b; b = a % b; a = t; }\n    return a;\n}\n"
    "// entry point\nint main(void* argv) {\n    int xs[4] = 0, n = 3;\n"
    "    for (int i = 0; i < n; i++) { xs[i] = gcd(i * 12, 18) << 1 | 1; }\n"
    '    if (n >= 2 && !(xs[0] == 1) || n ^ 3) printf("%d\\n", xs[n - 1]); else n += \'a\';\n'
    "    /* a block\n       comment */\n    return n > 0 ? -n : ~n & 0;\n}",
    "double mean(double* v, long len) {\n    double s = 0.0;\n    long i;\n"
    "    for (i = 0; i < len; ++i) s += v[i];\n    return len ? s / (double) len : 0.0;\n}\n"
    "void swap(int* a, int* b) { int t = *a; *a = *b; *b = t; }  // by pointer\n"
    "bool sorted(int* v, int n) {\n    for (int i = 1; i < n; i++) {\n"
    "        if (v[i - 1] > v[i]) return false;\n    }\n    return true;\n}",
    "int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n"
    "int main() {\n    char c = '\\n';\n    int mask = (1 << 8) - 1, x = 0 == 0;\n"
    "    while (true) {\n        x = (x * 31 + fib(10)) & mask;\n"
    "        if (x % 7 == 0 && x >= 14 || !(x <= 3)) break; else continue;\n    }\n"
    '    node.next->value = x >> 2 ^ ~mask; /* field access */\n    log("done", x, c);\n'
    "    return 0;\n}",
]

# Gold queries, verbatim, from ../shared/data/sql/defog_sqlite.jsonl (db_id car_dealership) and
# spider_dev.jsonl (db_id world_1).
SQL_DEFOG_SAMPLES = [
    "SELECT COUNT(id) AS TSC FROM sales WHERE sale_date >= DATE('now', '-7 days')",  # defog_instruct_advanced_sqlite_28
    "SELECT COUNT(*) AS weekend_payments FROM payments_made WHERE vendor_name = 'Utility Company' AND strftime('%w', payment_date) IN ('0', '6')",  # defog_questions_gen_sqlite_206
    "SELECT c.id AS car_id, c.make, c.model, c.year FROM cars AS c LEFT JOIN sales AS s ON c.id = s.car_id WHERE s.car_id IS NULL",  # defog_instruct_basic_sqlite_18
    "SELECT (SUM(sale_price) - SUM(cars.cost)) / SUM(cars.cost) * 100 AS gpm FROM sales JOIN cars ON sales.car_id = cars.id WHERE strftime('%Y', sale_date) = '2023'",  # defog_instruct_advanced_sqlite_31
    "WITH salesperson_sales AS (SELECT s.id, s.first_name, s.last_name, SUM(sa.sale_price) AS total_sales FROM salespersons AS s LEFT JOIN sales AS sa ON s.id = sa.salesperson_id GROUP BY s.id) SELECT id, first_name, last_name, total_sales FROM salesperson_sales ORDER BY total_sales DESC LIMIT 5",  # defog_instruct_advanced_sqlite_18
]
SQL_SPIDER_SAMPLES = [
    'SELECT Code FROM country WHERE GovernmentForm != "Republic" EXCEPT SELECT CountryCode FROM countrylanguage WHERE LANGUAGE  =  "English"',  # spider_dev_782
    'select sum(population) ,  avg(surfacearea) from country where continent  =  "north america" and surfacearea  >  3000',  # spider_dev_810
    'SELECT avg(LifeExpectancy) FROM country WHERE Name NOT IN (SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code  =  T2.CountryCode WHERE T2.Language  =  "English" AND T2.IsOfficial  =  "T")',  # spider_dev_764
    'select distinct t3.name from country as t1 join countrylanguage as t2 on t1.code  =  t2.countrycode join city as t3 on t1.code  =  t3.countrycode where t2.isofficial  =  \'t\' and t2.language  =  \'chinese\' and t1.continent  =  "asia"',  # spider_dev_786
    'SELECT COUNT(*) FROM (SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code  =  T2.CountryCode WHERE T2.Language  =  "English" INTERSECT SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code  =  T2.CountryCode WHERE T2.Language  =  "Dutch")',  # spider_dev_744
]


@dataclass
class Case:
    name: str
    path: Path  # a Lark grammar file, read as text and given unchanged to every engine
    samples: list[str]
    # When set, the grammar text is specialise(path)'s (e.g. the SQL grammar filled in with one
    # database's names) instead of the file's own; label names what it was specialised to.
    specialise: Callable[[Path], str] | None = None
    label: str = ""

    @functools.cached_property
    def grammar(self) -> str:
        return self.specialise(self.path) if self.specialise else self.path.read_text()

    @property
    def source(self) -> str:
        """The report's grammar column: the file, and what it was specialised to."""
        return f"`{self.path.relative_to(ROOT)}`" + (f" + {self.label}" if self.label else "")


def sql_case(name: str, database: str, samples: list[str]) -> Case:
    """``structgen/grammars/sqlite.lark`` specialised to ``database`` (a path under :data:`SQL_DATA`) by
    ``structgen.frontends.sql.sql_grammar_text(read_schema(db), strict=False)``: its ``TABLE_NAME`` and
    ``COLUMN_NAME`` terminals become the database's names (``/.../i`` regexes)."""

    def specialise(path: Path) -> str:
        db = SQL_DATA / database
        if not db.is_file():
            raise SystemExit(f"grammar.py: case {name!r} needs the SQLite database {db} (the shared "
                             f"data folder, ../shared/data/sql next to the repository); it is missing. "
                             f"Leave the case out with --cases.")
        from structgen.frontends.sql import read_schema, sql_grammar_text

        return sql_grammar_text(read_schema(db), path, strict=False)

    return Case(name, ROOT / "structgen" / "grammars" / "sqlite.lark", samples, specialise, Path(database).stem)


CASES = {c.name: c for c in (
    Case("json", ROOT / "structgen" / "grammars" / "json.lark", JSON_SAMPLES),
    Case("arithmetic", ROOT / "structgen" / "grammars" / "arithmetic.lark", ARITHMETIC_SAMPLES),
    Case("large", DATA / "grammar_c_expr.lark", C_SAMPLES),
    sql_case("sql", "databases/car_dealership.sqlite", SQL_DEFOG_SAMPLES),
    sql_case("sql-spider", "spider_dev_schema_only/databases/world_1.sqlite", SQL_SPIDER_SAMPLES),
)}

# ---------------------------------------------------------------------------------- engines


class StructgenEngine(engine.StructgenEngine):
    def grammar(self, text: str) -> Any:
        # A fresh Compiler per compile: no in-memory or on-disk grammar-cache hit.
        return self.structgen.Compiler(self.vocab, disk_cache=False).grammar_file(text)


class LLGuidanceEngine(engine.LLGuidanceEngine):
    def grammar(self, text: str) -> Any:  # the compiled grammar is a matcher; walks copy it
        return self.llg.LLMatcher(self.lltok, self.llg.LLMatcher.grammar_from_lark(text))

    def matcher(self, grammar: Any) -> Any:
        if grammar.is_error():
            raise RuntimeError(grammar.get_error())
        return grammar.deep_copy()


class XGrammarEngine(engine.XGrammarEngine):
    def grammar(self, text: str) -> Any:
        return self.compiler.compile_grammar(self.xgr.Grammar.from_lark(text))


class XGrammarDynamicEngine(XGrammarEngine):
    name, dynamic = "xgrammar-dynamic", True


ENGINE_CLASSES = {e.name: e for e in (StructgenEngine, LLGuidanceEngine, XGrammarEngine,
                                      XGrammarDynamicEngine)}
DEFAULT_ENGINES = ("structgen", "llguidance", "xgrammar")

# ---------------------------------------------------------------------------------- measuring


@dataclass
class Result:
    compile_ms: list[float] = field(default_factory=list)
    mask_us: dict[int, list[float]] = field(default_factory=dict)  # sample index -> masks
    completed: set[int] = field(default_factory=set)  # samples walked to the end-of-sequence
    rejections: list[str] = field(default_factory=list)
    error: str | None = None


def first_mask(eng: engine.Engine, text: str) -> tuple[Any, float]:
    """(compiled grammar, ms to first mask: compile + matcher + first bitmask)."""
    t0 = time.perf_counter_ns()
    grammar = eng.grammar(text)
    eng.fill(eng.matcher(grammar))
    return grammar, (time.perf_counter_ns() - t0) / 1e6


def walk(eng: engine.Engine, grammar: Any, tokens: list[int]) -> tuple[list[float], int | None, str | None]:
    """(mask µs after each token, index of the refused token or None, why the walk stopped)."""
    clock, masks = time.perf_counter_ns, []
    matcher = eng.matcher(grammar)
    eng.fill(matcher)  # position 0: compile time's mask, not timed here
    for pos, token_id in enumerate(tokens):
        if not eng.allows(token_id):
            refused = "and refused" if not eng.advance(matcher, token_id) else "but advance accepts it"
            return masks, pos, f"masked out ({refused})"
        if not eng.advance(matcher, token_id):
            return masks, pos, "refused by advance"
        t0 = clock()
        eng.fill(matcher)
        masks.append((clock() - t0) / 1e3)
    if not any(eng.allows(e) for e in eng.eos_ids):
        return masks, None, "end-of-sequence not allowed after the whole sample"
    return masks, None, None


def where(tokenizer: Any, tokens: list[int], pos: int | None) -> str:
    if pos is None:
        return f"at the end ({len(tokens)} tokens)"
    return (f"token {pos}/{len(tokens)} id {tokens[pos]} {tokenizer.decode([tokens[pos]])!r} "
            f"after {tokenizer.decode(tokens[:pos])[-50:]!r}")


@contextlib.contextmanager
def limits(seconds: float, gib: float) -> Iterator[None]:
    """TimeoutError once Python code has run ``seconds``; MemoryError once the address space grows
    ``gib`` GiB past its size now (soft ``RLIMIT_AS``): a blow-up fails one case, not the run."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"over the {seconds:g} s limit (--timeout)")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = (engine._proc_status_kib("VmSize") or 0) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size + int(gib * 2**30), hard))
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def measure(eng: engine.Engine, case: Case, tokens: list[list[int]], args: argparse.Namespace,
            tokenizer: Any) -> Result:
    res, phase = Result(), ""
    try:
        with native_stderr_silenced():
            for rep in range(args.reps):
                phase = f"compile {rep + 1}"
                with limits(args.timeout, args.mem_gib):
                    grammar, ms = first_mask(eng, case.grammar)
                res.compile_ms.append(ms)
            for i, toks in enumerate(tokens):
                phase = f"walk of sample {i}"
                with limits(args.timeout, args.mem_gib):
                    masks, pos, why = walk(eng, grammar, toks)
                res.mask_us[i] = masks
                if why:
                    res.rejections.append(f"sample {i}: {why}: {where(tokenizer, toks, pos)}")
                else:
                    res.completed.add(i)
    except Exception as err:  # noqa: BLE001 -- one case must never stop the run
        res.error = f"{phase}: {type(err).__name__}: {err}".rstrip().rstrip(":")
        if isinstance(err, MemoryError):
            res.error += f" (address space {args.mem_gib:g} GiB past its size: --mem-gib)"
        elif not isinstance(err, (RuntimeError, ValueError, TimeoutError)) \
                and "structgen" not in type(err).__module__:
            res.error += "\n" + traceback.format_exc(limit=3)
    return res


# ---------------------------------------------------------------------------------- report


def recompiles(r: Result) -> list[float]:
    return r.compile_ms[1:]


def result_row(case: Case, name: str, r: Result) -> list[str]:
    masks = [t for m in r.mask_us.values() for t in m]
    walks = f"{len(r.completed)}/{len(case.samples)}" if not r.error else "–"
    first = fmt(r.compile_ms[0]) if r.compile_ms else "–"
    return [case.name, name, first, fmt(pct(recompiles(r), 50)), fmt(pct(recompiles(r), 100)),
            fmt(pct(masks, 50)), fmt(pct(masks, 99)), fmt(pct(masks, 100)), str(len(masks)), walks,
            "error" if r.error else str(len(r.rejections))]


def ratio_row(case: str, peer: str, ours: Result, theirs: Result) -> list[str]:
    """structgen / peer: first compiles, recompile p50s, mask p50s over the walks both completed."""
    both = sorted(ours.completed & theirs.completed)
    m_ours, m_theirs = ([t for i in both for t in r.mask_us[i]] for r in (ours, theirs))
    nan = float("nan")
    first = ours.compile_ms[0] / theirs.compile_ms[0] if ours.compile_ms and theirs.compile_ms else nan
    again = (pct(recompiles(ours), 50) / pct(recompiles(theirs), 50)
             if recompiles(ours) and recompiles(theirs) else nan)
    m_ratio = pct(m_ours, 50) / pct(m_theirs, 50) if m_ours else nan
    return [case, f"structgen / {peer}", fmt(first), fmt(again), str(len(both)), fmt(m_ratio)]


def problems(results: dict[str, dict[str, Result]]) -> list[str]:
    """Errors and rejected walks, each with the engines that completed the same walk."""
    lines = []
    for case, by_engine in results.items():
        for e, r in by_engine.items():
            if r.error:
                lines.append(f"- **{e}** error on `{case}`:\n  ```\n  " + r.error.replace("\n", "\n  ")
                             + "\n  ```")
            for why in r.rejections:
                i = int(why.split(":")[0].split()[1])
                peers = [p for p, q in by_engine.items() if p != e and i in q.completed]
                lines.append(f"- **{e}** rejected `{case}` {why} (completed by: {', '.join(peers) or 'none'})")
    return lines


def report(args: argparse.Namespace, tokenizer: Any, tokens: dict[str, list[list[int]]],
           setup: dict[str, list[tuple[float, float]]], results: dict[str, dict[str, Result]]) -> str:
    header = ["case", "engine", "first compile ms", "recompile p50 ms", "max", "mask p50 µs", "p99",
              "max", "masks", "walks ok", "rejected"]
    rows = [result_row(CASES[c], e, results[c][e]) for c in args.cases for e in args.engines]
    ratios = [ratio_row(c, p, results[c]["structgen"], results[c][p]) for c in args.cases
              for p in args.engines if p != "structgen"] if "structgen" in args.engines else []
    grammars = [[c, CASES[c].source, str(CASES[c].grammar.count("\n")),
                 str(len(CASES[c].grammar.encode())), str(len(CASES[c].samples)),
                 str(sum(len(s.encode()) for s in CASES[c].samples)), str(sum(map(len, tokens[c])))]
                for c in args.cases]
    parts = [
        "# Grammar-file benchmark: compile and mask time",
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}, one thread (RAYON/OMP_NUM_THREADS=1, "
        f"xgrammar max_threads=1); Python {platform.python_version()}",
        f"- versions: {package_versions([*(ENGINE_CLASSES[e].package for e in args.engines), 'transformers', 'numpy'])}; "
        f"structgen checkout {git_commit()}",
        f"- tokenizer: {getattr(tokenizer, 'name_or_path', '?')} ({len(tokenizer)} tokens)",
        f"- repetitions: {args.reps} compiles per case and engine, in a new worker process per case and engine "
        f"(the first, then {args.reps - 1} recompiles); first compiles: the median of {args.firsts} workers",
        "- structgen's disk cache: " + ("the user's (--warm): state facts saved by earlier runs are reused"
                                       if args.warm else "a new empty folder per worker (cold): every state's "
                                       "facts are computed in the worker, then shared by its later reps"),
        "",
        markdown_table(["case", "grammar", "lines", "bytes", "samples", "sample bytes", "sample tokens"],
                       grammars),
        "",
        "Every engine reads the same Lark text, unchanged (no peer-specific rewrite): structgen "
        "`Compiler.grammar_file`, llguidance `LLMatcher.grammar_from_lark`, xgrammar "
        "`Grammar.from_lark`; `%import common.X` comes from each engine's own `common` library. "
        "structgen matches bytes with lexer rules (a token ends only before a byte no terminal "
        "reads on; keywords are not identifiers), llguidance lexes (longest match), xgrammar "
        "lowers terminals to rules with the `%ignore` terminals after each terminal. Samples "
        "start and end with no ignored text, as the engines disagree there.",
        "",
        "compile = Lark text to first mask (compile + matcher + first bitmask) with a fresh compiler. "
        "first: the case's first compile in a new process (after the per-tokenizer set-up and a tiny "
        "warm-up grammar), what a grammar new to the process costs. recompile: the same text compiled "
        "again in that process; structgen then reuses what it keeps per process and per vocabulary, keyed "
        "by content (rule automata, lowered regexes, terminal rows, the facts of states the first compile "
        "visited), while llguidance and xgrammar keep nothing between reps. mask = each bitmask after a "
        "sample token, end-of-sequence position included, pooled over the samples (a rejected walk's "
        "masks up to the rejection included).",
        "",
        markdown_table(header, rows),
        "",
        "Ratios (below 1: structgen faster): first compiles, recompile p50s, mask p50s over the walks "
        "both engines completed.",
        "",
        markdown_table(["case", "", "first compile ratio", "recompile ratio", "walks", "mask p50 ratio"],
                       ratios),
        "",
        "Per-tokenizer set-up and the warm-up grammar's compile, in each worker (median over the "
        "cases), not in the tables above:",
        "",
        markdown_table(["engine", "setup s", "warm-up compile ms"],
                       [[e, f"{pct([s for s, _ in v], 50):.2f}", fmt(pct([w for _, w in v], 50))]
                        for e, v in setup.items()]),
        "",
        "## Rejected walks and errors",
        "",
        *(problems(results) or ["none"]),
        "",
    ]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    p.add_argument("--reps", type=int, default=5, help="compiles per case and engine (default 5)")
    p.add_argument("--firsts", type=int, default=3,
                   help="worker processes per case and engine whose first compiles are pooled (default 3)")
    p.add_argument("--warm", action="store_true",
                   help="use structgen's own cache folder (facts saved by earlier runs) instead of a new one")
    p.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                   help="comma-separated subset of " + ",".join(ENGINE_CLASSES))
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per compile and per walk before the case counts as an error (default 60)")
    p.add_argument("--mem-gib", type=float, default=4.0,
                   help="address-space growth (GiB) per compile or walk before MemoryError (default 4)")
    p.add_argument("--tokenizer", default=None, help="as engine.py's --tokenizer (default SmolLM2)")
    p.add_argument("--out", type=Path, default=RESULTS / "grammar.md")
    args = p.parse_args(argv)
    args.cases = choose(p, args.cases, CASES, "cases")
    args.engines = choose(p, args.engines, ENGINE_CLASSES)
    return args


_TOKENIZER: list[Any] = [None]  # loaded once by main(); the forked workers inherit it


def run_case(name: str, case: str, tokens: list[list[int]], args: argparse.Namespace, first_only: bool,
             cache: str | None) -> tuple[float, float, Result]:
    """(set-up s, warm-up compile ms, result) of one engine on one case, in this (new) process:
    the case's first compile only, or all of :func:`measure`; ``cache``: structgen's cache
    folder for it (None: the user's, ``--warm``)."""
    if cache is not None:
        os.environ["STRUCTGEN_CACHE_DIR"] = cache
    tokenizer = _TOKENIZER[0]
    t0 = time.perf_counter()
    eng = ENGINE_CLASSES[name](tokenizer, "flexible")  # whitespace: unused by grammars
    setup_s = time.perf_counter() - t0
    warm_ms = first_mask(eng, WARMUP)[1]
    gc.collect()
    gc.freeze()  # set-up objects out of the collector's way, as engine.py does
    once = argparse.Namespace(**{**vars(args), "reps": 1})
    return setup_s, warm_ms, measure(eng, CASES[case], [] if first_only else tokens,
                                     once if first_only else args, tokenizer)


def in_worker(name: str, case: str, tokens: list[list[int]], args: argparse.Namespace,
              first_only: bool) -> tuple[float, float, Result]:
    """:func:`run_case` in a new process, forked from this one, which has loaded the tokenizer
    and compiled nothing: each case's first compile starts from nothing that another case (or
    another engine) left in the process."""
    # a new empty folder per worker (not --warm): no facts from another worker's compiles
    with contextlib.ExitStack() as stack:
        cache = None if args.warm else stack.enter_context(tempfile.TemporaryDirectory(prefix="structgen-grammar-bench-"))
        pool = stack.enter_context(concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")))
        try:
            return pool.submit(run_case, name, case, tokens, args, first_only, cache).result()
        except BrokenProcessPool as err:  # killed (e.g. out of memory)
            return float("nan"), float("nan"), Result(error=f"the worker process died: {err}")


def measured(name: str, case: str, tokens: list[list[int]],
             args: argparse.Namespace) -> tuple[list[tuple[float, float]], Result]:
    """One engine on one case: ``--firsts - 1`` workers that compile it once, then one that
    measures everything; its first compile becomes the median of all workers' first compiles
    (one first compile on a shared machine is one sample of its noise)."""
    runs = [in_worker(name, case, tokens, args, k < args.firsts - 1) for k in range(args.firsts)]
    result = runs[-1][2]
    firsts = [r.compile_ms[0] for _, _, r in runs if r.compile_ms and not r.error]
    if result.compile_ms and firsts:
        result.compile_ms[0] = pct(firsts, 50)
    for _, _, r in runs[:-1]:
        if r.error and not result.error:
            result.error = r.error
    return [(s, w) for s, w, _ in runs], result


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    for c in args.cases:  # a specialised grammar's data missing: stop here, not mid-run
        CASES[c].grammar
    tokenizer = _TOKENIZER[0] = load_tokenizer(args.tokenizer)
    tokens = {c: [tokenizer.encode(s, add_special_tokens=False) for s in CASES[c].samples] for c in args.cases}
    setup: dict[str, list[tuple[float, float]]] = {}
    results: dict[str, dict[str, Result]] = {c: {} for c in args.cases}
    for name in args.engines:  # one engine at a time, one worker process per case
        for c in args.cases:
            t0 = time.perf_counter()
            runs, r = measured(name, c, tokens[c], args)
            results[c][name] = r
            setup.setdefault(name, []).extend(runs)
            print(f"[{name}] {c}: {time.perf_counter() - t0:.1f} s" + (f" -- {r.error}" if r.error else ""),
                  file=sys.stderr, flush=True)
    text = report(args, tokenizer, tokens, setup, results)
    publish(text, args.out)


if __name__ == "__main__":
    main()
