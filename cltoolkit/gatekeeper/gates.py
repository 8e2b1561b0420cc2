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
    interval_kind: str | None = None
    level: float | None = None
    decided_by: str | None = None
    degenerate: bool = False
    perm: stats.PermutationP | None = None
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


EXACT_BY = "exact sign-flip (the t statistic is undefined: the replicates have no spread)"


def _prepare(h: Hypothesis, plan: AnalysisPlan, rng: np.random.Generator) -> None:
    """Each test of one hypothesis. The permutation p and the Wilcoxon p test the gate's own hypothesis; where the
    t statistic is undefined (zero spread, or zero up to rounding) the exact sign-flip test decides instead."""
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
    exact_up_to = max(plan.permutation.exactUpTo, stats.EXACT_UP_TO)

    def perm(alternative: str, null: float) -> stats.PermutationP:
        draws = plan.permutation.monteCarloDraws
        return stats.sign_flip_p(x, null, alternative=alternative, exact_up_to=exact_up_to, draws=draws, rng=rng)

    if g.test == "equivalence-tost":
        margin = float(g.margin)  # type: ignore[arg-type]
        h.perm = max(perm("greater", -margin), perm("less", margin), key=lambda r: r.p)
        if g.reference is not None:
            low, high = stats.wilcoxon_p(x, -margin, "greater"), stats.wilcoxon_p(x, margin, "less")
            h.wilcoxon = None if low is None or high is None else max(low, high)
        t = stats.tost(x, -margin, margin, plan.alpha)
        h.estimate, h.se, h.df, h.degenerate = t.estimate, t.se, t.df, t.degenerate
        h.p, h.decided_by = t.p, "tost"
        h.interval, h.interval_kind, h.level = t.interval, "marginal", 1 - 2 * plan.alpha
    elif g.test == "report-only":
        h.perm = perm("two-sided", 0.0)
        h.wilcoxon = stats.wilcoxon_p(x, 0.0) if g.reference is not None else None
        t2 = stats.two_sided_t(x, 0.0, plan.alpha)
        h.estimate, h.se, h.df, h.degenerate = t2.estimate, t2.se, t2.df, t2.degenerate
        h.p, h.decided_by = t2.p, "t-test"
        h.interval, h.interval_kind, h.level = (t2.low, t2.high), "marginal", 1 - plan.alpha
    else:
        alternative = "greater" if h.sign > 0 else "less"
        h.perm = perm(alternative, h.delta)
        if g.reference is not None:
            h.wilcoxon = stats.wilcoxon_p(x, h.delta, alternative)
        else:
            h.sign_p = stats.sign_test_p(x, h.delta, int(h.sign))
        one = stats.one_sided_t(h.sign * x, h.sign * h.delta, plan.alpha)
        h.estimate, h.se, h.df, h.degenerate = float(np.mean(x)), one.se, one.df, one.degenerate
        h.p, h.decided_by = one.p, "t-test"
    if h.degenerate:
        h.p, h.decided_by, h.interval, h.interval_kind, h.level = h.perm.p, EXACT_BY, None, None, None
    if plan.aggregate == "median":
        _median(h, plan)


MEDIAN_BY = "sign test (the declared aggregate is the median)"


def _median(h: Hypothesis, plan: AnalysisPlan) -> None:
    """The declared aggregate is the median: the estimate is the replicates' median and the exact sign test decides
    (ties with the null dropped; every replicate tied: p = 1). The t, permutation and Wilcoxon results stay as
    sensitivity analyses; intervals are order statistics (set in `decide_gates`)."""
    g, x = h.gate, _values(h)
    h.estimate, h.se, h.df, h.degenerate, h.decided_by = float(np.median(x)), None, None, False, MEDIAN_BY
    h.interval, h.interval_kind, h.level = None, None, None

    def sign(threshold: float, direction: int) -> float:
        p = stats.sign_test_p(x, threshold, direction)
        return 1.0 if p is None else p

    if g.test == "equivalence-tost":
        margin = float(g.margin)  # type: ignore[arg-type]
        h.p = max(sign(-margin, 1), sign(margin, -1))
        h.interval, h.interval_kind, h.level = _median_interval(x, 2 * plan.alpha), "marginal", 1 - 2 * plan.alpha
    elif g.test == "report-only":
        h.p = min(1.0, 2 * min(sign(0.0, 1), sign(0.0, -1)))
        h.interval, h.interval_kind, h.level = _median_interval(x, plan.alpha), "marginal", 1 - plan.alpha
    else:
        assert h.delta is not None
        h.p = sign(h.delta, int(h.sign))  # delta is the null on the replicates' own scale


