"""The official JSON-Schema-Test-Suite (drafts 2020-12 and 7) against structgen (see :mod:`schema_suite`).

Every group of every file in scope, in every draft of :data:`schema_suite.DRAFTS`, is compiled
with the SmolLM2 tokenizer (one session-wide run per draft) and each test instance is walked
token by token, compact and ``indent=2``:

* no group may crash: a schema structgen cannot honour must be refused with a
  :class:`structgen.StructgenError`;
* no compiled group may give a wrong verdict (a valid instance rejected, or an invalid one
  accepted), checked per draft and keyword file so a failure names both and lists its verdicts;
* groups compiled / groups total, over the files outside ``$dynamicRef``, ``unevaluated*`` and
  ``$vocabulary``, must reach :data:`COMPILE_FLOOR` in each draft.

Gemma 3's tokenizer (the SentencePiece family) walks the first group of each file of draft 2020-12.
The report with refusal reasons is ``benchmarks/schema_suite.py``.
"""

from __future__ import annotations

import pytest

import schema_suite as ss

#: Required share of groups compiled, over the files inside the floor.
COMPILE_FLOOR = 0.85

#: Every (draft, file) in scope, in :func:`schema_suite.scope` order (fixed here, so a missing
#: file fails).
_FILES = [(d, n) for d in ss.DRAFTS for n in ss.names(d)]


@pytest.fixture(scope="session")
def suite_runs(smollm2_tokenizer):
    """Each draft's results, run once per session when first asked for."""
    runs: dict[str, dict[str, ss.FileResult]] = {}

    def results(draft: str) -> dict[str, ss.FileResult]:
        if draft not in runs:
            runs[draft] = ss.run_suite(smollm2_tokenizer, draft=draft)
        return runs[draft]
    return results


def test_suite_data_is_present():
    # No silent skip: missing data fails here (and every test below errors in the fixture).
    assert sorted(p.name for p in ss.SUITE_ROOT.iterdir() if p.is_dir()) == sorted(ss.DRAFTS), (
        "the suite's drafts changed; update schema_suite.DRAFTS and DIALECTS")
    for draft in ss.DRAFTS:
        files = ss.scope(draft)
        assert [(f.draft, f.name) for f in files] == [(d, n) for d, n in _FILES if d == draft]
        on_disk = {p.stem for p in (ss.SUITE_ROOT / draft).glob("*.json")}
        assert on_disk == set(ss.REQUIRED[draft]), (
            f"the suite's {draft} required files changed; update schema_suite.REQUIRED: "
            f"new {sorted(on_disk - set(ss.REQUIRED[draft]))}, gone {sorted(set(ss.REQUIRED[draft]) - on_disk)}")
        assert all(ss.load_groups(f) for f in files)


@pytest.mark.parametrize("draft", ss.DRAFTS)
def test_no_crashes(draft, suite_runs):
    crashes = [f"{draft}/{r.name} [{g.description}]: {g.reason}"
               for r in suite_runs(draft).values() for g in r.crashes]
    assert not crashes, "groups that crashed instead of compiling or being refused:\n" + "\n".join(crashes)


#: Valid instances structgen knowingly rejects (never an invalid one accepted): the hostname
#: format refuses every A-label ('xn--...'), since checking Punycode and IDNA 2008's contextual
#: rules is not a compact regular language (structgen/frontends/json_schema/formats.py, FORMAT_NOTES["hostname"]).
KNOWN_REJECTED_VALID = {
    ("optional/format/hostname", "validation of A-label (punycode) host names"): "xn--",
}


def _known(name: str, w) -> bool:
    prefix = KNOWN_REJECTED_VALID.get((name, w.group))
    return prefix is not None and w.expected and w.data.strip('"').startswith(prefix)


@pytest.mark.parametrize("draft,name", _FILES, ids=[f"{d}/{n}" for d, n in _FILES])
def test_no_wrong_verdicts(draft, name, suite_runs):
    res = suite_runs(draft)[name]
    wrong = [str(w) for w in res.wrong if not _known(name, w)]
    assert not wrong, (f"{draft}/{name}: {len(wrong)} wrong verdicts in {res.compiled} compiled groups:\n"
                       + "\n".join(wrong))


