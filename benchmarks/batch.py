"""Batched structured generation: throughput and per-row latency of structgen's list API against
plain ``model.generate`` and xgrammar's transformers logits processor, at several batch sizes.

Run (SmolLM2-135M-Instruct on CPU, 2 threads)::

    .venv/bin/python benchmarks/batch.py                                   # 32 pairs, batch 1, 4, 16, 32
    .venv/bin/python benchmarks/batch.py --batch-sizes 1,8 --n 16 --measure-costs
    .venv/bin/python benchmarks/batch.py --n 2 --batch-sizes 1,2 --max-new-tokens 24 \\
        --no-save-costs --out /tmp/batch.md --plot /tmp/batch.png           # smoke run

The extraction pairs of ``benchmarks/e2e.py`` (``data/e2e_pairs_48_seed1.jsonl``, 48 MaskBench
schemas with "extract this as JSON" prompts; ``--pairs``), the first ``--n`` of them (default 32).
Each batch size (``--batch-sizes``, default 1,4,16,32) runs all ``n`` pairs, in chunks of that
size (the last chunk may be smaller). Configurations (``--configs``), interleaved within the run:
for each batch size, for each chunk, every configuration in turn; greedy; the same
``torch.set_num_threads(--threads)`` and flushed denormals for all:

* ``structgen-drafts`` -- ``gen.json(schemas, prompts, speculate=True, ...)``: structgen's list
  API, one call per chunk, drafting (forced text, copies from the prompt) where it pays.
* ``structgen-step`` -- the same with ``speculate=False``: one pass per token per row.
* ``plain-generate`` -- ``model.generate`` unconstrained on the same prompt ids (left padding,
  attention mask, ``pad_token_id`` = end-of-sequence), with ``min_new_tokens = max_new_tokens`` =
  the largest token count structgen-step produced in that chunk: the model time of that many
  decode steps for the whole chunk, no grammar. Its tokens are counted as rows x steps, every row
  running to the end. That is generous to it in one way and not in another: ``generate`` keeps
  finished rows in the batch (their work is counted as tokens here), while structgen drops a row
  from the batch once it ends, so its later passes are narrower. The report therefore gives both
  the ratio of tokens/s and the ratio of wall time for the same chunks (same useful output).
* ``xgrammar-hf`` -- batched ``model.generate`` with ``xgrammar.contrib.hf.LogitsProcessor``
  given one compiled grammar per row (xgrammar 0.2.9 accepts a list and makes one
  ``GrammarMatcher`` per row; it fills their bitmasks one row after the other, in Python, and
  leaves a finished row's mask as it was, ``generate`` then pads that row with end-of-sequence).
  Schemas compiled as ``benchmarks/e2e.py``'s ``XGrammarHF`` does: ``GrammarCompiler(
  TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size))``,
  ``compile_json_schema(json.dumps(schema), strict_mode=True, any_whitespace=False,
  separators=(",", ":"))``.

Prompts: every configuration gets ``gen.prompt_ids(schema, prompt, include_schema=True)`` (the
chat template with the schema shown in the message, as e2e.py; ``--no-include-schema``), and
structgen's grammar options are ``Generator.json``'s defaults, as e2e.py: compact whitespace,
closed objects (``strict=True``; xgrammar ``strict_mode=True``). ``--max-new-tokens`` defaults to
e2e.py's 256.

Timed: the generation call only (structgen: ``gen.json`` on the chunk; the others: making the
logits processor and ``model.generate``). Grammars are compiled before the clock (structgen's into
its generator's cache as e2e.py does, xgrammar's with its compiler); one warm-up chunk per
configuration (the e2e.py warm-up pair, repeated) runs untimed first; then ``gc.freeze()``.

Measures, per configuration and batch size:

* **tokens/s**: total new tokens (end-of-sequence excluded; structgen: counted from each row's
  ``token_ids``, a row that ran out of budget included from its ``IncompleteGenerationError``) /
  total wall seconds of the calls.
* **latency p50 / p90** per row: structgen reports each row's ``stats.seconds``, from the batch's
  start to that row's end; ``generate`` returns all rows at once, so every row gets the call's
  wall time.
* **valid**: the text parses as JSON and validates (``jsonschema``); not judged for plain-generate.
* structgen-drafts: **draft/row/pass**, the mean of ``drafted`` over the per-step records
  (``stats.steps``: one per pass a row took part in), and **passes/token**, a row's decoding passes
  (``stats.forward_passes`` - 1) per new token, summed over rows.
* ratios per batch size: drafts/step, step/plain-generate, drafts/xgrammar (tokens/s), and the
  wall time of plain-generate over structgen-step's on the same chunks.
* at the largest batch size, the decoding loop's own time per pass (``overhead_seconds``: masks,
  matcher, drafts, for the whole batch) as a share of the forward pass (``pass_seconds``), from
  the per-step records of the row that took part in most passes of each call.

``--measure-costs`` times structgen's pass-cost surface first
(``structgen.decoding.costs.PassCosts.measure_surface(model)``, where it exists: the relative cost
of a pass by rows and positions per row, which sizes the drafts), reports it, and makes the
generator with it (``Generator(model, tokenizer, pass_costs=surface)``); without it structgen
starts from its copy on disk or its built-in estimate and learns as it decodes. ``--plot``
(default ``benchmarks/results/batch.png``; needs matplotlib, in the ``bench`` extra) draws tokens/s
against batch size and structgen-drafts' draft length against the rows in a pass (a line per
batch size, and all pooled). The markdown report goes to stdout and ``--out`` (default
``benchmarks/results/batch.md``).

Caveats: on a few CPU cores a pass's cost grows with its rows sooner than on a GPU, so wider
batches may buy less; use no more ``--threads`` than idle cores (see e2e.py: a busy core made a
pass ~10x slower); the report records the load average before and after. Left padding changes
the numerics of a padded row slightly, so greedy outputs can differ between batch sizes and
engines; the report counts rows identical to structgen-step. structgen prefills each row's prompt
alone and merges the caches, ``generate`` prefills the padded chunk in one call; both are inside
the timed call. The pass-cost surface structgen learns as it decodes is saved to disk as it
changes (``--no-save-costs`` keeps the copy on disk as it was).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _report import (
    choose,
    markdown_table,
    package_versions,
    publish,
    run_lines,
)
from e2e import ROOT, WARMUP_PAIR, extraction_prompt, fmt, load_pairs, pct

HERE = Path(__file__).resolve().parent

PAIRS = HERE / "data" / "e2e_pairs_48_seed1.jsonl"
RESULTS = HERE / "results"
CONFIGS = ("structgen-drafts", "structgen-step", "xgrammar-hf", "plain-generate")  # run order: plain-generate last
STRUCTGEN = {"structgen-drafts": True, "structgen-step": False}  # config -> speculate
#: where plain-generate takes its step count from, in order of preference
LENGTH_SOURCES = ("structgen-step", "structgen-drafts", "xgrammar-hf")
WARMUP_ROWS = 4  # rows of the warm-up chunk (at most the largest batch size)
PLAIN_WARMUP_STEPS = 16


# --------------------------------------------------------------------------------------------
# What a call returned
# --------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One row of a batched call."""

    pair_id: str
    status: str = "ok"  # ok | incomplete (ran out of budget) | error
    token_ids: list[int] = field(default_factory=list)  # new tokens, end-of-sequence stripped
    text: str = ""
    seconds: float = float("nan")  # latency: structgen stats.seconds, else the call's wall time
    valid: bool | None = None  # None: not judged (plain-generate, errors)
    stats: Any = None  # structgen's GenerationStats
    detail: str | None = None

    @property
    def steps(self) -> list[Any]:
        return list(getattr(self.stats, "steps", None) or [])


