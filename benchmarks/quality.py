"""Output quality on the default model: how often each engine finishes, validates and is right.

On SmolLM2-135M-Instruct (structgen's default model), greedy, one ``--max-new-tokens`` cap
(default 300) for every engine, three tasks:

* **extraction**: the 48 schema/prompt pairs of ``data/e2e_pairs_48_seed1.jsonl`` (those of
  e2e.py's 48-pair runs); prompt ids ``gen.prompt_ids(schema, prompt)`` (chat template, schema
  shown). Valid: the JSON validates (jsonschema, the schema's own draft). Exact match: the value
  equals the pair's gold instance (numbers numerically, a bool is no number).
* **bfcl**: 100 BFCL v4 cases, the first 25 of ``simple_python``, ``multiple``, ``parallel`` and
  ``parallel_multiple``, interleaved (``../shared/data/toolcalls``), ``tool_choice="required"``;
  prompt text :func:`structgen.tasks.tool_calls.tool_prompt` (SmolLM2's template has no tool
  format, so structgen's ``json`` format: ``<tool_call>[{"name": ..., "arguments": {...}}, ...]</tool_call>``,
  spaced as ``json.dumps`` spaces it, arguments too),
  encoded without special tokens. Valid: at least one call, each names a tool and its arguments
  validate; name accuracy and argument exact match as in toolcalls.py (BFCL's AST check, simplified).
* **sql**: sql.py's default questions (the first 5 of each defog database, the first of each
  Spider dev one); prompt ids ``gen.chat_ids(sql_prompt(question, ddl))`` as
  :meth:`structgen.Generator.sql` builds them. Valid: the query runs on the (read-only) database.
  Execution success (defog only; Spider's databases are empty): its rows equal, as a multiset,
  those of the gold query or one of its listed alternatives (sql.py's measure).

Engines, every one fed the same prompt ids per case, interleaved per case:

* **unconstrained**: ``model.generate`` with no processor. Extraction: the first JSON value in the
  text; BFCL: structgen's own parser for the format (``parse_calls(FORMATS["json"], text)``);
  SQL: the text up to the first ``;`` or blank line, code fences stripped (sql.py's cut).
* **xgrammar**: ``model.generate`` with ``xgr.contrib.hf.LogitsProcessor``. Extraction: the schema
  compiled with ``strict_mode=True`` and compact separators (as ``Generator.json``: closed objects,
  compact whitespace). BFCL: ``Grammar.concat`` of ``"<tool_call>"``, a JSON schema of the call list
  (an array, at least one item, each an ``anyOf`` over the tools of
  ``{"name": {"const": tool}, "arguments": parameters}``, both required) and ``"</tool_call>"``:
  the calls of structgen's ``json`` tool format, spelled in compact JSON (no spaces). SQL: the Lark text
  structgen itself compiles for the database (``sql_grammar_text(schema, strict=True,
  whitespace="spaces")``: real table and column names only) via ``Grammar.from_lark``; the
  database-specialised grammar is structgen's, the engine is xgrammar's.
* **llguidance**: llguidance ships no transformers processor, so the *benchmark's own adapter*
  (``LLGuidanceLogitsProcessor`` from e2e.py: one ``LLMatcher`` per generation over
  ``llguidance.hf.from_tokenizer``, consume the last token, ``llguidance.torch.fill_next_token_bitmask``,
  mask the logits). Extraction: ``grammar_from_json_schema`` of the schema with
  ``additionalProperties: false`` written into every object (llguidance has no strict mode),
  compact whitespace. BFCL: the same call-list schema inside a Lark grammar
  (``start: "<tool_call>" calls "</tool_call>"``, ``calls: %json {...}``). SQL: the same Lark text
  via ``grammar_from_lark``.
* **structgen**: ``Generator.json`` / ``Generator.tool_calls(..., tool_choice="required")`` /
  ``Generator.sql(..., max_retries=0)`` (one attempt, as the peers get; the name check and
  ``EXPLAIN`` still run), ``speculate=True``, as they are today: at the cap they raise
  ``IncompleteGenerationError`` (SQL: ``SqlGenerationError`` naming the budget), counted as a cap
  hit and invalid.
* **structgen-budget**: the same calls with ``budget="complete"`` (budget-aware completion);
  skipped, with a note, for a method whose signature has no ``budget`` parameter yet.

Metrics per engine and task, shares of all cases: **completed and valid** (finished before the cap
and valid as above; structgen: returned a result), **token cap** (the cap was reached first:
the HF engines ended without end-of-sequence, structgen raised at the budget, structgen-budget's
``finish_reason`` was neither ``eos``, ``grammar`` nor ``stop``), **errors** (an engine raised
anything else, the class is listed: counted invalid, the run goes on), then the task's accuracy.
Accuracy is judged on what each engine hands back: the unconstrained text is parsed even when the
cap was hit (a complete JSON value or call list may precede the ramble); a structgen run that
raised hands back nothing.

Usage::

    python benchmarks/quality.py                                 # all: writes benchmarks/results/quality.md
    python benchmarks/quality.py --limit 2 --threads 1           # smoke run
    python benchmarks/quality.py --tasks extraction --engines unconstrained,structgen --limit 5

Peers not installed are reported as not run.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import re
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE), str(ROOT / "tests")]

from _report import choose, details, markdown_table, package_versions, publish, run_lines  # noqa: E402

RESULTS = HERE / "results"
PAIRS = HERE / "data" / "e2e_pairs_48_seed1.jsonl"
TASKS = ("extraction", "bfcl", "sql")
ENGINES = ("unconstrained", "xgrammar", "llguidance", "structgen", "structgen-budget")
HF_ENGINES = ("unconstrained", "xgrammar", "llguidance")
BFCL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
BFCL_PER_CATEGORY = 25
SQL_PER_DB = {"defog": 5, "spider": 1}  # sql.py's defaults
#: structgen's finish reasons for an answer that ended on its own
FINISHED = ("eos", "grammar", "stop", "repeated_call")


class Skip(Exception):
    """The engine does not run this case (not installed, no budget option): not counted."""


class Rejected(Exception):
    """structgen finished a query but its own check (names, ``EXPLAIN``) refused it: nothing handed back."""


# ----------------------------------------------------------------------------------- judging

def same_json(got: Any, want: Any) -> bool:
    """JSON equality: numbers numerically (5 == 5.0), a bool is no number, keys unordered."""
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(want, (int, float)):
        return isinstance(got, (int, float)) and got == want
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(same_json, got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(same_json(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


def first_json(text: str) -> tuple[bool, Any]:
    """(found, value): the first JSON object or array in ``text`` (code fences and prose around it allowed)."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            return True, decoder.raw_decode(text, m.start())[0]
        except ValueError:
            continue
    return False, None


