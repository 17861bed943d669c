"""MaskBench at scale, in CI: a fixed sample of real schemas, every labelled instance walked.

A deterministic sample of :data:`SAMPLE_SIZE` MaskBench schemas, round-robin over its sources
(``maskbench.sample``, seed 0, not filtered by what compiles). Each schema is compiled for the
SmolLM2 vocabulary twice (compact whitespace for ``json.dumps(x, separators=(",", ":"))``,
flexible for ``indent=2``), and every instance is walked token by token. Verdicts are the
dataset's labels overruled by python-jsonschema with ``FormatChecker`` (``maskbench.judge_tests``,
as ``benchmarks/maskbench.py`` judges). The test asserts:

* every refusal is a :class:`structgen.StructgenError` (anything else is a bug);
* no invalid instance is accepted in full, and end-of-sequence is never allowed after a prefix
  that is not itself a valid instance (zero invalidation errors);
* valid instances rejected (validation errors) stay under :data:`MAX_VALIDATION_SHARE` of those
  walked; they are listed in the output (``pytest -s`` or on failure).
"""

from __future__ import annotations

import json

import pytest

import structgen
from structgen.engine.vocab import vocabulary_for

import maskbench as mb

SAMPLE_SIZE = 220
SEED = 0
#: Valid instances rejected, at most this share of those walked (issue 6's ceiling).
MAX_VALIDATION_SHARE = 0.005
SERIALIZATIONS = (("compact", mb.compact, "compact"), ("indent2", mb.indented, "flexible"))


@pytest.fixture(scope="module")
def sample_rows():
    if not mb.available():
        pytest.fail(f"MaskBench data not found at {mb.MASKBENCH}")
    rows = {row["name"]: row for row in mb.iter_rows()}
    return [rows[name] for name in mb.sample(rows, SAMPLE_SIZE, SEED)]


def _walk(compiled, tokenizer, text: str, validator) -> tuple[bool | None, str]:
    """(accepted, problem): None when the tokenizer cannot spell ``text`` exactly."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    tokens = compiled.vocabulary.tokens
    if b"".join(tokens[i] or b"\0" for i in ids) != text.encode("utf-8"):
        return None, ""
    m = compiled.matcher()
    done = b""
    for i in ids:
        if m.can_end() and done.strip():  # an early end must itself be a valid instance
            value = json.loads(done)
            if validator is not None and not validator.is_valid(value):
                return True, f"end-of-sequence allowed after the invalid prefix {done[-40:]!r}"
        if not m.advance(i):
            return False, f"rejected at byte {len(done)}: {m.last_rejection}"
        done += tokens[i]
    return m.can_end(), "" if m.can_end() else "end-of-sequence not allowed at the end"


def test_a_fixed_maskbench_sample(smollm2_tokenizer, sample_rows):
    vocab = vocabulary_for(smollm2_tokenizer)
    disagreeing = mb.disagreeing_schemas()
    refused: dict[str, str] = {}
    untyped: list[str] = []
    invalidation: list[str] = []
    validation: list[str] = []
    walked_valid = 0
    for row in sample_rows:
        name, schema = row["name"], row["schema"]
        kept, _, validator = mb.judge_tests(schema, row.get("tests") or [], name in disagreeing)
        grammars = {}
        try:
            for whitespace in ("compact", "flexible"):
                grammars[whitespace] = structgen.compile_json_schema(schema, vocab, whitespace=whitespace)
        except structgen.StructgenError as err:
            refused[name] = f"{type(err).__name__}: {str(err)[:100]}"
            continue
        except Exception as err:  # noqa: BLE001 -- the point: every refusal must be typed
            untyped.append(f"{name}: {type(err).__name__}: {err}")
            continue
        for i, expected in kept:
            data = mb.schema_order(row["tests"][i]["data"], schema)
            try:
                json.dumps(data, allow_nan=False)
            except ValueError:
                continue  # a number beyond float range parses as inf: not JSON any more
            for label, serialize, whitespace in SERIALIZATIONS:
                accepted, problem = _walk(grammars[whitespace], smollm2_tokenizer, serialize(data), validator)
                if accepted is None:
                    continue
                where = f"{name} instance {i} ({label})"
                if problem.startswith("end-of-sequence allowed"):
                    invalidation.append(f"{where}: {problem}")
                elif expected:
                    walked_valid += 1
                    if not accepted:
                        validation.append(f"{where}: {problem}")
                elif accepted:
                    invalidation.append(f"{where}: invalid instance accepted ({serialize(data)[:80]})")
    compiled = len(sample_rows) - len(refused) - len(untyped)
    print(f"\nMaskBench sample: {len(sample_rows)} schemas, {compiled} compiled, {len(refused)} refused; "
          f"{walked_valid} valid walks, {len(validation)} rejected")
    for line in validation:
        print("  validation error:", line)
    for name, why in sorted(refused.items(), key=lambda kv: kv[1]):
        print("  refused:", name, why)
    assert not untyped, "refusals that are not StructgenError:\n" + "\n".join(untyped)
    assert not invalidation, "invalidation errors:\n" + "\n".join(invalidation)
    assert len(validation) <= MAX_VALIDATION_SHARE * walked_valid, "\n".join(validation)
    assert compiled >= 0.6 * len(sample_rows)  # a collapse of coverage is a regression too
