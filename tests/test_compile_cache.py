"""The compile cache on disk: a schema compiled once is loaded, not compiled, by later processes.

Every test points ``STRUCTGEN_CACHE_DIR`` at its own ``tmp_path`` and turns the disk cache on
explicitly, so nothing here reads or writes the user's cache and the suite's setting of
``STRUCTGEN_DISK_CACHE`` does not matter. "A later process" is simulated by a new
:class:`Compiler` (and a cleared table of shared compilers); one test uses real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import structgen
import structgen.frontends.json_schema.translate
from structgen.engine import compile_cache, compiled as compiled_mod, compiler as compiler_mod
from structgen import Compiler, compile_json_schema
from structgen.engine.vocab import Vocabulary, vocabulary_for

ROOT = Path(__file__).resolve().parent.parent


def byte_vocab(extra: tuple[bytes, ...] = ()) -> Vocabulary:
    """The small byte vocabulary (a new object each time, so no in-memory state is shared)."""
    pieces = [bytes([b]) for b in range(256)] + list(extra)
    return Vocabulary(pieces + [None], eos_ids=[len(pieces)])


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "kind": {"enum": ["leaf", "node"]},
        "size": {"type": "integer", "minimum": -5, "maximum": 500},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
        "child": {"$ref": "#"},
    },
    "required": ["name", "kind"],
}
INSTANCE = {"name": "root", "kind": "node", "size": 42, "tags": ["a", "bc"],
            "child": {"name": "x", "kind": "leaf"}}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory with the disk cache on; fresh shared compilers."""
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "1")
    monkeypatch.setattr(compiler_mod, "COMPILERS", {})
    return tmp_path


def entries(root: Path) -> list[Path]:
    return sorted((root / "compiled").glob("*/*.pickle"))


def forbid_compiling(monkeypatch) -> None:
    """Make translating a schema or building an automaton fail: only a disk hit can succeed."""
    def refuse(*args, **kwargs):
        raise AssertionError("compiled although the disk cache holds the entry")

    monkeypatch.setattr(structgen.frontends.json_schema.translate, "translate_schema", refuse)
    monkeypatch.setattr(compiled_mod, "build_automaton", refuse)


def count_translations(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = structgen.frontends.json_schema.translate.translate_schema

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(structgen.frontends.json_schema.translate, "translate_schema", counting)
    return calls


def walk_masks(compiled, text: str) -> list[tuple]:
    """(mask, forced text, can end) before each byte of ``text`` and at its end."""
    m = compiled.matcher()
    out = []
    for b in text.encode():
        out.append((m.mask_words().tobytes(), m.forced_text(), m.can_end()))
        assert m.advance(b), (text, b)
    out.append((m.mask_words().tobytes(), m.forced_text(), m.can_end()))
    return out


# ------------------------------------------------------------------ hits

def test_a_new_compiler_loads_the_entry_without_compiling(cache, monkeypatch):
    first = Compiler(byte_vocab()).json_schema(SCHEMA, whitespace="compact")
    (entry,) = entries(cache)
    assert entry.parent.name == entry.stem[:2] and len(entry.stem) == 64

    # "A later process": new vocabulary object, new compiler, no shared compilers.
    monkeypatch.setattr(compiler_mod, "COMPILERS", {})
    forbid_compiling(monkeypatch)
    loaded = Compiler(byte_vocab()).json_schema(SCHEMA, whitespace="compact")
    assert loaded.grammar == first.grammar and loaded.relaxed == first.relaxed == ()
    assert loaded.source == SCHEMA
    shared = compile_json_schema(json.dumps(SCHEMA), byte_vocab(), whitespace="compact")
    assert shared.grammar == first.grammar  # the shared compiler reads the disk cache too
    assert entries(cache) == [entry]


@pytest.mark.parametrize("whitespace, text", [
    ("compact", json.dumps(INSTANCE, separators=(",", ":"))),
    ("spaced", json.dumps(INSTANCE)),
    ("flexible", json.dumps(INSTANCE, indent=2)),
])
def test_a_loaded_grammar_masks_as_a_fresh_compile(cache, monkeypatch, whitespace, text):
    fresh = Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA, whitespace=whitespace)
    assert entries(cache) == []
    Compiler(byte_vocab()).json_schema(SCHEMA, whitespace=whitespace)
    forbid_compiling(monkeypatch)
    loaded = Compiler(byte_vocab()).json_schema(SCHEMA, whitespace=whitespace)
    assert walk_masks(loaded, text) == walk_masks(fresh, text)


