"""Aggregates over run-level scores: the declared aggregates (mean, IQM, median, worst case, CVaR) and performance
profiles. Score arrays are (n_runs, n_tasks)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "AGGREGATES",
    "aggregate",
    "iqm",
    "performance_profile",
]


def _finite_all(scores: np.ndarray, name: str = "scores") -> np.ndarray:
    x = np.asarray(scores, dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: non-finite value(s): refused (a NaN or infinite score is never dropped silently)")
    return x


def iqm(scores: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Interquartile mean: sort all scores, drop floor(N/4) whole observations from each end, average the rest.

    This keeps exactly the middle 50% when N is divisible by 4 and slightly more otherwise. Non-finite scores are
    refused (ValueError), never dropped.
    """
    x = _finite_all(scores)
    if axis is None:
        x = np.sort(x.ravel())
        k = x.size // 4
        return float(x[k : x.size - k].mean())
    x = np.sort(np.moveaxis(x, axis, -1), axis=-1)
    k = x.shape[-1] // 4
    return np.asarray(x[..., k : x.shape[-1] - k].mean(axis=-1))


def performance_profile(scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Fraction of scores strictly above each threshold tau (the run-score profile, 1 - ECDF(tau))."""
    x = _finite_all(scores).ravel()
    return np.array([float(np.mean(x > t)) for t in np.asarray(thresholds, dtype=float)])


AGGREGATES = ("mean", "iqm", "median", "worst-case", "cvar")


def aggregate(scores: np.ndarray, name: str, *, higher_is_better: bool = True, tail_fraction: float = 0.25) -> float:
    """One declared aggregate of run-level scores: `mean`, `iqm`, `median`, `worst-case` (the worst score in the
    metric's direction) or `cvar` (mean of the worst ceil(tail_fraction * N) scores)."""
    x = _finite_all(scores).ravel()
    if x.size == 0:
        raise ValueError("no scores to aggregate")
    if name == "mean":
        return float(x.mean())
    if name == "iqm":
        return float(iqm(x))
    if name == "median":
        return float(np.median(x))
    worst_first = np.sort(x) if higher_is_better else np.sort(x)[::-1]
    if name == "worst-case":
        return float(worst_first[0])
    if name == "cvar":
        if not 0 < tail_fraction <= 1:
            raise ValueError(f"tail fraction must be in (0, 1], got {tail_fraction}")
        return float(worst_first[: int(np.ceil(tail_fraction * x.size))].mean())
    raise ValueError(f"unknown aggregate {name!r} (known: {', '.join(AGGREGATES)})")
