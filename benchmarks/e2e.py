"""End-to-end generation speed: structgen (speculative and step by step) against plain
``model.generate`` and the peers' Hugging Face logits processors, same model, prompts and schemas.

Run (SmolLM2-135M-Instruct on CPU, 2 threads, 24 MaskBench extraction prompts)::

    .venv/bin/python benchmarks/e2e.py                       # all configurations, --n 24 --reps 1
    .venv/bin/python benchmarks/e2e.py --n 3 --configs xgrammar-hf,llguidance-hf,plain-generate

Configurations, each run on every pair, interleaved (for each repetition, for each pair, every
configuration in turn), greedy, with the same ``torch.set_num_threads`` and flushed denormals:

* ``structgen-spec`` -- ``Generator.json(..., speculate=True)``: forced text drafted and checked
  in one forward pass.
* ``structgen-step`` -- ``speculate=False``: one forward pass per token.
* ``xgrammar-hf`` -- ``model.generate`` with ``xgrammar.contrib.hf.LogitsProcessor``.
* ``llguidance-hf`` -- ``model.generate`` with :class:`LLGuidanceLogitsProcessor` below:
  llguidance ships no transformers logits processor (``llguidance.hf`` only builds the
  tokenizer, ``llguidance.torch`` only fills and applies bitmasks), so this one consumes the last
  token, fills the bitmask with ``llguidance.torch.fill_next_token_bitmask`` and masks the logits
  with plain torch ops.
* ``plain-generate`` -- ``model.generate`` unconstrained, with ``min_new_tokens = max_new_tokens``
  = the number of tokens ``structgen-step`` produced for the pair: the model time of exactly that
  many decode steps, no grammar at all.

Every configuration gets the same prompt token ids: ``Generator.prompt_ids(schema, prompt)``
(chat template, schema shown in the message). The grammars match ``Generator.json``'s defaults:
compact whitespace (``--whitespace``) and closed objects (``--strict``: structgen ``strict=True``,
xgrammar ``strict_mode=True``, and for llguidance, which has no such option, the schema with
``additionalProperties: false`` written into every object schema that does not say, see
:func:`closed_objects`).

Threads: ``--threads`` (default 2) must not exceed the idle cores. With 2 torch threads on 2
cores while another process keeps one busy, a one-token pass was measured ~10x slower (0.75 s
instead of 0.064 s): the OpenMP workers wait on each other. The report records the load average
before and after; compare runs only at similar, low load.

What is timed: the generation call (structgen: ``gen.json``; the others: making the logits
processor and ``model.generate``). Grammar compilation is done before the clock starts and
reported separately (``compile`` column): structgen's schema is compiled with
``compile_json_schema`` (the generator's compiler cache is then warm), xgrammar's with its
``GrammarCompiler``, llguidance's with ``grammar_from_json_schema`` and a fresh ``LLMatcher``.

Tokens are the generated tokens up to, not including, end-of-sequence. Forward passes are
counted by a hook on the model (every ``forward`` call, prefill included) and, for structgen,
compared with ``stats.forward_passes``. The markdown report goes to stdout and to
``benchmarks/results/e2e.md``.

Pairs live in ``benchmarks/data/e2e_pairs.jsonl`` (committed; ``--regenerate-pairs`` rebuilds
them from MaskBench): schemas with a valid instance of at most 300 characters (compact JSON),
round-robin over MaskBench's sources, that structgen compiles; the prompt asks to extract the
data from a "key: value" rendering of that instance.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import json
import os
import platform
import random
import shlex
import sys
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from _report import choose, cpu_model, git_commit, markdown_table, package_versions, source_of, details, publish

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmark this checkout's structgen, installed or not
HERE = Path(__file__).resolve().parent
MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench" / "maskbench.jsonl.gz"
PAIRS = HERE / "data" / "e2e_pairs.jsonl"
RESULTS = HERE / "results"
CONFIGS = ("structgen-spec", "structgen-step", "xgrammar-hf", "llguidance-hf", "plain-generate")
STRUCTGEN_CONFIGS = ("structgen-spec", "structgen-step")
PEERS = ("xgrammar-hf", "llguidance-hf")
MAX_INSTANCE_CHARS = 300
MAX_SCHEMA_CHARS = 2000  # keeps the prompt (which shows the schema) a few hundred tokens
MIN_SOURCES = 5

#: Run once per configuration before the timed pairs (first-call costs: kernels, caches).
WARMUP_PAIR = {
    "id": "warm-up", "name": "warm-up", "source": "warm-up",
    "schema": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                                 "tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["name", "age"]},
    "instance": {"name": "Ada", "age": 36, "tags": ["math"]},
}


# --------------------------------------------------------------------------------------------
# Pairs
# --------------------------------------------------------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``{"a": {"b": [1, "x"]}}`` -> ``("a.b[0]", "1"), ("a.b[1]", "x")``; strings unquoted."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from flatten(v, f"{prefix}[{i}]")
    elif isinstance(value, str):
        yield prefix, value
    else:
        yield prefix, json.dumps(value)  # numbers, true/false/null, empty {} and []


def extraction_prompt(instance: Any) -> str:
    lines = "\n".join(f"{k}: {v}" for k, v in flatten(instance))
    return f"Extract the data in the document below as JSON.\n\nDocument:\n{lines}"


def build_pairs(path: Path, n: int, seed: int, tokenizer: Any) -> list[dict[str, Any]]:
    """``n`` pairs drawn round-robin over MaskBench sources (each shuffled by ``seed``).

    Kept: a non-empty object as first valid instance, at most ``MAX_INSTANCE_CHARS`` compact,
    a schema of at most ``MAX_SCHEMA_CHARS`` compact, and structgen compiles the schema in both
    whitespace modes, strict or not (``StructgenError`` skips it).
    """
    import structgen

    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with gzip.open(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            valid = [t["data"] for t in row.get("tests") or [] if t.get("valid")]
            if not valid or not isinstance(valid[0], dict) or not valid[0]:
                continue
            if len(compact(valid[0])) > MAX_INSTANCE_CHARS or len(compact(row["schema"])) > MAX_SCHEMA_CHARS:
                continue
            by_source[source_of(row["name"])].append(
                {"name": row["name"], "schema": row["schema"], "instance": valid[0]})
    rng = random.Random(seed)
    queues = {}
    for source in sorted(by_source):
        rows = by_source[source]
        rng.shuffle(rows)
        queues[source] = rows
    picked: list[dict[str, Any]] = []
    while len(picked) < n and any(queues.values()):
        for source in sorted(queues):
            while queues[source] and len(picked) < n:
                row = queues[source].pop()
                try:
                    for ws in ("compact", "flexible"):
                        for strict in (True, False):
                            structgen.compile_json_schema(row["schema"], tokenizer, whitespace=ws,
                                                          strict=strict)
                except structgen.StructgenError:
                    continue
                picked.append({"id": f"p{len(picked):02d}", "name": row["name"], "source": source,
                               "schema": row["schema"], "instance": row["instance"],
                               "prompt": extraction_prompt(row["instance"])})
                break
    sources = {p["source"] for p in picked}
    if len(sources) < MIN_SOURCES:
        sys.exit(f"only {len(sources)} sources among the pairs; need {MIN_SOURCES}")
    return picked


def load_pairs(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_pairs(path: Path, pairs: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))


# --------------------------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One generation: what came out and what it cost."""

    status: str = "ok"  # ok | incomplete | unsupported | error | skipped
    seconds: float = float("nan")
    compile_s: float | None = None
    token_ids: list[int] = field(default_factory=list)  # generated, end-of-sequence stripped
    text: str = ""
    passes: int = 0  # forward calls seen by the hook
    stats: dict[str, Any] | None = None  # structgen's GenerationStats, as a dict
    valid: bool = False  # parses and validates against the schema
    detail: str | None = None

    @property
    def tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 and self.tokens else float("nan")


