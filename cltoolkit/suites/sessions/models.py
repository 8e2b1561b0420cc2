"""Protocol section of the `sessions` suite (seed 003's executable example). A skeleton: the sessions suite
issue adds the models compared and the split definitions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase

__all__ = ["SessionsProtocol"]


class SessionSystem(Strict):
    """s_{t+1} = stateCoef s_t + actionCoef a_t + c_j + e_t."""

    stateCoef: float
    """State coefficient."""
    actionCoef: float
    """Action coefficient."""
    sessionEffectSd: float = Field(ge=0.0)
    """Standard deviation of the per-session offset c_j."""
    noiseSd: float = Field(ge=0.0)
    """Standard deviation of e_t."""


class Cohort(Strict):
    """A cohort of sessions."""

    id: Literal["main", "shifted"]
    """Cohort id."""
    sessions: int = Field(ge=2)
    """Sessions in the cohort."""
    trainSessions: int = Field(ge=1)
    """Sessions used for training (grouped split)."""
    sessionEffectMean: float = 0.0
    """Mean of c_j (the shifted cohort moves it)."""


class SessionsProtocol(ProtocolBase):
    """A sessions protocol."""

    suite: Literal["sessions"]
    """The `sessions` suite."""
    system: SessionSystem
    """The data-generating system."""
    cohorts: list[Cohort] = Field(min_length=1)
    """Cohorts."""
    design: str
    """The design in words, until the suite types every section."""