@pytest.mark.parametrize("draft", ss.DRAFTS)
def test_compile_rate(draft, suite_runs):
    # The floor holds over every group but those refused for a keyword of the structures issue
    # (schema_suite.STRUCTURE_KEYWORDS: allOf, oneOf, prefixItems, contains ...), which the
    # report lists; the rate over all groups is printed beside it.
    suite_results = suite_runs(draft)
    compiled, total = ss.compile_rate(suite_results, scalars_only=True)
    all_compiled, all_total = ss.compile_rate(suite_results)
    assert total > 0
    by_file = ", ".join(f"{r.name} {r.compiled}/{r.total}" for r in suite_results.values()
                        if r.file.in_floor and r.compiled < r.total)
    print(f"{draft}: compiled {compiled}/{total} groups outside the structure keywords, "
          f"{all_compiled}/{all_total} overall")
    assert compiled / total >= COMPILE_FLOOR, (
        f"compiled {compiled}/{total} groups ({compiled / total:.1%}) < {COMPILE_FLOOR:.0%}; "
        f"incomplete files: {by_file}")


def test_gemma_first_group_of_each_file(gemma_tokenizer):
    results = ss.run_suite(gemma_tokenizer, first_group_only=True)
    assert len(results) == len(ss.names("draft2020-12"))
    problems = [f"{r.name} [{g.description}] crashed: {g.reason}"
                for r in results.values() for g in r.crashes]
    problems += [f"{r.name}: {w}" for r in results.values() for w in r.wrong]
    assert not problems, "Gemma tokenizer:\n" + "\n".join(problems)
    assert sum(r.walks for r in results.values()) > 0


def test_runner_reports_wrong_verdicts_both_ways(smollm2_tokenizer):
    # The harness itself: mislabelled tests must show up as wrong verdicts, in both directions,
    # and a StructgenError must count as a refusal, not a crash.
    group = {"description": "synthetic", "schema": {"type": "integer"}, "tests": [
        {"description": "right", "data": 3, "valid": True},
        {"description": "valid labelled invalid", "data": 4, "valid": False},
        {"description": "invalid labelled valid", "data": "x", "valid": True},
    ]}
    res = ss.run_group(group, smollm2_tokenizer)
    assert res.outcome == "compiled" and res.walks == 6
    assert sorted((w.test, w.expected) for w in res.wrong) == (
        [("invalid labelled valid", True)] * 2 + [("valid labelled invalid", False)] * 2)
    refused = ss.run_group({"description": "bad", "schema": {"type": "nope"}, "tests": []},
                           smollm2_tokenizer)
    assert refused.outcome == "refused" and refused.error_class == "SchemaError"
    assert ss._expected("format", {"description": "invalid email string is only an annotation by default",
                                   "data": "2962", "valid": True}) == (False, True)


@pytest.mark.parametrize("draft", ss.DRAFTS)
def test_known_rejections_are_still_there(draft, suite_runs):
    # The exception above must not outlive its reason: it names rejections that happen.
    for name, group in KNOWN_REJECTED_VALID:
        assert any(w.group == group and _known(name, w) for w in suite_runs(draft)[name].wrong)


def test_a_draft7_schema_is_compiled_as_draft_7(smollm2_tokenizer):
    # The suite's draft-7 schemas say no $schema: the runner gives them draft 7's, so an $id
    # beside $ref does not move the base URI (draft 7 ignores it), as the suite expects.
    group = next(g for g in ss.load_groups(next(f for f in ss.scope("draft7") if f.name == "ref"))
                 if g["description"] == "$ref prevents a sibling $id from changing the base uri")
    assert "$schema" not in group["schema"]
    assert ss.with_dialect(group["schema"], "draft7")["$schema"] == ss.DIALECTS["draft7"]
    res = ss.run_group(group, smollm2_tokenizer, draft="draft7")
    assert res.outcome == "compiled" and res.walks and not res.wrong
