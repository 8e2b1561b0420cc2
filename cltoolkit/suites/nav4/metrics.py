"""nav4 metrics over a success matrix R, where R[i][j] is held-out success on task j (in training order)
after training phase i. Each metric takes one run's matrix and returns one number (the replicate); `compute` reads
the matrix from the run's record (`matrix_value`: the references' one-row matrices too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from cltoolkit.components import Metric

if TYPE_CHECKING:
    from cltoolkit.run.record import RunRecord

__all__ = [
    "AGGREGATE_VALUES",
    "METRICS",
    "BackwardTransfer",
    "FinalAverageSuccess",
    "Forgetting",
    "ImmediateAverageSuccess",
    "ImmediateSuccess",
    "Nav4Metric",
    "RetentionLoss",
    "matrix_value",
    "run_values",
    "success_matrix",
]


def _square(r: np.ndarray) -> np.ndarray:
    r = np.asarray(r, dtype=float)
    if r.ndim != 2 or r.shape[0] != r.shape[1] or r.shape[0] < 1:
        raise ValueError(f"a success matrix must be square (phases x tasks), got shape {r.shape}")
    return r


class Nav4Metric(Metric):
    """A nav4 metric: a function of one run's success matrix."""

    suite: ClassVar[str] = "nav4"

    @classmethod
    def compute(cls, record: RunRecord, scope: str = "aggregate") -> float | None:
        return run_values(record, cls.id, scope)


class ImmediateSuccess(Nav4Metric):
    """Immediate new-task success of task j: R[j][j] (held-out success right after training task j)."""

    id: ClassVar[str] = "nav4.immediate-success-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def per_task(r: np.ndarray) -> np.ndarray:
        return np.diag(_square(r)).copy()


class ImmediateAverageSuccess(Nav4Metric):
    """Mean over tasks of immediate success: (1/T) sum_j R[j][j]."""

    id: ClassVar[str] = "nav4.immediate-average-success-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def value(r: np.ndarray) -> float:
        return float(np.mean(np.diag(_square(r))))


class FinalAverageSuccess(Nav4Metric):
    """Mean over tasks of end-of-stream success: (1/T) sum_j R[T-1][j]."""

    id: ClassVar[str] = "nav4.final-average-success-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def value(r: np.ndarray) -> float:
        return float(np.mean(_square(r)[-1]))


class RetentionLoss(Nav4Metric):
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


class BackwardTransfer(Nav4Metric):
    """BWT (Lopez-Paz & Ranzato 2017): (1/(T-1)) sum_{j<T-1} (R[T-1][j] - R[j][j]); negative is forgetting."""

    id: ClassVar[str] = "nav4.bwt-v1"
    suite: ClassVar[str] = "nav4"
    unit: ClassVar[str] = "fraction"
    higher_is_better: ClassVar[bool] = True

    @staticmethod
    def value(r: np.ndarray) -> float:
        r = _square(r)
        return float(np.mean(r[-1, :-1] - np.diag(r)[:-1]))


class Forgetting(Nav4Metric):
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


METRICS = (
    ImmediateSuccess.id,
    ImmediateAverageSuccess.id,
    FinalAverageSuccess.id,
    RetentionLoss.id,
    BackwardTransfer.id,
    Forgetting.id,
)

AGGREGATE_VALUES = {  # metric id -> its value of a square success matrix
    ImmediateAverageSuccess.id: ImmediateAverageSuccess.value,
    FinalAverageSuccess.id: FinalAverageSuccess.value,
    RetentionLoss.id: RetentionLoss.value,
    BackwardTransfer.id: BackwardTransfer.value,
    Forgetting.id: Forgetting.value,
}


def success_matrix(rec: RunRecord) -> tuple[list[str], list[str], np.ndarray] | None:
    """A run's success matrix from its record: (tasks, phases, values), or None where it has none."""
    sm = rec.section("successMatrix")
    if sm is None:
        return None
    return list(sm["tasks"]), list(sm["phases"]), np.asarray(sm["values"], dtype=float)


def run_values(rec: RunRecord, metric: str, scope: str) -> float | None:
    """One run's value of `metric` (for `each-task` metrics, on task `scope`); None where undefined."""
    parsed = success_matrix(rec)
    if parsed is None:
        return None
    return matrix_value(*parsed, metric, scope)


def matrix_value(tasks: list[str], phases: list[str], r: np.ndarray, metric: str, scope: str) -> float | None:
    """A metric of one success matrix (rows: phases, columns: tasks in training order)."""
    square = r.shape[0] == r.shape[1] == len(tasks) and phases == tasks
    if metric == ImmediateSuccess.id:
        if scope not in tasks:
            return None
        j = tasks.index(scope)
        return float(r[j, j] if square else r[0, j])
    if square:
        return float(AGGREGATE_VALUES[metric](r)) if metric in AGGREGATE_VALUES else None
    if metric in (ImmediateAverageSuccess.id, FinalAverageSuccess.id):
        return float(np.mean(r[0]))
    return None
