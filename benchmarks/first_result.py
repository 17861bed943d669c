"""Time to the first result: the README's first example in a fresh process, on a clean and on a
warm cache.

Each run is a new Python process with ``STRUCTGEN_CACHE_DIR`` pointing at one temporary folder
(empty for the first run, so the GGUF is converted; filled for the second). The child times the
phases by wrapping structgen's own functions (outermost call only):

- **import**: ``import structgen``;
- **model load**: ``load_default_model``, all of it: importing torch and transformers' model code,
  the weights (GGUF conversion on a clean cache, the saved copy on a warm one) and the tokenizer;
  **of which tokenizer**: ``load_tokenizer_from_gguf``;
- **vocabulary**: ``Vocabulary.from_tokenizer`` (token bytes, the vocabulary's shared facts);
- **compile**: ``Compiler.json_schema``; **decode**: ``ModelContext.decode``/``decode_batch``;
- **pass costs**: ``PassCosts.for_model``/``measure``/``measure_surface`` (a timed measurement
  of the pass-cost curve would show here);
- **first result**: from the child's first line to the example's value printed; **peak RSS**;
- then ``structgen.Generator()`` (no arguments) in the same process, asked the same thing with
  ``gen.json``: its time and how much the resident memory grew (a second copy of the default model
  would show here).

"model load + decode" is the floor the goal compares against: a warm-cache first result within
2× of it. The parent counts the lines the child writes: stdout beyond the example's own
output, and stderr (progress bars, warnings, log lines).

Usage::

    python benchmarks/first_result.py --label before      # writes benchmarks/results/first_result.md
    python benchmarks/first_result.py --label after --threads 2

Each ``--label`` is a section of the report; running one label again replaces that section only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))  # this checkout's structgen, not an installed one

from _report import git_commit, markdown_table, package_versions  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "first_result.md"
PHASES = ["import", "model", "tokenizer", "vocabulary", "compile", "decode", "pass_costs"]


def readme_example() -> list[tuple[str, str]]:
    """(source, expected output) of each statement of the README's first Python block."""
    import doctest

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    return [(ex.source, ex.want) for ex in doctest.DocTestParser().get_examples(block)]


# --------------------------------------------------------------------------------------------
# The child: one fresh process, the example, the phases timed
# --------------------------------------------------------------------------------------------


def child(out: Path) -> None:
    start = time.perf_counter()
    spent = dict.fromkeys(PHASES, 0.0)
    t0 = time.perf_counter()
    import structgen

    spent["import"] = time.perf_counter() - t0

    from structgen.decoding import costs, models
    from structgen.engine.compiler import Compiler
    from structgen.engine.vocab import Vocabulary
    from structgen.tasks.context import ModelContext

    active: set[str] = set()

    def timed(phase, fn):
        def wrapper(*args, **kwargs):
            if phase in active:  # nested call of the same phase: counted once, outermost
                return fn(*args, **kwargs)
            active.add(phase)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - t
                active.discard(phase)
        return wrapper

    models.load_default_model = timed("model", models.load_default_model)
    models.load_tokenizer_from_gguf = timed("tokenizer", models.load_tokenizer_from_gguf)
    Vocabulary.from_tokenizer = classmethod(timed("vocabulary", Vocabulary.from_tokenizer.__func__))
    Compiler.json_schema = timed("compile", Compiler.json_schema)
    ModelContext.decode = timed("decode", ModelContext.decode)
    ModelContext.decode_batch = timed("decode", ModelContext.decode_batch)
    for name in ("for_model", "measure_surface"):
        setattr(costs.PassCosts, name, classmethod(timed("pass_costs", getattr(costs.PassCosts, name).__func__)))
    costs.PassCosts.measure = staticmethod(timed("pass_costs", costs.PassCosts.measure))

    namespace: dict = {"structgen": structgen}
    for source, _ in readme_example():
        if source.strip() == "import structgen":
            continue
        # "single" mode prints an expression's value as the interpreter (and doctest) does
        exec(compile(source, "<README.md>", "single"), namespace)
    first = time.perf_counter() - start
    sys.stdout.flush()

    import resource

    import torch

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss = _rss_mb()
    at_first = dict(spent)  # the phases to the first result, not those of Generator() below
    t = time.perf_counter()
    # the README's next step: a Generator() with no arguments, asked the same thing
    namespace["gen"] = structgen.Generator()
    call = readme_example()[-1][0].replace("structgen.generate_json(", "gen.json(")
    eval(compile(call, "<README.md>", "eval"), namespace)
    generator = time.perf_counter() - t
    out.write_text(json.dumps({
        **at_first, "first_result": first, "structgen": structgen.__file__, "threads": torch.get_num_threads(), "peak_rss_mb": peak,
        "rss_mb": rss, "generator_s": generator, "generator_rss_mb": _rss_mb() - rss,
    }))


