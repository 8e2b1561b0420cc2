"""Power planning for paired comparisons: normal approximations, exact noncentral t (statsmodels `TTestPower`),
exact TOST power (own integration: statsmodels has no TOST power)."""

from __future__ import annotations

import math

__all__ = ["n_exact_t", "n_normal", "n_normal_tost", "power_t", "tost_power"]


def n_normal(sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8, sides: int = 2) -> int:
    """n = ceil(((z_{1-alpha/sides} + z_{power}) sigma / delta)^2), the normal-approximation plan."""
    from scipy import stats  # lazy: planning only

    if sigma <= 0 or delta == 0:
        raise ValueError("need sigma > 0 and delta != 0")
    z = stats.norm.ppf(1 - alpha / sides) + stats.norm.ppf(power)
    return math.ceil((float(z) * sigma / abs(delta)) ** 2)


def n_normal_tost(sigma: float, margin: float, alpha: float = 0.05, power: float = 0.8, true_diff: float = 0.0) -> int:
    """Normal-approximation replicates for TOST within (-margin, margin) when the true difference is `true_diff`:
    n = ceil(((z_{1-alpha} + z_q) sigma / (margin - |true_diff|))^2), with q = 1 - beta / 2 at a true difference of 0
    (both one-sided tests must reject, each with power 1 - beta / 2) and q = 1 - beta otherwise."""
    from scipy import stats

    gap = margin - abs(true_diff)
    if sigma <= 0 or gap <= 0:
        raise ValueError("need sigma > 0 and |true_diff| < margin")
    beta = 1 - power
    z = stats.norm.ppf(1 - alpha) + stats.norm.ppf(1 - beta / 2 if true_diff == 0 else 1 - beta)
    return math.ceil((float(z) * sigma / gap) ** 2)


def power_t(n: int, sigma: float, delta: float, alpha: float = 0.05, sides: int = 2) -> float:
    """Exact power of the paired (one-sample) t test with n replicates (noncentral t), by statsmodels'
    `TTestPower`."""
    from statsmodels.stats.power import TTestPower

    if n < 2:
        return 0.0
    alternative = "two-sided" if sides == 2 else "larger"
    return float(TTestPower().power(effect_size=abs(delta) / sigma, nobs=n, alpha=alpha, alternative=alternative))


def n_exact_t(
    sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8, sides: int = 2, n_max: int = 100_000
) -> int:
    """Smallest n >= 2 whose exact t-test power reaches `power` (statsmodels' `TTestPower`)."""
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
