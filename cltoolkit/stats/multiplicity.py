"""Multiplicity: Holm step-down, Benjamini-Hochberg, and Holm-compatible simultaneous confidence bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from cltoolkit.stats._dist import t_ppf, t_sf

__all__ = ["HolmBounds", "benjamini_hochberg", "holm", "holm_simultaneous_lower_bounds"]


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (step-down, monotone, capped at 1)."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (step-up, monotone, capped at 1)."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, p[i] * m / (rank + 1))
        adjusted[i] = min(1.0, running)
    return adjusted


class HolmBounds(NamedTuple):
    """Holm decisions with compatible simultaneous lower confidence bounds."""

    rejected: np.ndarray
    """Which H0: theta_i <= delta_i were rejected."""
    lower: np.ndarray
    """Simultaneous (1 - alpha) lower bounds, compatible with the decisions."""
    p: np.ndarray
    """Unadjusted one-sided p-values."""


def holm_simultaneous_lower_bounds(
    estimates: Sequence[float],
    se: Sequence[float],
    thresholds: Sequence[float],
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