@dataclass
class Call:
    """One timed generation call on a chunk of pairs."""

    config: str
    batch_size: int
    chunk: int
    seconds: float
    passes: int  # forward calls of the model during the call (a hook)
    rows: list[Row]
    steps: int | None = None  # plain-generate: the steps it was told to run
    length_source: str | None = None  # plain-generate: whose longest row set them
    error: str | None = None  # the whole call failed

    @property
    def tokens(self) -> int:
        return sum(len(r.token_ids) for r in self.rows)

    def batch_steps(self) -> list[Any]:
        """The per-pass records of the batch: those of the row that took part in most passes
        (rows leave the batch as they end, none joins late, so it saw every pass)."""
        return max((r.steps for r in self.rows), key=len, default=[])


class Unavailable(Exception):
    """A configuration that cannot run at all (a peer not installed, no list API)."""


# --------------------------------------------------------------------------------------------
# The model, the generator, the prompts
# --------------------------------------------------------------------------------------------


class Bench:
    """Shared state: generator, model, tokenizer, prompt ids, compiled grammars, pass counter."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        import structgen

        self.args = args
        self.torch = torch
        self.structgen = structgen
        torch.set_num_threads(args.threads)  # before the generator: its pass costs are per thread count
        torch.set_flush_denormal(True)
        from structgen.decoding.models import load_default_model

        model, tokenizer = load_default_model()  # what structgen.Generator() loads
        model.eval()
        #: --measure-costs: the measured surface the generator decodes with, and its description
        costs, self.surface = measure_surface(model, args) if args.measure_costs else (None, None)
        self.gen = structgen.Generator(model, tokenizer, **({"pass_costs": costs} if costs is not None else {}))
        if not args.save_costs and hasattr(self.gen.pass_costs, "save"):
            self.gen.pass_costs.save = lambda: None  # learn, but leave the copy on disk as it was
        self.model, self.tokenizer = self.gen.model, self.gen.tokenizer
        self.eos = self.tokenizer.eos_token_id
        self.eos_ids = {i for i in (self.eos, self.model.generation_config.eos_token_id) if isinstance(i, int)}
        self.passes = 0
        self.model.register_forward_pre_hook(self._count)
        self.options = {"whitespace": args.whitespace, "strict": args.strict, "include_schema": args.include_schema}
        self.prompt_cache: dict[str, list[int]] = {}
        self.compile_seconds: dict[str, float] = {}
        self.not_run: dict[str, str] = {}

    def _count(self, module: Any, inputs: Any) -> None:
        self.passes += 1

    def prompt_ids(self, pair: dict[str, Any]) -> list[int]:
        if pair["id"] not in self.prompt_cache:
            self.prompt_cache[pair["id"]] = list(self.gen.prompt_ids(
                pair["schema"], pair["prompt"], include_schema=self.args.include_schema))
        return self.prompt_cache[pair["id"]]

    def strip(self, ids: list[int]) -> tuple[list[int], bool]:
        """Generated ids up to the first end-of-sequence, and whether there was one."""
        for i, t in enumerate(ids):
            if t in self.eos_ids:
                return ids[:i], True
        return ids, False


def is_valid(text: str, schema: Any) -> bool:
    """``text`` parses as JSON and validates against ``schema``."""
    from jsonschema import Draft202012Validator, validators

    try:
        value = json.loads(text)
    except ValueError:
        return False
    cls = validators.validator_for(schema if isinstance(schema, dict) else {}, default=Draft202012Validator)
    try:
        return cls(schema).is_valid(value)
    except Exception:  # noqa: BLE001 -- an unresolvable $ref etc.: not counted as valid
        return False


# --------------------------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------------------------


class Config:
    name = ""

    def __init__(self, bench: Bench) -> None:
        self.b = bench

    def prepare(self, pairs: list[dict[str, Any]]) -> None:
        """Untimed set-up for these pairs (grammar compilation)."""

    def run(self, chunk: list[dict[str, Any]], index: int, batch_size: int, done: dict[str, Call]) -> Call:
        """The timed call on ``chunk``; ``done``: this chunk's calls of the configurations before."""
        raise NotImplementedError


