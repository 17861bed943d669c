"""MaskBench at scale: structgen and its peers on the same schemas, instances and tokenizer.

Run (the whole corpus by default; results are cached, so an interrupted run resumes)::

    .venv/bin/python benchmarks/maskbench.py                               # 11,305 schemas, all engines
    .venv/bin/python benchmarks/maskbench.py --n 200 --seed 0              # a round-robin sample
    .venv/bin/python benchmarks/maskbench.py --n 50 --engines structgen,llguidance --tokenizer gemma
    .venv/bin/python benchmarks/maskbench.py --n 200 --timeout 20 --mem-gib 4 --out /tmp/mb.md

Engine configurations (``--engines``, default all): ``structgen`` (``compile_json_schema``
defaults: walking grammar, open objects, not lenient), ``llguidance`` (library defaults, not
lenient), ``xgrammar-strict`` / ``xgrammar-nonstrict`` (``strict_mode`` True / False, eager
compile), ``outlines-core`` (``build_regex_from_schema``, then ``Index`` / ``Guide`` over the
tokenizer's vocabulary). Each compiles every schema twice, once per serialization it walks:
compact whitespace for ``json.dumps(x, separators=(",", ":"))`` and flexible whitespace for
``json.dumps(x, indent=2)`` (structgen ``whitespace="compact"`` / ``"flexible"``; llguidance
``whitespace_flexible``; xgrammar ``any_whitespace``; outlines-core whitespace pattern ``""`` /
``[ \\t\\n\\r]*``).

Definitions:

* An instance is **accepted** when every token of its serialization is allowed by the mask and
  advanced by the matcher, and end-of-sequence is allowed after the last token. Where the mask
  allows end-of-sequence *before* the end, the text walked so far must itself be a valid
  instance (python-jsonschema); otherwise that is an **early-EOS error**.
* A **validation error** is a valid instance rejected; an **invalidation error** an invalid
  instance accepted in full. A schema **passes** when it compiles (both serializations) and
  none of its walks has any of these three errors.
* Which instances are valid: the dataset's label, overruled by python-jsonschema (draft from
  ``$schema``, default 2020-12, ``format_checker=FormatChecker()``) where it judges otherwise.
  For the schemas of ``python_jsonschema_disagreements.json`` only instances that both call
  valid are walked (no invalid-instance checks).
* Instances are serialised with object keys in schema order (``tests/maskbench.py``'s
  ``schema_order``): the peer engines fix key order. ``--key-order data`` walks them with keys
  as the dataset writes them instead (structgen's walking grammar takes any order; its results
  are cached apart).
* **compile** -- time to the first mask of a schema new to the process (compile + matcher +
  first mask), compact serialization. **mask** -- every later mask of every walk, cold states
  included (the first mask of a second matcher on the same grammar too). **peak MiB** -- how
  far the schema (both compiles, all walks) raised the worker's peak RSS. **forced share** --
  among the masks of walks of valid instances (first mask to the end-of-sequence position), the
  share allowing exactly one token, an engine's end-of-sequence tokens counting as one.

Each configuration runs in a long-lived worker subprocess (one thread, ``RLIMIT_AS`` cap
``--mem-gib``); a compile over ``--timeout`` s or walks over ``--walk-timeout`` s kill it, so do
a crash or an allocation failure: only that schema is lost, the next one gets a fresh worker.
Results are appended per schema to ``benchmarks/results/cache/maskbench-<engine>.jsonl``, keyed by
engine configuration and version (structgen: plus a digest of its source), tokenizer
fingerprint, schema row digest, python-jsonschema version and harness version; a later run
measures only what is missing. The markdown report goes to stdout and to
``benchmarks/results/maskbench.md`` (``--out``).
"""

from __future__ import annotations

import engine  # noqa: I001 -- first: sets the one-thread environment the workers inherit

import argparse
import datetime
import faulthandler
import gc
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import resource
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _report import choose, cpu_model, git_commit, markdown_table, package_versions, source_of, publish

ROOT = engine.ROOT


