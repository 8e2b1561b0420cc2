"""Ladder dynamics models: each predicts s_{t+1} from (s_t, u_t, u_{t-1}).

A model is built from the protocol (its comparison's hyperparameters and the protocol's systems), so a
learned model (least squares here) fits the same interface as a declared one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
from pydantic import Field

from cltoolkit.components import Method
from cltoolkit.protocol._base import Strict
from cltoolkit.suites.ladder.sampling import sample_transitions

if TYPE_CHECKING:
    from cltoolkit.suites.ladder.models import LadderProtocol

ParamsT = TypeVar("ParamsT", bound="Strict | None")
"""A method's hyperparameter model (`Params`), or None for a method without hyperparameters."""

__all__ = [
    "DynamicsModel",
    "LadderTaskEnd",
    "LadderTaskStart",
    "LeastSquares",
    "Linear",
    "LinearModel",
    "OracleController",
    "ZeroAction",
]


class LinearModel:
    """s' = a s + b u + c u_prev, vectorized over numpy arrays."""

    def __init__(self, a: float, b: float, c: float) -> None:
        self.a, self.b, self.c = float(a), float(b), float(c)

    def predict(self, s: np.ndarray | float, u: np.ndarray | float, u_prev: np.ndarray | float) -> np.ndarray:
        return np.asarray(self.a * np.asarray(s) + self.b * np.asarray(u) + self.c * np.asarray(u_prev))

    @property
    def coefficients(self) -> dict[str, float]:
        return {"a": self.a, "b": self.b, "c": self.c}


@dataclass(frozen=True)
class LadderTaskStart:
    """The ladder's one task begins: the method builds its model of the true system."""

    task: str
    """The system the model is built for (`true`; the transfer system is only evaluated, never fitted)."""
    index: int
    """0: the ladder has one task."""
    rungs: tuple[str, ...]
    """The rungs the method takes part in (`oneStep`, `rollout`, `intervention`, `control`, `transfer`)."""


@dataclass(frozen=True)
class LadderTaskEnd:
    """The model is built; the rungs evaluate it next (no hook fires during evaluation)."""

    task: str
    index: int
    last: bool
    """No task follows (always true in the ladder)."""
    model: LinearModel | None
    """What `build` returned (None for a controller that uses no model)."""


@dataclass
class DynamicsModel(Method, Generic[ParamsT]):
    """A ladder method: builds a predictive model, or (for diagnostics) a fixed controller.

    The lifecycle has the names of every suite's (`cltoolkit.plugin`): `begin_task(task)`, then the method's
    learning (`build`, a classmethod of the validated params, the protocol and a seeded generator), then
    `end_task(task)` with the built model, then `diagnostics()` for the record; the ladder has one task and no
    optimiser, so no step hooks."""

    suite: ClassVar[str] = "ladder"
    controls_only: ClassVar[bool] = False
    """Diagnostic controllers take part in the control rungs only."""
    zero_action: ClassVar[bool] = False
    """The controller acts 0 at every step (the closed-loop rung skips the model-based controller)."""

    params: ParamsT
    """The comparison's validated hyperparameters (an instance of `Params`, or None)."""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        """Set up the method's own state (subclasses override; called once per model)."""

    @classmethod
    def build(cls, params: ParamsT, protocol: LadderProtocol, rng: np.random.Generator) -> LinearModel | None:
        """The model (None for a controller that does not use one)."""
        raise NotImplementedError

    def begin_task(self, task: LadderTaskStart) -> None:
        """The task starts (before `build`)."""

    def end_task(self, task: LadderTaskEnd) -> None:
        """The model is built (`task.model`): keep what `diagnostics` reports."""

    def diagnostics(self) -> dict[str, float | None]:
        """Extra numbers about the built model for the record and the report (names are the method's own)."""
        return {}


class LinearParams(Strict):
    """Declared coefficients."""

    a: float
    """State coefficient."""
    b: float
    """Action coefficient."""
    c: float = 0.0
    """Previous-action coefficient."""


class Linear(DynamicsModel[LinearParams]):
    """A declared linear model `s' = a s + b u + c u_prev`."""

    Params = LinearParams
    summary = "declared linear model s' = a s + b u + c u_prev"

    @classmethod
    def build(cls, params: LinearParams, protocol: LadderProtocol, rng: np.random.Generator) -> LinearModel:
        return LinearModel(params.a, params.b, params.c)


class LeastSquaresParams(Strict):
    """Fit on transitions sampled from the true system, independent of the evaluation transitions."""

    transitions: int = Field(ge=3)
    """Training transitions."""
    seed: int = Field(ge=0)
    """Seed of the training sample (distinct from the evaluation seed)."""
    usePrevAction: bool = True
    """Whether the model has a previous-action term."""


class LeastSquares(DynamicsModel[LeastSquaresParams]):
    """A linear model fitted by ordinary least squares on its own sample of true transitions."""

    Params = LeastSquaresParams
    summary = "least-squares fit on its own sample of the true system"

    @classmethod
    def build(cls, params: LeastSquaresParams, protocol: LadderProtocol, rng: np.random.Generator) -> LinearModel:
        sample = sample_transitions(protocol, params.transitions, np.random.default_rng(params.seed))
        columns = [sample.s, sample.u] + ([sample.u_prev] if params.usePrevAction else [])
        coef, *_ = np.linalg.lstsq(np.stack(columns, axis=1), sample.s_next, rcond=None)
        c = float(coef[2]) if params.usePrevAction else 0.0
        return LinearModel(float(coef[0]), float(coef[1]), c)


class OracleController(DynamicsModel[None]):
    """Diagnostic (privileged): one-step MPC with the true coefficients of whichever system it runs in."""

    controls_only = True
    summary = "oracle one-step controller with the true coefficients (privileged diagnostic)"

    @classmethod
    def build(cls, params: None, protocol: LadderProtocol, rng: np.random.Generator) -> None:
        return None


class ZeroAction(DynamicsModel[None]):
    """Diagnostic (trivial): always acts 0, showing the value of control."""

    controls_only = True
    zero_action = True
    summary = "zero action (trivial diagnostic)"

    @classmethod
    def build(cls, params: None, protocol: LadderProtocol, rng: np.random.Generator) -> None:
        return None
