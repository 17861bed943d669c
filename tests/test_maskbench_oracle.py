"""Exact masks on real schemas: MaskBench instances walked token by token against brute force.

Two properties, on a deterministic sample of MaskBench (see :mod:`maskbench`), with the real
SmolLM2 (byte-level BPE, 49k tokens) and Gemma 3 (SentencePiece, 262k tokens) vocabularies:

1. ``test_valid_instance_masks_match_brute_force``: the shortest valid instance of each schema,
   serialised compactly (against the ``compact`` and the ``flexible`` grammar) and with
   ``indent=2`` (against the ``flexible`` grammar), is tokenized and walked with
   :func:`oracle.check_walk`, which at *every* position compares the matcher's mask with a mask
   found by walking every vocabulary token byte by byte, and the forced text with a byte-by-byte
   search; the walk must end in a state that allows end-of-sequence.
2. ``test_invalid_instance_rejected_at_first_bad_token``: labelled-invalid instances that
   python-jsonschema also rejects (schemas in ``python_jsonschema_disagreements.json`` skipped)
   must be rejected by the matcher, at exactly the token that contains the first byte after
   which the text is no longer a prefix of any document of the grammar (found with the stack
   machine's byte-level step, independent of the token masks). Text that stays a valid prefix
   throughout must not be a complete value (``can_end()`` false).

Cost: brute force is ~40 ms a position on SmolLM2 and ~5x that on Gemma, so instances are
short (compact JSON <= ``MAX_CHARS`` bytes) and Gemma walks a subset of the schemas.
"""

from __future__ import annotations

import pytest

import structgen

import maskbench as mb
from oracle import check_walk



def test_maskbench_data_is_present():
    # No silent skip: without the data every walk below would vanish and the suite still pass.
    assert mb.available(), (f"MaskBench data not found at {mb.MASKBENCH}: put the shared data "
                            "folder beside the repository or set STRUCTGEN_DATA_DIR")

#: MaskBench subsets sampled (each contributes the same number of schemas).
SOURCES = (
    "Github_trivial", "Github_easy", "Github_medium", "Glaiveai2K", "Kubernetes",
    "BFCL_simple", "BFCL_multiple", "BFCL_parallel_multiple", "JME", "WashingtonPost",
    "JsonSchemaStore", "MCPspec",
)
#: Schemas per source walked with SmolLM2 (JsonSchemaStore has only 2 that qualify).
SMOL_PER_SOURCE = 5
#: Gemma's brute force costs ~5x SmolLM2's, so Gemma walks one schema per source: the one with
#: the shortest instance of at least ``GEMMA_MIN_CHARS`` bytes (shortest overall if none).
GEMMA_MIN_CHARS = 16
#: Longest compact serialisation (bytes) of the shortest valid instance of a selected schema.
MAX_CHARS = 100
#: Schemas per source used for the invalid-instance test (brute-force free, so more of them).
INVALID_PER_SOURCE = 12

#: (walk id, serialisation, grammar whitespace)
MODES = (
    ("compact", mb.compact, "compact"),
    ("compact-flexible", mb.compact, "flexible"),
    ("indent2", mb.indented, "flexible"),
)
_SERIALISE = {mode: (ser, ws) for mode, ser, ws in MODES}
TOKENIZERS = {"smollm2": "smollm2_tokenizer", "gemma": "gemma_tokenizer"}


def _cases(per_source: int) -> tuple[mb.Case, ...]:
    if not mb.available():
        return ()
    return mb.select(SOURCES, per_source, max_chars=MAX_CHARS)


def _gemma_names(cases: tuple[mb.Case, ...]) -> set[str]:
    names = set()
    for src in SOURCES:
        mine = [c for c in cases if c.source == src]
        if not mine:
            continue
        size = {c.name: len(mb.compact(c.shortest_valid).encode()) for c in mine}
        pool = [c for c in mine if size[c.name] >= GEMMA_MIN_CHARS] or mine
        names.add(min(pool, key=lambda c: size[c.name]).name)  # min() keeps hash order on ties
    return names


#: Keywords of the structures issue: schemas using them are walked too, beside the per-source
#: sample (which is drawn before looking at keywords and so holds few of them).
STRUCTURE_KEYWORDS = (
    "prefixItems", "minItems", "maxItems", "contains", "uniqueItems", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "allOf", "oneOf", "not", "if",
    "dependentRequired", "dependencies", "$id",
)


def _keyword_cases() -> tuple[mb.Case, ...]:
    if not mb.available():
        return ()
    sampled = {c.name for c in _cases(INVALID_PER_SOURCE)}
    return tuple(c for c in mb.select_by_keywords(STRUCTURE_KEYWORDS, 2, max_chars=MAX_CHARS)
                 if c.name not in sampled)


def _walk_params() -> list:
    params = []
    cases = _cases(SMOL_PER_SOURCE)
    gemma = _gemma_names(cases)
    for case in cases:
        toks = ["smollm2"] + (["gemma"] if case.name in gemma else [])
        for tok in toks:
            for mode, _ser, _ws in MODES:
                params.append(pytest.param(case, tok, mode, id=f"{case.name}-{tok}-{mode}"))
    for case in _keyword_cases():  # both tokenizers; Gemma compact only (its brute force is dear)
        for tok, modes in (("smollm2", [m for m, _, _ in MODES]), ("gemma", ["compact"])):
            for mode in modes:
                params.append(pytest.param(case, tok, mode, id=f"{case.name}-{tok}-{mode}"))
    return params


