"""Compile time and peak memory on MaskBench's largest ``Github_ultra`` schemas, next to the peers.

Run::

    .venv/bin/python benchmarks/ultra.py                  # 10 schemas, 120 s and 8 GiB per compile
    .venv/bin/python benchmarks/ultra.py --n 2 --engines structgen,llguidance

Schemas: the ``--n`` records of ``Github_ultra`` with the longest canonical JSON text
(``sort_keys``, no spaces, UTF-8), ties by name. Each (engine, schema) runs in its own
subprocess, one thread (engine.py's environment), under an address-space cap
(``RLIMIT_AS``, ``--mem-gib``). The child loads the tokenizer (SmolLM2, or Gemma 3's 262k
vocabulary with ``--tokenizer gemma``), builds the engine's
per-tokenizer state as engine.py does (structgen's ``Vocabulary`` plus ``prepare_vocabulary``,
llguidance's ``LLTokenizer``, xgrammar's ``TokenizerInfo`` and ``GrammarCompiler``), walks
engine.py's warm-up schema, then measures:

* **compile ms** -- time to first mask: compile the schema, make a matcher, fill the first
  bitmask, with engine.py's calls (structgen ``compile_json_schema`` defaults with compact
  whitespace; llguidance library defaults with compact whitespace; xgrammar eager mode,
  ``max_threads=1``, compact separators and ``strict_mode=True``, its default, unless
  ``--no-xgrammar-strict``). Over ``--timeout`` seconds the child is killed: ``timeout``.
* **peak MiB** -- how far the compile raised the process's peak RSS above its RSS when the clock
  started (the kernel's high-water mark is reset just before, ``/proc/self/clear_refs``), and
  **max RSS MiB**, the process's peak over its whole life (tokenizer and engine set-up included).

A cell is ``ok``, ``refused`` (the engine declined the schema), ``error``, ``timeout`` or
``memory`` (an allocation failed under the cap). The markdown report goes to stdout and to
``benchmarks/results/ultra.md``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import json
import os
import platform
import resource
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import engine  # noqa: F401 -- first: sets the one-thread environment the children inherit
from _report import choose, cpu_model, git_commit, markdown_table, package_versions, source_of, publish

SOURCE = "Github_ultra"
ENGINES = ("structgen", "llguidance", "xgrammar")
SETUP_TIMEOUT_S = 300  # tokenizer + engine set-up in the child, before the compile clock starts


class XGrammarStrictEngine(engine.XGrammarStrictEngine):
    """engine.py's xgrammar adapter (eager, compact) with a choice of ``strict_mode``."""


