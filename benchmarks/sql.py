"""Text to SQL on the default model: do the returned queries run, first try and after retries?

Questions: the first ``--per-db`` questions of each defog database (real rows: execution
accuracy is judged) and the first ``--spider-per-db`` of each Spider dev database (schema-only,
empty: only "runs without error" is judged), from ``../shared/data/sql`` (see
``tests/sql_data.py``). For each, :meth:`structgen.Generator.sql` with ``execute=True``
(greedy, drafts on, ``max_retries`` as given) and, as the baseline in the same run, the same
model and prompt unconstrained (greedy ``model.generate``, text up to the first ``;`` or blank
line, code fences stripped), run on the same read-only database.

Reported: the share of questions with a returned query, the share whose returned query runs
(structgen: by construction 100% of those returned), the first-try rate (the first query
written passed), retries, execution accuracy (the rows, as a multiset, equal those of the gold
query or one of its listed alternatives; defog only), forward passes per new token, draft
acceptance and seconds per question.

Usage::

    python benchmarks/sql.py                       # writes benchmarks/results/sql.md
    python benchmarks/sql.py --per-db 2 --spider-per-db 0 --out /tmp/sql.md
"""

from __future__ import annotations

import argparse
import collections
import re
import sqlite3
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]

from _report import cpu_model, git_commit, markdown_table, package_versions, publish  # noqa: E402
from sql_data import Pair, pairs  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def chosen(per_db: int, spider_per_db: int) -> list[tuple[str, Pair]]:
    out = []
    for name, per in (("defog", per_db), ("spider", spider_per_db)):
        seen: collections.Counter = collections.Counter()
        for p in pairs(name):
            if seen[p.database] < per:
                seen[p.database] += 1
                out.append((name, p))
    return out


def rows_of(database: Path, sql: str) -> list[tuple] | None:
    from structgen.frontends.sql import ReadOnly

    with ReadOnly(database) as con:
        try:
            return con.execute(sql).fetchall()
        except sqlite3.Error:
            return None


def same_rows(a: list[tuple] | None, b: list[tuple] | None) -> bool:
    return a is not None and b is not None and collections.Counter(map(repr, a)) == collections.Counter(map(repr, b))


def gold_rows(pair: Pair, alternatives: dict[str, list[str]]) -> list[list[tuple] | None]:
    return [rows_of(pair.database, q) for q in [pair.sql, *alternatives.get(pair.id, [])]]


def unconstrained(gen, prompt_ids: list[int], max_new_tokens: int) -> tuple[str, int]:
    """The model's own answer to the same prompt, cut to one statement; (text, new tokens)."""
    import torch

    with torch.no_grad():
        out = gen.model.generate(torch.tensor([prompt_ids]), max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=gen.tokenizer.eos_token_id)
    new = out[0, len(prompt_ids):].tolist()
    text = gen.tokenizer.decode(new, skip_special_tokens=True)
    text = re.sub(r"^```\w*\s*", "", text.strip())
    text = re.split(r";|\n\s*\n|```", text)[0].strip()
    return text, len(new)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-db", type=int, default=5, help="defog questions per database (default 5; 11 databases)")
    p.add_argument("--spider-per-db", type=int, default=1, help="Spider questions per database (default 1; 20)")
    p.add_argument("--max-retries", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=160)
    p.add_argument("--no-baseline", action="store_true", help="skip the unconstrained baseline")
    p.add_argument("--out", type=Path, default=RESULTS / "sql.md")
    args = p.parse_args(argv)

    import json

    import structgen
    from structgen.frontends.sql import read_schema
    from structgen.tasks.sql import sql_prompt

    alternatives = {}
    from sql_data import SETS
    for line in SETS["defog"][0].open(encoding="utf-8"):
        r = json.loads(line)
        alternatives[r["id"]] = r.get("gold_sql_alternatives") or []

    gen = structgen.Generator()
    questions = chosen(args.per_db, args.spider_per_db)
    records = []
    started = time.perf_counter()
    for n, (set_name, pair) in enumerate(questions, 1):
        rec = {"set": set_name, "id": pair.id, "db": pair.database.stem}
        t = time.perf_counter()
        try:
            r = gen.sql(pair.question, pair.database, execute=True, max_retries=args.max_retries,
                        max_new_tokens=args.max_new_tokens)
            rec.update(returned=True, sql=r.sql, retries=r.retries, first_try=r.first_try,
                       runs=rows_of(pair.database, r.sql) is not None, passes=r.stats.forward_passes,
                       new_tokens=r.stats.new_tokens, drafted=r.stats.drafted_tokens,
                       accepted=r.stats.accepted_tokens, rows=r.rows)
        except structgen.SqlGenerationError as err:
            rec.update(returned=False, sql=err.attempts[-1].sql, retries=len(err.attempts) - 1,
                       first_try=False, runs=False, error=err.attempts[-1].error)
        rec["seconds"] = time.perf_counter() - t
        if set_name == "defog":
            golds = gold_rows(pair, alternatives)
            rec["correct"] = rec["returned"] and any(same_rows(rec.get("rows"), g) for g in golds)
        if not args.no_baseline:
            ids = gen.chat_ids(sql_prompt(pair.question, read_schema(pair.database).ddl))
            t = time.perf_counter()
            text, count = unconstrained(gen, ids, args.max_new_tokens)
            got = rows_of(pair.database, text) if text else None
            rec.update(base_sql=text, base_runs=got is not None, base_seconds=time.perf_counter() - t,
                       base_tokens=count)
            if set_name == "defog":
                rec["base_correct"] = any(same_rows(got, g) for g in gold_rows(pair, alternatives))
        records.append(rec)
        print(f"[{n}/{len(questions)}] {pair.id}: returned={rec['returned']} retries={rec['retries']} "
              f"correct={rec.get('correct')} base_runs={rec.get('base_runs')} {rec['seconds']:.1f}s "
              f"{rec['sql'][:90]!r}", flush=True)
    write_report(args, records, time.perf_counter() - started)


