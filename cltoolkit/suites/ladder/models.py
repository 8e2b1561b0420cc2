"""Protocol section of the `ladder` suite: the systems and every rung parameter (seed 001)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase

__all__ = ["LadderProtocol", "LinearCoefficients", "Rungs", "Systems"]


class LinearCoefficients(Strict):
    """`s' = a s + b u + c u_prev (+ noise)`."""

    a: float
    """State coefficient."""
    b: float
    """Action coefficient."""
    c: float = 0.0
    """Previous-action coefficient."""


class System(LinearCoefficients):
    """An environment: linear dynamics plus Gaussian process noise."""

    noiseSd: float = Field(ge=0.0)
    """Process-noise standard deviation (the control rungs execute the system without noise)."""


class Systems(Strict):
    """The true system and the changed transfer system."""

    true: System
    """The system every rung except transfer uses."""
    transfer: System
    """The changed system of the transfer rung."""


class OneStep(Strict):
    """Rung 1: one-step prediction on i.i.d. transitions."""

    metric: str = "ladder.one-step-mse-v1"
    """Metric id."""
    transitions: int = Field(ge=2, le=10**8)
    """M, the number of i.i.d. transitions."""
    seed: int = Field(ge=0)
    """Generator seed of the transitions (numpy PCG64)."""
    stateSd: float = Field(gt=0.0)
    """Standard deviation of the sampled state."""
    actionSd: float = Field(gt=0.0)
    """Standard deviation of the sampled action."""
    prevActionSd: float = Field(gt=0.0)
    """Standard deviation of the sampled previous action."""


class RolloutRung(Strict):
    """Rung 2: open-loop rollouts against the noiseless true trajectory."""

    metric: str = "ladder.rollout-rmse-v1"
    """Metric id."""
    s0: float
    """Initial state."""
    uPrev0: float = 0.0
    """Previous action before the first step."""
    constantAction: float
    """Constant input of the main rollout."""
    constantSteps: int = Field(ge=1, le=10**8)
    """Horizon of the constant-input rollout (at most 10^8 steps: a float64 trajectory of 0.8 GB)."""
    alternatingAmplitude: float
    """A in u_t = A (-1)^t."""
    alternatingHorizons: list[Annotated[int, Field(ge=1, le=10**8)]] = Field(min_length=1, max_length=100)
    """Horizons of the alternating-input rollouts (each at most 10^8 steps, at most 100 of them)."""


class Intervention(Strict):
    """Rung 3: response difference between a baseline and an intervention input sequence."""

    metric: str = "ladder.intervention-error-v1"
    """Metric id."""
    s0: float
    """Initial state of both trajectories."""
    uPrev0: float = 0.0
    """Previous action before the first step."""
    baselineAction: float
    """Constant baseline input."""
    interventionAmplitude: float
    """A in the intervention input u_t = A (-1)^t."""
    steps: int = Field(ge=1, le=10**8)
    """Horizon H; the metric compares final-state differences."""


class Control(Strict):
    """Rungs 4 and 5: one-step MPC over an action grid, executed in the deterministic system."""

    metric: str = "ladder.tracking-mae-v1"
    """Metric id of the same-environment rung."""
    transferMetric: str = "ladder.transfer-tracking-mae-v1"
    """Metric id of the transfer rung."""
    target: float
    """s*, the tracking target."""
    actionLow: float
    """Lowest action of the grid."""
    actionHigh: float
    """Highest action of the grid."""
    gridPoints: int = Field(ge=2, le=10**6)
    """Equally spaced actions searched."""
    s0: float
    """Initial state."""
    uPrev0: float = 0.0
    """Previous action before the first step."""
    steps: int = Field(ge=1, le=10**8)
    """Control steps executed."""
    tailFirst: int = Field(ge=1, le=10**8)
    """First state (1-based, s_1 is the state after the first action) of the tracking-error tail."""
    tailLast: int = Field(ge=1, le=10**8)
    """Last state of the tail."""
    tieBreak: Literal["lowest-action"] = "lowest-action"
    """Which action wins a tie of predicted cost."""

    @model_validator(mode="after")
    def _tail(self) -> Control:
        if not (self.tailFirst <= self.tailLast <= self.steps):
            raise ValueError(f"tail {self.tailFirst}..{self.tailLast} must lie within 1..{self.steps}")
        if self.actionHigh <= self.actionLow:
            raise ValueError("actionHigh must exceed actionLow")
        return self


class Rungs(Strict):
    """Every rung's parameters."""

    oneStep: OneStep
    """Rung 1."""
    rollout: RolloutRung
    """Rung 2."""
    intervention: Intervention
    """Rung 3."""
    control: Control
    """Rungs 4 (same environment) and 5 (transfer)."""


class LadderProtocol(ProtocolBase):
    """A ladder protocol: candidate dynamics models evaluated on five rungs."""

    suite: Literal["ladder"]
    """The `ladder` suite."""
    systems: Systems
    """True and transfer systems."""
    rungs: Rungs
    """Rung parameters."""
