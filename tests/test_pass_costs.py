"""The pass-cost curve: learned from the passes decoding times, kept on disk per model, device
and thread count, never measured before a first result."""

from __future__ import annotations

import pytest

from structgen.decoding import costs as costs_module
from structgen.decoding.costs import MIN_SAMPLES, PassCosts


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STRUCTGEN_DISK_CACHE", "1")
    return tmp_path / "cache"


def test_best_cut_weighs_each_tokens_acceptance():
    curve = PassCosts({1: 1.0, 2: 1.6, 4: 1.5, 8: 1.5, 16: 1.7})
    assert curve.best_cut([0.99, 0.99, 0.99]) == (3, pytest.approx((1 + 0.99 + 0.99**2 + 0.99**3) / 1.5))
    steep = PassCosts({1: 1.0, 2: 1.6, 4: 2.0, 8: 3.0})
    assert steep.best_cut([0.99, 0.05, 0.99])[0] == 1  # past an unlikely token nothing pays
    assert curve.best_cut([0.3, 0.3]) == (0, 1.0)
    assert curve.best_cut([0.95] * 3, cost_per_token=1.0)[0] == 0  # a costly source must earn its passes


def test_a_fixed_curve_keeps_its_values_but_notes_step_times():
    curve = PassCosts()
    for _ in range(MIN_SAMPLES):
        curve.observe(1, 0.05)
        curve.observe(4, 0.5)
    assert curve.relative == PassCosts().relative and curve.step_seconds == pytest.approx(0.05)


def test_a_learning_curve_follows_the_medians_and_never_goes_below_one():
    curve = PassCosts(learn=True)
    for _ in range(MIN_SAMPLES - 1):
        curve.observe(1, 0.05)
        curve.observe(3, 0.1)  # counted as a 4-wide pass
    assert curve.relative[4] == 1.5  # not enough seen yet
    curve.observe(1, 0.05)
    curve.observe(3, 0.1)
    assert curve.relative[4] == pytest.approx(2.0)
    for _ in range(2 * MIN_SAMPLES):
        curve.observe(2, 0.01)  # noise: faster than a 1-wide pass
    assert curve.relative[2] == 1.0
    curve.observe(0, 1.0)
    curve.observe(1, float("nan"))
    assert curve.step_seconds == pytest.approx(0.05)


def test_the_learned_curve_is_kept_per_key_and_damage_is_ignored(cache):
    curve = PassCosts(learn=True, key="k1")
    for _ in range(MIN_SAMPLES):
        curve.observe(1, 0.05)
        curve.observe(8, 0.1)
    curve.save()
    assert costs_module._load("k1") == {1: curve.relative} and costs_module._load("k2") is None
    path = cache / "costs" / "k1.json"
    path.write_bytes(path.read_bytes()[:-3])  # broken seal: a miss
    assert costs_module._load("k1") is None


def test_the_surface_makes_drafts_step_aside_as_the_batch_fills():
    """Built-in estimate: a batch of rows costs what one row costs over all their positions, so
    a wider pass costs nearly its width once the batch is large; drafts shrink, then stop."""
    costs = PassCosts()
    expected = [1.0] + [1.0 + 0.9 * (k + 1) for k in range(15)]  # a long, likely draft per row
    widths = [costs.best_width([expected] * rows, rows) for rows in (1, 2, 4, 8, 16, 32, 64)]
    assert widths[0] > 1 and widths[-1] == 1 and widths == sorted(widths, reverse=True), widths
    assert costs.cost(1, 12) == pytest.approx(1.0) and 1.0 <= costs.cost(4, 12) <= costs.cost(4, 16)
    assert costs.best_width([[1.0], [1.0, 1.2]] * 16, 32) == 1  # an unlikely draft is not worth a wider pass


def test_a_learned_surface_is_kept_with_the_curve(cache):
    surface = PassCosts(learn=True, key="k3")
    for _ in range(MIN_SAMPLES):
        surface.observe(1, 0.2, rows=16)
        surface.observe(4, 0.8, rows=16)  # compute-bound: 4 positions cost 4 times 1
    assert surface.by_rows[16][4] == pytest.approx(4.0, rel=0.05)
    assert surface.best_width([[1.0, 1.9, 2.8, 3.7]] * 16, 16) <= 2  # the learned 4-wide cost rules out 4
    surface.save()
    assert costs_module._load("k3")[16][4] == surface.by_rows[16][4]


def test_a_first_result_does_not_wait_for_a_measurement(smollm2_model, monkeypatch, cache):
    import structgen

    model, tokenizer = smollm2_model
    monkeypatch.setattr(PassCosts, "measure", staticmethod(lambda *a, **k: pytest.fail("measured")))
    gen = structgen.Generator(model, tokenizer)
    result = gen.json({"type": "string", "minLength": 8, "maxLength": 12}, "Name a colour.", max_new_tokens=16)
    assert gen.pass_costs.learn and gen.pass_costs.key and result.stats.forward_passes >= 1
    assert gen.pass_costs.step_seconds is not None  # the passes it ran were timed
