"""Nothing in the disk caches runs code (issue 25, item 2).

Before: a compile-cache entry was a header, a sha256 anyone can recompute and a pickle, and a
token-mask facts file was a bare pickle, so whoever could write into the cache folder ran code
on the next compile. Now (:mod:`structgen.engine.sealed`) entries are sealed with an HMAC keyed
by a secret file only the user can read, nothing is read from folders or files others can write
(a warning says so), compile entries are unpickled by a restricted unpickler, and facts are
plain arrays (``.npz`` without pickles).

Each attack plants an object whose unpickling would create a marker file (through
``os.system`` or ``builtins.exec``) and checks that the marker never appears and that the
grammar still masks exactly as a fresh compile does. Every test uses its own cache folder.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import pickle
import shlex
import sqlite3
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

import structgen
import structgen.frontends.json_schema.translate
from structgen import Compiler
from structgen.engine import compile_cache, compiled as compiled_mod, compiler as compiler_mod
from structgen.engine import masks as masks_mod, sealed, state_facts
from structgen.engine.vocab import Vocabulary
from structgen.errors import UnsafeCacheWarning
from structgen.frontends.tool_calls import FORMATS, read_tools, tool_call_grammar
from test_compile_cache import count_translations  # one helper for both cache test files

POSIX = hasattr(os, "geteuid")
OPTIONS = {"whitespace": "flexible", "strict": False, "canonical": False, "lenient": False}
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "kind": {"enum": ["leaf", "node"]},
        "size": {"type": "integer", "minimum": -5, "maximum": 500},
        "child": {"$ref": "#"},
    },
    "required": ["name", "kind"],
}
TEXT = '{"name": "root", "kind": "node", "size": 42, "child": {"name": "x", "kind": "leaf"}}'


def byte_vocab() -> Vocabulary:
    """Bytes plus a few multi-byte tokens; a new object each time (no in-memory state shared)."""
    pieces = [bytes([b]) for b in range(256)] + [b'{"', b'": "', b'", "', b'"}', b"name", b"leaf"]
    return Vocabulary(pieces + [None], eos_ids=[len(pieces)])


class RunsShell:
    """Unpickling this runs ``touch marker`` through ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


