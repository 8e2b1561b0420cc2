"""nav4 metrics over a success matrix R, where R[i][j] is held-out success on task j (in training order)
after training phase i. Each metric takes one run's matrix and returns one number (the replicate)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from cltoolkit.components import Metric

__all__ = [
    "BackwardTransfer",
    "FinalAverageSuccess",
    "Forgetting",
    "ImmediateAverageSuccess",
    "ImmediateSuccess",
    "RetentionLoss",
]


def _square(r: np.ndarray) -> np.ndarray:
    r = np.asarray(r, dtype=float)
    if r.ndim != 2 or r.shape[0] != r.shape[1] or r.shape[0] < 1:
        raise ValueError(f"a success matrix must be square (phases x tasks), got shape {r.shape}")
    return r


class ImmediateSuccess(Metric):
    """Immediate new-task success of task j: R[j][j] (held-out success right after training task j)."""

    id: ClassVar[str] = "nav4.immediate-success-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def per_task(r: np.ndarray) -> np.ndarray:
        return np.diag(_square(r)).copy()


class ImmediateAverageSuccess(Metric):
    """Mean over tasks of immediate success: (1/T) sum_j R[j][j]."""

    id: ClassVar[str] = "nav4.immediate-average-success-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def value(r: np.ndarray) -> float:
        return float(np.mean(np.diag(_square(r))))


class FinalAverageSuccess(Metric):
    """Mean over tasks of end-of-stream success: (1/T) sum_j R[T-1][j]."""

    id: ClassVar[str] = "nav4.final-average-success-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def value(r: np.ndarray) -> float:
        return float(np.mean(_square(r)[-1]))


class RetentionLoss(Metric):
    """Average retention loss over the first T-1 tasks: (1/(T-1)) sum_{j<T-1} max(0, R[j][j] - R[T-1][j]).
    Improvements on one task cannot conceal forgetting on another (each term is clipped at 0)."""

    id: ClassVar[str] = "nav4.retention-loss-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = False

    @staticmethod
    def value(r: np.ndarray) -> float:
        r = _square(r)
        t = r.shape[0]
        if t < 2:
            raise ValueError("retention needs at least two tasks")
        return float(np.mean(np.maximum(0.0, np.diag(r)[:-1] - r[-1, :-1])))


class BackwardTransfer(Metric):
    """BWT (Lopez-Paz & Ranzato 2017): (1/(T-1)) sum_{j<T-1} (R[T-1][j] - R[j][j]); negative is forgetting."""

    id: ClassVar[str] = "nav4.bwt-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def value(r: np.ndarray) -> float:
        r = _square(r)
        return float(np.mean(r[-1, :-1] - np.diag(r)[:-1]))


class Forgetting(Metric):
    """Average forgetting (Chaudhry et al. 2018): (1/(T-1)) sum_{j<T-1} (max_{i<T-1} R[i][j] - R[T-1][j]),
    the max taken over phases i >= j (after the task was learned)."""

    id: ClassVar[str] = "nav4.forgetting-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = False

    @staticmethod
    def value(r: np.ndarray) -> float:
        r = _square(r)
        t = r.shape[0]
        return float(np.mean([r[j : t - 1, j].max() - r[t - 1, j] for j in range(t - 1)]))
