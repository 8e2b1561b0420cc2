"""Gates to hypotheses, tested as declared, corrected over the confirmatory family."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cltoolkit import stats
from cltoolkit.protocol.models import AnalysisPlan, Gate
from cltoolkit.protocol.results import GateResult, HypothesisResult

__all__ = ["Hypothesis", "decide_gates"]


@dataclass
class Hypothesis:
    """One hypothesis: `values` are per-replicate numbers (one-sample) or paired differences."""

    gate: Gate
    scope: str
    values: np.ndarray | None
    reason: str = ""
    # filled by the test
    estimate: float | None = None
    se: float | None = None
    df: int | None = None
    delta: float | None = None
    sign: float = 1.0
    p: float | None = None
    p_adj: float | None = None
    interval: tuple[float | None, float | None] | None = None
    perm_p: float | None = None
    wilcoxon: float | None = None
    sign_p: float | None = None
    decision: str = "not-evaluable"
    keys: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def evaluable(self) -> bool:
        return self.values is not None and not self.reason


def _values(h: Hypothesis) -> np.ndarray:
    """An evaluable hypothesis's per-replicate values."""
    assert h.values is not None
    return h.values


def _signed(h: Hypothesis) -> tuple[np.ndarray, float]:
    """A one-sided hypothesis's values and margin, turned so that the alternative is `greater`."""
    assert h.delta is not None
    return h.sign * _values(h), h.sign * h.delta


def _prepare(h: Hypothesis, plan: AnalysisPlan, rng: np.random.Generator) -> None:
    g = h.gate
    x = _values(h)
    if g.test == "lower-bound":
        h.sign, h.delta = 1.0, float(g.threshold)  # type: ignore[arg-type]
    elif g.test == "upper-bound":
        h.sign, h.delta = -1.0, float(g.threshold)  # type: ignore[arg-type]
    elif g.test in ("superiority", "non-inferiority"):
        # higher is better: D > +margin (superiority) / D > -margin (non-inferiority); lower is better mirrors it
        h.sign = -1.0 if g.lower_is_better else 1.0
        margin = float(g.margin) if g.test == "superiority" else -float(g.margin)  # type: ignore[arg-type]
        h.delta = h.sign * margin
    else:
        h.delta = 0.0
    if g.test in ("lower-bound", "upper-bound"):
        h.sign_p = stats.sign_test_p(x, h.delta, int(h.sign))
    if g.reference is not None:
        h.perm_p, _ = stats.sign_flip_p(
            x, h.delta, exact_up_to=plan.permutation.exactUpTo, draws=plan.permutation.monteCarloDraws, rng=rng
        )
        h.wilcoxon = stats.wilcoxon_p(x, h.delta)
    if g.test == "equivalence-tost":
        margin = float(g.margin)  # type: ignore[arg-type]
        t = stats.tost(x, -margin, margin, plan.alpha)
        h.estimate, h.se, h.df, h.p = t.estimate, t.se, t.df, t.p
        h.interval = t.interval
    elif g.test == "report-only":
        t2 = stats.two_sided_t(x, 0.0, plan.alpha)
        h.estimate, h.se, h.df, h.p = t2.estimate, t2.se, t2.df, t2.p
        h.interval = (t2.low, t2.high)
    else:
        one = stats.one_sided_t(h.sign * x, h.sign * h.delta, plan.alpha)
        h.estimate, h.se, h.df, h.p = float(np.mean(x)), one.se, one.df, one.p


