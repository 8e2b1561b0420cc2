"""Ladder metrics, one per rung (computed in `rungs.py`; lower is better for all)."""

from __future__ import annotations

from typing import ClassVar

from cltoolkit.components import Metric

__all__ = ["InterventionError", "OneStepMSE", "RolloutRMSE", "TrackingMAE", "TransferTrackingMAE"]


class OneStepMSE(Metric):
    """Rung 1: (1/M) sum_i (s'_i - f(s_i, u_i, u_prev_i))^2 over M i.i.d. transitions with independent normal
    state, action and previous action and the system's process noise. Reported beside the population MSE
    (closed form), the marginal standard error v sqrt(2/M) and the paired-difference standard errors."""

    id: ClassVar[str] = "ladder.one-step-mse-v1"
    suite: ClassVar[str] = "ladder"
    unit: ClassVar[str] = "squared state"
    higher_is_better: ClassVar[bool] = False


class RolloutRMSE(Metric):
    """Rung 2: sqrt((1/H) sum_{t=1..H} (s^model_t - s^true_t)^2), open loop from s0 under a constant input,
    against the noiseless true trajectory; alternating-input horizons reported beside it."""

    id: ClassVar[str] = "ladder.rollout-rmse-v1"
    suite: ClassVar[str] = "ladder"
    unit: ClassVar[str] = "state"
    higher_is_better: ClassVar[bool] = False


class InterventionError(Metric):
    """Rung 3: |Delta_model - Delta_true|, Delta = s_H(intervention) - s_H(baseline), both trajectories from
    s0 with the declared previous action."""

    id: ClassVar[str] = "ladder.intervention-error-v1"
    suite: ClassVar[str] = "ladder"
    unit: ClassVar[str] = "state"
    higher_is_better: ClassVar[bool] = False


class TrackingMAE(Metric):
    """Rung 4: mean |s_t - s*| over the declared tail of states, one-step MPC on the action grid with the
    model, executed in the deterministic true system."""

    id: ClassVar[str] = "ladder.tracking-mae-v1"
    suite: ClassVar[str] = "ladder"
    unit: ClassVar[str] = "state"
    higher_is_better: ClassVar[bool] = False


class TransferTrackingMAE(Metric):
    """Rung 5: the rung-4 controller executed in the deterministic transfer system."""

    id: ClassVar[str] = "ladder.transfer-tracking-mae-v1"
    suite: ClassVar[str] = "ladder"
    unit: ClassVar[str] = "state"
    higher_is_better: ClassVar[bool] = False