class StructgenConfig(Config):
    def __init__(self, bench: Bench, name: str) -> None:
        super().__init__(bench)
        self.name = name
        self.speculate = STRUCTGEN[name]

    def prepare(self, pairs: list[dict[str, Any]]) -> None:
        # Into the generator's compile cache (keyed by grammar), where json() finds it, as e2e.py.
        for p in pairs:
            t0 = time.perf_counter()
            self.b.gen.compiler.json_schema(p["schema"], canonical=True, whitespace=self.b.args.whitespace,
                                            strict=self.b.args.strict)
            self.b.compile_seconds.setdefault(f"structgen:{p['id']}", time.perf_counter() - t0)

    def run(self, chunk: list[dict[str, Any]], index: int, batch_size: int, done: dict[str, Call]) -> Call:
        b = self.b
        schemas, prompts = [p["schema"] for p in chunk], [p["prompt"] for p in chunk]
        before = b.passes
        t0 = time.perf_counter()
        out = b.gen.json(schemas, prompts, max_new_tokens=b.args.max_new_tokens, temperature=0.0,
                         speculate=self.speculate, **b.options)
        seconds = time.perf_counter() - t0
        if not isinstance(out, list) or len(out) != len(chunk):
            raise Unavailable(f"gen.json(list, list) returned {type(out).__name__}"
                              + (f" of {len(out)} items for {len(chunk)} rows" if isinstance(out, list) else
                                 ", not a list: this structgen has no list API"))
        rows = [self.row(p, item, seconds) for p, item in zip(chunk, out)]
        return Call(self.name, batch_size, index, seconds, b.passes - before, rows)

    def row(self, pair: dict[str, Any], item: Any, call_seconds: float) -> Row:
        sg = self.b.structgen
        row = Row(pair["id"])
        if isinstance(item, sg.IncompleteGenerationError):
            row.status, row.text, row.stats = "incomplete", item.partial_text, item.stats
            row.token_ids, _ = self.b.strip(list(item.token_ids or []))
            row.valid = False
        elif isinstance(item, BaseException):
            row.status, row.detail = "error", f"{type(item).__name__}: {item}"[:500]
            row.stats = getattr(item, "stats", None)
            row.token_ids, _ = self.b.strip(list(getattr(item, "token_ids", None) or []))
        else:
            row.text, row.stats = item.text, item.stats
            row.token_ids, _ = self.b.strip(list(item.token_ids))
            row.valid = is_valid(row.text, pair["schema"])
        latency = getattr(row.stats, "seconds", None)
        row.seconds = latency if latency else call_seconds
        return row


class HFConfig(Config):
    """Batched ``model.generate``, left padded, greedy."""

    def processors(self, chunk: list[dict[str, Any]]) -> list[Any]:
        return []

    def generate(self, chunk: list[dict[str, Any]], **kwargs: Any) -> tuple[float, int, list[list[int]]]:
        """(wall seconds, forward calls, each row's generated ids) of one ``model.generate``."""
        torch, b = self.b.torch, self.b
        from transformers import LogitsProcessorList

        ids = [b.prompt_ids(p) for p in chunk]
        width = max(len(x) for x in ids)
        input_ids = torch.tensor([[b.eos] * (width - len(x)) + x for x in ids], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], dtype=torch.long)
        before = b.passes
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = b.model.generate(input_ids, attention_mask=mask, do_sample=False,
                                   logits_processor=LogitsProcessorList(self.processors(chunk)),
                                   eos_token_id=b.eos, pad_token_id=b.eos, **kwargs)
        seconds = time.perf_counter() - t0
        return seconds, b.passes - before, [out[i, width:].tolist() for i in range(len(chunk))]


class PlainGenerate(HFConfig):
    name = "plain-generate"

    def steps_for(self, done: dict[str, Call]) -> tuple[int, str]:
        """The largest token count of the chunk's rows under the first length source that ran,
        and its name (else ``max_new_tokens``)."""
        for name in LENGTH_SOURCES:
            call = done.get(name)
            if call is not None and call.error is None and call.rows:
                most = max(len(r.token_ids) for r in call.rows)
                if most:
                    return most, name
        return self.b.args.max_new_tokens, "max_new_tokens"

    def run(self, chunk: list[dict[str, Any]], index: int, batch_size: int, done: dict[str, Call]) -> Call:
        steps, source = self.steps_for(done)
        seconds, passes, outs = self.generate(chunk, min_new_tokens=steps, max_new_tokens=steps)
        # min_new_tokens keeps end-of-sequence out: every row runs all steps (rows x steps tokens).
        rows = []
        for p, ids in zip(chunk, outs):
            kept, _ = self.b.strip(ids)
            rows.append(Row(p["id"], token_ids=kept, text=self.b.tokenizer.decode(kept, skip_special_tokens=True),
                            seconds=seconds))
        return Call(self.name, batch_size, index, seconds, passes, rows, steps=steps, length_source=source)


