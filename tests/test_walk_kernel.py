"""The compiled trie walk (structgen/engine/compiled_walk.c) against the Python walk it replaces.

The compiled walk must return the same keys as :func:`structgen.engine.masks.walk_keys` from
every state, report the same escapes, and so give the same masks; the oracle tests
(test_grammar_masks.py, test_maskbench_oracle.py, ...) check those masks against brute force
with the compiled walk on, as it is by default. Here the two walks are compared directly, on
the bundled SQL grammar for real gold queries, a C-like grammar and JSON, on both tokenizers.
"""

from __future__ import annotations

import numpy as np
import pytest

import structgen
from sql_data import pairs
from structgen.engine.masks import walk_keys
from structgen.engine.vocab import Vocabulary, vocabulary_for
from structgen.engine.walk_kernel import (_EAGER_LEAF_STATES, FrameRows, SetRows, crossing_keys, kernel_available,
                                          kernel_built, walk_crossings, walk_index)

C_LIKE = r'''
start: func+
func: TYPE NAME "(" (param ("," param)*)? ")" block
param: TYPE NAME
block: "{" stmt* "}"
stmt: TYPE NAME ("=" expr)? ";" | NAME "=" expr ";" | "return" expr ";" | "while" "(" expr ")" block
expr: atom (OP atom)*
atom: NAME | NUMBER | NAME "(" (expr ("," expr)*)? ")" | "(" expr ")"
TYPE: "int" | "double" | "void"
OP: "+" | "-" | "*" | "/" | "<" | "!=" | "=="
NAME: /[a-zA-Z_][a-zA-Z0-9_]*/
NUMBER: /[0-9]+(\.[0-9]+)?/
%ignore /[ \t\n]+/
%ignore /\/\/[^\n]*/
'''
C_TEXT = ("int gcd(int a, int b) {\n  while (b != 0) { int t = b; b = a - t; }  // done\n"
          "  return a;\n}\ndouble half(double x) { return x / 2.0; }\n")
JSON_TEXT = '{"name": "Ada", "tags": ["x", {"k": [1, 2.5e-3]}], "ok": true}'
# defined keys and a string enum, spelled in escapes too: a member's states inside a key call
# nothing (its character's escape rule is called after the backslash), so frame rows make their
# rows from the rule's steps (FrameRows._table_row) and leave the backslash's step to Python
KEYED = {"type": "object", "properties": {"name": {"type": "string"}, 'ta"g': {"enum": ["a/b", "xy"]},
                                          "n": {"type": "integer"}}, "required": ["name"]}
KEYED_TEXT = '{"n\\u0061me": "A", "ta\\"g": "a\\/b"}'


def test_the_kernel_is_built():
    # `make setup` builds it (pip, from pyproject's ext-modules); without it every mask is slower
    assert kernel_built(), "structgen/engine/compiled_walk.c was not built: run make setup"
    assert kernel_available()


def _states(compiled, tokenizer, text):
    """Every stack set met walking ``text``'s tokens."""
    m = compiled.matcher()
    out = [m.stacks()]
    for tid in tokenizer.encode(text, add_special_tokens=False):
        assert m.advance(tid)
        out.append(m.stacks())
    return out


#: Gemma's walks (262k tokens) cost 2-3x SmolLM2's: the walk comparisons take every third walked
#: state on it, a different third per variant, and all of them on SmolLM2.
GEMMA_STRIDE = 3


def _sample(starts, tokenizer_name, offset=0):
    ordered = sorted(starts)
    return ordered[offset % GEMMA_STRIDE::GEMMA_STRIDE] if tokenizer_name == "gemma_tokenizer" else ordered


def _cases(tokenizer, keyed=True):
    query = next(p for p in pairs("defog") if "JOIN" in p.sql and "GROUP BY" in p.sql)
    return [
        (structgen.compile_sql(query.database, tokenizer).grammar, query.sql),
        (structgen.compile_grammar(C_LIKE, tokenizer), C_TEXT),
        (structgen.compile_json_schema({"type": "object"}, tokenizer), JSON_TEXT),
    ] + ([(structgen.compile_json_schema(KEYED, tokenizer), KEYED_TEXT)] if keyed else [])


