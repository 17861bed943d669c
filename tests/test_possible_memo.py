"""The merger's "can this term hold a value?" check is memoized per term (``Merger.possible``).

``oneOf`` exclusions and negations of many-branch schemas ask it of the same few terms again and
again: MaskBench's ``Github_medium---o58661`` asked 138,357 times of 1,719 distinct terms and took
~10 s to reach its refusal. The memo must not change any answer: a "yes" given while a recursive
schema is still being worked out (its emptiness reads "not empty" for now) is reused only while
that schema still is. Checked here on real MaskBench schemas against the unmemoized check.
"""

from __future__ import annotations

import pytest

import maskbench
from structgen.core.ir import digest
from structgen.errors import StructgenError, UnsupportedFeatureError
from structgen.frontends.json_schema import dnf
from structgen.frontends.json_schema.translate import translate_schema

pytestmark = pytest.mark.skipif(not maskbench.available(), reason="MaskBench data not present")

KEYWORDS = ("oneOf", "not", "if", "allOf", "anyOf", "dependencies", "dependentSchemas")
PER_KEYWORD = 12
MAX_SCHEMA_CHARS = 20_000


def outcome(schema, lenient: bool = False) -> str:
    """The grammar's rules by digest, or the error: what the memo must leave as it was."""
    try:
        grammar, relaxed = translate_schema(schema, whitespace="compact", lenient=lenient)
    except StructgenError as err:
        return f"{type(err).__name__}: {err}"
    return repr(([(name, digest(e)) for name, e in grammar.rules], grammar.start, grammar.lookahead, relaxed))


def combinator_schemas() -> list[tuple[str, object]]:
    """Up to PER_KEYWORD schemas per keyword (any source, stable order), recursive ones included."""
    pools: dict[str, list] = {k: [] for k in KEYWORDS}
    for row in maskbench.iter_rows():
        if row.get("meta", {}).get("full_size", 0) > MAX_SCHEMA_CHARS:
            continue
        used = maskbench.keywords_in(row["schema"])
        for k in KEYWORDS:
            if k in used:
                pools[k].append((maskbench.stable_hash(row["name"]), row["name"], row["schema"]))
                break
    return [(name, schema) for k in KEYWORDS for _, name, schema in sorted(pools[k])[:PER_KEYWORD]]


def test_memoized_checks_translate_as_unmemoized_ones(monkeypatch):
    cases = combinator_schemas()
    assert len(cases) > 60
    # lenient: refusals are recorded, not raised (but still raised inside a oneOf exclusion)
    memoized = {(name, lenient): outcome(schema, lenient) for name, schema in cases for lenient in (False, True)}
    monkeypatch.setattr(dnf.Merger, "possible", dnf.Merger._possible_now)  # every check made afresh
    for (name, lenient), want in memoized.items():
        assert outcome(dict(cases)[name], lenient) == want, (name, lenient)
    assert sum(o.startswith("UnsupportedFeatureError") for o in memoized.values()) > 0  # refusals too


def test_repeated_checks_are_made_once(monkeypatch):
    row = next(r for r in maskbench.iter_rows() if r["name"] == "Github_medium---o58661.json")
    merges = []
    real = dnf.Merger.merge_term

    def counting(self, term):
        merges.append(1)
        return real(self, term)

    monkeypatch.setattr(dnf.Merger, "merge_term", counting)
    with pytest.raises(UnsupportedFeatureError, match="oneOf.*may both hold"):
        translate_schema(row["schema"], whitespace="compact")
    assert len(merges) < 5_000, len(merges)  # 138,436 merges before the memo, 1,870 with it
