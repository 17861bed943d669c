"""JSON-Schema-Test-Suite conformance report (drafts 2020-12 and 7): what compiles, what is refused, why.

Run::

    .venv/bin/python benchmarks/schema_suite.py                      # SmolLM2 tokenizer, every draft
    .venv/bin/python benchmarks/schema_suite.py --draft draft7       # one draft
    .venv/bin/python benchmarks/schema_suite.py --tokenizer gemma --out /tmp/suite-gemma.md

Uses the runner of ``tests/schema_suite.py`` (the one ``tests/test_schema_suite.py`` asserts
on): each group's schema is compiled with ``whitespace="flexible"``; it is *compiled*, *refused*
(a ``StructgenError``) or *crashed* (anything else: a bug). Each test instance of a compiled
group is walked token by token, compact and ``indent=2``; a *wrong verdict* is an instance
accepted that the suite says is invalid, or the reverse. ``format`` is asserted (see the runner's
docstring for the ``format.json`` labels this flips). A draft-7 schema without ``$schema`` is
given draft 7's (the runner's :func:`with_dialect`).

The markdown report goes to stdout and to ``benchmarks/results/schema-suite.md`` (``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from _report import git_commit, markdown_table, package_versions, publish  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's structgen, installed or not
# The runner lives in tests/ (beside maskbench.py, which it imports); tests/ goes first so that
# ``import schema_suite`` is that module and not this script of the same name.
sys.path.insert(0, str(ROOT / "tests"))
import schema_suite as ss  # noqa: E402

assert Path(ss.__file__).resolve().parent == ROOT / "tests", ss.__file__

RESULTS = Path(__file__).resolve().parent / "results"
TOP_REASONS = 3


def load_tokenizer(name: str) -> Any:
    from structgen.decoding import models

    return models.load_gemma_tokenizer() if name == "gemma" else models.load_default_tokenizer()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _reasons(counter: Counter, top: int | None = None) -> str:
    items = counter.most_common(top)
    shown = ", ".join(f"{_cell(r.removeprefix('UnsupportedFeatureError: '))} ×{n}" for r, n in items)
    rest = sum(counter.values()) - sum(n for _, n in items)
    return shown + (f", other ×{rest}" if rest > 0 else "")


def report(args: argparse.Namespace, tokenizer: Any, results: dict[str, ss.FileResult],
           wall_s: float, draft: str = "draft2020-12") -> str:
    from structgen.engine.vocab import vocabulary_for

    vocab = vocabulary_for(tokenizer)
    in_c, in_t = ss.compile_rate(results)
    out_c, out_t = ss.compile_rate(results, in_floor=False)
    sc_c, sc_t = ss.compile_rate(results, scalars_only=True)
    all_res = list(results.values())
    wrong = [(r.name, w) for r in all_res for w in r.wrong]
    crashes = [(r.name, g) for r in all_res for g in r.crashes]
    lines = [
        f"# JSON-Schema-Test-Suite ({draft}) conformance",
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; "
        f"wall time {wall_s:.1f} s (run only)",
        f"- versions: {package_versions(('transformers', 'tokenizers', 'numpy'))}; "
        f"Python {platform.python_version()}; structgen checkout {git_commit()}",
        f"- tokenizer: {args.tokenizer} ({vocab.size} tokens); grammar whitespace `flexible`; "
        "instances walked compact and `indent=2`",
        f"- data: `{ss.SUITE_ROOT / draft}` (required files + optional/format/{{{','.join(ss.FORMATS[draft])}}}"
        f" + optional/{{{','.join(ss.OPTIONAL[draft])}}})",
        "",
        "Compiled: the schema compiles. Refused: a `StructgenError` (reason: the unsupported keyword, "
        "or the error's message). Crashed: any other exception (a bug). Wrong: a test instance "
        "(compact or indented) whose verdict differs from the suite's label. `format` is asserted: "
        f"{sum(r.adjusted for r in all_res)} `format.json` tests labelled valid only as an annotation "
        "are expected invalid.",
        "",
        "## Totals",
        "",
        markdown_table(
            ["", "groups compiled / total", "rate", "instances walked", "wrong verdicts", "crashes"],
            [[label, f"{c}/{t}", f"{c / t:.1%}" if t else "–",
              str(sum(r.walks for r in rs)), str(sum(len(r.wrong) for r in rs)),
              str(sum(len(r.crashes) for r in rs))]
             for label, c, t, rs in (
                 ("in scope (compile-rate floor)", in_c, in_t, [r for r in all_res if r.file.in_floor]),
                 ("outside the floor: " + ", ".join(sorted(ss.OUTSIDE_FLOOR)), out_c, out_t,
                  [r for r in all_res if not r.file.in_floor]),
                 ("all", in_c + out_c, in_t + out_t, all_res))]),
        "",
        f"Compile-rate floor (tests/test_schema_suite.py, 85%): {sc_c}/{sc_t} "
        f"({sc_c / sc_t:.1%}) of the in-scope groups not refused for a keyword of the structures "
        f"issue ({', '.join(sorted(ss.STRUCTURE_KEYWORDS))}). Wrong verdicts include the valid "
        "A-label hostnames ('xn--...') the hostname format refuses by design (sound: "
        "structgen/frontends/json_schema/formats.py), which the test lists as known.",
        "",
        "## Per keyword file",
        "",
    ]
    rows = []
    for part, floor in (("in scope", True), ("outside the floor", False)):
        for r in all_res:
            if r.file.in_floor != floor:
                continue
            refused = sum(r.refused.values())
            rows.append([f"{r.name}" + ("" if floor else " *"), f"{r.compiled}/{r.total}", str(refused),
                         _reasons(r.refusal_reasons, TOP_REASONS) or "–", str(r.walks),
                         str(len(r.wrong)), str(len(r.crashes)), f"{r.seconds:.2f}"])
    lines += [
        markdown_table(["file", "compiled / total", "refused", f"top refusal reasons (≤{TOP_REASONS})",
                        "walks", "wrong", "crashed", "seconds"], rows),
        "",
        "\\* outside the compile-rate floor.",
        "",
        "## Refusal reasons (all files)",
        "",
    ]
    in_reasons, out_reasons = Counter(), Counter()
    for r in all_res:
        (in_reasons if r.file.in_floor else out_reasons).update(r.refusal_reasons)
    lines.append(markdown_table(
        ["reason", "groups in scope", "outside the floor"],
        [[_cell(reason), str(in_reasons[reason]), str(out_reasons[reason])]
         for reason, _ in (in_reasons + out_reasons).most_common()]))
    lines += ["", f"## Wrong verdicts ({len(wrong)})", ""]
    if wrong:
        lines.append(markdown_table(
            ["file", "group", "test", "serialisation", "expected", "data", "detail"],
            [[name, _cell(w.group), _cell(w.test), w.serialisation, "valid" if w.expected else "invalid",
              f"`{_cell(w.data)}`", _cell(w.detail[:200])] for name, w in wrong]))
    else:
        lines.append("None.")
    lines += ["", f"## Crashes ({len(crashes)})", ""]
    if crashes:
        lines.append(markdown_table(["file", "group", "exception"],
                                    [[name, _cell(g.description), _cell(g.reason)] for name, g in crashes]))
    else:
        lines.append("None.")
    slow = sorted(((g.seconds, r.name, g.description) for r in all_res for g in r.groups), reverse=True)[:5]
    lines += ["", "Slowest groups: " + "; ".join(f"{n} [{_cell(d)}] {s:.2f} s" for s, n, d in slow), ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", choices=("smollm2", "gemma"), default="smollm2")
    p.add_argument("--draft", choices=ss.DRAFTS, action="append", help="a draft to run (default: every one)")
    p.add_argument("--out", type=Path, default=RESULTS / "schema-suite.md", help="report path")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tokenizer = load_tokenizer(args.tokenizer)
    from structgen.engine.vocab import vocabulary_for

    vocabulary_for(tokenizer)  # built before the clock starts
    sections = []
    for draft in args.draft or ss.DRAFTS:
        start = time.perf_counter()
        results = ss.run_suite(tokenizer, draft=draft)
        wall_s = time.perf_counter() - start
        sections.append(report(args, tokenizer, results, wall_s, draft))
    publish("\n".join(sections), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
