"""Power planning for paired comparisons: normal approximation, exact noncentral t, exact TOST power."""

from __future__ import annotations

import math

__all__ = ["n_exact_t", "n_normal", "power_t", "tost_power"]


def n_normal(sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8, sides: int = 2) -> int:
    """n = ceil(((z_{1-alpha/sides} + z_{power}) sigma / delta)^2), the normal-approximation plan."""
    from scipy import stats  # lazy: planning only

    if sigma <= 0 or delta == 0:
        raise ValueError("need sigma > 0 and delta != 0")
    z = stats.norm.ppf(1 - alpha / sides) + stats.norm.ppf(power)
    return math.ceil((float(z) * sigma / abs(delta)) ** 2)


def power_t(n: int, sigma: float, delta: float, alpha: float = 0.05, sides: int = 2) -> float:
    """Exact power of the paired (one-sample) t test with n replicates (noncentral t)."""
    from scipy import stats  # lazy: planning only

    if n < 2:
        return 0.0
    df = n - 1
    nc = delta * math.sqrt(n) / sigma
    crit = stats.t.ppf(1 - alpha / sides, df)
    upper = stats.nct.sf(crit, df, nc)
    return float(upper + (stats.nct.cdf(-crit, df, nc) if sides == 2 else 0.0))


def n_exact_t(
    sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8, sides: int = 2, n_max: int = 100_000
) -> int:
    """Smallest n >= 2 whose exact t-test power reaches `power`."""
    n = 2
    while power_t(n, sigma, delta, alpha, sides) < power:
        n += 1
        if n > n_max:
            raise ValueError(f"more than {n_max} replicates needed")
    return n


def tost_power(n: int, sigma: float, margin: float, true_diff: float = 0.0, alpha: float = 0.05) -> float:
    """Exact power of TOST with bounds (-margin, margin): P(both one-sided tests reject), integrating over the
    distribution of the sample standard deviation."""
    from scipy import integrate, stats  # lazy: planning only

    if n < 2:
        return 0.0
    df = n - 1
    crit = stats.t.ppf(1 - alpha, df)
    se_true = sigma / math.sqrt(n)

    def integrand(s: float) -> float:
        half = margin - crit * s / math.sqrt(n)
        if half <= 0:
            return 0.0
        p_mean = stats.norm.cdf((half - true_diff) / se_true) - stats.norm.cdf((-half - true_diff) / se_true)
        # density of s where df * s^2 / sigma^2 ~ chi2(df)
        density = stats.chi2.pdf(df * s * s / sigma**2, df) * 2 * df * s / sigma**2
        return float(p_mean * density)

    s_max = margin * math.sqrt(n) / crit
    value, _ = integrate.quad(integrand, 0.0, s_max, limit=200)
    return float(min(1.0, max(0.0, value)))
