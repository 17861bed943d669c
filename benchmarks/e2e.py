"""End-to-end generation speed: structgen (step by step and with each kind of draft) against plain
``model.generate`` and the peers' Hugging Face logits processors, same model and prompts, batch 1,
greedy, on three workloads.

Run (SmolLM2-135M-Instruct on CPU, 2 threads)::

    .venv/bin/python benchmarks/e2e.py                              # extraction: 24 pairs, all configurations
    .venv/bin/python benchmarks/e2e.py --workload all               # extraction, BFCL tool calls and SQL
    .venv/bin/python benchmarks/e2e.py --n 3 --configs xgrammar-hf,llguidance-hf,plain-generate
    .venv/bin/python benchmarks/e2e.py --workload bfcl --draft truncated:8

Workloads (``--workload``; ``--n`` limits the cases of each):

* ``extraction`` (default; 24 pairs): MaskBench schemas and "extract this as JSON" prompts from
  ``data/e2e_pairs.jsonl`` (below), ``Generator.json``.
* ``bfcl`` (24 cases): BFCL v4 tool calls from ``../shared/data/toolcalls`` (its README, section 1;
  read with ``tests/toolcall_data.py``), round-robin over ``simple_python``, ``multiple``,
  ``parallel`` and ``parallel_multiple``, ``Generator.tool_calls(tools, messages,
  tool_choice="required")`` (parallel calls allowed, as ``benchmarks/toolcalls.py``).
* ``sql`` (53 questions): the first 3 questions of each defog database (11, with rows) and the
  first of each Spider dev database (20, schema only) from ``../shared/data/sql`` (read with
  ``tests/sql_data.py``; the set ``benchmarks/sql.py --per-db 3 --spider-per-db 1`` runs),
  interleaved by rank, ``Generator.sql(question, db, max_retries=0)`` (``--sql-max-new-tokens``,
  default 128). A query that fails its check (``EXPLAIN``, the name check) raises
  ``SqlGenerationError``, which carries no tokens or stats: the benchmark wraps each generator's
  ``context.decode_batch`` (:class:`DecodeRecorder`) to keep the last decoding's tokens and stats, so
  such a question is still timed and compared (status ``rejected``, not valid).

Configurations, each run on every case, interleaved (for each repetition, for each case, every
configuration in turn), greedy, batch 1, with the same ``torch.set_num_threads`` and flushed
denormals:

* ``structgen-step`` -- ``speculate=False``: one forward pass per token, the reference.
* ``structgen-forced`` -- ``speculate=("forced",)``: the text the grammar forces, drafted and
  checked in one pass.
* ``structgen-lookup`` -- ``speculate=("forced", "lookup")``: and values copied from the prompt
  (``structgen-spec``, its former name, is accepted in ``--configs``).
* ``structgen-draft`` -- ``speculate=True`` on a second ``Generator`` built with
  ``draft_model=``: forced text, prompt lookup and a draft model's guesses. The draft model
  (``--draft``): ``int8`` (default), a copy of the model with every ``nn.Linear`` dynamically
  quantized to int8 (:func:`structgen.decoding.draft_model.quantized_model`), or ``truncated:N``, its first N decoder layers under its
  head (``structgen.decoding.draft_model.truncated_model``, shared weights).
* ``xgrammar-hf`` -- ``model.generate`` with ``xgrammar.contrib.hf.LogitsProcessor``.
* ``llguidance-hf`` -- ``model.generate`` with :class:`LLGuidanceLogitsProcessor` below:
  llguidance ships no transformers logits processor (``llguidance.hf`` only builds the
  tokenizer, ``llguidance.torch`` only fills and applies bitmasks), so this one consumes the last
  token, fills the bitmask with ``llguidance.torch.fill_next_token_bitmask`` and masks the logits
  with plain torch ops.
* ``plain-generate`` -- ``model.generate`` unconstrained, with ``min_new_tokens = max_new_tokens``
  = the number of tokens ``structgen-step`` decoded for the case: the model time of exactly that
  many decode steps, no grammar at all.

The peers run on ``extraction`` only: building structgen's tool-call and SQL grammars for them is
out of this benchmark's scope, so on ``bfcl`` and ``sql`` they are reported as unsupported.

Every structgen configuration shares one pass-cost curve, ``PassCosts.for_model(model)`` (the
curve structgen learns as it decodes, starting from the copy on disk or the default); the report
gives the curve before and after the run. Draft decisions follow it, so they drift as it learns.

Every configuration gets the same prompt token ids: extraction ``Generator.prompt_ids(schema,
prompt)`` (chat template, schema shown in the message); bfcl the text of
``structgen.tasks.tool_calls.tool_prompt`` encoded without special tokens (what
``Generator.tool_calls`` feeds); sql ``Generator.chat_ids(sql_prompt(question, ddl))`` (what
``Generator.sql`` feeds). The extraction grammars match ``Generator.json``'s defaults: compact
whitespace (``--whitespace``) and closed objects (``--strict``: structgen ``strict=True``,
xgrammar ``strict_mode=True``, and for llguidance, which has no such option, the schema with
``additionalProperties: false`` written into every object schema that does not say, see
:func:`closed_objects`).

Threads: ``--threads`` (default 2) must not exceed the idle cores. With 2 torch threads on 2
cores while another process keeps one busy, a one-token pass was measured ~10x slower (0.75 s
instead of 0.064 s): the OpenMP workers wait on each other. The report records the load average
before and after; compare runs only at similar, low load.

What is timed: the generation call (structgen: ``gen.json`` / ``gen.tool_calls`` / ``gen.sql``,
which includes rendering the prompt, finding the compiled grammar in the warm cache and, for SQL,
reading the schema and the ``EXPLAIN`` check; the others: making the logits processor and
``model.generate``). Grammar compilation is done before the clock starts and reported separately
(``compile`` column): structgen's grammar is compiled into the configuration's generator's cache
the way the call compiles it, xgrammar's with its ``GrammarCompiler``, llguidance's with
``grammar_from_json_schema`` and a fresh ``LLMatcher``.

Tokens are the tokens decoded (structgen: ``stats.new_tokens``; the others: generated tokens up
to, not including, end-of-sequence); they differ from the returned ``token_ids`` only where
``Generator.tool_calls`` cut a repeated call. Forward passes of the model are counted by a hook
on it (every ``forward`` call, prefill included; the draft model's passes are not counted) and,
for structgen, compared with ``stats.forward_passes``. The markdown report goes to stdout and to
``benchmarks/results/e2e.md`` (``e2e-<workload>.md`` for the other workloads).

Pairs live in ``benchmarks/data/e2e_pairs.jsonl`` (committed; ``--regenerate-pairs`` rebuilds
them from MaskBench): schemas with a valid instance of at most 300 characters (compact JSON),
round-robin over MaskBench's sources, that structgen compiles; the prompt asks to extract the
data from a "key: value" rendering of that instance.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import random
import sys
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from _report import choose, details, markdown_table, package_versions, publish, run_lines, source_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmark this checkout's structgen, installed or not
sys.path.append(str(ROOT / "tests"))  # toolcall_data, sql_data: the shared data's readers
HERE = Path(__file__).resolve().parent
MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench" / "maskbench.jsonl.gz"
PAIRS = HERE / "data" / "e2e_pairs.jsonl"
RESULTS = HERE / "results"
CONFIGS = ("structgen-step", "structgen-forced", "structgen-lookup", "structgen-draft",
           "xgrammar-hf", "llguidance-hf", "plain-generate")
#: former names still accepted in --configs
ALIASES = {"structgen-spec": "structgen-lookup"}
STRUCTGEN_CONFIGS = ("structgen-step", "structgen-forced", "structgen-lookup", "structgen-draft")
PEERS = ("xgrammar-hf", "llguidance-hf")
WORKLOADS = ("extraction", "bfcl", "sql")
#: cases per workload when --n is not given
DEFAULT_N = {"extraction": 24, "bfcl": 24, "sql": 53}
BFCL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
#: questions per database: the 53 of benchmarks/sql.py --per-db 3 --spider-per-db 1
SQL_PER_DB = {"defog": 3, "spider": 1}
#: draft sources in report order (others, if structgen grows some, follow sorted)
SOURCES = ("forced", "lookup", "model")
MAX_INSTANCE_CHARS = 300
MAX_SCHEMA_CHARS = 2000  # keeps the prompt (which shows the schema) a few hundred tokens
MIN_SOURCES = 5

#: Run once per configuration before the timed extraction pairs (first-call costs: kernels, caches).
WARMUP_PAIR = {
    "id": "warm-up", "name": "warm-up", "source": "warm-up",
    "schema": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                                 "tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["name", "age"]},
    "instance": {"name": "Ada", "age": 36, "tags": ["math"]},
}
#: The bfcl warm-up: a tool call that is not among BFCL's cases.
WARMUP_TOOLS = {
    "id": "warm-up", "name": "warm-up", "source": "warm-up",
    "tools": [{"type": "function", "function": {
        "name": "add", "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                       "required": ["a", "b"]}}}],
    "messages": [{"role": "user", "content": "What is 2 plus 3?"}],
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
# The model, the draft model, the generators
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One generation: what came out and what it cost."""

    status: str = "ok"  # ok | incomplete | rejected (sql: failed its check) | unsupported | error | skipped
    seconds: float = float("nan")
    compile_s: float | None = None
    token_ids: list[int] = field(default_factory=list)  # returned, end-of-sequence stripped
    decoded: int | None = None  # tokens decoded, when they differ from token_ids (structgen: stats.new_tokens)
    text: str = ""
    finish: str | None = None  # structgen's finish_reason
    passes: int = 0  # forward calls seen by the hook
    stats: dict[str, Any] | None = None  # structgen's GenerationStats, as a dict
    value: Any = None  # bfcl: the calls [(name, arguments)]
    valid: bool = False  # extraction: parses and validates; bfcl: every call valid; sql: passed its check
    detail: str | None = None

    @property
    def tokens(self) -> int:
        return self.decoded if self.decoded is not None else len(self.token_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 and self.tokens else float("nan")


#: statuses of a generation that ran: timed and compared
MEASURED = ("ok", "incomplete", "rejected")


class Unsupported(Exception):
    """The engine declined the case."""


def build_draft(model: Any, spec: str) -> tuple[Any, str]:
    """The draft model ``--draft`` names, and a line describing it."""
    import torch

    t0 = time.perf_counter()
    linears = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    layers = len(model.model.layers) if hasattr(getattr(model, "model", None), "layers") else "?"
    if spec == "int8":
        from structgen.decoding.draft_model import quantized_model

        draft = quantized_model(model)
        what = (f"int8: a copy of the model with its {linears} `nn.Linear` (head included) dynamically quantized "
                f"(`torch.ao.quantization.quantize_dynamic`, qint8; embeddings and norms float)")
    else:
        from structgen.decoding.draft_model import truncated_model

        n = int(spec.split(":", 1)[1])
        draft = truncated_model(model, n)
        what = (f"{spec}: the model's first {n} of {layers} decoder layers under its own norm and head "
                "(`truncated_model`, shared weights)")
    return draft, f"{what}; built in {time.perf_counter() - t0:.1f} s"


def draft_spec(text: str) -> str:
    """argparse type of --draft: ``int8`` or ``truncated:N`` (N >= 1)."""
    if text == "int8":
        return text
    head, _, n = text.partition(":")
    if head == "truncated" and n.isdigit() and int(n) >= 1:
        return f"truncated:{int(n)}"
    raise argparse.ArgumentTypeError(f"--draft takes int8 or truncated:N, not {text!r}")


class DecodeRecorder:
    """Stands in for a generator's ``context.decode_batch`` (an instance attribute over the
    method; every task decodes through it) and keeps the last decoding's (finish, token ids,
    stats) of a one-row batch: ``Generator.sql`` raises ``SqlGenerationError`` without them when
    the query fails its check. ``finish`` is ``"incomplete"`` when the budget ran out."""

    def __init__(self, context: Any) -> None:
        self.inner = context.decode_batch
        self.last: tuple[str, list[int], Any] | None = None
        context.decode_batch = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from structgen import IncompleteGenerationError

        self.last = None
        outcomes = self.inner(*args, **kwargs)
        if len(outcomes) == 1:
            (out,) = outcomes
            if isinstance(out.error, IncompleteGenerationError):
                self.last = ("incomplete", list(out.error.token_ids or []), out.error.stats)
            elif out.error is None:
                self.last = (out.finish, list(out.tokens), out.stats)
        return outcomes


class Bench:
    """Shared state: the model, tokenizer, generators, pass-cost curve, pass counter."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        import structgen
        from structgen.decoding.costs import PassCosts
        from structgen.decoding.models import load_default_model

        self.args = args
        self.torch = torch
        self.structgen = structgen
        # threads first: the pass-cost curve is kept per thread count
        torch.set_num_threads(args.threads)
        torch.set_flush_denormal(True)
        self.model, self.tokenizer = load_default_model()
        self.model.eval()
        self.draft_model, self.draft_line, self.draft_error = None, None, None
        if "structgen-draft" in args.configs:
            try:  # before the hook below: a deep copy would copy it
                self.draft_model, self.draft_line = build_draft(self.model, args.draft)
            except Exception:  # noqa: BLE001 -- reported; the rest still runs
                self.draft_error = traceback.format_exc(limit=3)
        self.pass_costs = PassCosts.for_model(self.model)
        self.costs_before = dict(self.pass_costs.relative)
        if not args.save_costs:  # learn, but leave the copy on disk as it was
            self.pass_costs.save = lambda: None
        self.generator = self.draft_generator = None
        self.generator_error = None
        try:
            self.generator = structgen.Generator(self.model, self.tokenizer, pass_costs=self.pass_costs)
            if self.draft_model is not None:
                self.draft_generator = structgen.Generator(self.model, self.tokenizer, pass_costs=self.pass_costs,
                                                           draft_model=self.draft_model)
        except Exception:  # noqa: BLE001 -- reported; the peers still run
            self.generator_error = traceback.format_exc(limit=3)
        self.recorders = {id(g): DecodeRecorder(g.context) for g in (self.generator, self.draft_generator)
                          if g is not None}
        self.eos_ids = {i for i in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id)
                        if isinstance(i, int)}
        self.passes = 0
        self.model.register_forward_pre_hook(self._count)
        #: configuration -> why it was not run at all
        self.not_run: dict[str, str] = {}
        #: grammar options, passed to Generator.json and mirrored in the peers' settings
        self.grammar_options = {"whitespace": args.whitespace, "strict": args.strict}

    def _count(self, module: Any, inputs: Any) -> None:
        if module is self.model:  # a truncated draft model shares the hook dict (a shallow copy)
            self.passes += 1

    def structgen_whitespace(self) -> str:
        return self.args.whitespace

    def strip(self, ids: list[int]) -> tuple[list[int], bool]:
        """Generated ids up to the first end-of-sequence, and whether there was one."""
        for i, t in enumerate(ids):
            if t in self.eos_ids:
                return ids[:i], True
        return ids, False


def stats_dict(stats: Any) -> dict[str, Any] | None:
    if stats is None:
        return None
    names = ("forward_passes", "new_tokens", "drafted_tokens", "accepted_tokens", "seconds")
    out = {k: getattr(stats, k, None) for k in names}
    out["by_source"] = {k: {"drafted_tokens": v.drafted_tokens, "accepted_tokens": v.accepted_tokens}
                        for k, v in (getattr(stats, "by_source", None) or {}).items()}
    out["passes_by_source"] = dict(getattr(stats, "passes_by_source", None) or {})
    return out


def timed(call: Callable[[], Any]) -> tuple[float, Any, Exception | None]:
    """(seconds, value, None), or (seconds, None, error) for a structgen error."""
    from structgen import StructgenError

    t0 = time.perf_counter()
    try:
        value = call()
    except StructgenError as err:
        return time.perf_counter() - t0, None, err
    return time.perf_counter() - t0, value, None


def fill_result(run: Run, bench: Bench, result: Any, err: BaseException | None) -> None:
    """Fill ``run`` from a structgen result, or from the partial output of an
    ``IncompleteGenerationError`` (status "incomplete"); any other error is raised."""
    if isinstance(err, bench.structgen.IncompleteGenerationError):
        run.status = "incomplete"
        fill_from(run, bench, err.partial_text, err.token_ids or [], err.stats, "length")
    elif err is not None:
        raise err
    else:
        fill_from(run, bench, result.text, result.token_ids, result.stats, result.finish_reason)


def fill_from(run: Run, bench: Bench, text: str, token_ids: list[int], stats: Any, finish: str | None) -> None:
    run.token_ids, _ = bench.strip(list(token_ids))
    run.text = text
    run.finish = finish
    run.stats = stats_dict(stats)
    if stats is not None and getattr(stats, "new_tokens", None) is not None:
        run.decoded = stats.new_tokens


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------


class Workload:
    """The cases of one task, how structgen runs one, the prompt ids the others get."""

    name = ""
    valid_label = "valid"

    def __init__(self, bench: Bench) -> None:
        self.b = bench
        #: case id -> the prompt ids every configuration but structgen's is fed (None: could not make them)
        self.prompt_cache: dict[str, list[int] | None] = {}

    def max_new_tokens(self) -> int:
        return self.b.args.max_new_tokens

    def cases(self, n: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    def warmup_case(self, cases: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def describe(self, cases: list[dict[str, Any]]) -> str:
        """The header line: where the cases come from."""
        raise NotImplementedError

    def prompt_ids(self, case: dict[str, Any]) -> list[int]:
        raise NotImplementedError

    def compile(self, gen: Any, case: dict[str, Any]) -> None:
        """Compile the case's grammar into ``gen``'s cache as its call will; raise :class:`Unsupported`."""
        raise NotImplementedError

    def generate(self, gen: Any, case: dict[str, Any], speculate: Any, run: Run) -> None:
        """The timed structgen call; fills ``run``."""
        raise NotImplementedError

    def validate(self, run: Run, case: dict[str, Any]) -> None:
        run.valid = run.status == "ok"

    def sources(self, cases: list[dict[str, Any]]) -> str:
        counts: dict[str, int] = defaultdict(int)
        for c in cases:
            counts[c["source"]] += 1
        return ", ".join(f"{s} {k}" for s, k in sorted(counts.items()))


class Extraction(Workload):
    name = "extraction"
    valid_label = "valid JSON+schema"

    def cases(self, n: int) -> list[dict[str, Any]]:
        args = self.b.args
        if args.regenerate_pairs or not args.pairs.exists():
            pairs = build_pairs(args.data, max(n, 24), args.seed, self.b.tokenizer)
            write_pairs(args.pairs, pairs)
            print(f"wrote {len(pairs)} pairs to {args.pairs}", file=sys.stderr)
        return load_pairs(args.pairs)[:n]

    def warmup_case(self, cases: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(WARMUP_PAIR, prompt=extraction_prompt(WARMUP_PAIR["instance"]))

    def describe(self, cases: list[dict[str, Any]]) -> str:
        args = self.b.args
        where = args.pairs.relative_to(ROOT) if args.pairs.is_relative_to(ROOT) else args.pairs
        return (f"{len(cases)} pairs from `{where}` ({self.sources(cases)}); `Generator.json`, whitespace "
                f"{args.whitespace}, strict {args.strict} (xgrammar strict_mode={args.strict}; llguidance: "
                f"{'objects closed in the schema' if args.strict else 'schema as is'}), "
                f"max_new_tokens {self.max_new_tokens()}")

    def prompt_ids(self, case: dict[str, Any]) -> list[int]:
        if self.b.generator is not None:
            return list(self.b.generator.prompt_ids(case["schema"], case["prompt"]))
        # Without a Generator: the chat template, schema shown in the message.
        message = f"{case['prompt']}\n\nAnswer with JSON matching this schema:\n{json.dumps(case['schema'])}"
        return list(self.b.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True,
            return_dict=False))

    def compile(self, gen: Any, case: dict[str, Any]) -> None:
        sg = self.b.structgen
        try:  # warms the generator's compile cache (keyed by grammar), so json() finds it there
            gen.compiler.json_schema(case["schema"], canonical=True, **self.b.grammar_options)
        except sg.StructgenError as err:
            raise Unsupported(f"{type(err).__name__}: {err}") from err

    def generate(self, gen: Any, case: dict[str, Any], speculate: Any, run: Run) -> None:
        run.seconds, result, err = timed(lambda: gen.json(
            case["schema"], case["prompt"], max_new_tokens=self.max_new_tokens(), temperature=0.0,
            speculate=speculate, **self.b.grammar_options))
        fill_result(run, self.b, result, err)

    def validate(self, run: Run, case: dict[str, Any]) -> None:
        from jsonschema import Draft202012Validator, validators

        schema = case["schema"]
        try:
            value = json.loads(run.text)
        except ValueError:
            run.valid = False
            return
        cls = validators.validator_for(schema if isinstance(schema, dict) else {},
                                       default=Draft202012Validator)
        try:
            run.valid = run.status == "ok" and cls(schema).is_valid(value)
        except Exception:  # noqa: BLE001 -- an unresolvable $ref etc.: not counted as valid
            run.valid = False


class ToolCalls(Workload):
    name = "bfcl"
    valid_label = "calls valid"

    def cases(self, n: int) -> list[dict[str, Any]]:
        from toolcall_data import cases

        per = -(-n // len(BFCL_CATEGORIES))
        lists = []
        for category in BFCL_CATEGORIES:
            got = []
            for case in cases(category):
                if len(got) == per:
                    break
                got.append({"id": case["id"], "name": case["id"], "source": category, "tools": case["tools"],
                            "messages": case["messages"]})
            lists.append(got)
        interleaved = [c for rank in range(per) for got in lists if rank < len(got) for c in [got[rank]]]
        return interleaved[:n]

    def warmup_case(self, cases: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(WARMUP_TOOLS)

    def describe(self, cases: list[dict[str, Any]]) -> str:
        return (f"{len(cases)} BFCL v4 cases, the first of each category in turn ({self.sources(cases)}); "
                f"`Generator.tool_calls(tools, messages, tool_choice=\"required\")`, parallel calls allowed, "
                f"max_new_tokens {self.max_new_tokens()}")

    def _prompt(self, case: dict[str, Any]) -> tuple[Any, Any]:
        from structgen.frontends.tool_calls import read_tools
        from structgen.tasks.tool_calls import tool_prompt

        specs = read_tools(case["tools"])
        text, fmt, _ = tool_prompt(self.b.tokenizer, specs, case["messages"])
        return specs, (text, fmt)

    def prompt_ids(self, case: dict[str, Any]) -> list[int]:
        _, (text, _) = self._prompt(case)
        return list(self.b.tokenizer.encode(text, add_special_tokens=False))

    def compile(self, gen: Any, case: dict[str, Any]) -> None:
        # What generate_tool_calls_with does before decoding, with its defaults (tool_choice
        # "required", parallel calls, strict, the template's format).
        from structgen.frontends.tool_calls import read_tool_choice, tool_call_grammar

        sg = self.b.structgen
        try:
            specs, (_, fmt) = self._prompt(case)
            mode, names = read_tool_choice("required", specs)
            grammar = tool_call_grammar(specs, fmt, choice=mode, names=names, parallel=True, strict=True)
            gen.compiler.grammar(grammar, source=case["tools"])
        except sg.StructgenError as err:
            raise Unsupported(f"{type(err).__name__}: {err}"[:300]) from err

    def generate(self, gen: Any, case: dict[str, Any], speculate: Any, run: Run) -> None:
        run.seconds, result, err = timed(lambda: gen.tool_calls(
            case["tools"], case["messages"], tool_choice="required", max_new_tokens=self.max_new_tokens(),
            temperature=0.0, speculate=speculate))
        fill_result(run, self.b, result, err)
        if err is None:
            run.value = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                         for c in result.message.get("tool_calls", [])]

    def validate(self, run: Run, case: dict[str, Any]) -> None:
        from jsonschema import Draft202012Validator

        params = {t["function"]["name"]: t["function"].get("parameters", {}) for t in case["tools"]}
        run.valid = (run.status == "ok" and bool(run.value)
                     and all(name in params and Draft202012Validator(params[name]).is_valid(args)
                             for name, args in run.value))


class Sql(Workload):
    name = "sql"
    valid_label = "query passes check"

    def max_new_tokens(self) -> int:
        return self.b.args.sql_max_new_tokens

    def cases(self, n: int) -> list[dict[str, Any]]:
        from sql_data import pairs

        ranked = []  # (rank within its database, set order, database order, case)
        for s, (name, per) in enumerate(SQL_PER_DB.items()):
            seen: dict[str, int] = defaultdict(int)
            order: dict[str, int] = {}
            for p in pairs(name):
                db = p.database.stem
                order.setdefault(db, len(order))
                if seen[db] < per:
                    ranked.append((seen[db], s, order[db], {
                        "id": p.id, "name": f"{db}: {p.question[:70]}", "source": name, "db": db,
                        "question": p.question, "database": str(p.database)}))
                    seen[db] += 1
        ranked.sort(key=lambda r: r[:3])
        return [r[3] for r in ranked][:n]

    def warmup_case(self, cases: list[dict[str, Any]]) -> dict[str, Any]:
        from sql_data import SETS

        db = SETS["spider"][1] / "concert_singer.sqlite"
        if not db.exists():
            db = Path(cases[0]["database"])
        return {"id": "warm-up", "name": "warm-up", "source": "warm-up", "db": db.stem,
                "question": "How many rows has each table?", "database": str(db)}

    def describe(self, cases: list[dict[str, Any]]) -> str:
        return (f"{len(cases)} questions, the first {SQL_PER_DB['defog']} of each defog database and the first "
                f"{SQL_PER_DB['spider']} of each Spider dev one, interleaved by rank ({self.sources(cases)}); "
                f"`Generator.sql(question, db, max_retries=0)` (EXPLAIN check, no execution), "
                f"max_new_tokens {self.max_new_tokens()}")

    def prompt_ids(self, case: dict[str, Any]) -> list[int]:
        from structgen.frontends.sql import read_schema
        from structgen.tasks.sql import sql_prompt

        ddl = read_schema(case["database"]).ddl
        if self.b.generator is not None:
            return list(self.b.generator.chat_ids(sql_prompt(case["question"], ddl)))
        return list(self.b.tokenizer.apply_chat_template(
            [{"role": "user", "content": sql_prompt(case["question"], ddl)}], add_generation_prompt=True,
            tokenize=True, return_dict=False))

    def compile(self, gen: Any, case: dict[str, Any]) -> None:
        # What generate_sql_with compiles, with Generator.sql's default strict=True.
        from structgen.frontends.sql import compile_schema, read_schema

        sg = self.b.structgen
        try:
            compile_schema(read_schema(case["database"]), gen.compiler, strict=True, whitespace="spaces")
        except sg.StructgenError as err:
            raise Unsupported(f"{type(err).__name__}: {err}"[:300]) from err

    def generate(self, gen: Any, case: dict[str, Any], speculate: Any, run: Run) -> None:
        sg = self.b.structgen
        recorder = self.b.recorders[id(gen)]
        run.seconds, result, err = timed(lambda: gen.sql(
            case["question"], case["database"], max_retries=0, max_new_tokens=self.max_new_tokens(),
            temperature=0.0, speculate=speculate))
        if isinstance(err, sg.SqlGenerationError):
            if recorder.last is None:
                raise err
            finish, ids, stats = recorder.last
            run.status = "incomplete" if finish == "incomplete" else "rejected"
            attempt = err.attempts[-1]
            fill_from(run, self.b, attempt.sql, ids, stats, finish if finish != "incomplete" else "length")
            run.detail = attempt.error
        elif err is not None:
            raise err
        else:
            fill_from(run, self.b, result.text, result.token_ids, result.stats, result.finish_reason)


WORKLOAD_CLASSES = {w.name: w for w in (Extraction, ToolCalls, Sql)}


# --------------------------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------------------------


class Config:
    name = ""

    def __init__(self, bench: Bench) -> None:
        self.b = bench

    def available(self) -> str | None:
        """None, or why this configuration cannot run at all."""
        return None

    def supports(self, workload: Workload) -> str | None:
        """None, or why this configuration does not run ``workload``."""
        return None

    def prepare(self, workload: Workload, case: dict[str, Any]) -> Any:
        """Untimed per-case set-up (grammar compilation); raises :class:`Unsupported`."""
        return None

    def generate(self, workload: Workload, case: dict[str, Any], prompt_ids: list[int], state: Any,
                 run: Run) -> None:
        raise NotImplementedError


class StructgenConfig(Config):
    speculate: Any = True
    uses_draft_model = False

    @property
    def generator(self) -> Any:
        return self.b.draft_generator if self.uses_draft_model else self.b.generator

    def available(self) -> str | None:
        if self.b.generator is None:
            return self.b.generator_error or "structgen has no Generator"
        if self.uses_draft_model and self.b.draft_generator is None:
            return self.b.draft_error or "no draft model"
        return None

    def prepare(self, workload: Workload, case: dict[str, Any]) -> Any:
        workload.compile(self.generator, case)

    def generate(self, workload: Workload, case: dict[str, Any], prompt_ids: list[int], state: Any,
                 run: Run) -> None:
        workload.generate(self.generator, case, self.speculate, run)


class StructgenStep(StructgenConfig):
    name = "structgen-step"
    speculate = False


class StructgenForced(StructgenConfig):
    name = "structgen-forced"
    speculate = ("forced",)


class StructgenLookup(StructgenConfig):
    name = "structgen-lookup"
    speculate = ("forced", "lookup")


class StructgenDraft(StructgenConfig):
    name = "structgen-draft"
    speculate = True
    uses_draft_model = True


class HFConfig(Config):
    """``model.generate`` with some logits processors, greedy."""

    incomplete_without_eos = True

    def supports(self, workload: Workload) -> str | None:
        if workload.name != "extraction":
            return f"{self.name} runs the extraction workload only (no tool-call or SQL grammar is built for it here)"
        return None

    def processors(self, state: Any) -> list[Any]:
        return []

    def generate_kwargs(self, workload: Workload, case: dict[str, Any]) -> dict[str, Any]:
        return {"max_new_tokens": workload.max_new_tokens()}

    def generate(self, workload: Workload, case: dict[str, Any], prompt_ids: list[int], state: Any,
                 run: Run) -> None:
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
                **self.generate_kwargs(workload, case))
        run.seconds = clock() - t0
        run.token_ids, ended = self.b.strip(out[0, len(prompt_ids):].tolist())
        run.text = self.b.tokenizer.decode(run.token_ids, skip_special_tokens=True)
        if not ended and self.incomplete_without_eos:
            run.status = "incomplete"


class XGrammarHF(HFConfig):
    name = "xgrammar-hf"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        import xgrammar
        import xgrammar.contrib.hf

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(bench.tokenizer, vocab_size=bench.model.config.vocab_size)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=bench.args.threads)

    def prepare(self, workload: Workload, case: dict[str, Any]) -> Any:
        # strict_mode closes objects (and prefixItems arrays) the schema leaves open, like
        # structgen's strict=True (which closes objects only).
        options = ({"any_whitespace": True} if self.b.structgen_whitespace() == "flexible"
                   else {"any_whitespace": False, "separators": (",", ":")})
        try:
            return self.compiler.compile_json_schema(json.dumps(case["schema"]),
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

    def prepare(self, workload: Workload, case: dict[str, Any]) -> Any:
        # The matcher is llguidance's compiled grammar (built lazily inside it): made here,
        # untimed, a fresh one per generation.
        flexible = self.b.structgen_whitespace() == "flexible"
        schema = closed_objects(case["schema"]) if self.b.args.strict else case["schema"]
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
        self.lengths: dict[str, int] = {}  # case id -> tokens to generate (set by the runner, per workload)

    def supports(self, workload: Workload) -> str | None:
        return None

    def prepare(self, workload: Workload, case: dict[str, Any]) -> Any:
        n = self.lengths.get(case["id"])
        if not n:
            raise Unsupported("no token count from structgen-step (or a fallback) for this case")
        return n

    def generate_kwargs(self, workload: Workload, case: dict[str, Any]) -> dict[str, Any]:
        n = self.lengths[case["id"]]
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


CONFIG_CLASSES = {c.name: c for c in (StructgenStep, StructgenForced, StructgenLookup, StructgenDraft, XGrammarHF,
                                      LLGuidanceHF, PlainGenerate)}


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


#: Where plain-generate takes its token count from, in order of preference.
LENGTH_SOURCES = ("structgen-step", "structgen-lookup", "structgen-forced", "structgen-draft", "xgrammar-hf",
                  "llguidance-hf")


def run_one(bench: Bench, workload: Workload, config: Config, case: dict[str, Any],
            prompt_ids: list[int] | None) -> Run:
    why = config.supports(workload)
    if why:
        return Run(status="unsupported", detail=why)
    if prompt_ids is None and not isinstance(config, StructgenConfig):
        return Run(status="unsupported", detail="no prompt ids for this case (see the errors)")
    run = Run()
    try:
        t0 = time.perf_counter()
        state = config.prepare(workload, case)
        run.compile_s = time.perf_counter() - t0
    except Unsupported as err:
        return Run(status="unsupported", detail=str(err))
    except Exception:  # noqa: BLE001 -- one case must never stop the run
        return Run(status="error", detail=traceback.format_exc(limit=4)[-1500:])
    before = bench.passes
    try:
        config.generate(workload, case, prompt_ids or [], state, run)
    except Exception:  # noqa: BLE001
        run.status, run.detail = "error", traceback.format_exc(limit=6)[-2000:]
    run.passes = bench.passes - before
    if run.status in MEASURED and not isinstance(config, PlainGenerate):
        workload.validate(run, case)
    return run


def run_all(bench: Bench, workload: Workload, configs: list[Config], cases: list[dict[str, Any]],
            reps: int) -> dict[str, dict[str, list[Run]]]:
    """results[config][case id] = one Run per repetition."""
    results: dict[str, dict[str, list[Run]]] = {c.name: defaultdict(list) for c in configs}
    plain = next((c for c in configs if isinstance(c, PlainGenerate)), None)
    if plain is not None:
        plain.lengths = {}
    # plain-generate runs last for each case: it needs the token count of the others.
    order = sorted(configs, key=lambda c: isinstance(c, PlainGenerate))
    prompt_ids = workload.prompt_cache
    for case in cases:
        try:
            prompt_ids[case["id"]] = workload.prompt_ids(case)
        except Exception:  # noqa: BLE001 -- the structgen configurations still run
            prompt_ids[case["id"]] = None
            print(f"\n[{workload.name}] no prompt ids for {case['id']}:\n{traceback.format_exc(limit=3)}",
                  file=sys.stderr)
    total = reps * len(cases)
    for rep in range(reps):
        for i, case in enumerate(cases):
            for config in order:
                if plain is config:
                    for src in LENGTH_SOURCES:
                        got = results.get(src, {}).get(case["id"])
                        if got and got[-1].status in MEASURED and got[-1].tokens:
                            plain.lengths[case["id"]] = got[-1].tokens
                            break
                run = run_one(bench, workload, config, case, prompt_ids[case["id"]])
                results[config.name][case["id"]].append(run)
                if run.status == "error":
                    print(f"\n[{workload.name} {config.name}] error on {case['id']} {case['name']}:\n{run.detail}",
                          file=sys.stderr)
            done = rep * len(cases) + i + 1
            print(f"\r[{workload.name}] {done}/{total} (rep {rep + 1}, {case['id']})", end="", file=sys.stderr,
                  flush=True)
    print(file=sys.stderr)
    return results


def warm_up(bench: Bench, workload: Workload, configs: list[Config], cases: list[dict[str, Any]]) -> None:
    """One untimed generation per configuration on a case that is not in the benchmark."""
    case = workload.warmup_case(cases)
    try:
        ids = workload.prompt_ids(case)
    except Exception:  # noqa: BLE001
        ids = None
    for config in configs:
        if config.supports(workload):
            continue
        if isinstance(config, PlainGenerate):
            config.lengths[case["id"]] = 16
        run = run_one(bench, workload, config, case, ids)
        if run.status not in MEASURED:
            print(f"[{workload.name} {config.name}] warm-up {run.status}: {run.detail}", file=sys.stderr)


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
    return [r for r in runs if r.status in MEASURED]


def all_runs(by_case: dict[str, list[Run]]) -> list[Run]:
    return [r for rs in by_case.values() for r in rs]


def per_case_tps(results: dict[str, dict[str, list[Run]]], config: str) -> dict[str, float]:
    """Tokens/s per case: the median over repetitions."""
    out = {}
    for cid, runs in results[config].items():
        got = [r.tokens_per_s for r in measured(runs)]
        got = [x for x in got if x == x]
        if got:
            out[cid] = pct(got, 50)
    return out


def ratio(results: dict[str, dict[str, list[Run]]], a: str, b: str) -> tuple[list[float], int]:
    """Per-case tokens/s(a) / tokens/s(b), on the cases both measured."""
    if a not in results or b not in results:
        return [], 0
    ta, tb = per_case_tps(results, a), per_case_tps(results, b)
    common = [p for p in ta if p in tb]
    return [ta[p] / tb[p] for p in common], len(common)


def ratio_cell(results: dict[str, dict[str, list[Run]]], a: str, b: str) -> str:
    """Median over cases of tokens/s(a) / tokens/s(b), on the cases both measured."""
    if a == b:
        return "1"
    ratios, n = ratio(results, a, b)
    if not n:
        return "–"
    return f"{fmt(pct(ratios, 50))} (p10 {fmt(pct(ratios, 10))}, p90 {fmt(pct(ratios, 90))}; n={n})"


def reference(results: dict[str, dict[str, list[Run]]]) -> str:
    """The configuration ratios are taken against: plain-generate where it measured a case, else structgen-step."""
    if measured(all_runs(results.get("plain-generate", {}))):
        return "plain-generate"
    return "structgen-step"


def config_row(name: str, results: dict[str, dict[str, list[Run]]], ref: str) -> list[str]:
    runs_by_case = results[name]
    runs = all_runs(runs_by_case)
    ok = measured(runs)
    tps = [r.tokens_per_s for r in ok]
    tokens = sum(r.tokens for r in ok)
    passes = sum(r.passes for r in ok)
    stats_passes = [r.stats["forward_passes"] for r in ok if r.stats and r.stats.get("forward_passes") is not None]
    drafted = sum((r.stats or {}).get("drafted_tokens") or 0 for r in ok)
    accepted = sum((r.stats or {}).get("accepted_tokens") or 0 for r in ok)
    is_sg = name in STRUCTGEN_CONFIGS
    compile_ms = [r.compile_s * 1e3 for r in ok if r.compile_s is not None]
    if not runs_by_case or all(r.status == "skipped" for r in runs):
        return [name, "not run"] + ["–"] * 14
    if name == ref:
        vs = "1"
    else:
        ratios, n = ratio(results, name, ref)
        vs = f"{fmt(pct(ratios, 50))} (n={n})" if n else "–"
    return [
        name,
        share(len(ok), len(runs)),
        str(sum(r.status == "unsupported" for r in runs)) + " / " + str(sum(r.status == "error" for r in runs)),
        fmt(pct(tps, 50)), fmt(pct(tps, 90)), fmt(pct(tps, 10)),
        vs,
        fmt(pct([r.seconds for r in ok], 50)),
        fmt(pct([r.tokens for r in ok], 50)),
        fmt(passes / tokens if tokens else float("nan")),
        fmt(sum(stats_passes) / tokens if is_sg and tokens and len(stats_passes) == len(ok) else float("nan")),
        (fmt(accepted / drafted) + f" ({accepted}/{drafted})") if is_sg and drafted else "–",
        share(sum(r.status == "incomplete" for r in ok), len(ok)),
        share(sum(r.status == "rejected" for r in ok), len(ok)) if name in STRUCTGEN_CONFIGS else "–",
        share(sum(r.valid for r in ok), len(ok)) if name != "plain-generate" else "–",
        fmt(pct(compile_ms, 50)),
    ]


def source_order(names: set[str]) -> list[str]:
    return [s for s in SOURCES if s in names] + sorted(names - set(SOURCES))


def acceptance_rows(results: dict[str, dict[str, list[Run]]], configs: list[str]) -> tuple[list[str], list[list[str]]]:
    """Per structgen configuration and draft source: accepted / drafted tokens (stats.by_source)."""
    totals: dict[str, dict[str, list[int]]] = {}
    for name in configs:
        if name not in STRUCTGEN_CONFIGS or name == "structgen-step" or name not in results:
            continue
        got: dict[str, list[int]] = {}
        for r in measured(all_runs(results[name])):
            for source, counts in ((r.stats or {}).get("by_source") or {}).items():
                pair = got.setdefault(source, [0, 0])
                pair[0] += counts["accepted_tokens"]
                pair[1] += counts["drafted_tokens"]
        totals[name] = got
    sources = source_order({s for got in totals.values() for s in got})
    if not sources:
        return [], []
    rows = [[name, *((fmt(got[s][0] / got[s][1]) + f" ({got[s][0]}/{got[s][1]})") if got.get(s) and got[s][1]
                     else "–" for s in sources)] for name, got in totals.items()]
    return ["configuration", *sources], rows


def passes_rows(results: dict[str, dict[str, list[Run]]], configs: list[str]) -> tuple[list[str], list[list[str]]]:
    """Per structgen configuration: decoding passes by the source of the draft they verified."""
    totals: dict[str, dict[str, int]] = {}
    for name in configs:
        if name not in STRUCTGEN_CONFIGS or name not in results:
            continue
        got: dict[str, int] = defaultdict(int)
        for r in measured(all_runs(results[name])):
            for source, n in ((r.stats or {}).get("passes_by_source") or {}).items():
                got[source] += n
        totals[name] = got
    found = {s for got in totals.values() for s in got}
    sources = (["none"] if "none" in found else []) + source_order(found - {"none"})
    rows = []
    for name, got in totals.items():
        total = sum(got.values())
        cells = [f"{got[s]} ({100 * got[s] / total:.0f}%)" if got.get(s) else "–" for s in sources]
        rows.append([name, str(total), *cells])
    return ["configuration", "decoding passes", *sources], rows


def versions() -> str:
    return package_versions(("torch", "transformers", "xgrammar", "llguidance", "jsonschema", "numpy"))


def agreement(results: dict[str, dict[str, list[Run]]], cases: list[dict[str, Any]], a: str, b: str,
              tokenizer: Any) -> list[str]:
    """Cases where ``a`` and ``b`` (first repetition, both measured) produced different tokens."""
    if a not in results or b not in results:
        return []
    lines, same, both = [], 0, 0
    for case in cases:
        ra, rb = results[a].get(case["id"]), results[b].get(case["id"])
        if not ra or not rb or not measured(ra[:1]) or not measured(rb[:1]):
            continue
        both += 1
        x, y = ra[0].token_ids, rb[0].token_ids
        if x == y:
            same += 1
            continue
        k = next((i for i, (s, t) in enumerate(zip(x, y)) if s != t), min(len(x), len(y)))
        prefix = tokenizer.decode(x[:k])[-40:]
        lines.append(f"  - `{case['id']}` {case['name']}: first difference at token {k} after {prefix!r}: "
                     f"{a} {tokenizer.decode(x[k:k + 6])!r} vs {b} {tokenizer.decode(y[k:k + 6])!r} "
                     f"({len(x)} vs {len(y)} tokens)")
    if not both:
        return []
    mark = "" if same == both or a not in STRUCTGEN_CONFIGS or b not in STRUCTGEN_CONFIGS else " **(must be all)**"
    return [f"- {a} vs {b}: identical tokens on {same}/{both} cases{mark}", *lines]


def problems(results: dict[str, dict[str, list[Run]]], cases: list[dict[str, Any]], workload: Workload,
             bench: Bench) -> list[str]:
    lines = []
    names = {c["id"]: c["name"] for c in cases}
    for config, by_case in results.items():
        for cid, runs in by_case.items():
            for rep, r in enumerate(runs):
                where = f"**{config}** `{cid}` {names[cid]} (rep {rep + 1})"
                if r.status == "error":
                    lines.append(f"- {where} error:\n  ```\n  " + (r.detail or "").strip().replace("\n", "\n  ") + "\n  ```")
                elif r.status == "incomplete":
                    lines.append(f"- {where} hit the {workload.max_new_tokens()}-token cap: ...{r.text[-80:]!r}")
                elif r.status == "ok" and not r.valid and config != "plain-generate":
                    lines.append(f"- {where} output is not valid ({workload.valid_label}): {r.text[:200]!r}")
                if config in STRUCTGEN_CONFIGS and r.stats and r.status in MEASURED:
                    s = r.stats
                    if s.get("forward_passes") is not None and s["forward_passes"] != r.passes:
                        lines.append(f"- {where} stats.forward_passes {s['forward_passes']} but the model hook "
                                     f"counted {r.passes} forward calls")
                    by_source = sum((s.get("passes_by_source") or {}).values())
                    if s.get("forward_passes") is not None and by_source != s["forward_passes"] - 1:
                        lines.append(f"- {where} stats.passes_by_source adds up to {by_source} passes, "
                                     f"stats.forward_passes - 1 (the prefill) is {s['forward_passes'] - 1}")
                    if (s.get("new_tokens") is not None and s["new_tokens"] != len(r.token_ids)
                            and r.finish != "repeated_call"):
                        lines.append(f"- {where} stats.new_tokens {s['new_tokens']} but {len(r.token_ids)} tokens "
                                     "before end-of-sequence in token_ids")
                    if (s.get("accepted_tokens") or 0) > (s.get("drafted_tokens") or 0):
                        lines.append(f"- {where} accepted {s['accepted_tokens']} > drafted {s['drafted_tokens']}")
                    if (r.status == "ok" and r.text and r.token_ids
                            and bench.tokenizer.decode(r.token_ids, skip_special_tokens=True) != r.text):
                        lines.append(f"- {where} result.text differs from decode(result.token_ids)")
    return lines


def workload_section(args: argparse.Namespace, bench: Bench, workload: Workload, cases: list[dict[str, Any]],
                     results: dict[str, dict[str, list[Run]]], wall_s: float) -> list[str]:
    ref = reference(results)
    header = ["configuration", "measured", "unsupported / errors", "tok/s p50", "p90", "p10", f"tok/s vs {ref}",
              "seconds p50", "tokens p50", "passes/token (hook)", "passes/token (stats)", "acceptance",
              "hit cap", "rejected", workload.valid_label, "compile ms p50"]
    rows = [config_row(c, results, ref) for c in args.configs]
    refs = [c for c in ("plain-generate", "structgen-step", *PEERS)
            if c in args.configs and measured(all_runs(results.get(c, {})))]
    ratio_rows = [[c, *(ratio_cell(results, c, r) for r in refs)] for c in args.configs
                  if measured(all_runs(results.get(c, {})))]
    prompt_lens = [len(ids) for ids in workload.prompt_cache.values() if ids is not None]
    acc_header, acc = acceptance_rows(results, args.configs)
    pass_header, by_source = passes_rows(results, args.configs)
    sg = [c for c in args.configs if c in STRUCTGEN_CONFIGS and c != "structgen-step"]
    peers = [c for c in PEERS if c in args.configs and workload.name == "extraction"]
    unsupported = [f"- {c} `{cid}`: {runs[0].detail}" for c, by in results.items() for cid, runs in by.items()
                   if runs and runs[0].status == "unsupported"]
    rejected = [f"- {c} `{cid}`: {runs[0].text!r}: {runs[0].detail}" for c, by in results.items()
                for cid, runs in by.items() if runs and runs[0].status == "rejected"]
    return [
        f"## Workload `{workload.name}`",
        "",
        f"- cases: {workload.describe(cases)}",
        f"- prompt tokens p50 {fmt(pct(prompt_lens, 50))}, max {max(prompt_lens) if prompt_lens else '–'}; "
        f"reps {args.reps} (interleaved); wall time {wall_s:.0f} s",
        "",
        markdown_table(header, rows),
        "",
        f"Ratios of tokens/s: median over cases of (row / column), on the cases both measured; above 1 means "
        f"the row is faster (the `vs {ref}` column above is the same median"
        + (", against structgen-step since plain-generate measured no case here" if ref == "structgen-step" else "")
        + ").",
        "",
        markdown_table(["configuration", *(f"vs {r}" for r in refs)], ratio_rows) if refs else "no reference measured",
        "",
        "Acceptance by draft source (`stats.by_source`: accepted / drafted tokens, summed over cases):",
        "",
        markdown_table(acc_header, acc) if acc else "no draft was verified",
        "",
        "Decoding passes (prefill excluded) by the source of the draft they verified "
        "(`stats.passes_by_source`; `none`: a plain step), summed over cases:",
        "",
        markdown_table(pass_header, by_source) if by_source else "none",
        "",
        f"### Output agreement ({workload.name}, first repetition)",
        "",
        "Greedy drafting is lossless: every structgen configuration must produce exactly structgen-step's "
        "tokens." + (" The peers constrain with the same schema and whitespace, so differences point to a "
                     "grammar difference (e.g. key order, optional keys, number formats) in one of the engines."
                     if peers else ""),
        "",
        *(line for c in sg for line in agreement(results, cases, c, "structgen-step", bench.tokenizer)),
        *(line for c in peers for line in agreement(results, cases, "structgen-step", c, bench.tokenizer)),
        *(agreement(results, cases, "xgrammar-hf", "llguidance-hf", bench.tokenizer) if len(peers) == 2 else []),
        "",
        f"### Problems ({workload.name}): errors, outputs that hit the cap or are not valid, stats that disagree",
        "",
        *(problems(results, cases, workload, bench) or ["none"]),
        "",
        *(details(f"Rejected queries ({workload.name}, first repetition)", rejected) if workload.name == "sql" else []),
        *details(f"Unsupported ({workload.name})", [
            *unsupported,
            *([f"- structgen configurations not run: {bench.generator_error or 'structgen has no Generator'}"]
              if bench.generator is None and any(c in STRUCTGEN_CONFIGS for c in args.configs) else [])]),
    ]


def curve(relative: dict[int, float]) -> str:
    return ", ".join(f"{k}: {v:.3g}" for k, v in sorted(relative.items()))


def report(args: argparse.Namespace, bench: Bench, sections: list[list[str]],
           load: tuple[list[float], list[float]], wall_s: float) -> str:
    draft = ("not run" if "structgen-draft" not in args.configs
             else bench.draft_line if bench.draft_model is not None
             else f"failed: {(bench.draft_error or '?').strip().splitlines()[-1]}")
    parts = [
        "# End-to-end generation: structgen against plain generate and the peers",
        "",
        *run_lines(args.threads, load, wall_s, versions()),
        f"- model: {getattr(bench.model.config, '_name_or_path', '?') or 'SmolLM2-135M-Instruct'} "
        f"({type(bench.model).__name__}, {bench.model.dtype}), tokenizer of {len(bench.tokenizer)} tokens; "
        "greedy, batch 1",
        f"- draft model (`--draft {args.draft}`, structgen-draft only): {draft}",
        f"- pass costs: one `PassCosts.for_model(model)` shared by every structgen configuration (learning; "
        f"{'saved to disk as it changes, as structgen does' if args.save_costs else 'not saved: --no-save-costs'}): before {{{curve(bench.costs_before)}}}, after "
        f"{{{curve(bench.pass_costs.relative)}}}; 1-position pass p50 "
        f"{fmt((bench.pass_costs.step_seconds or float('nan')) * 1e3)} ms",
        f"- workloads: {', '.join(args.workloads)}; configurations: {', '.join(args.configs)}",
        *(f"- **{name} not run**: {why}" for name, why in bench.not_run.items()),
        "",
        "Tokens: tokens decoded (structgen: `stats.new_tokens`; the others: generated tokens before "
        "end-of-sequence). tok/s: tokens / wall seconds of the generation call (prefill included, grammar "
        "compile excluded), per case and repetition. passes/token: forward calls of the model (prefill "
        "included) counted by a hook on it, summed over cases, / tokens; for structgen also from "
        "`stats.forward_passes`. acceptance: accepted / drafted tokens. hit cap: cases that ended at "
        "max_new_tokens (invalid by definition). rejected (sql): the query failed its check "
        "(`SqlGenerationError`; timed and compared all the same). plain-generate runs exactly as many "
        "tokens as structgen-step decoded for the case, so its validity is not judged. The peers run the "
        "extraction workload only.",
        "",
    ]
    for section in sections:
        parts += section
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=(*WORKLOADS, "all"), default="extraction",
                   help="extraction (default), bfcl, sql, or all three")
    p.add_argument("--n", type=int, default=None,
                   help="cases per workload (default: " + ", ".join(f"{w} {n}" for w, n in DEFAULT_N.items()) + ")")
    p.add_argument("--reps", type=int, default=1, help="repetitions, interleaved (default 1)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help="comma-separated subset of " + ",".join(CONFIGS)
                        + "".join(f" ({a} = {b})" for a, b in ALIASES.items()))
    p.add_argument("--draft", type=draft_spec, default="int8",
                   help="structgen-draft's draft model: int8 (default; the model dynamically quantized) or "
                        "truncated:N (its first N layers)")
    p.add_argument("--save-costs", action=argparse.BooleanOptionalAction, default=True,
                   help="let structgen save the pass-cost curve it learns to disk, as it does by default "
                        "(--no-save-costs: learn in this run only, e.g. for a smoke run on a busy machine)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="extraction and bfcl (default 256)")
    p.add_argument("--sql-max-new-tokens", type=int, default=128, help="sql (default 128)")
    p.add_argument("--whitespace", choices=("compact", "flexible"), default="compact",
                   help="Generator.json's whitespace (default compact, its default); the peers match it")
    p.add_argument("--strict", action=argparse.BooleanOptionalAction, default=True,
                   help="Generator.json's strict (closed objects; default on, its default); xgrammar "
                        "strict_mode and a closed schema for llguidance match it")
    p.add_argument("--pairs", type=Path, default=PAIRS, help="extraction pairs file (default data/e2e_pairs.jsonl)")
    p.add_argument("--regenerate-pairs", action="store_true", help="rebuild the pairs file from MaskBench")
    p.add_argument("--seed", type=int, default=0, help="seed for --regenerate-pairs")
    p.add_argument("--data", type=Path, default=MASKBENCH, help="maskbench.jsonl.gz")
    p.add_argument("--out", type=Path, default=None,
                   help="report path (default results/e2e.md, results/e2e-<workload>.md for the others)")
    args = p.parse_args(argv)
    names = [ALIASES.get(name.strip(), name.strip()) for name in args.configs.split(",")]
    args.configs = choose(p, ",".join(names), CONFIGS, "configurations")
    args.configs = [c for c in CONFIGS if c in args.configs]  # canonical order
    args.workloads = list(WORKLOADS) if args.workload == "all" else [args.workload]
    if args.n is not None and args.n < 1:
        p.error("--n must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # llguidance masks: one thread, as in engine.py
    load_before = list(os.getloadavg())
    t_start = time.perf_counter()

    bench = Bench(args)
    configs: list[Config] = []
    for name in args.configs:
        try:
            config = CONFIG_CLASSES[name](bench)
        except ImportError as err:  # a peer that is not installed
            bench.not_run[name] = f"{type(err).__name__}: {err}"
        else:
            why = config.available()
            if not why:
                configs.append(config)
                continue
            bench.not_run[name] = why.strip().splitlines()[-1]
        print(f"[{name}] not run: {bench.not_run[name]}", file=sys.stderr)

    sections = []
    for name in args.workloads:
        t_workload = time.perf_counter()
        workload = WORKLOAD_CLASSES[name](bench)
        cases = workload.cases(args.n or DEFAULT_N[name])
        warm_up(bench, workload, configs, cases)
        # Long-lived set-up objects out of the cyclic collector's way, as a serving process would.
        gc.collect()
        gc.freeze()
        results = run_all(bench, workload, configs, cases, args.reps)
        gc.unfreeze()
        for config in args.configs:  # configurations that could not run: every case 'skipped'
            results.setdefault(config, {c["id"]: [Run(status="skipped")] for c in cases})
        sections.append(workload_section(args, bench, workload, cases, results, time.perf_counter() - t_workload))

    text = report(args, bench, sections, (load_before, list(os.getloadavg())), time.perf_counter() - t_start)
    default = "e2e.md" if args.workload == "extraction" else f"e2e-{args.workload}.md"
    publish(text, args.out or RESULTS / default)


if __name__ == "__main__":
    main()