class RunsPython:
    """Unpickling this runs Python through ``builtins.exec``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache folder with the disk caches on, every mask fact saved to disk, fresh
    shared compilers; returns (cache folder, marker path)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(root))
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "1")
    monkeypatch.setattr(compiler_mod, "COMPILERS", {})
    monkeypatch.setattr(masks_mod, "_DISK_CACHE_AFTER_S", -1.0)  # every fact goes to disk
    return root, tmp_path / "marker"


def walk(compiled, text: str = TEXT) -> list:
    """Masks, forced text and end flags along ``text`` (byte tokens)."""
    m = compiled.matcher()
    out = []
    for b in text.encode():
        out.append((m.mask_words().tobytes(), m.forced_text(), m.can_end()))
        assert m.advance(b), m.last_rejection
    out.append((m.mask_words().tobytes(), m.forced_text(), m.can_end()))
    return out


def fresh() -> list:
    return walk(Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA))


def entry(root: Path) -> Path:
    key = compile_cache.entry_key(SCHEMA, OPTIONS, byte_vocab().fingerprint)
    return compile_cache.entry_path(key)


def facts_files(root: Path) -> list[Path]:
    return sorted((root / "facts").rglob("*.facts"))


def evil_pickles(marker: Path) -> list[bytes]:
    return [pickle.dumps(RunsShell(marker), protocol=p) for p in (0, 2, 5)] + \
           [pickle.dumps(RunsPython(marker), protocol=5)]


def seal_with_cache_key(root: Path, header: bytes, payload: bytes) -> bytes:
    """What only the user could write: a correct seal (an attacker who stole the key)."""
    key = (root / sealed.KEY_NAME).read_bytes()
    return header + hmac.new(key, header + payload, hashlib.sha256).digest() + payload


# ------------------------------------------------------------------ planted compile entries

@pytest.mark.parametrize("how", ["old sha256 checksum", "forged seal, no key", "another key's seal",
                                 "key file deleted", "stolen key"])
def test_a_planted_compile_entry_never_runs(cache, monkeypatch, how):
    root, marker = cache
    expected = fresh()
    Compiler(byte_vocab()).json_schema(SCHEMA)
    path = entry(root)
    header = path.read_bytes().split(b"\n", 1)[0] + b"\n"
    for evil in evil_pickles(marker):
        payload = zlib.compress(evil)
        data = {
            "old sha256 checksum": header + hashlib.sha256(payload).digest() + payload,
            "forged seal, no key": header + os.urandom(32) + payload,
            "another key's seal": header + hmac.new(os.urandom(32), header + payload,
                                                    hashlib.sha256).digest() + payload,
            "key file deleted": header + os.urandom(32) + payload,
            "stolen key": seal_with_cache_key(root, header, payload),  # the restricted unpickler
        }[how]
        if how == "key file deleted":
            (root / sealed.KEY_NAME).unlink(missing_ok=True)
        path.write_bytes(data)
        calls = count_translations(monkeypatch)
        got = Compiler(byte_vocab()).json_schema(SCHEMA)
        assert not marker.exists()
        assert calls == [1]  # a miss: compiled again
        assert walk(got) == expected
        assert path.read_bytes() != data  # and overwritten with a sealed entry
    # the rewritten entry is a hit again
    calls = count_translations(monkeypatch)
    assert walk(Compiler(byte_vocab()).json_schema(SCHEMA)) == expected and calls == []


def test_the_restricted_unpickler_refuses_code():
    for evil in evil_pickles(Path("/nonexistent/marker")):
        with pytest.raises(pickle.UnpicklingError, match="may not appear"):
            sealed.restricted_loads(evil, compile_cache.ENTRY_CLASSES)
    for name in ("eval", "getattr", "__import__", "open"):
        data = b"cbuiltins\n" + name.encode() + b"\n."
        with pytest.raises(pickle.UnpicklingError):
            sealed.restricted_loads(data, compile_cache.ENTRY_CLASSES)
    module, name = b"structgen.core.ir", b"Lit.__init__.__globals__"  # a dotted path out of a class
    dotted = b"\x80\x04\x8c%c%s\x8c%c%s\x93." % (len(module), module, len(name), name)
    with pytest.raises(pickle.UnpicklingError):
        sealed.restricted_loads(dotted, compile_cache.ENTRY_CLASSES)


def grammars_of_every_kind(tmp_path) -> list:
    v = byte_vocab()
    comp = Compiler(v, disk_cache=False)
    db = tmp_path / "t.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    con.commit()
    con.close()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}]
    root = Path(structgen.__file__).parent / "grammars"
    return ([structgen.compile_grammar(p, v) for p in sorted(root.glob("*.lark")) if p.stem != "common"]
            + [structgen.compile_sql(db, v, strict=True).grammar]
            + [comp.grammar(tool_call_grammar(read_tools(tools), f)) for f in FORMATS.values()])


def test_the_allowed_classes_cover_every_kind_of_grammar(tmp_path):
    """Entries of Lark, SQL and tool-call grammars (and, below, JSON schemas) unpickle through
    the restricted unpickler: the allow-list holds every class they need."""
    for c in grammars_of_every_kind(tmp_path):
        data = pickle.dumps((c.grammar, (), c.automaton), protocol=pickle.HIGHEST_PROTOCOL)
        grammar, _, automaton = sealed.restricted_loads(data, compile_cache.ENTRY_CLASSES)
        assert grammar == c.grammar and len(automaton.rules) == len(c.automaton.rules)


SCHEMAS = [
    SCHEMA,
    {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 3}, {"type": "null"},
                                          {"const": {"x": [1, 2.5]}}]}, "minItems": 2, "maxItems": 10},
    {"type": "object", "patternProperties": {"^x-": {"type": "boolean"}},
     "propertyNames": {"pattern": "^[a-z-]+$"}, "minProperties": 1},
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "string", "format": "date-time"}},
                "required": ["a"]},
               {"type": "object", "properties": {"b": {"type": "string", "format": "email"}}}],
     "not": {"type": "object", "required": ["c"]}},
    {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 1234567.89}}},  # relaxed
    {"type": "string", "pattern": "^[A-Z]{2}-\\d{3,5}$"},
    True,
]


def test_json_schema_entries_of_every_kind_load_from_disk(cache, monkeypatch):
    first = [Compiler(byte_vocab()).json_schema(s, lenient=True) for s in SCHEMAS]

    def refuse(*args, **kwargs):
        raise AssertionError("compiled although the disk cache holds the entry")

    monkeypatch.setattr(structgen.frontends.json_schema.translate, "translate_schema", refuse)
    monkeypatch.setattr(compiled_mod, "build_automaton", refuse)
    again = [Compiler(byte_vocab()).json_schema(s, lenient=True) for s in SCHEMAS]
    assert [a.grammar for a in again] == [f.grammar for f in first]
    assert [a.relaxed for a in again] == [f.relaxed for f in first]
    assert any(a.relaxed for a in again)


# ------------------------------------------------------------------ planted facts files

@pytest.mark.parametrize("how", ["raw pickle", "sealed pickle", "sealed npz with objects"])
def test_a_planted_facts_file_never_runs(cache, how):
    root, marker = cache
    expected = fresh()  # computes the facts and saves them
    files = facts_files(root)
    assert files
    for f in files:
        header = f.read_bytes().split(b"\n", 1)[0] + b"\n"
        evil = pickle.dumps(RunsShell(marker), protocol=2)
        if how == "raw pickle":
            data = evil
        elif how == "sealed pickle":
            data = seal_with_cache_key(root, header, evil)
        else:
            buf = io.BytesIO()
            objects = np.empty(1, dtype=object)
            objects[0] = RunsPython(marker)
            np.savez(buf, inside=objects, key_lens=objects, key_bytes=objects,
                     owner_counts=objects, owners=objects)
            data = seal_with_cache_key(root, header, buf.getvalue())
        f.write_bytes(data)
    got = Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA)
    assert walk(got) == expected
    assert not marker.exists()
    assert all(f.read_bytes()[:15] == b"structgen-facts" for f in facts_files(root))  # rewritten


def test_facts_loaded_from_disk_mask_as_computed(cache, monkeypatch):
    root, _ = cache
    expected = fresh()  # computes the facts and saves them
    assert facts_files(root)
    loads: list[bool] = []
    real = state_facts.load

    def counting(*args):
        got = real(*args)
        loads.append(got is not None)
        return got

    monkeypatch.setattr(state_facts, "load", counting)
    assert walk(Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA)) == expected
    assert loads and all(loads)


# ------------------------------------------------------------------ unsafe folders and files

def plant_sealed_evil(root: Path, marker: Path) -> Path:
    """A compile entry with a correct seal and a payload that runs code if unpickled unchecked."""
    Compiler(byte_vocab()).json_schema(SCHEMA)
    path = entry(root)
    header = path.read_bytes().split(b"\n", 1)[0] + b"\n"
    path.write_bytes(seal_with_cache_key(root, header, zlib.compress(evil_pickles(marker)[0])))
    return path


@pytest.mark.skipif(not POSIX, reason="no user ids or mode bits")
@pytest.mark.parametrize("where, mode", [
    ("root", 0o777), ("root", 0o775), ("compiled", 0o757), ("shard", 0o770),
    ("entry", 0o666), ("key", 0o644), ("key", 0o604),
])
def test_a_cache_others_can_write_is_not_read(cache, monkeypatch, where, mode):
    root, marker = cache
    expected = fresh()
    path = plant_sealed_evil(root, marker)
    before = path.read_bytes()
    target = {"root": root, "compiled": root / "compiled", "shard": path.parent, "entry": path,
              "key": root / sealed.KEY_NAME}[where]
    os.chmod(target, mode)
    calls = count_translations(monkeypatch)
    with pytest.warns(UnsafeCacheWarning, match="chmod") as record:
        got = Compiler(byte_vocab()).json_schema(SCHEMA)
    assert str(target) in str(record[0].message) and "STRUCTGEN_CACHE_DIR" in str(record[0].message)
    assert calls == [1] and walk(got) == expected and not marker.exists()
    if where != "entry":
        assert path.read_bytes() == before  # nothing written into a cache that is not safe
    # one warning per path and process
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsafeCacheWarning)
        Compiler(byte_vocab()).json_schema(SCHEMA)


@pytest.mark.skipif(not POSIX or os.geteuid() != 0, reason="giving a file away needs root")
@pytest.mark.parametrize("where", ["root", "entry", "key", "facts"])
def test_a_cache_owned_by_another_user_is_not_read(cache, monkeypatch, where):
    root, marker = cache
    expected = fresh()
    path = plant_sealed_evil(root, marker)
    target = {"root": root, "entry": path, "key": root / sealed.KEY_NAME,
              "facts": root / "facts"}[where]
    os.chown(target, 4242, -1)
    with pytest.warns(UnsafeCacheWarning, match="4242"):
        got = Compiler(byte_vocab()).json_schema(SCHEMA) if where != "facts" else \
            Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA)
        assert walk(got) == expected
    assert not marker.exists()


@pytest.mark.skipif(not POSIX, reason="no mode bits")
def test_what_the_cache_creates_is_private(cache):
    root, _ = cache
    walk(Compiler(byte_vocab()).json_schema(SCHEMA))  # masks too: their facts go to disk
    for folder in [root, root / "compiled", entry(root).parent, root / "facts", facts_files(root)[0].parent]:
        assert os.stat(folder).st_mode & 0o777 == 0o700, folder
    for f in [entry(root), root / sealed.KEY_NAME, facts_files(root)[0]]:
        assert os.stat(f).st_mode & 0o777 == 0o600, f
    assert len((root / sealed.KEY_NAME).read_bytes()) == 32


def test_a_symlinked_entry_is_not_followed(cache, monkeypatch):
    root, marker = cache
    path = plant_sealed_evil(root, marker)
    elsewhere = root.parent / "elsewhere.pickle"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    calls = count_translations(monkeypatch)
    Compiler(byte_vocab()).json_schema(SCHEMA)
    assert calls == [1] and not marker.exists()


# ------------------------------------------------------------------ damaged entries

def damage(path: Path, how: str, root: Path) -> None:
    good = path.read_bytes()
    header = good.split(b"\n", 1)[0] + b"\n"
    if how == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "random bytes":
        path.write_bytes(os.urandom(len(good)))
    elif how == "bad pickle protocol":
        body = b"\x80\x35garbage"
        path.write_bytes(seal_with_cache_key(root, header, zlib.compress(body) if b"compiled" in header
                                             else body))
    elif how == "not zlib":
        path.write_bytes(seal_with_cache_key(root, header, b"\x00not zlib, not npz"))
    elif how == "wrong mac":
        i = len(header) + 5
        path.write_bytes(good[:i] + bytes([good[i] ^ 1]) + good[i + 1:])
    elif how == "wrong key":
        (root / sealed.KEY_NAME).write_bytes(os.urandom(32))
    elif how == "short key":
        (root / sealed.KEY_NAME).write_bytes(b"short")
    elif how == "key is a folder":
        (root / sealed.KEY_NAME).unlink()
        (root / sealed.KEY_NAME).mkdir()
    elif how == "unreadable":
        os.chmod(path, 0)
    elif how == "a folder":
        path.unlink()
        path.mkdir()
    else:
        raise AssertionError(how)


KINDS = ["truncated", "empty", "random bytes", "bad pickle protocol", "not zlib", "wrong mac",
         "wrong key", "short key", "key is a folder", "unreadable", "a folder"]


@pytest.mark.parametrize("how", KINDS)
def test_a_damaged_compile_entry_is_a_miss(cache, monkeypatch, how):
    root, _ = cache
    expected = fresh()
    Compiler(byte_vocab()).json_schema(SCHEMA)
    damage(entry(root), how, root)
    calls = count_translations(monkeypatch)
    assert walk(Compiler(byte_vocab()).json_schema(SCHEMA)) == expected
    if how == "unreadable" and POSIX and os.geteuid() == 0:
        return  # mode 000 does not stop root from reading: a hit
    assert calls == [1]
    if how not in ("a folder", "key is a folder"):  # then it is rewritten and read again
        calls.clear()
        assert walk(Compiler(byte_vocab()).json_schema(SCHEMA)) == expected and calls == []


@pytest.mark.parametrize("how", KINDS)
def test_a_damaged_facts_file_is_a_miss(cache, how):
    root, _ = cache
    expected = fresh()  # computes the facts and saves them
    files = facts_files(root)
    for f in files[:1] if how in ("wrong key", "short key", "key is a folder") else files:
        damage(f, how, root)
    assert walk(Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA)) == expected


def test_a_damaged_key_is_replaced_and_old_entries_are_misses(cache, monkeypatch):
    root, _ = cache
    Compiler(byte_vocab()).json_schema(SCHEMA)
    key = root / sealed.KEY_NAME
    key.write_bytes(b"\0" * 7)
    calls = count_translations(monkeypatch)
    Compiler(byte_vocab()).json_schema(SCHEMA)
    assert calls == [1] and len(key.read_bytes()) == 32
    Compiler(byte_vocab()).json_schema(SCHEMA)
    assert calls == [1]


def test_threads_creating_the_key_agree_on_one(tmp_path, monkeypatch):
    # The race shows about one round in five, so several rounds, each on a fresh cache.
    for round_ in range(25):
        root = tmp_path / f"c{round_}"
        monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(root))
        barrier = threading.Barrier(8)
        ok: list[bool] = []

        def work(k: int) -> None:
            barrier.wait()
            ok.append(sealed.write_sealed(root / "x" / f"{k}", b"h\n", b"%d" % k))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert ok == [True] * 8, f"round {round_}"
        assert [sealed.read_sealed(root / "x" / f"{k}", b"h\n") for k in range(8)] == \
            [b"%d" % k for k in range(8)]
        assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []


# ------------------------------------------------------------------ STRUCTGEN_DISK_CACHE=0

@pytest.mark.parametrize("value", ["0", "off"])
def test_the_switch_stops_facts_too(cache, monkeypatch, value):
    root, _ = cache
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", value)
    expected = fresh()
    assert walk(Compiler(byte_vocab()).json_schema(SCHEMA)) == expected
    assert not root.exists()  # no entry, no facts, no key


def test_the_switch_is_read_on_each_use(cache, monkeypatch):
    root, marker = cache
    fresh()
    files = facts_files(root)
    assert files
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "0")
    reads: list[Path] = []
    monkeypatch.setattr(state_facts, "read_sealed", lambda path, header: reads.append(path))
    walk(Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA))
    assert reads == [] and facts_files(root) == files
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "1")
    walk(Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA))
    assert reads
