"""Time and memory of structgen's per-vocabulary tables, built cold and then from the cache.

Run::

    .venv/bin/python benchmarks/vocab_tables.py                     # SmolLM2 (49k) and Gemma 3 (262k)
    .venv/bin/python benchmarks/vocab_tables.py --tokenizers gemma

Each tokenizer is measured in two fresh subprocesses sharing one new ``STRUCTGEN_CACHE_DIR``:
**cold** (an empty cache) and then **cached** (what the first one left on disk). In each, after
the tokenizer is loaded and structgen's modules imported (neither measured), three steps are timed, each with the kernel's peak-RSS
mark reset before it (``/proc/self/clear_refs``), so **peak MiB** is how far that step raised
the process above its RSS when the step began, and **kept MiB** what it still holds after:

* **vocabulary** -- ``Vocabulary.from_tokenizer``: every token's bytes, the decode check;
* **index** -- the sorted token index and its tables (common-prefix lengths, subtree ends,
  the flat tables the compiled walk reads, token ids per key);
* **shared facts** -- ``prepare_vocabulary``: the token facts every JSON grammar shares (string
  bodies, numbers, whitespace in the three whitespace modes), computed cold and saved to disk,
  read back when cached.

One thread (engine.py's environment). The report goes to stdout and to
``benchmarks/results/vocab-tables.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import engine  # noqa: F401 -- first: sets the one-thread environment the children inherit
from _report import cpu_model, git_commit, markdown_table, package_versions, publish

STEPS = ("vocabulary", "index", "shared facts")


def child(name: str) -> None:
    import numpy as np

    import structgen
    import structgen.frontends.json_schema.translate  # noqa: F401 -- imports (jsonschema's) are not timed
    from structgen.engine.vocab import Vocabulary

    tokenizer = engine.load_tokenizer(name)
    out: dict[str, Any] = {}

    def step(label: str, work) -> Any:
        before = engine.rss_kib()
        engine.reset_peak_rss()
        t0 = time.perf_counter()
        got = work()
        out[label] = {"s": time.perf_counter() - t0, "peak_mib": (engine.peak_rss_kib() - before) / 1024,
                      "kept_mib": (engine.rss_kib() - before) / 1024}
        return got

    vocab = step("vocabulary", lambda: Vocabulary.from_tokenizer(tokenizer))

    def index() -> None:
        ix = vocab.index
        ix.subtree_end(0, 1)
        ix.tables()
        ix.token_ids(np.arange(1))  # builds the table of token ids per key
        vocab.eos_mask

    step("index", index)
    step("shared facts", lambda: structgen.prepare_vocabulary(vocab))
    out["tokens"] = vocab.size
    out["rss_mib"] = engine.rss_kib() / 1024
    print(json.dumps(out), flush=True)


def run(name: str, cache: str) -> dict[str, Any]:
    env = dict(os.environ, STRUCTGEN_CACHE_DIR=cache)
    res = subprocess.run([sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"{name}: child failed\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizers", default="smollm2,gemma", help="comma-separated: smollm2, gemma")
    p.add_argument("--out", type=Path, default=engine.RESULTS / "vocab-tables.md")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child)
        return
    rows = []
    for name in args.tokenizers.split(","):
        with tempfile.TemporaryDirectory(prefix="structgen-vocab-") as cache:
            for phase in ("cold", "cached"):
                r = run(name, cache)
                print(f"[{name}] {phase}: {json.dumps(r)}", file=sys.stderr)
                for label in STEPS:
                    s = r[label]
                    rows.append([name, f"{r['tokens']:,}", phase, label, f"{1000 * s['s']:.0f}",
                                 f"{s['peak_mib']:.1f}", f"{s['kept_mib']:.1f}"])
                rows.append([name, f"{r['tokens']:,}", phase, "**total**",
                             f"**{1000 * sum(r[k]['s'] for k in STEPS):.0f}**",
                             f"**{max(r[k]['peak_mib'] for k in STEPS):.1f}** (largest step)",
                             f"**{sum(r[k]['kept_mib'] for k in STEPS):.1f}**"])
    lines = [
        "# Per-vocabulary tables: time and memory, cold and cached",
        "",
        f"- command: `python benchmarks/vocab_tables.py --tokenizers {args.tokenizers}`",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}, one thread; Python {platform.python_version()}",
        f"- versions: {package_versions(['structgen', 'transformers', 'numpy'])}; structgen checkout {git_commit()}",
        "",
        __doc__.split("\n\n", 2)[2].split("One thread")[0].strip(),
        "",
        markdown_table(["tokenizer", "tokens", "run", "step", "ms", "peak MiB", "kept MiB"], rows),
        "",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
