"""Tests for structgen.decoding.sampling: the target distribution and lossless point-mass draft verification.

The statistical tests draw with fixed seeds, so they are deterministic; each compares the
empirical distribution of the returned tokens with the exact probabilities by a chi-square
goodness-of-fit test (p-value from the regularized upper incomplete gamma function, so no
scipy) and requires p > 1e-3.
"""

from __future__ import annotations

import doctest
import math
from collections import Counter

import pytest
import torch

from structgen.decoding import sampling
from structgen.decoding.sampling import greedy_token, sample_token, target_probs, verify_draft

INF = float("inf")
N_DRAWS = 20_000
P_MIN = 1e-3

# A 12-token vocabulary with three masked (illegal) tokens: 2, 5, 9.
LOGITS = torch.tensor([2.0, 1.5, -INF, 1.0, 0.3, -INF, 0.0, -0.5, 2.5, -INF, -1.0, 0.8])
MASKED = {2, 5, 9}
# temperature 0.8, top_k 7, top_p 0.95 keeps tokens {0, 1, 3, 8, 11} (checked below).
CUT = dict(temperature=0.8, top_k=7, top_p=0.95)
CUT_KEPT = {0, 1, 3, 8, 11}


# --------------------------------------------------------------------- helpers


def chi2_sf(stat: float, df: int) -> float:
    """Upper tail of the chi-square distribution: Q(df/2, stat/2)."""
    return float(
        torch.special.gammaincc(
            torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64)
        )
    )


def chi2_gof(counts: Counter, expected_probs: dict, n: int) -> tuple[float, float, int]:
    """Chi-square goodness of fit of ``counts`` (n draws) to ``expected_probs`` (cell -> prob).

    Cells with an expected count below 5 are pooled into one cell. Asserts that no draw fell
    in a cell of probability 0 (or one not listed). Returns ``(stat, p_value, df)``.
    """
    impossible = {c: k for c, k in counts.items() if expected_probs.get(c, 0.0) == 0.0}
    assert not impossible, f"draws in zero-probability cells: {impossible}"
    cells = [c for c, p in expected_probs.items() if p > 0]
    assert math.isclose(sum(expected_probs[c] for c in cells), 1.0, abs_tol=1e-9)
    big = [c for c in cells if n * expected_probs[c] >= 5]
    small = [c for c in cells if n * expected_probs[c] < 5]
    obs = [counts.get(c, 0) for c in big]
    exp = [n * expected_probs[c] for c in big]
    if small:
        obs.append(sum(counts.get(c, 0) for c in small))
        exp.append(n * sum(expected_probs[c] for c in small))
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    df = len(obs) - 1
    assert df >= 1
    return stat, chi2_sf(stat, df), df


def assert_binomial(k: int, n: int, p: float, sigmas: float = 5.0) -> None:
    """``k`` successes in ``n`` trials is within ``sigmas`` standard deviations of ``n p``."""
    sd = math.sqrt(n * p * (1 - p))
    msg = f"{k}/{n} = {k / n:.5f}, expected {p:.5f} ± {sigmas} sd"
    assert abs(k - n * p) <= sigmas * sd + 1e-9, msg


def as_dict(probs: torch.Tensor) -> dict:
    return {i: float(x) for i, x in enumerate(probs.tolist())}


# --------------------------------------------------------------------- the chi-square helper


def test_chi2_sf_matches_known_values():
    # Closed forms: df=2 -> exp(-x/2); df=1 -> erfc(sqrt(x/2)).
    for x in (0.5, 3.0, 10.0):
        assert math.isclose(chi2_sf(x, 2), math.exp(-x / 2), rel_tol=1e-12)
        assert math.isclose(chi2_sf(x, 1), math.erfc(math.sqrt(x / 2)), rel_tol=1e-10)
    # Textbook critical value: chi2(0.95, df=10) = 18.307.
    assert abs(chi2_sf(18.307, 10) - 0.05) < 1e-4


# --------------------------------------------------------------------- exactness of verify_draft

EXACTNESS_CASES = {
    # name: (target_probs kwargs, draft)
    "cut-small-draft": (CUT, 11),  # p(draft) ~ 0.057
    "cut-large-draft": (CUT, 8),  # p(draft) ~ 0.477
    "plain-tiny-draft": (dict(temperature=1.3), 10),  # p(draft) ~ 0.021, no cut-offs
    # p(draft) = 0, always rejected, token drawn from probs itself. Alternates an illegal
    # (masked) draft, 2, with a legal one that top-p cut off, 4.
    "zero-prob-drafts": (CUT, (2, 4)),
}


