"""Grammar files and regexes on the embedded default model.

Run it with ``.venv/bin/python examples/grammar.py`` (after ``make setup``). Three outputs:
an arithmetic expression from ``structgen/grammars/arithmetic.lark`` (a left-recursive grammar), a query
from a small inline grammar whose keywords and punctuation are forced (and so drafted), and a
phone number from a regex. Each line shows the text and what it cost.
"""

from __future__ import annotations

from pathlib import Path

import torch

import structgen

GRAMMARS = Path(__file__).resolve().parent.parent / "structgen" / "grammars"

QUERY = r'''
start: "SELECT " cols " FROM people" (" WHERE " cond)? ";"
cols: COLUMN (", " COLUMN)*
cond: COLUMN " = " (NUMBER | STRING)
COLUMN: "name" | "age" | "city"
NUMBER: /[0-9]{1,3}/
STRING: /'[A-Za-z ]{1,20}'/
'''


def show(label: str, r: structgen.TextResult) -> None:
    s = r.stats
    print(f"{label:10} {r.text!r}\n{'':10} {s.new_tokens} tokens, {s.forward_passes} forward passes, "
          f"{s.accepted_tokens}/{s.drafted_tokens} drafted tokens accepted")


def main() -> None:
    torch.set_num_threads(2)
    gen = structgen.Generator()
    show("arithmetic", gen.grammar(GRAMMARS / "arithmetic.lark", "Write an expression that adds 2 and 3, times 4."))
    show("query", gen.grammar(QUERY, "Write an SQL query for the names of people aged 36."))
    show("regex", gen.regex(r"\(\d{3}\) \d{3}-\d{4}", "Make up a US phone number."))


if __name__ == "__main__":
    main()