@pytest.mark.parametrize("rows_kind", ["sets", "frames", "frames-byte-by-byte"])
@pytest.mark.parametrize("tokenizer_name", ["smollm2_tokenizer", "gemma_tokenizer"])
def test_the_compiled_walk_finds_what_the_python_walk_finds(request, tokenizer_name, rows_kind):
    # "sets": one numbered stack set per trie node; "frames" (what masks use): frames called
    # from one parent walked apart from it, on rows shared by every parent, a step filling the
    # entries of all the bytes that step alike; "frames-byte-by-byte": each byte stepped alone
    tokenizer = request.getfixturevalue(tokenizer_name)
    index = vocabulary_for(tokenizer).index
    walked = tabled = 0
    for compiled, text in _cases(tokenizer, keyed=rows_kind != "sets"):  # sets have no table rows
        sm = compiled.matcher().machine
        rows = SetRows(sm, escaping=True) if rows_kind == "sets" else FrameRows(sm)
        rows.grouped = rows_kind == "frames"
        starts = {sm.isolated(sid) for stacks in _states(compiled, tokenizer, text) for sid in stacks
                  if sm.frames[sid][0] >= 0}  # not guards: masks never walk from them
        if text is KEYED_TEXT:  # what it adds: the rules with calls (string bodies are walked above)
            starts = {s for s in starts if any(sm.rules[sm.frames[s][0]].calls)}
        for iso in _sample(starts, tokenizer_name, ["sets", "frames", "frames-byte-by-byte"].index(rows_kind)):
            start = frozenset((iso,))
            reported: set[tuple[int, int, frozenset[int]]] = set()
            want = walk_keys(index.keys, start, sm.step_set, sm.next_bytes,
                             on_escape=lambda i, d, f: reported.add((i, d, f)),
                             escapes=sm.escapes, ends=index.subtree_end)
            keys, escapes = walk_index(index, rows, start)
            assert keys.tolist() == want
            got = {(i, d, sm.escapes[x]) for i, d, c in escapes.tolist() for x in rows.markers[abs(c)]}
            assert got == reported
            walked += 1
        tabled += sum(len(sets) for _, sets in getattr(rows, "_table_sets", {}).values())
    least = GEMMA_STRIDE if tokenizer_name == "gemma_tokenizer" else 1
    assert walked > 50 // least, walked
    assert tabled > 10 // least or rows_kind == "sets", tabled  # rows made from a rule's steps were walked


def test_bytes_grouped_together_step_alike(smollm2_tokenizer):
    # byte_groups, from every set a walk numbers: the groups split the readable bytes, and all
    # the bytes of a group step the set alike (inside a comment, the 127 ASCII bytes but the
    # newline are one group: one step in Python serves them all)
    index = vocabulary_for(smollm2_tokenizer).index
    largest = grouped = grouped_slots = 0
    for compiled, text in _cases(smollm2_tokenizer):
        sm = compiled.matcher().machine
        rows = FrameRows(sm)
        for stacks in _states(compiled, smollm2_tokenizer, text):
            for sid in stacks:
                if sm.frames[sid][0] >= 0:
                    walk_index(index, rows, frozenset((sm.isolated(sid),)))
        for stacks in rows.sets:
            groups = sm.byte_groups(stacks)
            if groups is None:  # a guard, or a counted rule with a guard: byte by byte
                continue
            assert sorted(b for g in groups for b in g) == sorted(sm.next_bytes(stacks))
            for g in groups:
                assert len({sm.step_set(stacks, b) for b in g}) == 1, (stacks, g)
            largest = max(largest, *map(len, groups)) if groups else largest
            fewer = len(groups) < len(sm.next_bytes(stacks))
            grouped += fewer
            # counted (a string's length) and unordered rules (an object's keys) group too
            grouped_slots += fewer and any(
                sm.rules[sm.frames[s][0]].counted or sm.rules[sm.frames[s][0]].unordered is not None
                for s in stacks if sm.frames[s][0] >= 0)
    assert largest >= 100 and grouped > 50 and grouped_slots > 50, (largest, grouped, grouped_slots)


