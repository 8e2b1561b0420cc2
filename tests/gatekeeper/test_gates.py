"""Gate decisions from replicate values: the permutation p tests the gate's own hypothesis, a gate whose t
statistic is undefined is decided by its exact test, and intervals say which kind they are."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cltoolkit.gatekeeper.gates import EXACT_BY, Hypothesis, decide_gates
from cltoolkit.protocol.results import GateResult
from tests.toy_suite import ToyProtocol, toy_protocol


def _decide(gate: dict[str, Any], values: list[float]) -> GateResult:
    doc = toy_protocol()
    base = {"metric": "toy.score-v1", "method": "cand", "unit": "score", "label": gate["id"]}
    doc["gates"] = [{**base, **gate}]
    protocol = ToyProtocol.model_validate(doc)
    g = protocol.gates[0]
    h = Hypothesis(g, "aggregate", np.asarray(values, dtype=float))
    return decide_gates([g], [h], protocol.analysis)[0]


D = [0.12, 0.18, 0.09, 0.21, 0.15, 0.11]  # paired differences, all above +0.05
REPORT_ONLY = {"id": "ro", "reference": "base", "test": "report-only", "comparator": ">=", "margin": 0.0}
EQUIVALENCE = {"id": "eq", "reference": "base", "test": "equivalence-tost", "comparator": "within", "margin": 0.1}


@pytest.mark.parametrize(
    ("gate", "values", "expected"),
    [
        # superiority (margin 0.05): one-sided, greater, about +0.05: all 6 above it -> 1 / 64
        ({"id": "sup", "reference": "base", "test": "superiority", "comparator": ">=", "margin": 0.05}, D, 1 / 64),
        # non-inferiority at margin 0.3, lower is better: D < +0.3 claimed: one-sided `less` about +0.3 -> 1 / 64
        ({"id": "ni", "reference": "base", "test": "non-inferiority", "comparator": "<=", "margin": 0.3}, D, 1 / 64),
        # lower bound 0.05: greater about 0.05
        ({"id": "lb", "test": "lower-bound", "comparator": ">=", "threshold": 0.05}, D, 1 / 64),
        # upper bound 0.05 on values all above it: `less` about 0.05 -> every flip sum is <= the observed? no: p = 1
        ({"id": "ub", "test": "upper-bound", "comparator": "<=", "threshold": 0.05}, D, 1.0),
        # report-only: two-sided about 0 -> 2 / 64
        ({**REPORT_ONLY, "confirmatory": False}, D, 2 / 64),
    ],
)
def test_the_permutation_p_tests_the_gates_own_hypothesis(
    gate: dict[str, Any], values: list[float], expected: float
) -> None:
    result = _decide(gate, values)
    h = result.hypotheses[0]
    assert h.permutationP == pytest.approx(expected)
    assert h.permutationMethod == "exact"


def test_a_failed_one_sided_gate_has_a_large_permutation_p() -> None:
    # superiority at margin 0.3 with every difference below it: the claim is not supported by either test
    result = _decide({"id": "sup", "reference": "base", "test": "superiority", "comparator": ">=", "margin": 0.3}, D)
    h = result.hypotheses[0]
    assert result.decision == "fail"
    assert h.pValue is not None
    assert h.pValue > 0.9
    assert h.permutationP == 1.0


def test_equivalence_takes_the_larger_one_sided_permutation_p() -> None:
    values = [0.01, -0.02, 0.015, -0.005, 0.02, 0.0]
    result = _decide(EQUIVALENCE, values)
    h = result.hypotheses[0]
    assert h.permutationP == pytest.approx(1 / 64)
    assert h.intervalKind == "marginal"
    assert h.confidenceLevel == 0.9


def test_zero_variance_is_decided_by_the_exact_test() -> None:
    result = _decide({"id": "lb", "test": "lower-bound", "comparator": ">=", "threshold": 0.7}, [1.0, 1.0, 1.0])
    h = result.hypotheses[0]
    assert result.decision == "fail"  # was a pass with p = 0 from an undefined t statistic
    assert h.pValue == 0.125
    assert h.decidedBy == EXACT_BY
    assert h.interval is None
    assert EXACT_BY in h.reason
    ok = _decide({"id": "lb", "test": "lower-bound", "comparator": ">=", "threshold": 0.7}, [1.0] * 6)
    assert ok.decision == "pass"
    assert ok.hypotheses[0].pValue == 1 / 64


def test_intervals_say_their_kind_and_level() -> None:
    one = _decide({"id": "sup", "reference": "base", "test": "superiority", "comparator": ">=", "margin": 0.05}, D)
    assert one.hypotheses[0].intervalKind == "holm-simultaneous"
    assert one.hypotheses[0].confidenceLevel == 0.95
    ro = _decide({**REPORT_ONLY, "confirmatory": False}, D)
    assert ro.hypotheses[0].intervalKind == "marginal" and ro.hypotheses[0].interval[1] is not None  # type: ignore[index]


def _decide_median(gate: dict[str, Any], values: list[float]) -> GateResult:
    doc = toy_protocol()
    base = {"metric": "toy.score-v1", "method": "cand", "unit": "score", "label": gate["id"]}
    doc["gates"] = [{**base, **gate}]
    doc["analysis"] = {**doc.get("analysis", {}), "aggregate": "median"}
    protocol = ToyProtocol.model_validate(doc)
    g = protocol.gates[0]
    return decide_gates([g], [Hypothesis(g, "aggregate", np.asarray(values, dtype=float))], protocol.analysis)[0]


SKEWED = [0.2, 0.3, 0.1, 0.25, 0.15, 0.2, 0.3, -40.0, -35.0]  # median 0.2; two huge negative outliers pull the mean


def test_a_median_aggregate_is_estimated_and_decided_by_the_median() -> None:
    """With `aggregate: median` the estimate is the median and the exact sign test decides: 7 of 9 above 0 gives
    P(Bin(9, 1/2) >= 7) = 46/512; the mean (about -8) would say the opposite; the bound is an order statistic."""
    gate = {"id": "lb", "test": "lower-bound", "comparator": ">=", "threshold": 0.0, "confirmatory": False}
    result = _decide_median(gate, SKEWED)
    h = result.hypotheses[0]
    assert h.estimate == pytest.approx(0.2)
    assert h.decidedBy is not None
    assert h.decidedBy.startswith("sign test")
    assert h.pValue == pytest.approx(46 / 512)
    assert h.interval is not None
    assert h.interval[0] in SKEWED
    assert h.interval[1] is None
    mean_result = _decide(gate, SKEWED).hypotheses[0]
    assert mean_result.estimate is not None
    assert mean_result.estimate < 0
    assert mean_result.estimate == pytest.approx(float(np.mean(SKEWED)))


def test_a_median_report_only_gate_has_a_two_sided_order_statistic_interval() -> None:
    result = _decide_median({**REPORT_ONLY, "confirmatory": False}, D)
    h = result.hypotheses[0]
    assert h.estimate == pytest.approx(float(np.median(D)))
    assert h.pValue == pytest.approx(2 / 64)  # all 6 above 0: two-sided sign test
    assert h.interval is not None
    low, high = h.interval
    assert low == min(D) and high == max(D)  # n = 6 at 95%: the extremes (P(Bin <= 0) = 1/64 <= 0.025)
