"""Grammar compile time and token-mask time: structgen side by side with llguidance and xgrammar.

Run (one CPU thread, same tokenizer, same MaskBench schemas for every engine)::

    .venv/bin/python benchmarks/engine.py --n 100 --whitespace compact
    .venv/bin/python benchmarks/engine.py --n 100 --whitespace flexible
    .venv/bin/python benchmarks/engine.py --n 100 --whitespace compact --select scalars

``--select scalars`` draws the sample from the schemas that use a numeric bound, ``multipleOf``,
``pattern`` or ``format`` somewhere (:data:`SCALAR_KEYWORDS`, found by walking the schema's
subschemas) and adds a per-keyword table: schemas using each keyword, how many each engine
compiled, and structgen's refusals by the keyword its error names.

What is measured, per engine and per schema:

* **compile** -- time to first mask of a schema new to the process: compile the schema, make a
  matcher, fill the first token bitmask. Per-tokenizer state is built once before the clock
  starts (structgen's ``Vocabulary``, llguidance's ``LLTokenizer``, xgrammar's ``TokenizerInfo``
  and ``GrammarCompiler``) and warmed by one warm-up schema, reported separately. Nothing
  schema-specific is reused: structgen compiles each schema with a fresh ``Compiler`` (its
  per-vocabulary primitive masks stay warm, by design), xgrammar's compiler cache is disabled.
  ``xgrammar`` is its default eager mode (every token mask built at compile time);
  ``xgrammar-dynamic`` sets ``enable_dynamic_compilation`` (masks built on first use, as
  structgen and llguidance do), so compile and mask times are comparable either way.
* **mask** -- every mask filled while walking the first valid instance of the schema token by
  token (``json.dumps`` compact or ``indent=2``, encoded without special tokens): one mask after
  each accepted token, the last one being the end-of-sequence position. The mask at position 0
  belongs to compile time. States reached for the first time (cold) are included.
* A walk is **rejected** when the engine's mask excludes the next token of the valid instance,
  its matcher refuses the token, or the final mask does not allow end-of-sequence.
* structgen compiles with ``compile_json_schema``'s defaults (``Compiler(vocab).json_schema``
  with the run's whitespace): the walking grammar, every JSON spelling of a value accepted
  (``canonical=False``), open objects, no relaxed keyword.

The markdown report goes to stdout and to ``benchmarks/results/engine-<whitespace>.md``
(``engine-<whitespace>-scalars.md`` with ``--select scalars``).
"""

from __future__ import annotations

import os

# One thread for every engine; must be set before numpy / torch / the Rust engines load.
for _var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

# structgen keeps slow state facts on disk (STRUCTGEN_CACHE_DIR/facts): facts an earlier run at
# the same checkout saved would make this run's first masks warm. So every benchmark run gets a
# new empty cache folder, which its workers and children inherit, unless the caller chose one.
if "STRUCTGEN_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["STRUCTGEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="structgen-bench-")
    atexit.register(shutil.rmtree, os.environ["STRUCTGEN_CACHE_DIR"], True)

import argparse  # noqa: E402
import gc  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections import defaultdict  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Iterator  # noqa: E402

import numpy as np  # noqa: E402
from _report import choose, cpu_model, git_commit, markdown_table, package_versions, source_of, details, publish  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmark this checkout's structgen, installed or not
MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench" / "maskbench.jsonl.gz"
RESULTS = Path(__file__).resolve().parent / "results"
ENGINES = ("structgen", "llguidance", "xgrammar", "xgrammar-dynamic")

#: Compiled once per engine before the timed schemas; exercises every JSON primitive.
WARMUP_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "none": {"type": "null"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"enum": ["a", "b"]},
        "child": {"type": "object", "properties": {"x": {"type": "number"}}},
    },
    "required": ["name"],
}
WARMUP_INSTANCE = {"name": "warm \"up\"", "count": -12, "ratio": 3.5e-2, "ok": True, "none": None,
                   "tags": ["a", "bc"], "kind": "b", "child": {"x": 1}}

