"""Per-request compile latency of structural tags for tool calls: structgen next to xgrammar.

Run (one CPU thread, the default model's tokenizer, the same spec dict for both engines)::

    .venv/bin/python benchmarks/structural_tags.py
    .venv/bin/python benchmarks/structural_tags.py --sizes 10,50 --styles hermes --reps 3 --out /tmp/st.md

An agent server compiles a structural tag (xgrammar's JSON format, the one vLLM, SGLang and
TensorRT-LLM accept) for every request that offers tools; this measures what that costs as the
tool set grows. Tool sets: the first 10, 50 and 200 (``--sizes``) BFCL v4 functions from
``../shared/data/toolcalls`` (read with ``tests/toolcall_data.py``; their ``tools`` entries hold
BFCL's specs with the types already mapped to JSON Schema, see ``../shared/data/README.md``),
taken round-robin over :data:`CATEGORIES` (each category gives its next function not seen yet,
by name, in file order): a deterministic mix of simple, live and Java/JavaScript specs. A tool
whose schema either engine refuses (checked first, alone, in style ``hermes``) is listed in the
report with the reason and the next one is taken, so both engines compile the same N tools.

Three tool-call styles, written as structural tags (:data:`STYLES`):

* ``hermes`` (Qwen 3, Hermes): ``triggered_tags``, trigger ``<tool_call>``, one tag per tool with
  begin ``<tool_call>\\n{"name": "NAME", "arguments": `` and end ``}\\n</tool_call>``;
* ``kimi`` (Kimi K2): ``triggered_tags``, trigger ``<|tool_calls_section_begin|>``, one tag with
  that begin, end ``<|tool_calls_section_end|>`` and as content a ``tags_with_separator``
  (separator ``""``) of per-tool tags ``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>``
  ... ``<|tool_call_end|>``;
* ``llama`` (Llama 3 JSON, tool choice required): ``tags_with_separator``, separator ``"; "``,
  ``at_least_one``, tags ``{"name": "NAME", "parameters": `` ... ``}``.

What is measured, per style and size:

* **first** -- compiling the spec in a process that never saw it: structgen
  ``Compiler(tokenizer, disk_cache=False).structural_tag(spec, whitespace="spaced", strict=True,
  canonical=True)``, xgrammar ``GrammarCompiler(info, max_threads=1,
  cache_enabled=False).compile_structural_tag(spec)`` (the same dict; xgrammar
  serializes it to JSON for its C++ reader). Each repetition runs in a new
  process forked from the parent after the per-tokenizer set-up (structgen
  ``prepare_vocabulary``; xgrammar ``TokenizerInfo.from_huggingface``) and a one-tool warm-up
  tag of each style compiled (and its first mask filled) by each engine, so it pays for what is the request's own and nothing a serving
  process already holds; structgen's disk caches are off in it (``STRUCTGEN_DISK_CACHE=0``).
* **cached** -- the same call again: structgen on the same ``Compiler`` (its in-memory cache,
  keyed by the spec's JSON text); xgrammar on a ``GrammarCompiler`` with its cache on, after one
  untimed compile of the spec.
* **new Compiler** -- structgen only: the spec again on a second fresh ``Compiler`` in the same
  process, which reuses what structgen keeps per process and per vocabulary by content (rule
  automata, state facts): a server that makes a compiler per request.
* **first mask** -- a matcher made and its first token bitmask filled (structgen
  ``matcher()`` + ``fill_bitmask``; xgrammar ``GrammarMatcher`` + ``fill_next_token_bitmask``),
  right after the first compile. xgrammar builds masks at compile time, structgen on first use,
  so **to first mask** (first + first mask) is the figure to compare for a new tool set.
* **walk** -- a check, not a time: one call of the set's last tool that has a valid BFCL
  example, written in the style (arguments in schema order, ``json.dumps`` spacing), encoded
  and walked token by token through both engines' grammars, end allowed at the end.

Engines run in one process per repetition, their order alternating between repetitions;
repetitions are interleaved over styles and sizes (the repetition loop is outermost), so a
change of machine load spreads over every row. ``gc.collect()`` runs (untimed) before each timed
step, and the parent's set-up objects are frozen (``gc.freeze``), as in ``engine.py``.

The grammars are not identical: xgrammar's ``json_schema`` inside a structural tag is always
``any_whitespace`` and ``strict_mode`` (its converter fixes both), while structgen compiles the
one spelling a canonical, ``json.dumps``-spaced writer produces, objects closed. The request,
the tool set and the formats are the same; the JSON inside is looser in xgrammar.

The markdown report (the command, machine, load, p50/p90 per engine, structgen/xgrammar ratios
of the p50s, refused tools) goes to stdout and ``benchmarks/results/structural-tags.md``.
"""

