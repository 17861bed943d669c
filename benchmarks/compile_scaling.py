"""How compile time and memory grow with the size of one construct (issue 60).

Each case is a serving constraint (``read_constraint`` then ``compile_constraint`` over the
256-byte vocabulary: what vLLM's ``validate_params`` runs on the API server for every request)
with one construct grown to ``n`` characters: a literal, an alternation, a sequence, a character
class, nested groups, an enum, a ``pattern``. Each (case, n) runs in a fresh process under a time
limit and a memory cap; a case is not tried at larger sizes once it ran past the limit.

Every compile stage should be linear in its input or refused by the compile budget: the table's
``x prev`` column is the time ratio to the size before it (a 4x step: ~4 is linear, ~16 is
quadratic).

Usage::

    .venv/bin/python benchmarks/compile_scaling.py                     # every case, 10k .. 2.56M
    .venv/bin/python benchmarks/compile_scaling.py --cases regex-literal --sizes 10000 40000
    .venv/bin/python benchmarks/compile_scaling.py --out benchmarks/results/compile-scaling.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

SIZES = (10_000, 40_000, 160_000, 640_000, 2_560_000, 3_900_000)


def _words(n: int, width: int = 6) -> list[str]:
    """Distinct words of ``width`` characters, about ``n`` characters in all."""
    return [f"w{k:0{width - 1}d}" for k in range(max(1, n // (width + 1)))]


def _pattern(text: str) -> dict:
    return {"json_schema": {"type": "string", "pattern": "^" + text + "$"}}


#: name -> (what grows, spec of size n)
CASES = {
    "pattern-literal": ("a pattern of n literal characters", lambda n: _pattern("a" * n)),
    "pattern-alternation": ("a pattern alternating n/7 words", lambda n: _pattern("(" + "|".join(_words(n)) + ")")),
    "pattern-sequence": ("a pattern of n/4 classes in a row", lambda n: _pattern("[ab]" * (n // 4))),
    "pattern-class": ("a pattern's class of n characters", lambda n: _pattern("[" + "".join(
        chr(0x4E00 + k % 20_000) for k in range(n)) + "]")),
    "pattern-groups": ("a pattern of n/4 groups in a row", lambda n: _pattern("(?:a)" * (n // 5))),
    "pattern-nested": ("a pattern nesting groups n/4 deep", lambda n: _pattern("(?:" * (n // 4) + "a" + ")" * (n // 4))),
    "schema-const": ("a const string of n characters", lambda n: {"json_schema": {"const": "a" * n}}),
    "schema-enum": ("an enum of n/7 strings", lambda n: {"json_schema": {"enum": _words(n)}}),
    "schema-properties": ("an object of n/9 properties", lambda n: {"json_schema": {
        "type": "object", "properties": {w: {"type": "integer"} for w in _words(n, 8)}}}),
    "regex-literal": ("a regex of n literal characters", lambda n: {"regex": "a" * n}),
    "regex-alternation": ("a regex alternating n/7 words", lambda n: {"regex": "|".join(_words(n))}),
    "regex-sequence": ("a regex of n/4 classes in a row", lambda n: {"regex": "[ab]" * (n // 4)}),
    "regex-class": ("a regex class of n characters", lambda n: {"regex": "[" + "".join(
        chr(0x4E00 + k % 20_000) for k in range(n)) + "]"}),
    "regex-nested": ("a regex nesting groups n/4 deep", lambda n: {"regex": "(?:" * (n // 4) + "a" + ")" * (n // 4)}),
    "grammar-literal": ("a grammar literal of n characters", lambda n: {"grammar": 'start: "' + "a" * n + '"'}),
    "grammar-alternation": ("a rule alternating n/9 literals", lambda n: {"grammar": "start: " + " | ".join(
        f'"{w}"' for w in _words(n))}),
    "grammar-sequence": ("a rule of n/4 items in a row", lambda n: {"grammar": "start: " + ' "a"' * (n // 4)}),
    "grammar-rules": ("n/20 rules in a chain", lambda n: {"grammar": "start: r0\n" + "".join(
        f'r{k}: "x" r{k + 1}\n' for k in range(n // 20)) + f'r{n // 20}: "y"\n'}),
}


def _child(case: str, n: int) -> None:
    """Compile one case in this process; print one JSON line."""
    from structgen.errors import StructgenError
    from structgen.integrations.constraints import BYTES, compile_constraint, read_constraint

    # a server has its imports done and its per-vocabulary set-up made: a small case first
    try:
        compile_constraint(read_constraint(json.dumps(CASES[case][1](40))), BYTES)
    except StructgenError:
        pass
    spec = json.dumps(CASES[case][1](n), ensure_ascii=False)  # the text a request carries
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        compile_constraint(read_constraint(spec), BYTES)  # masks are lazy: this is the whole compile
        outcome = "compiled"
    except StructgenError as err:
        outcome = f"{type(err).__name__}: {str(err)[:90]}"
    except Exception as err:  # noqa: BLE001 (reported: a builtin error is a bug)
        outcome = f"BUILTIN {type(err).__name__}: {str(err)[:80]}"
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "rss_mib": (peak - base) / 1024, "outcome": outcome,
                      "chars": len(spec)}))


def _run(case: str, n: int, limit: float, memory: int) -> dict:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    try:  # a new cache folder each time: nothing compiled by an earlier row is read back
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run([sys.executable, __file__, "--child", case, str(n)], capture_output=True, text=True,
                                  timeout=limit, preexec_fn=cap, env={**os.environ, "STRUCTGEN_CACHE_DIR": cache})
    except subprocess.TimeoutExpired:
        return {"seconds": limit, "rss_mib": None, "outcome": f"past {limit:.0f} s", "timeout": True}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"seconds": None, "rss_mib": None, "outcome": f"crashed (rc {done.returncode}): "
                f"{done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--limit", type=float, default=30.0, help="seconds per process (default 30)")
    parser.add_argument("--memory-gib", type=float, default=4.0, help="address space per compile (default 4)")
    parser.add_argument("--out", help="also write the table (markdown) here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"# Compile scaling at {commit}", "",
             f"`{' '.join(['python'] + sys.argv)}`; one fresh process and cache folder per row, {args.limit:.0f} s and "
             f"{args.memory_gib:g} GiB per compile, 256-byte vocabulary, the serving path "
             "(`read_constraint` + `compile_constraint` on the request's JSON text).", "",
             "| case | n | request chars | seconds | x prev | peak RSS rise MiB | outcome |",
             "|---|---:|---:|---:|---:|---:|---|"]
    print("\n".join(lines), flush=True)
    for case in args.cases:
        prev = None
        for n in args.sizes:
            got = _run(case, n, args.limit, int(args.memory_gib * (1 << 30)))
            secs = got["seconds"]
            ratio = f"{secs / prev:.1f}" if secs and prev and prev > 0.05 else ""
            shown_secs = "" if secs is None else f"{secs:.2f}"
            shown_rss = "" if got["rss_mib"] is None else f"{got['rss_mib']:.0f}"
            row = (f"| {case} | {n:,} | {got.get('chars', 0):,} | {shown_secs} | {ratio} | {shown_rss} | "
                   f"{got['outcome']} |")
            print(row, flush=True)
            lines.append(row)
            if got.get("timeout") or secs is None:
                break
            prev = secs
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
