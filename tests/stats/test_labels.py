"""Every statistic labelled as it was computed (#31): exact Spearman and Wilcoxon p-values with their method,
thresholds that are not numbers refused, ties and zero spread judged against rounding, not against magnitude,
order-statistic bounds with their exact coverage, and a Bonferroni bound that disagrees with Holm's decision said
in words."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from cltoolkit import stats
from cltoolkit.gatekeeper.gates import Hypothesis, decide_gates
from cltoolkit.report.format import interval_text, percent
from tests.toy_suite import ToyProtocol, toy_protocol


def _brute_spearman_p(x: list[float], y: list[float]) -> float:
    rho = float(sps.spearmanr(x, y).statistic)
    hits = [abs(sps.spearmanr(x, list(p)).statistic) >= abs(rho) - 1e-12 for p in itertools.permutations(y)]
    return float(sum(hits)) / len(hits)


def test_spearman_p_is_exact_over_every_order_of_the_cells() -> None:
    pytest.importorskip("torch")
    from cltoolkit.suites.wmf.analysis import _spearman

    three = _spearman([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
    assert three["rho"] == pytest.approx(1.0)
    assert three["p"] == pytest.approx(1 / 3)  # scipy's t approximation says 0 here
    assert three["pMethod"] == "permutation (exact, all 6 orders, two-sided)"
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=6).tolist(), rng.normal(size=6).tolist()
    six = _spearman(x, y)
    assert six["p"] == pytest.approx(_brute_spearman_p(x, y), abs=1e-12)


def _brute_signed_rank_p(d: np.ndarray, alternative: str) -> float:
    ranks = sps.rankdata(np.abs(d))
    observed = float((np.sign(d) * ranks).sum())
    sums = [float((np.array(s) * ranks).sum()) for s in itertools.product((-1, 1), repeat=d.size)]
    if alternative == "greater":
        return sum(s >= observed - 1e-9 for s in sums) / len(sums)
    return sum(abs(s) >= abs(observed) - 1e-9 for s in sums) / len(sums)


def test_wilcoxon_says_how_it_was_computed() -> None:
    plain = np.array([0.3, -0.1, 0.7, 1.1, 0.45, 0.9, -0.25, 0.6])
    res = stats.wilcoxon_test(plain, 0.0, "greater")
    assert res is not None
    assert res.method == "exact"
    assert res.p == pytest.approx(float(sps.wilcoxon(plain, alternative="greater", method="exact").pvalue))
    tied = np.array([0.5, 0.5, 0.5, -0.5, 1.0, 1.0, 2.0, 0.0, 2.0, 3.0])  # ties and a zero
    res = stats.wilcoxon_test(tied, 0.0, "greater")
    assert res is not None
    assert res.method == "exact conditional (ties or zeros)"
    assert res.p == pytest.approx(_brute_signed_rank_p(tied[tied != 0], "greater"), abs=1e-12)
    big = np.random.default_rng(0).normal(0.2, 1.0, 60)
    res = stats.wilcoxon_test(big, 0.0)
    assert res is not None
    assert res.method == "normal approximation"
    assert stats.wilcoxon_test(np.zeros(5)) is None


@pytest.mark.parametrize(
    "call",
    [
        lambda x: stats.sign_flip_p(x, math.nan),
        lambda x: stats.one_sided_t(x, math.nan),
        lambda x: stats.two_sided_t(x, math.inf),
        lambda x: stats.tost(x, math.nan, 1.0),
        lambda x: stats.tost(x, -1.0, math.nan),
        lambda x: stats.sign_test_p(x, math.nan),
        lambda x: stats.wilcoxon_test(x, math.nan),
    ],
)
def test_a_threshold_that_is_not_a_number_is_refused(call: Any) -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        call(np.array([0.1, 0.2, 0.3, 0.4]))


def test_real_differences_far_below_the_largest_are_not_ties() -> None:
    d = np.array([1e6] + [1e-7 * (i + 1) for i in range(9)])  # every one above 0: the most extreme of 2^10 flips
    assert stats.sign_flip_p(d, 0.0, alternative="greater").p == pytest.approx(1 / 1024)
    assert stats.sign_flip_p(np.array([1.0, -1.0, 1.0, -1.0]), 0.0).p == 1.0  # exact ties stay ties


def test_zero_spread_means_equal_up_to_rounding_not_small_beside_the_values() -> None:
    rng = np.random.default_rng(0)
    assert not stats.degenerate(1e8 + rng.normal(1e-3, 1e-3, 10))
    assert stats.degenerate(np.full(6, 0.7))
    assert stats.degenerate(np.array([0.1 + 0.2, 0.3, 0.3, 0.1 + 0.2]))  # 0.30000000000000004 vs 0.3


def test_order_statistic_bounds_state_their_exact_coverage() -> None:
    assert stats.median_bound_level(9, 0.05) == pytest.approx(1 - 10 / 512)  # the 2nd smallest of 9
    assert stats.median_bound_level(3, 0.05) is None
    assert percent(0.99286) == "99.29%"
    assert percent(0.95) == "95%"

    doc = toy_protocol()
    doc["analysis"]["aggregate"] = "median"
    doc["gates"] = [
        {"id": "lb", "metric": "toy.score-v1", "method": "cand", "unit": "score", "label": "lb", "test": "lower-bound"}
        | {"comparator": ">=", "threshold": 0.0, "confirmatory": False}
    ]
    protocol = ToyProtocol.model_validate(doc)
    x = np.array([0.3, 0.1, 0.5, 0.2, 0.4, 0.6, 0.25, 0.35, 0.45])
    h = decide_gates([protocol.gates[0]], [Hypothesis(protocol.gates[0], "aggregate", x)], protocol.analysis)[0]
    hyp = h.hypotheses[0]
    assert hyp.confidenceLevel == pytest.approx(0.95)
    assert hyp.confidenceLevelExact == pytest.approx(1 - 10 / 512)
    assert hyp.signTestP == hyp.pValue == pytest.approx(1 / 512)
    assert "95% nominal, 98.047% exact" in interval_text(hyp)


def test_a_bonferroni_bound_that_disagrees_with_holm_is_said() -> None:
    """Two confirmatory gates, one an equivalence test: the lower-bound gate's bound falls back to Bonferroni at
    alpha / 2 while Holm's step-down passes it at its own p (about 0.04, after the equivalence p of about 0)."""
    doc = toy_protocol()
    base = {"metric": "toy.score-v1", "method": "cand", "unit": "score", "confirmatory": True}
    doc["gates"] = [
        {**base, "id": "eq", "label": "eq", "reference": "base", "test": "equivalence-tost", "comparator": "within"}
        | {"margin": 1.0},
        {**base, "id": "lb", "label": "lb", "test": "lower-bound", "comparator": ">=", "threshold": 0.0},
    ]
    protocol = ToyProtocol.model_validate(doc)
    eq = np.array([0.01, -0.02, 0.0, 0.015, -0.01, 0.005])
    lb = np.array([0.5, -0.05, 0.3, -0.1, 0.4, 0.2])
    one = stats.one_sided_t(lb, 0.0)
    assert 0.025 < one.p < 0.05  # passes Holm's second step (alpha), not Bonferroni's alpha / 2
    gates = decide_gates(
        list(protocol.gates),
        [Hypothesis(g, "aggregate", v) for g, v in zip(protocol.gates, (eq, lb), strict=True)],
        protocol.analysis,
    )
    hyp = gates[1].hypotheses[0]
    assert hyp.decision == "pass"
    assert hyp.intervalKind == "bonferroni"
    assert hyp.interval is not None
    assert hyp.interval[0] is not None
    assert hyp.interval[0] < 0.0
    assert "the Bonferroni bound stays below the threshold although Holm's step-down decides pass" in hyp.reason
