"""Tool calls on the default model over BFCL: structgen constrained against the same model unconstrained.

Cases: the first ``--per-category`` of each BFCL v4 category file in
``../shared/data/toolcalls`` (its README, section 1): ``simple_python``, ``multiple``,
``parallel``, ``parallel_multiple`` with ``tool_choice="required"`` (parallel calls allowed) and
``irrelevance`` with ``tool_choice="auto"`` (the right answer is no call). For each,
:meth:`structgen.Generator.tool_calls` (greedy, drafts on) and, as the baseline in the same run,
the same model on the same prompt text (:func:`structgen.tasks.tool_calls.tool_prompt`), greedy
``model.generate`` up to end-of-sequence, parsed leniently: the JSON after ``<tool_call>`` (else
the first ``[`` or ``{`` of the answer), a list of ``{"name", "arguments"}`` objects or one.

Reported per category and engine: the share of answers whose calls parse, whose every call
validates (a known tool name, arguments valid under ``Draft202012Validator``), function-name
accuracy (the multiset of called names is the ground truth's), argument exact match (below), for
irrelevance the share with no call; forward passes per new token (prefill excluded; the
baseline makes one per token by definition), structgen's draft acceptance, seconds per case.

Argument exact match, BFCL's AST check simplified: each ground-truth call is matched to a
distinct produced call of the same name (order-insensitive; the numbers of calls must be equal)
whose every argument is a known parameter with a value among the acceptable ones, and which has
every parameter whose acceptable list lacks ``""``. Values: numbers numerically (5 == 5.0, a bool
is no number), strings stripped of surrounding white space, case-sensitive; lists element by
element; a ground-truth dict of acceptable lists (BFCL's nested form) by the same rule, any other
value by equality.

structgen's answers are checked here too: every returned call must parse and validate; a
violation is printed and listed in the report.

Usage::

    python benchmarks/toolcalls.py                    # writes benchmarks/results/toolcalls.md
    python benchmarks/toolcalls.py --per-category 2 --threads 1 --out /tmp/toolcalls.md
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks")]

from _report import choose, cpu_model, git_commit, markdown_table, package_versions, publish  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DATA = Path(os.environ.get("STRUCTGEN_DATA_DIR", ROOT.parent / "shared" / "data")) / "toolcalls"
CALL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
CATEGORIES = CALL_CATEGORIES + ("irrelevance",)


def load(category: str, n: int) -> list[dict]:
    with (DATA / f"bfcl_{category}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


# ------------------------------------------------------------------ the baseline's answer

def lenient_calls(text: str) -> list[tuple[str, dict]] | None:
    """[(name, arguments)] from an unconstrained answer, or None when no call list is there."""
    at = text.find("<tool_call>")
    body = text[at + len("<tool_call>"):] if at >= 0 else text
    start = re.search(r"[\[{]", body)
    if start is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(body, start.start())
    except ValueError:
        return None
    calls = []
    for obj in value if isinstance(value, list) else [value]:
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or "arguments" not in obj:
            return None
        args = obj["arguments"]
        if isinstance(args, str):  # OpenAI-style arguments as JSON text: still a call
            try:
                args = json.loads(args)
            except ValueError:
                return None
        if not isinstance(args, dict):
            return None
        calls.append((obj["name"], args))
    return calls


def unconstrained(gen, prompt: str, max_new_tokens: int) -> tuple[str, int]:
    """The model's own greedy answer to the prompt text, up to end-of-sequence; (text, new tokens)."""
    import torch

    ids = gen.tokenizer.encode(prompt, add_special_tokens=False)
    with torch.no_grad():
        out = gen.model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=gen.tokenizer.eos_token_id)
    new = out[0, len(ids):].tolist()
    eos = set(gen.vocabulary.eos_ids)
    count = next((i for i, t in enumerate(new) if t in eos), len(new))
    return gen.tokenizer.decode(new[:count], skip_special_tokens=True), count


# ------------------------------------------------------------------------------ judging

def all_valid(calls: list[tuple[str, dict]], tools: list[dict]) -> bool:
    from jsonschema import Draft202012Validator

    params = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}
    return bool(calls) and all(name in params and Draft202012Validator(params[name]).is_valid(args)
                               for name, args in calls)


def same_value(got, want) -> bool:
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(got, (int, float)) and not isinstance(got, bool) and got == want
    if isinstance(want, str):
        return isinstance(got, str) and got.strip() == want.strip()
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(same_value, got, want))
    if isinstance(want, dict) and want and all(isinstance(v, list) for v in want.values()):
        return isinstance(got, dict) and args_match(got, want)  # BFCL's nested form: acceptable lists
    return got == want


def args_match(args: dict, acceptable: dict[str, list]) -> bool:
    return (all(k in acceptable and any(same_value(v, a) for a in acceptable[k]) for k, v in args.items())
            and all(k in args for k, values in acceptable.items() if "" not in values))