#: ``--select scalars``: schemas using at least one of these keywords, anywhere.
SCALAR_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                   "pattern", "format")
SELECTIONS = {"all": (), "scalars": SCALAR_KEYWORDS}

# Where subschemas sit in a schema object (drafts 4 to 2020-12); everything else is a keyword's
# value, not a schema: a property *named* "format" or an enum holding {"pattern": ...} is no use.
_SUBSCHEMA = ("additionalItems", "additionalProperties", "contains", "not", "if", "then", "else",
              "propertyNames", "unevaluatedItems", "unevaluatedProperties", "items")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas",
                   "dependencies")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    source: str
    schema: Any
    instance: Any


def load_cases(path: Path) -> dict[str, list[Case]]:
    """Schemas with at least one valid instance, grouped by source, in file order."""
    by_source: dict[str, list[Case]] = defaultdict(list)
    with gzip.open(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            valid = [t["data"] for t in row.get("tests") or [] if t.get("valid")]
            if valid:
                name = row["name"]
                by_source[source_of(name)].append(Case(name, source_of(name), row["schema"], valid[0]))
    return by_source


def keywords_used(schema: Any, wanted: tuple[str, ...]) -> set[str]:
    """Those of ``wanted`` that some subschema of ``schema`` (the root included) has as a keyword."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue  # a boolean schema, or a malformed one
        found.update(k for k in wanted if k in node)
        stack.extend(node[k] for k in _SUBSCHEMA if isinstance(node.get(k), dict))
        stack.extend(s for k in _SUBSCHEMA_LISTS if isinstance(node.get(k), list) for s in node[k])
        stack.extend(s for k in _SUBSCHEMA_MAPS if isinstance(node.get(k), dict)
                     for s in node[k].values())  # dependencies: arrays of names are skipped
    return found


def select_cases(by_source: dict[str, list[Case]], keywords: tuple[str, ...]) -> dict[str, list[Case]]:
    """The cases whose schema uses at least one of ``keywords`` (all of them when it is empty)."""
    if not keywords:
        return by_source
    picked = {s: [c for c in cases if keywords_used(c.schema, keywords)] for s, cases in by_source.items()}
    return {s: cases for s, cases in picked.items() if cases}


def sample_cases(by_source: dict[str, list[Case]], n: int, seed: int) -> list[Case]:
    """``n`` cases drawn round-robin over sources (sorted by name), each source shuffled by ``seed``."""
    rng = random.Random(seed)
    queues = {}
    for source in sorted(by_source):
        cases = list(by_source[source])
        rng.shuffle(cases)
        queues[source] = cases
    picked: list[Case] = []
    while len(picked) < n and any(queues.values()):
        for source in sorted(queues):
            if queues[source] and len(picked) < n:
                picked.append(queues[source].pop())
    return picked


def serialize(instance: Any, whitespace: str) -> str:
    if whitespace == "compact":
        return json.dumps(instance, separators=(",", ":"))
    return json.dumps(instance, indent=2)


#: ``--tokenizer`` names for structgen's bundled tokenizers (``structgen.decoding.models`` loaders).
NAMED_TOKENIZERS = {"smollm2": "load_default_tokenizer", "gemma": "load_gemma_tokenizer"}


def load_tokenizer(path: str | None) -> Any:
    """``--tokenizer PATH`` (a Hugging Face tokenizer directory) or a name of
    :data:`NAMED_TOKENIZERS`; structgen's default tokenizer (SmolLM2) when None."""
    from transformers import AutoTokenizer

    if path and path not in NAMED_TOKENIZERS:
        return AutoTokenizer.from_pretrained(path)
    try:
        from structgen.decoding import models

        return getattr(models, NAMED_TOKENIZERS[path or "smollm2"])()
    except Exception as err:  # noqa: BLE001 -- any failure means: ask for a path
        sys.exit(f"cannot load structgen's {path or 'default'} tokenizer ({err!r}); pass --tokenizer PATH")


# --------------------------------------------------------------------------------------------
# Engines: the same five operations on each
# --------------------------------------------------------------------------------------------


class Unsupported(Exception):
    """The engine declined the schema (its own 'unsupported' / 'invalid schema' error).

    ``keyword``: the JSON Schema keyword the engine names, when it names one (structgen's
    ``UnsupportedFeatureError``).
    """

    def __init__(self, message: str, keyword: str | None = None) -> None:
        super().__init__(message)
        self.keyword = keyword


class Engine:
    """Adapter: ``compile`` a schema to a fresh matcher, ``fill`` its mask, ``advance`` it.

    ``compile`` is ``grammar`` (the schema compiled, reusable) then ``matcher`` (a fresh walk
    over it): a benchmark walking several instances of one schema compiles it once.
    ``whitespace`` ("compact" / "flexible") is the adapter's default; ``grammar`` takes another.
    """

    name = ""
    package = ""

    def __init__(self, tokenizer: Any, whitespace: str) -> None:
        self.whitespace = whitespace

    def flexible(self, whitespace: str | None = None) -> bool:
        """Whether ``whitespace`` (the adapter's default when None) is "flexible"."""
        return (whitespace or self.whitespace) == "flexible"

    def compile(self, schema: Any) -> Any:  # -> matcher
        return self.matcher(self.grammar(schema))

    def grammar(self, schema: Any, whitespace: str | None = None) -> Any:
        """The schema compiled (raises :class:`Unsupported` when the engine declines it)."""
        raise NotImplementedError

    def matcher(self, grammar: Any) -> Any:
        """A fresh matcher at the start of ``grammar``."""
        raise NotImplementedError

    def fill(self, matcher: Any) -> None:
        raise NotImplementedError

    def advance(self, matcher: Any, token_id: int) -> bool:
        raise NotImplementedError

    #: the last filled mask as a flat int32 numpy array (bit i % 32 of word i // 32 = token i)
    mask: np.ndarray
    eos_ids: list[int]

    def allows(self, token_id: int) -> bool:
        return bool((int(self.mask[token_id >> 5]) >> (token_id & 31)) & 1)


class StructgenEngine(Engine):
    name = package = "structgen"

    def __init__(self, tokenizer: Any, whitespace: str) -> None:
        import jsonschema  # noqa: F401 - set-up, as the peers' imports: structgen checks enum
        # values against sibling keywords with it, and with the format extras installed its
        # first import takes ~1.3 s, which would otherwise land on the first such schema
        import structgen

        super().__init__(tokenizer, whitespace)
        self.structgen = structgen
        self.vocab = structgen.Vocabulary.from_tokenizer(tokenizer)
        self.mask = np.zeros(self.vocab.words, dtype=np.int32)
        self.eos_ids = sorted(self.vocab.eos_ids)

    def grammar(self, schema: Any, whitespace: str | None = None) -> Any:
        # A fresh Compiler per schema: no grammar-cache hit; the vocabulary's mask cache is shared.
        # compile_json_schema's defaults (canonical=False, strict=False, lenient=False): the
        # grammar that walks and validates, as users walk.
        try:
            # disk_cache=False: a schema new to the process is compiled, not loaded
            return self.structgen.Compiler(self.vocab, disk_cache=False).json_schema(
                schema, whitespace=whitespace or self.whitespace)
        except self.structgen.StructgenError as err:
            raise Unsupported(f"{type(err).__name__}: {err}", getattr(err, "keyword", None)) from err

    def matcher(self, grammar: Any) -> Any:
        return grammar.matcher()

    def fill(self, matcher: Any) -> None:
        matcher.fill_bitmask(self.mask)

    def advance(self, matcher: Any, token_id: int) -> bool:
        return matcher.advance(token_id)


class LLGuidanceEngine(Engine):
    name = package = "llguidance"

    def __init__(self, tokenizer: Any, whitespace: str) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        super().__init__(tokenizer, whitespace)
        self.llg = llguidance
        self.fill_next = llguidance.numpy.fill_next_token_bitmask
        self.lltok = llguidance.hf.from_tokenizer(tokenizer)
        self.bitmask = llguidance.numpy.allocate_token_bitmask(1, self.lltok.vocab_size)
        self.mask = self.bitmask[0]
        self.eos_ids = [self.lltok.eos_token]

    def grammar(self, schema: Any, whitespace: str | None = None) -> Any:
        try:
            return self.llg.LLMatcher.grammar_from_json_schema(
                schema, defaults={"whitespace_flexible": self.flexible(whitespace)})
        except Exception as err:  # noqa: BLE001 -- llguidance raises plain ValueError/RuntimeError
            raise Unsupported(str(err)) from err

    def matcher(self, grammar: Any) -> Any:
        # llguidance compiles the grammar text here, lazily
        matcher = self.llg.LLMatcher(self.lltok, grammar)
        if matcher.is_error():
            raise Unsupported(matcher.get_error())
        return matcher

    def fill(self, matcher: Any) -> None:
        self.fill_next(matcher, self.bitmask, 0)

    def advance(self, matcher: Any, token_id: int) -> bool:
        return matcher.consume_token(token_id)


class XGrammarEngine(Engine):
    """xgrammar as configured by default: all token masks built eagerly at compile time."""

    name = package = "xgrammar"
    dynamic = False
    #: ``strict_mode``: False here, so additionalProperties/items follow the schema, as in the
    #: other engines; :class:`XGrammarStrictEngine` sets xgrammar's own default, True.
    strict = False

    def __init__(self, tokenizer: Any, whitespace: str) -> None:
        import xgrammar

        super().__init__(tokenizer, whitespace)
        self.xgr = xgrammar
        self.info = xgrammar.TokenizerInfo.from_huggingface(tokenizer)
        self.compiler = xgrammar.GrammarCompiler(self.info, max_threads=1, cache_enabled=False,
                                                 enable_dynamic_compilation=self.dynamic)
        self.bitmask = xgrammar.allocate_token_bitmask(1, self.info.vocab_size)
        self.mask = self.bitmask.numpy()[0]  # shares memory with the torch tensor
        self.eos_ids = list(self.info.stop_token_ids)

    def grammar(self, schema: Any, whitespace: str | None = None) -> Any:
        options = {"any_whitespace": True} if self.flexible(whitespace) else \
            {"any_whitespace": False, "separators": (",", ":")}
        try:
            return self.compiler.compile_json_schema(json.dumps(schema), strict_mode=self.strict, **options)
        except Exception as err:  # noqa: BLE001 -- xgrammar raises RuntimeError/ValueError
            raise Unsupported(str(err)) from err

    def matcher(self, grammar: Any) -> Any:
        return self.xgr.GrammarMatcher(grammar)

    def fill(self, matcher: Any) -> None:
        matcher.fill_next_token_bitmask(self.bitmask)

    def advance(self, matcher: Any, token_id: int) -> bool:
        return matcher.accept_token(token_id)


class XGrammarDynamicEngine(XGrammarEngine):
    """xgrammar with ``enable_dynamic_compilation``: masks built lazily on first use, like structgen."""

    name = "xgrammar-dynamic"
    dynamic = True


class XGrammarStrictEngine(XGrammarEngine):
    """xgrammar with ``strict_mode=True``, its default: objects closed unless the schema says
    ``additionalProperties``, arrays without extra items (not in :data:`ENGINE_CLASSES`)."""

    name = "xgrammar-strict"
    strict = True


ENGINE_CLASSES = {e.name: e for e in (StructgenEngine, LLGuidanceEngine, XGrammarEngine,
                                      XGrammarDynamicEngine)}


# --------------------------------------------------------------------------------------------
# Measuring one schema
# --------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: str = "ok"  # ok | unsupported | error
    compile_ms: float | None = None
    mask_us: list[float] = field(default_factory=list)
    rejected: str | None = None  # why the walk stopped early, if it did
    rejected_at: int | None = None  # index of the refused token (None: at end-of-sequence)
    detail: str | None = None  # unsupported message or traceback
    keyword: str | None = None  # the keyword an unsupported schema was refused on, if named


def walk(engine: Engine, schema: Any, tokens: list[int]) -> Outcome:
    """Compile (timed to the first mask), then mask and advance along ``tokens``."""
    out = Outcome()
    clock = time.perf_counter_ns
    t0 = clock()
    matcher = engine.compile(schema)
    engine.fill(matcher)
    out.compile_ms = (clock() - t0) / 1e6
    for pos, token_id in enumerate(tokens):
        if not engine.allows(token_id):
            refused = "and refused" if not engine.advance(matcher, token_id) else "but advance accepts it"
            out.rejected, out.rejected_at = f"masked out ({refused})", pos
            return out
        if not engine.advance(matcher, token_id):
            out.rejected, out.rejected_at = "refused by advance", pos
            return out
        t0 = clock()
        engine.fill(matcher)
        out.mask_us.append((clock() - t0) / 1e3)
    if not any(engine.allows(e) for e in engine.eos_ids):
        out.rejected = "end-of-sequence not allowed after the whole instance"
    return out


#: What a process that died of an allocation failure writes last (Python, Rust, C++, libc).
MEMORY_SIGNS = ("MemoryError", "memory allocation of", "bad_alloc", "Cannot allocate memory")


def _proc_status_kib(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (None off Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def reset_peak_rss() -> None:
    """Reset the process's peak-RSS high-water mark (``VmHWM``) to its current RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # then peak_rss_kib keeps the lifetime peak: an overcount, never an undercount


def peak_rss_kib() -> int:
    """Peak RSS since the process started or :func:`reset_peak_rss` last ran, in KiB."""
    hwm = _proc_status_kib("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def rss_kib() -> int:
    """Current RSS in KiB (the peak where the current value cannot be read)."""
    rss = _proc_status_kib("VmRSS")
    return rss if rss is not None else peak_rss_kib()


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Drop what native code writes to fd 2 (xgrammar logs a warning per relaxed keyword)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def measure(engine: Engine, case: Case, tokens: list[int]) -> Outcome:
    """:func:`walk`, with unsupported schemas and crashes recorded instead of raised."""
    try:
        with native_stderr_silenced():
            return walk(engine, case.schema, tokens)
    except Unsupported as err:
        return Outcome(status="unsupported", detail=str(err)[:300], keyword=err.keyword)
    except Exception:  # noqa: BLE001 -- one schema must never stop the run
        return Outcome(status="error", detail=traceback.format_exc(limit=4)[-1500:])


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def fmt(x: float) -> str:
    if x != x:  # nan
        return "–"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def engine_row(name: str, outcomes: dict[str, Outcome], timeout_s: float) -> list[str]:
    ok = [o for o in outcomes.values() if o.status == "ok"]
    compile_ms = [o.compile_ms for o in ok]
    mask_us = [t for o in ok for t in o.mask_us]
    n_unsupported = sum(o.status == "unsupported" for o in outcomes.values())
    n_error = sum(o.status == "error" for o in outcomes.values())
    n_rejected = sum(o.rejected is not None for o in ok)
    n_slow = sum(t > timeout_s * 1e3 for t in compile_ms)
    return [name, str(len(ok)), f"{n_unsupported} / {n_error}", str(n_rejected), str(n_slow),
            *(fmt(pct(compile_ms, q)) for q in (50, 90, 99, 100)),
            *(fmt(pct(mask_us, q)) for q in (50, 90, 99, 100)), str(len(mask_us))]


def ratio_row(peer: str, results: dict[str, dict[str, Outcome]]) -> list[str]:
    """structgen p50 / peer p50, on the schemas both compiled and the walks both finished."""
    ours, theirs = results["structgen"], results[peer]
    both = [k for k in ours if ours[k].status == "ok" and theirs[k].status == "ok"]
    walked = [k for k in both if ours[k].rejected is None and theirs[k].rejected is None]
    c_ours, c_theirs = ([r[k].compile_ms for k in both] for r in (ours, theirs))
    m_ours, m_theirs = ([t for k in walked for t in r[k].mask_us] for r in (ours, theirs))
    return [f"structgen / {peer}", str(len(both)), fmt(pct(c_ours, 50) / pct(c_theirs, 50)),
            str(len(walked)), fmt(pct(m_ours, 50) / pct(m_theirs, 50))]


def versions(engines: list[str]) -> str:
    return package_versions([*(ENGINE_CLASSES[e].package for e in engines), "transformers", "numpy", "torch"])


def rejection(tokenizer: Any, tokens: list[int], o: Outcome) -> str:
    """``masked out: token 12 '":' after '...{"name"'`` -- where a walk stopped."""
    if o.rejected_at is None:
        return o.rejected
    pos = o.rejected_at
    before = tokenizer.decode(tokens[:pos])[-50:]
    return (f"{o.rejected}: token {pos}/{len(tokens)} id {tokens[pos]} "
            f"{tokenizer.decode([tokens[pos]])!r} after {before!r}")


def problems(tokenizer: Any, cases: list[Case], tokens: dict[str, list[int]],
             results: dict[str, dict[str, Outcome]]) -> list[str]:
    """Rejected walks and crashes, with whether the other engines completed the same walk."""
    lines = []
    for engine, outcomes in results.items():
        for case in cases:
            o = outcomes[case.name]
            peers_ok = [p for p in results if p != engine and results[p][case.name].status == "ok"
                        and results[p][case.name].rejected is None]
            note = f" (walk completed by: {', '.join(peers_ok) or 'none'})"
            if o.status == "error":
                lines.append(f"- **{engine}** error on `{case.name}`{note}:\n  ```\n  "
                             + o.detail.strip().replace("\n", "\n  ") + "\n  ```")
            elif o.rejected:
                lines.append(f"- **{engine}** rejected walk on `{case.name}`{note}: "
                             f"{rejection(tokenizer, tokens[case.name], o)}")
    return lines


def slowest(results: dict[str, dict[str, Outcome]]) -> list[str]:
    """Per engine, the schema with the slowest compile and the one with the slowest mask."""
    lines = []
    for engine, outcomes in results.items():
        ok = {name: o for name, o in outcomes.items() if o.status == "ok"}
        if not ok:
            continue
        c_name = max(ok, key=lambda k: ok[k].compile_ms)
        line = f"- {engine}: compile {fmt(ok[c_name].compile_ms)} ms on `{c_name}`"
        walked = {k: o for k, o in ok.items() if o.mask_us}
        if walked:
            m_name = max(walked, key=lambda k: max(walked[k].mask_us))
            m_us = walked[m_name].mask_us
            line += (f"; mask {fmt(max(m_us))} µs on `{m_name}` (after token {int(np.argmax(m_us))} of "
                     f"{len(m_us)}, walk total {fmt(sum(m_us) / 1e3)} ms)")
        lines.append(line)
    return lines


def unsupported_list(results: dict[str, dict[str, Outcome]]) -> list[str]:
    return [f"- {engine} `{name}`: {o.detail}" for engine, outcomes in results.items()
            for name, o in outcomes.items() if o.status == "unsupported"]


def keyword_rows(cases: list[Case], results: dict[str, dict[str, Outcome]], engines: list[str],
                 keywords: tuple[str, ...]) -> list[list[str]]:
    """Per keyword: sampled schemas using it, how many each engine compiled (and of those, walks
    it rejected), and structgen's refusals naming that keyword."""
    used = {c.name: keywords_used(c.schema, keywords) for c in cases}
    rows = []
    for kw in ("any of them", *keywords):
        names = [c.name for c in cases if kw == "any of them" or kw in used[c.name]]
        cells = []
        for e in engines:
            ok = [results[e][n] for n in names if results[e][n].status == "ok"]
            rejected = sum(o.rejected is not None for o in ok)
            cells.append(f"{len(ok)}" + (f" ({rejected} rejected)" if rejected else ""))
        refused = "–"
        if "structgen" in engines:
            on = keywords if kw == "any of them" else (kw,)
            refused = str(sum(results["structgen"][n].status == "unsupported"
                              and results["structgen"][n].keyword in on for n in names))
        rows.append([f"`{kw}`" if kw != "any of them" else kw, str(len(names)), *cells, refused])
    return rows


def refusal_rows(outcomes: dict[str, Outcome]) -> list[list[str]]:
    """structgen's refusals grouped by the keyword the error names, most frequent first."""
    by_keyword: dict[str, list[str]] = defaultdict(list)
    for name, o in outcomes.items():
        if o.status == "unsupported":
            # no keyword named: the error type (SchemaError: invalid schema, CompileError, ...)
            by_keyword[f"`{o.keyword}`" if o.keyword else f"({o.detail.split(':')[0]})"].append(name)
    return [[kw, str(len(names)), ", ".join(f"`{n}`" for n in names[:3]) + (", ..." * (len(names) > 3))]
            for kw, names in sorted(by_keyword.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


def keyword_section(args: argparse.Namespace, cases: list[Case],
                    results: dict[str, dict[str, Outcome]]) -> list[str]:
    """``--select scalars``: the per-keyword table and structgen's refusals by keyword."""
    keywords = SELECTIONS[args.select]
    if not keywords:
        return []
    parts = [
        "## Keywords",
        "",
        "Per keyword: the sampled schemas using it anywhere (a schema may use several), how many "
        "each engine compiled (walks of the valid instance it then rejected in brackets), and how "
        "many structgen refused with an error naming that keyword (\"any of them\": naming one of "
        "these keywords); a schema using `pattern` may be refused on another keyword, e.g. `$ref`, "
        "listed below.",
        "",
        markdown_table(["keyword", "schemas", *(f"{e} compiled" for e in args.engines),
                        "structgen refused on it"],
                       keyword_rows(cases, results, args.engines, keywords)),
        "",
    ]
    if "structgen" in args.engines:
        parts += [
            "structgen refusals by the keyword its `StructgenError` names (all sampled schemas):",
            "",
            markdown_table(["keyword", "refusals", "schemas"], refusal_rows(results["structgen"]))
            if any(o.status == "unsupported" for o in results["structgen"].values()) else "none",
            "",
        ]
    return parts


def report(args: argparse.Namespace, tokenizer: Any, cases: list[Case], tokens: dict[str, list[int]],
           setup: dict[str, tuple[float, Outcome]], results: dict[str, dict[str, Outcome]]) -> str:
    header = ["engine", "compiled", "unsupported / errors", "rejected walks", f"compile > {args.timeout:g} s",
              "compile p50 ms", "p90", "p99", "max", "mask p50 µs", "p90", "p99", "max", "masks"]
    rows = [engine_row(e, results[e], args.timeout) for e in args.engines]
    setup_rows = [[e, f"{setup[e][0]:.2f}", fmt(setup[e][1].compile_ms or float("nan")),
                   setup[e][1].status if setup[e][1].rejected is None else "rejected"]
                  for e in args.engines]
    sources = defaultdict(int)
    for c in cases:
        sources[c.source] += 1
    keywords = SELECTIONS[args.select]
    title = f"# Engine benchmark: compile and mask time, whitespace={args.whitespace}"
    selected = ""
    if keywords:
        title += ", schemas with numeric bounds, patterns or formats"
        selected = f" using at least one of {', '.join(keywords)} (anywhere in the schema),"
    parts = [
        title,
        "",
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}, one thread (RAYON/OMP_NUM_THREADS=1, "
        f"xgrammar max_threads=1); Python {platform.python_version()}",
        f"- versions: {versions(args.engines)}; structgen checkout {git_commit()}",
        f"- tokenizer: {getattr(tokenizer, 'name_or_path', '?')} ({len(tokenizer)} tokens)",
        f"- schemas: {len(cases)} MaskBench schemas with a valid instance,{selected} seed {args.seed}, "
        "round-robin over sources: " + ", ".join(f"{s} {k}" for s, k in sorted(sources.items())),
        "- structgen: `compile_json_schema` defaults (walking grammar: every JSON spelling of a "
        "value, open objects, nothing relaxed)",
        "",
        "compile = compile + matcher + first mask of a schema new to the process (per-tokenizer "
        "state built and warmed beforehand). mask = each mask after a token of the first valid "
        "instance, end-of-sequence position included. Percentiles over the schemas / masks each "
        "engine handled.",
        "",
        markdown_table(header, rows),
        "",
        "Ratios of p50s, on the schemas both engines compiled (compile) and the walks both "
        "completed (mask); below 1 means structgen is faster.",
        "",
        markdown_table(["", "schemas", "compile p50 ratio", "walks", "mask p50 ratio"],
                       [ratio_row(p, results) for p in args.engines if p != "structgen"]
                       if "structgen" in args.engines else []),
        "",
        "One-time per-tokenizer cost (setup: vocabulary / tokenizer info built once) and the "
        "warm-up schema (first compile in the process, not in the table above):",
        "",
        markdown_table(["engine", "setup s", "warm-up compile ms", "warm-up walk"], setup_rows),
        "",
        *keyword_section(args, cases, results),
        "Slowest schemas:",
        "",
        *slowest(results),
        "",
        "## Rejected walks and errors",
        "",
        *(problems(tokenizer, cases, tokens, results) or ["none"]),
        "",
        *details("Unsupported schemas", unsupported_list(results)),
    ]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--whitespace", choices=("compact", "flexible"), default="compact")
    p.add_argument("--n", type=int, default=100, help="number of schemas (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="comma-separated subset of " + ",".join(ENGINES))
    p.add_argument("--tokenizer", default=None,
                   help="Hugging Face tokenizer directory, or smollm2 / gemma (default: structgen's "
                        "SmolLM2 tokenizer)")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="compile seconds over which a schema is flagged (not interrupted)")
    p.add_argument("--select", choices=tuple(SELECTIONS), default="all",
                   help="schemas to sample from: all (default), or scalars: those using "
                        + ", ".join(SCALAR_KEYWORDS) + " anywhere")
    p.add_argument("--data", type=Path, default=MASKBENCH, help="maskbench.jsonl.gz")
    p.add_argument("--out", type=Path, default=None,
                   help="report path (default results/engine-<ws>.md; engine-<ws>-scalars.md with "
                        "--select scalars)")
    args = p.parse_args(argv)
    args.engines = choose(p, args.engines, ENGINES)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    tokenizer = load_tokenizer(args.tokenizer)
    cases = sample_cases(select_cases(load_cases(args.data), SELECTIONS[args.select]), args.n, args.seed)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    texts = {c.name: serialize(c.instance, args.whitespace) for c in cases}
    tokens = {name: encode(text) for name, text in texts.items()}
    warm_text = serialize(WARMUP_INSTANCE, args.whitespace)
    warm = Case("warm-up", "warm-up", WARMUP_SCHEMA, WARMUP_INSTANCE)

    setup: dict[str, tuple[float, Outcome]] = {}
    results: dict[str, dict[str, Outcome]] = {}
    for name in args.engines:  # one engine at a time: no interleaving of caches
        t0 = time.perf_counter()
        engine = ENGINE_CLASSES[name](tokenizer, args.whitespace)
        setup_s = time.perf_counter() - t0
        setup[name] = (setup_s, measure(engine, warm, encode(warm_text)))
        # Long-lived set-up objects (tokenizers, vocabularies) out of the cyclic collector's
        # way, as a serving process would do; otherwise a full collection (~0.2 s with
        # transformers loaded) lands on whichever mask happens to trigger it.
        gc.collect()
        gc.freeze()
        results[name] = {}
        for i, case in enumerate(cases):
            o = measure(engine, case, tokens[case.name])
            results[name][case.name] = o
            if o.compile_ms is not None and o.compile_ms > args.timeout * 1e3:
                print(f"[{name}] slow compile {o.compile_ms / 1e3:.1f} s: {case.name}", file=sys.stderr)
            print(f"\r[{name}] {i + 1}/{len(cases)}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        gc.unfreeze()

    text = report(args, tokenizer, cases, tokens, setup, results)
    suffix = "" if args.select == "all" else f"-{args.select}"
    publish(text, args.out or RESULTS / f"engine-{args.whitespace}{suffix}.md")


if __name__ == "__main__":
    main()
