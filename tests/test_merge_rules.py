"""Equal rules merged (:mod:`structgen.core.merge_rules`): fewer rules, the same language.

Small grammars show each case (aliases, merges that cascade, lookaheads, the start rule).
Real MaskBench schemas that repeat themselves show the point (far fewer rules) and that nothing
changed: their grammars with and without merging, walked byte by byte along every labelled
instance, allow the same bytes and end at the same places.
"""

from __future__ import annotations

import functools
import json

import pytest

import maskbench as mb
from structgen.core.ir import ByteClass, Grammar, Lit, Ref, Repeat, alt, seq
from structgen.core.merge_rules import merge_equal_rules
from structgen.engine.compiler import Compiler
from structgen.engine.vocab import Vocabulary
from structgen.frontends.json_schema import translate
from structgen.frontends.json_schema.rule_table import RuleTable

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def rules_of(grammar: Grammar) -> dict[str, str]:
    return {name: str(body) for name, body in grammar.rules}


def test_nothing_to_merge_is_the_same_grammar():
    g = Grammar.of("root", root=seq(Ref("a"), Ref("b")), a=Lit(b"x"), b=Lit(b"y"))
    assert merge_equal_rules(g) is g


def test_merges_cascade_to_the_callers():
    """Two objects whose members merge become equal themselves, and their caller calls one."""
    g = Grammar.of("root", root=seq(Ref("o1"), Ref("o2")),
                   o1=seq(Lit(b"{"), Ref("m1"), Lit(b"}")), o2=seq(Lit(b"{"), Ref("m2"), Lit(b"}")),
                   m1=seq(Lit(b'"k":'), Ref("v1")), m2=seq(Lit(b'"k":'), Ref("v2")),
                   v1=Repeat(ByteClass.of("0-9"), 1, None), v2=Repeat(ByteClass.of("0-9"), 1, None))
    assert rules_of(merge_equal_rules(g)) == {"root": "o1 o1", "o1": '"{" m1 "}"', "m1": '"\\"k\\":" v1',
                                              "v1": "[0-9]+"}


def test_aliases_are_resolved_but_the_start_rule_stays():
    g = Grammar.of("root", root=Ref("a"), a=Ref("b"), b=seq(Lit(b"x"), Ref("c")), c=Ref("a"))
    merged = merge_equal_rules(g)
    assert merged.start == "root" and rules_of(merged) == {"root": "b", "b": '"x" b'}


def test_the_start_rule_keeps_its_name_when_a_rule_before_it_is_equal():
    g = Grammar((("a", Lit(b"x")), ("root", Lit(b"x"))), "root")
    merged = merge_equal_rules(g)
    assert merged.start == "root" and rules_of(merged) == {"root": '"x"'}


def test_lookaheads_keep_rules_apart():
    """Equal bodies with different lookaheads are different tokens; an alias with a lookahead
    of its own is kept."""
    word = Repeat(ByteClass.of("a-z"), 1, None)
    g = Grammar((("root", seq(Ref("a"), Ref("b"), Ref("c"), Ref("d"))), ("a", word), ("b", word), ("c", word),
                 ("d", Ref("a"))), "root", (("b", frozenset(b"x")), ("c", frozenset(b"x")), ("d", frozenset(b"y"))))
    merged = merge_equal_rules(g)
    assert rules_of(merged) == {"root": "a b b d", "a": "[a-z]+", "b": "[a-z]+", "d": "a"}
    assert merged.lookahead == (("b", frozenset(b"x")), ("d", frozenset(b"y")))


def test_recursive_rules_are_merged_where_their_bodies_are_equal():
    item = alt(Lit(b"0"), seq(Lit(b"["), Ref("list"), Lit(b"]")))
    g = Grammar.of("root", root=alt(Ref("x"), Ref("y")), x=item, y=item, list=Repeat(Ref("x"), 0, None))
    assert rules_of(merge_equal_rules(g)) == {"root": "x", "x": '"0" | "[" list "]"', "list": "x*"}


def unmerged(schema, monkeypatch) -> Grammar:
    with monkeypatch.context() as patch:  # neither as the rules are made nor afterwards
        patch.setattr(translate, "RuleTable", functools.partial(RuleTable, merging=False))
        patch.setattr(translate, "merge_equal_rules", lambda g: g)
        return translate.translate_schema(schema, whitespace="compact")[0]