def exact_match(calls: list[tuple[str, dict]], truth: list[dict]) -> bool:
    """Every ground-truth call matched to a distinct produced call (see the module docstring)."""
    wanted = [next(iter(c.items())) for c in truth]
    if len(calls) != len(wanted):
        return False

    def assign(i: int, free: frozenset) -> bool:  # backtracking: a few calls at most
        if i == len(wanted):
            return True
        name, acceptable = wanted[i]
        return any(calls[j][0] == name and args_match(calls[j][1], acceptable) and assign(i + 1, free - {j})
                   for j in free)

    return assign(0, frozenset(range(len(calls))))


def judge(calls: list[tuple[str, dict]] | None, case: dict, complete: bool = True) -> dict:
    """The marks of one answer; ``complete=False`` (the budget ran out first) is no right answer
    to an irrelevance case, even when the text so far holds no call."""
    if case["expected"] == "no_call":
        return {"no_call": complete and not calls}
    calls = calls or []
    names = collections.Counter(next(iter(c)) for c in case["ground_truth"])
    return {"parsed": bool(calls), "valid": all_valid(calls, case["tools"]),
            "names": bool(calls) and collections.Counter(n for n, _ in calls) == names,
            "exact": bool(calls) and exact_match(calls, case["ground_truth"])}


# ---------------------------------------------------------------------------- one case

def run_structgen(gen, case: dict, choice: str, max_new_tokens: int) -> dict:
    import structgen
    from structgen.frontends.tool_calls import FORMATS, parse_calls

    t = time.perf_counter()
    try:
        r = gen.tool_calls(case["tools"], case["messages"], tool_choice=choice, parallel_tool_calls=True,
                           max_new_tokens=max_new_tokens)
    except structgen.IncompleteGenerationError as err:
        return {"seconds": time.perf_counter() - t, "failure": f"no answer: {err}"[:200]}
    except structgen.SchemaError as err:  # UnsupportedFeatureError, ToolSpecError: declined up front
        return {"seconds": time.perf_counter() - t, "failure": f"unsupported: {type(err).__name__}: {err}"[:200]}
    except structgen.StructgenError as err:  # e.g. an internal DecodingError: a bug, shown loudly
        return {"seconds": time.perf_counter() - t, "failure": f"error: {type(err).__name__}: {err}"[:200],
                "violation": True}
    seconds = time.perf_counter() - t
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
             for c in r.message.get("tool_calls", [])]
    # the claim under test: what structgen returns parses in its format and validates
    try:
        violation = (parse_calls(FORMATS[r.format], r.text)[1] != calls
                     or (bool(calls) and not all_valid(calls, case["tools"])))
    except (ValueError, KeyError):
        violation = True
    return {"seconds": seconds, "calls": calls, "text": r.text, "violation": violation,
            "passes": r.stats.forward_passes - 1, "tokens": r.stats.new_tokens,
            "drafted": r.stats.drafted_tokens, "accepted": r.stats.accepted_tokens}


def run_baseline(gen, case: dict, max_new_tokens: int) -> dict:
    from structgen.frontends.tool_calls import read_tools
    from structgen.tasks.tool_calls import tool_prompt

    prompt = tool_prompt(gen.tokenizer, read_tools(case["tools"]), case["messages"])[0]
    t = time.perf_counter()
    text, count = unconstrained(gen, prompt, max_new_tokens)
    return {"seconds": time.perf_counter() - t, "calls": lenient_calls(text), "text": text, "tokens": count,
            "answered": count < max_new_tokens}  # it ended before the budget did


# ----------------------------------------------------------------------------- report

def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def answered(run: dict) -> bool:
    """structgen: no exception; the baseline: it reached end-of-sequence within the budget."""
    return "failure" not in run and run.get("answered", True)


def summary_row(label: str, engine: str, recs: list[dict]) -> list[str]:
    runs = [r[engine] for r in recs]
    answers = [x for x in runs if "calls" in x]
    marks = [judge(x.get("calls"), r["case"], answered(x)) for x, r in zip(runs, recs)]
    share = (lambda key: pct(sum(m[key] for m in marks), len(marks))) if "parsed" in marks[0] else (lambda key: "n/a")
    tokens = sum(x["tokens"] for x in answers)
    if engine == "structgen":
        passes = f"{sum(x['passes'] for x in answers) / tokens:.2f}" if tokens else "-"
        drafted = sum(x["drafted"] for x in answers)
        acceptance = f"{sum(x['accepted'] for x in answers) / drafted:.0%}" if drafted else "-"
    else:
        passes, acceptance = "1 (by definition)", "n/a"
    no_call = pct(sum(m["no_call"] for m in marks), len(marks)) if "no_call" in marks[0] else "n/a"
    seconds = sorted(x["seconds"] for x in runs)
    p90 = seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]
    failed = sum(not answered(x) for x in runs)
    return [label, engine, str(len(recs)), share("parsed"), share("valid"), share("names"), share("exact"),
            no_call, str(failed), f"{tokens / max(1, len(answers)):.0f}",
            passes, acceptance, f"{statistics.median(seconds):.1f}", f"{p90:.1f}"]