def decide_gates(gates: list[Gate], hypotheses: list[Hypothesis], plan: AnalysisPlan) -> list[GateResult]:
    """Test every evaluable hypothesis, adjust over the confirmatory family, and decide each gate."""
    rng = np.random.default_rng(plan.permutation.seed)
    for h in hypotheses:
        if h.evaluable:
            _prepare(h, plan, rng)
    family = [h for h in hypotheses if h.evaluable and h.gate.confirmatory]
    one_sided = [h for h in family if h.gate.test != "equivalence-tost"]
    alpha = plan.alpha
    if family:
        p = [h.p for h in family]
        if plan.multiplicity == "holm":
            adj = stats.holm(p)  # type: ignore[arg-type]
        elif plan.multiplicity == "bh":
            adj = stats.benjamini_hochberg(p)  # type: ignore[arg-type]
        else:
            adj = np.asarray(p, dtype=float)
        for h, a in zip(family, adj, strict=True):
            h.p_adj = float(a)
            h.decision = "pass" if a <= alpha else "fail"
    if one_sided and plan.multiplicity == "holm" and len(one_sided) == len(family):
        bounds = stats.holm_simultaneous_lower_bounds(
            [h.sign * h.estimate for h in one_sided],  # type: ignore[operator]
            [h.se for h in one_sided],  # type: ignore[misc]
            [h.sign * h.delta for h in one_sided],  # type: ignore[operator]
            [h.df for h in one_sided],  # type: ignore[misc]
            alpha,
        )
        for h, low in zip(one_sided, bounds.lower, strict=True):
            h.interval = (float(low), None) if h.sign > 0 else (None, float(-low))
    else:  # BH, no correction, or equivalence in the family: Bonferroni-style marginal bounds, stated as such
        m = max(1, len(family)) if plan.multiplicity == "holm" else 1
        for h in one_sided:
            b = stats.one_sided_t(*_signed(h), alpha / m)
            h.interval = (b.lower, None) if h.sign > 0 else (None, -b.lower)
    for h in hypotheses:  # exploratory gates: decided at the marginal level, outside the corrected family
        if h.evaluable and not h.gate.confirmatory and h.gate.test not in ("report-only", "equivalence-tost"):
            b = stats.one_sided_t(*_signed(h), alpha)
            h.interval = (b.lower, None) if h.sign > 0 else (None, -b.lower)
            h.decision = "pass" if h.p is not None and h.p <= alpha else "fail"
        elif h.evaluable and not h.gate.confirmatory and h.gate.test == "equivalence-tost":
            h.decision = "pass" if h.p is not None and h.p <= alpha else "fail"
    for h in hypotheses:
        if h.evaluable and h.gate.test == "report-only":
            h.decision = "reported"
    return [_gate_result(g, [h for h in hypotheses if h.gate.id == g.id]) for g in gates]


def _wording(g: Gate, h: HypothesisResult | None) -> str:
    if h is None or h.decision == "not-evaluable":
        return "not evaluable: " + (h.reason if h else "no hypotheses")
    if g.test == "report-only":
        low, high = h.interval or (None, None)
        if low is not None and low > 0:
            return f"{g.method} above {g.reference}: the two-sided interval excludes 0 (p = {h.pValue:.3g})"
        if high is not None and high < 0:
            return f"{g.method} below {g.reference}: the two-sided interval excludes 0 (p = {h.pValue:.3g})"
        return f"no evidence of a difference between {g.method} and {g.reference}; do not claim an improvement"
    if not g.confirmatory:
        return (
            "exploratory, unadjusted: supported at the marginal level"
            if h.decision == "pass"
            else "exploratory, unadjusted: not supported (the test did not reject)"
        )
    return "supported at the declared level" if h.decision == "pass" else "not supported (the test did not reject)"


def _gate_result(g: Gate, hyps: list[Hypothesis]) -> GateResult:
    results = [
        HypothesisResult(
            scope=h.scope,
            n=0 if h.values is None else int(h.values.size),
            estimate=h.estimate,
            interval=h.interval,
            pValue=h.p,
            pAdjusted=h.p_adj,
            permutationP=h.perm_p,
            signTestP=h.sign_p,
            wilcoxonP=h.wilcoxon,
            decision=h.decision,  # type: ignore[arg-type]
            reason=h.reason,
            replicates=dict(zip(h.keys, map(float, h.values), strict=True)) if h.values is not None and h.keys else {},
        )
        for h in hyps
    ]
    decisions = {r.decision for r in results}
    if not results or "not-evaluable" in decisions:
        decision = "not-evaluable"
    elif g.test == "report-only":
        decision = "reported"
    else:
        decision = "pass" if decisions == {"pass"} else "fail"
    # the deciding hypothesis: the worst one (largest adjusted p)
    decider = max(results, key=lambda r: (r.decision == "not-evaluable", r.pAdjusted or r.pValue or 0.0), default=None)
    return GateResult(
        id=g.id,
        label=g.label,
        test=g.test,
        estimate=decider.estimate if decider else None,
        interval=decider.interval if decider else None,
        pValue=max((r.pValue for r in results if r.pValue is not None), default=None),
        pAdjusted=max((r.pAdjusted for r in results if r.pAdjusted is not None), default=None),
        decision=decision,  # type: ignore[arg-type]
        n=min((r.n for r in results), default=0),
        wording=_wording(g, decider),
        hypotheses=results,
    )