def largest(path: Path, n: int) -> list[tuple[str, Any, int]]:
    """``(name, schema, canonical size in bytes)`` of the ``n`` largest schemas of :data:`SOURCE`."""
    picked = []
    with gzip.open(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            if source_of(row["name"]) == SOURCE:
                text = json.dumps(row["schema"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                picked.append((row["name"], row["schema"], len(text.encode())))
    picked.sort(key=lambda p: (-p[2], p[0]))
    return picked[:n]


# --------------------------------------------------------------------------------------------
# Child: one engine, one schema
# --------------------------------------------------------------------------------------------


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def child(args: argparse.Namespace) -> None:
    cap = int(args.mem_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    where = " in set-up"  # failures before the compile clock starts say so
    try:
        tokenizer = engine.load_tokenizer(args.tokenizer)
        if args.child == "xgrammar":
            XGrammarStrictEngine.strict = args.xgrammar_strict
            eng = XGrammarStrictEngine(tokenizer, "compact")
        else:
            eng = engine.ENGINE_CLASSES[args.child](tokenizer, "compact")
        if args.child == "structgen":
            eng.structgen.prepare_vocabulary(eng.vocab)
        warm_text = engine.serialize(engine.WARMUP_INSTANCE, "compact")
        engine.walk(eng, engine.WARMUP_SCHEMA, tokenizer.encode(warm_text, add_special_tokens=False))
        schema = json.loads(Path(args.schema).read_text())
        gc.collect()
        gc.freeze()  # as engine.py: set-up objects out of the collector's way
        setup_kib = engine.peak_rss_kib()
        engine.reset_peak_rss()  # the high-water mark down to the current RSS
        base_kib = engine.peak_rss_kib()
        emit({"ready": True})
        where = ""

        t0 = time.perf_counter_ns()
        eng.fill(eng.compile(schema))
        compile_ms = (time.perf_counter_ns() - t0) / 1e6
        after_kib = engine.peak_rss_kib()
        emit({"status": "ok", "compile_ms": compile_ms, "peak_mib": (after_kib - base_kib) / 1024,
              "max_rss_mib": max(setup_kib, after_kib) / 1024})
    except engine.Unsupported as err:
        cause = err.__cause__ or err
        emit({"status": "refused", "kind": type(cause).__name__ + where, "detail": str(cause)[:100]})
    except MemoryError as err:
        emit({"status": "memory", "kind": type(err).__name__ + where, "detail": str(err)[:100]})
    except Exception as err:  # noqa: BLE001 -- reported, never raised
        emit({"status": "error", "kind": type(err).__name__ + where, "detail": str(err)[:100]})


# --------------------------------------------------------------------------------------------
# Parent: one subprocess per cell
# --------------------------------------------------------------------------------------------


def run_cell(args: argparse.Namespace, engine_name: str, schema_file: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", engine_name, "--schema", schema_file,
           "--mem-gib", str(args.mem_gib), "--tokenizer", args.tokenizer,
           "--xgrammar-strict" if args.xgrammar_strict else "--no-xgrammar-strict"]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            if not select.select([proc.stdout], [], [], SETUP_TIMEOUT_S)[0]:
                raise subprocess.TimeoutExpired(cmd, SETUP_TIMEOUT_S)
            lines = [proc.stdout.readline()]  # {"ready": true}, or the set-up's failure
            if lines[0] and json.loads(lines[0]).get("ready"):
                lines = proc.communicate(timeout=args.timeout)[0].splitlines()
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return {"status": "timeout"}
        proc.wait()
        records = [json.loads(line) for line in lines if line.strip()]
        if records and "status" in records[-1]:
            return records[-1]
        err.seek(0)
        tail = err.read()[-2000:]
        status = "memory" if any(sign in tail for sign in engine.MEMORY_SIGNS) else "error"
        last = (tail.strip().splitlines() or [""])[-1]
        return {"status": status, "kind": f"exit {proc.returncode}", "detail": last[:100]}


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def cells(result: dict[str, Any]) -> list[str]:
    if result["status"] == "ok":
        return [f"{result['compile_ms']:.1f}", f"{result['peak_mib']:.1f}", f"{result['max_rss_mib']:.0f}"]
    kind = f" ({result['kind']})" if result.get("kind") else ""
    return [result["status"] + kind, "–", "–"]


def report(args: argparse.Namespace, schemas: list[tuple[str, Any, int]],
           results: dict[str, dict[str, dict[str, Any]]]) -> str:
    header = ["schema", "KB"] + [f"{e} {col}" for e in args.engines for col in ("ms", "peak MiB", "max RSS")]
    rows = [[f"`{name}`", f"{size / 1000:.0f}"] + [c for e in args.engines for c in cells(results[e][name])]
            for name, _, size in schemas]
    ok = {e: {n for n, r in results[e].items() if r["status"] == "ok"} for e in args.engines}
    summary = ["- compiled: " + ", ".join(f"{e} {len(ok[e])}/{len(schemas)}" for e in args.engines)]
    if "structgen" in args.engines:
        for peer in (e for e in args.engines if e != "structgen"):
            both = sorted(ok["structgen"] & ok[peer])
            ratios = [results["structgen"][n]["compile_ms"] / results[peer][n]["compile_ms"] for n in both]
            median = f"{statistics.median(ratios):.3g}" if ratios else "–"
            summary.append(f"- structgen / {peer} compile time, median of per-schema ratios over the "
                           f"{len(both)} schemas both compiled: {median}")
    notes = [f"- {e} `{n}`: {r['status']}, {r.get('kind', '')}: {r.get('detail', '')!r}"
             for e in args.engines for n, r in results[e].items() if r["status"] != "ok" and r.get("detail")]
    xgr = "strict_mode=True (its default)" if args.xgrammar_strict else "strict_mode=False"
    return "\n".join([
        f"# Compile time and peak memory: the {len(schemas)} largest `{SOURCE}` schemas",
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}; one thread per engine; "
        f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end",
        f"- versions: {package_versions([*args.engines, 'transformers', 'numpy', 'torch'])}; "
        f"structgen checkout {git_commit()}",
        f"- tokenizer: {args.tokenizer}; limits per compile: {args.timeout:g} s, address space "
        f"{args.mem_gib:g} GiB; xgrammar {xgr}",
        "",
        "One subprocess per cell. ms: compile + matcher + first mask, tokenizer and per-tokenizer "
        "state already built and warmed. peak MiB: rise of the peak RSS during that compile. "
        "max RSS: the subprocess's peak RSS in MiB, set-up included. KB: canonical JSON text / 1000.",
        "",
        markdown_table(header, rows),
        "",
        *summary,
        "",
        "Failures:",
        "",
        *(notes or ["none"]),
        "",
    ])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10, help="number of schemas, largest first (default 10)")
    p.add_argument("--tokenizer", choices=tuple(engine.NAMED_TOKENIZERS), default="smollm2",
                   help="smollm2 (49k tokens, default) or gemma (Gemma 3, 262k)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per compile (default 120)")
    p.add_argument("--mem-gib", type=float, default=8.0, help="address-space cap per subprocess (default 8)")
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset of " + ",".join(ENGINES))
    p.add_argument("--xgrammar-strict", action=argparse.BooleanOptionalAction, default=True,
                   help="xgrammar strict_mode (default on, xgrammar's default; engine.py uses off)")
    p.add_argument("--data", type=Path, default=engine.MASKBENCH, help="maskbench.jsonl.gz")
    p.add_argument("--out", type=Path, default=engine.RESULTS / "ultra.md", help="report path")
    p.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    p.add_argument("--schema", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.engines = choose(p, args.engines, ENGINES)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        return child(args)
    schemas = largest(args.data, args.n)
    results: dict[str, dict[str, dict[str, Any]]] = {e: {} for e in args.engines}
    with tempfile.TemporaryDirectory() as tmp:
        for name, schema, _ in schemas:
            schema_file = os.path.join(tmp, "schema.json")
            Path(schema_file).write_text(json.dumps(schema))
            for e in args.engines:
                t0 = time.perf_counter()
                results[e][name] = r = run_cell(args, e, schema_file)
                print(f"[{e}] {name}: {r['status']} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    text = report(args, schemas, results)
    publish(text, args.out)


if __name__ == "__main__":
    main()
