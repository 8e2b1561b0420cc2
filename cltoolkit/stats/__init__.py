"""Statistics as pure functions over documented arrays, returning named results.

Randomness always comes from an explicit `numpy.random.Generator`; nothing touches the global RNG.
"""

from cltoolkit.stats.aggregate import (
    AGGREGATES,
    aggregate,
    iqm,
    normalized_scores,
    optimality_gap,
    performance_profile,
    probability_of_improvement,
    stratified_bootstrap_ci,
)
from cltoolkit.stats.multiplicity import benjamini_hochberg, holm, holm_simultaneous_lower_bounds
from cltoolkit.stats.paired import (
    EXACT_UP_TO,
    OneSided,
    PermutationP,
    Tost,
    TTest,
    degenerate,
    finite,
    median_lower_bound,
    one_sided_t,
    sign_flip_p,
    sign_test_p,
    t_interval,
    tost,
    two_sided_t,
    wilcoxon_p,
)
from cltoolkit.stats.power import n_exact_t, n_normal, n_normal_tost, power_t, tost_power

__all__ = [
    "AGGREGATES",
    "EXACT_UP_TO",
    "OneSided",
    "PermutationP",
    "TTest",
    "Tost",
    "aggregate",
    "benjamini_hochberg",
    "degenerate",
    "finite",
    "holm",
    "holm_simultaneous_lower_bounds",
    "iqm",
    "median_lower_bound",
    "n_exact_t",
    "n_normal",
    "n_normal_tost",
    "normalized_scores",
    "one_sided_t",
    "optimality_gap",
    "performance_profile",
    "power_t",
    "probability_of_improvement",
    "sign_flip_p",
    "sign_test_p",
    "stratified_bootstrap_ci",
    "t_interval",
    "tost",
    "tost_power",
    "two_sided_t",
    "wilcoxon_p",
]
