"""Every compile stage is linear in its input: the work of compiling one construct grown 4x
grows about 4x, not 16x (issue 60: a 60k-character pattern took 13 s, a 1M-character regex
literal 14 s, both from copying per item).

Work is counted, not timed: the Python and builtin function calls a compile makes (a profile
hook, so the count is the same on every machine and under any load), and the peak memory it
traces. A quadratic loop over the items (a slice per item, a rescan per item) shows in the
calls; a copy per item shows in neither at these sizes, which is what
``benchmarks/compile_scaling.py`` times at 10k to 4M characters.
"""

from __future__ import annotations

import sys
import tracemalloc

import pytest

import structgen
from structgen.core.budget import compile_budget
from structgen.core.depth import recursion_room
from structgen.engine.vocab import Vocabulary
from structgen.errors import StructgenError
from structgen.frontends.json_schema.translate import translate_schema
from structgen.frontends.lark.reader import read_grammar
from structgen.frontends.regex.python import text_regex_to_ir

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256], name="bytes")
N = 1_500  # the smaller size (characters of the construct); the larger one is 4 N
#: constructs with a subschema or a rule per few characters: a third of N is hundreds of them
#: (a loop over them that is quadratic shows in the calls at any size), at a third of the cost
SMALLER = {"properties", "required properties", "prefixItems", "anyOf of consts", "grammar alternation",
           "regex alternation of classes"}
# Linear work is 4x; a constant part (set-up, the JSON grammar's shared rules) pulls it lower,
# a log factor (sorting, hashing) a little higher. Quadratic is ~16x.
MAX_RATIO = 6.0


def _words(n: int) -> list[str]:
    return [f"w{k:05d}" for k in range(max(1, n // 7))]


def _cjk(n: int) -> str:
    return "".join(chr(0x4E00 + k) for k in range(n))


#: name -> (compile kind, the input of size n)
CONSTRUCTS = {
    "regex literal": ("regex", lambda n: "a" * n),
    "regex alternation": ("regex", lambda n: "|".join(_words(n))),
    "regex alternation of classes": ("regex", lambda n: "(" + "|".join(f"[a-c]{w}" for w in _words(n)) + ")"),
    "regex sequence of classes": ("regex", lambda n: "[ab]" * (n // 4)),
    "regex character class": ("regex", lambda n: "[" + _cjk(n) + "]"),
    "regex groups in a row": ("regex", lambda n: "(?:ab)" * (n // 6)),
    "regex nested groups": ("regex", lambda n: "(?:a" * (n // 40) + ")" * (n // 40)),
    "regex quantified items": ("regex", lambda n: "a{2}b?" * (n // 6)),
    "pattern literal": ("schema", lambda n: {"type": "string", "pattern": "^" + "a" * n + "$"}),
    "pattern alternation": ("schema", lambda n: {"type": "string", "pattern": "^(" + "|".join(_words(n)) + ")$"}),
    "pattern sequence of classes": ("schema", lambda n: {"type": "string", "pattern": "^" + "[ab]" * (n // 4) + "$"}),
    "pattern character class": ("schema", lambda n: {"type": "string", "pattern": "^[" + _cjk(n) + "]+$"}),
    "pattern nested groups": ("schema", lambda n: {"type": "string", "pattern": "^" + "(?:a" * (n // 40) + ")" * (n // 40) + "$"}),
    "const string": ("schema", lambda n: {"const": "a" * n}),
    "enum of strings": ("schema", lambda n: {"enum": _words(n)}),
    "enum of numbers": ("schema", lambda n: {"enum": list(range(n // 5))}),
    "properties": ("schema", lambda n: {"type": "object", "properties": {w: {"type": "integer"} for w in _words(n)}}),
    "required properties": ("schema", lambda n: {"type": "object", "required": _words(n),
                                                 "properties": {w: {"type": "boolean"} for w in _words(n)}}),
    "anyOf of consts": ("schema", lambda n: {"anyOf": [{"const": w} for w in _words(n)]}),
    "prefixItems": ("schema", lambda n: {"type": "array", "prefixItems": [{"const": k} for k in range(n // 8)]}),
    "grammar literal": ("grammar", lambda n: 'start: "' + "a" * n + '"'),
    "grammar alternation": ("grammar", lambda n: "start: " + " | ".join(f'"{w}"' for w in _words(n))),
    "grammar sequence": ("grammar", lambda n: "start:" + ' "a"' * (n // 4)),
    "grammar rules in a chain": ("grammar", lambda n: "start: r0\n" + "".join(
        f'r{k}: "x" r{k + 1}\n' for k in range(n // 12)) + f'r{n // 12}: "y"\n'),
    "grammar regex terminal": ("grammar", lambda n: "start: WORD\nWORD: /" + "|".join("t" + w for w in _words(n)) + "/"),
}


def _frontend(kind: str, value) -> None:
    """The first stage alone: the input read into grammar IR (where a copy per item shows: the
    IR of a long literal is one node, its automaton thousands of states)."""
    if kind == "regex":
        text_regex_to_ir(value)
    elif kind == "schema":
        translate_schema(value, whitespace="compact", strict=True, canonical=True)
    else:
        read_grammar(value)


def _compile(kind: str, value) -> None:
    """Every stage: IR, rule automata, the lexer, the compiled grammar."""
    compiler = structgen.Compiler(BYTES, disk_cache=False)  # fresh: nothing compiled before is reused
    if kind == "regex":
        compiler.regex(value)
    elif kind == "schema":
        compiler.json_schema(value, whitespace="compact", strict=True, canonical=True)
    else:
        compiler.grammar_file(value)


def _work(stage, kind: str, value) -> tuple[int, int]:
    """(function calls, bytes allocated) of ``stage(kind, value)``; a refusal is work too (it
    must not be quadratic either).

    Bytes allocated, not the peak: at each call the hook adds what was allocated since the last
    one beyond what was live then (the traced peak since then, which it resets), so an object
    copied and dropped once per item counts once per item, as its copying costs."""
    calls = allocated = 0
    live = 0

    def count(frame, event, arg):
        nonlocal calls, allocated, live
        calls += 1
        current, peak = tracemalloc.get_traced_memory()
        allocated += max(peak - live, 0)
        tracemalloc.reset_peak()
        live = current

    tracemalloc.start()
    sys.setprofile(count)
    try:
        with compile_budget(None), recursion_room():  # as a compile has it
            stage(kind, value)
    except StructgenError:
        pass
    finally:
        sys.setprofile(None)
        tracemalloc.stop()
    return calls, allocated


@pytest.mark.parametrize("stage", [_frontend, _compile], ids=["frontend", "compile"])
@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_work_grows_linearly(name, stage):
    kind, make = CONSTRUCTS[name]
    n = N // 3 if name in SMALLER else N
    _work(stage, kind, make(40))  # imports and per-vocabulary set-up, not counted
    small, large = _work(stage, kind, make(n)), _work(stage, kind, make(4 * n))
    calls, memory = large[0] / small[0], large[1] / max(small[1], 1)
    assert calls <= MAX_RATIO, f"{name}: {small[0]:,} -> {large[0]:,} calls for 4x the input ({calls:.1f}x)"
    assert memory <= MAX_RATIO, f"{name}: {small[1]:,} -> {large[1]:,} bytes allocated for 4x the input ({memory:.1f}x)"