@pytest.mark.parametrize("tokenizer_name", ["smollm2_tokenizer", "gemma_tokenizer"])
def test_crossings_found_during_the_walk_are_those_of_its_escapes(request, tokenizer_name):
    # What masks use: the crossing tokens found in the walk itself, against the two passes they
    # replace (the walk's escapes, merged per node, then crossing_keys), from every walked state
    tokenizer = request.getfixturevalue(tokenizer_name)
    index = vocabulary_for(tokenizer).index
    # With one FrameRows for all the walks of a grammar (as masks walk), a token's summary made
    # by one walk serves the later ones, under other callers.
    walked = crossed = summarized = 0
    for compiled, text in _cases(tokenizer, keyed=False):
        sm = compiled.matcher().machine
        starts = {sm.isolated(sid) for stacks in _states(compiled, tokenizer, text) for sid in stacks
                  if sm.frames[sid][0] >= 0}
        shared = FrameRows(sm)
        for iso in _sample(starts, tokenizer_name):
            follow = sm.automaton.follow[sm.frames[iso][0]]
            rows = FrameRows(sm)  # the reference walks rows of its own
            keys, escapes = walk_index(index, rows, frozenset((iso,)))
            want = _crossings_of(index, rows, escapes, follow)
            for walk_rows in (FrameRows(sm), shared):
                got_keys, got = walk_crossings(index, walk_rows, frozenset((iso,)), follow)
                assert got_keys.tolist() == keys.tolist()
                assert sorted(map(tuple, got.tolist())) == want
            walked += 1
            crossed += bool(want)
        summarized += len(shared.summaries)
    least = GEMMA_STRIDE if tokenizer_name == "gemma_tokenizer" else 1
    assert walked > 50 // least and crossed > 20 // least and summarized > 20 // least, (walked, crossed, summarized)


def test_walks_with_and_without_token_summaries_agree(smollm2_tokenizer, monkeypatch):
    # the same walks in order, summaries off then on: equal results (sorted, as the walk gives
    # them), and the summaries made by early walks are what later walks read
    query = next(p for p in pairs("defog") if "JOIN" in p.sql and "GROUP BY" in p.sql)
    compiled = structgen.compile_sql(query.database, smollm2_tokenizer).grammar
    sm = compiled.matcher().machine
    index = vocabulary_for(smollm2_tokenizer).index
    starts = sorted({sm.isolated(sid) for stacks in _states(compiled, smollm2_tokenizer, query.sql)
                     for sid in stacks if sm.frames[sid][0] >= 0})
    found = {}
    for on in ("0", "1"):
        monkeypatch.setenv("STRUCTGEN_WALK_SUMMARIES", on)
        rows = FrameRows(sm)
        found[on] = [(k.tolist(), sorted(map(tuple, p.tolist())))
                     for k, p in (walk_crossings(index, rows, frozenset((iso,)), sm.automaton.follow[sm.frames[iso][0]])
                                  for iso in starts)]
        assert bool(rows.summaries) == (on == "1")
    assert found["0"] == found["1"] and len(found["1"]) > 20
    # a summary is Python's to change: one that is not what the kernel made is refused
    (k, lo, d), (inside, events) = next(iter(rows.summaries.items()))
    rows.summaries[(k, lo, d)] = (b"\xff\xff\xff\x7f", events)  # a key past the index
    with pytest.raises(ValueError, match="malformed"):
        for iso in starts:
            walk_crossings(index, rows, frozenset((iso,)), sm.automaton.follow[sm.frames[iso][0]])


def _crossings_of(index, rows, escapes, follow):
    """crossing_keys of a walk's escapes, a node's markers merged (each allows what follows the
    rule less what it forbids), as sorted (key, depth) pairs."""
    merged = {}
    for i, d, code in escapes.tolist():
        markers, alive = merged.get((i, d), (frozenset(), False))
        merged[(i, d)] = (markers | rows.markers[abs(code)], alive or code < 0)
    events, allowed = [], [np.zeros(256, bool)]
    for (i, d), (markers, alive) in merged.items():
        ok = np.zeros(256, bool)
        for x in markers:
            ok[sorted(follow - rows.sm.escapes[x])] = True
        allowed.append(ok)
        events.append((i, d, -(len(allowed) - 1) if alive else len(allowed) - 1))
    if not events:
        return []
    table = np.packbits(np.array(allowed), axis=1, bitorder="little")
    return sorted(map(tuple, crossing_keys(index, np.array(events, np.int64), table).tolist()))