class Unsupported(Exception):
    """The engine declined the schema."""


class Bench:
    """Shared state: the model, tokenizer, generator (when structgen has one), pass counter."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        import structgen
        from structgen.decoding.models import load_default_model

        self.args = args
        self.torch = torch
        self.structgen = structgen
        self.generator = None
        self.generator_error = None
        if hasattr(structgen, "Generator"):
            try:
                self.generator = structgen.Generator()
            except Exception:  # noqa: BLE001 -- reported; the peers still run
                self.generator_error = traceback.format_exc(limit=3)
        if self.generator is not None:
            self.model, self.tokenizer = self.generator.model, self.generator.tokenizer
        else:
            self.model, self.tokenizer = load_default_model()
        torch.set_num_threads(args.threads)
        torch.set_flush_denormal(True)
        self.eos_ids = {i for i in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id)
                        if isinstance(i, int)}
        self.passes = 0
        self.model.register_forward_pre_hook(self._count)
        #: grammar options, passed to Generator.json and mirrored in the peers' settings
        self.grammar_options = {"whitespace": args.whitespace, "strict": args.strict}

    def _count(self, module: Any, inputs: Any) -> None:
        self.passes += 1

    def structgen_whitespace(self) -> str:
        return self.args.whitespace

    def prompt_ids(self, pair: dict[str, Any]) -> list[int]:
        if self.generator is not None:
            return list(self.generator.prompt_ids(pair["schema"], pair["prompt"]))
        # Until structgen's Generator lands: the chat template, schema shown in the message.
        message = f"{pair['prompt']}\n\nAnswer with JSON matching this schema:\n{json.dumps(pair['schema'])}"
        return list(self.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True,
            return_dict=False))

    def strip(self, ids: list[int]) -> tuple[list[int], bool]:
        """Generated ids up to the first end-of-sequence, and whether there was one."""
        for i, t in enumerate(ids):
            if t in self.eos_ids:
                return ids[:i], True
        return ids, False

    def validate(self, run: Run, schema: Any) -> None:
        from jsonschema import Draft202012Validator, validators

        try:
            value = json.loads(run.text)
        except ValueError:
            run.valid = False
            return
        cls = validators.validator_for(schema if isinstance(schema, dict) else {},
                                       default=Draft202012Validator)
        try:
            run.valid = cls(schema).is_valid(value)
        except Exception:  # noqa: BLE001 -- an unresolvable $ref etc.: not counted as valid
            run.valid = False


class Config:
    name = ""

    def __init__(self, bench: Bench) -> None:
        self.b = bench

    def available(self) -> str | None:
        """None, or why this configuration cannot run."""
        return None

    def prepare(self, pair: dict[str, Any]) -> Any:
        """Untimed per-pair set-up (grammar compilation); raises :class:`Unsupported`."""
        return None

    def generate(self, pair: dict[str, Any], prompt_ids: list[int], state: Any, run: Run) -> None:
        raise NotImplementedError


class StructgenConfig(Config):
    speculate = True

    def available(self) -> str | None:
        if self.b.generator is None:
            return self.b.generator_error or "structgen has no Generator yet"
        return None

    def prepare(self, pair: dict[str, Any]) -> Any:
        sg = self.b.structgen
        try:  # warms the generator's compile cache (keyed by grammar), so json() finds it there
            self.b.generator.compiler.json_schema(pair["schema"], canonical=True, **self.b.grammar_options)
        except sg.StructgenError as err:
            raise Unsupported(f"{type(err).__name__}: {err}") from err

    def generate(self, pair: dict[str, Any], prompt_ids: list[int], state: Any, run: Run) -> None:
        sg = self.b.structgen
        clock = time.perf_counter
        t0 = clock()
        try:
            result = self.b.generator.json(pair["schema"], pair["prompt"], max_new_tokens=self.b.args.max_new_tokens,
                                           temperature=0.0, speculate=self.speculate, **self.b.grammar_options)
            run.seconds = clock() - t0
            text, ids, stats = result.text, list(result.token_ids), result.stats
        except sg.IncompleteGenerationError as err:
            run.seconds = clock() - t0
            run.status = "incomplete"
            text, ids, stats = err.partial_text, list(err.token_ids or []), err.stats
        run.token_ids, _ = self.b.strip(ids)
        run.text = text
        run.stats = stats_dict(stats)


class StructgenSpec(StructgenConfig):
    name = "structgen-spec"
    speculate = True


class StructgenStep(StructgenConfig):
    name = "structgen-step"
    speculate = False


class HFConfig(Config):
    """``model.generate`` with some logits processors, greedy."""

    def processors(self, state: Any) -> list[Any]:
        return []

    def generate_kwargs(self, pair: dict[str, Any]) -> dict[str, Any]:
        return {"max_new_tokens": self.b.args.max_new_tokens}

    def generate(self, pair: dict[str, Any], prompt_ids: list[int], state: Any, run: Run) -> None:
        torch = self.b.torch
        from transformers import LogitsProcessorList

        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        clock = time.perf_counter
        t0 = clock()
        with torch.inference_mode():
            out = self.b.model.generate(
                input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                logits_processor=LogitsProcessorList(self.processors(state)),
                eos_token_id=self.b.tokenizer.eos_token_id, pad_token_id=self.b.tokenizer.eos_token_id,
                **self.generate_kwargs(pair))
        run.seconds = clock() - t0
        run.token_ids, ended = self.b.strip(out[0, len(prompt_ids):].tolist())
        run.text = self.b.tokenizer.decode(run.token_ids, skip_special_tokens=True)
        if not ended and self.incomplete_without_eos:
            run.status = "incomplete"

    incomplete_without_eos = True


class XGrammarHF(HFConfig):
    name = "xgrammar-hf"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        import xgrammar
        import xgrammar.contrib.hf

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(bench.tokenizer, vocab_size=bench.model.config.vocab_size)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=bench.args.threads)

    def prepare(self, pair: dict[str, Any]) -> Any:
        # strict_mode closes objects (and prefixItems arrays) the schema leaves open, like
        # structgen's strict=True (which closes objects only).
        options = ({"any_whitespace": True} if self.b.structgen_whitespace() == "flexible"
                   else {"any_whitespace": False, "separators": (",", ":")})
        try:
            return self.compiler.compile_json_schema(json.dumps(pair["schema"]),
                                                     strict_mode=self.b.args.strict, **options)
        except Exception as err:  # noqa: BLE001 -- xgrammar raises RuntimeError/ValueError
            raise Unsupported(str(err)[:300]) from err

    def processors(self, state: Any) -> list[Any]:
        return [self.xgr.contrib.hf.LogitsProcessor(state)]


class LLGuidanceLogitsProcessor:
    """A transformers logits processor over an ``llguidance.LLMatcher`` (batch size 1).

    Each call consumes the token sampled last (except the first call, after the prompt), fills
    the next-token bitmask and sets the logits of disallowed tokens to -inf. Single use, like
    xgrammar's: make one per ``generate`` call.
    """

    def __init__(self, matcher: Any, vocab_size: int) -> None:
        import llguidance.torch
        import torch

        self.matcher = matcher
        self.fill = llguidance.torch.fill_next_token_bitmask
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, vocab_size)
        self.shifts = torch.arange(32, dtype=torch.int32)
        self.vocab_size = vocab_size
        self.started = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.started and not self.matcher.is_stopped():
            token = int(input_ids[0, -1])
            if not self.matcher.consume_token(token):
                raise RuntimeError(f"llguidance refused token {token}: {self.matcher.get_error()}")
        self.started = True
        self.fill(self.matcher, self.bitmask, 0)
        allowed = ((self.bitmask[0].unsqueeze(1) >> self.shifts) & 1).flatten()[: scores.shape[-1]].bool()
        return scores.masked_fill(~allowed, float("-inf"))


class LLGuidanceHF(HFConfig):
    name = "llguidance-hf"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.vocab_size = bench.model.config.vocab_size
        self.lltok = llguidance.hf.from_tokenizer(bench.tokenizer, n_vocab=self.vocab_size)

    def prepare(self, pair: dict[str, Any]) -> Any:
        # The matcher is llguidance's compiled grammar (built lazily inside it): made here,
        # untimed, a fresh one per generation.
        flexible = self.b.structgen_whitespace() == "flexible"
        schema = closed_objects(pair["schema"]) if self.b.args.strict else pair["schema"]
        try:
            grammar = self.llg.LLMatcher.grammar_from_json_schema(
                schema, defaults={"whitespace_flexible": flexible})
            matcher = self.llg.LLMatcher(self.lltok, grammar)
        except Exception as err:  # noqa: BLE001 -- llguidance raises plain ValueError/RuntimeError
            raise Unsupported(str(err)[:300]) from err
        if matcher.is_error():
            raise Unsupported(matcher.get_error()[:300])
        return matcher

    def processors(self, state: Any) -> list[Any]:
        return [LLGuidanceLogitsProcessor(state, self.vocab_size)]


class PlainGenerate(HFConfig):
    name = "plain-generate"
    incomplete_without_eos = False  # it is told to run exactly that long

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.lengths: dict[str, int] = {}  # pair id -> tokens to generate (set by the runner)

    def prepare(self, pair: dict[str, Any]) -> Any:
        n = self.lengths.get(pair["id"])
        if not n:
            raise Unsupported("no token count from structgen-step (or a fallback) for this pair")
        return n

    def generate_kwargs(self, pair: dict[str, Any]) -> dict[str, Any]:
        n = self.lengths[pair["id"]]
        return {"min_new_tokens": n, "max_new_tokens": n}


#: keywords whose value is a subschema, a list of subschemas, or a map of names to subschemas
_SUBSCHEMA = ("additionalProperties", "items", "not", "contains", "propertyNames", "if", "then",
              "else", "additionalItems", "unevaluatedProperties", "unevaluatedItems")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems", "items")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def closed_objects(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object schema that does not say.

    What structgen's ``strict=True`` does inside its compiler, spelled out in the schema for
    llguidance, which has no such option. An object schema is one with ``type: object`` (or a
    type list holding it) or ``properties``; ``enum``/``const``/``default`` values are left alone.
    """
    if isinstance(schema, list):
        return [closed_objects(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA:
        if isinstance(out.get(key), (dict, list)):
            out[key] = closed_objects(out[key])
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [closed_objects(s) for s in out[key]]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: closed_objects(v) for k, v in out[key].items()}
    types = out.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types) or "properties" in out
    if is_object and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


