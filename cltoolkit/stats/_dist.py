"""Distribution functions from `scipy.special` (a fraction of `scipy.stats`' import time, which matters for a
CLI that reports in seconds), and the Wilcoxon signed-rank test built on them."""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["norm_sf", "signed_rank_p", "t_ppf", "t_sf"]


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


def signed_rank_p(d: np.ndarray) -> float | None:
    """Two-sided Wilcoxon signed-rank p of the differences `d`, zeros dropped (Wilcoxon's convention), as
    `scipy.stats.wilcoxon(d)` computes it: exact null distribution when n <= 50 without ties or zeros, a sign-flip
    permutation over all 2^n assignments when n <= 13 with ties or zeros, else the normal approximation with
    tie correction (no continuity correction, scipy's default)."""
    d = np.asarray(d, dtype=float)
    nonzero = d[d != 0]
    n = nonzero.size
    if n == 0:
        return None
    ranks, ties = _average_ranks(np.abs(nonzero))
    r_plus = float(ranks[nonzero > 0].sum())
    has_ties = bool(np.any(ties > 1))
    if d.size <= 50 and not has_ties and n == d.size:
        counts = _exact_counts(n)
        total = counts.sum()
        upper = counts[int(np.floor(r_plus)) :].sum() / total
        lower = counts[: int(np.ceil(r_plus)) + 1].sum() / total
        return float(min(1.0, 2.0 * min(upper, lower)))
    if d.size <= 13:
        signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)  # every sign assignment
        stats_ = (signs * ranks).sum(axis=1)
        tol = 1e-9 * max(1.0, abs(r_plus))
        upper = float(np.mean(stats_ >= r_plus - tol))
        lower = float(np.mean(stats_ <= r_plus + tol))
        return float(min(1.0, 2.0 * min(upper, lower)))
    mean = n * (n + 1) / 4.0
    se = np.sqrt((n * (n + 1) * (2 * n + 1) - float(np.sum(ties**3 - ties)) / 2.0) / 24.0)
    if se == 0:
        return None
    z = (r_plus - mean) / se
    return float(min(1.0, 2.0 * float(norm_sf(abs(z)))))
