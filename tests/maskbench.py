"""A deterministic, tokenizer-independent sample of MaskBench schemas for tests.

MaskBench (``../shared/data/maskbench/maskbench.jsonl.gz``, see the data README, section 4) holds
~11k real JSON schemas, each with labelled valid and invalid instances. Tests here need a small
sample that is the same on every machine and every run, and spread over the benchmark's sources
(GitHub, Kubernetes, Glaive, BFCL, ...), so this module:

* streams the gzipped JSON-lines file once per process (nothing is cached on disk; the pass keeps
  only small candidates, a bounded number per source, so it costs a few seconds and little
  memory),
* orders each source's candidates by a stable hash of the schema name (SHA-256, not file order
  and not Python's salted ``hash``),
* keeps, per source, the first ``per_source`` schemas that ``structgen.compile_json_schema``
  accepts (a :class:`structgen.StructgenError` means "skip"; any other exception propagates).

The selected schemas are then serialised the way the engine expects: JSON objects with keys in
schema order (:func:`schema_order`), because the first-cut grammar fixes key order (defined
properties in schema order, then additional ones), as peer engines do.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import heapq
import json
import os
import re
import signal
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

__all__ = [
    "DATA_DIR",
    "MASKBENCH",
    "DISAGREEMENTS",
    "Case",
    "available",
    "source_of",
    "stable_hash",
    "iter_rows",
    "select",
    "disagreeing_schemas",
    "compact",
    "indented",
    "schema_order",
    "jsonschema_valid",
    "sample",
    "make_validator",
    "why_invalid",
    "judge_tests",
]

DATA_DIR = Path(os.environ.get("STRUCTGEN_DATA_DIR",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))
MASKBENCH = DATA_DIR / "maskbench" / "maskbench.jsonl.gz"
DISAGREEMENTS = DATA_DIR / "maskbench" / "python_jsonschema_disagreements.json"

#: Candidates kept per source during the single pass (lowest hashes first); enough headroom for
#: the schemas the compiler rejects (about half on GitHub sources).
_KEEP_PER_SOURCE = 96


def available() -> bool:
    """True when the MaskBench file is present."""
    return MASKBENCH.is_file()


def source_of(name: str) -> str:
    """The MaskBench subset a schema file belongs to.

    ``Github_easy---o1234.json`` -> ``Github_easy``; ``Kubernetes---kb_1_Normalized.json`` ->
    ``Kubernetes``; ``BFCL_parallel_multiple_12.json`` -> ``BFCL_parallel_multiple``;
    ``JME_7.json`` -> ``JME``.
    """
    if "---" in name:
        return name.split("---", 1)[0]
    return re.sub(r"_\d+\.json$", "", name)


def stable_hash(name: str) -> int:
    """A hash of ``name`` that is the same on every machine and run."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")


