"""The compile cache on disk: a JSON schema's grammar IR, ``relaxed`` record and automaton.

An entry lives at ``cache_dir()/"compiled"/<key[:2]>/<key>.pickle``: a header line (format and
key), the sha256 of the payload, then the zlib'd pickle. The key covers the cache format,
structgen's version and source digest, the compile options, the vocabulary fingerprint and the
schema's JSON text (see :class:`~structgen.engine.compiler.Compiler`).

Example
-------
>>> key = entry_key({"type": "integer"}, {"strict": False}, "vocab-fingerprint")
>>> len(key), entry_key({"type": {1, 2}}, {}, "v") is None   # a set is not JSON data
(64, True)
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import pickle
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from structgen.core.automaton import GrammarAutomaton
from structgen.core.ir import Grammar
from structgen.engine.disk_cache import atomic_write_bytes, cache_dir, code_digest
from structgen.version import __version__

__all__ = ["CACHE_FORMAT", "entry_key", "entry_path", "gc_paused", "load_entry", "store_entry"]

#: Layout of a compile-cache entry; bump it when the entry's header or payload changes.
CACHE_FORMAT = 1
_MAGIC = b"structgen-compiled"


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the duration.

    Compiling (or unpickling) a large schema allocates 10^5-10^6 objects, which sets off full
    collections over the whole heap, transformers and the vocabulary included: measured on the
    largest Github_ultra schemas, 2-4x the compile time. What compiling drops is freed by
    reference counting; the collector runs again afterwards.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def plain_json(value: Any) -> bool:
    """Whether ``value`` is JSON data its JSON text stands for exactly (dict with ``str`` keys,
    list, str, int, float, bool, None; no subclasses), so that text can be its cache key."""
    # A shared container is checked once; a cycle stops here too, and json.dumps refuses it.
    todo, seen = [value], set()
    while todo:
        v = todo.pop()
        t = type(v)
        if t in (dict, list):
            if id(v) in seen:
                continue
            seen.add(id(v))
        if t is dict:
            if any(type(k) is not str for k in v):
                return False
            todo.extend(v.values())
        elif t is list:
            todo.extend(v)
        elif t not in (str, int, float, bool, type(None)):
            return False
    return True


def entry_key(schema: Any, options: dict[str, Any], vocab_fingerprint: str) -> str | None:
    """The compile-cache key of a schema (hex sha256), or None when it is not plain JSON data."""
    if not plain_json(schema):
        return None
    try:
        # Keys in the schema's order (property order is grammar order); NaN/Infinity spelled
        # as json.dumps does; lone surrogates kept (surrogatepass), so the text is exact.
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return None
    # The header line is JSON without raw newlines, so b"\n" separates it from the schema.
    header = json.dumps([CACHE_FORMAT, __version__, code_digest(), vocab_fingerprint, options],
                        sort_keys=True)
    h = hashlib.sha256(header.encode() + b"\n")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def entry_path(key: str) -> Path:
    return cache_dir() / "compiled" / key[:2] / f"{key}.pickle"


def entry_header(key: str) -> bytes:
    return b"%s %d %s\n" % (_MAGIC, CACHE_FORMAT, key.encode())


def load_entry(path: Path, key: str) -> tuple[Grammar, tuple, GrammarAutomaton] | None:
    """The entry at ``path``, or None for a miss: absent, unreadable, truncated, corrupt, written
    for another key or format. Never raises for a bad entry; the caller overwrites it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    header = entry_header(key)
    if not data.startswith(header) or len(data) < len(header) + 32:
        return None
    digest, payload = data[len(header):len(header) + 32], data[len(header) + 32:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        with gc_paused():
            entry = pickle.loads(zlib.decompress(payload))
    except Exception:  # noqa: BLE001 - whatever a stale or damaged entry raises, it is a miss
        return None
    if (type(entry) is not tuple or len(entry) != 3 or not isinstance(entry[0], Grammar)
            or type(entry[1]) is not tuple or not isinstance(entry[2], GrammarAutomaton)):
        return None
    return entry


def store_entry(path: Path, key: str, entry: tuple[Grammar, tuple, GrammarAutomaton]) -> None:
    """Write an entry atomically: header (format, key), sha256 of the payload, zlib'd pickle.

    No fsync: a write cut short by a crash fails the checksum and reads as a miss. A cache that
    cannot be written (read-only, full disk) or an entry that cannot be pickled costs speed only.
    """
    try:
        payload = zlib.compress(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL), 1)
        atomic_write_bytes(path, entry_header(key) + hashlib.sha256(payload).digest() + payload,
                           fsync=False)
    except (OSError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        pass