#: MaskBench schemas that repeat themselves (rules before merging -> after, at the time of writing)
REPEATING = ("Github_hard---o13024.json",            # 566 -> 132
             "JsonSchemaStore---prometheus.json",    # 1,547 -> 311
             "JsonSchemaStore---circleciconfig.json")  # 1,344 -> 483


@pytest.fixture(scope="module")
def repeating_rows():
    if not mb.available():
        pytest.fail(f"MaskBench data not found at {mb.MASKBENCH}")
    rows = {row["name"]: row for row in mb.iter_rows() if row["name"] in REPEATING}
    return [rows[name] for name in REPEATING]


def test_real_schemas_that_repeat_themselves_merge_into_far_fewer_rules(repeating_rows, monkeypatch):
    for row in repeating_rows:
        before = unmerged(row["schema"], monkeypatch)
        after = translate.translate_schema(row["schema"], whitespace="compact")[0]
        assert len(after.rules) < len(before.rules) / 2, row["name"]


def test_merged_real_schemas_allow_the_same_bytes_along_every_instance(repeating_rows, monkeypatch):
    compiler = Compiler(BYTES, disk_cache=False)
    walked = 0
    for row in repeating_rows:
        merged = compiler.json_schema(row["schema"], whitespace="compact").matcher()
        plain = compiler.grammar(unmerged(row["schema"], monkeypatch)).matcher()
        for test in row["tests"]:
            merged.reset()
            plain.reset()
            for byte in mb.compact(test["data"]).encode():
                assert merged.allowed_token_ids() == plain.allowed_token_ids(), row["name"]
                if not plain.advance(byte):
                    assert not merged.advance(byte)
                    break
                assert merged.advance(byte)
                walked += 1
            assert merged.can_end() == plain.can_end()
    assert walked > 1000


def test_merging_leaves_no_reference_cycles():
    """The pass's renaming memo (every part it saw) is freed when it returns, not by the cyclic
    collector."""
    import gc

    g = Grammar.of("root", root=seq(Ref("o1"), Ref("o2")),
                   o1=seq(Lit(b"{"), Ref("m1"), Lit(b"}")), o2=seq(Lit(b"{"), Ref("m2"), Lit(b"}")),
                   m1=seq(Lit(b'"k":'), Ref("v1")), m2=seq(Lit(b'"k":'), Ref("v2")), v1=Lit(b"1"), v2=Lit(b"1"))
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        assert len(merge_equal_rules(g).rules) == 4
        gc.collect()
        garbage = len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert garbage == 0


def made(schema, monkeypatch) -> Grammar:
    """The translation's rules as made (merged as they go), without the pass after it."""
    with monkeypatch.context() as patch:
        patch.setattr(translate, "merge_equal_rules", lambda g: g)
        return translate.translate_schema(schema, whitespace="compact")[0]


def test_equal_objects_are_one_rule_as_they_are_made(monkeypatch):
    # two properties with equal objects (their members equal in turn): the second object, its
    # members and its property's rule are the first's, before any pass over the rules
    obj = {"type": "object", "properties": {"on": {"type": "boolean"}, "n": {"type": "integer"}}}
    one = made({"type": "object", "properties": {"a": obj}}, monkeypatch)
    two = made({"type": "object", "properties": {"a": obj, "b": dict(obj)}}, monkeypatch)
    def objects(g: Grammar) -> list[str]:
        return [name for name, _ in g.rules if name.endswith("_members") or name.startswith("s_properties")]
    assert len(objects(one)) == len(objects(two)) == 3  # the property's rule, its object's and the root's
    assert "s_properties_b" not in dict(two.rules)
    assert "s_properties_b" in dict(unmerged({"type": "object", "properties": {"a": obj, "b": dict(obj)}}, monkeypatch).rules)
    # a rule called while it is made (recursion) is kept: its body names it
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    assert any(name == "root" for name, _ in made(tree, monkeypatch).rules)


def test_translation_merges_most_rules_as_it_makes_them(repeating_rows, monkeypatch):
    for row in repeating_rows:
        plain, as_made = unmerged(row["schema"], monkeypatch), made(row["schema"], monkeypatch)
        final = translate.translate_schema(row["schema"], whitespace="compact")[0]
        assert len(as_made.rules) < len(plain.rules) / 2 and len(final.rules) > 0.9 * len(as_made.rules), row["name"]
