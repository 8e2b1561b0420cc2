"""Replicate-level tests: t intervals, one-sided t tests against a threshold, TOST, sign-flip permutation
p-values and Wilcoxon. Inputs are 1-D arrays of replicate values (or paired differences), shape (n,)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from cltoolkit.stats._dist import signed_rank_p, t_ppf, t_sf

__all__ = [
    "OneSided",
    "TTest",
    "one_sided_t",
    "sign_flip_p",
    "sign_test_p",
    "t_interval",
    "tost",
    "two_sided_t",
    "wilcoxon_p",
]


class TTest(NamedTuple):
    """Mean, standard error, degrees of freedom, a two-sided interval and its p-value against `null`."""

    estimate: float
    se: float
    df: int
    low: float
    high: float
    p: float


class OneSided(NamedTuple):
    """One-sided test of H0: theta <= delta against H1: theta > delta."""

    estimate: float
    se: float
    df: int
    delta: float
    t: float
    p: float
    lower: float
    """One-sided (1 - alpha) lower confidence bound."""


def _moments(x: np.ndarray) -> tuple[float, float, int]:
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"need at least 2 replicates in a 1-D array, got shape {x.shape}")
    n = x.size
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)), n - 1


def t_interval(x: np.ndarray, alpha: float = 0.05) -> TTest:
    """Two-sided (1 - alpha) Student-t interval for the mean, with the t-test p against 0."""
    return two_sided_t(x, 0.0, alpha)


def two_sided_t(x: np.ndarray, null: float = 0.0, alpha: float = 0.05) -> TTest:
    mean, se, df = _moments(x)
    q = float(t_ppf(1 - alpha / 2, df))
    if se == 0.0:
        p = 1.0 if mean == null else 0.0
    else:
        p = float(2 * t_sf(abs(mean - null) / se, df))
    return TTest(mean, se, df, mean - q * se, mean + q * se, p)


def one_sided_t(x: np.ndarray, delta: float, alpha: float = 0.05) -> OneSided:
    """H0: mean <= delta vs H1: mean > delta (for `at most` claims, pass -x and -delta)."""
    mean, se, df = _moments(x)
    if se == 0.0:  # all replicates equal: the t statistic is infinite or undefined
        t = math.inf if mean > delta else -math.inf
        p = 0.0 if mean > delta else 1.0
    else:
        t = (mean - delta) / se
        p = float(t_sf(t, df))
    lower = mean - float(t_ppf(1 - alpha, df)) * se
    return OneSided(mean, se, df, delta, t, p, lower)


class Tost(NamedTuple):
    """Two one-sided tests of equivalence within (low, high)."""

    estimate: float
    se: float
    df: int
    p: float
    """max of the two one-sided p-values."""
    p_lower: float
    p_upper: float
    interval: tuple[float, float]
    """The (1 - 2 alpha) interval; equivalence at level alpha iff it lies inside the bounds."""


def tost(x: np.ndarray, low: float, high: float, alpha: float = 0.05) -> Tost:
    """TOST for the mean of `x` (paired differences) within (low, high); agrees with statsmodels ttost_paired."""
    up = one_sided_t(x, low, alpha)
    down = one_sided_t(-np.asarray(x, dtype=float), -high, alpha)
    q = float(t_ppf(1 - alpha, up.df))
    interval = (up.estimate - q * up.se, up.estimate + q * up.se)
    return Tost(up.estimate, up.se, up.df, max(up.p, down.p), up.p, down.p, interval)


def sign_flip_p(
    x: np.ndarray,
    null: float = 0.0,
    *,
    exact_up_to: int = 20,
    draws: int = 100_000,
    rng: np.random.Generator | None = None,
) -> tuple[float, bool]:
    """Two-sided sign-flip permutation p of H0: x - null is symmetric about 0, with the mean as statistic.

    Exact (all 2^n flips) while n <= `exact_up_to`; above it, Monte Carlo with `draws` flips from `rng`
    (required) and p = (1 + hits) / (1 + draws). Returns (p, exact).
    """
    d = np.asarray(x, dtype=float) - null
    n = d.size
    if n < 1:
        raise ValueError("need at least one replicate")
    observed = abs(d.sum())
    tol = 1e-12 * max(1.0, float(np.abs(d).sum()))
    if n <= exact_up_to:
        sums = np.zeros(1)
        for value in d:
            sums = np.concatenate((sums + value, sums - value))
        return float(np.mean(np.abs(sums) >= observed - tol)), True
    if rng is None:
        raise ValueError("a Monte Carlo sign-flip p needs an explicit numpy Generator")
    hits = 0
    remaining = draws
    while remaining:
        block = min(remaining, 10_000)
        packed = rng.integers(0, 256, size=(block, (n + 7) // 8), dtype=np.uint8)
        flips = np.unpackbits(packed, axis=1, count=n).astype(float)  # 1: flip the sign (fair, independent bits)
        # sum of signed d = total - 2 * (sum of flipped d)
        hits += int(np.sum(np.abs(d.sum() - 2.0 * (flips @ d)) >= observed - tol))
        remaining -= block
    return (1 + hits) / (1 + draws), False


def sign_test_p(x: np.ndarray, threshold: float, direction: int = 1) -> float | None:
    """Exact one-sided sign test of H0: median <= threshold (direction +1) or >= threshold (-1): with k of the n
    replicates strictly beyond the threshold in the claimed direction (ties dropped), p = P(Binomial(n, 1/2) >= k).
    None when every replicate ties the threshold. Assumes nothing about spread, so it stays finite where the t test
    degenerates (identical replicates)."""
    d = direction * (np.asarray(x, dtype=float) - threshold)
    d = d[d != 0]
    n = int(d.size)
    if n == 0:
        return None
    k = int((d > 0).sum())
    return float(sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n)


def wilcoxon_p(x: np.ndarray, null: float = 0.0) -> float | None:
    """Two-sided Wilcoxon signed-rank p of x - null (None when undefined, e.g. all differences zero)."""
    d = np.asarray(x, dtype=float) - null
    if d.size < 1 or np.all(d == 0):
        return None
    return signed_rank_p(d)
