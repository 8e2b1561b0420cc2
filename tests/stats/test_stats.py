from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from cltoolkit import stats


def test_holm_compatible_bounds_vector() -> None:
    r = stats.holm_simultaneous_lower_bounds([12, 3, -1], [1.5, 1.2, 0.9], [10, 0, -5], 4, 0.05)
    assert np.round(r.lower, 3).tolist() == [7.835, -0.332, -5.0]
    assert r.rejected.tolist() == [False, False, True]


def test_holm_bounds_all_rejected_are_max_of_threshold_and_bonferroni() -> None:
    r = stats.holm_simultaneous_lower_bounds([10, 10], [1, 1], [0, 5], 10, 0.05)
    assert r.rejected.all()
    bonf = 10 - sps.t.ppf(1 - 0.05 / 2, 10)
    assert r.lower.tolist() == pytest.approx([max(0, bonf), max(5, bonf)])


def test_holm_bounds_compatible_with_decisions() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        m = int(rng.integers(1, 6))
        est, se, delta = rng.normal(0, 3, m), rng.uniform(0.5, 2, m), rng.normal(0, 2, m)
        r = stats.holm_simultaneous_lower_bounds(est, se, delta, 6, 0.05)
        # a rejected hypothesis has a bound at or above its threshold; a retained one strictly below
        assert np.all(r.lower[r.rejected] >= delta[r.rejected] - 1e-12)
        assert np.all(r.lower[~r.rejected] < delta[~r.rejected])


def test_holm_and_bh_match_statsmodels() -> None:
    p = [0.01, 0.04, 0.03, 0.2, 0.001]
    assert stats.holm(p) == pytest.approx(multipletests(p, method="holm")[1])
    assert stats.benjamini_hochberg(p) == pytest.approx(multipletests(p, method="fdr_bh")[1])


def test_exact_permutation_minima() -> None:
    assert stats.sign_flip_p(np.full(5, 0.3)).p == 0.0625
    assert stats.sign_flip_p(np.full(5, 0.3), alternative="greater").p == 0.03125
    assert stats.sign_flip_p(np.linspace(0.1, 1, 10)).p == 0.001953125


def test_permutation_hand_case_and_monte_carlo() -> None:
    # d = [1, -2, 3]: sums of +-1 +-2 +-3 -> |sum| >= 2 in 6 of 8 flips; sum >= 2 in 3 of 8
    assert stats.sign_flip_p(np.array([1.0, -2.0, 3.0])) == (0.75, True, None, None)
    assert stats.sign_flip_p(np.array([1.0, -2.0, 3.0]), alternative="greater").p == 0.375
    assert stats.sign_flip_p(np.array([1.0, -2.0, 3.0]), alternative="less").p == 0.75  # sum <= 2: 6 of 8
    x = np.random.default_rng(0).normal(0.4, 1, 45)
    with pytest.raises(ValueError, match="Generator"):
        stats.sign_flip_p(x)
    r1 = stats.sign_flip_p(x, draws=20_000, rng=np.random.default_rng(5))
    r2 = stats.sign_flip_p(x, draws=20_000, rng=np.random.default_rng(5))
    assert not r1.exact
    assert r1 == r2
    assert 0 < r1.p < 1
    assert r1.draws == 20000
    assert r1.se == pytest.approx(math.sqrt(r1.p * (1 - r1.p) / 20000))


def _enumerated(d: np.ndarray, alternative: str) -> float:
    """All 2^n sign flips, one row each (the definition)."""
    signs = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
    sums, observed = signs @ d, d.sum()
    tol = 1e-12 * max(1.0, float(np.abs(d).sum()))
    if alternative == "greater":
        return float(np.mean(sums >= observed - tol))
    if alternative == "less":
        return float(np.mean(sums <= observed + tol))
    return 1.0 if abs(observed) <= tol else float(np.mean(np.abs(sums) >= abs(observed) - tol))


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_exact_permutation_by_meet_in_the_middle_equals_full_enumeration(alternative: str) -> None:
    rng = np.random.default_rng(11)
    for n in (1, 2, 5, 9, 14):
        for _ in range(5):
            d = rng.normal(0.2, 1, n).round(1)  # rounding makes ties
            assert stats.sign_flip_p(d, alternative=alternative).p == pytest.approx(_enumerated(d, alternative))