def _rss_mb() -> float:
    """Resident memory now (Linux), in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# --------------------------------------------------------------------------------------------
# The parent: two runs on one cache folder, the report
# --------------------------------------------------------------------------------------------


def run_once(cache: Path, threads: int | None) -> dict:
    env = dict(os.environ, STRUCTGEN_CACHE_DIR=str(cache))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.setdefault(name, "1")  # nothing may be downloaded
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory() as scratch:
        timings = Path(scratch) / "timings.json"
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--child", str(timings)], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"the child failed with exit status {proc.returncode}")
        result = json.loads(timings.read_text())
    expected = "".join(want for _, want in readme_example())
    stdout_lines = proc.stdout.splitlines()
    # lines as a terminal shows them: a progress bar redrawn with "\r" is one line
    stderr_lines = [line for line in proc.stderr.split("\n") if line.strip()]
    result.update(
        process_wall=wall,
        output_as_readme=proc.stdout == expected,
        extra_stdout_lines=max(0, len(stdout_lines) - len(expected.splitlines())),
        stderr_lines=len(stderr_lines),
        stderr_sample=_sample(proc.stderr),
    )
    return result


def _sample(text: str, limit: int = 12) -> list[str]:
    """The distinct lines of ``text``, a progress bar's ``\\r`` updates folded to their last."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        line = line.split("\r")[-1].strip()
        line = re.sub(r"\d+(\.\d+)?", "N", line)  # bars and timings differ only in numbers
        line = re.sub(r"\|[^|]*\|", "|...|", line)
        if line:
            seen.setdefault(line[:300])
    lines = list(seen)
    return lines[:limit] + ([f"... {len(lines) - limit} more distinct lines"] if len(lines) > limit else [])


def report_section(label: str, runs: dict[str, dict], command: str) -> str:
    header = ["cache", "import", "model load", "of which tokenizer", "vocabulary", "compile", "decode",
              "pass costs", "first result", "process wall", "model load + decode", "first / (load+decode)",
              "peak RSS", "then Generator().json", "stdout extra lines", "stderr lines", "output as README"]
    rows = []
    for name, r in runs.items():
        floor = r["model"] + r["decode"]
        rows.append([name, *(f"{r[p]:.2f} s" for p in PHASES), f"**{r['first_result']:.2f} s**",
                     f"{r['process_wall']:.2f} s", f"{floor:.2f} s", f"**{r['first_result'] / floor:.2f}×**",
                     f"{r['peak_rss_mb']:.0f} MB", f"{r['generator_s']:.2f} s, RSS +{r['generator_rss_mb']:.0f} MB",
                     str(r["extra_stdout_lines"]), str(r["stderr_lines"]), "yes" if r["output_as_readme"] else "no"])
    lines = [f"## {label}", "", f"- command: `{command}`",
             f"- structgen checkout {git_commit()} ({next(iter(runs.values()))['structgen']}); torch threads {next(iter(runs.values()))['threads']}; "
             f"nproc {os.cpu_count()}; load average before {os.getloadavg()[0]:.2f}",
             f"- versions: {package_versions(['torch', 'transformers', 'huggingface_hub', 'tokenizers'])}", "",
             markdown_table(header, rows), ""]
    for name, r in list(runs.items())[:2]:  # later warm runs print the same
        lines += [f"<details><summary>stderr, {name} cache ({r['stderr_lines']} lines; distinct, numbers "
                  "as N)</summary>", "", "```", *(r["stderr_sample"] or ["(nothing)"]), "```", "", "</details>", ""]
    return "\n".join(lines)


def publish(label: str, section: str, out: Path) -> None:
    """Write ``section`` into ``out``, replacing the section of the same label if there is one."""
    intro = ("# First result: the README's first example in a fresh process\n\n"
             "Produced by `benchmarks/first_result.py` (see its docstring for what each column "
             "times). Seconds; \"first result\" is the wall time inside the child from its first "
             "line to the example's printed value, \"process wall\" adds interpreter start and exit.\n")
    sections: dict[str, str] = {}
    if out.is_file():
        for part in out.read_text(encoding="utf-8").split("\n## ")[1:]:
            sections[part.split("\n", 1)[0].strip()] = "## " + part.strip() + "\n"
    sections[label] = section
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(intro + "\n" + "\n".join(sections.values()), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--label", default="latest", help="report section to write (e.g. before, after)")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the runs (default: unset)")
    parser.add_argument("--warm-runs", type=int, default=3, help="runs on the warm cache (the machine's load varies)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    command = shlex.join(["python", "benchmarks/first_result.py", *sys.argv[1:]])
    runs = {}
    with tempfile.TemporaryDirectory(prefix="structgen-first-") as cache:
        for name in ["clean"] + [f"warm {i + 1}" for i in range(args.warm_runs)]:
            runs[name] = run_once(Path(cache), args.threads)
            print(f"{name}: first result {runs[name]['first_result']:.2f} s", file=sys.stderr)
    section = report_section(args.label, runs, command)
    print(section)
    publish(args.label, section, args.out)


if __name__ == "__main__":
    main()