class XGrammarHF(HFConfig):
    name = "xgrammar-hf"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        try:
            import xgrammar
            import xgrammar.contrib.hf
        except ImportError as err:
            raise Unavailable(f"{type(err).__name__}: {err}") from err
        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(bench.tokenizer, vocab_size=bench.model.config.vocab_size)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=bench.args.threads)
        self.compiled: dict[str, Any] = {}

    def prepare(self, pairs: list[dict[str, Any]]) -> None:
        # As e2e.py's XGrammarHF: strict_mode closes objects like structgen's strict=True.
        options = ({"any_whitespace": True} if self.b.args.whitespace == "flexible"
                   else {"any_whitespace": False, "separators": (",", ":")})
        for p in pairs:
            if p["id"] in self.compiled:
                continue
            t0 = time.perf_counter()
            try:
                self.compiled[p["id"]] = self.compiler.compile_json_schema(
                    json.dumps(p["schema"]), strict_mode=self.b.args.strict, **options)
            except Exception as err:  # noqa: BLE001 -- xgrammar raises RuntimeError/ValueError
                self.compiled[p["id"]] = None
                print(f"[xgrammar-hf] cannot compile {p['id']}: {str(err)[:200]}", file=sys.stderr)
            self.b.compile_seconds[f"xgrammar:{p['id']}"] = time.perf_counter() - t0

    def processors(self, chunk: list[dict[str, Any]]) -> list[Any]:
        # One compiled grammar per row: the processor makes one GrammarMatcher for each.
        return [self.xgr.contrib.hf.LogitsProcessor([self.compiled[p["id"]] for p in chunk])]

    def run(self, chunk: list[dict[str, Any]], index: int, batch_size: int, done: dict[str, Call]) -> Call:
        missing = [p["id"] for p in chunk if self.compiled.get(p["id"]) is None]
        if missing:
            return Call(self.name, batch_size, index, float("nan"), 0, [Row(p["id"], status="error") for p in chunk],
                        error=f"xgrammar did not compile {', '.join(missing)}")
        seconds, passes, outs = self.generate(chunk, max_new_tokens=self.b.args.max_new_tokens)
        rows = []
        for p, ids in zip(chunk, outs):
            kept, ended = self.b.strip(ids)
            text = self.b.tokenizer.decode(kept, skip_special_tokens=True)
            valid = is_valid(text, p["schema"])
            # A row whose value is complete just at the budget has no end-of-sequence yet (generate
            # spends a step on it; structgen ends the row when the grammar forces it): not "incomplete".
            rows.append(Row(p["id"], status="ok" if ended or valid else "incomplete", token_ids=kept, text=text,
                            seconds=seconds, valid=valid))
        return Call(self.name, batch_size, index, seconds, passes, rows)


def make_configs(bench: Bench, names: list[str]) -> list[Config]:
    configs: list[Config] = []
    for name in names:
        try:
            if name in STRUCTGEN:
                configs.append(StructgenConfig(bench, name))
            elif name == "plain-generate":
                configs.append(PlainGenerate(bench))
            else:
                configs.append(XGrammarHF(bench))
        except Unavailable as err:
            bench.not_run[name] = str(err)
            print(f"[{name}] not run: {err}", file=sys.stderr)
    return configs


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def chunks(pairs: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [pairs[i:i + size] for i in range(0, len(pairs), size)]


def safe_run(config: Config, chunk: list[dict[str, Any]], index: int, batch_size: int,
             done: dict[str, Call]) -> Call:
    """``config.run``; a call that raises is recorded (every row an error), never stops the run."""
    try:
        return config.run(chunk, index, batch_size, done)
    except Exception:  # noqa: BLE001 -- Unavailable included: the warm-up drops the configuration
        detail = traceback.format_exc(limit=6)[-2000:]
        return Call(config.name, batch_size, index, float("nan"), 0,
                    [Row(p["id"], status="error", detail=detail) for p in chunk], error=detail)


def warm_up(bench: Bench, configs: list[Config], rows: int) -> list[Config]:
    """One untimed chunk per configuration; those that cannot run at all are dropped."""
    pair = dict(WARMUP_PAIR, prompt=extraction_prompt(WARMUP_PAIR["instance"]))
    chunk = [dict(pair, id=f"warm-up-{i}") for i in range(rows)]
    for config in configs:
        config.prepare(chunk)
    done: dict[str, Call] = {}
    kept = []
    for config in configs:
        if isinstance(config, PlainGenerate):
            done.setdefault("structgen-step", Call("structgen-step", rows, -1, 0.0, 0,
                                                   [Row("w", token_ids=[0] * PLAIN_WARMUP_STEPS)]))
        call = safe_run(config, chunk, -1, rows, done)
        if call.error is not None:
            bench.not_run[config.name] = "warm-up failed: " + call.error.strip().splitlines()[-1]
            print(f"[{config.name}] warm-up failed, not run:\n{call.error}", file=sys.stderr)
            continue
        if config.name != "plain-generate":
            done[config.name] = call
        kept.append(config)
    return kept


def run_all(bench: Bench, configs: list[Config], pairs: list[dict[str, Any]],
            batch_sizes: list[int]) -> list[Call]:
    calls: list[Call] = []
    total = sum(len(chunks(pairs, bs)) for bs in batch_sizes) * len(configs)
    for bs in batch_sizes:
        for index, chunk in enumerate(chunks(pairs, bs)):
            done: dict[str, Call] = {}
            for config in configs:
                call = safe_run(config, chunk, index, bs, done)
                done[config.name] = call
                calls.append(call)
                if call.error:
                    print(f"\n[{config.name} batch {bs} chunk {index}] error:\n{call.error}", file=sys.stderr)
                print(f"\r[batch {bs}] {len(calls)}/{total} calls ({config.name} chunk {index}: "
                      f"{call.tokens} tokens in {call.seconds:.2f} s)", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return calls


# --------------------------------------------------------------------------------------------
# Measures
# --------------------------------------------------------------------------------------------


@dataclass
class Summary:
    """One configuration at one batch size."""

    calls: list[Call]

    @property
    def rows(self) -> list[Row]:
        return [r for c in self.calls for r in c.rows]

    @property
    def timed(self) -> list[Call]:
        return [c for c in self.calls if c.error is None]

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.timed)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.timed)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    def latency(self, q: float) -> float:
        return pct([r.seconds for c in self.timed for r in c.rows], q)

    def step_records(self) -> list[Any]:
        """Every row's per-pass records (one per pass the row took part in)."""
        return [s for r in self.rows for s in r.steps]

    def draft_per_row_pass(self) -> float:
        records = self.step_records()
        return sum(getattr(s, "drafted", 0) or 0 for s in records) / len(records) if records else float("nan")

    def passes_per_token(self) -> float:
        """A row's decoding passes (prefill excluded) per new token, summed over rows."""
        stats = [r.stats for r in self.rows if r.stats is not None and r.status != "error"]
        tokens = sum(getattr(s, "new_tokens", 0) or 0 for s in stats)
        passes = sum(max(0, (getattr(s, "forward_passes", 0) or 0) - 1) for s in stats)
        return passes / tokens if tokens else float("nan")

    def constraint_share(self) -> tuple[float, float, float, int]:
        """(overhead / pass seconds, mean pass ms, mean overhead ms, batch passes) over the
        batch-level per-pass records of the calls."""
        records = [s for c in self.timed for s in c.batch_steps()]
        passes = sum(getattr(s, "pass_seconds", 0.0) or 0.0 for s in records)
        overhead = sum(getattr(s, "overhead_seconds", 0.0) or 0.0 for s in records)
        if not records or not passes:
            return float("nan"), float("nan"), float("nan"), len(records)
        return overhead / passes, 1e3 * passes / len(records), 1e3 * overhead / len(records), len(records)


