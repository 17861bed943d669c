"""Agents' tool calls on BFCL: structgen's formats, reasoning and native formats against
unconstrained decoding and xgrammar's structural tags, on the default model in one run.

Cases: the first ``--per-category`` (default 20) of each category :mod:`toolcalls` uses
(``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple`` with
``tool_choice="required"``, ``irrelevance`` with ``"auto"``), loaded, judged and parsed
(unconstrained) by :mod:`toolcalls`'s own code. SmolLM2-135M-Instruct
(:func:`structgen.decoding.models.default_model`) on CPU, greedy, ``--threads`` torch threads,
flushed denormals, one ``--max-new-tokens`` cap (default 256) for every engine. Engines,
interleaved per case in this order:

* ``structgen``: ``Generator.tool_calls(tools, messages, tool_choice=...)``, the default model's
  own format (``format=None``: ``"json"``, the prompt rendered by structgen), drafts on.
* ``structgen-think``: the same with ``reasoning=("<think>", "</think>")`` and
  ``thinking_budget`` (``--thinking-budget``, default 32): free thinking, the end marker forced
  after the budget, then the same calls. Tokens and passes count the thinking too.
* ``structgen-qwen3``: ``format="qwen_3"``, structgen's native Qwen 3 format (the prompt, which
  structgen renders since SmolLM2's template shows no tools, gives an example call in it).
* ``unconstrained``: ``model.generate`` on the prompt text of ``structgen``, up to
  end-of-sequence, parsed leniently (:func:`toolcalls.lenient_calls`).
* ``xgrammar``: the prompt text of ``structgen-qwen3``; the very spec dict structgen compiles,
  ``format_structural_tag(CALL_FORMATS["qwen_3"], specs, choice=...)``, compiled by
  ``xgrammar.GrammarCompiler.compile_structural_tag`` (``TokenizerInfo`` of the same tokenizer,
  the model's vocabulary size) and decoded by ``model.generate`` with
  ``xgrammar.contrib.hf.LogitsProcessor`` (as ``e2e.py`` does); its output is read with
  structgen's reader (``segments_of`` on the spec, then ``calls_of``). Output that does not
  read is listed.

Reported per engine and category (and the four call categories pooled): the share whose every
call parses and validates, names right, arguments exact (BFCL's AST check simplified, as
:mod:`toolcalls`), for ``irrelevance`` the share with no call; cap hits (structgen: the budget
closed the output, ``finish_reason == "length"``; the peers: no end-of-sequence within the
cap); mean new tokens; forward passes per token (structgen's stats, prefill excluded;
unconstrained and xgrammar make one per token by definition); seconds per case p50/p90 (each
engine's call, prompt encoding and grammar compilation included); for ``structgen-think`` the
mean thinking tokens. structgen's answers are checked again here: every returned call must
read back in its format and validate.

Usage::

    python benchmarks/agents.py                         # 5 x 20 cases, writes benchmarks/results/agents.md
    python benchmarks/agents.py --per-category 1 --out /tmp/agents.md     # smoke run
    python benchmarks/agents.py --dump runs.jsonl --resume               # go on after an interruption
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks")]


def fresh_cache_dir() -> None:
    """Point structgen's disk cache at a new folder for the run (unless ``STRUCTGEN_CACHE_DIR``
    is set), so no grammar or parse-state fact an earlier run saved is read; the converted model
    and tokenizer are linked from the usual cache (loading them is not measured). No pass-cost
    curve is copied: structgen starts from its default curve and learns in the run (a curve
    learned on a busy machine and saved there would otherwise decide the drafts)."""
    if "STRUCTGEN_CACHE_DIR" in os.environ:
        return
    from structgen.engine.disk_cache import cache_dir

    home, new = cache_dir(), Path(tempfile.mkdtemp(prefix="structgen-bench-"))
    for name in ("models", "tokenizers", "gguf"):
        if (home / name).is_dir():
            (new / name).symlink_to(home / name, target_is_directory=True)
    os.environ["STRUCTGEN_CACHE_DIR"] = str(new)

import toolcalls  # noqa: E402  -- case loading, lenient parsing and judging, shared
from _report import choose, markdown_table, package_versions, publish, run_lines  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
ENGINES = ("structgen", "structgen-think", "structgen-qwen3", "unconstrained", "xgrammar")
STRUCTGEN = ENGINES[:3]
NATIVE = "qwen_3"
MARKERS = ("<think>", "</think>")


# ------------------------------------------------------------------------------ engines

class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        import structgen
        from structgen.decoding.models import default_model

        self.args = args
        self.model, self.tokenizer = default_model()
        from structgen.decoding.costs import PassCosts

        # one learning curve for the three structgen engines, reported before and after
        self.pass_costs = PassCosts.for_model(self.model)
        self.costs_before = dict(self.pass_costs.relative)
        self.gen = structgen.Generator(self.model, self.tokenizer, pass_costs=self.pass_costs)
        self.xgr_compiler = None
        if "xgrammar" in args.engines:
            import xgrammar
            import xgrammar.contrib.hf  # noqa: F401

            self.xgr = xgrammar
            info = xgrammar.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.model.config.vocab_size)
            self.xgr_compiler = xgrammar.GrammarCompiler(info, max_threads=args.threads)

    def run(self, engine: str, case: dict, choice: str) -> dict:
        if engine in STRUCTGEN:
            return self.structgen(engine, case, choice)
        return self.unconstrained(case) if engine == "unconstrained" else self.xgrammar(case, choice)

    def warm_up(self) -> None:
        """Every engine once on a small case of its own, untimed (first calls set things up)."""
        tool = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                                 "parameters": {"type": "object", "properties": {
                                                     "city": {"type": "string"}}, "required": ["city"]}}}
        case = {"tools": [tool], "messages": [{"role": "user", "content": "Weather in Paris?"}]}
        cap, self.args.max_new_tokens = self.args.max_new_tokens, 16
        try:
            for engine in self.args.engines:
                self.run(engine, case, "required")
        finally:
            self.args.max_new_tokens = cap

    # the spec both structgen-qwen3 and xgrammar decode under
    def native_spec(self, case: dict, choice: str) -> tuple[Any, list, dict]:
        from structgen.frontends.tool_calls import read_tool_choice, read_tools
        from structgen.frontends.tool_formats import CALL_FORMATS, format_structural_tag

        specs = read_tools(case["tools"])
        mode, names = read_tool_choice(choice, specs)
        fmt = CALL_FORMATS[NATIVE]
        return fmt, specs, format_structural_tag(fmt, specs, choice=mode, names=names, parallel=True)

    def structgen(self, engine: str, case: dict, choice: str) -> dict:
        import structgen
        from structgen.frontends.structural_tag import read_structural_tag
        from structgen.frontends.tool_calls import FORMATS, parse_calls
        from structgen.frontends.tool_formats import calls_of
        from structgen.tasks.segments import segments_of

        options: dict[str, Any] = {}
        if engine == "structgen-think":
            options = {"reasoning": MARKERS, "thinking_budget": self.args.thinking_budget}
        elif engine == "structgen-qwen3":
            options = {"format": NATIVE}
        t = time.perf_counter()
        try:
            r = self.gen.tool_calls(case["tools"], case["messages"], tool_choice=choice, parallel_tool_calls=True,
                                    max_new_tokens=self.args.max_new_tokens, **options)
        except (structgen.SchemaError, structgen.BudgetTooSmallError) as err:  # declined up front
            return {"seconds": time.perf_counter() - t, "failure": f"declined: {type(err).__name__}: {err}"[:300]}
        except Exception as err:  # noqa: BLE001 -- anything else is a bug: shown loudly, the run goes on
            return {"seconds": time.perf_counter() - t, "failure": f"error: {type(err).__name__}: {err}"[:300],
                    "violation": True}
        seconds = time.perf_counter() - t
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in r.message.get("tool_calls", [])]
        # the claim under test: what structgen returns reads back in its format and validates
        try:
            if r.format == NATIVE:
                fmt, _, spec = self.native_spec(case, choice)
                again = calls_of(fmt, segments_of(read_structural_tag(spec), r.text))[1]
            else:
                again = parse_calls(FORMATS[r.format], r.text)[1]
            check = ("read back as other calls" if again != calls
                     else "a call does not validate" if calls and not toolcalls.all_valid(calls, case["tools"])
                     else None)
        except (ValueError, KeyError) as err:
            check = f"does not read back: {type(err).__name__}: {err}"[:300]
        violation = check is not None
        out = {"seconds": seconds, "calls": calls, "text": r.text, "token_ids": list(r.token_ids),
               "violation": violation, "format": r.format,
               "finish": r.finish_reason, "passes": r.stats.forward_passes - 1, "tokens": r.stats.new_tokens,
               "drafted": r.stats.drafted_tokens, "accepted": r.stats.accepted_tokens,
               "answered": r.finish_reason != "length", "rendered_by": r.rendered_by, "check": check}
        if engine == "structgen-think":
            out.update(thinking=r.reasoning_tokens, reasoning=r.reasoning)
        return out

    def unconstrained(self, case: dict) -> dict:
        return toolcalls.run_baseline(self.gen, case, self.args.max_new_tokens)

    def xgrammar(self, case: dict, choice: str) -> dict:
        import torch

        from structgen.frontends.structural_tag import read_structural_tag
        from structgen.frontends.tool_formats import CALL_FORMATS, calls_of
        from structgen.tasks.segments import segments_of
        from structgen.tasks.tool_calls import tool_prompt

        t = time.perf_counter()
        fmt, specs, spec = self.native_spec(case, choice)
        prompt = tool_prompt(self.tokenizer, specs, case["messages"], CALL_FORMATS[NATIVE])[0]
        ids = self.tokenizer.encode(prompt, add_special_tokens=False)
        try:
            compiled = self.xgr_compiler.compile_structural_tag(json.dumps(spec))
        except Exception as err:  # noqa: BLE001 -- xgrammar raises RuntimeError/ValueError
            return {"seconds": time.perf_counter() - t, "failure": f"unsupported: {type(err).__name__}: {err}"[:300]}
        compiled_at = time.perf_counter()
        try:
            with torch.no_grad():
                out = self.model.generate(torch.tensor([ids]), max_new_tokens=self.args.max_new_tokens,
                                          do_sample=False, pad_token_id=self.tokenizer.eos_token_id,
                                          logits_processor=[self.xgr.contrib.hf.LogitsProcessor(compiled)])
        except Exception as err:  # noqa: BLE001 -- what the peer raises is the finding
            return {"seconds": time.perf_counter() - t, "failure": f"error: {type(err).__name__}: {err}"[:300]}
        seconds = time.perf_counter() - t
        new = out[0, len(ids):].tolist()
        eos = set(self.gen.vocabulary.eos_ids)
        count = next((i for i, tok in enumerate(new) if tok in eos), len(new))
        text = self.tokenizer.decode(new[:count], skip_special_tokens=True)
        result = {"seconds": seconds, "compile_seconds": compiled_at - t, "text": text, "tokens": count,
                  "token_ids": new[:count],
                  "answered": count < len(new)}  # it reached end-of-sequence within the cap
        try:
            result["calls"] = calls_of(fmt, segments_of(read_structural_tag(spec), text))[1]
        except (ValueError, KeyError) as err:  # ParseError: the output does not read as the spec
            result.update(calls=None, unread=f"{type(err).__name__}: {err}"[:300])
        result["cut"] = repeats_cut(fmt, spec, text)
        return result


def repeats_cut(fmt: Any, spec: dict, text: str) -> dict:
    """xgrammar's answer as structgen's ``stop_repeated_calls`` would keep it: the longest prefix
    ending after a whole call that reads as the spec, its calls up to the first one identical
    (name and arguments) to an earlier one; a text with no call is read whole."""
    from structgen.frontends.structural_tag import read_structural_tag
    from structgen.frontends.tool_formats import calls_of
    from structgen.tasks.segments import segments_of

    tag = read_structural_tag(spec)
    ends = [i + len(fmt.call_end) for i in range(len(text)) if text.startswith(fmt.call_end, i)]
    for end in [len(text), *reversed(ends)]:
        try:
            calls = calls_of(fmt, segments_of(tag, text[:end]))[1]
        except (ValueError, KeyError):
            continue
        seen, kept = set(), []
        for name, args in calls:
            key = (name, json.dumps(args, sort_keys=True))
            if key in seen:
                break
            seen.add(key)
            kept.append((name, args))
        return {"calls": kept, "cut": end < len(text) or len(kept) < len(calls)}
    return {"calls": None, "cut": False}


# ----------------------------------------------------------------------------- report

def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def answered(run: dict) -> bool:
    return "failure" not in run and run.get("answered", True)


def view(rec: dict, engine: str) -> dict:
    """The run of ``engine`` in a case's record; ``xgrammar+cut`` is xgrammar's run read with
    :func:`repeats_cut` (structgen's ``stop_repeated_calls`` rule after the fact)."""
    if engine != "xgrammar+cut":
        return rec[engine]
    x = dict(rec["xgrammar"])
    if "cut" in x:
        x.update(calls=x["cut"]["calls"], answered=x["answered"] or x["cut"]["cut"])
    return x


def report_engines(args: argparse.Namespace) -> list[str]:
    return list(args.engines) + (["xgrammar+cut"] if "xgrammar" in args.engines else [])


def summary_row(label: str, engine: str, recs: list[dict]) -> list[str]:
    runs = [view(r, engine) for r in recs]
    answers = [x for x in runs if "tokens" in x]
    marks = [toolcalls.judge(x.get("calls"), r["case"], answered(x)) for x, r in zip(runs, recs)]
    calls_cases = [m for m in marks if "parsed" in m]
    no_call_cases = [m for m in marks if "no_call" in m]

    def share(key: str) -> str:
        return pct(sum(m[key] for m in calls_cases), len(calls_cases)) if calls_cases else "n/a"

    tokens = sum(x["tokens"] for x in answers)
    if engine in STRUCTGEN:
        passes = f"{sum(x['passes'] for x in answers) / tokens:.2f}" if tokens else "-"
    else:
        passes = "1 (by definition)"
    no_call = pct(sum(m["no_call"] for m in no_call_cases), len(no_call_cases)) if no_call_cases else "n/a"
    seconds = sorted(x["seconds"] for x in runs)
    p90 = seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]
    capped = sum("failure" not in x and not x.get("answered", True) for x in runs)
    failed = sum("failure" in x for x in runs)
    thinking = (f"{statistics.mean(x['thinking'] for x in answers):.1f}"
                if engine == "structgen-think" and answers else "")
    return [label, engine, str(len(recs)), share("valid"), share("names"), share("exact"), no_call,
            str(capped), str(failed), f"{tokens / max(1, len(answers)):.0f}", passes,
            f"{statistics.median(seconds):.2f}", f"{p90:.2f}", thinking]


