"""Aggregates over run-level scores: IQM, optimality gap, stratified bootstrap intervals, probability of
improvement, performance profiles and normalized scores. Score arrays are (n_runs, n_tasks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = [
    "AGGREGATES",
    "Interval",
    "aggregate",
    "iqm",
    "normalized_scores",
    "optimality_gap",
    "performance_profile",
    "probability_of_improvement",
    "stratified_bootstrap_ci",
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


def optimality_gap(scores: np.ndarray, gamma: float = 1.0) -> float:
    """Mean shortfall below `gamma`: mean(max(gamma - score, 0))."""
    return float(np.mean(np.maximum(gamma - _finite_all(scores), 0.0)))


class Interval(NamedTuple):
    estimate: float
    low: float
    high: float


def stratified_bootstrap_ci(
    scores: np.ndarray,
    statistic: Callable[[np.ndarray], float],
    rng: np.random.Generator,
    *,
    resamples: int = 10_000,
    level: float = 0.95,
) -> Interval:
    """Percentile interval of `statistic(scores)` resampling runs independently within each task (stratified
    bootstrap, as rliable; one scipy sample per task). `statistic` takes an (n_runs, n_tasks) array."""
    x = _finite_all(scores)
    if x.ndim != 2:
        raise ValueError("scores must be (n_runs, n_tasks)")
    columns = tuple(x[:, j] for j in range(x.shape[1]))

    def stat(*cols: np.ndarray, axis: int = -1) -> np.ndarray:
        stacked = np.stack(cols, axis=-1)  # (..., n_runs, n_tasks)
        flat = stacked.reshape(-1, *stacked.shape[-2:])
        return np.array([statistic(s) for s in flat]).reshape(stacked.shape[:-2])

    from scipy import stats

    res = stats.bootstrap(
        columns,
        stat,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        paired=False,
        rng=rng,
    )
    return Interval(float(statistic(x)), float(res.confidence_interval.low), float(res.confidence_interval.high))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) + P(X = Y) / 2 per task, averaged over tasks (x, y: (n_runs, n_tasks), runs may differ)."""
    x = _finite_all(x, "x")
    y = _finite_all(y, "y")
    per_task = []
    for j in range(x.shape[1]):
        a, b = x[:, j][:, None], y[:, j][None, :]
        per_task.append(float(np.mean((a > b) + 0.5 * (a == b))))
    return float(np.mean(per_task))


def performance_profile(scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Fraction of scores strictly above each threshold tau (the run-score profile, 1 - ECDF(tau))."""
    x = _finite_all(scores).ravel()
    return np.array([float(np.mean(x > t)) for t in np.asarray(thresholds, dtype=float)])


def normalized_scores(raw: np.ndarray, weak: float, strong: float) -> np.ndarray | None:
    """(raw - weak) / (strong - weak), never clipped (it can be < 0 or > 1); None when the anchors are equal."""
    if strong == weak:
        return None
    return (np.asarray(raw, dtype=float) - weak) / (strong - weak)


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