def iter_rows() -> Iterator[dict[str, Any]]:
    """Stream MaskBench rows ``{"name", "description", "schema", "tests", "meta"}``."""
    with gzip.open(MASKBENCH, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def document_lines(value: Any, prefix: str = "") -> Iterator[str]:
    """An instance as ``key.path: value`` lines, the document an extraction prompt shows:
    ``{"a": {"b": [1]}}`` -> ``"a.b.0: 1"``."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from document_lines(v, f"{prefix}{k}.")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from document_lines(v, f"{prefix}{i}.")
    else:
        yield f"{prefix.rstrip('.')}: {value}"


def compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def indented(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class Case:
    """One selected schema with its labelled instances (keys already in schema order)."""

    name: str
    source: str
    schema: Any = field(repr=False, compare=False)
    valid: tuple = field(repr=False, compare=False)
    invalid: tuple = field(repr=False, compare=False)

    @property
    def shortest_valid(self) -> Any:
        """The valid instance with the shortest compact serialisation (first one on ties)."""
        return min(self.valid, key=lambda d: len(compact(d).encode("utf-8")))


@functools.cache
def _candidates(max_chars: int, max_schema_size: int) -> dict[str, tuple[tuple[int, str, Any, tuple, tuple], ...]]:
    """One pass over the file: per source, the lowest-hash schemas with a short valid instance."""
    heaps: dict[str, list] = {}
    for row in iter_rows():
        tests = row.get("tests") or []
        valid = tuple(t["data"] for t in tests if t["valid"])
        if not valid:
            continue
        if row.get("meta", {}).get("full_size", 0) > max_schema_size:
            continue
        if min(len(compact(d).encode("utf-8")) for d in valid) > max_chars:
            continue
        name = row["name"]
        invalid = tuple(t["data"] for t in tests if not t["valid"])
        # heapq keeps the *largest* -hash on top, so the heap holds the lowest hashes.
        item = (-stable_hash(name), name, row["schema"], valid, invalid)
        heap = heaps.setdefault(source_of(name), [])
        if len(heap) < _KEEP_PER_SOURCE:
            heapq.heappush(heap, item)
        elif item[0] > heap[0][0]:
            heapq.heapreplace(heap, item)
    return {src: tuple(sorted(((-h, n, s, v, i) for h, n, s, v, i in heap)))
            for src, heap in heaps.items()}


@functools.cache
def _byte_vocab():
    from structgen.engine.vocab import Vocabulary

    return Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def _compiles(schema: Any) -> bool:
    """False when structgen refuses the schema (a :class:`structgen.StructgenError`).

    Any other exception is a compiler crash, not a refusal: the schema is kept, so the tests that
    compile it fail under their own ids instead of the crash breaking collection or hiding.
    """
    import structgen

    try:
        for ws in ("compact", "flexible"):
            structgen.compile_json_schema(schema, _byte_vocab(), whitespace=ws)
    except structgen.StructgenError:
        return False
    except Exception:  # noqa: BLE001 - see the docstring
        return True
    return True


@functools.cache
def select(sources: tuple[str, ...], per_source: int, *, max_chars: int = 120,
           max_schema_size: int = 20_000) -> tuple[Case, ...]:
    """``per_source`` schemas from each of ``sources``, deterministic, compiled OK by structgen.

    A schema qualifies when it has a valid instance whose compact JSON is at most ``max_chars``
    bytes, its file is at most ``max_schema_size`` bytes (``meta.full_size``; keeps compile time
    of the sample low), and ``structgen.compile_json_schema`` accepts it in both whitespace modes.
    Within a source, schemas are taken in :func:`stable_hash` order. A source that yields fewer
    than ``per_source`` schemas yields what it has (callers assert on the total).
    """
    cands = _candidates(max_chars, max_schema_size)
    out: list[Case] = []
    for src in sources:
        taken = 0
        for _h, name, schema, valid, invalid in cands.get(src, ()):
            if taken == per_source:
                break
            if not _compiles(schema):
                continue
            out.append(Case(name, src, schema,
                            tuple(schema_order(d, schema) for d in valid),
                            tuple(schema_order(d, schema) for d in invalid)))
            taken += 1
    return tuple(out)


def keywords_in(schema: Any) -> set[str]:
    """The JSON Schema keywords used anywhere in ``schema`` (values under enum/const/default/
    examples and the names under properties-like maps are not keywords)."""
    found: set[str] = set()
    maps = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")

    def walk(node: Any, is_map: bool = False) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if is_map:
                    walk(v)
                    continue
                found.add(k)
                if k not in ("enum", "const", "default", "examples"):
                    walk(v, k in maps)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return found


@functools.cache
def select_by_keywords(keywords: tuple[str, ...], per_keyword: int, *, max_chars: int = 120,
                       max_schema_size: int = 20_000) -> tuple[Case, ...]:
    """Up to ``per_keyword`` schemas using each of ``keywords`` (any source), deterministic.

    The same qualification as :func:`select` (a short valid instance, a small file, compiled by
    structgen in both whitespace modes); per keyword, candidates in :func:`stable_hash` order, a
    schema counted once for the first keyword that takes it.
    """
    pools: dict[str, list] = {k: [] for k in keywords}
    for row in iter_rows():
        tests = row.get("tests") or []
        valid = tuple(t["data"] for t in tests if t["valid"])
        if not valid or row.get("meta", {}).get("full_size", 0) > max_schema_size:
            continue
        if min(len(compact(d).encode("utf-8")) for d in valid) > max_chars:
            continue
        used = keywords_in(row["schema"])
        for k in keywords:
            if k in used:
                pools[k].append((stable_hash(row["name"]), row["name"], row["schema"], valid,
                                 tuple(t["data"] for t in tests if not t["valid"])))
    out: list[Case] = []
    taken: set[str] = set()
    for k in keywords:
        count = 0
        for _h, name, schema, valid, invalid in sorted(pools[k], key=lambda c: (c[0], c[1])):
            if count == per_keyword:
                break
            if name in taken or not _compiles(schema):
                continue
            taken.add(name)
            out.append(Case(name, source_of(name), schema,
                            tuple(schema_order(d, schema) for d in valid),
                            tuple(schema_order(d, schema) for d in invalid)))
            count += 1
    return tuple(out)


def sample(names: Iterable[str], n: int | None, seed: int) -> list[str]:
    """``n`` names (all when None) round-robin over the sources (sorted), each source in order of
    a stable hash of ``seed`` and the name: the same sample on every machine."""
    queues: dict[str, list[str]] = defaultdict(list)
    for name in names:
        queues[source_of(name)].append(name)
    for source, members in queues.items():
        members.sort(key=lambda nm: (stable_hash(f"{seed}\0{nm}"), nm), reverse=True)
    total = sum(len(q) for q in queues.values())
    n = total if n is None else min(n, total)
    picked: list[str] = []
    while len(picked) < n:
        for source in sorted(queues):
            if queues[source] and len(picked) < n:
                picked.append(queues[source].pop())
    return picked


@functools.cache
def disagreeing_schemas() -> frozenset[str]:
    """Schemas whose labels python-jsonschema disagrees with (it does not assert ``format``)."""
    return frozenset(json.loads(DISAGREEMENTS.read_text())["schemas"])


# ------------------------------------------------------------------ labels, judged with formats

#: python-jsonschema on one schema's instances, at most (best effort: SIGALRM, main thread).
ORACLE_TIMEOUT_S = 30


class _OracleTimeout(Exception):
    """python-jsonschema ran over :data:`ORACLE_TIMEOUT_S` on one schema."""


def _alarm(signum: int, frame: Any) -> None:
    """SIGALRM handler: interrupt python-jsonschema on a schema it takes too long over."""
    raise _OracleTimeout


def make_validator(schema: Any) -> Any:
    """python-jsonschema's validator for ``schema``: draft from ``$schema`` (default 2020-12),
    formats asserted by ``FormatChecker()``."""
    from jsonschema import Draft202012Validator, FormatChecker, validators

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown $schema: a DeprecationWarning, then the default
        cls = validators.validator_for(schema if isinstance(schema, dict) else {}, default=Draft202012Validator)
    return cls(schema, format_checker=FormatChecker())


def why_invalid(validator: Any, data: Any) -> str:
    """python-jsonschema's best error for ``data``, shortened."""
    from jsonschema.exceptions import best_match

    err = best_match(validator.iter_errors(data))
    if err is None:
        return ""
    where = "/" + "/".join(str(p) for p in err.absolute_path)
    return f"{where}: {err.message}"[:160]


def judge_tests(schema: Any, tests: list[dict[str, Any]], disagreeing: bool) -> tuple[list, dict, Any]:
    """Decide each instance's expected verdict: ``([(index, expected)], judge info, validator)``.

    python-jsonschema overrules the label where it judges otherwise; for a disagreeing schema
    only instances both call valid are kept. Instances python-jsonschema cannot judge keep
    their label (``oracle_error`` says why).
    """
    info: dict[str, Any] = {"skipped": 0, "relabelled": [], "oracle_error": None, "why": {}}
    validator = None
    verdicts: list[bool | None] = [None] * len(tests)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, ORACLE_TIMEOUT_S)
    try:
        validator = make_validator(schema)
        for i, t in enumerate(tests):
            verdicts[i] = bool(validator.is_valid(t["data"]))
            if not verdicts[i]:
                info["why"][str(i)] = why_invalid(validator, t["data"])
    except _OracleTimeout:
        info["oracle_error"] = f"timeout after {ORACLE_TIMEOUT_S} s"
        validator, verdicts = None, [None] * len(tests)
    except Exception as err:  # noqa: BLE001 -- unresolvable $ref, bad regex...: fall back to labels
        info["oracle_error"] = f"{type(err).__name__}: {str(err)[:120]}"
        validator, verdicts = None, [None] * len(tests)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    kept = []
    for i, (t, verdict) in enumerate(zip(tests, verdicts)):
        label = bool(t["valid"])
        if disagreeing:
            if label and verdict is not False:
                kept.append((i, True))
            else:
                info["skipped"] += 1
            continue
        if verdict is not None and verdict != label:
            info["relabelled"].append([i, label, verdict])
        kept.append((i, label if verdict is None else verdict))
    return kept, info, validator


