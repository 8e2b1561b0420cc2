"""Gates to hypotheses, tested as declared, corrected over the confirmatory family."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from cltoolkit import stats
from cltoolkit.protocol.models import AnalysisPlan, Gate
from cltoolkit.protocol.results import Decision, GateResult, HypothesisResult

__all__ = [
    "Decided",
    "GateInterval",
    "Hypothesis",
    "Tested",
    "adjusted_p",
    "apply_tests",
    "decide",
    "decide_gates",
    "family_intervals",
]


IntervalKind = Literal["holm-simultaneous", "bonferroni", "marginal"]
Bounds = tuple[float | None, float | None]


@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis of a gate: per-replicate numbers (one-sample) or paired differences, or why it has none."""

    gate: Gate
    scope: str
    values: np.ndarray | None
    reason: str = ""
    keys: tuple[str, ...] = ()
    """The replicate of each value (cell, order, seed), in the order of `values`."""

    @property
    def evaluable(self) -> bool:
        return self.values is not None and not self.reason


@dataclass(frozen=True)
class GateInterval:
    """An interval (or a one-sided bound: the other end None) and which kind it is."""

    bounds: Bounds
    kind: IntervalKind
    level: float
    """Nominal coverage."""
    exact_level: float | None = None
    """Exact coverage where it differs by construction (order statistics of a median)."""


@dataclass(frozen=True)
class Tested:
    """The tests of one evaluable hypothesis, as declared: the deciding p and how it was computed, the estimate,
    the marginal interval where the test gives one (TOST, report-only), and the sensitivity tests."""

    hypothesis: Hypothesis
    sign: float
    """+1 where the alternative is `greater`, -1 where it is `less`."""
    delta: float
    """The null on the replicates' own scale."""
    estimate: float
    se: float | None
    df: int | None
    p: float
    decided_by: str
    degenerate: bool
    interval: GateInterval | None
    perm: stats.PermutationP
    wilcoxon: stats.WilcoxonP | None = None
    sign_p: float | None = None

    @property
    def x(self) -> np.ndarray:
        assert self.hypothesis.values is not None  # a Tested is built from evaluable hypotheses only
        return self.hypothesis.values


@dataclass(frozen=True)
class Decided:
    """One hypothesis at the end: its tests (None when not evaluable), adjusted p, interval and decision."""

    hypothesis: Hypothesis
    tested: Tested | None
    p_adjusted: float | None
    interval: GateInterval | None
    decision: Decision
    note: str = ""
    """Where the bound and the decision come from different procedures and disagree, said in words."""


EXACT_BY = "exact sign-flip (the t statistic is undefined: the replicates have no spread)"
MEDIAN_BY = "sign test (the declared aggregate is the median)"


def _direction(g: Gate) -> tuple[float, float]:
    """(sign, null) of a gate's one-sided claim, higher-is-better: D > +margin (superiority), D > -margin
    (non-inferiority); lower is better mirrors it. Two-sided tests: (1, 0)."""
    if g.test == "lower-bound":
        return 1.0, float(g.threshold)  # type: ignore[arg-type]
    if g.test == "upper-bound":
        return -1.0, float(g.threshold)  # type: ignore[arg-type]
    if g.test in ("superiority", "non-inferiority"):
        sign = -1.0 if g.lower_is_better else 1.0
        margin = float(g.margin) if g.test == "superiority" else -float(g.margin)  # type: ignore[arg-type]
        return sign, sign * margin
    return 1.0, 0.0