def test_frame_rows_step_a_token_once_for_every_rule_that_calls_it(smollm2_tokenizer):
    # The SQL grammar calls its name tokens from `table`, `column`, `qualifier`, `alias`, `cte`,
    # each after optional whitespace: walked as whole stack sets, the names' states are stepped
    # again under each caller; walked frame by frame, a token's states are a table made once
    # (all its rows at one go), and no step of a token frame is asked of Python.
    query = next(p for p in pairs("defog") if "JOIN" in p.sql and "GROUP BY" in p.sql)
    compiled = structgen.compile_sql(query.database, smollm2_tokenizer).grammar
    sm = compiled.matcher().machine
    index = vocabulary_for(smollm2_tokenizer).index
    names = {sm.rules[r].name: r for r in range(len(sm.rules))}
    roots = [sm.intern(names["NAME#3"], 0, 1)] + [sm.intern(names[n], 0, 1)
                                                  for n in ("table", "column", "qualifier", "alias", "cte")]
    steps, token_steps = {}, {}
    for kind, rows in (("sets", SetRows(sm, escaping=True)), ("frames", FrameRows(sm))):
        fill, count, tokens = rows.fill, [0], [0]

        def counted(k, b, rows=rows, fill=fill, count=count, tokens=tokens):
            count[0] += b >= 0
            tokens[0] += b >= 0 and all(sm.frames[s][0] >= 0 and not any(sm.rules[sm.frames[s][0]].calls)
                                        for s in rows.sets[k])
            fill(k, b)

        rows.fill = counted  # type: ignore[method-assign]
        found = [walk_index(index, rows, frozenset((root,))) for root in roots]
        steps[kind], token_steps[kind] = count[0], tokens[0]
        if kind == "frames":  # and the same keys as the set walk found
            assert [f[0].tolist() for f in found] == [f[0].tolist() for f in by_sets]
        by_sets = found
    assert steps["sets"] > 5000  # the names' states, stepped once per calling rule
    assert token_steps["sets"] > 3000 and token_steps["frames"] == 0, token_steps
    assert steps["frames"] < steps["sets"] / 10, steps  # measured: 18,660 and 41


def test_a_large_token_gets_each_row_when_a_walk_first_needs_it(smollm2_tokenizer):
    # a leaf rule past _EAGER_LEAF_STATES (a pattern's string: 2,103 states) is numbered and
    # given rows one state at a time, each row whole (no step of it asked of Python), and its
    # walks find what the Python walk finds
    schema = {"type": "object", "properties": {"w": {"type": "string", "pattern": "^[a-z]{1,300}$"}}}
    compiled = structgen.compile_json_schema(schema, smollm2_tokenizer)
    sm = compiled.matcher().machine
    index = vocabulary_for(smollm2_tokenizer).index
    rows = FrameRows(sm)
    big = [r for r in range(len(sm.rules)) if rows._leafy[r] and not rows._eager[r]]
    assert big and len(sm.rules[big[0]].trans) > _EAGER_LEAF_STATES
    fill, stepped = rows.fill, []

    def counted(k, b):
        stepped.append(b >= 0 and any(sm.frames[s][0] in big for s in rows.sets[k]))
        fill(k, b)

    rows.fill = counted  # type: ignore[method-assign]
    starts = {sm.isolated(sid) for stacks in _states(compiled, smollm2_tokenizer, '{"w": "abcdefgh"}')
              for sid in stacks if sm.frames[sid][0] >= 0}
    for iso in sorted(starts):
        reported: set[tuple[int, int, frozenset[int]]] = set()
        want = walk_keys(index.keys, frozenset((iso,)), sm.step_set, sm.next_bytes,
                         on_escape=lambda i, d, f: reported.add((i, d, f)), escapes=sm.escapes,
                         ends=index.subtree_end)
        keys, escapes = walk_index(index, rows, frozenset((iso,)))
        assert keys.tolist() == want
        assert {(i, d, sm.escapes[x]) for i, d, c in escapes.tolist() for x in rows.markers[abs(c)]} == reported
    made = len(rows._rule_sets(big[0])[1])
    assert 10 < made < len(sm.rules[big[0]].trans) / 4, made
    assert not any(stepped)


