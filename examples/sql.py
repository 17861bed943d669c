"""Text to SQL on the embedded default model, against the bundled ``examples/data/shop.sqlite``.

Run it with ``.venv/bin/python examples/sql.py`` (after ``make setup``). For each question the
model sees the shop's schema; structgen holds it to SQLite syntax and the shop's real tables and
columns, checks the finished query with a read-only ``EXPLAIN``, runs it, and prints the query,
its rows, and the attempts it refused on the way (retries). The database is never written.
"""

from __future__ import annotations

from pathlib import Path

import torch

import structgen

SHOP = Path(__file__).resolve().parent / "data" / "shop.sqlite"

QUESTIONS = [
    "Which customers live in London?",
    "How many orders are there?",
    "What is the total price of all orders per customer city?",
    "List the names of customers who ordered furniture.",
]


def main() -> None:
    torch.set_num_threads(2)
    gen = structgen.Generator()
    print(structgen.frontends.sql.read_schema(SHOP).ddl, "\n")
    for question in QUESTIONS:
        print(question)
        try:
            r = gen.sql(question, SHOP, execute=True)
        except structgen.SqlGenerationError as err:
            print(f"  no query passed: {err}\n")
            continue
        for a in r.attempts:
            print(f"  refused: {a.sql}\n           ({a.error})")
        print(f"  {r.sql}\n  -> {r.rows[:5]}{' ...' if len(r.rows) > 5 else ''}")
        print(f"  {r.retries} retries, {r.stats.new_tokens} tokens, {r.stats.forward_passes} forward passes\n")


if __name__ == "__main__":
    main()