def apply_tests(h: Hypothesis, plan: AnalysisPlan, rng: np.random.Generator) -> Tested:
    """Every test of one evaluable hypothesis. The permutation p and the Wilcoxon p test the gate's own
    hypothesis; where the t statistic is undefined (zero spread, or zero up to rounding) the exact sign-flip test
    decides instead; under a declared median aggregate the sign test decides (`_median`)."""
    g = h.gate
    x = h.values
    assert x is not None and h.evaluable
    sign, delta = _direction(g)
    exact_up_to = plan.exact_up_to()

    def perm(alternative: str, null: float) -> stats.PermutationP:
        draws = plan.permutation.monteCarloDraws
        return stats.sign_flip_p(x, null, alternative=alternative, exact_up_to=exact_up_to, draws=draws, rng=rng)

    wilcoxon = sign_p = None
    if g.test == "equivalence-tost":
        margin = float(g.margin)  # type: ignore[arg-type]
        permutation = max(perm("greater", -margin), perm("less", margin), key=lambda r: r.p)
        if g.reference is not None:
            low, high = stats.wilcoxon_test(x, -margin, "greater"), stats.wilcoxon_test(x, margin, "less")
            wilcoxon = None if low is None or high is None else max(low, high, key=lambda w: w.p)
        t = stats.tost(x, -margin, margin, plan.alpha)
        estimate, se, df, degenerate, p, by = t.estimate, t.se, t.df, t.degenerate, t.p, "tost"
        interval: GateInterval | None = GateInterval(t.interval, "marginal", 1 - 2 * plan.alpha)
    elif g.test == "report-only":
        permutation = perm("two-sided", 0.0)
        wilcoxon = stats.wilcoxon_test(x, 0.0) if g.reference is not None else None
        t2 = stats.two_sided_t(x, 0.0, plan.alpha)
        estimate, se, df, degenerate, p, by = t2.estimate, t2.se, t2.df, t2.degenerate, t2.p, "t-test"
        interval = GateInterval((t2.low, t2.high), "marginal", 1 - plan.alpha)
    else:
        alternative = "greater" if sign > 0 else "less"
        permutation = perm(alternative, delta)
        if g.reference is not None:
            wilcoxon = stats.wilcoxon_test(x, delta, alternative)
        else:
            sign_p = stats.sign_test_p(x, delta, int(sign))
        one = stats.one_sided_t(sign * x, sign * delta, plan.alpha)
        estimate, se, df, degenerate, p, by = float(np.mean(x)), one.se, one.df, one.degenerate, one.p, "t-test"
        interval = None
    if degenerate:
        p, by, interval = permutation.p, EXACT_BY, None
    tested = Tested(h, sign, delta, estimate, se, df, p, by, degenerate, interval, permutation, wilcoxon, sign_p)
    return _median(tested, plan) if plan.aggregate == "median" else tested


def _median(t: Tested, plan: AnalysisPlan) -> Tested:
    """The declared aggregate is the median: the estimate is the replicates' median and the exact sign test decides
    (ties with the null dropped; every replicate tied: p = 1). The t, permutation and Wilcoxon results stay as
    sensitivity analyses; intervals are order statistics."""
    g, x = t.hypothesis.gate, t.x

    def sign(threshold: float, direction: int) -> float:
        p = stats.sign_test_p(x, threshold, direction)
        return 1.0 if p is None else p

    interval = None
    n = int(x.size)
    if g.test == "equivalence-tost":
        margin = float(g.margin)  # type: ignore[arg-type]
        p = max(sign(-margin, 1), sign(margin, -1))
        level = 1 - 2 * plan.alpha
        interval = GateInterval(
            _median_interval(x, 2 * plan.alpha), "marginal", level, _two_sided_level(n, 2 * plan.alpha)
        )
    elif g.test == "report-only":
        p = min(1.0, 2 * min(sign(0.0, 1), sign(0.0, -1)))
        interval = GateInterval(
            _median_interval(x, plan.alpha), "marginal", 1 - plan.alpha, _two_sided_level(n, plan.alpha)
        )
    else:
        p = sign(t.delta, int(t.sign))
    return replace(
        t,
        estimate=float(np.median(x)),
        se=None,
        df=None,
        degenerate=False,
        p=p,
        decided_by=MEDIAN_BY,
        interval=interval,
        sign_p=p,
    )


def _two_sided_level(n: int, alpha: float) -> float | None:
    """Exact coverage of `_median_interval` (two order statistics, alpha / 2 on each side)."""
    one = stats.median_bound_level(n, alpha / 2)
    return None if one is None else 1 - 2 * (1 - one)