@pytest.mark.parametrize("tokenizer_name", ["smollm2_tokenizer", "gemma_tokenizer"])
def test_masks_with_and_without_the_compiled_walk_are_equal(request, tokenizer_name, monkeypatch):
    tokenizer = request.getfixturevalue(tokenizer_name)
    base = vocabulary_for(tokenizer)
    found = {}
    for on in ("1", "0"):
        monkeypatch.setenv("STRUCTGEN_WALK_KERNEL", on)
        monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "0")
        # a vocabulary of its own: the shared facts of one walk must not serve the other
        vocab = Vocabulary(list(base.tokens), eos_ids=base.eos_ids)
        masks = []
        for compiled, text in _cases(vocab):
            m = compiled.matcher()
            masks.append(np.array(m.mask_words()))
            for tid in tokenizer.encode(text, add_special_tokens=False):
                assert m.advance(tid)
                masks.append(np.array(m.mask_words()))
        found[on] = masks
    assert len(found["1"]) == len(found["0"]) > 100
    for a, b in zip(found["1"], found["0"]):
        assert np.array_equal(a, b)


def _tiny():
    vocab = Vocabulary([b"a", b"ab", b"abc", b"b", b"ba", None], eos_ids=[5])
    sm = structgen.compile_grammar('start: ("ab" | "b")+', vocab).matcher().machine
    return vocab, sm


def test_a_failing_step_is_an_error_not_a_crash():
    vocab, sm = _tiny()
    rows = SetRows(sm, escaping=False)

    def fill(k, b):
        raise RuntimeError("no step")

    rows.fill = fill  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="no step"):
        walk_index(vocab.index, rows, sm.initial())


def test_a_row_of_the_wrong_shape_is_refused():
    vocab, sm = _tiny()
    rows = SetRows(sm, escaping=False)
    rows.number(sm.initial())
    rows.rows[0] = bytearray(10)
    with pytest.raises(ValueError, match="512 int32"):
        walk_index(vocab.index, rows, sm.initial())


def test_escapes_outside_the_index_are_refused():
    vocab, _ = _tiny()
    allowed = np.zeros((1, 32), np.uint8)
    for bad in ([[99, 1, 0]], [[0, 0, 0]], [[0, 1, 5]], [[1, 1, 0]]):  # key, depth, code out of range
        with pytest.raises(ValueError, match="outside the index"):
            crossing_keys(vocab.index, np.array(bad, np.int64), allowed)


def test_the_tiny_walk_by_hand():
    vocab, sm = _tiny()
    keys, escapes = walk_index(vocab.index, SetRows(sm, escaping=False), sm.initial())
    # "ab", "abc"? no: only whole repetitions of "ab" and "b", so a, ab, b, ba (a prefix of "bab")
    assert [vocab.index.keys[i] for i in keys.tolist()] == [b"a", b"ab", b"b", b"ba"]
    assert escapes.shape == (0, 3)


def _leaf_rows_reference(trans, accept, nums, code):
    """The rows compiled_walk.leaf_rows makes, by hand: a leaf state's step is its target alone."""
    out = []
    for row in trans:
        if not row:
            continue
        r = np.full(512, 0, np.int32)
        r[:256] = -1
        for b, t in row.items():
            r[b] = nums[t]
            r[256 + b] = code if accept[t] else 0
        out.append(r.tobytes())
    return out


def test_leaf_rows_are_each_states_steps(smollm2_tokenizer):
    from structgen.engine.walk_kernel import _kernel

    query = next(p for p in pairs("defog") if "JOIN" in p.sql)
    rules = structgen.compile_sql(query.database, smollm2_tokenizer).grammar.automaton.rules
    leaves = [r for r in rules if not any(r.calls) and any(r.trans)]
    assert len(leaves) > 50
    for k, rule in enumerate(leaves):
        nums = [-1 if not row else 1000 + 3 * q for q, row in enumerate(rule.trans)]
        got = _kernel.leaf_rows(rule.trans, rule.accept, nums, 7 + k)
        assert all(isinstance(r, bytearray) for r in got)
        assert [bytes(r) for r in got] == _leaf_rows_reference(rule.trans, rule.accept, nums, 7 + k), rule.name


@pytest.mark.parametrize("args,error", [
    (([{97: 1}, {}], [False, True], [5], 1), "differ in length"),
    (([{97: 2}, {}], [False, True], [5, -1], 1), "out of range"),
    (([{300: 1}, {}], [False, True], [5, -1], 1), "out of range"),
    (([{97: 1}, {}], [False, True], [5, -7], 1), "out of range"),
    (([[97], {}], [False, True], [5, -1], 1), "must be a dict"),
])
def test_leaf_rows_refuses_malformed_input(args, error):
    from structgen.engine.walk_kernel import _kernel

    with pytest.raises((ValueError, TypeError), match=error):
        _kernel.leaf_rows(*args)