def _median_interval(x: np.ndarray, alpha: float) -> tuple[float | None, float | None]:
    """Two-sided (1 - alpha) order-statistic interval for the median."""
    low = stats.median_lower_bound(x, alpha / 2)
    high = stats.median_lower_bound(-x, alpha / 2)
    return low, None if high is None else -high


def _median_bound(h: Hypothesis, alpha: float) -> tuple[float | None, float | None]:
    """One-sided (1 - alpha) order-statistic bound for the median in the gate's direction."""
    x = _values(h)
    if h.sign > 0:
        return stats.median_lower_bound(x, alpha), None
    high = stats.median_lower_bound(-x, alpha)
    return None, None if high is None else -high


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
    simultaneous = plan.multiplicity == "holm" and len(one_sided) == len(family)
    median = plan.aggregate == "median"
    if median:  # order-statistic bounds: Bonferroni over a Holm family, else marginal
        m = max(1, len(family)) if plan.multiplicity == "holm" else 1
        for h in one_sided:
            h.interval = _median_bound(h, alpha / m)
            h.interval_kind, h.level = ("bonferroni" if m > 1 else "marginal"), 1 - alpha / m
    elif one_sided and simultaneous and not any(h.degenerate for h in one_sided):
        bounds = stats.holm_simultaneous_lower_bounds(
            [h.sign * h.estimate for h in one_sided],  # type: ignore[operator]
            [h.se for h in one_sided],  # type: ignore[misc]
            [h.sign * h.delta for h in one_sided],  # type: ignore[operator]
            [h.df for h in one_sided],  # type: ignore[misc]
            alpha,
        )
        for h, low in zip(one_sided, bounds.lower, strict=True):
            h.interval = (float(low), None) if h.sign > 0 else (None, float(-low))
            h.interval_kind, h.level = "holm-simultaneous", 1 - alpha
    else:  # BH, no correction, equivalence in the family, or an undefined t: Bonferroni bounds, stated as such
        m = max(1, len(family)) if plan.multiplicity == "holm" else 1
        for h in (h for h in one_sided if not h.degenerate):
            b = stats.one_sided_t(*_signed(h), alpha / m)
            h.interval = (b.lower, None) if h.sign > 0 else (None, -b.lower)
            h.interval_kind, h.level = ("bonferroni" if m > 1 else "marginal"), 1 - alpha / m
    for h in hypotheses:  # exploratory gates: decided at the marginal level, outside the corrected family
        if h.evaluable and not h.gate.confirmatory and h.gate.test not in ("report-only", "equivalence-tost"):
            if median:
                h.interval, h.interval_kind, h.level = _median_bound(h, alpha), "marginal", 1 - alpha
            elif not h.degenerate:
                b = stats.one_sided_t(*_signed(h), alpha)
                h.interval = (b.lower, None) if h.sign > 0 else (None, -b.lower)
                h.interval_kind, h.level = "marginal", 1 - alpha
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
            intervalKind=h.interval_kind,  # type: ignore[arg-type]
            confidenceLevel=h.level,
            pValue=h.p,
            pAdjusted=h.p_adj,
            decidedBy=h.decided_by,
            permutationP=h.perm.p if h.perm else None,
            permutationMethod=None if h.perm is None else ("exact" if h.perm.exact else "monte-carlo"),
            permutationDraws=h.perm.draws if h.perm else None,
            permutationSE=h.perm.se if h.perm else None,
            signTestP=h.sign_p,
            wilcoxonP=h.wilcoxon,
            decision=h.decision,  # type: ignore[arg-type]
            reason=h.reason or (EXACT_BY if h.degenerate else ""),
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