def _load_tests_maskbench() -> Any:
    """``tests/maskbench.py`` (stable hashing, ``schema_order``), under a name that does not
    clash with this script's."""
    path = ROOT / "tests" / "maskbench.py"
    spec = importlib.util.spec_from_file_location("structgen_tests_maskbench", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


tests_maskbench = _load_tests_maskbench()

#: Bump when what is measured or how it is judged changes: old cache entries stop matching.
HARNESS_VERSION = 2
CACHE_DIR = engine.RESULTS / "cache"
SETUP_TIMEOUT_S = 600  # tokenizer + engine set-up + warm-up in a fresh worker
#: serialization walked -> the grammar whitespace that accepts it
SERIALIZATIONS = {"compact": "compact", "indent": "flexible"}


class OutlinesEngine(engine.Engine):
    """outlines-core's JSON path: ``build_regex_from_schema``, an ``Index`` of that regex over
    the vocabulary, a ``Guide`` per walk.

    The vocabulary maps each token's bytes (as structgen's ``Vocabulary`` decodes the same
    tokenizer; special tokens left out) to its ids; outlines-core takes one end-of-sequence id,
    the tokenizer's ``eos_token_id``.
    """

    name = "outlines-core"
    package = "outlines_core"
    #: whitespace pattern between JSON tokens: none (compact) or any JSON whitespace (indent=2)
    WHITESPACE = {"compact": "", "flexible": r"[ \t\n\r]*"}

    def __init__(self, tokenizer: Any, whitespace: str) -> None:
        import outlines_core
        import outlines_core.json_schema
        import structgen

        super().__init__(tokenizer, whitespace)
        self.oc = outlines_core
        self.build_regex = outlines_core.json_schema.build_regex_from_schema
        eos = tokenizer.eos_token_id
        tokens = structgen.Vocabulary.from_tokenizer(tokenizer).tokens
        by_bytes: dict[bytes, list[int]] = {}
        for token_id, spelled in enumerate(tokens):
            if spelled is not None and token_id != eos:
                by_bytes.setdefault(spelled, []).append(token_id)
        self.vocabulary = outlines_core.Vocabulary(eos, by_bytes)
        self.mask = np.zeros((max(len(tokens), len(tokenizer)) + 31) // 32, dtype=np.int32)
        self.eos_ids = [eos]

    def grammar(self, schema: Any, whitespace: str | None = None) -> Any:
        pattern = self.WHITESPACE["flexible" if self.flexible(whitespace) else "compact"]
        try:
            regex = self.build_regex(json.dumps(schema), pattern)
            return self.oc.Index(regex, self.vocabulary)
        except Exception as err:  # noqa: BLE001 -- outlines-core raises ValueError/TypeError
            raise engine.Unsupported(f"{type(err).__name__}: {err}") from err

    def matcher(self, grammar: Any) -> Any:
        return self.oc.Guide(grammar)

    def fill(self, matcher: Any) -> None:
        matcher.write_mask_into(self.mask.ctypes.data, self.mask.size, 4)

    def advance(self, matcher: Any, token_id: int) -> bool:
        try:
            matcher.advance(token_id, return_tokens=False)
        except ValueError:  # no transition on that token
            return False
        return True


CONFIGS: dict[str, type[engine.Engine]] = {
    "structgen": engine.StructgenEngine,
    "llguidance": engine.LLGuidanceEngine,
    "xgrammar-strict": engine.XGrammarStrictEngine,
    "xgrammar-nonstrict": engine.XGrammarEngine,
    "outlines-core": OutlinesEngine,
}


# --------------------------------------------------------------------------------------------
# Data: sample, rows, python-jsonschema's verdicts
# --------------------------------------------------------------------------------------------

_NAME = re.compile(r'^\{"name":\s*("(?:[^"\\]|\\.)*")')


def _name_of(line: str) -> str:
    """The ``name`` of a MaskBench line without parsing the rest (it is the first key)."""
    m = _NAME.match(line)
    return json.loads(m.group(1)) if m else json.loads(line)["name"]


def scan(path: Path) -> dict[str, str]:
    """``{name: digest of the row's line}`` in file order (the digest keys the cache)."""
    digests = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            digests[_name_of(line)] = hashlib.sha256(line.encode("utf-8")).hexdigest()[:20]
    return digests


def read_lines(path: Path, names: set[str]) -> dict[str, str]:
    """The raw lines of the rows named ``names`` (parsed one at a time, when measured)."""
    lines = {}
    if names:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                name = _name_of(line)
                if name in names:
                    lines[name] = line
    return lines


def disagreeing_schemas(data: Path) -> frozenset[str]:
    """Schemas listed in ``python_jsonschema_disagreements.json`` beside the data file."""
    path = data.parent / "python_jsonschema_disagreements.json"
    return frozenset(json.loads(path.read_text())["schemas"]) if path.is_file() else frozenset()


@dataclass
class Prepared:
    """One schema ready to send to a worker, with what the judge decided."""

    request: dict[str, Any]
    judge: dict[str, Any]
    validator: Any  # None when python-jsonschema could not judge
    disagreeing: bool
    texts: dict[tuple[int, str], str] = field(default_factory=dict)


def ordered(data: Any, schema: Any) -> Any:
    """``data`` with keys in schema order (unchanged where the reordering fails)."""
    try:
        return tests_maskbench.schema_order(data, schema)
    except Exception:  # noqa: BLE001 -- key order is a convenience, never a verdict
        return data


def prepare(line: str, disagreeing: bool, key_order: str = "schema") -> Prepared:
    """Parse a row, judge its instances, order their keys (``key_order="schema"``; ``"data"``
    keeps the dataset's order): the request a worker measures."""
    row = json.loads(line)
    schema, tests = row["schema"], row.get("tests") or []
    kept, info, validator = tests_maskbench.judge_tests(schema, tests, disagreeing)
    instances, texts = [], {}
    info["unserializable"] = []
    for i, expected in kept:
        data = ordered(tests[i]["data"], schema) if key_order == "schema" else tests[i]["data"]
        try:  # a number out of float range parses as inf: not JSON any more
            json.dumps(data, allow_nan=False)
        except ValueError:
            info["unserializable"].append(i)
            continue
        for serialization, whitespace in SERIALIZATIONS.items():
            texts[(i, serialization)] = engine.serialize(data, whitespace)
        instances.append({"i": i, "expected": expected, "data": data})
    request = {"name": row["name"], "schema": schema, "instances": instances}
    return Prepared(request, info, validator, disagreeing, texts)


def judge_prefixes(prepared: Prepared, result: dict[str, Any]) -> None:
    """Mark each walk whose engine allowed end-of-sequence early after a text that is not a
    valid instance (``eos_errors``); add the instance text to walks with a wrong verdict."""
    for walk in result.get("walks", []):
        errors = []
        for pos, prefix in walk.get("eos", []):
            try:
                value = json.loads(prefix)
            except ValueError:
                errors.append([pos, prefix, "not a JSON value"])
                continue
            if prepared.validator is None:
                continue  # python-jsonschema cannot judge this schema
            try:
                if prepared.validator.is_valid(value):
                    continue
                why = tests_maskbench.why_invalid(prepared.validator, value)
            except Exception as err:  # noqa: BLE001
                why = f"python-jsonschema: {type(err).__name__}"
            if not prepared.disagreeing:
                errors.append([pos, prefix, why])
        if errors:
            walk["eos_errors"] = errors
        if walk["expected"] != walk["accepted"] or errors:
            walk["text"] = prepared.texts[(walk["i"], walk["ws"])][:300]


# --------------------------------------------------------------------------------------------
# Worker: one engine configuration, one schema after another
# --------------------------------------------------------------------------------------------


def eos_allowed(eng: engine.Engine) -> bool:
    """Whether the current mask allows one of the engine's end-of-sequence tokens."""
    return any(eng.allows(e) for e in eng.eos_ids)


def is_forced(eng: engine.Engine) -> bool:
    """Whether the current mask allows exactly one token (end-of-sequence ids counting as one)."""
    allowed = int(np.bitwise_count(eng.mask.view(np.uint32)).sum())
    eos = sum(eng.allows(e) for e in eng.eos_ids)
    return allowed - eos + (eos > 0) == 1


def walk_tokens(eng: engine.Engine, matcher: Any, tokens: list[int], filled: bool,
                count_forced: bool) -> dict[str, Any]:
    """Walk ``tokens`` on ``matcher`` (its first mask already filled when ``filled``).

    Unlike engine.py's ``walk`` this reuses a compiled grammar, notes every position where
    end-of-sequence is allowed before the end, and counts forced positions.
    """
    clock = time.perf_counter_ns
    out: dict[str, Any] = {"accepted": False, "at": None, "why": None, "mask": [], "eos": [],
                           "positions": 0, "forced": 0}
    if not filled:
        t0 = clock()
        eng.fill(matcher)
        out["mask"].append((clock() - t0) / 1e3)
    for pos, token_id in enumerate(tokens):
        if count_forced:
            out["positions"] += 1
            out["forced"] += is_forced(eng)
        if eos_allowed(eng):
            out["eos"].append(pos)
        if not eng.allows(token_id):
            out["at"], out["why"] = pos, "masked out"
            return out
        if not eng.advance(matcher, token_id):
            out["at"], out["why"] = pos, "allowed by the mask, refused by the matcher"
            return out
        t0 = clock()
        eng.fill(matcher)
        out["mask"].append((clock() - t0) / 1e3)
    if count_forced:
        out["positions"] += 1
        out["forced"] += is_forced(eng)
    out["accepted"] = eos_allowed(eng)
    if not out["accepted"]:
        out["at"], out["why"] = len(tokens), "end-of-sequence not allowed after the whole instance"
    return out


_SPECIAL_IDS: dict[int, frozenset[int]] = {}


def encode_exactly(tokenizer: Any, text: str) -> list[int] | None:
    """Token ids spelling exactly ``text`` with no special token (None: the tokenizer cannot)."""
    try:  # text such as "<|im_end|>" inside an instance is spelled, not the special token
        ids = tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
    except TypeError:  # a tokenizer without split_special_tokens
        ids = tokenizer.encode(text, add_special_tokens=False)
    special = _SPECIAL_IDS.setdefault(id(tokenizer), frozenset(tokenizer.all_special_ids))
    if special.intersection(ids):
        return None
    return ids if tokenizer.decode(ids, clean_up_tokenization_spaces=False) == text else None


def crash_summary(err: BaseException) -> dict[str, str]:
    """Type, first message line and the innermost frame inside structgen (else the innermost)."""
    frames = traceback.extract_tb(err.__traceback__)
    inside = [f for f in frames if "/structgen/" in f.filename.replace("\\", "/")]
    frame = (inside or frames or [None])[-1]
    where = f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}" if frame else ""
    message = (str(err).splitlines() or [""])[0][:200]
    return {"type": type(err).__name__, "message": f"{message} ({where})"}


def refusal(err: engine.Unsupported) -> dict[str, Any]:
    """A compile error: the engine's error type and message, structgen's keyword."""
    cause = err.__cause__ or err
    message = str(cause)
    if message.startswith(type(cause).__name__ + ": "):
        message = message[len(type(cause).__name__) + 2:]
    kind = type(cause).__name__ if err.__cause__ is not None else "refused"  # e.g. LLMatcher.is_error()
    return {"type": kind, "message": message[:300], "keyword": err.keyword}


def measure_schema(eng: engine.Engine, tokenizer: Any, request: dict[str, Any],
                   send: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Compile the schema once per serialization and walk every instance on it."""
    result: dict[str, Any] = {"status": "ok", "compile_ms": {}, "walks": [], "untokenizable": []}
    gc.collect()  # leftovers of the previous schema, not during this one's clock
    engine.reset_peak_rss()
    base_kib = engine.rss_kib()
    serialization = "compact"
    try:
        for serialization, whitespace in SERIALIZATIONS.items():
            walks = []
            for inst in request["instances"]:
                tokens = encode_exactly(tokenizer, engine.serialize(inst["data"], whitespace))
                if tokens is None:
                    result["untokenizable"].append([inst["i"], serialization])
                else:
                    walks.append((inst, tokens))
            send({"phase": "compile", "ws": serialization, "compile_ms": result["compile_ms"]})
            t0 = time.perf_counter_ns()
            grammar = eng.grammar(request["schema"], whitespace)
            matcher = eng.matcher(grammar)
            eng.fill(matcher)
            result["compile_ms"][serialization] = round((time.perf_counter_ns() - t0) / 1e6, 3)
            send({"phase": "walk", "ws": serialization, "compile_ms": result["compile_ms"]})
            for k, (inst, tokens) in enumerate(walks):
                walk = walk_tokens(eng, matcher if k == 0 else eng.matcher(grammar), tokens,
                                   filled=k == 0, count_forced=inst["expected"])
                result["walks"].append(describe_walk(tokenizer, inst, serialization, tokens, walk))
    except engine.Unsupported as err:
        memory = isinstance(err.__cause__, MemoryError)
        result.update(status="memory" if memory else "compile_error", ws=serialization, error=refusal(err))
    except MemoryError as err:
        result.update(status="memory", ws=serialization, error=crash_summary(err))
    except Exception as err:  # noqa: BLE001 -- an engine bug: reported, the worker goes on
        result.update(status="crash", ws=serialization, error=crash_summary(err))
    peak_kib = engine.peak_rss_kib()
    result["peak_mib"] = round((peak_kib - base_kib) / 1024, 2)
    result["rss_mib"] = round(peak_kib / 1024, 1)
    return result


def short_us(t: float) -> float | int:
    """A mask time rounded to what percentiles need (the cache holds millions of them)."""
    return round(t) if t >= 100 else round(t, 1) if t >= 10 else round(t, 2)


def describe_walk(tokenizer: Any, inst: dict[str, Any], serialization: str, tokens: list[int],
                  walk: dict[str, Any]) -> dict[str, Any]:
    """The cache record of one walk: verdict, where a valid instance was refused, the texts
    before each early end-of-sequence (at most 3), mask times in µs."""
    record = {"i": inst["i"], "ws": serialization, "expected": inst["expected"],
              "accepted": walk["accepted"], "tokens": len(tokens), "at": walk["at"], "why": walk["why"],
              "positions": walk["positions"], "forced": walk["forced"],
              "mask": [short_us(t) for t in walk["mask"]], "eos_count": len(walk["eos"]),
              "eos": [[pos, tokenizer.decode(tokens[:pos], clean_up_tokenization_spaces=False)]
                      for pos in walk["eos"][:3]]}
    if inst["expected"] and not walk["accepted"] and walk["at"] is not None:
        pos = walk["at"]
        before = tokenizer.decode(tokens[:pos], clean_up_tokenization_spaces=False)[-40:]
        token = (tokenizer.decode(tokens[pos:pos + 1], clean_up_tokenization_spaces=False)
                 if pos < len(tokens) else "EOS")
        record["where"] = f"{walk['why']}: token {pos}/{len(tokens)} {token!r} after {before!r}"
    return record


def warm_up(eng: engine.Engine, tokenizer: Any) -> None:
    """Compile and walk engine.py's warm-up schema in both serializations (first-use costs)."""
    for whitespace in SERIALIZATIONS.values():
        tokens = encode_exactly(tokenizer, engine.serialize(engine.WARMUP_INSTANCE, whitespace)) or []
        matcher = eng.matcher(eng.grammar(engine.WARMUP_SCHEMA, whitespace))
        eng.fill(matcher)
        walk_tokens(eng, matcher, tokens, filled=True, count_forced=True)


def worker_main(args: argparse.Namespace) -> None:
    """Serve requests (one JSON line each) on stdin; answer phase notes and results on stdout."""
    faulthandler.enable()  # a native crash leaves the Python stack in the stderr tail
    cap = int(args.mem_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    channel = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol's own copy of stdout
    os.dup2(2, 1)  # whatever a library prints goes to stderr, never into the protocol

    def send(record: dict[str, Any]) -> None:
        channel.write(json.dumps(record) + "\n")

    t0 = time.perf_counter()
    tokenizer = engine.load_tokenizer(args.tokenizer)
    eng = CONFIGS[args.worker](tokenizer, "compact")
    if args.worker == "structgen":
        eng.structgen.prepare_vocabulary(eng.vocab)  # per-tokenizer state, as ultra.py
    warm_up(eng, tokenizer)
    gc.collect()
    gc.freeze()  # set-up objects out of the collector's way, as engine.py
    send({"ready": True, "setup_s": round(time.perf_counter() - t0, 2)})
    for line in sys.stdin:
        result = measure_schema(eng, tokenizer, json.loads(line), send)
        send({"result": result})
        if result["status"] == "memory":
            break  # the engine's state after a failed allocation is not to be trusted


# --------------------------------------------------------------------------------------------
# Parent: workers, timeouts, cache
# --------------------------------------------------------------------------------------------


class WorkerSetupError(RuntimeError):
    """A worker did not get through tokenizer loading, engine set-up and warm-up."""


class Worker:
    """A measuring subprocess for one engine configuration, started on first use and again
    after a timeout, a crash or an allocation failure."""

    def __init__(self, config: str, args: argparse.Namespace) -> None:
        self.config, self.args = config, args
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.starts = 0

    def start(self) -> None:
        cmd = [sys.executable, __file__, "--worker", self.config, "--tokenizer", self.args.tokenizer,
               "--mem-gib", str(self.args.mem_gib)]
        self.stderr = tempfile.TemporaryFile()
        # own session: a timeout kills the worker and whatever it started, nothing else
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, start_new_session=True)
        self.buffer = b""
        self.starts += 1
        try:
            ready = self.read(SETUP_TIMEOUT_S)
        except EOFError:
            ready = None
        if not ready or not ready.get("ready"):
            tail = self.stderr_tail()
            self.stop()
            raise WorkerSetupError(f"{self.config} worker failed to start:\n{tail}")

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The worker's next message; None after ``timeout`` seconds; EOFError if it exited."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Measure one schema; a timeout, crash or failed allocation is this schema's result."""
        if self.proc is None:
            self.start()
        phase, note = "prepare", {}
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            while True:
                limit = self.args.timeout if phase == "compile" else self.args.walk_timeout
                msg = self.read(limit)
                if msg is None:
                    self.stop()
                    return {"status": "timeout", "phase": phase, "ws": note.get("ws"), "limit_s": limit,
                            "compile_ms": note.get("compile_ms", {})}
                if "result" in msg:
                    if msg["result"]["status"] == "memory":
                        self.stop()
                    return msg["result"]
                phase, note = msg["phase"], msg
        except (EOFError, BrokenPipeError):
            return self.died(phase, note)

    def died(self, phase: str, note: dict[str, Any]) -> dict[str, Any]:
        """The result of a schema during which the worker exited."""
        rc = self.proc.wait()
        tail = self.stderr_tail()
        self.stop()
        stack = tail.split("\nExtension modules:")[0]  # faulthandler's module list is noise
        last = " / ".join(line.strip() for line in stack.strip().splitlines()[-4:])[-300:]
        # SIGKILL that the parent did not send: the kernel's OOM killer
        memory = any(sign in tail for sign in engine.MEMORY_SIGNS) or rc == -signal.SIGKILL
        kind = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}"
        return {"status": "memory" if memory else "crash", "phase": phase, "ws": note.get("ws"),
                "compile_ms": note.get("compile_ms", {}), "error": {"type": kind, "message": last}}

    def stderr_tail(self) -> str:
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - 3000))
        return self.stderr.read().decode("utf-8", "replace")

    def stop(self) -> None:
        """Kill the worker's process group (it has its own session) and forget it."""
        if self.proc is not None:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
                try:
                    stream.close()
                except OSError:  # unflushed bytes for a worker that is gone
                    pass
            self.proc = None

    def close(self) -> None:
        """End the worker: no more requests, then the same as :meth:`stop`."""
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (subprocess.TimeoutExpired, OSError):
                pass
        self.stop()


def engine_version(config: str) -> str:
    """The package version; structgen's also carries a digest of its source files."""
    if config == "structgen":
        from structgen import __version__
        from structgen.engine.disk_cache import code_digest

        return f"{__version__}+{code_digest()[:16]}"
    return importlib.metadata.version(CONFIGS[config].package)


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A digest of the tokenizer's vocabulary, special tokens and class."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    h.update(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode())
    h.update(json.dumps([tokenizer.eos_token_id, sorted(tokenizer.all_special_ids)]).encode())
    return h.hexdigest()[:16]


def cache_key(config: str, version: str, tokenizer_fp: str, digest: str, key_order: str = "schema") -> str:
    """What a cached result depends on, python-jsonschema's version (the verdicts) included."""
    parts = [config, version, tokenizer_fp, digest, importlib.metadata.version("jsonschema"), f"h{HARNESS_VERSION}"]
    return "|".join(parts + ([] if key_order == "schema" else [f"keys-{key_order}"]))


def load_cache(path: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The entries of ``path`` whose key is in ``wanted`` (the last one of a key wins; a line
    cut short by an interrupted run is skipped)."""
    found: dict[str, dict[str, Any]] = {}
    if path.is_file():
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("key") in wanted:
                    for walk in entry["result"].get("walks", []):  # whole-corpus runs: millions
                        walk["mask"] = np.asarray(walk["mask"], dtype=np.float32)
                    found[entry["key"]] = entry
    return found


def reusable(entry: dict[str, Any], args: argparse.Namespace) -> bool:
    """A cached timeout or allocation failure counts only under limits at least as generous."""
    result, limits = entry["result"], entry["limits"]
    if result["status"] == "timeout":
        mine = args.timeout if result.get("phase") == "compile" else args.walk_timeout
        return result["limit_s"] >= mine
    if result["status"] == "memory":
        return limits["mem_gib"] >= args.mem_gib
    return True


def measure_config(config: str, todo: list[str], keys: dict[str, str], lines: dict[str, str],
                   disagreeing: frozenset[str], cache_path: Path, args: argparse.Namespace) -> None:
    """Measure ``todo`` with one configuration, appending each result to the cache at once."""
    worker = Worker(config, args)
    limits = {"timeout": args.timeout, "walk_timeout": args.walk_timeout, "mem_gib": args.mem_gib}
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with cache_path.open("a", encoding="utf-8") as cache:
            for k, name in enumerate(todo):
                prepared = prepare(lines[name], name in disagreeing, args.key_order)
                t0 = time.perf_counter()
                result = worker.run(prepared.request)
                judge_prefixes(prepared, result)
                entry = {"key": keys[name], "config": config, "name": name, "limits": limits,
                         "date": datetime.date.today().isoformat(), "judge": prepared.judge, "result": result}
                cache.write(json.dumps(entry, separators=(",", ":")) + "\n")
                cache.flush()
                print(f"[{config}] {k + 1}/{len(todo)} {name}: {outcome(entry)} "
                      f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    finally:
        worker.close()
    print(f"[{config}] {len(todo)} measured, {worker.starts} worker start(s)", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def walk_errors(result: dict[str, Any]) -> tuple[list, list, list]:
    """(validation errors, invalidation errors, walks with early-EOS errors) of one result."""
    walks = result.get("walks", [])
    return ([w for w in walks if w["expected"] and not w["accepted"]],
            [w for w in walks if not w["expected"] and w["accepted"]],
            [w for w in walks if w.get("eos_errors")])


def outcome(entry: dict[str, Any]) -> str:
    """passing / failing (compiled, some error) / compile_error / timeout / crash / memory."""
    result = entry["result"]
    if result["status"] != "ok":
        return result["status"]
    return "failing" if any(walk_errors(result)) else "passing"


def masks_of(walks: list[dict[str, Any]]) -> np.ndarray:
    """Every mask time (µs) of ``walks``, in one array."""
    return np.concatenate([w["mask"] for w in walks]) if walks else np.zeros(0, dtype=np.float32)


def pct(values: list[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile (nan when empty)."""
    return float(np.percentile(values, q)) if len(values) else float("nan")


def share(part: int, whole: int) -> str:
    """``"3 / 40 (7.5%)"``."""
    return f"{part} / {whole} ({100 * part / whole:.1f}%)" if whole else f"{part} / 0"


def engine_row(config: str, entries: list[dict[str, Any]]) -> list[str]:
    """One row of the main table."""
    outcomes = Counter(outcome(e) for e in entries)
    results = [e["result"] for e in entries]
    walks = [w for r in results for w in r.get("walks", [])]
    valid = [w for w in walks if w["expected"]]
    errors = [walk_errors(r) for r in results]
    compile_ms = [r["compile_ms"]["compact"] for r in results if "compact" in r.get("compile_ms", {})]
    mask_us = masks_of(walks)
    peak = [r["peak_mib"] for r in results if r.get("compile_ms") and "peak_mib" in r]
    positions = sum(w["positions"] for w in valid)
    forced = sum(w["forced"] for w in valid)
    fmt = engine.fmt
    return [config, str(len(entries)), str(outcomes["passing"]), str(outcomes["failing"]),
            str(outcomes["compile_error"]), str(outcomes["timeout"]), str(outcomes["crash"]),
            str(outcomes["memory"]),
            share(sum(len(v) for v, _, _ in errors), len(valid)),
            share(sum(len(i) for _, i, _ in errors), len(walks) - len(valid)),
            str(sum(len(eos) for _, _, eos in errors)),
            *(fmt(pct(compile_ms, q)) for q in (50, 90, 99, 100)),
            *(fmt(pct(mask_us, q)) for q in (50, 90, 99, 100)),
            fmt(pct(peak, 50)), fmt(pct(peak, 100)),
            f"{100 * forced / positions:.1f}%" if positions else "–"]


def ratio_row(peer: str, ours: dict[str, dict], theirs: dict[str, dict]) -> list[str]:
    """structgen p50 / peer p50 of compile and of mask time, on the schemas both compiled."""
    both = [n for n in ours if "compact" in ours[n]["result"].get("compile_ms", {})
            and "compact" in theirs.get(n, {}).get("result", {}).get("compile_ms", {})]

    def compile_ms(side: dict[str, dict]) -> list[float]:
        return [side[n]["result"]["compile_ms"]["compact"] for n in both]

    def mask_us(side: dict[str, dict]) -> np.ndarray:
        return masks_of([w for n in both for w in side[n]["result"].get("walks", [])])

    def wrong(side: dict[str, dict], valid: bool) -> int:  # valid rejected / invalid accepted
        return sum(1 for n in both for w in side[n]["result"].get("walks", [])
                   if w["expected"] is valid and w["accepted"] is not valid)

    return [f"structgen / {peer}", str(len(both)),
            engine.fmt(pct(compile_ms(ours), 50) / pct(compile_ms(theirs), 50)),
            engine.fmt(pct(mask_us(ours), 50) / pct(mask_us(theirs), 50)),
            f"{wrong(ours, True)} / {wrong(theirs, True)}", f"{wrong(ours, False)} / {wrong(theirs, False)}"]


def reason(error: dict[str, Any]) -> str:
    """A compile error grouped: structgen's keyword, else the error type and its message
    without JSON pointer, numbers folded."""
    if error.get("keyword"):
        return f"{error['type']} `{error['keyword']}`"
    message = re.sub(r" \(at JSON pointer '[^']*'\)", "", error.get("message", "")).splitlines()
    message = re.sub(r"\d+", "N", message[0] if message else "")
    return f"{error['type']}: {message[:100]}"


def reason_rows(entries: list[dict[str, Any]], top: int) -> list[list[str]]:
    """The ``top`` most frequent compile-error reasons, with a count and an example schema."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for e in entries:
        if e["result"]["status"] == "compile_error":
            by_reason[reason(e["result"]["error"])].append(e["name"])
    ranked = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top]
    return [[cell(r), str(len(names)), f"`{names[0]}`"] for r, names in ranked]


def cell(text: str) -> str:
    """Text safe inside a markdown table cell or list item."""
    return text.replace("|", "\\|").replace("\n", " ")


def error_lines(entries: list[dict[str, Any]], judge_why: bool) -> tuple[list[str], list[str]]:
    """Markdown list items: the invalidation (and early-EOS) errors, then the validation errors."""
    wrong_accept, wrong_reject = [], []
    for e in entries:
        validation, invalidation, eos = walk_errors(e["result"])
        for w in invalidation:
            why = e["judge"]["why"].get(str(w["i"]), "") if judge_why else ""
            wrong_accept.append(f"- `{e['name']}` instance {w['i']} ({w['ws']}), accepted in full "
                                f"({w['tokens']} tokens, then end-of-sequence): `{cell(w['text'])}`"
                                + (f" -- python-jsonschema: {cell(why)}" if why else ""))
        for w in eos:
            for pos, prefix, why in w["eos_errors"]:
                wrong_accept.append(f"- `{e['name']}` instance {w['i']} ({w['ws']}), end-of-sequence "
                                    f"allowed after token {pos}: `{cell(prefix[:200])}` -- {cell(why)}")
        for w in validation:
            wrong_reject.append(f"- `{e['name']}` instance {w['i']} ({w['ws']}): "
                                f"{cell(w.get('where', w['why']))}; instance `{cell(w['text'])}`")
    return wrong_accept, wrong_reject


def sample_notes(entries: list[dict[str, Any]], disagreeing: frozenset[str]) -> list[str]:
    """What the judge did on the sample: excluded, relabelled, unjudged, unwalkable instances."""
    excluded = [f"- `{e['name']}`: {e['judge']['skipped']} instance(s) not walked"
                for e in entries if e["name"] in disagreeing]
    relabelled = [(e["name"], i, label, verdict)
                  for e in entries for i, label, verdict in e["judge"]["relabelled"]]
    unjudged = [f"- `{e['name']}`: {cell(e['judge']['oracle_error'])}"
                for e in entries if e["judge"]["oracle_error"]]
    odd = [(e["name"], e["judge"].get("unserializable", []), e["result"].get("untokenizable", []))
           for e in entries]
    odd = [f"- `{n}`: not JSON-serialisable {u}, not spelled exactly by the tokenizer {t}"
           for n, u, t in odd if u or t]
    return [
        f"Schemas listed in `python_jsonschema_disagreements.json` (invalid-instance checks skipped): "
        f"{len(excluded)}", "", *(excluded or ["none"]), "",
        f"Instances whose label python-jsonschema (with `FormatChecker()`) overrules: {len(relabelled)}",
        "", *([f"- `{n}` instance {i}: label {'valid' if lab else 'invalid'}, python-jsonschema "
              f"{'valid' if ver else 'invalid'}" for n, i, lab, ver in relabelled[:50]] or ["none"]),
        *(["- ..."] if len(relabelled) > 50 else []), "",
        f"Schemas python-jsonschema could not judge (labels used): {len(unjudged)}", "",
        *(unjudged or ["none"]), "",
        f"Instances not walked (harness): {len(odd)}", "", *(odd or ["none"]), "",
    ]


SETTINGS = (
    "Every engine compiles each schema twice: compact whitespace to walk `json.dumps(x, "
    "separators=(\",\", \":\"))`, flexible whitespace to walk `json.dumps(x, indent=2)` "
    "(structgen `whitespace=\"compact\"` / `\"flexible\"`, llguidance `whitespace_flexible`, "
    "xgrammar `any_whitespace`, outlines-core whitespace pattern `\"\"` / `[ \\t\\n\\r]*`). "
    "structgen: `compile_json_schema` defaults otherwise (walking grammar, open objects, not "
    "lenient); llguidance: library defaults; xgrammar: eager compile, `strict_mode` True or False; "
    "outlines-core: `build_regex_from_schema` (default `max_recursion_depth` 3), `Index` over the "
    "token bytes as structgen's `Vocabulary` decodes the same tokenizer (special tokens left out), "
    "one end-of-sequence id."
)
COLUMNS = (
    "passing: compiled in both whitespaces and no walk erred. failing: compiled, some walk erred. "
    "validation errors: valid instances rejected / valid instances walked (both serializations). "
    "invalidation errors: invalid instances accepted in full / invalid instances walked. "
    "early-EOS errors: walks where end-of-sequence was allowed after a prefix that is not a valid "
    "instance. compile: time to the first mask of a schema new to the worker, compact whitespace, "
    "over the schemas compiled. mask: every other mask of every walk, cold states included. "
    "peak MiB: rise of the worker's peak RSS over the schema. forced share: masks allowing exactly "
    "one token (end-of-sequence ids counted as one) among the masks of walks of valid instances."
)
HEADER = ["engine", "schemas", "passing", "failing", "compile errors", "timeouts", "crashes", "memory",
          "validation errors", "invalidation errors", "early-EOS errors", "compile p50 ms", "p90", "p99",
          "max", "mask p50 µs", "p90", "p99", "max", "peak MiB p50", "max", "forced share"]


def run_lines(args: argparse.Namespace, names: list[str], tokenizer: Any, tokenizer_fp: str,
              measured: dict[str, int], corpus: int) -> list[str]:
    """Command, date, machine, versions, tokenizer, sample and limits."""
    sources = Counter(source_of(n) for n in names)
    packages = ["structgen", "llguidance", "xgrammar", "outlines_core", "jsonschema", "transformers", "numpy"]
    digest = engine_version("structgen").split("+")[1]
    return [
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}, one thread per engine; Python "
        f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end",
        f"- versions: {package_versions(packages)}; structgen checkout {git_commit()} (source digest {digest})",
        f"- tokenizer: {args.tokenizer} ({getattr(tokenizer, 'name_or_path', '?')}, {len(tokenizer)} tokens, "
        f"fingerprint {tokenizer_fp})",
        f"- sample: {len(names)} of the corpus's {corpus} schemas"
        + (f", `--n {args.n} --seed {args.seed}`" if args.n is not None else "")
        + ", round-robin over sources (BFCL_* as one): "
        + ", ".join(f"{s} {k}" for s, k in sorted(sources.items())),
        f"- limits per schema: compile {args.timeout:g} s per serialization, walks {args.walk_timeout:g} s "
        f"per serialization, address space {args.mem_gib:g} GiB per worker",
        "- measured in this run: " + ", ".join(f"{c} {measured.get(c, 0)}" for c in args.engines)
        + " (the rest from the cache)",
    ]


def failure_line(entry: dict[str, Any]) -> str:
    """``- `schema` (crash, compact): SIGSEGV: ...``"""
    result = entry["result"]
    error = result.get("error", {})
    return (f"- `{entry['name']}` ({result['status']}, {result.get('ws') or result.get('phase')}): "
            f"{cell(error.get('type', ''))}: {cell(error.get('message', ''))}")


def structgen_section(ours: dict[str, dict], entries: dict[str, dict[str, dict]],
                      peers: list[str]) -> list[str]:
    """Ratios to each peer, compile-error reasons, and every wrong verdict, crash and timeout."""
    mine = list(ours.values())
    wrong_accept, wrong_reject = error_lines(mine, judge_why=True)
    crashes = [failure_line(e) for e in mine if e["result"]["status"] in ("crash", "memory")]
    timeouts = [f"- `{e['name']}`: {e['result']['phase']} ({e['result'].get('ws')}) over "
                f"{e['result']['limit_s']:g} s" for e in mine if e["result"]["status"] == "timeout"]
    return [
        "Ratios structgen / peer of the p50s, on the schemas both compiled (mask: every mask of "
        "their walks); below 1 means structgen is faster. On the same schemas, so the same "
        "instances: valid instances rejected and invalid ones accepted, structgen / peer.",
        "",
        markdown_table(["", "schemas", "compile p50 ratio", "mask p50 ratio", "valid rejected",
                        "invalid accepted"],
                       [ratio_row(p, ours, entries[p]) for p in peers]),
        "",
        "## structgen compile errors: the 20 most frequent reasons",
        "",
        markdown_table(["reason", "schemas", "example"], reason_rows(mine, 20)),
        "",
        f"## structgen invalidation and early-EOS errors: {len(wrong_accept)}",
        "",
        *(wrong_accept or ["none"]),
        "",
        f"## structgen crashes and allocation failures: {len(crashes)}",
        "",
        *(crashes or ["none"]),
        "",
        f"structgen timeouts: {len(timeouts)}",
        "",
        *(timeouts or ["none"]),
        "",
        f"<details><summary>structgen validation errors: {len(wrong_reject)}</summary>",
        "",
        *(wrong_reject[:200] or ["none"]),
        *(["- ..."] if len(wrong_reject) > 200 else []),
        "",
        "</details>",
        "",
    ]


def peers_section(names: list[str], entries: dict[str, dict[str, dict]], peers: list[str]) -> list[str]:
    """Each peer's 5 most frequent compile-error reasons."""
    parts = ["## Peers: the 5 most frequent compile-error reasons", ""]
    for c in peers:
        rows = reason_rows([entries[c][n] for n in names if n in entries[c]], 5)
        parts += [f"{c}:", "", markdown_table(["reason", "schemas", "example"], rows) if rows else "none", ""]
    return parts


def report(args: argparse.Namespace, names: list[str], entries: dict[str, dict[str, dict]],
           tokenizer: Any, tokenizer_fp: str, disagreeing: frozenset[str], measured: dict[str, int],
           failures: dict[str, str], corpus: int) -> str:
    """The markdown report over the sample, from cached and fresh entries alike."""
    configs = args.engines
    peers = [c for c in configs if c != "structgen"]
    rows = [engine_row(c, [entries[c][n] for n in names if n in entries[c]]) for c in configs]
    sources = Counter(source_of(n) for n in names)
    source_rows = [[s, str(k), *(str(sum(outcome(entries[c][n]) == "passing" for n in names
                                         if source_of(n) == s and n in entries[c])) for c in configs)]
                   for s, k in sorted(sources.items())]
    # the judge's notes are the same in every configuration's entry: take any
    any_entry = {n: entries[c][n] for c in reversed(configs) for n in names if n in entries[c]}
    parts = [
        "# MaskBench: structgen and peers, same schemas, instances and tokenizer",
        "",
        *run_lines(args, names, tokenizer, tokenizer_fp, measured, corpus),
        "",
        SETTINGS,
        "",
        COLUMNS,
        "",
        markdown_table(HEADER, rows),
        "",
        *(f"**{c}: {'partial' if 'cached-only' in msg else 'the worker could not start'}; schemas without "
          f"a result are missing from its row.** `{cell(msg.strip().splitlines()[-1] if msg.strip() else msg)}`\n"
          for c, msg in failures.items()),
    ]
    if "structgen" in configs:
        ours = {n: entries["structgen"][n] for n in names if n in entries["structgen"]}
        parts += structgen_section(ours, entries, peers)
    parts += [
        *peers_section(names, entries, peers),
        "## Passing schemas per source",
        "",
        markdown_table(["source", "schemas", *configs], source_rows),
        "",
        "## The instances",
        "",
        *sample_notes(list(any_entry.values()), disagreeing),
    ]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``--worker`` (internal) makes this process a measuring worker."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=None, help="number of schemas (default: the whole corpus)")
    p.add_argument("--seed", type=int, default=0, help="sample seed (default 0)")
    p.add_argument("--key-order", choices=("schema", "data"), default="schema",
                   help="object keys of the instances: in schema order (default; peers need it) or as the data has them")
    p.add_argument("--tokenizer", choices=tuple(engine.NAMED_TOKENIZERS), default="smollm2")
    p.add_argument("--engines", default=",".join(CONFIGS), help="comma-separated subset of " + ",".join(CONFIGS))
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per compile (default 60)")
    p.add_argument("--walk-timeout", type=float, default=120.0,
                   help="seconds for the walks of one serialization of a schema (default 120)")
    p.add_argument("--mem-gib", type=float, default=8.0, help="address-space cap per worker (default 8)")
    p.add_argument("--data", type=Path, default=engine.MASKBENCH, help="maskbench.jsonl.gz")
    p.add_argument("--cache-dir", type=Path, default=CACHE_DIR, help="results cache (default results/cache)")
    p.add_argument("--out", type=Path, default=engine.RESULTS / "maskbench.md", help="report path")
    p.add_argument("--cached-only", default="", metavar="ENGINES",
                   help="comma-separated engines reported from the cache alone: schemas they lack are "
                        "not measured and are missing from their row (a slow peer still being measured "
                        "by another run)")
    p.add_argument("--worker", choices=tuple(CONFIGS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.engines = choose(p, args.engines, CONFIGS)
    args.cached_only = choose(p, args.cached_only, CONFIGS) if args.cached_only else []
    return args


def main(argv: list[str] | None = None) -> None:
    """Sample, measure what the cache lacks (one engine at a time), report."""
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)
    digests = scan(args.data)
    names = tests_maskbench.sample(digests, args.n, args.seed)
    disagreeing = disagreeing_schemas(args.data)
    tokenizer = engine.load_tokenizer(args.tokenizer)
    tokenizer_fp = tokenizer_fingerprint(tokenizer)

    keys = {c: {n: cache_key(c, engine_version(c), tokenizer_fp, digests[n], args.key_order) for n in names}
            for c in args.engines}
    paths = {c: args.cache_dir / f"maskbench-{c}.jsonl" for c in args.engines}
    entries: dict[str, dict[str, dict]] = {}
    todo: dict[str, list[str]] = {}
    for c in args.engines:
        cached = load_cache(paths[c], set(keys[c].values()))
        entries[c] = {n: cached[k] for n, k in keys[c].items() if k in cached and reusable(cached[k], args)}
        todo[c] = [n for n in names if n not in entries[c]]
        print(f"[{c}] {len(entries[c])} cached, {len(todo[c])} to measure", file=sys.stderr)
    lines = read_lines(args.data, {n for c in args.engines for n in todo[c]})
    failures: dict[str, str] = {}
    for c in args.cached_only:
        if todo.get(c):
            failures[c] = f"{len(todo[c])} of {len(names)} schemas not measured yet (--cached-only)"
            todo[c] = []
    for c in args.engines:  # one engine at a time: never two measuring processes at once
        if todo[c]:
            try:
                measure_config(c, todo[c], keys[c], lines, disagreeing, paths[c], args)
            except WorkerSetupError as err:  # what it measured before is in the cache
                failures[c] = str(err)
                print(err, file=sys.stderr)
            done = load_cache(paths[c], set(keys[c].values()))
            entries[c].update({n: done[keys[c][n]] for n in todo[c] if keys[c][n] in done})

    text = report(args, names, entries, tokenizer, tokenizer_fp, disagreeing,
                  {c: len(todo[c]) for c in args.engines}, failures, len(digests))
    publish(text, args.out)


if __name__ == "__main__":
    main()
