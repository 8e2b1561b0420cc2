"""Protocol section of the `sessions` suite: the held-out-sessions toy of seed 003 ("experimental design").

s_{t+1} = stateCoef s_t + actionCoef a_t + c_j + e_t, with a session-constant c_j ~ N(mean, sd^2) the learner never
sees. One run simulates fresh cohorts, splits them three ways (grouped by session, random transitions, a shifted
cohort) and fits one model per split.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase

__all__ = ["ActionPolicy", "Cohort", "SessionSystem", "SessionsProtocol", "SplitPlan"]


class SessionSystem(Strict):
    """s_{t+1} = stateCoef s_t + actionCoef a_t + c_j + e_t."""

    stateCoef: float = Field(gt=-1.0, lt=1.0)
    """Shared damping coefficient A (|A| < 1: stable)."""
    actionCoef: float
    """Shared action gain B."""
    noiseSd: float = Field(ge=0.0)
    """Standard deviation of the process noise e_t (independent per step)."""
    initialStateSd: float = Field(ge=0.0)
    """s_0 ~ N(0, initialStateSd^2), per session."""


class ActionPolicy(Strict):
    """The collection policy: i.i.d. actions, independent of the state (an open-loop exploration policy)."""

    kind: Literal["gaussian", "uniform"]
    """`gaussian`: a ~ N(0, scale^2); `uniform`: a ~ U(-scale, scale)."""
    scale: float = Field(gt=0.0)
    """Standard deviation (gaussian) or half-width (uniform)."""


class Cohort(Strict):
    """A population of sessions: how many, and the law of their session constants c_j."""

    id: Literal["main", "shifted"]
    """`main`: training and grouped / random evaluation; `shifted`: a cohort with a changed c_j population."""
    sessions: int = Field(ge=2, le=10**6)
    """Sessions in the cohort."""
    sessionEffectMean: float
    """Mean of c_j."""
    sessionEffectSd: float = Field(ge=0.0)
    """Standard deviation of c_j."""


class SplitPlan(Strict):
    """How each evaluation set is built, and which protocol evaluation set it fills."""

    groupedTestSessions: int = Field(ge=1)
    """Main-cohort sessions held out whole (the rest train): the grouped split."""
    groupedSet: str
    """Evaluation set measured on the grouped split (held-out unit: session)."""
    randomTestFraction: float = Field(gt=0.0, lt=1.0)
    """Share of main-cohort transitions held out at random, sessions ignored: the random transition split."""
    randomSet: str
    """Evaluation set measured on the random split (held-out unit: transition)."""
    shiftedSet: str
    """Evaluation set measured on every session of the shifted cohort, by the model fitted on the grouped split."""


class SessionsProtocol(ProtocolBase):
    """A sessions protocol."""

    suite: Literal["sessions"]
    """The `sessions` suite."""
    system: SessionSystem
    """The data-generating system."""
    sessionLength: int = Field(ge=4, le=10**6)
    """Transitions per session."""
    featureWindow: int = Field(ge=1)
    """W: rows are centred at t >= W - 1 so that every model is scored on identical rows, whatever window it uses."""
    actionPolicy: ActionPolicy
    """Collection policy."""
    cohorts: list[Cohort] = Field(min_length=2, max_length=2)
    """The `main` and the `shifted` cohort."""
    splits: SplitPlan
    """The three evaluation sets."""

    @model_validator(mode="after")
    def _cohorts(self) -> SessionsProtocol:
        ids = sorted(c.id for c in self.cohorts)
        if ids != ["main", "shifted"]:
            raise ValueError(f"cohorts must be one `main` and one `shifted`, got {ids}")
        if self.splits.groupedTestSessions >= self.cohort("main").sessions:
            raise ValueError("groupedTestSessions must leave at least one training session")
        if self.featureWindow >= self.sessionLength:
            raise ValueError("featureWindow must be shorter than sessionLength")
        return self

    def cohort(self, cohort_id: str) -> Cohort:
        return next(c for c in self.cohorts if c.id == cohort_id)
