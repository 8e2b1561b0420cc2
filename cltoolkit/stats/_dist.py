"""Distribution functions from `scipy.special` (a fraction of `scipy.stats`' import time, which matters for a
CLI that reports in seconds), and the rank helpers of the Wilcoxon signed-rank test built on them."""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["norm_sf", "t_ppf", "t_sf"]


def t_sf(x: float | np.ndarray, df: float | np.ndarray) -> np.ndarray | float:
    """Student t survival function P(T > x)."""
    return special.stdtr(df, -np.asarray(x, dtype=float))  # type: ignore[no-any-return]


def t_ppf(q: float | np.ndarray, df: float | np.ndarray) -> np.ndarray | float:
    """Student t quantile."""
    return special.stdtrit(df, q)  # type: ignore[no-any-return]


def norm_sf(z: float | np.ndarray) -> np.ndarray | float:
    """Standard normal survival function."""
    return special.ndtr(-np.asarray(z, dtype=float))  # type: ignore[no-any-return]


def _average_ranks(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based) of `a` and the sizes of its tie groups."""
    order = np.argsort(a, kind="stable")
    s = a[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    sizes = np.diff(np.r_[starts, s.size])
    avg = starts + (sizes + 1) / 2.0  # mean of ranks start+1 .. start+size
    ranks = np.empty(a.size)
    ranks[order] = np.repeat(avg, sizes)
    return ranks, sizes


def _exact_counts(n: int) -> np.ndarray:
    """Number of sign assignments of ranks 1..n giving each rank sum W+ = 0 .. n(n+1)/2."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k].copy()
    return counts