# ------------------------------------------------------------------------------------- tasks

class Task:
    name = ""
    metrics: tuple[str, ...] = ()

    def __init__(self, bench: "Bench") -> None:
        self.b = bench

    def cases(self, limit: int | None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def prompt_ids(self, case: dict[str, Any]) -> list[int]:
        raise NotImplementedError

    def describe(self, cases: list[dict[str, Any]]) -> str:
        raise NotImplementedError


class Extraction(Task):
    name = "extraction"
    metrics = ("exact match",)

    def cases(self, limit):
        rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
        return rows[:limit]

    def describe(self, cases):
        return f"{len(cases)} pairs of `{PAIRS.relative_to(ROOT)}`"

    def prompt_ids(self, case):
        return list(self.b.gen.prompt_ids(case["schema"], case["prompt"]))

    def parse(self, text: str) -> tuple[bool, Any]:
        return first_json(text)

    def xgrammar(self, xgr, case):
        return xgr.Grammar.from_json_schema(json.dumps(case["schema"]), any_whitespace=False,
                                            separators=(",", ":"), strict_mode=True)

    def llguidance(self, llg, case):
        from e2e import closed_objects

        return llg.LLMatcher.grammar_from_json_schema(closed_objects(case["schema"]),
                                                      defaults={"whitespace_flexible": False})

    def structgen(self, case, **options):
        r = self.b.gen.json(case["schema"], case["prompt"], max_new_tokens=self.b.args.max_new_tokens,
                            temperature=0.0, speculate=True, **options)
        return r.value, r.text, r.finish_reason, r.stats.new_tokens

    def judge(self, case, found, value, complete):
        from jsonschema import Draft202012Validator, validators

        schema = case["schema"]
        valid = False
        if found:
            cls = validators.validator_for(schema if isinstance(schema, dict) else {}, default=Draft202012Validator)
            try:
                valid = cls(schema).is_valid(value)
            except Exception:  # noqa: BLE001 -- an unresolvable $ref etc.: not counted as valid
                valid = False
        return {"valid": complete and valid, "exact match": found and same_json(value, case["instance"])}


class Bfcl(Task):
    name = "bfcl"
    metrics = ("names right", "arguments exact")

    def cases(self, limit):
        from toolcall_data import cases

        lists = []
        for category in BFCL_CATEGORIES:
            got = []
            for case in cases(category):
                if len(got) == BFCL_PER_CATEGORY:
                    break
                got.append(case)
            lists.append(got)
        interleaved = [got[rank] for rank in range(BFCL_PER_CATEGORY) for got in lists if rank < len(got)]
        return interleaved[:limit]

    def describe(self, cases):
        counts = collections.Counter(c["category"] for c in cases)
        return f"{len(cases)} BFCL v4 cases ({', '.join(f'{k} {v}' for k, v in counts.items())}), tool_choice required"

    def _prompt(self, case):
        from structgen.frontends.tool_calls import read_tools
        from structgen.tasks.tool_calls import tool_prompt

        text, fmt, _ = tool_prompt(self.b.tokenizer, read_tools(case["tools"]), case["messages"])
        return text, fmt

    def prompt_ids(self, case):
        text, fmt = self._prompt(case)
        if fmt.name != "json":
            raise RuntimeError(f"the peers' tool grammars here write structgen's 'json' format, not {fmt.name!r}")
        return list(self.b.tokenizer.encode(text, add_special_tokens=False))

    @staticmethod
    def calls_schema(case) -> dict:
        """The call list of structgen's ``json`` tool format as a JSON schema (for the peers)."""
        items = [{"type": "object", "properties": {"name": {"const": t["function"]["name"]},
                                                   "arguments": t["function"].get("parameters") or {"type": "object"}},
                  "required": ["name", "arguments"], "additionalProperties": False} for t in case["tools"]]
        return {"type": "array", "minItems": 1, "items": {"anyOf": items}}

    def xgrammar(self, xgr, case):
        return xgr.Grammar.concat(
            xgr.Grammar.from_ebnf('root ::= "<tool_call>"'),
            xgr.Grammar.from_json_schema(json.dumps(self.calls_schema(case)), any_whitespace=False,
                                         separators=(",", ":"), strict_mode=True),
            xgr.Grammar.from_ebnf('root ::= "</tool_call>"'))

    def llguidance(self, llg, case):
        from e2e import closed_objects

        schema = closed_objects(self.calls_schema(case))
        return llg.LLMatcher.grammar_from_lark(
            'start: "<tool_call>" calls "</tool_call>"\ncalls: %json ' + json.dumps(schema) + "\n")

    def parse(self, text):
        from structgen.frontends.tool_calls import FORMATS, parse_calls

        try:
            calls = parse_calls(FORMATS["json"], text)[1]
        except Exception:  # noqa: BLE001 -- structgen's ParseError: no call list read
            return False, None
        return bool(calls), calls

    def structgen(self, case, **options):
        r = self.b.gen.tool_calls(case["tools"], case["messages"], tool_choice="required", parallel_tool_calls=True,
                                  max_new_tokens=self.b.args.max_new_tokens, temperature=0.0, speculate=True,
                                  **options)
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in r.message.get("tool_calls", [])]
        return calls, r.text, r.finish_reason, r.stats.new_tokens

    def judge(self, case, found, value, complete):
        from toolcalls import judge

        marks = judge(value if found else None, case, complete)
        return {"valid": complete and marks["valid"], "names right": marks["names"],
                "arguments exact": marks["exact"]}