def summaries(calls: list[Call]) -> dict[tuple[str, int], Summary]:
    grouped: dict[tuple[str, int], list[Call]] = defaultdict(list)
    for c in calls:
        grouped[(c.config, c.batch_size)].append(c)
    return {k: Summary(v) for k, v in grouped.items()}


def identical(calls: list[Call], config: str, reference: str, batch_size: int) -> tuple[int, int]:
    """Rows of ``config`` whose tokens equal ``reference``'s for the same pair and batch size."""
    ref = {r.pair_id: r.token_ids for c in calls if c.config == reference and c.batch_size == batch_size
           and c.error is None for r in c.rows if r.status != "error"}
    mine = [r for c in calls if c.config == config and c.batch_size == batch_size and c.error is None
            for r in c.rows if r.status != "error" and r.pair_id in ref]
    return sum(r.token_ids == ref[r.pair_id] for r in mine), len(mine)


def draft_by_rows(calls: list[Call], config: str = "structgen-drafts") -> dict[int, dict[int, tuple[float, int]]]:
    """batch size -> rows in the pass -> (mean drafted tokens per row, records)."""
    got: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for c in calls:
        if c.config != config or c.error is not None:
            continue
        for r in c.rows:
            for s in r.steps:
                rows = getattr(s, "rows", None)
                if rows is not None:
                    got[c.batch_size][int(rows)].append(getattr(s, "drafted", 0) or 0)
    return {bs: {k: (sum(v) / len(v), len(v)) for k, v in sorted(by.items())} for bs, by in sorted(got.items())}


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def share(k: int, n: int) -> str:
    return f"{k}/{n}" if n else "–"


def has_steps(calls: list[Call]) -> bool:
    return any(r.steps for c in calls for r in c.rows)


def main_table(calls: list[Call], configs: list[str], batch_sizes: list[int]) -> str:
    sums = summaries(calls)
    steps = has_steps(calls)
    header = ["batch", "configuration", "calls", "rows", "tokens", "seconds", "tokens/s", "latency p50 s",
              "p90 s", "valid", "hit cap", "errors", "passes (hook)", "same as step"]
    if steps:
        header[-1:-1] = ["draft/row/pass", "passes/token"]
    rows = []
    for bs in batch_sizes:
        for name in configs:
            s = sums.get((name, bs))
            if s is None:
                continue
            out = s.rows
            judged = [r for r in out if r.valid is not None]
            same, both = identical(calls, name, "structgen-step", bs) if name != "structgen-step" else (0, 0)
            row = [str(bs), name, str(len(s.calls)), str(len(out)), str(s.tokens), f"{s.seconds:.2f}",
                   fmt(s.tokens_per_s), fmt(s.latency(50)), fmt(s.latency(90)),
                   share(sum(bool(r.valid) for r in judged), len(judged)) if name != "plain-generate" else "–",
                   share(sum(r.status == "incomplete" for r in out), len(out)) if name != "plain-generate" else "–",
                   str(sum(r.status == "error" for r in out)), str(sum(c.passes for c in s.timed)),
                   share(same, both) if name not in ("structgen-step", "plain-generate") else "–"]
            if steps:
                row[-1:-1] = ([fmt(s.draft_per_row_pass()), fmt(s.passes_per_token())] if name in STRUCTGEN
                              else ["–", "–"])
            rows.append(row)
    return markdown_table(header, rows)


def ratio(sums: dict[tuple[str, int], Summary], a: str, b: str, bs: int) -> str:
    x, y = sums.get((a, bs)), sums.get((b, bs))
    if x is None or y is None or not (x.tokens_per_s > 0 and y.tokens_per_s > 0):
        return "–"
    return fmt(x.tokens_per_s / y.tokens_per_s)


def time_ratio(calls: list[Call], a: str, b: str, bs: int) -> str:
    """Wall seconds of ``a`` over ``b`` on the chunks both timed."""
    def by_chunk(name: str) -> dict[int, float]:
        return {c.chunk: c.seconds for c in calls if c.config == name and c.batch_size == bs and c.error is None}

    x, y = by_chunk(a), by_chunk(b)
    common = [k for k in x if k in y]
    den = sum(y[k] for k in common)
    return fmt(sum(x[k] for k in common) / den) if common and den > 0 else "–"