def test_structure_keywords_are_walked():
    used = {k for c in _keyword_cases() for k in mb.keywords_in(c.schema)} & set(STRUCTURE_KEYWORDS)
    assert len(used) >= 8, sorted(used)


def _invalid_params() -> list:
    params = []
    skip = mb.disagreeing_schemas() if mb.available() else frozenset()
    for case in _cases(INVALID_PER_SOURCE) + _keyword_cases():
        if case.name in skip:
            continue
        for i, data in enumerate(case.invalid):
            try:
                if mb.jsonschema_valid(case.schema, data):
                    continue  # mislabelled for python-jsonschema's reading of the schema
            except Exception:  # noqa: BLE001 - a schema python-jsonschema cannot handle
                continue
            for tok in TOKENIZERS:
                for mode in ("compact", "indent2"):
                    params.append(pytest.param(case, i, tok, mode, id=f"{case.name}-invalid{i}-{tok}-{mode}"))
    return params


# ------------------------------------------------------------------ fixtures and helpers

_COMPILED: dict[tuple[str, str, str], structgen.CompiledGrammar] = {}


@pytest.fixture(scope="module")
def vocabularies(request):
    """name -> (tokenizer, Vocabulary), built lazily so a SmolLM2-only selection skips Gemma."""
    cache: dict[str, tuple] = {}

    def get(name: str):
        if name not in cache:
            tok = request.getfixturevalue(TOKENIZERS[name])
            cache[name] = (tok, structgen.Vocabulary.from_tokenizer(tok))
        return cache[name]

    return get


def _compiled(case: mb.Case, tok_name: str, vocab, whitespace: str) -> structgen.CompiledGrammar:
    key = (case.name, tok_name, whitespace)
    if key not in _COMPILED:
        _COMPILED[key] = structgen.compile_json_schema(case.schema, vocab, whitespace=whitespace)
    return _COMPILED[key]


def _encode(tok, vocab, text: str) -> list[int]:
    ids = tok.encode(text, add_special_tokens=False)
    joined = b"".join(vocab.tokens[t] or b"" for t in ids)
    assert joined == text.encode("utf-8"), (
        f"token bytes do not spell the text: {joined[:80]!r} vs {text.encode()[:80]!r}")
    return ids


def _first_bad_byte(m: structgen.Matcher, data: bytes) -> int | None:
    """Offset of the first byte after which ``data`` is no prefix of any grammar document."""
    sm = m._rt.machine
    state = m._states[-1]
    for i, b in enumerate(data):
        state = sm.step_set(state, b)
        if not state:
            return i
    return None


# ------------------------------------------------------------------ tests


def test_sample_is_spread_and_large_enough():
    cases = _cases(SMOL_PER_SOURCE)
    sources = {c.source for c in cases}
    assert len(sources) >= 5, sources
    walks = _walk_params()
    assert len(walks) >= 200, len(walks)
    assert len({p.id for p in walks}) == len(walks)
    # deterministic: each source's schemas in stable-hash order, not file order
    for src in sources:
        hashes = [mb.stable_hash(c.name) for c in cases if c.source == src]
        assert hashes == sorted(hashes)


@pytest.mark.parametrize("case, tok_name, mode", _walk_params())
def test_valid_instance_masks_match_brute_force(case, tok_name, mode, vocabularies):
    tok, vocab = vocabularies(tok_name)
    serialise, whitespace = _SERIALISE[mode]
    text = serialise(case.shortest_valid)
    ids = _encode(tok, vocab, text)
    m = _compiled(case, tok_name, vocab, whitespace).matcher()
    n = check_walk(m, ids, check_forced=True)
    assert n == len(ids) + 1


@pytest.mark.parametrize("case, index, tok_name, mode", _invalid_params())
def test_invalid_instance_rejected_at_first_bad_token(case, index, tok_name, mode, vocabularies):
    tok, vocab = vocabularies(tok_name)
    serialise, whitespace = _SERIALISE[mode]
    text = serialise(case.invalid[index])
    data = text.encode("utf-8")
    ids = _encode(tok, vocab, text)
    m = _compiled(case, tok_name, vocab, whitespace).matcher()
    bad = _first_bad_byte(m, data)
    if bad is None:
        for pos, tid in enumerate(ids):
            assert m.advance(tid), (
                f"token {pos} ({vocab.tokens[tid]!r}) rejected although the text is a valid prefix: "
                f"{m.last_rejection}")
        assert not m.can_end(), (
            f"an instance python-jsonschema rejects is accepted as complete: {text[:200]!r}")
        return
    # the token whose bytes contain offset ``bad``
    end = 0
    for k, tid in enumerate(ids):
        end += len(vocab.tokens[tid])
        if end > bad:
            break
    for pos, tid in enumerate(ids[:k]):
        assert m.advance(tid), (
            f"token {pos} ({vocab.tokens[tid]!r}) rejected, but the text is a valid prefix up to "
            f"byte {bad} (token {k}): {m.last_rejection}")
    assert not m.advance(ids[k]), (
        f"token {k} ({vocab.tokens[ids[k]]!r}) accepted although byte {bad} "
        f"({data[max(0, bad - 20):bad + 1]!r}) leaves the grammar")
