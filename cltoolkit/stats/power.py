"""Power planning for paired comparisons: normal approximations, exact noncentral t (statsmodels `TTestPower`),
exact TOST power (own integration: statsmodels has no TOST power), and the exact sign test that decides a gate when
the declared aggregate is the median (binomial sums under normal paired differences)."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = [
    "n_exact_t",
    "n_normal",
    "n_normal_tost",
    "n_sign_noether",
    "n_sign_test",
    "n_sign_tost",
    "n_tost",
    "power_t",
    "sign_test_power",
    "sign_tost_power",
    "tost_power",
]


def _first_n(power_at: Callable[[int], float], target: float, start: int, n_max: int) -> int | None:
    """Smallest n in [start, n_max] with power_at(n) >= target, None when none is."""
    return next((n for n in range(start, n_max + 1) if power_at(n) >= target), None)


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
    n = _first_n(lambda k: power_t(k, sigma, delta, alpha, sides), power, 2, n_max)
    if n is None:
        raise ValueError(f"more than {n_max} replicates needed")
    return n


def n_tost(sigma: float, margin: float, alpha: float = 0.05, power: float = 0.8, true_diff: float = 0.0) -> int:
    """Smallest n >= 2 whose exact TOST power reaches `power` (searched up to 10,000, returned when not reached)."""
    return _first_n(lambda k: tost_power(k, sigma, margin, true_diff, alpha), power, 2, 10_000) or 10_000


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


def _sign_critical(n: int, alpha: float) -> int | None:
    """Smallest k with P(Binomial(n, 1/2) >= k) <= alpha (the one-sided sign test rejects at k or more replicates
    beyond the null), None when no k reaches the level."""
    tail = 0.0
    for k in range(n, -1, -1):
        tail += math.comb(n, k) / 2**n
        if tail > alpha:
            return k + 1 if k < n else None
    return 0


def sign_test_power(n: int, sigma: float, delta: float, alpha: float = 0.05, sides: int = 1) -> float:
    """Exact power of the sign test with n replicates when the paired differences are normal with SD `sigma` and
    lie `delta` beyond the null in the claimed direction: each replicate falls beyond the null with probability
    p = Phi(delta / sigma), and the test rejects when Binomial(n, p) reaches the critical count (one-sided at
    alpha; two-sided: either tail at alpha / 2, as `2 * min` of the one-sided p values)."""
    from scipy import stats  # lazy: planning only

    if n < 1 or sigma <= 0:
        return 0.0
    p = float(stats.norm.cdf(delta / sigma))
    k = _sign_critical(n, alpha / sides)
    power = 0.0 if k is None else float(stats.binom.sf(k - 1, n, p))
    if sides == 2 and k is not None:
        power += float(stats.binom.cdf(n - k, n, p))
    return min(1.0, power)


def n_sign_test(
    sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8, sides: int = 1, n_max: int = 100_000
) -> int:
    """Smallest n whose exact sign-test power reaches `power` (power is not monotone in n: the binomial is
    discrete, so a few larger n can fall just below; this is the first n that reaches it)."""
    if sigma <= 0 or delta == 0:
        raise ValueError("need sigma > 0 and delta != 0")
    n = _first_n(lambda k: sign_test_power(k, sigma, abs(delta), alpha, sides), power, 1, n_max)
    if n is None:
        raise ValueError(f"more than {n_max} replicates needed")
    return n


def n_sign_noether(sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8, sides: int = 1) -> int:
    """Noether's normal approximation for the sign test: n = ceil((z_{1-alpha/sides} + z_power)^2 / (4 (p - 1/2)^2))
    with p = Phi(delta / sigma)."""
    from scipy import stats

    if sigma <= 0 or delta == 0:
        raise ValueError("need sigma > 0 and delta != 0")
    p = float(stats.norm.cdf(abs(delta) / sigma))
    z = float(stats.norm.ppf(1 - alpha / sides) + stats.norm.ppf(power))
    return math.ceil(z**2 / (4 * (p - 0.5) ** 2))


def n_sign_tost(sigma: float, margin: float, alpha: float = 0.05, power: float = 0.8, true_diff: float = 0.0) -> int:
    """Smallest n whose exact power of two one-sided sign tests reaches `power` (searched up to 10,000)."""
    return _first_n(lambda k: sign_tost_power(k, sigma, margin, true_diff, alpha), power, 1, 10_000) or 10_000


def sign_tost_power(n: int, sigma: float, margin: float, true_diff: float = 0.0, alpha: float = 0.05) -> float:
    """Exact power of equivalence by two one-sided sign tests within (-margin, margin), as the gatekeeper decides
    a median-aggregate equivalence gate: both reject when at most n - k replicates fall below -margin and at most
    n - k above +margin (k the one-sided critical count). Normal paired differences with mean `true_diff`; the
    two counts are dependent, so their trinomial is summed exactly."""
    from scipy import stats

    k = _sign_critical(n, alpha) if n >= 1 else None
    if k is None or sigma <= 0:
        return 0.0
    import numpy as np

    low = float(stats.norm.cdf((-margin - true_diff) / sigma))
    high = float(stats.norm.sf((margin - true_diff) / sigma))
    limit = n - k
    # a replicates below -margin (at most n - k); given a, those above +margin are Binomial(n - a, high / (1 - low))
    a = np.arange(limit + 1)
    above = high / (1 - low) if low < 1 else 0.0
    total = stats.binom.pmf(a, n, low) * stats.binom.cdf(np.minimum(limit, n - a), n - a, above)
    return float(min(1.0, total.sum()))