def ratio_table(calls: list[Call], batch_sizes: list[int]) -> str:
    sums = summaries(calls)
    header = ["batch", "drafts / step", "step / plain-generate", "drafts / plain-generate", "drafts / xgrammar",
              "step / xgrammar", "plain-generate s / step s"]
    rows = [[str(bs), ratio(sums, "structgen-drafts", "structgen-step", bs),
             ratio(sums, "structgen-step", "plain-generate", bs),
             ratio(sums, "structgen-drafts", "plain-generate", bs),
             ratio(sums, "structgen-drafts", "xgrammar-hf", bs),
             ratio(sums, "structgen-step", "xgrammar-hf", bs),
             time_ratio(calls, "plain-generate", "structgen-step", bs)] for bs in batch_sizes]
    return markdown_table(header, rows)


def constraint_table(calls: list[Call], batch_size: int) -> str:
    sums = summaries(calls)
    rows = []
    for name in STRUCTGEN:
        s = sums.get((name, batch_size))
        if s is None:
            continue
        share_, pass_ms, over_ms, n = s.constraint_share()
        percent = "–" if math.isnan(share_) else fmt(100 * share_) + " %"
        rows.append([name, str(n), fmt(pass_ms), fmt(over_ms), percent])
    if not rows:
        return "no structgen configuration ran at this batch size"
    return markdown_table(["configuration", "batch passes", "forward pass ms (mean)", "loop overhead ms (mean)",
                           "overhead / forward"], rows)


def draft_table(calls: list[Call]) -> str:
    got = draft_by_rows(calls)
    if not got:
        return "no per-step records"
    return markdown_table(["batch size", "rows in pass: mean drafted tokens per row (records)"],
                          [[str(bs), ", ".join(f"{k}: {fmt(m)} ({n})" for k, m_n in by.items() for m, n in [m_n])]
                           for bs, by in got.items()])