@pytest.mark.parametrize("name", list(EXACTNESS_CASES))
def test_verify_draft_output_distribution_is_exact(name):
    kwargs, drafts = EXACTNESS_CASES[name]
    drafts = drafts if isinstance(drafts, tuple) else (drafts,)
    probs = target_probs(LOGITS, **kwargs)
    p_draft = float(probs[drafts[0]])
    assert all(float(probs[d]) == p_draft for d in drafts)
    gen = torch.Generator().manual_seed(20240601 + len(name))

    counts: Counter = Counter()
    accepted_n = 0
    for i in range(N_DRAWS):
        draft = drafts[i % len(drafts)]
        accepted, token = verify_draft(probs, draft, gen)
        assert accepted == (token == draft)
        accepted_n += accepted
        counts[token] += 1

    assert not (set(counts) & MASKED), "a masked token was produced"
    stat, pval, df = chi2_gof(counts, as_dict(probs), N_DRAWS)
    rate = accepted_n / N_DRAWS
    print(f"\n{name}: p(draft)={p_draft:.4f} accept={rate:.4f}", end=" ")
    print(f"chi2={stat:.2f} df={df} p={pval:.4f}")
    assert pval > P_MIN, f"{name}: chi2={stat:.2f} df={df} p={pval:.2e}"

    if p_draft == 0.0:
        assert accepted_n == 0
    else:
        assert_binomial(accepted_n, N_DRAWS, p_draft)


def test_verify_draft_certain_draft_always_accepted():
    logits = torch.full((6,), -INF)
    logits[4] = 0.3
    probs = target_probs(logits)
    assert float(probs[4]) == 1.0
    gen = torch.Generator().manual_seed(7)
    assert all(verify_draft(probs, 4, gen) == (True, 4) for _ in range(2_000))
    # ... and a different draft is always rejected in favour of the only legal token.
    assert all(verify_draft(probs, 1, gen) == (False, 4) for _ in range(2_000))


def test_verify_draft_rejects_bad_draft_ids():
    probs = target_probs(LOGITS)
    gen = torch.Generator().manual_seed(0)
    for bad in (-1, len(LOGITS)):
        with pytest.raises(IndexError):
            verify_draft(probs, bad, gen)


def test_sample_token_matches_probs_and_avoids_masked():
    probs = target_probs(LOGITS, **CUT)
    gen = torch.Generator().manual_seed(99)
    n = 10_000
    counts = Counter(sample_token(probs, gen) for _ in range(n))
    assert set(counts) <= CUT_KEPT
    stat, pval, df = chi2_gof(counts, as_dict(probs), n)
    print(f"\nsample_token: chi2={stat:.2f} df={df} p={pval:.4f}")
    assert pval > P_MIN


# --------------------------------------------------------------------- sequential drafts


def test_chained_drafts_joint_distribution_is_product_of_steps():
    """Two positions, drafts d1 then d2; d2 is verified only if d1 was accepted.

    The second position's distribution depends on the first token (a different masked
    distribution per first token, as with a real grammar and model). After a rejection at
    position 1 the remaining draft is discarded and position 2 is sampled plainly (the next
    forward pass). The joint law of (t1, t2) must be p1(t1) * p2(t2 | t1).
    """
    v = 6
    gen_tables = torch.Generator().manual_seed(314)
    logits1 = torch.randn(v, generator=gen_tables) * 1.2
    logits1[5] = -INF
    p1 = target_probs(logits1, temperature=0.9)
    d1 = int(torch.argmax(p1))
    p2 = []
    for t1 in range(v):
        logits2 = torch.randn(v, generator=gen_tables) * 1.5
        logits2[(t1 + 2) % v] = -INF  # the legal set depends on the first token
        p2.append(target_probs(logits2, temperature=1.1, top_k=5))
    d2 = int(torch.argmax(p2[d1]))
    p_d1, p_d2 = float(p1[d1]), float(p2[d1][d2])
    assert 0.2 < p_d1 < 0.9 and 0.2 < p_d2 < 0.9  # both accept and reject paths get exercised

    gen = torch.Generator().manual_seed(2718)
    counts: Counter = Counter()
    acc1_n = acc_both_n = 0
    for _ in range(N_DRAWS):
        acc1, t1 = verify_draft(p1, d1, gen)
        if acc1:
            acc2, t2 = verify_draft(p2[t1], d2, gen)
            acc1_n += 1
            acc_both_n += acc2
        else:
            t2 = sample_token(p2[t1], gen)
        counts[(t1, t2)] += 1

    joint = {(a, b): float(p1[a]) * float(p2[a][b]) for a in range(v) for b in range(v)}
    stat, pval, df = chi2_gof(counts, joint, N_DRAWS)
    print(f"\nchained: p(d1)={p_d1:.4f} p(d2|d1)={p_d2:.4f} chi2={stat:.2f} df={df} p={pval:.4f}")
    assert pval > P_MIN, f"chi2={stat:.2f} df={df} p={pval:.2e}"
    assert_binomial(acc1_n, N_DRAWS, p_d1)
    assert_binomial(acc_both_n, N_DRAWS, p_d1 * p_d2)