def _median_interval(x: np.ndarray, alpha: float) -> Bounds:
    """Two-sided (1 - alpha) order-statistic interval for the median."""
    low = stats.median_lower_bound(x, alpha / 2)
    high = stats.median_lower_bound(-x, alpha / 2)
    return low, None if high is None else -high


def _bound(t: Tested, alpha: float, median: bool) -> Bounds | None:
    """One-sided (1 - alpha) bound in the gate's direction: an order statistic of the median, or the t bound of
    the mean (None where the t statistic is undefined)."""
    if median:
        if t.sign > 0:
            return stats.median_lower_bound(t.x, alpha), None
        high = stats.median_lower_bound(-t.x, alpha)
        return None, None if high is None else -high
    if t.degenerate:
        return None
    low = stats.one_sided_t(t.sign * t.x, t.sign * t.delta, alpha).lower
    return (low, None) if t.sign > 0 else (None, -low)


def adjusted_p(family: Sequence[Tested], plan: AnalysisPlan) -> list[float]:
    """The confirmatory family's p-values adjusted as declared (Holm, Benjamini-Hochberg, or none)."""
    p = [t.p for t in family]
    if plan.multiplicity == "holm":
        return [float(a) for a in stats.holm(p)]
    if plan.multiplicity == "bh":
        return [float(a) for a in stats.benjamini_hochberg(p)]
    return [float(a) for a in p]


def family_intervals(one_sided: Sequence[Tested], family_size: int, plan: AnalysisPlan) -> list[GateInterval | None]:
    """Bounds of the confirmatory family's one-sided hypotheses: order statistics under a median aggregate
    (Bonferroni over a Holm family); Holm-simultaneous t bounds where the whole family is one-sided with a defined
    t statistic; otherwise (BH, no correction, equivalence in the family, an undefined t) Bonferroni bounds,
    stated as such. None where no bound exists."""
    alpha, median = plan.alpha, plan.aggregate == "median"
    simultaneous = plan.multiplicity == "holm" and len(one_sided) == family_size
    if not median and one_sided and simultaneous and not any(t.degenerate for t in one_sided):
        bounds = stats.holm_simultaneous_lower_bounds(
            [t.sign * t.estimate for t in one_sided],
            [t.se for t in one_sided],  # type: ignore[misc]  # defined: no member is degenerate
            [t.sign * t.delta for t in one_sided],
            [t.df for t in one_sided],  # type: ignore[misc]
            alpha,
        )
        return [
            GateInterval((float(low), None) if t.sign > 0 else (None, float(-low)), "holm-simultaneous", 1 - alpha)
            for t, low in zip(one_sided, bounds.lower, strict=True)
        ]
    m = max(1, family_size) if plan.multiplicity == "holm" else 1
    kind: IntervalKind = "bonferroni" if m > 1 else "marginal"
    out = []
    for t in one_sided:
        bound = _bound(t, alpha / m, median)
        exact = stats.median_bound_level(t.x.size, alpha / m) if median else None
        out.append(None if bound is None else GateInterval(bound, kind, 1 - alpha / m, exact))
    return out


def decide(t: Tested, p_adjusted: float | None, alpha: float) -> Decision:
    """A report-only gate is reported; a confirmatory one passes on its adjusted p, an exploratory one on its own."""
    if t.hypothesis.gate.test == "report-only":
        return "reported"
    p = p_adjusted if t.hypothesis.gate.confirmatory else t.p
    return "pass" if p is not None and p <= alpha else "fail"


def _disagreement(t: Tested, interval: GateInterval | None, decision: Decision) -> str:
    """A Bonferroni bound (the fallback beside a Holm decision when a family member has no t bound or is an
    equivalence test) is more conservative than Holm: it can stay on the null's side of a threshold that Holm's
    decision passes. Say so rather than print the two side by side as if they agreed."""
    if interval is None or interval.kind != "bonferroni" or decision not in ("pass", "fail"):
        return ""
    low, high = interval.bounds
    bound = low if t.sign > 0 else high
    if bound is None:
        return ""
    clears = bound > t.delta if t.sign > 0 else bound < t.delta
    if clears == (decision == "pass"):
        return ""
    side = "below" if t.sign > 0 else "above"
    return (
        f"the Bonferroni bound stays {side} the threshold although Holm's step-down decides pass: the bound is the "
        "more conservative procedure, the decision is Holm's"
        if decision == "pass"
        else "the Bonferroni bound clears the threshold although the decision is fail"
    )