class Sql(Task):
    name = "sql"
    metrics = ("execution success",)

    def __init__(self, bench):
        super().__init__(bench)
        from sql_data import SETS

        self.alternatives = {}
        for line in SETS["defog"][0].open(encoding="utf-8"):
            r = json.loads(line)
            self.alternatives[r["id"]] = r.get("gold_sql_alternatives") or []
        self.golds: dict[str, list] = {}

    def cases(self, limit):
        from sql import chosen

        out = []
        for set_name, p in chosen(SQL_PER_DB["defog"], SQL_PER_DB["spider"]):
            out.append({"id": p.id, "set": set_name, "question": p.question, "database": str(p.database),
                        "pair": p})
        return out[:limit]

    def describe(self, cases):
        counts = collections.Counter(c["set"] for c in cases)
        return (f"{len(cases)} questions ({', '.join(f'{k} {v}' for k, v in counts.items())}; sql.py's default set, "
                "execution success on defog only)")

    def _ddl(self, case):
        from structgen.frontends.sql import read_schema

        return read_schema(case["database"]).ddl

    def prompt_ids(self, case):
        from structgen.tasks.sql import sql_prompt

        return list(self.b.gen.chat_ids(sql_prompt(case["question"], self._ddl(case))))

    def grammar_text(self, case):
        from structgen.frontends.sql import read_schema, sql_grammar_text

        return sql_grammar_text(read_schema(case["database"]), strict=True, whitespace="spaces")

    def xgrammar(self, xgr, case):
        return xgr.Grammar.from_lark(self.grammar_text(case))

    def llguidance(self, llg, case):
        return llg.LLMatcher.grammar_from_lark(self.grammar_text(case))

    def parse(self, text):
        text = re.sub(r"^```\w*\s*", "", text.strip())
        query = re.split(r";|\n\s*\n|```", text)[0].strip()
        return bool(query), query

    def unconstrained_complete(self, text):
        """A query ended by ``;`` (or a blank line) before the cap counts as finished."""
        return bool(re.search(r";|\n\s*\n", re.sub(r"^```\w*\s*", "", text.strip())))

    def structgen(self, case, **options):
        import structgen

        try:
            r = self.b.gen.sql(case["question"], case["database"], max_retries=0,
                               max_new_tokens=self.b.args.max_new_tokens, temperature=0.0, speculate=True, **options)
        except structgen.SqlGenerationError as err:
            last = err.attempts[-1] if err.attempts else None
            if last is not None and "ran out" in last.error:
                raise structgen.IncompleteGenerationError(last.error, partial_text=last.sql, token_ids=[]) from err
            raise Rejected(f"{last.error if last else err}: {last.sql if last else ''}"[:300]) from err
        return r.sql, r.text, r.finish_reason, r.stats.new_tokens

    def judge(self, case, found, value, complete):
        from sql import gold_rows, rows_of, same_rows

        rows = rows_of(Path(case["database"]), value) if found else None
        marks = {"valid": complete and rows is not None}
        if case["set"] == "defog":
            if case["id"] not in self.golds:
                self.golds[case["id"]] = gold_rows(case["pair"], self.alternatives)
            marks["execution success"] = any(same_rows(rows, g) for g in self.golds[case["id"]])
        return marks