def test_exact_permutation_at_n_30_and_40() -> None:
    d = np.random.default_rng(3).normal(0.35, 1, 30)
    r = stats.sign_flip_p(d, alternative="greater")
    assert r.exact
    assert r.draws is None
    # full enumeration, no sorting or search: every one of the 2^30 signed sums, in 1024 blocks of 2^20
    tail_sums = (1 - 2 * ((np.arange(2**20)[:, None] >> np.arange(20)) & 1)) @ d[10:]
    head_sums = (1 - 2 * ((np.arange(2**10)[:, None] >> np.arange(10)) & 1)) @ d[:10]
    cut = d.sum() - 1e-12 * max(1.0, float(np.abs(d).sum()))
    hits = sum(int(np.count_nonzero(tail_sums >= cut - s)) for s in head_sums)
    assert r.p == hits / 2**30
    assert stats.sign_flip_p(np.random.default_rng(4).normal(0, 1, 40)).exact
    assert stats.sign_flip_p(np.linspace(0.1, 3, 30), alternative="greater").p == 2**-30  # no floor at 1e-5


def test_non_finite_input_is_refused() -> None:
    x = np.array([0.1, np.nan, 0.3])
    for call in (
        lambda: stats.sign_flip_p(x),
        lambda: stats.wilcoxon_test(x),
        lambda: stats.sign_test_p(x, 0.0),
        lambda: stats.holm([0.01, float("nan"), 0.03]),
        lambda: stats.benjamini_hochberg([0.01, float("inf")]),
        lambda: stats.iqm(np.array([0.1, np.nan, 0.3, 0.4])),
        lambda: stats.one_sided_t(x, 0.0),
        lambda: stats.two_sided_t(np.array([1.0, np.inf]), 0.0),
        lambda: stats.tost(x, -1, 1),
    ):
        with pytest.raises(ValueError, match="refused"):
            call()


def test_tost_normal_plan_for_a_true_difference_of_zero() -> None:
    # z(0.95) + z(0.90) = 2.926; (2.926 * 0.1 / 0.05)^2 = 34.2 -> 35 (not 25, which has power 0.57)
    assert stats.n_normal_tost(0.1, 0.05) == 35
    assert stats.tost_power(25, 0.1, 0.05) == pytest.approx(0.57, abs=0.01)
    assert stats.n_normal_tost(0.1, 0.05, true_diff=0.01) == math.ceil(((1.6449 + 0.8416) * 0.1 / 0.04) ** 2)


def test_tost_matches_statsmodels() -> None:
    x = np.array([1.0, 2, 3, 4, 5.5, 2.2])
    y = np.array([1.2, 1.5, 3.3, 4.1, 5.0, 2.0])
    p, lower, upper = ttost_paired(x, y, -1, 1)
    ours = stats.tost(x - y, -1, 1)
    assert ours.p == pytest.approx(p)
    assert ours.p_lower == pytest.approx(lower[1])
    assert ours.p_upper == pytest.approx(upper[1])


def test_one_sided_t_matches_scipy() -> None:
    x = np.array([0.8, 0.75, 0.9, 0.7, 0.85])
    r = stats.one_sided_t(x, 0.7)
    assert r.p == pytest.approx(sps.ttest_1samp(x, 0.7, alternative="greater").pvalue)
    assert r.lower == pytest.approx(x.mean() - sps.t.ppf(0.95, 4) * x.std(ddof=1) / math.sqrt(5))


