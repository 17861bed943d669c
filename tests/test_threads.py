"""One compiled grammar, many threads: each thread walks its own :class:`Matcher` through the
grammar's shared memo tables (stacks, closures, steps, masks, token-mask facts) and must see
exactly what a single thread sees (issue 25, item 7).

Before the fix, 8 threads on a recursive schema raised a false ``CompileError: rule ... recurses
without reading input``: the stack machine kept one "closures in progress" set for all threads,
so a thread found another thread's closure in it and took it for a cycle.

The grammars are compiled fresh (new vocabulary object, no disk cache) so every memo table is
cold when the threads start; a barrier lines the threads up and a tiny switch interval makes the
interpreter change threads every few bytecodes, so the fills really interleave.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading

import pytest

from structgen import Compiler, compile_sql
from structgen.engine.vocab import Vocabulary
from structgen.frontends.tool_calls import FORMATS, call_text, read_tools, tool_call_grammar

THREADS = 8
#: Multi-byte tokens besides the 256 bytes, so masks have tokens that cross rule ends
#: (``",`` ``"}``) and the mask builder's crossing walk runs too.
PIECES = (b'{"', b'":', b'",', b'"}', b'}}', b'},', b'"]', b'[{', b', "', b'": "', b"  ", b"\n  ",
          b"name", b"kind", b"children", b"leaf", b"SELECT", b" FROM", b" WHERE", b"name,", b" = ",
          b"<tool_call>", b"</tool_call>", b'"arguments', b"Oslo", b"12", b"345", b".5")

TREE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "kind": {"enum": ["leaf", "node"]},
        "size": {"type": "integer", "minimum": 0},
        "children": {"type": "array", "items": {"$ref": "#"}, "maxItems": 4},
    },
    "required": ["name", "kind"],
    "additionalProperties": False,
}
TREE_DOCS = [
    json.dumps({"name": "root", "kind": "node", "children": [
        {"name": "a", "kind": "leaf", "size": 12},
        {"name": "b", "kind": "node", "children": [{"name": "c", "kind": "leaf"}]}]}),
    json.dumps({"name": "x", "kind": "leaf", "size": 345}, indent=2),
    json.dumps({"name": "deep", "kind": "node", "children": [{"name": "d", "kind": "node", "children": [
        {"name": "e", "kind": "node", "children": [{"name": "f", "kind": "leaf"}]}]}]}, separators=(",", ":")),
]
SQL_DOCS = [
    "SELECT name, city FROM customers WHERE city = 'Oslo'",
    "SELECT customers.name, count(*) FROM customers JOIN orders ON customers.id = orders.customer_id "
    "GROUP BY customers.name",
    "select price from products where price > 12.5 order by price desc limit 3",
]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"]}}},
]
TOOL_DOCS = [
    call_text(FORMATS["hermes"], [("get_weather", {"city": "Oslo", "unit": "celsius"})]),
    call_text(FORMATS["hermes"], [("add", {"a": 12, "b": 345.5}), ("get_weather", {"city": "Bergen"})]),
    "Let me think. " + call_text(FORMATS["hermes"], [("add", {"a": -1, "b": 0.5})]),
]


def vocab() -> Vocabulary:
    """A new vocabulary object (its shared mask-facts cache starts empty)."""
    pieces = [bytes([b]) for b in range(256)] + list(PIECES)
    return Vocabulary(pieces + [None], eos_ids=[len(pieces)])


def tokenize(v: Vocabulary, text: str) -> list[int]:
    """Greedy longest match over the vocabulary (any tokenization will do: masks allow all)."""
    by = {t: i for i, t in enumerate(v.tokens) if t is not None}
    data, out, i = text.encode(), [], 0
    longest = max(len(t) for t in by)
    while i < len(data):
        for n in range(min(longest, len(data) - i), 0, -1):
            if data[i:i + n] in by:
                out.append(by[data[i:i + n]])
                i += n
                break
    return out


def compile_all(tmp_path) -> dict:
    """The three grammars, compiled fresh (cold memo tables), with their documents as token ids."""
    v = vocab()
    compiler = Compiler(v, disk_cache=False)
    db = tmp_path / "shop.sqlite"
    if not db.exists():
        con = sqlite3.connect(db)
        con.executescript(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);"
            "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL);"
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id),"
            " product_id INTEGER, quantity INTEGER);")
        con.close()
    grammars = {
        "tree": compiler.json_schema(TREE),
        "sql": compile_sql(db, v, strict=True).grammar,
        "tools": compiler.grammar(tool_call_grammar(read_tools(TOOLS), FORMATS["hermes"])),
    }
    docs = {"tree": TREE_DOCS, "sql": SQL_DOCS, "tools": TOOL_DOCS}
    return {name: (g, [tokenize(v, d) for d in docs[name]]) for name, g in grammars.items()}


def walk(compiled, ids: list[int], use_bitmask: bool) -> list[bytes]:
    """Every mask along ``ids`` (and the forced text and end flag), then the final one."""
    import numpy as np

    m = compiled.matcher()
    out = []
    row = np.zeros((1, compiled.vocabulary.words), dtype=np.int32)
    for k, t in enumerate(ids):
        if use_bitmask:
            m.fill_bitmask(row)
            out.append(row.tobytes())
        else:
            out.append(m.mask_words().tobytes())
        out.append(m.forced_bytes() + (b"$" if m.can_end() else b""))
        assert m.advance(t), (k, m.last_rejection)
    out.append(m.mask_words().tobytes())
    assert m.can_end()
    return out


@pytest.fixture
def racy():
    """Switch threads every microsecond, so memo fills interleave mid-way."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("rounds", [0, 1])
