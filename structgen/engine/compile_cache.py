"""The compile cache on disk: a JSON schema's grammar IR, ``relaxed`` record and automaton.

An entry lives at ``cache_dir()/"compiled"/<key[:2]>/<key>.pickle``: a header line (format and
key), an HMAC-SHA256 seal of header and payload, then the zlib'd pickle. The key covers the cache
format, structgen's version and source digest, the compile options, the vocabulary fingerprint
and the schema's JSON text (see :class:`~structgen.engine.compiler.Compiler`).

Security: unpickling runs code, so an entry is only unpickled when the cache folders and file
are the user's own and writable by no one else, and its seal (keyed by a secret file only the
user can read) holds; it is then unpickled by a restricted unpickler that builds only the grammar
IR, automaton and ``Relaxed`` classes (:data:`ENTRY_CLASSES`). Anything else is a miss: compiled
again and overwritten (:mod:`structgen.engine.sealed`).

Example
-------
>>> key = entry_key({"type": "integer"}, {"strict": False}, "vocab-fingerprint")
>>> len(key), entry_key({"type": {1, 2}}, {}, "v") is None   # a set is not JSON data
(64, True)
"""

from __future__ import annotations

import hashlib
import json
import pickle
import zlib
from pathlib import Path
from typing import Any

from structgen.core.automaton import GrammarAutomaton
from structgen.core.ir import Grammar
from structgen.core.limits import check_input_size
from structgen.engine.collector import gc_paused
from structgen.engine.disk_cache import cache_dir, code_digest
from structgen.engine.sealed import read_sealed, restricted_loads, write_sealed
from structgen.version import __version__

__all__ = ["CACHE_FORMAT", "ENTRY_CLASSES", "entry_key", "entry_path", "load_entry",
           "store_entry"]

#: Layout of a compile-cache entry; bump it when the entry's header or payload changes.
#: 2: sealed with an HMAC instead of a sha256 anyone could recompute.
CACHE_FORMAT = 2
_MAGIC = b"structgen-compiled"

#: The only classes an entry may build when unpickled (module to names): what pickling real
#: entries needs (JSON schemas of every kind, Lark and SQL grammars, tool calls; listed with
#: ``pickletools`` / a recording ``find_class``). Containers, bytes and numbers are opcodes of
#: the pickle protocol and need none. A class missing here makes its entries misses (compiled
#: again each time), which tests/test_cache_security.py would show.
ENTRY_CLASSES: dict[str, frozenset[str]] = {
    "structgen.core.ir": frozenset({"Grammar", "Lit", "ByteClass", "Seq", "Alt", "Repeat", "Ref",
                                    "Counted", "Fsm", "Unordered"}),
    "structgen.core.automaton": frozenset({"GrammarAutomaton", "RuleAutomaton", "Guard", "UnorderedItems"}),
    "structgen.core.unordered": frozenset({"Slots"}),
    "structgen.frontends.json_schema.lowering": frozenset({"Relaxed"}),
    "builtins": frozenset({"set", "frozenset", "list", "dict", "tuple", "bytearray"}),
}


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
    check_input_size(text, "the schema (as JSON text)")
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
    for another key or format, not sealed with this cache's key, in a folder or file others can
    write. Never raises for a bad entry; the caller overwrites it."""
    payload = read_sealed(path, entry_header(key))
    if payload is None:
        return None
    try:
        with gc_paused():
            entry = restricted_loads(zlib.decompress(payload), ENTRY_CLASSES)
    except Exception:  # noqa: BLE001 - whatever a stale or damaged entry raises, it is a miss
        return None
    if (type(entry) is not tuple or len(entry) != 3 or not isinstance(entry[0], Grammar)
            or type(entry[1]) is not tuple or not isinstance(entry[2], GrammarAutomaton)):
        return None
    return entry


def store_entry(path: Path, key: str, entry: tuple[Grammar, tuple, GrammarAutomaton]) -> None:
    """Write an entry atomically: header (format, key), its seal, zlib'd pickle.

    No fsync: a write cut short by a crash fails the seal and reads as a miss. A cache that
    cannot be written (read-only, full disk, not safe to use) or an entry that cannot be pickled
    costs speed only.
    """
    try:
        payload = zlib.compress(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL), 1)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return
    write_sealed(path, entry_header(key), payload)