TASK_CLASSES = {t.name: t for t in (Extraction, Bfcl, Sql)}


# ----------------------------------------------------------------------------------- engines

class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        import structgen
        from structgen.decoding.models import default_model

        self.args = args
        self.torch = torch
        self.structgen = structgen
        torch.set_num_threads(args.threads)
        torch.set_flush_denormal(True)
        self.model, self.tokenizer = default_model()
        self.gen = structgen.Generator(model=self.model, tokenizer=self.tokenizer)
        self.eos = set(self.gen.vocabulary.eos_ids)
        self.vocab_size = self.model.config.vocab_size
        self.notes: dict[str, str] = {}  # engine -> why it did not run
        self.xgr = self.llg = None
        if "xgrammar" in args.engines:
            try:
                import xgrammar
                import xgrammar.contrib.hf

                info = xgrammar.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.vocab_size)
                self.xgr, self.xgr_compiler = xgrammar, xgrammar.GrammarCompiler(info, max_threads=args.threads)
            except ImportError as err:
                self.notes["xgrammar"] = f"not installed ({err})"
        if "llguidance" in args.engines:
            try:
                import llguidance
                import llguidance.hf
                import llguidance.torch  # noqa: F401 -- the adapter's bitmask helpers

                self.llg = llguidance
                self.lltok = llguidance.hf.from_tokenizer(self.tokenizer, n_vocab=self.vocab_size)
            except ImportError as err:
                self.notes["llguidance"] = f"not installed ({err})"

    def budget_supported(self, method: str) -> bool:
        return "budget" in inspect.signature(getattr(self.structgen.Generator, method)).parameters

    def hf_generate(self, prompt_ids: list[int], processors: list[Any]) -> tuple[str, int, bool]:
        """(text up to end-of-sequence, new tokens, ended before the cap)."""
        from transformers import LogitsProcessorList

        torch = self.torch
        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        with torch.inference_mode():
            out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                                      max_new_tokens=self.args.max_new_tokens,
                                      logits_processor=LogitsProcessorList(processors),
                                      eos_token_id=self.tokenizer.eos_token_id,
                                      pad_token_id=self.tokenizer.eos_token_id)
        new = out[0, len(prompt_ids):].tolist()
        end = next((i for i, t in enumerate(new) if t in self.eos), None)
        ids = new if end is None else new[:end]
        return self.tokenizer.decode(ids, skip_special_tokens=True), len(ids), end is not None

    def processors(self, engine: str, task: Task, case: dict[str, Any]) -> list[Any]:
        if engine == "unconstrained":
            return []
        if engine in self.notes:
            raise Skip(self.notes[engine])
        if engine == "xgrammar":
            compiled = self.xgr_compiler.compile_grammar(task.xgrammar(self.xgr, case))
            return [self.xgr.contrib.hf.LogitsProcessor(compiled)]
        from e2e import LLGuidanceLogitsProcessor

        matcher = self.llg.LLMatcher(self.lltok, task.llguidance(self.llg, case))
        if matcher.is_error():
            raise ValueError(f"llguidance: {matcher.get_error()[:200]}")
        return [LLGuidanceLogitsProcessor(matcher, self.vocab_size)]

    def run(self, engine: str, task: Task, case: dict[str, Any], prompt_ids: list[int]) -> dict[str, Any]:
        """One generation, judged: never raises (but KeyboardInterrupt)."""
        sg = self.structgen
        out: dict[str, Any] = {"status": "ok", "text": "", "tokens": 0}
        t = time.perf_counter()
        try:
            if engine in HF_ENGINES:
                procs = self.processors(engine, task, case)
                text, out["tokens"], ended = self.hf_generate(prompt_ids, procs)
                out["text"] = text
                found, value = task.parse(text)
                complete = ended or (engine == "unconstrained" and isinstance(task, Sql)
                                     and task.unconstrained_complete(text))
                if not complete:
                    out["status"] = "cap"
            else:
                options = {"budget": "raise"}  # structgen before budget-aware completion
                if engine == "structgen-budget":
                    method = {"extraction": "json", "bfcl": "tool_calls", "sql": "sql"}[task.name]
                    if not self.budget_supported(method):
                        raise Skip(f"Generator.{method} has no `budget` parameter yet")
                    options["budget"] = "complete"
                value, out["text"], finish, out["tokens"] = task.structgen(case, **options)
                found = True
                if isinstance(task, Bfcl):
                    found = bool(value)
                if finish == "length":  # complete and valid, the budget cut a value short
                    out["status"] = "length"
                elif finish not in FINISHED:
                    out["status"] = "cap"
                out["finish"] = finish
        except Skip as why:
            return {"status": "skipped", "detail": str(why)}
        except sg.IncompleteGenerationError as err:
            out.update(status="cap", text=err.partial_text, tokens=len(err.token_ids) or self.args.max_new_tokens)
            found, value = False, None
        except Rejected as why:
            out.update(status="rejected", error="Rejected", detail=f"rejected by its check: {why}")
            found, value = False, None
        except KeyboardInterrupt:
            raise
        except Exception as err:  # noqa: BLE001 -- a peer or structgen raising is a finding, not a stop
            kind = "unsupported" if isinstance(err, sg.SchemaError) else "error"
            out.update(status=kind, error=type(err).__name__, detail=f"{type(err).__name__}: {err}"[:300])
            if kind == "error" and self.args.verbose:
                traceback.print_exc()
            found, value = False, None
        out["seconds"] = time.perf_counter() - t
        try:
            out["marks"] = task.judge(case, found, value, out["status"] in ("ok", "length"))
        except Exception as err:  # noqa: BLE001 -- judging must not stop the run either
            out["marks"] = {"valid": False}
            out["detail"] = f"judging: {type(err).__name__}: {err}"[:300]
        return out