# --------------------------------------------------------------------- target_probs

F64 = torch.float64
LOG4 = torch.tensor([math.log(0.4), math.log(0.3), math.log(0.2), math.log(0.1)], dtype=F64)


def close(t: torch.Tensor, expected: list[float]) -> bool:
    return torch.allclose(t, torch.tensor(expected, dtype=torch.float64), atol=1e-12, rtol=0)


def test_target_probs_plain_softmax_float64_and_exact_zeros():
    p = target_probs(LOGITS)
    assert p.dtype == torch.float64 and p.shape == LOGITS.shape
    assert math.isclose(float(p.sum()), 1.0, abs_tol=1e-12)
    assert all(float(p[i]) == 0.0 for i in MASKED)
    ref = torch.softmax(LOGITS.double(), dim=0)
    assert torch.allclose(p, ref, atol=1e-15)
    assert close(target_probs(LOG4), [0.4, 0.3, 0.2, 0.1])


def test_target_probs_temperature():
    logits = torch.tensor([0.0, 2 * math.log(2), -INF], dtype=torch.float64)
    assert close(target_probs(logits, temperature=1.0), [0.2, 0.8, 0.0])
    assert close(target_probs(logits, temperature=2.0), [1 / 3, 2 / 3, 0.0])
    # Very low temperature concentrates on the argmax, very high flattens over legal tokens only.
    assert close(target_probs(logits, temperature=1e-4), [0.0, 1.0, 0.0])
    flat = target_probs(logits, temperature=1e6)
    assert torch.allclose(flat, torch.tensor([0.5, 0.5, 0.0], dtype=F64), atol=1e-5)


def test_target_probs_top_k():
    assert close(target_probs(LOG4, top_k=1), [1.0, 0.0, 0.0, 0.0])
    assert close(target_probs(LOG4, top_k=2), [4 / 7, 3 / 7, 0.0, 0.0])
    assert close(target_probs(LOG4, top_k=4), [0.4, 0.3, 0.2, 0.1])
    assert close(target_probs(LOG4, top_k=100), [0.4, 0.3, 0.2, 0.1])
    # top_k counts legal tokens only: masked tokens never take a slot.
    masked = torch.tensor([-INF, math.log(0.5), -INF, math.log(0.25), math.log(0.25)], dtype=F64)
    assert close(target_probs(masked, top_k=2), [0.0, 2 / 3, 0.0, 1 / 3, 0.0])
    assert close(target_probs(masked, top_k=10), [0.0, 0.5, 0.0, 0.25, 0.25])
    # Ties at the cut go to the lower token id.
    ties = torch.tensor([0.0, 1.0, 1.0, 1.0, -INF])
    assert close(target_probs(ties, top_k=2), [0.0, 0.5, 0.5, 0.0, 0.0])


def test_target_probs_top_p():
    # Masses in order: 0.4, 0.7, 0.9, 1.0. Keep the smallest prefix reaching top_p.
    assert close(target_probs(LOG4, top_p=0.05), [1.0, 0.0, 0.0, 0.0])  # always at least one
    assert close(target_probs(LOG4, top_p=0.39), [1.0, 0.0, 0.0, 0.0])
    assert close(target_probs(LOG4, top_p=0.41), [4 / 7, 3 / 7, 0.0, 0.0])
    assert close(target_probs(LOG4, top_p=0.69), [4 / 7, 3 / 7, 0.0, 0.0])
    assert close(target_probs(LOG4, top_p=0.71), [4 / 9, 3 / 9, 2 / 9, 0.0])
    assert close(target_probs(LOG4, top_p=0.95), [0.4, 0.3, 0.2, 0.1])
    assert close(target_probs(LOG4, top_p=1.0), [0.4, 0.3, 0.2, 0.1])
    # The nucleus is measured over legal tokens only; masked ones stay exactly 0.
    masked = torch.tensor([math.log(0.6), -INF, math.log(0.3), math.log(0.1)], dtype=torch.float64)
    assert close(target_probs(masked, top_p=0.8), [2 / 3, 0.0, 1 / 3, 0.0])


