"""Continual World's metrics (awarelab/continual_world@73f63bb, `continualworld/results_processing/tables.py`), from
one run's evaluations: `success[t, i]`, task i's success rate at evaluation t (every evaluation measures every task),
and `active[t]`, the task being trained when evaluation t was taken.

- **Average performance**: per task, the mean of its success over the run's last `last` evaluations (CW: 5, the last
  100,000 steps), then the mean over tasks (`calculate_data_at_the_end`).
- **CrlForgetting**: per task, the mean of its success over the last `last` evaluations of its own training minus its
  end-of-run value; the mean over tasks (`calculate_forgetting_individual`; positive: forgotten).
- **Forward transfer**, normalized: per task, (AUC_i - AUC_i^ref) / (1 - AUC_i^ref), with AUC_i the mean of task i's
  success over the evaluations of its own training and AUC_i^ref the same for a single-task run from scratch
  (`calculate_forward_transfer`). CW normalizes the difference of the means over seeds by the reference's mean over
  seeds; `forward_transfer` takes that mean reference, so the mean over runs of each run's value is CW's. Where the
  reference's mean is 1 the ratio is undefined (None), and the task is left out of the mean, which says how many
  tasks it covers.

Light: numpy only, imported where used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from cltoolkit.components import Metric

if TYPE_CHECKING:
    import numpy as np

    from cltoolkit.run.record import RunRecord

__all__ = ["CrlForgetting", "CwMetrics", "Performance", "cw_metrics", "final_success", "forward_transfer", "own_auc"]


@dataclass(frozen=True)
class CwMetrics:
    """One run's CW metrics; per-task lists in task order."""

    performance: float
    forgetting: float
    final: list[float]
    """Each task's success over the run's last evaluations."""
    end_of_own: list[float]
    """Each task's success over the last evaluations of its own training."""
    auc: list[float]
    """Each task's mean success over the evaluations of its own training (forward transfer's AUC_i)."""


def _check(success: np.ndarray, active: np.ndarray, last: int) -> None:
    if success.ndim != 2 or active.shape != (success.shape[0],):
        raise ValueError(
            f"success must be (evaluations, tasks) and active (evaluations,); got {success.shape}, {active.shape}"
        )
    if last < 1:
        raise ValueError(f"last must be at least 1, got {last}")
    missing = sorted(set(range(success.shape[1])) - set(active.tolist()))
    if missing:
        raise ValueError(f"no evaluation was taken while training task(s) {missing}")


def own_auc(success: np.ndarray, active: np.ndarray) -> list[float]:
    """Each task's mean success over the evaluations taken while it was trained."""
    import numpy as np

    success, active = np.asarray(success, dtype=float), np.asarray(active)
    return [float(success[active == i, i].mean()) for i in range(success.shape[1])]


def final_success(success: Sequence[Sequence[float]] | np.ndarray, last: int = 5) -> list[float]:
    """Each task's mean success over the run's last `last` evaluations (average performance's per-task values; the
    only CW metric a multi-task reference has)."""
    import numpy as np

    s = np.asarray(success, dtype=float)
    if s.ndim != 2 or not len(s) or last < 1:
        raise ValueError(f"success must be a non-empty (evaluations, tasks) array and last >= 1; got {s.shape}, {last}")
    return [float(v) for v in s[-last:].mean(0)]


def cw_metrics(
    success: Sequence[Sequence[float]] | np.ndarray, active: Sequence[int] | np.ndarray, last: int = 5
) -> CwMetrics:
    """Average performance and forgetting of one run (CW's definitions, above)."""
    import numpy as np

    s, a = np.asarray(success, dtype=float), np.asarray(active, dtype=int)
    _check(s, a, last)
    final = s[-last:].mean(0)
    end_of_own = np.array([s[a == i, i][-last:].mean() for i in range(s.shape[1])])
    return CwMetrics(
        performance=float(final.mean()),
        forgetting=float((end_of_own - final).mean()),
        final=[float(v) for v in final],
        end_of_own=[float(v) for v in end_of_own],
        auc=own_auc(s, a),
    )


def forward_transfer(auc: Sequence[float], reference_auc: Sequence[float]) -> tuple[float | None, list[float | None]]:
    """CW's normalized forward transfer of one run: the mean over tasks of (AUC_i - ref_i) / (1 - ref_i), with
    `reference_auc` the mean over the single-task reference runs of each task; per-task values (None where the
    reference is perfect); the mean is over the defined ones (None if none is)."""
    if len(auc) != len(reference_auc):
        raise ValueError(f"{len(auc)} tasks against {len(reference_auc)} reference values")
    per_task: list[float | None] = [
        None if ref >= 1.0 else (value - ref) / (1.0 - ref) for value, ref in zip(auc, reference_auc, strict=True)
    ]
    defined = [v for v in per_task if v is not None]
    return (sum(defined) / len(defined) if defined else None), per_task


class Performance(Metric):
    """CW's average performance: per task, the mean success over the run's last `evaluation.last` evaluations; the
    mean over tasks (`aggregate`), or one task's value (`each-task`)."""

    id: ClassVar[str] = "crl.performance-v1"
    suite: ClassVar[str] = "crl"
    unit: ClassVar[str] = "success rate"
    higher_is_better: ClassVar[bool] = True

    @classmethod
    def compute(cls, record: RunRecord, scope: str = "aggregate") -> float | None:
        key = cls.id if scope == "aggregate" else "finalSuccess"
        value = record.metrics.get(key)
        if isinstance(value, dict):
            value = value.get(scope)
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


class CrlForgetting(Metric):
    """CW's forgetting: per task, the mean success over the last `evaluation.last` evaluations of its own training
    minus the same at the end of the run; the mean over tasks (positive: forgotten)."""

    id: ClassVar[str] = "crl.forgetting-v1"
    suite: ClassVar[str] = "crl"
    unit: ClassVar[str] = "success rate"
    higher_is_better: ClassVar[bool] = False