from __future__ import annotations

import os
import sys

import engine  # noqa: E402  first: one thread for every engine, a new structgen cache folder

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import shlex  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Iterator  # noqa: E402

from _report import choose, cpu_model, git_commit, markdown_table, package_versions, publish  # noqa: E402
from engine import fmt, load_tokenizer, native_stderr_silenced, pct  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from toolcall_data import canonical, cases  # noqa: E402  the BFCL reader the tests use

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (10, 50, 200)
#: Taken round-robin, in this order (the 13 single-turn BFCL v4 categories).
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
              "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
              "simple_java", "simple_javascript")
#: structgen's options for every json_schema inside
OPTIONS = {"whitespace": "spaced", "strict": True, "canonical": True}


# ------------------------------------------------------------------------------------ tools

def candidate_tools() -> Iterator[dict[str, Any]]:
    """BFCL functions round-robin over :data:`CATEGORIES`, each name once, with a valid example
    call's arguments where the case has one (``{"category", "case", "name", "parameters",
    "example"}``)."""
    def of(category: str) -> Iterator[dict[str, Any]]:
        for row in cases(category):
            examples = {c["name"]: c["arguments"] for c in row.get("example_calls") or []
                        if c.get("valid_against_normalized_schema")}
            for tool in row["tools"]:
                f = tool["function"]
                yield {"category": category, "case": row["id"], "name": f["name"],
                       "parameters": f.get("parameters", {"type": "object"}), "example": examples.get(f["name"])}

    streams = {c: of(c) for c in CATEGORIES}
    seen: set[str] = set()
    while streams:
        for category in list(streams):
            for tool in streams[category]:
                if tool["name"] not in seen:
                    seen.add(tool["name"])
                    yield tool
                    break
            else:
                del streams[category]


# ----------------------------------------------------------------------------------- styles

def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": tool["parameters"]}


def hermes(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        {"type": "tag", "begin": f'<tool_call>\n{{"name": "{t["name"]}", "arguments": ', "content": _schema(t),
         "end": "}\n</tool_call>"} for t in tools]}}


def kimi(tools: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [{"type": "tag", "begin": f"<|tool_call_begin|>functions.{t['name']}:0<|tool_call_argument_begin|>",
              "content": _schema(t), "end": "<|tool_call_end|>"} for t in tools]
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<|tool_calls_section_begin|>"], "tags": [
            {"type": "tag", "begin": "<|tool_calls_section_begin|>",
             "content": {"type": "tags_with_separator", "separator": "", "tags": calls},
             "end": "<|tool_calls_section_end|>"}]}}


def llama(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "structural_tag", "format": {
        "type": "tags_with_separator", "separator": "; ", "at_least_one": True, "tags": [
            {"type": "tag", "begin": f'{{"name": "{t["name"]}", "parameters": ', "content": _schema(t), "end": "}"}
            for t in tools]}}


STYLES: dict[str, Callable[[list[dict[str, Any]]], dict[str, Any]]] = {"hermes": hermes, "kimi": kimi,
                                                                       "llama": llama}


def sample_call(style: str, tool: dict[str, Any]) -> str:
    """One call of ``tool`` with its BFCL example arguments, as the style writes it."""
    args = json.dumps(canonical(tool["parameters"], tool["example"]), ensure_ascii=False)
    if style == "hermes":
        return f'<tool_call>\n{{"name": "{tool["name"]}", "arguments": {args}}}\n</tool_call>'
    if style == "kimi":
        return (f"<|tool_calls_section_begin|><|tool_call_begin|>functions.{tool['name']}:0"
                f"<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>")
    return f'{{"name": "{tool["name"]}", "parameters": {args}}}'


