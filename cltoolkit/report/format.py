"""How a report prints numbers, p-values, intervals and decisions: one fixed format for Markdown and HTML alike."""

from __future__ import annotations

from typing import Any

__all__ = [
    "DECISION_WORDS",
    "KIND_WORDS",
    "decision_text",
    "fmt",
    "interval_text",
    "p_text",
    "percent",
    "permutation_text",
]


def fmt(x: Any) -> str:
    """One fixed, readable format for every number a report prints (Markdown and HTML alike)."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if x != x:
            return "undefined"
        if x == 0:
            return "0"
        return f"{x:.3e}" if abs(x) >= 1e5 or abs(x) < 1e-3 else f"{x:.4g}"
    if isinstance(x, dict):
        return ", ".join(f"{k} {fmt(v)}" for k, v in x.items())
    if isinstance(x, (tuple, list)):
        return "[" + ", ".join(fmt(v) for v in x) + "]"
    return str(x)


def p_text(x: float | None) -> str:
    """A p-value: four decimals, or two significant digits in scientific form below 1e-4."""
    if x is None:
        return "-"
    if x != x:
        return "undefined"
    return f"{x:.1e}" if 0 < x < 1e-4 else f"{x:.4f}"


KIND_WORDS = {
    "holm-simultaneous": "Holm-simultaneous",
    "bonferroni": "Bonferroni-simultaneous",
    "marginal": "marginal",
}


def interval_text(h: Any) -> str:
    """`>= low` / `<= high` for one-sided bounds, `[low, high]` for two-sided intervals, with level and kind."""
    if h is None or h.interval is None:
        return "none (t statistic undefined)" if h is not None and h.decidedBy and "exact" in h.decidedBy else "-"
    lo, hi = h.interval
    text = f">= {fmt(lo)}" if hi is None else f"<= {fmt(hi)}" if lo is None else f"[{fmt(lo)}, {fmt(hi)}]"
    level = percent(h.confidenceLevel) if h.confidenceLevel else ""
    exact = getattr(h, "confidenceLevelExact", None)
    if level and exact is not None:
        level += f" nominal, {percent(exact, 3)} exact"
    sided = "one-sided " if lo is None or hi is None else ""
    kind = KIND_WORDS.get(h.intervalKind or "", "")
    return f"{text} ({sided}{level}{', ' + kind if kind else ''})" if level else text


def percent(level: float, digits: int = 2) -> str:
    """A coverage as a percentage, never rounded into another level: 0.95 -> 95%, 0.99286 -> 99.29% (not 99%)."""
    for places in range(digits + 1):
        text = f"{100 * level:.{places}f}"
        if abs(float(text) - 100 * level) < 1e-9 or places == digits:
            return text + "%"
    return f"{100 * level:.{digits}f}%"


DECISION_WORDS = {"pass": "PASS", "fail": "FAIL", "not-evaluable": "NOT EVALUABLE", "reported": "REPORTED"}


def decision_text(decision: str, confirmatory: bool) -> str:
    word = f"**{DECISION_WORDS.get(decision, decision)}**"
    return word if confirmatory or decision in ("reported", "not-evaluable") else f"{word} (exploratory, unadjusted)"


def permutation_text(h: Any) -> str:
    """The permutation p with how it was obtained."""
    if h.permutationP is None:
        return "-"
    if h.permutationMethod == "monte-carlo":
        return f"{p_text(h.permutationP)} (Monte Carlo, {h.permutationDraws} draws, SE {p_text(h.permutationSE)})"
    return f"{p_text(h.permutationP)} (exact)"