def test_target_probs_top_k_then_top_p_on_renormalised():
    # top_k=3 gives 4/9, 3/9, 2/9 (cumulative 0.444, 0.778, 1); top_p=0.75 then keeps two.
    # (Measured on the un-renormalised masses 0.4, 0.7, 0.9 it would keep three.)
    assert close(target_probs(LOG4, top_k=3, top_p=0.75), [4 / 7, 3 / 7, 0.0, 0.0])
    # The module's fixture cut, checked by hand: top_k 7 then top_p 0.95 keeps 5 tokens.
    kept = {i for i, x in enumerate(target_probs(LOGITS, **CUT).tolist()) if x > 0}
    assert kept == CUT_KEPT


def test_target_probs_does_not_modify_input():
    logits = LOGITS.clone()
    target_probs(logits, **CUT)
    assert torch.equal(logits, LOGITS)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(temperature=0.0),
        dict(temperature=-1.0),
        dict(temperature=float("nan")),
        dict(temperature=INF),
        dict(top_k=-1),
        dict(top_k=1.5),
        dict(top_p=0.0),
        dict(top_p=-0.1),
        dict(top_p=1.5),
        dict(top_p=float("nan")),
    ],
)
def test_target_probs_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        target_probs(LOG4, **kwargs)


@pytest.mark.parametrize(
    "logits",
    [
        torch.full((4,), -INF),  # nothing legal
        torch.tensor([0.0, float("nan")]),
        torch.tensor([0.0, INF]),
        torch.zeros(2, 3),  # not 1-D
        torch.zeros(0),
    ],
)
def test_target_probs_bad_logits(logits):
    with pytest.raises(ValueError):
        target_probs(logits)


# --------------------------------------------------------------------- greedy


def test_greedy_token():
    assert greedy_token(torch.tensor([1.0, 3.0, 3.0, -INF])) == 1  # tie -> lowest id
    assert greedy_token(torch.tensor([-INF, 2.0, 2.0, 2.0])) == 1
    assert greedy_token(torch.tensor([-INF, -5.0, -INF])) == 1  # a masked token never wins
    assert greedy_token(LOGITS) == 8
    with pytest.raises(ValueError):
        greedy_token(torch.full((3,), -INF))
    with pytest.raises(ValueError):
        greedy_token(torch.tensor([0.0, float("nan")]))


# --------------------------------------------------------------------- docs


def test_docstring_examples_run():
    result = doctest.testmod(sampling, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------- exactness of the draft-model (p/q) rule

# q: what a draft model samples from, over the same masked vocabulary; it puts mass where the
# target puts none (token 4, cut by top-p) and none where the target puts some (token 11).
Q_LOGITS = torch.tensor([0.5, 2.5, -INF, 1.0, 1.2, -INF, 0.1, -0.5, 1.0, -INF, -1.0, -INF])


@pytest.mark.parametrize("q_kwargs", [dict(temperature=1.0), dict(temperature=0.8, top_k=3)], ids=["wide-q", "narrow-q"])
def test_verify_sampled_draft_output_distribution_is_exact(q_kwargs):
    """Draw d ~ q, verify against p with min(1, p/q) and the residual: the token returned is
    distributed as p exactly (20,000 draws, chi-square), and the acceptance rate is
    sum_x min(p(x), q(x))."""
    probs = target_probs(LOGITS, **CUT)
    q = target_probs(Q_LOGITS, **q_kwargs)
    gen = torch.Generator().manual_seed(7)
    counts: Counter = Counter()
    accepted_n = 0
    for _ in range(N_DRAWS):
        draft = sample_token(q, gen)
        accepted, token = sampling.verify_sampled_draft(probs, q, draft, gen)
        assert accepted == (token == draft)
        accepted_n += accepted
        counts[token] += 1
    assert not (set(counts) & MASKED) and set(counts) <= CUT_KEPT
    stat, pval, df = chi2_gof(counts, as_dict(probs), N_DRAWS)
    assert pval > P_MIN, f"chi2={stat:.2f} df={df} p={pval:.2e}"
    assert_binomial(accepted_n, N_DRAWS, float(torch.minimum(probs, q).sum()))


def test_verify_sampled_draft_checks_its_inputs():
    p = target_probs(LOGITS)
    with pytest.raises(sampling.OptionError):
        sampling.verify_sampled_draft(p, p[:5], 0, torch.Generator())
    with pytest.raises(IndexError):
        sampling.verify_sampled_draft(p, p, 99, torch.Generator())
    assert sampling.verify_sampled_draft(p, p, 8, torch.Generator().manual_seed(0)) == (True, 8)  # p == q