def test_zero_variance_has_no_t_statistic() -> None:
    r = stats.one_sided_t(np.ones(3), 0.7)
    assert r.degenerate
    assert math.isnan(r.p)
    assert math.isnan(r.t)
    nearly = np.array([0.7, 0.7 + 1e-16, 0.7 - 1e-16, 0.7])  # equal up to rounding (gave p = 2.6e-30)
    assert stats.one_sided_t(nearly + 0.2, 0.7).degenerate
    assert not stats.one_sided_t(np.array([0.9, 0.91, 0.92]), 0.7).degenerate
    assert stats.two_sided_t(np.ones(4), 0.0).degenerate
    assert stats.tost(np.zeros(4), -1, 1).degenerate
    assert stats.wilcoxon_test(np.zeros(5)) is None


def test_iqm_convention() -> None:
    assert stats.iqm(np.arange(8.0)) == pytest.approx(np.mean([2, 3, 4, 5]))
    assert stats.iqm(np.arange(10.0)) == pytest.approx(np.mean([2, 3, 4, 5, 6, 7]))  # floor(10/4) = 2 each end
    assert stats.iqm(np.array([5.0])) == 5.0


def test_performance_profile() -> None:
    assert stats.performance_profile(np.array([0.1, 0.5, 0.9]), np.array([0.0, 0.5, 1.0])).tolist() == [1.0, 1 / 3, 0.0]


def test_power_normal_and_exact() -> None:
    # the chapter's normal plan: ((1.960 + 0.842) sigma / delta)^2
    assert stats.n_normal(1.0, 0.5) == math.ceil(((1.959964 + 0.841621) * 2) ** 2)
    n = stats.n_exact_t(1.0, 0.5)
    expected = TTestPower().solve_power(effect_size=0.5, alpha=0.05, power=0.8)
    assert n == math.ceil(expected)
    assert stats.power_t(n, 1.0, 0.5) >= 0.8 > stats.power_t(n - 1, 1.0, 0.5)


def test_tost_power_against_simulation() -> None:
    rng = np.random.default_rng(7)
    n, sigma, margin = 12, 1.0, 0.9
    sims = rng.normal(0.1, sigma, size=(20_000, n))
    crit = sps.t.ppf(0.95, n - 1)
    mean, se = sims.mean(1), sims.std(1, ddof=1) / math.sqrt(n)
    simulated = np.mean((mean - crit * se > -margin) & (mean + crit * se < margin))
    assert stats.tost_power(n, sigma, margin, 0.1) == pytest.approx(simulated, abs=0.01)


def _sign_p(x: np.ndarray, threshold: float, direction: int) -> float:
    p = stats.sign_test_p(x, threshold, direction)
    assert p is not None  # continuous draws never tie the threshold
    return p


def test_sign_test_power_against_simulation_of_the_gatekeepers_test() -> None:
    rng = np.random.default_rng(11)
    n, sigma, delta = 15, 1.0, 0.6
    sims = rng.normal(delta, sigma, size=(4_000, n))
    one = np.mean([_sign_p(x, 0.0, 1) <= 0.05 for x in sims])
    assert stats.sign_test_power(n, sigma, delta) == pytest.approx(one, abs=0.025)
    two = np.mean([2 * min(_sign_p(x, 0.0, 1), _sign_p(x, 0.0, -1)) <= 0.05 for x in sims])
    assert stats.sign_test_power(n, sigma, delta, sides=2) == pytest.approx(two, abs=0.025)
    # equivalence by two one-sided sign tests, the counts below and above the band being dependent
    m, t = 1.0, 0.3
    sims = rng.normal(t, sigma, size=(4_000, 12))
    both = np.mean([max(_sign_p(x, -m, 1), _sign_p(x, m, -1)) <= 0.05 for x in sims])
    assert stats.sign_tost_power(12, sigma, m, t) == pytest.approx(both, abs=0.025)


