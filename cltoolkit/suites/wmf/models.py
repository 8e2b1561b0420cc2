"""Protocol section of the `wmf` suite (world-model forgetting benchmark, seed 000). A skeleton: the wmf suite
issue adds the model, method and training sections."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase

__all__ = ["Family", "Level", "WmfProtocol"]


class Physics(Strict):
    """Physics of a task, applied at runtime."""

    gravity: float | None = None
    """Gravity magnitude (m/s^2); null where the family has none."""
    massScale: float = 1.0
    """Multiplier of every body mass."""
    frictionScale: float = 1.0
    """Multiplier of every friction coefficient."""


class TaskRef(Strict):
    """One task of a pair."""

    env: str
    """Environment id of the family (e.g. `MiniGrid-Empty-5x5-v0`, `HalfCheetah-v5`, `cheetah/run`)."""
    physics: Physics = Field(default_factory=Physics)
    """Physics changes applied at runtime."""


class Level(Strict):
    """One labelled dynamic distance: a task pair."""

    id: Literal["min", "med", "max"]
    """Distance label."""
    taskA: TaskRef
    """First task."""
    taskB: TaskRef
    """Second task."""
    seeds: list[int] = Field(min_length=1)
    """Training seeds of this cell."""


class Family(Strict):
    """An environment family with its three levels."""

    id: Literal["minigrid", "gym", "dmc"]
    """Family id."""
    renderer: Literal["minigrid", "mujoco", "dm_control"]
    """How frames are produced."""
    levels: list[Level] = Field(min_length=1)
    """Distance levels."""


class WmfProtocol(ProtocolBase):
    """A wmf protocol."""

    suite: Literal["wmf"]
    """The `wmf` suite."""
    families: list[Family] = Field(min_length=1)
    """Families x distance levels = cells."""
    design: str
    """The benchmark design in words, until the suite types every section."""