def test_the_relaxed_record_is_cached_with_the_grammar(cache, monkeypatch):
    schema = {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 1234567.89}}}
    relaxed = Compiler(byte_vocab()).json_schema(schema, lenient=True).relaxed
    assert [r.keyword for r in relaxed] == ["multipleOf"]
    forbid_compiling(monkeypatch)
    assert Compiler(byte_vocab()).json_schema(schema, lenient=True).relaxed == relaxed


def test_the_memory_cache_stands_in_front(cache, monkeypatch):
    calls = count_translations(monkeypatch)
    compiler = Compiler(byte_vocab())
    a = compiler.json_schema(SCHEMA)
    os.remove(entries(cache)[0])
    b = compiler.json_schema(json.loads(json.dumps(SCHEMA)))  # an equal schema, another object
    assert calls == [1] and entries(cache) == []  # neither recompiled nor read from disk
    assert b.grammar is a.grammar and b.runtime() is a.runtime()  # one set of memo tables


# ------------------------------------------------------------------ misses

@pytest.mark.parametrize("damage", ["truncate", "empty", "flip a byte", "other format", "garbage"])
def test_a_damaged_entry_is_a_miss_and_is_rewritten(cache, monkeypatch, damage):
    Compiler(byte_vocab()).json_schema(SCHEMA)
    (entry,) = entries(cache)
    good = entry.read_bytes()
    bad = {
        "truncate": good[: len(good) // 2],
        "empty": b"",
        "flip a byte": good[:-20] + bytes([good[-20] ^ 0xFF]) + good[-19:],
        "other format": good.replace(b"structgen-compiled %d " % compile_cache.CACHE_FORMAT,
                                     b"structgen-compiled %d " % (compile_cache.CACHE_FORMAT + 1), 1),
        "garbage": os.urandom(len(good)),
    }[damage]
    entry.write_bytes(bad)

    calls = count_translations(monkeypatch)
    again = Compiler(byte_vocab()).json_schema(SCHEMA)  # no error: compiled again
    assert calls == [1] and again.matcher().advance(ord("{"))
    assert entries(cache) == [entry] and entry.read_bytes() != bad  # rewritten in place
    forbid_compiling(monkeypatch)
    assert Compiler(byte_vocab()).json_schema(SCHEMA).grammar == again.grammar


def test_an_entry_stored_under_another_key_is_a_miss(cache, monkeypatch):
    integer = Compiler(byte_vocab()).json_schema({"type": "integer"})
    Compiler(byte_vocab()).json_schema({"type": "string"})
    options = {"whitespace": "flexible", "strict": False, "canonical": False, "lenient": False}
    fingerprint = byte_vocab().fingerprint
    path = {name: compile_cache.entry_path(compile_cache.entry_key({"type": name}, options,
                                                                    fingerprint))
            for name in ("integer", "string")}
    assert sorted(path.values()) == entries(cache)
    path["integer"].write_bytes(path["string"].read_bytes())  # valid, but the other schema's
    calls = count_translations(monkeypatch)
    assert Compiler(byte_vocab()).json_schema({"type": "integer"}).grammar == integer.grammar
    assert calls == [1]


@pytest.mark.parametrize("change", [
    {"whitespace": "compact"}, {"strict": True}, {"canonical": True}, {"lenient": True},
])
def test_each_option_has_its_own_entry(cache, change):
    Compiler(byte_vocab()).json_schema(SCHEMA)
    Compiler(byte_vocab()).json_schema(SCHEMA, **change)
    assert len(entries(cache)) == 2


def test_each_vocabulary_has_its_own_entry(cache, monkeypatch):
    Compiler(byte_vocab()).json_schema(SCHEMA)
    Compiler(byte_vocab((b'{"',))).json_schema(SCHEMA)
    Compiler(Vocabulary([bytes([b]) for b in range(256)] + [None, None], eos_ids=[257]))\
        .json_schema(SCHEMA)  # the same byte tokens, another end-of-sequence id
    assert len(entries(cache)) == 3


def test_key_order_is_part_of_the_key(cache):
    reordered = dict(reversed(list(SCHEMA.items())))
    swapped = {**SCHEMA, "properties": dict(reversed(list(SCHEMA["properties"].items())))}
    Compiler(byte_vocab()).json_schema(SCHEMA)
    Compiler(byte_vocab()).json_schema(json.loads(json.dumps(SCHEMA)))  # equal, same order: hit
    assert len(entries(cache)) == 1
    Compiler(byte_vocab()).json_schema(reordered)  # same grammar, other text: its own entry
    a = Compiler(byte_vocab()).json_schema(swapped)  # another property order: another grammar
    assert len(entries(cache)) == 3
    assert a.grammar != Compiler(byte_vocab()).json_schema(SCHEMA).grammar


# ------------------------------------------------------------------ what is never cached

@pytest.mark.parametrize("env", ["0", "false", "off"])
def test_the_environment_variable_turns_it_off(cache, monkeypatch, env):
    Compiler(byte_vocab()).json_schema({"type": "integer"})
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", env)
    calls = count_translations(monkeypatch)
    Compiler(byte_vocab()).json_schema(SCHEMA)
    Compiler(byte_vocab()).json_schema({"type": "integer"})  # on disk, but not read either
    compile_json_schema({"type": "boolean"}, byte_vocab())
    assert len(entries(cache)) == 1 and len(calls) == 3


def test_disk_cache_false_writes_nothing(cache):
    compiler = Compiler(byte_vocab(), disk_cache=False)
    compiler.json_schema(SCHEMA)
    assert compiler.json_schema(SCHEMA).matcher().advance(ord("{"))
    assert not (cache / "compiled").exists()


def test_failures_are_not_cached(cache, monkeypatch):
    calls = count_translations(monkeypatch)
    for _ in range(2):
        with pytest.raises(structgen.UnsupportedFeatureError):
            Compiler(byte_vocab()).json_schema({"$ref": "http://example.com/s.json"})
        with pytest.raises(structgen.SchemaError):
            Compiler(byte_vocab()).json_schema({"type": "nothing"})
    assert len(calls) == 4 and entries(cache) == []


def test_a_schema_that_is_not_plain_json_skips_the_disk(cache):
    # {"enum": ("a", "b")} has the JSON text of {"enum": ["a", "b"]}, but it is not that schema:
    # it must be refused as ever, never served the list's entry.
    Compiler(byte_vocab()).json_schema({"enum": ["a", "b"]})
    Compiler(byte_vocab()).json_schema({"type": ["string"]})
    assert len(entries(cache)) == 2
    with pytest.raises(structgen.SchemaError):
        Compiler(byte_vocab()).json_schema({"enum": ("a", "b")})
    with pytest.raises(structgen.SchemaError):
        Compiler(byte_vocab()).json_schema({"type": ("string",)})
    assert len(entries(cache)) == 2


def test_an_unwritable_cache_costs_nothing_but_speed(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(blocker))
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "1")
    assert Compiler(byte_vocab()).json_schema(SCHEMA).matcher().advance(ord("{"))


