"""Sessions metrics: run-level mean absolute error of next-state prediction, one per evaluation set.

Each is (1/|R|) sum_{i in R} |s_{t_i+1} - f(s-window_i, a_{t_i})| over the evaluation set's held-out rows R, all
models scored on identical rows within a run (one number per run and model; the run is the replicate)."""

from __future__ import annotations

from typing import ClassVar

from cltoolkit.components import Metric

__all__ = ["NewSessionMAE", "RandomSplitMAE", "ShiftedCohortMAE"]


class NewSessionMAE(Metric):
    """MAE on every row of the held-out sessions of the main cohort (grouped split; model fitted on the training
    sessions). Estimand: transfer to new sessions of the same population."""

    id: ClassVar[str] = "sessions.new-session-mae-v1"
    suite: ClassVar[str] = "sessions"
    unit: ClassVar[str] = "state"
    higher_is_better: ClassVar[bool] = False


class RandomSplitMAE(Metric):
    """MAE on randomly held-out transitions of the main cohort (model fitted on the other transitions of the same
    sessions). Estimand: within-session interpolation, never transfer to new sessions."""

    id: ClassVar[str] = "sessions.random-split-mae-v1"
    suite: ClassVar[str] = "sessions"
    unit: ClassVar[str] = "state"
    higher_is_better: ClassVar[bool] = False


class ShiftedCohortMAE(Metric):
    """MAE on every row of the shifted cohort (changed c_j population) by the model fitted on the grouped split's
    training sessions. Estimand: transfer to new sessions under a changed session-constant population."""

    id: ClassVar[str] = "sessions.shifted-cohort-mae-v1"
    suite: ClassVar[str] = "sessions"
    unit: ClassVar[str] = "state"
    higher_is_better: ClassVar[bool] = False