def curve(relative: dict[int, float]) -> str:
    return ", ".join(f"{k}: {v:.3g}" for k, v in sorted(relative.items()))


def write_report(args: argparse.Namespace, records: list[dict], wall: float, load: tuple[list, list],
                 bench: Bench) -> None:
    header = ["category", "engine", "n", "all calls valid", "names right", "arguments exact", "no call",
              "cap hit", "failed", "new tokens (mean)", "passes per token", "s / case p50", "s / case p90",
              "thinking tokens (mean)"]
    groups = [(c, [r for r in records if r["category"] == c]) for c in args.categories]
    pooled = [r for r in records if r["category"] in toolcalls.CALL_CATEGORIES]
    if len({r["category"] for r in pooled}) > 1:
        groups.append(("all calls", pooled))
    tables = []
    for label, group in groups:
        if group:
            tables.append(f"### {label}\n\n" + markdown_table(
                header, [summary_row(label, e, group) for e in report_engines(args)]))
    pooled_rows = [summary_row("all calls", e, pooled) for e in report_engines(args)] if pooled else []
    overview = markdown_table(["engine", "all calls valid", "names right", "arguments exact", "irrelevance: no call",
                               "passes per token", "s / case p50", "s / case p90"],
                              [[row[1], row[3], row[4], row[5],
                                summary_row("irrelevance", row[1], [r for r in records
                                                                    if r["category"] == "irrelevance"])[6]
                                if any(r["category"] == "irrelevance" for r in records) else "n/a",
                                row[10], row[11], row[12]] for row in pooled_rows]) if pooled_rows else ""

    lines = ["# Agents' tool calls on BFCL: formats, reasoning, native formats, xgrammar", ""]
    lines += run_lines(args.threads, load, wall, package_versions(["torch", "transformers", "xgrammar",
                                                                   "jsonschema"]))
    during = sorted(r["load"] for r in records)
    lines += [f"- 1-minute load average after each case: median {statistics.median(during):.2f}, "
              f"min {during[0]:.2f}, max {during[-1]:.2f} ({os.cpu_count()} cores; others' work shares them)"]
    lines += [f"- SmolLM2-135M-Instruct (structgen's default model), greedy, `max_new_tokens={args.max_new_tokens}`, "
              f"first {args.per_category} cases of each of {', '.join(args.categories)} ({len(records)} cases), "
              f"engines interleaved per case; thinking budget {args.thinking_budget}"
              + (f"; {args.resumed} cases come from an earlier, interrupted sitting (`--resume`: the wall time, "
                 "load averages before and after and the pass costs are this sitting's)"
                 if getattr(args, "resumed", 0) else ""),
              f"- structgen's pass costs (a pass over n new positions relative to one over 1, which sizes its "
              f"drafts): `PassCosts.for_model(model)` in a fresh cache folder, learning as it decodes: before "
              f"{{{curve(bench.costs_before)}}}, after {{{curve(bench.pass_costs.relative)}}}", ""]
    if overview:
        lines += ["## Overview (the four call categories pooled; irrelevance apart)", "", overview, ""]
    lines += ["## Per category", "", *("\n\n".join(tables).split("\n")), ""]
    lines += [
        "- *structgen*: `Generator.tool_calls(tools, messages, tool_choice=...)`, `format=None` (SmolLM2: `json`), "
        "drafts on; *structgen-think*: the same with `reasoning=(\"<think>\", \"</think>\")`, "
        f"`thinking_budget={args.thinking_budget}`; *structgen-qwen3*: `format=\"qwen_3\"`; *unconstrained*: "
        "greedy `model.generate` on structgen's prompt text, parsed leniently (`toolcalls.lenient_calls`); "
        "*xgrammar*: `GrammarCompiler.compile_structural_tag` of the same spec dict structgen-qwen3 compiles "
        "(`format_structural_tag(CALL_FORMATS[\"qwen_3\"], specs, choice=...)`), `model.generate` with "
        "`xgrammar.contrib.hf.LogitsProcessor` on structgen-qwen3's prompt text, read back with structgen's "
        "`segments_of` + `calls_of`.",
        "- `tool_choice=\"required\"` for the call categories, `\"auto\"` for irrelevance (as toolcalls.py).",
        "- *all calls valid*: at least one call, each names a tool and its arguments validate (Draft 2020-12); "
        "*names right*: the multiset of called names is the ground truth's; *arguments exact*: "
        "`toolcalls.exact_match` (BFCL's AST check, simplified). Shares are of the call cases; *no call* of the "
        "irrelevance cases (an answer within the cap with no call).",
        "- *cap hit*: structgen closed the output at the cap (`finish_reason == \"length\"`), or a peer did "
        "not reach end-of-sequence within it (its text is still read for calls; for irrelevance it is no right "
        "answer). *failed*: the engine raised (listed below).",
        "- *passes per token*: structgen's `stats` (prefill excluded; structgen-think counts thinking tokens "
        "too); one per token by definition for model.generate. *s / case*: the engine's whole call, grammar "
        "compilation included (structgen-think reuses the grammar structgen compiled for the same case; "
        "structgen keeps compiled grammars per process by content). Every engine ran once untimed on a "
        "small case of its own first.",
        "- *xgrammar+cut* is no run of its own: xgrammar's outputs read as structgen's `stop_repeated_calls` "
        "would keep them (the longest prefix ending after a whole call that reads as the spec, calls up to the "
        "first one identical to an earlier one), to separate decoding from that rule.",
        "",
    ]
    xg = [r["xgrammar"] for r in records if "xgrammar" in r and "compile_seconds" in r["xgrammar"]]
    if xg:
        comp = sorted(x["compile_seconds"] for x in xg)
        lines += [f"xgrammar's compile_structural_tag alone: p50 {statistics.median(comp) * 1000:.0f} ms, "
                  f"max {comp[-1] * 1000:.0f} ms (inside its seconds per case).", ""]
    if "xgrammar" in args.engines and "structgen-qwen3" in args.engines:
        same = prefix = 0
        diverged = []
        for r in records:
            a, b = r["structgen-qwen3"].get("token_ids"), r["xgrammar"].get("token_ids")
            if a is None or b is None:
                continue
            if a == b:
                same += 1
            elif b[:len(a)] == a:
                prefix += 1
            else:
                k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                diverged.append(f"`{r['id']}` at token {k} of {len(a)}/{len(b)} "
                                f"(structgen-qwen3 {r['structgen-qwen3'].get('finish')})")
        lines += [f"Same greedy tokens, structgen-qwen3 against xgrammar (same prompt, same spec): identical "
                  f"{same}/{len(records)}; structgen-qwen3's answer a strict prefix of xgrammar's (structgen "
                  f"ended it before a repeated call) {prefix}; diverged {len(diverged)}"
                  + (": " + "; ".join(diverged[:20]) if diverged else "") + ".", ""]
    think = [r["structgen-think"] for r in records if "thinking" in r.get("structgen-think", {})]
    if think:
        at_budget = sum(x["thinking"] >= args.thinking_budget for x in think)
        lines += [f"structgen-think: {at_budget}/{len(think)} answers thought up to the budget "
                  f"({args.thinking_budget} tokens), mean {statistics.mean(x['thinking'] for x in think):.1f}.", ""]

    lines += ["## Checks", ""]
    for engine in [e for e in args.engines if e in STRUCTGEN]:
        bad = [r for r in records if r[engine].get("violation")]
        lines.append(f"- {engine}: answers that do not read back or validate, or raised: **{len(bad)}**"
                     + (" (must be 0)" if bad else ""))
        lines += [f"  - `{r['id']}`: {r[engine].get('failure') or r[engine].get('check')}; "
                  f"text {repr(r[engine].get('text'))[:300]}"
                  for r in bad]
        declined = [r for r in records if "failure" in r[engine] and not r[engine].get("violation")]
        if declined:
            lines.append(f"- {engine}: declined up front (unsupported tools, or a cap below the shortest answer): "
                         f"**{len(declined)}**")
            lines += [f"  - `{r['id']}`: {r[engine]['failure']}" for r in declined[:10]]
    if "xgrammar" in args.engines:
        unread = [r for r in records if r["xgrammar"].get("unread")]
        failed = [r for r in records if "failure" in r["xgrammar"]]
        lines.append(f"- xgrammar: outputs structgen's reader could not cut into the spec's segments: "
                     f"**{len(unread)}** ({sum(not answered(r['xgrammar']) for r in unread)} of them at the cap); "
                     f"raised: **{len(failed)}**")
        lines += [f"  - `{r['id']}` ({'cap' if not answered(r['xgrammar']) else 'ended'}): "
                  f"{r['xgrammar']['unread'][:160]!s}; text {r['xgrammar']['text'][-200:]!r}" for r in unread[:10]]
        lines += [f"  - `{r['id']}`: {r['xgrammar']['failure']}" for r in failed[:10]]
    finishes: dict[str, dict[str, int]] = {}
    for e in [e for e in args.engines if e in STRUCTGEN]:
        for r in records:
            f = r[e].get("finish", "failed")
            finishes.setdefault(e, {})[f] = finishes.setdefault(e, {}).get(f, 0) + 1
    lines += ["", "structgen finish reasons: " + "; ".join(
        f"{e}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) for e, c in finishes.items()), ""]
    publish("\n".join(lines), args.out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-category", type=int, default=20, help="first N cases of each category (default 20)")
    p.add_argument("--categories", default=",".join(toolcalls.CATEGORIES), help="comma-separated (default: all five)")
    p.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated (default: {','.join(ENGINES)})")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--thinking-budget", type=int, default=32)
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--out", type=Path, default=RESULTS / "agents.md")
    p.add_argument("--dump", type=Path, help="also write every case's outputs here (JSON lines)")
    p.add_argument("--resume", action="store_true",
                   help="keep the cases --dump already holds (an earlier, interrupted run of the same options) "
                        "and run the rest")
    args = p.parse_args(argv)
    args.categories = choose(p, args.categories, toolcalls.CATEGORIES, "categories")
    args.engines = choose(p, args.engines, ENGINES)

    import torch

    fresh_cache_dir()
    load_before = list(os.getloadavg())
    torch.set_num_threads(args.threads)  # before the generator: its pass costs are per thread count
    torch.set_flush_denormal(True)
    bench = Bench(args)
    bench.warm_up()
    cases = [case for c in args.categories for case in toolcalls.load(c, args.per_category)]
    records = resumed(args, cases)
    args.resumed = len(records)
    done = {r["id"] for r in records}
    started = time.perf_counter()
    for n, case in enumerate(cases, 1):
        if case["id"] in done:
            continue
        choice = "auto" if case["expected"] == "no_call" else "required"
        rec: dict[str, Any] = {"id": case["id"], "category": case["category"], "case": case}
        for engine in args.engines:
            rec[engine] = bench.run(engine, case, choice)
            if rec[engine].get("violation"):
                print(f"!!! {case['id']} {engine}: {rec[engine].get('failure') or rec[engine].get('text')!r}",
                      flush=True)
        rec["load"] = os.getloadavg()[0]
        records.append(rec)
        if args.dump:
            with args.dump.open("a", encoding="utf-8") as f:
                f.write(json.dumps({k: v for k, v in rec.items() if k != "case"}, default=str) + "\n")
        marks = []
        for engine in args.engines:
            x = rec[engine]
            m = toolcalls.judge(x.get("calls"), case, answered(x))
            short = "".join(k[0] if v else "-" for k, v in m.items()) if "parsed" in m else ("n" if m["no_call"] else "-")
            marks.append(f"{engine} {short} {x['seconds']:.1f}s" + (" FAIL" if "failure" in x else ""))
        print(f"[{n}/{len(cases)}] {case['id']}: " + " | ".join(marks), flush=True)
    order = {case["id"]: k for k, case in enumerate(cases)}
    records.sort(key=lambda r: order[r["id"]])
    write_report(args, records, time.perf_counter() - started, (load_before, list(os.getloadavg())), bench)


def resumed(args: argparse.Namespace, cases: list[dict]) -> list[dict]:
    """The records ``--dump`` holds for these cases (with ``--resume``), each with its case again."""
    if not args.resume:
        return []
    if args.dump is None or not args.dump.exists():
        raise SystemExit("--resume needs --dump naming the earlier run's file")
    by_id = {case["id"]: case for case in cases}
    records = []
    for line in args.dump.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["id"] in by_id and all(engine in rec for engine in args.engines):
            records.append({**rec, "case": by_id[rec["id"]]})
    print(f"resumed {len(records)} cases from {args.dump}", flush=True)
    return records


if __name__ == "__main__":
    main()