# ------------------------------------------------------------------ validation and key order


def _validator(schema: Any):
    from jsonschema import Draft202012Validator, validators

    cls = validators.validator_for(schema if isinstance(schema, dict) else {},
                                   default=Draft202012Validator)
    return cls(schema)


def jsonschema_valid(schema: Any, data: Any) -> bool:
    """python-jsonschema's verdict (default settings: ``format`` not asserted)."""
    return _validator(schema).is_valid(data)


def _resolve(node: Any, root: Any) -> Any:
    """Follow local ``$ref`` chains (``#/...``); other refs are left alone."""
    seen = 0
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#") and seen < 32:
        target: Any = root
        for part in node["$ref"][1:].split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                target = target[int(part)] if isinstance(target, list) else target[part]
            except (KeyError, IndexError, ValueError, TypeError):
                return node
        node = target
        seen += 1
    return node


def _merged_properties(node: Any, root: Any, depth: int = 0) -> dict[str, list[Any]]:
    """Defined keys in the order structgen merges them (structgen/frontends/json_schema/dnf.py): a ``$ref``
    target's first, then the schema's own ``properties``, then each ``allOf`` branch's; each key
    with the subschemas that name it."""
    out: dict[str, list[Any]] = {}
    if depth > 32 or not isinstance(node, dict):
        return out

    def add(found: dict[str, list[Any]]) -> None:
        for k, subs in found.items():
            out.setdefault(k, []).extend(subs)

    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        add(_merged_properties(_resolve({"$ref": ref}, root), root, depth + 1))
    if isinstance(node.get("properties"), dict):
        add({k: [v] for k, v in node["properties"].items()})
    for branch in node.get("allOf") if isinstance(node.get("allOf"), list) else ():
        add(_merged_properties(branch, root, depth + 1))
    return out


