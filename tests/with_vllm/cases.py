"""The requests the vLLM tests send (real schemas, grammars, databases and tools) and the check
of each answer, independent of the processor that masked it: the constraint's matcher over bytes
walks the text, then jsonschema (JSON, tool arguments) or SQLite's ``EXPLAIN`` (SQL) judge a
complete answer."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from itertools import islice
from pathlib import Path
from typing import Any

from structgen.frontends.sql import read_schema
from structgen.frontends.tool_calls import FORMATS, parse_calls, read_tools
from structgen.integrations.constraints import BYTES, compile_constraint, read_constraint, tool_format
from structgen.tasks.json_task import validation_error
from structgen.tasks.sql import sql_prompt
from structgen.tasks.tool_calls import tool_prompt

from sql_data import pairs as sql_pairs
from toolcall_data import cases as bfcl_cases

ROOT = Path(__file__).resolve().parents[2]
#: Where ``make test-vllm`` exports the default model (``STRUCTGEN_VLLM_MODEL`` to move it).
MODEL_DIR = Path(os.environ.get("STRUCTGEN_VLLM_MODEL", ROOT / "build" / "smollm2-135m-instruct"))
PAIRS = ROOT / "benchmarks" / "data" / "e2e_pairs_48_seed1.jsonl"
#: vLLM's CPU backend reserves this share of the machine's memory ("gpu" memory on a GPU).
MEMORY_SHARE = 0.15

#: Lark grammars with a bounded answer (the default model does not run away in them).
SUM_GRAMMAR = 'start: NUMBER (" + " NUMBER)~1..3 " = " NUMBER\nNUMBER: /[1-9][0-9]{0,2}/'
COLORS_GRAMMAR = 'start: color (", " color)~0..3\ncolor: "red" | "green" | "blue" | "yellow" | "black" | "white"'
DATE_REGEX = r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"


def extraction_pairs(n: int, max_schema_chars: int = 800) -> list[dict]:
    """The first ``n`` extraction pairs of the benchmarks with a short schema."""
    out = []
    with open(PAIRS) as f:
        for line in f:
            pair = json.loads(line)
            if len(json.dumps(pair["schema"])) <= max_schema_chars:
                out.append(pair)
    return out[:n]


def chat(tokenizer: Any, content: str) -> str:
    return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                         add_generation_prompt=True)


def json_request(tokenizer: Any, pair: dict) -> tuple[str, dict]:
    schema = json.dumps(pair["schema"], separators=(",", ":"))
    return chat(tokenizer, f"{pair['prompt']}\n\nAnswer with JSON that follows this schema: {schema}"), \
        {"json_schema": pair["schema"]}


def sql_requests(tokenizer: Any, n: int) -> list[tuple[str, dict]]:
    out = []
    for pair in [p for p in sql_pairs("defog") if p.database.stem == "restaurants"][:n]:
        ddl = read_schema(pair.database).ddl
        out.append((chat(tokenizer, sql_prompt(pair.question, ddl)), {"sql": str(pair.database)}))
    return out


def tool_requests(tokenizer: Any, n: int, fmt: str | None = None) -> list[tuple[str, dict]]:
    """BFCL simple cases, the tools shown as structgen shows them (in ``fmt``)."""
    out = []
    for case in islice(bfcl_cases("simple_python"), n):
        prompt, used, _ = tool_prompt(tokenizer, read_tools(case["tools"]), case["messages"],
                                      FORMATS[fmt] if fmt else None)
        out.append((prompt, {"tools": case["tools"], "tool_choice": "required", "format": used.name}))
    return out


def grammar_requests(tokenizer: Any) -> list[tuple[str, dict]]:
    return [(chat(tokenizer, "Write a sum of small numbers and its result."), {"grammar": SUM_GRAMMAR}),
            (chat(tokenizer, "Name the colors of the French flag."), {"grammar": COLORS_GRAMMAR}),
            (chat(tokenizer, "On what date did Apollo 11 land on the Moon? Answer with the date only."),
             {"regex": DATE_REGEX}),
            (chat(tokenizer, "Is Paris the capital of France? Answer yes or no."), {"regex": "(yes|no)"})]


def scope_miss(error: str, database: str) -> bool:
    """EXPLAIN's "no such column: X" for a column X the database has, in another table: the grammar
    knows the database's names, not which table is in scope (``Generator.sql`` retries on
    EXPLAIN's verdict; inside vLLM there is no retry)."""
    match = re.fullmatch(r"no such column: (?:\w+\.)?(\w+)", error)
    columns = {c.lower() for cols in read_schema(database).tables.values() for c in cols}
    return bool(match) and match.group(1).lower() in columns


def problem(constraint: Any, text: str, finish_reason: str, tokenizer: Any = None) -> str | None:
    """Why ``text`` does not satisfy ``constraint`` (``None``: it does). An output cut by
    ``max_tokens`` (``finish_reason == "length"``) must be a legal prefix; a finished one must be
    complete and valid."""
    spec = read_constraint(constraint)
    matcher = compile_constraint(spec, BYTES, tokenizer).matcher()
    data = text.encode("utf-8")
    for i, byte in enumerate(data):
        if not matcher.advance(byte):
            return f"byte {i} of {text!r} leaves the grammar: {matcher.last_rejection}"
    if finish_reason == "length":
        return None
    if finish_reason != "stop":
        return f"finish_reason {finish_reason!r}"
    if not matcher.can_end():
        return f"stopped before the grammar allows it: {text!r}"
    if spec.kind == "json_schema":
        return validation_error(spec.value, json.loads(text))
    if spec.kind == "sql":
        with sqlite3.connect(f"file:{spec.value}?mode=ro", uri=True) as db:
            try:
                db.execute("EXPLAIN " + text)
            except sqlite3.Error as err:
                if not scope_miss(str(err), spec.value):
                    return f"EXPLAIN refuses {text!r}: {err}"
    if spec.kind == "tools":
        _, calls = parse_calls(tool_format(spec, tokenizer), text)
        by_name = {t["function"]["name"]: t["function"] for t in spec.value}
        for name, arguments in calls:
            error = validation_error(by_name[name].get("parameters", {}), arguments)
            if error:
                return f"{name} arguments {arguments}: {error}"
    return None