def test_sign_test_needs_about_pi_over_two_times_the_t_tests_replicates_under_normality() -> None:
    n_sign, n_t = stats.n_sign_test(1.0, 0.3), stats.n_exact_t(1.0, 0.3, sides=1)
    assert 1.4 < n_sign / n_t < 1.75  # asymptotic relative efficiency 2 / pi
    assert stats.sign_test_power(n_sign, 1.0, 0.3) >= 0.8 > stats.sign_test_power(n_sign - 1, 1.0, 0.3)
    assert abs(stats.n_sign_noether(1.0, 0.3) - n_sign) <= 0.1 * n_sign
    assert stats.sign_test_power(4, 1.0, 5.0) == 0.0  # four replicates cannot reach p <= 0.05 (1/16)


def test_declared_aggregates_follow_the_metric_direction() -> None:
    from cltoolkit.stats import aggregate

    x = np.array([0.1, 0.5, 0.2, 0.9, 0.4, 0.3, 0.8, 0.6])
    assert aggregate(x, "mean") == pytest.approx(x.mean())
    assert aggregate(x, "median") == pytest.approx(np.median(x))
    assert aggregate(x, "iqm") == pytest.approx(np.mean(np.sort(x)[2:6]))
    assert aggregate(x, "worst-case") == 0.1
    assert aggregate(x, "worst-case", higher_is_better=False) == 0.9
    assert aggregate(x, "cvar", tail_fraction=0.25) == pytest.approx(0.15)  # the worst 2 of 8
    assert aggregate(x, "cvar", tail_fraction=0.25, higher_is_better=False) == pytest.approx(0.85)
    with pytest.raises(ValueError, match="unknown aggregate"):
        aggregate(x, "max")


@pytest.mark.parametrize("n", [1, 2, 5, 9, 13, 20, 50, 51, 120])
@pytest.mark.parametrize("kind", ["continuous", "ties", "zeros"])
def test_signed_rank_matches_scipy(n: int, kind: str) -> None:
    # our Wilcoxon avoids importing scipy.stats on the report path; it must agree with it case by case
    rng = np.random.default_rng(n)
    for _ in range(5):
        x = rng.normal(0.2, 1.0, size=n)
        if kind == "ties":
            x = np.round(x * 2) / 2
        elif kind == "zeros":
            x[: max(1, n // 5)] = 0.0
        ours = stats.wilcoxon_test(x)
        if np.all(x == 0):
            assert ours is None
            continue
        assert ours is not None
        if kind == "continuous" or n <= 13:
            assert ours.method != "normal approximation" or n > 50
        elif ours.method == "exact conditional (ties or zeros)":  # scipy approximates here; ours is exact
            continue
        ref = sps.wilcoxon(x, zero_method="wilcox", alternative="two-sided").pvalue
        assert ours.p == pytest.approx(float(ref), rel=1e-9, abs=1e-12), (kind, n, x)


def test_t_functions_match_scipy() -> None:
    from cltoolkit.stats._dist import t_ppf, t_sf

    for df in (1, 3, 11, 200):
        for q in (0.9, 0.95, 0.975, 0.999):
            assert t_ppf(q, df) == pytest.approx(sps.t.ppf(q, df), rel=1e-10)
        for x in (-2.0, 0.0, 0.7, 3.1):
            assert t_sf(x, df) == pytest.approx(sps.t.sf(x, df), rel=1e-10)


def test_sign_test_p_is_exact_and_stays_finite_when_replicates_tie() -> None:
    assert stats.sign_test_p(np.array([1.0, 1.0, 1.0]), 0.7) == 0.125  # identical replicates: the t test degenerates
    assert stats.sign_test_p(np.array([0.7, 0.8]), 0.7) == 0.5  # a tie with the threshold is dropped
    assert stats.sign_test_p(np.array([0.05, 0.06, 0.2]), 0.1, -1) == 0.5  # "at most" direction: 2 of 3 below
    assert stats.sign_test_p(np.array([0.7, 0.7]), 0.7) is None
    x = np.random.default_rng(3).normal(0.3, 1, size=15)
    ref = sps.binomtest(int((x > 0).sum()), 15, 0.5, alternative="greater").pvalue
    assert stats.sign_test_p(x, 0.0) == pytest.approx(ref)
