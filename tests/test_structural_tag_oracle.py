"""Structural tags against xgrammar, the engine whose format they are: the same verdicts.

Every spec of ``tests/test_structural_tag.py``'s :data:`CASES` (xgrammar's documented examples)
is compiled by structgen and by xgrammar on the default model's tokenizer, and every output
listed there, allowed or refused, is walked through both, byte by byte: structgen advances the
tokenizer's single-byte tokens, xgrammar takes the text with ``GrammarMatcher.accept_string``;
an output is accepted when every byte is and the end-of-sequence token is accepted after it
(xgrammar: ``accept_token(stop)`` then ``is_terminated()``; structgen: ``can_end()``). The
verdicts must agree, except for the differences in :data:`KNOWN_DIFFERENCES`, each with its
reason; a new difference fails, and so does a listed one that no longer occurs.

structgen compiles with its defaults, as ``tests/test_structural_tag.py`` does (flexible
whitespace, open objects). xgrammar fixes ``any_whitespace`` and ``strict_mode`` for every
``json_schema`` in a structural tag, but its strict mode closes only objects that declare
``properties``: ``{"type": "object"}`` still takes ``{"a": 1}`` there, as in structgen's
default, while structgen's ``strict=True`` would close it too.

xgrammar is a peer (the ``bench`` extra), not a test dependency: where it is not installed (CI),
this module is skipped.
"""

from __future__ import annotations

import pytest

xgrammar = pytest.importorskip("xgrammar")

import structgen  # noqa: E402
from structgen.engine.vocab import vocabulary_for  # noqa: E402

from test_structural_tag import CASES  # noqa: E402

IDS = [f"{c[0].get('type')}-{i}" for i, c in enumerate(CASES)]

#: (case id, output) -> why the engines' verdicts differ; output None: xgrammar refuses the spec.
KNOWN_DIFFERENCES: dict[tuple[str, str | None], str] = {
    ("grammar-13", None): "xgrammar's grammar format reads EBNF only (Grammar::FromEBNF); structgen also reads "
                          "Lark text, as its docs say",
    ("structural_tag-14", None): "xgrammar 0.2.9 reads the older structures/triggers form only through its Python "
                                 "API (StructuralTagItem list, triggers), not as JSON; walked through that API here",
}


@pytest.fixture(scope="module")
def engines(smollm2_tokenizer):
    """(tokenizer, byte -> single-byte token id, xgrammar compiler, stop token id)."""
    vocab = vocabulary_for(smollm2_tokenizer)
    byte_ids: dict[int, int] = {}
    for tid, data in enumerate(vocab.tokens):
        if data is not None and len(data) == 1:
            byte_ids.setdefault(data[0], tid)
    info = xgrammar.TokenizerInfo.from_huggingface(smollm2_tokenizer)
    return smollm2_tokenizer, byte_ids, xgrammar.GrammarCompiler(info, cache_enabled=False), info.stop_token_ids[0]


def structgen_accepts(compiled, byte_ids: dict[int, int], text: str) -> bool:
    m = compiled.matcher()
    for b in text.encode():
        assert b in byte_ids, f"the tokenizer has no single-byte token for {bytes([b])!r}"
        if not m.advance(byte_ids[b]):
            return False
    return m.can_end()


def xgrammar_accepts(compiled, stop: int, text: str) -> bool:
    m = xgrammar.GrammarMatcher(compiled)
    return m.accept_string(text) and m.accept_token(stop) and m.is_terminated()


def xgrammar_compile(compiler, spec: dict):
    """xgrammar's compile of ``spec`` as JSON, and of the older form through its Python API:
    (compiled or None, why the JSON was refused or None)."""
    try:
        return compiler.compile_structural_tag(spec), None
    except Exception as err:  # noqa: BLE001 -- RuntimeError / InvalidStructuralTagError: a verdict
        refusal = " ".join(str(err).split())[-200:]
    if "structures" in spec:
        items = [xgrammar.StructuralTagItem(begin=s["begin"], schema=s["schema"], end=s["end"])
                 for s in spec["structures"]]
        return compiler.compile_structural_tag(items, spec["triggers"]), refusal
    return None, refusal


@pytest.mark.parametrize("spec, good, bad", CASES, ids=IDS)
def test_same_verdicts_as_xgrammar(engines, spec, good, bad, request):
    tokenizer, byte_ids, compiler, stop = engines
    case = request.node.callspec.id
    wrapped = {"type": "structural_tag", "format": spec} if "structures" not in spec else spec
    ours = structgen.compile_structural_tag(wrapped, tokenizer)
    theirs, refusal = xgrammar_compile(compiler, wrapped)
    found: dict[tuple[str, str | None], str] = {}
    if refusal is not None:
        found[(case, None)] = f"xgrammar refuses the spec: {refusal}"
    if theirs is not None:
        for text, allowed in [(t, True) for t in good] + [(t, False) for t in bad]:
            verdicts = (structgen_accepts(ours, byte_ids, text), xgrammar_accepts(theirs, stop, text))
            assert verdicts[0] == allowed, f"structgen's verdict on {text!r} (see test_structural_tag.py)"
            if verdicts[0] != verdicts[1]:
                found[(case, text)] = f"structgen {'accepts' if verdicts[0] else 'refuses'}, xgrammar does not"
    known = {k: v for k, v in KNOWN_DIFFERENCES.items() if k[0] == case}
    new = {k: v for k, v in found.items() if k not in known}
    gone = [k for k in known if k not in found]
    assert not new, f"differences from xgrammar not in KNOWN_DIFFERENCES: {new}"
    assert not gone, f"KNOWN_DIFFERENCES entries that no longer occur: {gone}"


def test_known_differences_name_real_cases():
    outputs = {IDS[i]: set(good) | set(bad) | {None} for i, (_, good, bad) in enumerate(CASES)}
    for (case, text), reason in KNOWN_DIFFERENCES.items():
        assert case in outputs and text in outputs[case], (case, text)
        assert reason and "\n" not in reason