# ------------------------------------------------------------------------------------ report

def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def report(args, tasks: dict[str, Task], records: dict[str, list[dict]], bench: Bench, load, wall: float,
           described: dict[str, str]) -> str:
    header = ["task", "engine", "n", "completed and valid", "token cap", "cut short by the budget", "errors",
              "accuracy",
              "new tokens (mean, runs with text)", "s / case p50"]
    rows = []
    notes: list[str] = []
    failures: list[str] = []
    for name, task in tasks.items():
        for engine in args.engines:
            runs = [(rec["case"], rec["runs"][engine]) for rec in records[name]]
            ran = [(c, r) for c, r in runs if r["status"] != "skipped"]
            if not ran:
                why = next((r.get("detail") for _, r in runs if r.get("detail")), "not run")
                rows.append([name, engine, "0", "-", "-", "-", "-", f"skipped: {why}", "-", "-"])
                notes.append(f"- {name} / {engine}: skipped: {why}")
                continue
            n = len(ran)
            valid = sum(r["marks"].get("valid", False) for _, r in ran)
            cap = sum(r["status"] == "cap" for _, r in ran)
            cut = sum(r["status"] == "length" for _, r in ran)
            errors = collections.Counter(r.get("error", "unsupported") for _, r in ran
                                         if r["status"] in ("error", "unsupported", "rejected"))
            acc = []
            for metric in task.metrics:
                judged = [r for _, r in ran if metric in r["marks"]]
                acc.append(f"{metric} {pct(sum(r['marks'][metric] for r in judged), len(judged))}")
            # over the runs that handed text back (a refused or failed run has no token count)
            tokens = [r["tokens"] for _, r in ran if r["status"] in ("ok", "length", "cap")]
            err_text = (f"{sum(errors.values())} (" + ", ".join(f"{k} {v}" for k, v in errors.most_common()) + ")"
                        if errors else "0")
            rows.append([name, engine, str(n), pct(valid, n), pct(cap, n), pct(cut, n), err_text, "; ".join(acc),
                         f"{statistics.mean(tokens):.0f}" if tokens else "-", f"{statistics.median(r['seconds'] for _, r in ran):.1f}"])
            for c, r in ran:
                if r["status"] in ("error", "unsupported", "rejected") or r.get("detail"):
                    failures.append(f"- {name} {c['id']} {engine}: {r.get('detail', r['status'])}")
    versions = package_versions(["torch", "transformers", "xgrammar", "llguidance", "jsonschema"])
    lines = [
        "# Output quality on the default model: finished, valid, right",
        "",
        *([f"**SMOKE RUN (`--limit {args.limit}`): not figures to quote.**", ""] if args.limit else []),
        *run_lines(args.threads, load, wall, versions),
        *(["- resumed (`--resume`): the wall time and load cover the last part only; each case's engines "
           "ran together, as always"] if args.resume else []),
        f"- SmolLM2-135M-Instruct, greedy, `max_new_tokens={args.max_new_tokens}` for every engine; "
        "engines interleaved per case, all fed the same prompt ids",
        *[f"- {name}: {text}" for name, text in described.items()],
        "",
        markdown_table(header, rows),
        "",
        "- *completed and valid*: finished before the cap and valid (extraction: the JSON validates; bfcl: at "
        "least one call, every call names a tool and its arguments validate; sql: the query runs). "
        "*token cap*: the cap came first (structgen raised `IncompleteGenerationError`). *cut short by the "
        "budget*: structgen-budget's `finish_reason=\"length\"`: complete and valid (counted in the first "
        "column too), some value cut short to fit. "
        "*errors*: the engine raised something else (class and count; structgen's `SchemaError`s show as "
        "`unsupported`; structgen SQL refused by its own name check or `EXPLAIN` under `max_retries=0` as "
        "`Rejected`): invalid, the run went on.",
        "- *accuracy* is judged on what each engine handed back, cap or not (the unconstrained text is parsed "
        "even when it ran to the cap; a structgen run that raised hands back nothing). extraction: value equals "
        "the gold instance; bfcl: toolcalls.py's name accuracy and argument exact match; sql: rows equal the "
        "gold query's (defog only).",
        "- Peers' grammars: see the module docstring (`benchmarks/quality.py`). The llguidance processor is the "
        "benchmark's own adapter (e2e.py's `LLGuidanceLogitsProcessor`); llguidance ships none.",
        "",
        *(["## Not run", "", *notes, ""] if notes else []),
        *details(f"Errors and notes ({len(failures)})", failures[:200]),
    ]
    caps = [f"- {name} {rec['case']['id']} {engine} ({r['tokens']} tokens): `"
            + " ".join(r.get("text", "").split()).replace("`", "'")[-160:] + "`"
            for name in tasks for rec in records[name] for engine in args.engines
            for r in [rec["runs"][engine]] if r["status"] == "cap"]
    lines += details(f"Cap hits, the last 160 characters ({len(caps)})", caps)
    every = []
    for name in tasks:
        for rec in records[name]:
            cells = []
            for engine in args.engines:
                r = rec["runs"][engine]
                if r["status"] == "skipped":
                    cells.append("skip")
                    continue
                marks = "".join(("V" if r["marks"].get("valid") else "-")
                                + "".join("+" if r["marks"].get(m) else "." for m in tasks[name].metrics
                                          if m in r["marks"]))
                cells.append(f"{r['status']} {marks} {r['tokens']}t")
            every.append([name, rec["case"]["id"], *cells])
    lines += details("Every case (status, V = completed and valid, + per accuracy metric, new tokens)",
                     [markdown_table(["task", "case", *args.engines], every)])
    return "\n".join(lines)


