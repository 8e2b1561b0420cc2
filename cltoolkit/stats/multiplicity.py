"""Multiplicity: Holm step-down, Benjamini-Hochberg, and Holm-compatible simultaneous confidence bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from cltoolkit.stats._dist import t_ppf, t_sf

__all__ = ["HolmBounds", "benjamini_hochberg", "holm", "holm_simultaneous_lower_bounds"]


def _pvalues(pvalues: Sequence[float]) -> np.ndarray:
    p = np.asarray(pvalues, dtype=float)
    bad = np.flatnonzero(~np.isfinite(p) | (p < 0) | (p > 1))
    if p.ndim != 1 or bad.size:
        raise ValueError(
            f"p-values must be a 1-D list of numbers in [0, 1]; refused at position(s) {', '.join(map(str, bad[:5]))}"
        )
    return p


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (step-down, monotone, capped at 1), computed as statsmodels' `multipletests(method=
    "holm")` computes them (bit for bit; without importing statsmodels, whose import alone costs a report ~1 s)."""
    p = _pvalues(pvalues)
    if p.size == 0:
        return p.copy()
    order = np.argsort(p)
    adjusted = np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (step-up, monotone, capped at 1), computed as statsmodels'
    `multipletests(method="fdr_bh")` computes them (bit for bit, without importing it)."""
    p = _pvalues(pvalues)
    if p.size == 0:
        return p.copy()
    order = np.argsort(p)
    ecdf = np.arange(1, p.size + 1) / float(p.size)
    adjusted = np.minimum.accumulate((p[order] / ecdf)[::-1])[::-1]
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


class HolmBounds(NamedTuple):
    """Holm decisions with compatible simultaneous lower confidence bounds."""

    rejected: np.ndarray
    """Which H0: theta_i <= delta_i were rejected."""
    lower: np.ndarray
    """Simultaneous (1 - alpha) lower bounds, compatible with the decisions."""
    p: np.ndarray
    """Unadjusted one-sided p-values."""


def holm_simultaneous_lower_bounds(
    estimates: Sequence[float] | np.ndarray,
    se: Sequence[float] | np.ndarray,
    thresholds: Sequence[float] | np.ndarray,
    df: Sequence[int] | int,
    alpha: float = 0.05,
) -> HolmBounds:
    """Holm's step-down test of H0_i: theta_i <= delta_i with the informative simultaneous lower bounds of
    Strassburger & Bretz (2008) / Guilbaud (2008), using t quantiles.

    With R the rejected set among m hypotheses: if R is not everything, L_i = delta_i for i in R and
    L_i = est_i - se_i * t_{1 - alpha / (m - |R|)} otherwise; if R is everything, L_i = max(delta_i,
    est_i - se_i * t_{1 - alpha / m}). (Not the naive k-th hypothesis at alpha / (m - k + 1), which undercovers.)
    """
    est = np.asarray(estimates, dtype=float)
    s = np.asarray(se, dtype=float)
    delta = np.asarray(thresholds, dtype=float)
    if not (np.all(np.isfinite(est)) and np.all(np.isfinite(s)) and np.all(np.isfinite(delta))):
        raise ValueError("Holm bounds need finite estimates, standard errors and thresholds")
    m = est.size
    dfs = np.broadcast_to(np.asarray(df, dtype=float), (m,))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(s > 0, (est - delta) / s, np.where(est > delta, np.inf, -np.inf))
    p = np.asarray(t_sf(t, dfs), dtype=float)
    rejected = np.zeros(m, dtype=bool)
    for rank, i in enumerate(np.argsort(p, kind="stable")):
        if p[i] <= alpha / (m - rank):
            rejected[i] = True
        else:
            break
    k = int(rejected.sum())
    if k < m:
        q = t_ppf(1 - alpha / (m - k), dfs)
        lower = np.where(rejected, delta, est - s * q)
    else:
        q = t_ppf(1 - alpha / m, dfs)
        lower = np.maximum(delta, est - s * q)
    return HolmBounds(rejected, lower, p)