CONFIG_CLASSES = {c.name: c for c in (StructgenSpec, StructgenStep, XGrammarHF, LLGuidanceHF, PlainGenerate)}


def stats_dict(stats: Any) -> dict[str, Any] | None:
    if stats is None:
        return None
    names = ("forward_passes", "new_tokens", "drafted_tokens", "accepted_tokens", "seconds")
    return {k: getattr(stats, k, None) for k in names}


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


#: Where plain-generate takes its token count from, in order of preference.
LENGTH_SOURCES = ("structgen-step", "structgen-spec", "xgrammar-hf", "llguidance-hf")


def run_one(bench: Bench, config: Config, pair: dict[str, Any], prompt_ids: list[int]) -> Run:
    run = Run()
    try:
        t0 = time.perf_counter()
        state = config.prepare(pair)
        run.compile_s = time.perf_counter() - t0
    except Unsupported as err:
        return Run(status="unsupported", detail=str(err))
    except Exception:  # noqa: BLE001 -- one pair must never stop the run
        return Run(status="error", detail=traceback.format_exc(limit=4)[-1500:])
    before = bench.passes
    try:
        config.generate(pair, prompt_ids, state, run)
    except Exception:  # noqa: BLE001
        run.status, run.detail = "error", traceback.format_exc(limit=6)[-2000:]
    run.passes = bench.passes - before
    if run.status in ("ok", "incomplete"):
        bench.validate(run, pair["schema"])
        if run.status == "incomplete":
            run.valid = False
    return run