def cell(value: Any) -> str:
    return fmt(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def format_surface(surface: Any) -> list[str]:
    """The pass-cost surface as a table, whatever its shape: a ``PassCosts`` (its one-row curve
    ``relative`` and its ``by_rows`` curves), a mapping of rows to curves, a mapping keyed by
    (rows, width), a flat mapping; else its repr."""
    if not isinstance(surface, dict):
        relative, by_rows = getattr(surface, "relative", None), getattr(surface, "by_rows", None)
        if isinstance(relative, dict) and isinstance(by_rows, dict):
            return format_surface({1: relative, **by_rows})
        if isinstance(relative, dict):
            return format_surface(relative)
        return [f"`{surface!r}`"[:3000]]
    if surface and all(isinstance(v, dict) for v in surface.values()):
        surface = {(r, w): v for r, curve in surface.items() for w, v in curve.items()}
    if surface and all(isinstance(k, tuple) and len(k) == 2 for k in surface):
        rows_ = sorted({k[0] for k in surface})
        cols = sorted({k[1] for k in surface})
        return [markdown_table(["rows \\ positions per row", *map(str, cols)],
                               [[str(r), *(cell(surface[(r, c)]) if (r, c) in surface else "–" for c in cols)]
                                for r in rows_])]
    return [markdown_table(["key", "value"], [[str(k), cell(v)] for k, v in surface.items()])]


def problems(calls: list[Call], pairs: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for c in calls:
        where = f"**{c.config}** batch {c.batch_size} chunk {c.chunk}"
        if c.error:
            lines.append(f"- {where}: the call failed: `{c.error.strip().splitlines()[-1]}`")
            continue
        for r in c.rows:
            name = f"{where} `{r.pair_id}` {pairs[r.pair_id]['name']}"
            if r.status == "error":
                lines.append(f"- {name}: {r.detail}")
            elif r.status == "incomplete" and c.config != "plain-generate":
                lines.append(f"- {name}: hit the cap ...{r.text[-60:]!r}")
            elif r.valid is False:
                lines.append(f"- {name}: not valid: {r.text[:160]!r}")
            s = r.stats
            if c.config in STRUCTGEN and s is not None and r.status != "error":
                if getattr(s, "new_tokens", None) is not None and s.new_tokens != len(r.token_ids):
                    lines.append(f"- {name}: stats.new_tokens {s.new_tokens} but {len(r.token_ids)} token_ids "
                                 "before end-of-sequence")
                if r.steps and getattr(s, "forward_passes", None) is not None and len(r.steps) != s.forward_passes - 1:
                    lines.append(f"- {name}: {len(r.steps)} step records, stats.forward_passes - 1 = "
                                 f"{s.forward_passes - 1}")
        if c.config in STRUCTGEN and has_steps([c]):
            # a pass's `rows` is the rows that took part in it: those with a record at that index
            counts = [sum(len(r.steps) > k for r in c.rows) for k in range(len(c.batch_steps()))]
            said = [getattr(s, "rows", None) for s in c.batch_steps()]
            if said != counts:
                lines.append(f"- {where}: step records' `rows` {said[:12]} differ from the rows with a record at "
                             f"that pass {counts[:12]} (rows join late or leave and come back?)")
    return lines


def plain_sources(calls: list[Call]) -> str:
    """Where plain-generate's step counts came from, when not all from structgen-step."""
    got: dict[str, int] = defaultdict(int)
    for c in calls:
        if c.config == "plain-generate" and c.length_source:
            got[c.length_source] += 1
    if not got or set(got) == {"structgen-step"}:
        return ""
    return (" Here the step counts came from " + ", ".join(f"{k} ({n} calls)" for k, n in sorted(got.items()))
            + ", structgen-step not having run for every chunk.")


def versions() -> str:
    return package_versions(("torch", "transformers", "xgrammar", "jsonschema", "numpy", "matplotlib"))


def report(args: argparse.Namespace, bench: Bench, configs: list[str], calls: list[Call], pairs: list[dict[str, Any]],
           load: tuple[list[float], list[float]], wall_s: float, surface: list[str] | None) -> str:
    by_id = {p["id"]: p for p in pairs}
    lens = [len(bench.prompt_ids(p)) for p in pairs]
    largest = max(args.batch_sizes)
    sg_ms = [v * 1e3 for k, v in bench.compile_seconds.items() if k.startswith("structgen:")]
    xg_ms = [v * 1e3 for k, v in bench.compile_seconds.items() if k.startswith("xgrammar:")]
    steps = has_steps(calls)
    where = args.pairs.relative_to(ROOT) if args.pairs.is_relative_to(ROOT) else args.pairs
    parts = [
        "# Batched structured generation: structgen's list API against generate and xgrammar",
        "",
        *run_lines(args.threads, load, wall_s, versions()),
        f"- model: {getattr(bench.model.config, '_name_or_path', '') or 'SmolLM2-135M-Instruct'} "
        f"({type(bench.model).__name__}, {bench.model.dtype}); greedy",
        f"- pairs: the first {len(pairs)} of `{where}`; "
        f"prompt tokens p50 {fmt(pct(lens, 50))}, max {max(lens)}; include_schema {args.include_schema}, "
        f"whitespace {args.whitespace}, strict {args.strict}; max_new_tokens {args.max_new_tokens}",
        f"- batch sizes {', '.join(map(str, args.batch_sizes))}, each running all pairs in chunks of that size; "
        f"configurations {', '.join(configs)}, interleaved per chunk",
        f"- compile (before the clock), ms p50: structgen {fmt(pct(sg_ms, 50))}, xgrammar {fmt(pct(xg_ms, 50))}",
        f"- pass costs: {'saved to disk as they change' if args.save_costs else 'not saved (--no-save-costs)'}",
        *(f"- **{name} not run**: {why}" for name, why in bench.not_run.items()),
        "",
        "## Throughput and latency",
        "",
        main_table(calls, configs, args.batch_sizes),
        "",
        "tokens: new tokens, end-of-sequence excluded (plain-generate: rows x steps, every row runs the "
        "largest count structgen-step produced in its chunk). tokens/s: tokens / wall seconds of the calls. "
        "latency: per row; structgen's `stats.seconds` (batch start to that row's end), the call's wall time "
        "for every row of a `generate`. valid: parses and validates (`jsonschema`). passes (hook): forward "
        "calls of the model, prefill included. same as step: rows with exactly structgen-step's tokens at the "
        "same batch size."
        + (" draft/row/pass: mean drafted tokens over the per-pass records (`stats.steps`); passes/token: a "
           "row's `forward_passes` - 1 per new token." if steps else
           " (no `stats.steps` in this structgen: draft and per-pass columns left out)"),
        "",
        "## Ratios",
        "",
        ratio_table(calls, args.batch_sizes),
        "",
        "Ratios of tokens/s, except the last column: plain-generate's wall seconds over structgen-step's on the "
        "same chunks. `generate` keeps finished rows in the batch until the longest is done and its tokens "
        "count them; structgen drops a row once it ends. The tokens/s ratio is thus the cost of the same "
        "number of model steps; the time ratio compares producing the same chunk (below 1: plain-generate "
        "was faster).",
        "",
    ]
    if steps:
        parts += [
            f"## The constraint's own time at batch {largest}",
            "",
            constraint_table(calls, largest),
            "",
            "Per batch pass (the per-pass records of the row that took part in most passes of each call): "
            "`pass_seconds`, the forward pass shared by the batch, and `overhead_seconds`, the decoding "
            "loop's time for the whole batch in that step (masks, matcher, drafts).",
            "",
            "## structgen-drafts: draft length by rows in the pass",
            "",
            draft_table(calls),
            "",
        ]
    if surface is not None:
        parts += ["## Pass-cost surface (`--measure-costs`)", "", *surface, ""]
    parts += [
        "## Notes",
        "",
        "- plain-generate is told to run exactly as many steps as the longest structgen-step row of its "
        "chunk (`min_new_tokens = max_new_tokens`): the model time of that many batched steps, no grammar. "
        "Its validity is not judged." + plain_sources(calls),
        "- xgrammar-hf: `xgrammar.contrib.hf.LogitsProcessor` takes one compiled grammar per row and fills "
        "each row's bitmask in turn (a Python loop of `GrammarMatcher.fill_next_token_bitmask`); xgrammar's "
        "multi-threaded `BatchGrammarMatcher` is not used by it. A finished row keeps its last mask and "
        "`generate` pads it with end-of-sequence until every row is done.",
        "- Prefill: structgen's backend prefills each row's prompt in a call of its own and merges the caches "
        "(no padding); `generate` prefills the chunk in one left-padded call. *passes (hook)* counts a "
        "structgen call's prefill as one forward call per row.",
        "- structgen ends a row when its grammar forces end-of-sequence, without a pass for it; `generate` "
        "spends a step on it. An xgrammar-hf row whose value completes exactly at `max_new_tokens` has no "
        "end-of-sequence: it counts as valid (not as hitting the cap) when its text validates.",
        "- Left padding changes a padded row's numerics slightly: greedy outputs can differ with the batch "
        "size and between engines (see *same as step*).",
        "",
        "## Problems: errors, outputs that hit the cap or are not valid, stats that disagree",
        "",
        *(problems(calls, by_id) or ["none"]),
        "",
    ]
    return "\n".join(parts)


def plot(calls: list[Call], configs: list[str], batch_sizes: list[int], out: Path) -> None:
    """Two panels: tokens/s against batch size; structgen-drafts' draft length against rows in a pass."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plot", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sums = summaries(calls)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in configs:
        xs = [bs for bs in batch_sizes if (name, bs) in sums and sums[(name, bs)].tokens_per_s > 0]
        left.plot(xs, [sums[(name, bs)].tokens_per_s for bs in xs], marker="o", label=name)
    left.set_xscale("log", base=2)
    left.set_xticks(batch_sizes, [str(b) for b in batch_sizes])
    left.set_xlabel("batch size")
    left.set_ylabel("tokens / s")
    left.set_title("Throughput")
    left.grid(True, alpha=0.3)
    left.legend()
    got = draft_by_rows(calls)
    for bs, by in got.items():
        right.plot(list(by), [m for m, _ in by.values()], marker="o", label=f"batch {bs}")
    if len(got) > 1:  # every run pooled, weighted by records
        pooled: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
        for by in got.values():
            for k, (m, n) in by.items():
                pooled[k][0] += m * n
                pooled[k][1] += n
        ks = sorted(pooled)
        right.plot(ks, [pooled[k][0] / pooled[k][1] for k in ks], "k--", label="all")
    if got:
        right.set_xscale("log", base=2)
        ticks = sorted({k for by in got.values() for k in by})
        right.set_xticks(ticks, [str(t) for t in ticks])
        right.legend()
    else:
        right.text(0.5, 0.5, "no per-step records", ha="center", va="center", transform=right.transAxes)
    right.set_xlabel("rows in the pass")
    right.set_ylabel("drafted tokens per row per pass")
    right.set_title("structgen-drafts: draft length")
    right.grid(True, alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"wrote {out}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def sizes(text: str) -> list[int]:
    try:
        got = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        got = []
    if not got or min(got) < 1:
        raise argparse.ArgumentTypeError(f"--batch-sizes takes positive integers separated by commas, not {text!r}")
    return sorted(set(got))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=32, help="pairs (default 32); every batch size runs all of them")
    p.add_argument("--batch-sizes", type=sizes, default=[1, 4, 16, 32], help="default 1,4,16,32")
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ",".join(CONFIGS))
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="default 256, as e2e.py's extraction")
    p.add_argument("--whitespace", choices=("compact", "flexible"), default="compact",
                   help="Generator.json's whitespace (default compact); xgrammar matches it")
    p.add_argument("--strict", action=argparse.BooleanOptionalAction, default=True,
                   help="Generator.json's strict (closed objects; default on); xgrammar strict_mode matches it")
    p.add_argument("--include-schema", action=argparse.BooleanOptionalAction, default=True,
                   help="show the schema in the prompt (default on, as e2e.py)")
    p.add_argument("--measure-costs", action="store_true",
                   help="time PassCosts.measure_surface(gen.model) first and report it")
    p.add_argument("--save-costs", action=argparse.BooleanOptionalAction, default=True,
                   help="let structgen save the pass-cost curve it learns (--no-save-costs for smoke runs)")
    p.add_argument("--pairs", type=Path, default=PAIRS, help="pairs file (default data/e2e_pairs_48_seed1.jsonl)")
    p.add_argument("--out", type=Path, default=RESULTS / "batch.md", help="report (default results/batch.md)")
    p.add_argument("--plot", type=Path, default=RESULTS / "batch.png", help="plot (default results/batch.png)")
    args = p.parse_args(argv)
    picked = choose(p, args.configs, CONFIGS, "configurations")
    args.configs = [c for c in CONFIGS if c in picked]  # canonical order: plain-generate after its length sources
    if args.n < 1 or args.max_new_tokens < 1 or args.threads < 1:
        p.error("--n, --max-new-tokens and --threads must be at least 1")
    return args


def measure_surface(model: Any, args: argparse.Namespace) -> tuple[Any, list[str]]:
    """Time structgen's pass-cost surface (``PassCosts.measure_surface``) and describe it; the
    surface is handed to the generator (``Generator(..., pass_costs=)``), which decodes with it."""
    from structgen.decoding.costs import PassCosts

    if not hasattr(PassCosts, "measure_surface"):
        return None, ["`PassCosts.measure_surface` does not exist in this structgen: not measured."]
    t0 = time.perf_counter()
    try:
        try:  # --no-save-costs: leave the copy on disk as it was
            surface = PassCosts.measure_surface(model, **({} if args.save_costs else {"save": False}))
        except TypeError:  # no save option
            surface = PassCosts.measure_surface(model)
    except Exception:  # noqa: BLE001 -- reported; the run goes on
        return None, ["`PassCosts.measure_surface(model)` failed:", "", "```",
                      traceback.format_exc(limit=4).strip(), "```"]
    seconds = time.perf_counter() - t0
    used = isinstance(surface, PassCosts)
    return (surface if used else None), [
        f"Measured in {seconds:.1f} s before the run"
        + ("; the generator decodes with it (`Generator(model, tokenizer, pass_costs=surface)`), learning on"
           if used else "; not a `PassCosts`, so not used")
        + f"; {'saved to disk' if args.save_costs else 'not saved (--no-save-costs)'}. Cost of a pass relative "
        "to a 1-position pass over as many rows:", "", *format_surface(surface)]


def timed_section(label: str, step: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    out = step()
    print(f"[{label}] {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    load_before = list(os.getloadavg())
    t_start = time.perf_counter()
    pairs = load_pairs(args.pairs)
    if args.n > len(pairs):
        sys.exit(f"--n {args.n}: {args.pairs} holds {len(pairs)} pairs")
    pairs = pairs[:args.n]

    bench = timed_section("load" + (" and measure_surface" if args.measure_costs else ""), lambda: Bench(args))
    configs = make_configs(bench, args.configs)
    configs = timed_section("warm-up", lambda: warm_up(bench, configs, min(WARMUP_ROWS, max(args.batch_sizes))))
    timed_section("compile", lambda: [c.prepare(pairs) for c in configs])
    for p in pairs:
        bench.prompt_ids(p)
    gc.collect()
    gc.freeze()  # long-lived set-up objects out of the cyclic collector's way, as a serving process would
    calls = run_all(bench, configs, pairs, args.batch_sizes)
    gc.unfreeze()

    ran = [c for c in args.configs if any(call.config == c for call in calls)]
    text = report(args, bench, ran, calls, pairs, (load_before, list(os.getloadavg())),
                  time.perf_counter() - t_start, bench.surface)
    publish(text, args.out)
    plot(calls, ran, args.batch_sizes, args.plot)


if __name__ == "__main__":
    main()