# ------------------------------------------------------------------ concurrency

def test_concurrent_processes_leave_a_valid_entry(cache, monkeypatch):
    code = ("import json, sys; from structgen.engine.compiler import Compiler; "
            "from structgen.engine.vocab import Vocabulary; "
            "v = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256]); "
            "[Compiler(v).json_schema(json.loads(sys.argv[1])) for _ in range(3)]")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, json.dumps(SCHEMA)], env=env, cwd=ROOT)
             for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    (entry,) = entries(cache)
    assert list((cache / "compiled").rglob("*.tmp")) == []  # no temporary file left behind
    forbid_compiling(monkeypatch)
    assert Compiler(byte_vocab()).json_schema(SCHEMA).matcher().advance(ord("{"))


def test_a_second_write_replaces_the_first_whole(cache, monkeypatch):
    first = Compiler(byte_vocab()).json_schema(SCHEMA)
    (entry,) = entries(cache)
    second = Compiler(byte_vocab(), disk_cache=False).json_schema(SCHEMA)  # an equal, other copy
    compile_cache.store_entry(entry, entry.stem, (second.grammar, (), second.automaton))
    assert entries(cache) == [entry] and list((cache / "compiled").rglob("*.tmp")) == []
    forbid_compiling(monkeypatch)
    assert Compiler(byte_vocab()).json_schema(SCHEMA).grammar == first.grammar


