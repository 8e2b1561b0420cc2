"""Replicate-level tests: t intervals, one-sided t tests against a threshold, TOST, sign-flip permutation
p-values and Wilcoxon. Inputs are 1-D arrays of replicate values (or paired differences), shape (n,)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from cltoolkit.stats._dist import t_ppf, t_sf

__all__ = [
    "EXACT_UP_TO",
    "OneSided",
    "PermutationP",
    "TTest",
    "Tost",
    "WilcoxonP",
    "degenerate",
    "finite",
    "median_bound_level",
    "median_lower_bound",
    "one_sided_t",
    "sign_flip_p",
    "sign_test_p",
    "t_interval",
    "tost",
    "two_sided_t",
    "wilcoxon_test",
]


class TTest(NamedTuple):
    """Mean, standard error, degrees of freedom, a two-sided interval and its p-value against `null`."""

    estimate: float
    se: float
    df: int
    low: float
    high: float
    p: float
    degenerate: bool = False
    """The spread is zero (or zero up to rounding): the t statistic is undefined and `p` is NaN."""


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
    degenerate: bool = False
    """The spread is zero (or zero up to rounding): the t statistic is undefined and `t`, `p` are NaN."""


def finite(x: np.ndarray | list[float], name: str = "values") -> np.ndarray:
    """`x` as a 1-D float array; NaN and infinite entries are refused, never dropped (ValueError naming them)."""
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of replicates, got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise ValueError(
            f"{name}: non-finite value(s) at position(s) {', '.join(map(str, bad[:5].tolist()))}: refused (a NaN or "
            "infinite replicate is never dropped silently)"
        )
    return a


def _number(value: float, name: str) -> float:
    """A threshold, margin or null as a finite float; NaN or infinite is refused (a NaN null would make every
    comparison false and a p-value of 1 or NaN look like a result)."""
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name}: {value!r} is not a finite number")
    return v


EPS = float(np.finfo(float).eps)
ROUNDING = 1024 * EPS
"""Relative spread below which replicates are equal up to rounding (about 2.3e-13 of their magnitude)."""


def degenerate(x: np.ndarray) -> bool:
    """Whether the t statistic of `x` is undefined or numerically meaningless: zero spread, or a spread below
    `ROUNDING` (1024 machine epsilons, ~2.3e-13) of the values' magnitude, i.e. replicates equal up to the rounding
    of the arithmetic that produced them. A real spread, however small beside the values (1e8 + N(0, 1e-3): a
    relative spread of 1e-11), is not degenerate."""
    a = np.asarray(x, dtype=float)
    scale = float(np.max(np.abs(a))) if a.size else 0.0
    return bool(a.std(ddof=1) <= ROUNDING * scale) if scale > 0 else True


def _moments(x: np.ndarray) -> tuple[float, float, int]:
    x = finite(x)
    if x.size < 2:
        raise ValueError(f"need at least 2 replicates in a 1-D array, got shape {x.shape}")
    n = x.size
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)), n - 1


def t_interval(x: np.ndarray, alpha: float = 0.05) -> TTest:
    """Two-sided (1 - alpha) Student-t interval for the mean, with the t-test p against 0."""
    return two_sided_t(x, 0.0, alpha)


def two_sided_t(x: np.ndarray, null: float = 0.0, alpha: float = 0.05) -> TTest:
    """Two-sided one-sample t test (as scipy.stats.ttest_1samp computes it, from `scipy.special` so that reporting
    never imports scipy.stats) with its (1 - alpha) interval. Degenerate spread (see `degenerate`): p is NaN, the
    interval collapses to the mean, and `degenerate` is set."""
    null = _number(null, "null")
    mean, se, df = _moments(x)
    if degenerate(x):
        return TTest(mean, se, df, mean, mean, math.nan, True)
    q = float(t_ppf(1 - alpha / 2, df))
    p = 2.0 * float(t_sf(abs(_t_statistic(x, null)), df))
    return TTest(mean, se, df, mean - q * se, mean + q * se, p)


def _t_statistic(x: np.ndarray, null: float) -> float:
    """The one-sample t statistic as scipy.stats.ttest_1samp forms it: (mean - null) / sqrt(var(ddof=1) / n)."""
    a = np.asarray(x, dtype=float)
    n = float(a.size)
    var = np.mean((a - a.mean()) ** 2) * (n / (n - 1))
    return float((a.mean() - null) / np.sqrt(var / n))


def one_sided_t(x: np.ndarray, delta: float, alpha: float = 0.05) -> OneSided:
    """H0: mean <= delta vs H1: mean > delta (scipy.stats.ttest_1samp, alternative `greater`; for `at most`
    claims pass -x and -delta). Degenerate spread: t and p are NaN and `degenerate` is set (decide by an exact
    test instead)."""
    delta = _number(delta, "delta")
    mean, se, df = _moments(x)
    if degenerate(x):
        return OneSided(mean, se, df, delta, math.nan, math.nan, mean, True)
    t = _t_statistic(x, delta)
    lower = mean - float(t_ppf(1 - alpha, df)) * se
    return OneSided(mean, se, df, delta, t, float(t_sf(t, df)), lower)


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
    degenerate: bool = False


def tost(x: np.ndarray, low: float, high: float, alpha: float = 0.05) -> Tost:
    """TOST for the mean of `x` (paired differences) within (low, high), by statsmodels' `ttost_paired`.
    Degenerate spread: p-values NaN, `degenerate` set."""
    low, high = _number(low, "low"), _number(high, "high")
    if not low < high:
        raise ValueError(f"TOST bounds: low {low} must be below high {high}")
    mean, se, df = _moments(x)
    if degenerate(x):
        return Tost(mean, se, df, math.nan, math.nan, math.nan, (mean, mean), True)
    # as statsmodels' DescrStatsW.ttost_mean forms its two t statistics (unit weights), without importing it
    a = np.asarray(x, dtype=float)
    w = np.ones_like(a)
    mean_w = float(np.dot(w, a) / w.sum())
    std_mean = math.sqrt(float(np.dot(w, (a - mean_w) ** 2)) / w.sum()) / math.sqrt(w.sum() - 1)
    p_lower = float(t_sf((mean_w - low) / std_mean, df))  # H0: mean <= low
    p_upper = float(t_sf(-(mean_w - high) / std_mean, df))  # H0: mean >= high
    q = float(t_ppf(1 - alpha, df))
    return Tost(mean, se, df, max(p_lower, p_upper), p_lower, p_upper, (mean - q * se, mean + q * se))


EXACT_UP_TO = 40
"""Sign-flip p-values are enumerated exactly (all 2^n flips, by meet in the middle) up to at least this n."""

Alternative = str  # "two-sided" | "greater" | "less"


class PermutationP(NamedTuple):
    """A sign-flip permutation p-value and how it was obtained."""

    p: float
    exact: bool
    """True: all 2^n sign flips enumerated. False: Monte Carlo."""
    draws: int | None = None
    """Monte Carlo draws (None when exact)."""
    se: float | None = None
    """Monte Carlo standard error of p, sqrt(p (1 - p) / draws) (None when exact)."""


def _half_sums(d: np.ndarray) -> np.ndarray:
    sums = np.zeros(1)
    for value in d:
        sums = np.concatenate((sums + value, sums - value))
    return sums


def _count_at_least(a: np.ndarray, b_sorted: np.ndarray, threshold: float) -> int:
    """Number of pairs (i, j) with a[i] + b[j] >= threshold."""
    return int(b_sorted.size * a.size - np.searchsorted(b_sorted, threshold - a, side="left").sum())


def sign_flip_p(
    x: np.ndarray,
    null: float = 0.0,
    *,
    alternative: Alternative = "two-sided",
    exact_up_to: int = EXACT_UP_TO,
    draws: int = 100_000,
    rng: np.random.Generator | None = None,
) -> PermutationP:
    """Sign-flip permutation p of H0: x - null is symmetric about 0, with the sum (mean) as statistic, against
    the `alternative` (`greater`: the mean exceeds `null`; `less`; `two-sided`).

    Exact while n <= max(`exact_up_to`, 40): the 2^n flips are counted by meet in the middle (the sums of each half,
    one side sorted, counted with a binary search), milliseconds at n = 30. Above it, Monte Carlo with `draws`
    flips from `rng` (required), p = (1 + hits) / (1 + draws), labelled with its draws and standard error.
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, got {alternative!r}")
    d = finite(x) - _number(null, "null")
    n = d.size
    if n < 1:
        raise ValueError("need at least one replicate")
    if alternative == "less":
        d = -d
    observed = float(d.sum())
    # Flip sums that are equal in exact arithmetic differ only by rounding: at most n roundings of numbers no
    # larger than sum |d| each. A larger tolerance (1e-12 x sum |d| before) counts real differences as ties: 1e-7
    # beside 1e6 is 1e-13 of the sum, far above rounding (2e-16 x 1e6 x n).
    tol = 4 * (n + 1) * EPS * float(np.abs(d).sum())
    if n <= max(exact_up_to, EXACT_UP_TO):
        left, right = _half_sums(d[: n // 2]), np.sort(_half_sums(d[n // 2 :]))
        total = left.size * right.size
        if alternative == "two-sided":
            if abs(observed) <= tol:
                return PermutationP(1.0, True)
            hits = _count_at_least(left, right, abs(observed) - tol) + _count_at_least(
                -left, -right[::-1], abs(observed) - tol
            )
        else:
            hits = _count_at_least(left, right, observed - tol)
        return PermutationP(min(1.0, hits / total), True)
    if rng is None:
        raise ValueError("a Monte Carlo sign-flip p needs an explicit numpy Generator")
    hits = 0
    remaining = draws
    # Each random byte flips 8 replicates (bit k, most significant first, flips replicate 8j + k): the sum of the
    # flipped d is a table lookup per byte column, 256 entries each, instead of unpacking every bit.
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float)  # (256, 8)
    tables = [bits[:, : d[j : j + 8].size] @ d[j : j + 8] for j in range(0, n, 8)]
    while remaining:
        block = min(remaining, 10_000)
        packed = rng.integers(0, 256, size=(block, (n + 7) // 8), dtype=np.uint8)  # 1 bits: flip the sign
        flipped = sum(table[packed[:, j]] for j, table in enumerate(tables))
        stat = d.sum() - 2.0 * flipped  # sum of signed d = total - 2 * (sum of flipped d)
        hits += int(
            np.sum((np.abs(stat) >= abs(observed) - tol) if alternative == "two-sided" else (stat >= observed - tol))
        )
        remaining -= block
    p = (1 + hits) / (1 + draws)
    return PermutationP(p, False, draws, math.sqrt(p * (1 - p) / draws))


def sign_test_p(x: np.ndarray, threshold: float, direction: int = 1) -> float | None:
    """Exact one-sided sign test of H0: median <= threshold (direction +1) or >= threshold (-1): with k of the n
    replicates strictly beyond the threshold in the claimed direction (ties dropped), p = P(Binomial(n, 1/2) >= k).
    None when every replicate ties the threshold. Assumes nothing about spread, so it stays finite where the t test
    degenerates (identical replicates)."""
    d = direction * (finite(x) - _number(threshold, "threshold"))
    d = d[d != 0]
    n = int(d.size)
    if n == 0:
        return None
    k = int((d > 0).sum())
    return float(sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n)


def _order_statistic(n: int, alpha: float) -> int:
    """The k of `median_lower_bound`: the largest k with P(Binomial(n, 1/2) <= k - 1) <= alpha (0: none)."""
    k, cdf = 0, 0.0
    while k < n:
        cdf_next = cdf + math.comb(n, k) / 2**n  # P(Bin <= k)
        if cdf_next > alpha:
            break
        k, cdf = k + 1, cdf_next
    return k


def median_bound_level(n: int, alpha: float = 0.05) -> float | None:
    """The exact coverage of `median_lower_bound` at n replicates and nominal level 1 - alpha: the k-th order
    statistic is below the median with probability 1 - P(Binomial(n, 1/2) <= k - 1), at least the nominal level and
    above it by the binomial's discreteness (0.951 to 0.992 at nominal 0.95 for n = 5 to 30). None: no bound."""
    k = _order_statistic(n, alpha)
    if k < 1:
        return None
    return 1.0 - float(sum(math.comb(n, i) for i in range(k))) / float(2**n)


def median_lower_bound(x: np.ndarray, alpha: float = 0.05) -> float | None:
    """Distribution-free one-sided (1 - alpha) lower confidence bound for the median: the k-th smallest replicate,
    k the largest with P(Binomial(n, 1/2) <= k - 1) <= alpha (then P(x_(k) <= median) >= 1 - alpha for any
    continuous distribution). None when n is too small for any order statistic to reach the level."""
    v = np.sort(finite(x))
    k = _order_statistic(int(v.size), alpha)
    return float(v[k - 1]) if k >= 1 else None


class WilcoxonP(NamedTuple):
    """A Wilcoxon signed-rank p-value and how it was computed."""

    p: float
    method: str
    """`exact` (no ties or zeros: the exact null distribution), `exact conditional (ties or zeros)` (every sign
    assignment of the observed midranks, zeros dropped) or `normal approximation` (n above the exact limit)."""


def wilcoxon_test(x: np.ndarray, null: float = 0.0, alternative: Alternative = "two-sided") -> WilcoxonP | None:
    """Wilcoxon signed-rank test of x - null against `alternative`, zeros dropped (Wilcoxon's convention); None
    when undefined (every difference zero).

    Without ties or zeros the p is exact up to n = 50 (the exact null distribution, as scipy's method="exact").
    With ties or zeros it is exact conditional up to `EXACT_UP_TO` nonzero differences: the signed-rank statistic
    sum(sign_i * rank_i) under all 2^n sign assignments of the observed midranks (scipy's automatic choice uses the
    normal approximation there above n = 13: at n = 30 with ties it gave 5.75e-06 where the exact conditional p is
    1.25e-07). Beyond, the normal approximation with tie correction, as scipy computes it, labelled so. Computed
    from `scipy.special` alone: reporting never imports scipy.stats."""
    from cltoolkit.stats._dist import _average_ranks, _exact_counts, norm_sf

    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, got {alternative!r}")
    d = finite(x) - _number(null, "null")
    nonzero = d[d != 0]
    n = int(nonzero.size)
    if n < 1:
        return None
    ranks, ties = _average_ranks(np.abs(nonzero))
    plain = n == d.size and bool(np.all(ties == 1))
    r_plus = float(ranks[nonzero > 0].sum())
    if plain and n <= 50:  # the exact null distribution of the rank sum W+ (as scipy's method="exact")
        counts = _exact_counts(n)
        total = counts.sum()
        upper = float(counts[int(r_plus) :].sum() / total)  # P(W+ >= r_plus)
        lower = float(counts[: int(r_plus) + 1].sum() / total)  # P(W+ <= r_plus)
        p = upper if alternative == "greater" else lower if alternative == "less" else min(1.0, 2 * min(upper, lower))
        return WilcoxonP(p, "exact")
    if not plain and n <= EXACT_UP_TO:
        p = sign_flip_p(np.sign(nonzero) * ranks, 0.0, alternative=alternative).p
        return WilcoxonP(p, "exact conditional (ties or zeros)")
    mean = n * (n + 1) / 4.0  # scipy's normal approximation: tie-corrected, no continuity correction
    se = math.sqrt((n * (n + 1) * (2 * n + 1) - float(np.sum(ties**3 - ties)) / 2.0) / 24.0)
    z = (r_plus - mean) / se
    if alternative == "greater":
        p = float(norm_sf(z))
    elif alternative == "less":
        p = float(norm_sf(-z))
    else:
        p = min(1.0, 2.0 * float(norm_sf(abs(z))))
    return WilcoxonP(p, "normal approximation")