WARMUP_TOOL = {"name": "warm_up", "example": None, "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
                                     "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
                                     "unit": {"enum": ["c", "f"]}}, "required": ["q"]}}


# ---------------------------------------------------------------------------------- engines

class Engines:
    """Both engines' per-tokenizer state, built once in the parent (forked workers share it)."""

    def __init__(self, tokenizer: Any, xgrammar_threads: int) -> None:
        import numpy as np
        import xgrammar

        import structgen

        self.tokenizer, self.xgr, self.np = tokenizer, xgrammar, np
        self.threads = xgrammar_threads
        t = time.perf_counter()
        self.vocab = structgen.prepare_vocabulary(tokenizer)
        self.structgen_setup_s = time.perf_counter() - t
        t = time.perf_counter()
        self.info = xgrammar.TokenizerInfo.from_huggingface(tokenizer)
        self.xgrammar_setup_s = time.perf_counter() - t
        self.eos = list(self.vocab.eos_ids)
        self.warmup_ms = {}
        for name in ("structgen", "xgrammar"):
            for style in STYLES.values():  # each style's formats once, on a tool no set holds
                t = time.perf_counter()
                self.mask(name, self.compile(name, style([WARMUP_TOOL])))
                self.warmup_ms[name] = self.warmup_ms.get(name, 0.0) + (time.perf_counter() - t) * 1e3

    def compiler(self, name: str, cache: bool = False) -> Any:
        if name == "structgen":
            from structgen.engine.compiler import Compiler

            return Compiler(self.tokenizer, disk_cache=False)
        return self.xgr.GrammarCompiler(self.info, max_threads=self.threads, cache_enabled=cache)

    def compile(self, name: str, spec: dict[str, Any], compiler: Any = None) -> Any:
        compiler = compiler or self.compiler(name)
        if name == "structgen":
            return compiler.structural_tag(spec, **OPTIONS)
        return compiler.compile_structural_tag(spec)  # the dict: xgrammar writes its JSON text itself

    def mask(self, name: str, compiled: Any) -> Any:
        """A matcher with its first bitmask filled."""
        if name == "structgen":
            m = compiled.matcher()
            m.fill_bitmask(self.np.zeros((1, (self.vocab.size + 31) // 32), dtype=self.np.int32))
            return m
        m = self.xgr.GrammarMatcher(compiled)
        m.fill_next_token_bitmask(self.xgr.allocate_token_bitmask(1, self.info.vocab_size))
        return m

    def walk(self, name: str, compiled: Any, text: str) -> str | None:
        """Why the grammar refuses ``text`` token by token (None: accepted, end allowed)."""
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if name == "structgen":
            m = compiled.matcher()
            for k, tid in enumerate(ids):
                if not m.advance(tid):
                    return f"token {k} {self.tokenizer.decode([tid])!r}: {m.last_rejection}"
            return None if m.can_end() else "end not allowed"
        m = self.xgr.GrammarMatcher(compiled)
        for k, tid in enumerate(ids):
            if not m.accept_token(tid):
                return f"token {k} {self.tokenizer.decode([tid])!r}"
        return None if m.accept_token(self.info.stop_token_ids[0]) else "end not allowed"


_ENGINES: list[Engines] = []  # set by main() before any fork; the workers inherit it


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError("ran past --timeout")


def _timed(step: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter_ns()
    got = step()
    return (time.perf_counter_ns() - t) / 1e6, got


def _refusal(err: BaseException) -> str:
    text = " ".join(str(err).split())
    cut = text.find("Invalid structural tag error:")  # xgrammar prefixes its C++ check location
    return f"{type(err).__name__}: {text[cut if cut > 0 else 0:][:240]}"


def in_fork(fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
    """``fn(*args)`` in a new process forked from this one (which holds the set-up), with
    structgen's disk caches off there; ``{"error": ...}`` when it raises, times out or dies."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        try:
            return pool.submit(_worker, fn, args, timeout).result()
        except Exception as err:  # noqa: BLE001 -- the worker died (memory, a crash)
            return {"error": f"the worker failed: {err!r}"[:300]}


def _worker(fn: Callable[..., Any], args: tuple, timeout: float) -> Any:
    os.environ["STRUCTGEN_DISK_CACHE"] = "0"
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with native_stderr_silenced():
            return fn(*args)
    except BaseException as err:  # noqa: BLE001 -- reported, never the end of the run
        return {"error": f"{type(err).__name__}: {err}"[:300], "trace": traceback.format_exc(limit=3)[-800:]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


# ------------------------------------------------------------------------------- the work

def screen(wanted: int) -> dict[str, Any]:
    """The first ``wanted`` tools both engines compile alone (style ``hermes``), and the
    refused ones before them, ``{"accepted": [...], "refused": [(tool, engine, reason)]}``."""
    eng = _ENGINES[0]
    accepted, refused = [], []
    for tool in candidate_tools():
        if len(accepted) == wanted:
            break
        ok = True
        for name in ("structgen", "xgrammar"):
            try:
                eng.compile(name, hermes([tool]))
            except Exception as err:  # noqa: BLE001 -- either engine's refusal, listed
                refused.append((tool, name, _refusal(err)))
                ok = False
        if ok:
            accepted.append(tool)
    return {"accepted": accepted, "refused": refused}


def measure(style: str, tools: list[dict[str, Any]], rep: int) -> dict[str, Any]:
    """One repetition of one style and size, in its own forked process."""
    eng = _ENGINES[0]
    spec = STYLES[style](tools)
    out: dict[str, Any] = {"errors": {}}
    order = ("structgen", "xgrammar") if rep % 2 == 0 else ("xgrammar", "structgen")
    for name in order:
        try:
            compiler = eng.compiler(name)
            out[f"{name} first"], compiled = _timed(lambda: eng.compile(name, spec, compiler))
            out[f"{name} first mask"], _ = _timed(lambda: eng.mask(name, compiled))
            if name == "structgen":
                out[f"{name} cached"], again = _timed(lambda: eng.compile(name, spec, compiler))
                assert again is compiled, "structgen's cache returned another grammar"
                out[f"{name} new Compiler"], _ = _timed(lambda: eng.compile(name, spec))
            else:
                cached = eng.compiler(name, cache=True)
                eng.compile(name, spec, cached)
                out[f"{name} cached"], _ = _timed(lambda: eng.compile(name, spec, cached))
            example = next((t for t in reversed(tools) if t["example"] is not None), None)
            if example is not None:
                out[f"{name} walk"] = eng.walk(name, compiled, sample_call(style, example))
                out["walk tool"] = example["name"]
        except TimeoutError:
            raise
        except Exception as err:  # noqa: BLE001 -- a spec an engine refuses: recorded
            out["errors"][name] = _refusal(err)
    return out


# --------------------------------------------------------------------------------- report

def stats(runs: list[dict[str, Any]], key: str) -> list[float]:
    return [r[key] for r in runs if key in r]


def ratio(a: list[float], b: list[float]) -> str:
    return fmt(pct(a, 50) / pct(b, 50)) if a and b else "–"


def report(args: argparse.Namespace, eng: Engines, screened: dict[str, Any], results: dict, wall_s: float,
           load: tuple[list[float], list[float]]) -> str:
    tools = screened["accepted"]
    refused = screened["refused"]
    during = [r["load"] for runs in results.values() for r in runs] or [float("nan")]
    spec_kib = {(style, n): len(json.dumps(STYLES[style](tools[:n]))) / 1024
                for style in args.styles for n in args.sizes}
    lines = [
        "# Structural tags: per-request compile latency of tool-call formats",
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; wall time {wall_s:.0f} s",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()} ({len(os.sched_getaffinity(0))} usable); one thread per "
        f"engine (OMP/RAYON_NUM_THREADS=1, xgrammar max_threads={args.xgrammar_threads}); load average "
        f"{' / '.join(f'{x:.2f}' for x in load[0])} before, {' / '.join(f'{x:.2f}' for x in load[1])} after "
        f"(1/5/15 min), 1-min load {fmt(min(during))}-{fmt(max(during))} after the repetitions (over ~1: "
        f"another job shared the cores); Python {platform.python_version()}",
        f"- versions: {package_versions(['structgen', 'xgrammar', 'transformers', 'numpy'])}; "
        f"structgen checkout {git_commit()}",
        f"- tokenizer: structgen's default (SmolLM2, {eng.vocab.size} tokens); xgrammar "
        "`TokenizerInfo.from_huggingface` on the same tokenizer object",
        f"- repetitions: {args.reps} per style and size, each in a new process forked after the set-up "
        "(the engines' order alternating), interleaved over styles and sizes",
        f"- structgen options: `{', '.join(f'{k}={v!r}' for k, v in OPTIONS.items())}`; xgrammar: its structural "
        "tags' own (`any_whitespace`, `strict_mode`): more spellings of the same JSON are allowed there",
        "",
        "Tool sets: the first N BFCL v4 functions round-robin over the categories "
        f"{', '.join(CATEGORIES)} (each name once), skipping the {len(refused)} tool refusals listed below. "
        "One spec dict per style and size, the same object passed to both engines (xgrammar serializes it itself).",
        "",
        "## Compile (ms)",
        "",
        "first: the spec compiled in a process that never saw it (after the per-tokenizer set-up and a warm-up "
        "tag); cached: the same call again (structgen: same `Compiler`; xgrammar: a cache-enabled "
        "`GrammarCompiler`); new Compiler: structgen's second fresh `Compiler` in that process (what it keeps per "
        "process and vocabulary reused). Ratios: structgen p50 / xgrammar p50 (below 1: structgen faster).",
        "",
    ]
    rows = []
    for n in args.sizes:
        for style in args.styles:
            runs = results[(style, n)]
            s, x = (lambda k: stats(runs, f"structgen {k}")), (lambda k: stats(runs, f"xgrammar {k}"))
            rows.append([str(n), style, f"{spec_kib[(style, n)]:.0f}",
                         fmt(pct(s("first"), 50)), fmt(pct(s("first"), 90)),
                         fmt(pct(x("first"), 50)), fmt(pct(x("first"), 90)), ratio(s("first"), x("first")),
                         fmt(pct(s("cached"), 50)), fmt(pct(s("cached"), 90)),
                         fmt(pct(x("cached"), 50)), fmt(pct(x("cached"), 90)), ratio(s("cached"), x("cached")),
                         fmt(pct(s("new Compiler"), 50)), f"{len(s('first'))}/{len(x('first'))}"])
    lines += [markdown_table(["tools", "style", "spec KiB", "structgen first p50", "p90", "xgrammar first p50", "p90",
                              "ratio", "structgen cached p50", "p90", "xgrammar cached p50", "p90", "ratio",
                              "structgen new Compiler p50", "runs (sg/xg)"], rows), ""]
    lines += ["## First mask (ms)", "",
              "first mask: matcher made and its first token bitmask filled, after the first compile (xgrammar "
              "computes masks while compiling, structgen when first asked). to first mask: first compile + first "
              "mask, the latency a request with a new tool set sees before its first token.", ""]
    rows = []
    for n in args.sizes:
        for style in args.styles:
            runs = results[(style, n)]
            both = {name: [r[f"{name} first"] + r[f"{name} first mask"] for r in runs
                           if f"{name} first mask" in r] for name in ("structgen", "xgrammar")}
            sm, xm = stats(runs, "structgen first mask"), stats(runs, "xgrammar first mask")
            rows.append([str(n), style, fmt(pct(sm, 50)), fmt(pct(sm, 90)), fmt(pct(xm, 50)), fmt(pct(xm, 90)),
                         ratio(sm, xm), fmt(pct(both["structgen"], 50)), fmt(pct(both["structgen"], 90)),
                         fmt(pct(both["xgrammar"], 50)), fmt(pct(both["xgrammar"], 90)),
                         ratio(both["structgen"], both["xgrammar"])])
    lines += [markdown_table(["tools", "style", "structgen first mask p50", "p90", "xgrammar first mask p50", "p90",
                              "ratio", "structgen to first mask p50", "p90", "xgrammar to first mask p50", "p90",
                              "ratio"], rows), ""]
    lines += ["## Checks", "",
              "walk: one call of the set's last tool with a valid BFCL example (arguments in schema order, "
              "`json.dumps` spacing, encoded by the tokenizer), token by token, end allowed after it; every "
              "repetition walks it, the cell counts the ones accepted.", ""]
    rows, problems = [], []
    for n in args.sizes:
        for style in args.styles:
            runs = results[(style, n)]
            cells = []
            for name in ("structgen", "xgrammar"):
                walks = [r[f"{name} walk"] for r in runs if f"{name} walk" in r]
                cells.append(f"{sum(w is None for w in walks)}/{len(walks)}")
                problems += [f"- {style}, {n} tools, {name}: {w}" for w in dict.fromkeys(walks) if w]
            errors = sorted({f"{name}: {e}" for r in runs for name, e in r.get("errors", {}).items()}
                            | {r["error"] for r in runs if "error" in r})
            problems += [f"- {style}, {n} tools: {e}" for e in errors]
            tool = next((r["walk tool"] for r in runs if "walk tool" in r), "–")
            rows.append([str(n), style, f"`{tool}`", *cells])
    lines += [markdown_table(["tools", "style", "walked tool", "structgen accepts", "xgrammar accepts"], rows), ""]
    lines += ["Refused specs, failed walks and errors:", "", *(problems or ["none"]), ""]
    lines += [f"## Refused tools ({len(refused)})", "",
              f"Each candidate tool compiled alone (style hermes) by both engines before the sets were made; "
              f"{len(refused)} refusals among the first {len(tools) + len({t['name'] for t, _, _ in refused})} "
              "candidates, each replaced by the next candidate.", ""]
    lines += [markdown_table(["category", "case", "tool", "refused by", "reason"],
                             [[t["category"], t["case"], f"`{t['name']}`", name, reason.replace("|", "\\|")]
                              for t, name, reason in refused]) if refused else "none", ""]
    lines += ["## Set-up (not in the tables above)", "",
              markdown_table(["engine", "per-tokenizer set-up s", "warm-up tags ms (3 styles, 1 tool, compile + mask)"],
                             [["structgen", f"{eng.structgen_setup_s:.2f}", fmt(eng.warmup_ms['structgen'])],
                              ["xgrammar", f"{eng.xgrammar_setup_s:.2f}", fmt(eng.warmup_ms['xgrammar'])]]), ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="tool-set sizes (default 10,50,200)")
    p.add_argument("--styles", default=",".join(STYLES), help="comma-separated subset of " + ",".join(STYLES))
    p.add_argument("--reps", type=int, default=7, help="repetitions per style and size (default 7)")
    p.add_argument("--xgrammar-threads", type=int, default=1, help="xgrammar's max_threads (default 1)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per repetition (default 120)")
    p.add_argument("--tokenizer", default=None, help="as engine.py's --tokenizer (default SmolLM2)")
    p.add_argument("--out", type=Path, default=RESULTS / "structural-tags.md")
    args = p.parse_args(argv)
    args.styles = choose(p, args.styles, STYLES, "styles")
    args.sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    load_before = list(os.getloadavg())
    tokenizer = load_tokenizer(args.tokenizer)
    _ENGINES.append(Engines(tokenizer, args.xgrammar_threads))
    gc.collect()
    gc.freeze()  # the set-up out of the collector's way, as a serving process would
    screened = in_fork(screen, max(args.sizes), timeout=args.timeout * 4)
    if "error" in screened:
        sys.exit(f"screening the tools failed: {screened['error']}")
    tools = screened["accepted"]
    if len(tools) < max(args.sizes):
        print(f"only {len(tools)} tools compile in both engines", file=sys.stderr)
    results: dict[tuple[str, int], list[dict[str, Any]]] = {(s, n): [] for s in args.styles for n in args.sizes}
    for rep in range(args.reps):
        for n in args.sizes:
            for style in args.styles:
                got = in_fork(measure, style, tools[:n], rep, timeout=args.timeout)
                got["load"] = os.getloadavg()[0]
                results[(style, n)].append(got)
                shown = {k: round(v, 2) for k, v in got.items() if isinstance(v, float) and k != "load"}
                print(f"rep {rep} {style:6} {n:4} {shown} {got.get('errors') or got.get('error') or ''}",
                      file=sys.stderr, flush=True)
    text = report(args, _ENGINES[0], screened, results, time.perf_counter() - started,
                  (load_before, list(os.getloadavg())))
    publish(text, args.out)


if __name__ == "__main__":
    main()