# ------------------------------------------------------------------ a real tokenizer

def test_a_real_tokenizer_loads_from_disk(smollm2_tokenizer, cache, monkeypatch):
    vocab = vocabulary_for(smollm2_tokenizer)
    schema = {"type": "object", "properties": {"city": {"type": "string"},
                                               "pop": {"type": "integer"}},
              "required": ["city", "pop"], "additionalProperties": False}
    fresh = Compiler(vocab).json_schema(schema, whitespace="compact", canonical=True)
    forbid_compiling(monkeypatch)
    loaded = Compiler(vocab).json_schema(schema, whitespace="compact", canonical=True)
    assert loaded is not fresh and loaded.grammar == fresh.grammar
    ids = smollm2_tokenizer.encode('{"city":"Oslo","pop":709037}', add_special_tokens=False)
    a, b = fresh.matcher(), loaded.matcher()
    for t in ids:
        assert (a.mask_words() == b.mask_words()).all() and a.forced_text() == b.forced_text()
        assert a.advance(t) and b.advance(t)
    assert a.can_end() and b.can_end()


def test_the_memory_cache_keeps_the_most_recent_grammars(monkeypatch):
    monkeypatch.setattr(compiler_mod, "MEMORY_CACHE_ENTRIES", 2)
    comp = Compiler(byte_vocab(), disk_cache=False)
    first = comp.json_schema({"const": 1})
    comp.json_schema({"const": 2})
    assert comp.json_schema({"const": 1}).automaton is first.automaton  # used again: the most recent
    second = comp.json_schema({"const": 3})  # the limit drops the least recent, {"const": 2}
    assert len(comp._schemas) == 2 and len(comp._cache) == 2
    assert comp.json_schema({"const": 1}).automaton is first.automaton
    assert comp.json_schema({"const": 3}).automaton is second.automaton


@pytest.mark.parametrize("damage", [b"", b"\x80\x35", b"\x80\x04garbage", bytes(range(256)) * 4])
def test_damaged_mask_facts_on_disk_are_recomputed(tmp_path, monkeypatch, damage):
    """A damaged token-mask facts file (any bytes) is a miss, recomputed: it crashed every later
    run before (issue 25: 'unsupported pickle protocol', UnicodeDecodeError, ...)."""
    from structgen.engine import masks

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "1")  # "0" turns the facts on disk off too
    monkeypatch.setattr(masks, "_DISK_CACHE_AFTER_S", 0.0)  # every fact goes to disk
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}}
    text = b'{"a":"xy"}'

    def masks_along() -> list[list[int]]:
        vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])  # fresh memory caches
        m = Compiler(vocab, disk_cache=False).json_schema(schema).matcher()
        out = []
        for b in text:
            out.append(m.allowed_token_ids())
            assert m.advance(b)
        return out

    expected = masks_along()
    files = list((tmp_path / "facts").rglob("*.facts"))
    assert files
    for f in files:
        f.write_bytes(damage)
    assert masks_along() == expected


DIGESTED = """
from structgen.core.ir import ByteClass, Counted, Fsm, Lit, Ref, Repeat, Seq, Unordered, Alt, digest
words = frozenset({(frozenset({b"ab", b"cd", b"ef"}), frozenset({b"x"})), (frozenset({b"q"}),)})
fsm = Fsm((((ByteClass(((97, 98),)), 1),), ()), frozenset({1, 0}))
body = Seq((Lit(b'"'), Counted(ByteClass(((97, 122),)), 0, 9, words), Alt((Ref("a"), fsm)), Repeat(Lit(b"x"), 1, 3)))
print(digest(body), digest(Unordered((Ref("a"), Ref("b")), (0, 1), Lit(b","), 1)))
"""


