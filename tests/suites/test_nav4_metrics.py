"""nav4's success-matrix metrics against values worked by hand on a fixed matrix (rows: after phase i; columns: task
j), so a changed formula fails here and not only in a committed study."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from cltoolkit.suites.nav4.metrics import (
    BackwardTransfer,
    FinalAverageSuccess,
    Forgetting,
    ImmediateAverageSuccess,
    ImmediateSuccess,
    RetentionLoss,
)

R = np.array(
    [
        [0.9, 0.1, 0.0],
        [0.5, 0.8, 0.2],
        [0.7, 0.4, 0.6],
    ]
)
"""Task 0 learned to 0.9, dropped to 0.5, recovered to 0.7; task 1 learned to 0.8, dropped to 0.4; task 2: 0.6."""


def test_bwt_is_the_mean_final_minus_immediate_over_the_first_t_minus_1_tasks() -> None:
    # ((0.7 - 0.9) + (0.4 - 0.8)) / 2 = -0.3 (Lopez-Paz & Ranzato 2017)
    assert BackwardTransfer.value(R) == pytest.approx(-0.3)


def test_forgetting_takes_the_best_earlier_value_after_learning() -> None:
    # task 0: max(0.9, 0.5) - 0.7 = 0.2; task 1: max(0.8) - 0.4 = 0.4 -> 0.3 (Chaudhry et al. 2018)
    assert Forgetting.value(R) == pytest.approx(0.3)
    late = R.copy()
    late[1, 0] = 0.95  # an earlier peak after learning counts, not only the immediate value
    assert Forgetting.value(late) == pytest.approx(((0.95 - 0.7) + 0.4) / 2)


def test_retention_loss_clips_each_task_at_zero() -> None:
    better = R.copy()
    better[2, 0] = 1.0  # task 0 improves by 0.1: it cannot hide task 1's loss of 0.4
    assert RetentionLoss.value(better) == pytest.approx((0.0 + 0.4) / 2)
    assert BackwardTransfer.value(better) == pytest.approx((0.1 - 0.4) / 2)  # BWT lets it


def test_immediate_and_final_averages() -> None:
    assert ImmediateSuccess.per_task(R).tolist() == [0.9, 0.8, 0.6]
    assert ImmediateAverageSuccess.value(R) == pytest.approx((0.9 + 0.8 + 0.6) / 3)
    assert FinalAverageSuccess.value(R) == pytest.approx((0.7 + 0.4 + 0.6) / 3)


def test_a_matrix_that_is_not_square_is_refused() -> None:
    with pytest.raises(ValueError, match="must be square"):
        BackwardTransfer.value(np.ones((2, 3)))


def test_compute_reads_each_metric_from_a_runs_record() -> None:
    """`Metric.compute`: nav4's from the record's success matrix (a reference's one row too), the default from the
    field the metric names (its `key`, else its id; a per-task object by scope), never a 0 for what was not measured."""
    from cltoolkit.components import Metric
    from cltoolkit.run.record import RunRecord
    from cltoolkit.suites.wmf.metrics import METRICS as WMF

    def record(metrics: dict[str, Any]) -> RunRecord:  # only the measurements: compute reads nothing else
        built: RunRecord = cast(Any, RunRecord).model_construct(metrics=metrics)
        return built

    matrix = {"tasks": ["a", "b", "c"], "phases": ["a", "b", "c"], "values": R.tolist()}
    rec = record({"successMatrix": matrix})
    assert BackwardTransfer.compute(rec) == pytest.approx(-0.3)
    assert ImmediateSuccess.compute(rec, "b") == pytest.approx(0.8)
    assert ImmediateSuccess.compute(rec, "z") is None
    joint = record({"successMatrix": {**matrix, "phases": ["joint"], "values": [[1, 0, 1]]}})
    assert FinalAverageSuccess.compute(joint) == pytest.approx(2 / 3)
    assert RetentionLoss.compute(joint) is None  # undefined for one phase: left out, never 0

    class PerTask(Metric):
        id = "mine.score-v1"
        suite = "mine"
        unit = "score"
        higher_is_better = True

    measured = record({"mine.score-v1": {"a": 0.5, "b": True}, "pf": 1.5, "rd": None})
    assert PerTask.compute(measured, "a") == 0.5
    assert PerTask.compute(measured, "b") is None  # a boolean is not a measurement
    assert WMF["wmf.pf-v1"].compute(measured) == 1.5  # wmf's metrics name their record field (`key`)
    assert WMF["wmf.rd-v1"].compute(measured) is None