def decide_gates(gates: list[Gate], hypotheses: list[Hypothesis], plan: AnalysisPlan) -> list[GateResult]:
    """Test every evaluable hypothesis, adjust over the confirmatory family, bound, and decide each gate."""
    rng = np.random.default_rng(plan.permutation.seed)  # one stream, drawn in the hypotheses' order
    tested = [apply_tests(h, plan, rng) if h.evaluable else None for h in hypotheses]
    family = [(i, t) for i, t in enumerate(tested) if t is not None and t.hypothesis.gate.confirmatory]
    adjusted = adjusted_p([t for _, t in family], plan)
    p_adj = {i: a for (i, _), a in zip(family, adjusted, strict=True)}
    one_sided = [(i, t) for i, t in family if t.hypothesis.gate.test != "equivalence-tost"]
    bounds = family_intervals([t for _, t in one_sided], len(family), plan)
    intervals = {i: b for (i, _), b in zip(one_sided, bounds, strict=True)}
    decided = []
    for i, (h, t) in enumerate(zip(hypotheses, tested, strict=True)):
        if t is None:
            decided.append(Decided(h, None, None, None, "not-evaluable"))
            continue
        if i in intervals:
            interval = intervals[i]
        elif not h.gate.confirmatory and h.gate.test not in ("report-only", "equivalence-tost"):
            own = _bound(t, plan.alpha, plan.aggregate == "median")  # exploratory: marginal, unadjusted
            exact = stats.median_bound_level(t.x.size, plan.alpha) if plan.aggregate == "median" else None
            interval = t.interval if own is None else GateInterval(own, "marginal", 1 - plan.alpha, exact)
        else:
            interval = t.interval
        decision = decide(t, p_adj.get(i), plan.alpha)
        decided.append(Decided(h, t, p_adj.get(i), interval, decision, _disagreement(t, interval, decision)))
    return [_gate_result(g, [d for d in decided if d.hypothesis.gate.id == g.id]) for g in gates]


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


def _hypothesis_result(d: Decided) -> HypothesisResult:
    h, t = d.hypothesis, d.tested
    interval = d.interval
    return HypothesisResult(
        scope=h.scope,
        n=0 if h.values is None else int(h.values.size),
        estimate=t.estimate if t else None,
        interval=interval.bounds if interval else None,
        intervalKind=interval.kind if interval else None,
        confidenceLevel=interval.level if interval else None,
        confidenceLevelExact=interval.exact_level if interval else None,
        pValue=t.p if t else None,
        pAdjusted=d.p_adjusted,
        decidedBy=t.decided_by if t else None,
        permutationP=t.perm.p if t else None,
        permutationMethod=None if t is None else ("exact" if t.perm.exact else "monte-carlo"),
        permutationDraws=t.perm.draws if t else None,
        permutationSE=t.perm.se if t else None,
        signTestP=t.sign_p if t else None,
        wilcoxonP=t.wilcoxon.p if t and t.wilcoxon else None,
        wilcoxonMethod=t.wilcoxon.method if t and t.wilcoxon else None,
        decision=d.decision,
        reason="; ".join(x for x in (h.reason or (EXACT_BY if t is not None and t.degenerate else ""), d.note) if x),
        replicates=dict(zip(h.keys, map(float, h.values), strict=True)) if h.values is not None and h.keys else {},
    )


def _gate_result(g: Gate, decided: list[Decided]) -> GateResult:
    results = [_hypothesis_result(d) for d in decided]
    decisions = {r.decision for r in results}
    decision: Decision
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
        decision=decision,
        n=min((r.n for r in results), default=0),
        wording=_wording(g, decider),
        hypotheses=results,
    )