def test_rule_digests_are_the_same_in_every_process():
    """Rule fingerprints (cache keys on disk) do not depend on a process's string hashes, which
    order the frozensets of an excluded-words rule differently from one process to the next."""
    got = {subprocess.run([sys.executable, "-c", DIGESTED], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(got) == 1 and len(got.pop().split()) == 2


def test_rule_digests_tell_expressions_apart():
    from structgen.core.ir import Alt, Lit, Ref, Repeat, Seq, digest

    exprs = [Seq((Lit(b"a"), Ref("b"))), Alt((Lit(b"a"), Ref("b"))), Seq((Lit(b"ab"),)), Lit(b"ab"),
             Ref("ab"), Repeat(Lit(b"a"), 0, 1), Repeat(Lit(b"a"), 0, None), Seq((Ref("a"), Ref("b")))]
    assert len({digest(e) for e in exprs}) == len(exprs)


def test_a_body_from_the_rule_cache_is_checked_again_in_each_grammar():
    """The rule cache keeps each body's references and shape; a grammar that reuses a cached
    body but lacks a rule it calls, or nests a counted repeat, is refused as before."""
    from structgen.core.ir import Counted, Grammar, Lit, Ref, seq
    from structgen.errors import GrammarError

    compiler = Compiler(byte_vocab(), disk_cache=False)
    body = seq(Lit(b"a"), Ref("b"))
    compiler.grammar(Grammar((("s", body), ("b", Lit(b"x"))), "s"))
    with pytest.raises(GrammarError, match="rule 't' refers to undefined rule 'b'"):
        compiler.grammar(Grammar((("t", seq(Lit(b"a"), Ref("b"))),), "t"))
    nested = seq(Ref("b"), Counted(Lit(b"x"), 0, 3), Ref("c"))
    for extra in ((), (("c", Lit(b"y")),)):  # the misplaced repeat comes before the missing 'c'
        with pytest.raises(GrammarError, match="rule 'n': a counted repeat must be a whole rule body"):
            compiler.grammar(Grammar((("n", nested), ("b", Lit(b"x"))) + extra, "n"))
    with pytest.raises(GrammarError, match="rule 'm' refers to undefined rule 'q'"):  # the ref first
        compiler.grammar(Grammar((("m", seq(Ref("q"), Counted(Lit(b"x"), 0, 3))),), "m"))


def test_rule_shapes_follow_the_node_order():
    """``shape`` (what Grammar.checked reads of each body) walks the nodes inline; it agrees
    with the node order of ``nodes`` on every body of real schemas and a grammar file."""
    from structgen.core.ir import Counted, Lit, Ref, Seq, Unordered, nodes, shape
    from structgen.frontends.json_schema.translate import translate_schema
    from structgen.frontends.lark.reader import read_grammar

    def by_nodes(body):
        refs, misuse = {}, None
        for k, node in enumerate(nodes(body)):
            if isinstance(node, Ref):
                refs.setdefault(node.name, k)
            elif misuse is None and isinstance(node, (Counted, Unordered)) and node is not body:
                misuse = k
        return tuple((k, n) for n, k in refs.items()), misuse

    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3},
                                                "b": {"anyOf": [{"type": "string", "format": "date"}, {"enum": [1, "x"]}]}},
              "required": ["b"]}
    bodies = [b for _, b in translate_schema(schema)[0].rules]
    bodies += [b for _, b in translate_schema(schema, canonical=True)[0].rules]
    bodies += [b for _, b in read_grammar((ROOT / "benchmarks" / "data" / "grammar_c_expr.lark").read_text()).rules]
    assert any(isinstance(b, Unordered) for b in bodies) and any(isinstance(b, Counted) for b in bodies)
    for body in bodies:
        refs, misuse = shape(body)
        assert (refs, misuse) == (by_nodes(body)[0], None)
    nested = Seq((Ref("x"), Counted(Lit(b"y"), 0, 2), Ref("z")))
    assert shape(nested) == (((1, "x"), (4, "z")), (2, "a counted repeat must be a whole rule body"))
    assert by_nodes(nested) == (((1, "x"), (4, "z")), 2)