def run_all(bench: Bench, configs: list[Config], pairs: list[dict[str, Any]],
            reps: int) -> dict[str, dict[str, list[Run]]]:
    """results[config][pair id] = one Run per repetition."""
    results: dict[str, dict[str, list[Run]]] = {c.name: defaultdict(list) for c in configs}
    plain = next((c for c in configs if isinstance(c, PlainGenerate)), None)
    # plain-generate runs last for each pair: it needs the token count of the others.
    order = sorted(configs, key=lambda c: isinstance(c, PlainGenerate))
    prompt_ids = {p["id"]: bench.prompt_ids(p) for p in pairs}
    total = reps * len(pairs)
    for rep in range(reps):
        for i, pair in enumerate(pairs):
            for config in order:
                if plain is config:
                    for src in LENGTH_SOURCES:
                        got = results.get(src, {}).get(pair["id"])
                        if got and got[-1].tokens:
                            plain.lengths[pair["id"]] = got[-1].tokens
                            break
                run = run_one(bench, config, pair, prompt_ids[pair["id"]])
                results[config.name][pair["id"]].append(run)
                if run.status == "error":
                    print(f"\n[{config.name}] error on {pair['id']} {pair['name']}:\n{run.detail}", file=sys.stderr)
            done = rep * len(pairs) + i + 1
            print(f"\r{done}/{total} (rep {rep + 1}, {pair['id']})", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return results


def warm_up(bench: Bench, configs: list[Config]) -> None:
    """One untimed generation per configuration on a pair that is not in the benchmark."""
    pair = dict(WARMUP_PAIR, prompt=extraction_prompt(WARMUP_PAIR["instance"]))
    ids = bench.prompt_ids(pair)
    for config in configs:
        if isinstance(config, PlainGenerate):
            config.lengths[pair["id"]] = 16
        run = run_one(bench, config, pair, ids)
        if run.status not in ("ok", "incomplete"):
            print(f"[{config.name}] warm-up {run.status}: {run.detail}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    import numpy as np

    values = [v for v in values if v == v]
    return float(np.percentile(values, q)) if values else float("nan")


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or x != x:
        return "–"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


def share(k: int, n: int) -> str:
    return f"{k}/{n}" if n else "–"


def measured(runs: list[Run]) -> list[Run]:
    return [r for r in runs if r.status in ("ok", "incomplete")]


def per_pair_tps(results: dict[str, dict[str, list[Run]]], config: str) -> dict[str, float]:
    """Tokens/s per pair: the median over repetitions."""
    out = {}
    for pid, runs in results[config].items():
        got = [r.tokens_per_s for r in measured(runs)]
        got = [x for x in got if x == x]
        if got:
            out[pid] = pct(got, 50)
    return out


def config_row(name: str, runs_by_pair: dict[str, list[Run]]) -> list[str]:
    runs = [r for rs in runs_by_pair.values() for r in rs]
    ok = measured(runs)
    n_pairs = len(runs_by_pair)
    tps = [r.tokens_per_s for r in ok]
    tokens = sum(r.tokens for r in ok)
    passes = sum(r.passes for r in ok)
    stats_passes = [r.stats["forward_passes"] for r in ok if r.stats and r.stats.get("forward_passes") is not None]
    drafted = sum((r.stats or {}).get("drafted_tokens") or 0 for r in ok)
    accepted = sum((r.stats or {}).get("accepted_tokens") or 0 for r in ok)
    is_sg = name in STRUCTGEN_CONFIGS
    compile_ms = [r.compile_s * 1e3 for r in ok if r.compile_s is not None]
    return [
        name,
        share(len(ok), len(runs)),
        str(sum(r.status == "unsupported" for r in runs)) + " / " + str(sum(r.status == "error" for r in runs)),
        fmt(pct(tps, 50)), fmt(pct(tps, 90)), fmt(pct(tps, 10)),
        fmt(pct([r.seconds for r in ok], 50)),
        fmt(pct([r.tokens for r in ok], 50)),
        fmt(passes / tokens if tokens else float("nan")),
        fmt(sum(stats_passes) / tokens if is_sg and tokens and len(stats_passes) == len(ok) else float("nan")),
        (fmt(accepted / drafted) + f" ({accepted}/{drafted})") if is_sg and drafted else "–",
        share(sum(r.status == "incomplete" for r in ok), len(ok)),
        share(sum(r.valid for r in ok), len(ok)),
        fmt(pct(compile_ms, 50)),
    ] if n_pairs else [name] + ["–"] * 13


def ratio_cell(results: dict[str, dict[str, list[Run]]], a: str, b: str) -> str:
    """Median over pairs of tokens/s(a) / tokens/s(b), on the pairs both measured."""
    if a == b or a not in results or b not in results:
        return "–" if a != b else "1"
    ta, tb = per_pair_tps(results, a), per_pair_tps(results, b)
    common = [p for p in ta if p in tb]
    if not common:
        return "–"
    ratios = [ta[p] / tb[p] for p in common]
    return f"{fmt(pct(ratios, 50))} (p10 {fmt(pct(ratios, 10))}, p90 {fmt(pct(ratios, 90))}; n={len(common)})"


def versions() -> str:
    return package_versions(("torch", "transformers", "xgrammar", "llguidance", "jsonschema", "numpy"))


def agreement(results: dict[str, dict[str, list[Run]]], pairs: list[dict[str, Any]], a: str, b: str,
              tokenizer: Any) -> list[str]:
    """Pairs where ``a`` and ``b`` (first repetition, both measured) produced different tokens."""
    if a not in results or b not in results:
        return []
    lines, same, both = [], 0, 0
    for pair in pairs:
        ra, rb = results[a].get(pair["id"]), results[b].get(pair["id"])
        if not ra or not rb or not measured(ra[:1]) or not measured(rb[:1]):
            continue
        both += 1
        x, y = ra[0].token_ids, rb[0].token_ids
        if x == y:
            same += 1
            continue
        k = next((i for i, (s, t) in enumerate(zip(x, y)) if s != t), min(len(x), len(y)))
        prefix = tokenizer.decode(x[:k])[-40:]
        lines.append(f"  - `{pair['id']}` {pair['name']}: first difference at token {k} after {prefix!r}: "
                     f"{a} {tokenizer.decode(x[k:k + 6])!r} vs {b} {tokenizer.decode(y[k:k + 6])!r} "
                     f"({len(x)} vs {len(y)} tokens)")
    return [f"- {a} vs {b}: identical tokens on {same}/{both} pairs", *lines]


def problems(results: dict[str, dict[str, list[Run]]], pairs: list[dict[str, Any]], bench: Bench) -> list[str]:
    lines = []
    names = {p["id"]: p["name"] for p in pairs}
    for config, by_pair in results.items():
        for pid, runs in by_pair.items():
            for rep, r in enumerate(runs):
                where = f"**{config}** `{pid}` {names[pid]} (rep {rep + 1})"
                if r.status == "error":
                    lines.append(f"- {where} error:\n  ```\n  " + (r.detail or "").strip().replace("\n", "\n  ") + "\n  ```")
                elif r.status == "incomplete":
                    lines.append(f"- {where} hit the {bench.args.max_new_tokens}-token cap: ...{r.text[-80:]!r}")
                elif r.status == "ok" and not r.valid and config != "plain-generate":
                    lines.append(f"- {where} output does not validate: {r.text[:200]!r}")
                if config in STRUCTGEN_CONFIGS and r.stats and r.status in ("ok", "incomplete"):
                    s = r.stats
                    if s.get("forward_passes") is not None and s["forward_passes"] != r.passes:
                        lines.append(f"- {where} stats.forward_passes {s['forward_passes']} but the model hook "
                                     f"counted {r.passes} forward calls")
                    if s.get("new_tokens") is not None and s["new_tokens"] != r.tokens:
                        lines.append(f"- {where} stats.new_tokens {s['new_tokens']} but {r.tokens} tokens "
                                     "before end-of-sequence in token_ids")
                    if (s.get("accepted_tokens") or 0) > (s.get("drafted_tokens") or 0):
                        lines.append(f"- {where} accepted {s['accepted_tokens']} > drafted {s['drafted_tokens']}")
                    if r.text and r.token_ids and bench.tokenizer.decode(r.token_ids, skip_special_tokens=True) != r.text:
                        lines.append(f"- {where} result.text differs from decode(result.token_ids)")
    return lines


def report(args: argparse.Namespace, bench: Bench, pairs: list[dict[str, Any]],
           results: dict[str, dict[str, list[Run]]], load: tuple[list[float], list[float]],
           wall_s: float) -> str:
    header = ["configuration", "measured", "unsupported / errors", "tok/s p50", "p90", "p10",
              "seconds p50", "tokens p50", "passes/token (hook)", "passes/token (stats)",
              "acceptance", "hit cap", "valid JSON+schema", "compile ms p50"]
    rows = [config_row(c, results[c]) for c in args.configs]
    refs = [c for c in ("structgen-step", "plain-generate", *PEERS) if c in args.configs]
    ratio_rows = [[c, *(ratio_cell(results, c, r) for r in refs)] for c in args.configs]
    prompt_lens = [len(bench.prompt_ids(p)) for p in pairs]
    sources = defaultdict(int)
    for p in pairs:
        sources[p["source"]] += 1
    whitespace = bench.structgen_whitespace()
    parts = [
        "# End-to-end generation: structgen against plain generate and the peers",
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; wall time {wall_s:.0f} s",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}; torch threads {args.threads}, flush denormal on; "
        f"load average {' / '.join(f'{x:.2f}' for x in load[0])} before, "
        f"{' / '.join(f'{x:.2f}' for x in load[1])} after; Python {platform.python_version()}",
        f"- versions: {versions()}; structgen checkout {git_commit()}",
        f"- model: {getattr(bench.model.config, '_name_or_path', '?') or 'SmolLM2-135M-Instruct'} "
        f"({type(bench.model).__name__}, {bench.model.dtype}), tokenizer of {len(bench.tokenizer)} tokens",
        f"- prompts: {'Generator.prompt_ids' if bench.generator is not None else 'fallback chat template (no Generator)'}; "
        f"{len(pairs)} pairs from `{args.pairs.relative_to(ROOT) if args.pairs.is_relative_to(ROOT) else args.pairs}` "
        f"({', '.join(f'{s} {k}' for s, k in sorted(sources.items()))}); prompt tokens p50 "
        f"{fmt(pct(prompt_lens, 50))}, max {max(prompt_lens) if prompt_lens else '–'}",
        f"- greedy, max_new_tokens {args.max_new_tokens}, whitespace {whitespace}, strict {args.strict} "
        f"(xgrammar strict_mode={args.strict}; llguidance: "
        f"{'objects closed in the schema' if args.strict else 'schema as is'}), reps {args.reps} (interleaved)",
        "",
        "Tokens: generated tokens before end-of-sequence. tok/s: tokens / wall seconds of the "
        "generation call (prefill included, grammar compile excluded), per pair and repetition. "
        "passes/token: forward calls (prefill included) counted by a hook on the model, summed over "
        "pairs, / tokens; for structgen also from `stats.forward_passes`. acceptance: accepted / drafted "
        "tokens. hit cap: pairs that ended at max_new_tokens (invalid by definition). "
        "plain-generate runs exactly as many tokens as structgen-step produced for the pair, so its "
        "'valid' column is not meaningful.",
        "",
        markdown_table(header, rows),
        "",
        "Ratios of tokens/s: median over pairs of (row / column), on the pairs both measured; "
        "above 1 means the row is faster.",
        "",
        markdown_table(["configuration", *(f"vs {r}" for r in refs)], ratio_rows),
        "",
        "## Output agreement (first repetition)",
        "",
        "Greedy speculation is lossless: structgen-spec must produce exactly structgen-step's tokens. "
        "The peers constrain with the same schema and whitespace, so differences point to a grammar "
        "difference (e.g. key order, optional keys, number formats) in one of the engines.",
        "",
        *agreement(results, pairs, "structgen-spec", "structgen-step", bench.tokenizer),
        *agreement(results, pairs, "structgen-step", "xgrammar-hf", bench.tokenizer),
        *agreement(results, pairs, "structgen-step", "llguidance-hf", bench.tokenizer),
        *agreement(results, pairs, "xgrammar-hf", "llguidance-hf", bench.tokenizer),
        "",
        "## Problems: errors, outputs that hit the cap or do not validate, stats that disagree",
        "",
        *(problems(results, pairs, bench) or ["none"]),
        "",
        *details("Unsupported", [
            *[f"- {c} `{pid}`: {runs[0].detail}" for c, by in results.items() for pid, runs in by.items()
              if runs and runs[0].status == "unsupported"],
            *([f"- structgen configurations not run: {bench.generator_error or 'structgen has no Generator yet'}"]
              if bench.generator is None and any(c in STRUCTGEN_CONFIGS for c in args.configs) else [])]),
    ]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=24, help="number of pairs (default 24)")
    p.add_argument("--reps", type=int, default=1, help="repetitions, interleaved (default 1)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ",".join(CONFIGS))
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--whitespace", choices=("compact", "flexible"), default="compact",
                   help="Generator.json's whitespace (default compact, its default); the peers match it")
    p.add_argument("--strict", action=argparse.BooleanOptionalAction, default=True,
                   help="Generator.json's strict (closed objects; default on, its default); xgrammar "
                        "strict_mode and a closed schema for llguidance match it")
    p.add_argument("--pairs", type=Path, default=PAIRS, help="pairs file (default data/e2e_pairs.jsonl)")
    p.add_argument("--regenerate-pairs", action="store_true", help="rebuild the pairs file from MaskBench")
    p.add_argument("--seed", type=int, default=0, help="seed for --regenerate-pairs")
    p.add_argument("--data", type=Path, default=MASKBENCH, help="maskbench.jsonl.gz")
    p.add_argument("--out", type=Path, default=None, help="report path (default results/e2e.md)")
    args = p.parse_args(argv)
    args.configs = choose(p, args.configs, CONFIGS, "configurations")
    args.configs = [c for c in CONFIGS if c in args.configs]  # canonical order
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # llguidance masks: one thread, as in engine.py
    load_before = list(os.getloadavg())
    t_start = time.perf_counter()

    bench = Bench(args)
    if args.regenerate_pairs or not args.pairs.exists():
        pairs = build_pairs(args.data, max(args.n, 24), args.seed, bench.tokenizer)
        write_pairs(args.pairs, pairs)
        print(f"wrote {len(pairs)} pairs to {args.pairs}", file=sys.stderr)
    pairs = load_pairs(args.pairs)[: args.n]

    configs: list[Config] = []
    for name in args.configs:
        config = CONFIG_CLASSES[name](bench)
        why = config.available()
        if why:
            print(f"[{name}] not run: {why.strip().splitlines()[-1]}", file=sys.stderr)
            continue
        configs.append(config)
    warm_up(bench, configs)
    # Long-lived set-up objects out of the cyclic collector's way, as a serving process would.
    gc.collect()
    gc.freeze()
    results = run_all(bench, configs, pairs, args.reps)
    gc.unfreeze()
    for name in args.configs:  # configurations that could not run: every pair 'skipped'
        results.setdefault(name, {p["id"]: [Run(status="skipped")] for p in pairs})

    text = report(args, bench, pairs, results, (load_before, list(os.getloadavg())),
                  time.perf_counter() - t_start)
    publish(text, args.out or RESULTS / "e2e.md")


if __name__ == "__main__":
    main()