def _merged_keyword(node: Any, root: Any, kw: str, depth: int = 0) -> Any:
    """The first ``kw`` along the same path as :func:`_merged_properties` (``None``: none)."""
    if depth > 32 or not isinstance(node, dict):
        return None
    ref = node.get("$ref")
    found = (_merged_keyword(_resolve({"$ref": ref}, root), root, kw, depth + 1)
             if isinstance(ref, str) and ref.startswith("#") else None)
    if found is None:
        found = node.get(kw)
    for branch in node.get("allOf") if isinstance(node.get("allOf"), list) else ():
        if found is None:
            found = _merged_keyword(branch, root, kw, depth + 1)
    return found


def schema_order(data: Any, schema: Any, root: Any = None, _depth: int = 0) -> Any:
    """``data`` with object keys in the order the grammar expects.

    Defined ``properties`` first, in schema order (merged through ``$ref`` and ``allOf`` as
    structgen merges them: the target's keys, the schema's own, each branch's), then the other
    keys in their original order; recursively through ``properties``, ``additionalProperties``,
    ``items`` and local ``$ref``. Under ``anyOf`` and ``oneOf`` the first branch that ``data``
    validates against decides (the first object branch when none does), its keys after the
    other keywords'. Key order is not a validation concern, so an instance's validity is
    unchanged.
    """
    root = schema if root is None else root
    if _depth > 64:
        return data
    pure_ref = isinstance(schema, dict) and not any(k in schema for k in ("properties", "allOf", "anyOf", "oneOf"))
    node = _resolve(schema, root) if pure_ref else schema
    if not isinstance(node, dict):
        return data
    choices = [k for k in ("anyOf", "oneOf") if isinstance(node.get(k), list) and node[k]]
    if choices:  # the branch data fits, merged after the other keywords (as structgen merges)
        chosen_all = []
        for either in choices:
            branches = [_resolve(b, root) for b in node[either]]
            chosen = None
            if root is schema or isinstance(root, dict):
                for b in branches:
                    try:
                        if _validator(root).evolve(schema=b).is_valid(data):
                            chosen = b
                            break
                    except Exception:
                        continue
            if chosen is None:
                chosen = next((b for b in branches if isinstance(b, dict) and "properties" in b), None)
            if chosen is not None:
                chosen_all.append(chosen)
        rest = {k: v for k, v in node.items() if k not in choices}
        return schema_order(data, {"allOf": [rest, *chosen_all]}, root, _depth + 1)
    if isinstance(data, dict):
        props = _merged_properties(node, root)
        extra = _merged_keyword(node, root, "additionalProperties")
        out: dict[str, Any] = {}
        for k, subs in props.items():
            if k in data:
                sub = subs[0] if len(subs) == 1 else {"allOf": subs}
                out[k] = schema_order(data[k], sub, root, _depth + 1)
        for k, v in data.items():
            if k not in props:
                out[k] = schema_order(v, extra, root, _depth + 1) if isinstance(extra, dict) else v
        return out
    if isinstance(data, list):
        items = _merged_keyword(node, root, "items")
        if isinstance(items, dict):
            return [schema_order(v, items, root, _depth + 1) for v in data]
        return data
    return data
