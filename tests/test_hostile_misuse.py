"""Careless calls (issue 25, item 8): bad arguments to the compile entry points and the
:class:`~structgen.Matcher` give a typed structgen error naming the bad value and where, never a
builtin exception, and never a silently wrong result. Each probe runs in a worker process
(:mod:`hostile`).
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

import structgen
from hostile import Probe, check, registry

PROBES: dict[str, Probe] = {}
probe = registry(PROBES)


def digits(vocab):
    return structgen.compile_regex("[0-9]+", vocab).matcher()


# -- strings JSON text can spell but UTF-8 cannot hold

for _name, _schema, _where in (
        ("lone surrogate property name", {"properties": {"\ud800": {}}}, "/properties/\ud800"),
        ("lone surrogate in required", {"required": ["a\udc00"]}, "/required/0"),
        ("lone surrogate enum value", {"enum": ["ok", "\ud800"]}, "/enum/1"),
        ("lone surrogate const", {"const": "a\udfff"}, "/const"),
        ("lone surrogate key inside a const object", {"const": {"\ud800": 1}}, "/const/\ud800")):
    for _canonical in (False, True):
        @probe(f"{_name} (canonical={_canonical})", expect="SchemaError", contains=_where)
        def _(vocab, schema=_schema, canonical=_canonical):
            structgen.compile_json_schema(schema, vocab, canonical=canonical)


@probe("lone surrogate in a description is left be", expect="ok")
def _(vocab):
    structgen.compile_json_schema({"description": "\ud800", "properties": {"enum": {"description": "\udc00"}}},
                                  vocab)


@probe("unhashable enum values", expect="ok")
def _(vocab):
    m = structgen.compile_json_schema({"enum": [{"a": [1]}, [[1]]]}, vocab, whitespace="compact").matcher()
    assert m.validate(vocab_ids(vocab, '[[1]]')) == len(vocab_ids(vocab, '[[1]]'))


def vocab_ids(vocab, text):
    single = {data: tid for tid, data in enumerate(vocab.tokens) if data is not None and len(data) == 1}
    return [single[bytes([b])] for b in text.encode()]


# -- options and inputs of the wrong kind

@probe("whitespace='wide'", expect="OptionError", contains="'wide'")
def _(vocab):
    structgen.compile_json_schema({}, vocab, whitespace="wide")


for _bad in (None, 5, "gpt2"):
    @probe(f"tokenizer={_bad!r}", expect="OptionError", contains="tokenizer")
    def _(vocab, bad=_bad):
        structgen.compile_json_schema({}, bad)


@probe("compile_sql(5)", expect="SqlError", contains="int")
def _(vocab):
    structgen.compile_sql(5, vocab)


@probe("compile_sql on a closed connection", expect="SqlError", contains="closed")
def _(vocab):
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a)")
    con.close()
    structgen.compile_sql(con, vocab)


@probe("compile_regex(5)", expect="GrammarError", contains="int")
def _(vocab):
    structgen.compile_regex(5, vocab)


@probe("grammar without its start rule", expect="GrammarError", contains="start")
def _(vocab):
    structgen.compile_grammar('foo: "a"\n', vocab)


@probe("grammar file that is not UTF-8", expect="GrammarError", contains="byte 14")
def _(vocab):
    import tempfile
    from pathlib import Path
    path = Path(tempfile.mkdtemp()) / "g.lark"
    path.write_bytes(b'start: "a"\n// \xff\xfe\n')
    structgen.compile_grammar(path, vocab)


# -- Matcher arguments

for _bad in (None, "90", 90.7, True, np.float64(90.0), [90]):
    @probe(f"advance({_bad!r})", expect="OptionError", contains="token id")
    def _(vocab, bad=_bad):
        digits(vocab).advance(bad)

    @probe(f"validate([{_bad!r}])", expect="OptionError", contains="position 0")
    def _(vocab, bad=_bad):
        digits(vocab).validate([bad])


@probe("advance(numpy int) is a token", expect="ok")
def _(vocab):
    m = digits(vocab)
    assert m.advance(np.int64(vocab_ids(vocab, "7")[0])) and m.token_ids == vocab_ids(vocab, "7")


for _bad in (5, "12"):
    @probe(f"validate({_bad!r})", expect="OptionError", contains="sequence")
    def _(vocab, bad=_bad):
        digits(vocab).validate(bad)


for _bad in (-1, 1.5, True, "1", 5):
    @probe(f"rollback({_bad!r})", expect="OptionError", contains=repr(_bad))
    def _(vocab, bad=_bad):
        m = digits(vocab)
        m.advance(vocab_ids(vocab, "7")[0])
        m.rollback(bad)


def _words(vocab):
    return (vocab.size + 31) // 32


for _name, _make, _fragment in (
        ("float", lambda w: np.zeros(w, np.float32), "float32"),
        ("bool", lambda w: np.zeros(w, bool), "bool"),
        ("int64", lambda w: np.zeros(w, np.int64), "int64"),
        ("big-endian int32", lambda w: np.zeros(w, ">i4"), ">i4"),  # not the dtype the fast check knows
        ("too narrow", lambda w: np.zeros(w - 1, np.int32), "shape"),
        ("3-d", lambda w: np.zeros((1, 1, w), np.int32), "shape"),
        ("a list", lambda w: [0] * w, "list"),
        ("None", lambda w: None, "NoneType")):
    @probe(f"fill_bitmask into {_name}", expect="OptionError", contains=_fragment)
    def _(vocab, make=_make):
        digits(vocab).fill_bitmask(make(_words(vocab)))


for _index in (2, -3, 1.0, True):
    @probe(f"fill_bitmask row {_index!r}", expect="OptionError", contains="row index")
    def _(vocab, index=_index):
        digits(vocab).fill_bitmask(np.zeros((2, _words(vocab)), np.int32), index)


@probe("fill_bitmask into a wider row zeroes the rest", expect="ok")
def _(vocab):
    m = digits(vocab)
    buf = np.full((2, _words(vocab) + 3), -1, np.int32)
    m.fill_bitmask(buf, 1)
    assert (buf[1, -3:] == 0).all() and (buf[0] == -1).all()
    assert (buf[1, :_words(vocab)] == m.mask_words().view(np.int32)).all()


@probe("fill_bitmask into a torch tensor", expect="ok")
def _(vocab):
    import torch
    m = digits(vocab)
    buf = torch.zeros((1, _words(vocab)), dtype=torch.int32)
    m.fill_bitmask(buf)
    assert (buf[0].numpy() == m.mask_words().view(np.int32)).all()


@probe("fill_bitmask into a float torch tensor", expect="OptionError", contains="torch.float32")
def _(vocab):
    import torch
    digits(vocab).fill_bitmask(torch.zeros((1, _words(vocab))))


# -- Vocabulary arguments

for _name, _args, _kwargs, _fragment in (
        ("Vocabulary(5)", (5,), {"eos_ids": [0]}, "not int (5)"),
        ("Vocabulary('abc')", ("abc",), {"eos_ids": [0]}, "not str"),
        ("Vocabulary([b'a', 3])", ([b"a", 3],), {"eos_ids": [0]}, "tokens[1] is 3"),
        ("Vocabulary(['a'])", (["a"],), {"eos_ids": [0]}, ".encode('utf-8')"),
        ("Vocabulary([])", ([],), {"eos_ids": []}, "tokens is empty"),
        ("eos_ids=None", ([b"a"],), {"eos_ids": None}, "eos_ids must be a list of token ids, not None"),
        ("eos_ids=0", ([b"a"],), {"eos_ids": 0}, "eos_ids=[0]"),
        ("eos_ids=['x']", ([b"a"],), {"eos_ids": ["x"]}, "eos_ids holds 'x'"),
        ("eos_ids=[True]", ([b"a"],), {"eos_ids": [True]}, "eos_ids holds True"),
        ("eos_ids=[0.0]", ([b"a"],), {"eos_ids": [0.0]}, "eos_ids holds 0.0"),
        ("eos_ids=[7] past the size", ([b"a"],), {"eos_ids": [7]}, "eos_ids holds 7"),
        ("size=-1", ([b"a"],), {"eos_ids": [0], "size": -1}, "not -1"),
        ("size=2.5", ([b"a"],), {"eos_ids": [0], "size": 2.5}, "size must be an integer"),
        ("size='8'", ([b"a"],), {"eos_ids": [0], "size": "8"}, "'8'"),
        ("name=3", ([b"a"],), {"eos_ids": [0], "name": 3}, "name must be a str")):
    @probe(_name, expect="OptionError", contains=_fragment)
    def _(vocab, args=_args, kwargs=_kwargs):
        structgen.Vocabulary(*args, **kwargs)


@probe("Vocabulary of bytearrays, numpy ids and size", expect="ok")
def _(vocab):
    v = structgen.Vocabulary([b"a", bytearray(b"b"), None], eos_ids=np.array([2]), size=np.int64(8))
    assert v.tokens[:3] == [b"a", b"b", None] and v.eos_ids == {2} and v.size == 8
    assert structgen.compile_regex("ab", v).matcher().advance(0)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe(name, hostile_worker):
    check(hostile_worker.run(name), PROBES[name])