# -------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    p.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of {', '.join(ENGINES)}")
    p.add_argument("--limit", type=int, default=None, help="the first N cases of each task (a smoke run)")
    p.add_argument("--max-new-tokens", type=int, default=300)
    p.add_argument("--threads", type=int, default=2, help="torch threads (keep at the idle cores)")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of engine errors")
    p.add_argument("--out", type=Path, default=RESULTS / "quality.md")
    p.add_argument("--resume", action="store_true",
                   help="keep the cases already in the run's log (OUT with .jsonl) and run the rest")
    args = p.parse_args(argv)
    args.tasks = choose(p, args.tasks, TASKS, "tasks")
    args.engines = choose(p, args.engines, ENGINES)

    load_before = list(os.getloadavg())
    started = time.perf_counter()
    bench = Bench(args)
    tasks = {name: TASK_CLASSES[name](bench) for name in args.tasks}
    records: dict[str, list[dict]] = {}
    described = {}
    # Every finished case goes to a log beside the report (a working file, not committed), so a
    # cut-off run can be resumed.
    log_path = args.out.with_suffix(".jsonl")
    done = {}
    if args.resume and log_path.exists():
        for line in log_path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            done[(entry["task"], entry["case"]["id"])] = entry
    log = log_path.open("a" if args.resume else "w", encoding="utf-8")
    for name, task in tasks.items():
        cases = task.cases(args.limit)
        described[name] = task.describe(cases)
        records[name] = []
        for k, case in enumerate(cases, 1):
            if (name, case["id"]) in done:
                records[name].append({"case": case, "runs": done[(name, case["id"])]["runs"]})
                continue
            try:
                ids = task.prompt_ids(case)
            except Exception as err:  # noqa: BLE001 -- no prompt: every engine but structgen's own skips it
                ids = None
                print(f"!!! {case['id']}: no prompt ids: {type(err).__name__}: {err}", flush=True)
            runs = {}
            order = args.engines[k % len(args.engines):] + args.engines[:k % len(args.engines)]  # rotate per case
            for engine in order:
                if ids is None and engine in HF_ENGINES:
                    runs[engine] = {"status": "error", "error": "NoPrompt", "tokens": 0, "seconds": 0.0,
                                    "marks": {"valid": False}, "detail": "no prompt ids"}
                    continue
                runs[engine] = bench.run(engine, task, case, ids)
            records[name].append({"case": case, "runs": runs})
            log.write(json.dumps({"task": name, "case": {"id": case["id"]}, "runs": runs}, default=str) + "\n")
            log.flush()
            summary = " | ".join(f"{e} {r['status']}{' V' if r.get('marks', {}).get('valid') else ''}"
                                 f" {r.get('seconds', 0):.1f}s" for e, r in ((e, runs[e]) for e in args.engines))
            print(f"[{name} {k}/{len(cases)}] {case['id']}: {summary}", flush=True)
    wall = time.perf_counter() - started
    text = report(args, tasks, records, bench, (load_before, list(os.getloadavg())), wall, described)
    publish(text, args.out)


if __name__ == "__main__":
    main()
