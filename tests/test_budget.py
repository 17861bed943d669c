"""Budget-aware completion (``budget="complete"``, the default): on schemas that run away on
the default model, every generation is a complete value that validates, within
``max_new_tokens``, for budgets from the schema's shortest value up to 300; drafting stays
token-identical to step-by-step decoding under the budget (greedy and sampled); the shortest
completion in tokens is exact on small grammars (brute force over token strings) and falls by
one along its own path on real schemas and tokens."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

import structgen
from structgen.engine.vocab import Vocabulary

from runaway_schemas import RUNAWAYS, TREE


def _shortest(generator, schema) -> int:
    """The budget's floor for ``generator.json(schema, ...)``: its own grammar's count."""
    compiled = generator.compiler.json_schema(schema, whitespace="compact", strict=True, canonical=True)
    return compiled.matcher().completion_length()


@pytest.mark.parametrize("name", list(RUNAWAYS))
def test_every_budget_gives_a_complete_valid_value(generator, name):
    schema, prompt = RUNAWAYS[name]
    shortest = _shortest(generator, schema)
    finishes = {}
    for budget in (shortest, shortest + 1, shortest + 5, 40, 300):
        result = generator.json(schema, prompt, max_new_tokens=budget)
        jsonschema.validate(result.value, schema)
        assert len(result.token_ids) <= budget
        assert result.finish_reason in ("eos", "grammar", "length")
        finishes[budget] = result.finish_reason
    assert finishes[shortest] == "length"  # the shortest value, or the budget cut a longer one


def test_the_budget_is_what_completes_them(generator):
    """Under ``budget="raise"`` the same runaways run out of 300 tokens (so the test above can
    fail); with ``"complete"`` they end ``"length"``."""
    ran_out = 0
    for name in ("tree", "email"):
        schema, prompt = RUNAWAYS[name]
        with pytest.raises(structgen.IncompleteGenerationError) as err:
            generator.json(schema, prompt, max_new_tokens=300, budget="raise")
        assert len(err.value.token_ids) == 300
        ran_out += 1
    assert ran_out == 2


def test_a_budget_below_the_shortest_value_is_refused_before_decoding(generator):
    shortest = _shortest(generator, TREE)
    with pytest.raises(structgen.BudgetTooSmallError) as err:
        generator.json(TREE, "A tree.", max_new_tokens=shortest - 1)
    assert err.value.needed == shortest and err.value.max_new_tokens == shortest - 1
    assert f"{shortest} tokens" in str(err.value)
    with pytest.raises(structgen.OptionError, match="budget must be one of"):
        generator.json(TREE, "A tree.", budget="truncate")


@pytest.mark.parametrize("temperature", [0.0, 0.9], ids=["greedy", "sampled"])
def test_drafting_is_token_identical_under_the_budget(generator, temperature):
    for name in ("tree", "sku", "tags"):
        schema, prompt = RUNAWAYS[name]
        shortest = _shortest(generator, schema)
        for budget in (shortest + 2, 30):
            runs = [generator.json(schema, prompt, max_new_tokens=budget, temperature=temperature, seed=7,
                                   speculate=speculate) for speculate in (False, True)]
            assert runs[0].token_ids == runs[1].token_ids, (name, budget)
            assert runs[0].finish_reason == runs[1].finish_reason
            jsonschema.validate(runs[1].value, schema)


def test_grammars_and_regexes_end_complete_too(generator):
    result = generator.grammar('start: "(" start ")" | "x"', "Nest parentheses deeply.", max_new_tokens=9)
    assert result.text.count("(") == result.text.count(")") and result.text.count("x") == 1
    assert len(result.token_ids) <= 9
    result = generator.regex(r"[a-z]+(-[a-z]+)*@[a-z]+\.(com|org)", "An email address:", max_new_tokens=6)
    assert len(result.token_ids) <= 6 and result.text.endswith((".com", ".org"))


# --------------------------------------------------------------------------- the table, no model

SMALL = Vocabulary([bytes([b]) for b in range(256)] + [b"ab", b"abab", b"((", b"))", b'":', b'"}', None],
                   eos_ids=[262])
SMALL_CASES = [  # (compiled over SMALL, prefixes walked)
    (lambda: structgen.compile_regex(r"(ab)+c", SMALL), [b"", b"a", b"abab"]),
    (lambda: structgen.compile_grammar('start: "(" start ")" | "x"', SMALL), [b"", b"(((", b"(((x"]),
    (lambda: structgen.compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}},
                                            "required": ["a"]}, SMALL, whitespace="compact", strict=True),
     [b"{", b'{"a', b'{"a":"ab']),
]


def _fewest_tokens(matcher, longest: int) -> int | None:
    """The fewest tokens (of any id) after which the matcher may end, level by level over every
    token the matcher takes: a brute force over token strings."""
    level = [matcher]
    for n in range(longest + 1):
        if any(m.can_end() for m in level):
            return n
        seen, following = set(), []
        for m in level:
            for token in range(len(SMALL.tokens)):
                child = m.fork()
                if token not in SMALL.eos_ids and child.advance(token) and child.stacks() not in seen:
                    seen.add(child.stacks())
                    following.append(child)
        level = following
    return None


@pytest.mark.parametrize("case", range(len(SMALL_CASES)))
def test_completion_length_equals_the_fewest_tokens(case):
    compile, prefixes = SMALL_CASES[case]
    compiled = compile()
    for prefix in prefixes:
        m = compiled.matcher()
        assert all(m.advance(b) for b in prefix), prefix
        counted = m.completion_length()
        assert counted is not None
        assert counted == _fewest_tokens(m, counted), prefix


def test_completion_length_falls_by_one_along_its_path(smollm2_tokenizer):
    """On real schemas and the real vocabulary: at random points of random valid walks, taking
    the first token of the counted completion leaves exactly one token less, and following it
    to the end completes the value: the budget can always be kept."""
    from structgen.engine.completion import completion_tokens

    rng = random.Random(0)
    for name in RUNAWAYS:
        schema = RUNAWAYS[name][0]
        compiled = structgen.compile_json_schema(schema, smollm2_tokenizer, whitespace="compact", strict=True)
        for _ in range(6):
            m = compiled.matcher()
            for _ in range(rng.randrange(0, 25)):
                allowed = [t for t in m.allowed_token_ids() if t not in m.vocabulary.eos_ids]
                if not allowed:
                    break
                m.advance(rng.choice(allowed))
            needed = m.completion_length()
            path = completion_tokens(m)
            assert path is not None and len(path) == needed
            for step, token in enumerate(path):
                assert m.completion_length_after(token) == needed - step - 1
                assert m.advance(token)
            assert m.can_end()


def test_the_transformers_processor_keeps_the_budget_too(generator):
    """``structgen.LogitsProcessor(compiled, max_new_tokens=N)`` under ``model.generate``: every
    runaway ends a valid value within 16 and 48 tokens, greedy token for token as
    ``generator.json`` with the same budget (checked at 16); without ``max_new_tokens`` the tree
    is cut."""
    import torch

    model, tokenizer = generator.model, generator.tokenizer
    for name, (schema, prompt) in RUNAWAYS.items():
        compiled = structgen.compile_json_schema(schema, tokenizer, whitespace="compact", strict=True,
                                                 canonical=True, model=model)
        ids = torch.tensor([generator.prompt_ids(schema, prompt)])
        for budget in (16, 48):
            if budget < compiled.matcher().completion_length():
                continue
            processor = structgen.LogitsProcessor(compiled, max_new_tokens=budget)
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), logits_processor=[processor],
                                 max_new_tokens=budget, do_sample=False, pad_token_id=tokenizer.eos_token_id)
            tokens = out[0, ids.shape[1]:].tolist()
            tokens = tokens[:next((i for i, t in enumerate(tokens) if t in compiled.vocabulary.eos_ids), len(tokens))]
            jsonschema.validate(json.loads(tokenizer.decode(tokens)), schema)
            if budget == 16:
                ours = generator.json(schema, prompt, max_new_tokens=budget, speculate=False)
                assert tokens == ours.token_ids, (name, budget)
    schema, prompt = RUNAWAYS["tree"]
    compiled = structgen.compile_json_schema(schema, tokenizer, whitespace="compact", strict=True, canonical=True,
                                             model=model)
    ids = torch.tensor([generator.prompt_ids(schema, prompt)])
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False,
                         logits_processor=[structgen.LogitsProcessor(compiled)], pad_token_id=tokenizer.eos_token_id)
    with pytest.raises(ValueError):
        json.loads(tokenizer.decode(out[0, ids.shape[1]:]))
