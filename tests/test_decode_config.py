"""The decoding options, the stats by draft source and the typed errors of the public calls
(no model needed)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace

import pytest

import structgen
from structgen.decoding.config import DecodeConfig
from structgen.decoding.drafts import Draft
from structgen.decoding.stats import GenerationStats
from structgen.errors import OptionError


def test_defaults_are_greedy_with_drafts():
    config = DecodeConfig()
    assert config.greedy and config.speculate and config.max_new_tokens == 256 and config.max_draft == 16
    assert not replace(config, temperature=0.5).greedy
    with pytest.raises(FrozenInstanceError):
        config.temperature = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("options,words", [
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(max_new_tokens=2.5), "max_new_tokens"),
    (dict(max_new_tokens=True), "max_new_tokens"),
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(temperature=float("inf")), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(top_k=-1), "top_k"),
    (dict(seed="1"), "seed"),
    (dict(acceptance_prior=1.2), "acceptance_prior"),
    (dict(max_draft=-1), "max_draft"),
    (dict(speculate="yes"), "speculate"),
])
def test_bad_options_raise_a_typed_error_naming_them(options, words):
    with pytest.raises(OptionError, match=words) as info:
        DecodeConfig(**options)
    assert isinstance(info.value, structgen.StructgenError) and isinstance(info.value, ValueError)


def test_generator_needs_model_and_tokenizer_together():
    with pytest.raises(OptionError, match="model"):
        structgen.Generator(tokenizer=object())


def test_stats_count_drafts_by_source_and_in_total():
    stats = GenerationStats(forward_passes=4, new_tokens=9)
    stats.count_draft("forced", drafted=4, accepted=4)
    stats.count_draft("forced", drafted=3, accepted=1)
    stats.count_draft("lookup", drafted=2, accepted=0)
    assert (stats.drafted_tokens, stats.accepted_tokens, stats.rejected_drafts) == (9, 5, 2)
    assert stats.by_source["forced"].acceptance_rate == 5 / 7 and stats.by_source["lookup"].rejected_drafts == 1
    assert stats.acceptance_rate == 5 / 9 and stats.passes_per_token == 3 / 9
    total = GenerationStats(prefill_tokens=100)
    total.add(stats)
    total.add(stats)
    assert total.prefill_tokens == 100 and total.drafted_tokens == 18
    assert total.by_source["forced"].drafted_tokens == 14 and stats.by_source["forced"].drafted_tokens == 7


def test_a_draft_is_cut_keeping_its_source():
    draft = Draft((1, 2, 3), "forced")
    assert draft.cut(2) == Draft((1, 2), "forced") and draft.cut(5) is draft and len(draft.cut(0)) == 0