def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def write_report(args: argparse.Namespace, records: list[dict], seconds: float) -> None:
    rows = []
    for label, group in (("defog (rows)", [r for r in records if r["set"] == "defog"]),
                         ("Spider dev (schema only)", [r for r in records if r["set"] == "spider"]),
                         ("all", records)):
        if not group:
            continue
        returned = [r for r in group if r["returned"]]
        judged = [r for r in group if "correct" in r]
        retries = [r["retries"] for r in returned]
        tokens = sum(r["new_tokens"] for r in returned)
        passes = sum(r["passes"] - 1 - r["retries"] for r in returned)  # decoding passes, prefills excluded
        drafted = sum(r["drafted"] for r in returned)
        row = [label, str(len(group)), pct(len(returned), len(group)),
               pct(sum(r["runs"] for r in returned), len(returned)),
               pct(sum(r["first_try"] for r in group), len(group)),
               f"{statistics.mean(retries):.2f} / {max(retries)}" if retries else "-",
               pct(sum(r["correct"] for r in judged), len(judged)) if judged else "n/a",
               f"{passes / tokens:.2f}" if tokens else "-",
               f"{sum(r['accepted'] for r in returned) / drafted:.0%}" if drafted else "-",
               f"{statistics.median(r['seconds'] for r in group):.1f}"]
        if "base_runs" in group[0]:
            row += [pct(sum(r["base_runs"] for r in group), len(group)),
                    pct(sum(r["base_correct"] for r in judged), len(judged)) if judged else "n/a"]
        rows.append(row)
    header = ["questions", "n", "query returned", "returned query runs", "first try passes",
              "retries mean / max", "execution accuracy", "passes per token", "draft acceptance",
              "s / question (p50)"]
    if not args.no_baseline:
        header += ["unconstrained: runs", "unconstrained: execution accuracy"]
    lines = [
        "# Text to SQL on the default model",
        "",
        f"Command: `python benchmarks/sql.py {' '.join(sys.argv[1:])}`".rstrip() + "",
        "",
        f"structgen {git_commit()}; {package_versions(['torch', 'transformers'])}; {cpu_model()}; "
        f"SmolLM2-135M-Instruct, greedy, `max_retries={args.max_retries}`, "
        f"`max_new_tokens={args.max_new_tokens}`; {len(records)} questions in {seconds / 60:.1f} min.",
        "",
        markdown_table(header, rows),
        "",
        "- *query returned*: `Generator.sql` gave a query (else it raised `SqlGenerationError` after "
        "the retries). *returned query runs*: it runs on the database, checked again here.",
        "- *first try passes*: the first query written passed the name check and `EXPLAIN`/execution.",
        "- *execution accuracy*: the rows equal (as a multiset) those of the gold query or one of its "
        "listed alternatives; defog only (the Spider databases are empty).",
        "- *unconstrained*: the same model and prompt, greedy `generate`, cut at the first `;` or blank "
        "line; *runs* means SQLite executes it without error.",
        "",
        "## Every question",
        "",
        markdown_table(["id", "db", "returned", "retries", "correct", "query (or the last attempt)",
                        "unconstrained"],
                       [[r["id"], r["db"], "yes" if r["returned"] else "no", str(r["retries"]),
                         {True: "yes", False: "no", None: "-"}[r.get("correct")],
                         "`" + r["sql"].replace("|", "\\|").replace("`", "'")[:160] + "`",
                         "`" + r.get("base_sql", "").replace("|", "\\|").replace("`", "'").replace("\n", " ")[:100]
                         + "`" + (" runs" if r.get("base_runs") else "")]
                        for r in records]),
        "",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