def test_threads_sharing_compiled_grammars_see_single_threaded_masks(tmp_path, racy, rounds):
    expected = {name: [walk(g, ids, False) for ids in docs]
                for name, (g, docs) in compile_all(tmp_path).items()}
    shared = compile_all(tmp_path)  # another fresh compile: the threads fill its memo tables
    barrier = threading.Barrier(THREADS)
    results: dict[int, dict] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            barrier.wait()
            got = {}
            names = sorted(shared)
            for name in names[k % 3:] + names[:k % 3]:  # threads start on different grammars
                g, docs = shared[name]
                order = list(range(len(docs))) if k % 2 else list(reversed(range(len(docs))))
                walked = {i: walk(g, docs[i], use_bitmask=bool(k % 2)) for i in order}
                got[name] = [walked[i] for i in range(len(docs))]
            results[k] = got
        except BaseException as err:  # noqa: BLE001 - reported below with the thread's number
            errors.append(err)

    run_threads(work)
    assert errors == []
    assert len(results) == THREADS
    for k, got in results.items():
        for name in expected:
            assert got[name] == expected[name], (k, name)


def run_threads(work) -> None:
    """``work(k)`` in :data:`THREADS` threads, k = 0..THREADS-1; all must end within 5 minutes."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)


def test_threads_compiling_and_walking_at_once(tmp_path, racy):
    """Compiling on one shared compiler from many threads (its memory caches, the vocabulary's
    shared facts) also gives what one thread gets."""
    expected = {name: [walk(g, ids, False) for ids in docs]
                for name, (g, docs) in compile_all(tmp_path).items()}
    v = vocab()
    compiler = Compiler(v, disk_cache=False)
    tree_docs = [tokenize(v, d) for d in TREE_DOCS]
    schemas = [TREE, {"type": "array", "items": TREE}, {"anyOf": [TREE, {"type": "integer"}]}]
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []
    seen: list[list] = []

    def work(k: int) -> None:
        try:
            barrier.wait()
            for s in schemas[k % 3:] + schemas[:k % 3]:
                compiler.json_schema(s)
            seen.append([walk(compiler.json_schema(TREE), ids, False) for ids in tree_docs])
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    run_threads(work)
    assert errors == [] and len(seen) == THREADS
    assert all(s == expected["tree"] for s in seen)