def write_report(args: argparse.Namespace, records: list[dict], seconds: float, threads: int) -> None:
    rows = []
    groups = [(c, [r for r in records if r["category"] == c]) for c in args.categories]
    pooled = [r for r in records if r["category"] in CALL_CATEGORIES]
    if len({r["category"] for r in pooled}) > 1:
        groups.append(("all calls", pooled))
    for label, group in groups:
        if group:
            rows += [summary_row(label, engine, group) for engine in ("structgen", "unconstrained")]
    header = ["category", "engine", "n", "calls parse", "all calls valid", "names right", "arguments exact",
              "no call", "no answer", "new tokens (mean)", "passes per token", "draft acceptance",
              "s / case p50", "s / case p90"]
    failures = [r for r in records if "failure" in r["structgen"]]
    violations = [r for r in records if r["structgen"].get("violation")]
    lines = [
        "# Tool calls on the default model (BFCL v4)",
        "",
        f"Command: `python benchmarks/toolcalls.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        f"structgen {git_commit()}; {package_versions(['torch', 'transformers', 'jsonschema'])}; {cpu_model()}, "
        f"{threads} torch thread(s); SmolLM2-135M-Instruct, greedy, `max_new_tokens={args.max_new_tokens}`; "
        f"first {args.per_category} cases per category, {len(records)} in {seconds / 60:.1f} min; "
        f"load average {os.getloadavg()[0]:.1f} at the end; {datetime.datetime.now().isoformat(timespec='seconds')}.",
        "",
        markdown_table(header, rows),
        "",
        "- *structgen*: `Generator.tool_calls` (drafts on), `tool_choice=\"required\"` for the call categories, "
        "`\"auto\"` for irrelevance. *unconstrained*: the same prompt text, greedy `model.generate`, parsed "
        "leniently (the JSON after `<tool_call>`, else from the first `[`/`{`; a list of "
        "`{\"name\", \"arguments\"}` or one).",
        "- *calls parse*: at least one call was read. *all calls valid*: and each names a tool and its "
        "arguments validate (Draft 2020-12). *names right*: the multiset of called names is the ground truth's.",
        "- *arguments exact* (BFCL's AST check, simplified): each ground-truth call matched to a distinct "
        "produced call of the same name, equal numbers of calls, every produced argument a known parameter with "
        "an acceptable value (numbers numerically, strings stripped and case-sensitive, lists elementwise, nested "
        "dicts by the same rule), every parameter whose acceptable list lacks `\"\"` present.",
        "- *no call* (irrelevance): an answer that ended within the budget without a call (structgen: text only; "
        "the baseline: no parseable call before end-of-sequence).",
        "- *no answer*: structgen raised (the budget ran out, or the tools were refused as unsupported); the "
        "baseline did not reach end-of-sequence within the budget (its text is still parsed for calls).",
        "- Shares are of all n cases (a structgen case with no answer counts as a miss). "
        "*new tokens* and *passes per token* (prefill excluded) cover answered cases; structgen's seconds "
        "include compiling the tools' grammar.",
        "",
        "## Checks",
        "",
        f"structgen answers that fail to parse or validate: **{len(violations)}**"
        + (" (must be 0)" if violations else " (every returned call parsed and validated)"),
    ]
    lines += [f"- `{r['id']}`: {r['structgen'].get('failure') or repr(r['structgen'].get('text'))[:200]}"
              for r in violations]
    lines += ["", f"## structgen failures ({len(failures)}; first 10)", ""]
    lines += [f"- `{r['id']}`: {r['structgen']['failure']}".replace("\n", " ") for r in failures[:10]] or ["- none"]
    lines.append("")
    publish("\n".join(lines), args.out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-category", type=int, default=25, help="first N cases of each category (default 25)")
    p.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated (default: all five)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--out", type=Path, default=RESULTS / "toolcalls.md")
    args = p.parse_args(argv)
    args.categories = choose(p, args.categories, CATEGORIES, "categories")

    import torch

    import structgen

    torch.set_num_threads(args.threads)
    gen = structgen.Generator()
    cases = [case for c in args.categories for case in load(c, args.per_category)]
    records = []
    started = time.perf_counter()
    for n, case in enumerate(cases, 1):
        choice = "auto" if case["expected"] == "no_call" else "required"
        rec = {"id": case["id"], "category": case["category"], "case": case,
               "structgen": run_structgen(gen, case, choice, args.max_new_tokens),
               "unconstrained": run_baseline(gen, case, args.max_new_tokens)}
        records.append(rec)
        s, b = rec["structgen"], rec["unconstrained"]
        if s.get("violation"):
            print(f"!!! {case['id']}: structgen returned an answer that does not parse or validate: "
                  f"{s.get('failure') or s.get('text')!r}", flush=True)
        print(f"[{n}/{len(cases)}] {case['id']}: structgen {judge(s.get('calls'), case, answered(s))} "
              f"{s.get('failure', '')[:60]} {s['seconds']:.1f}s | unconstrained "
              f"{judge(b['calls'], case, answered(b))} "
              f"{b['seconds']:.1f}s", flush=True)
    write_report(args, records, time.perf_counter() - started, args.threads)


if __name__ == "__main__":
    main()
