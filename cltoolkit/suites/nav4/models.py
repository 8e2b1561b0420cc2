"""Protocol section of the `nav4` suite: the four-task navigation diagnostic (seed 002)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase

__all__ = ["Nav4Environment", "Nav4Evaluation", "Nav4Protocol", "Nav4Task"]


class Nav4Task(Strict):
    """One task family."""

    id: Literal["goal", "key", "hazards", "combined"]
    """Task id."""
    name: str
    """What the task asks."""


class Nav4Environment(Strict):
    """The environment: four procedurally generated task families sharing one interface."""

    name: str
    """Name of the diagnostic."""
    summary: str
    """What it is for."""
    caveat: str
    """What success would and would not show."""
    gridSize: int = Field(ge=5, le=64)
    """Grid side, walls included."""
    episodeActionLimit: int = Field(ge=1, le=100_000)
    """Actions per episode."""
    minPathLength: int = Field(ge=1)
    """Shortest solution (in moves) a generated layout must need; easier layouts are regenerated."""
    tasks: list[Nav4Task] = Field(min_length=1)
    """Task families."""
    interface: str
    """The shared observation / action interface in words."""
    observation: Literal["egocentric-full-grid"] = "egocentric-full-grid"
    """Observation: the full grid re-centred on the agent and rotated to its heading (still fully observed),
    with the task cue as a channel."""


class Nav4Evaluation(Strict):
    """How held-out success is measured."""

    episodesPerTask: int = Field(ge=1, le=1_000_000)
    """Final-test episodes per task per evaluation."""
    policy: Literal["sampled", "greedy"]
    """Evaluation policy."""
    split: Literal["test"] = "test"
    """Seed split the layouts come from."""
    curvePoints: int = Field(ge=1)
    """Learning-curve evaluations per task phase (validation layouts)."""
    curveEpisodes: int = Field(ge=1, le=1_000_000)
    """Episodes per learning-curve point."""


class Nav4Protocol(ProtocolBase):
    """A nav4 protocol."""

    suite: Literal["nav4"]
    """The `nav4` suite."""
    environment: Nav4Environment
    """What is evaluated."""
    evaluation: Nav4Evaluation
    """Held-out evaluation."""
    calibration: str
    """The calibration clause: how pilots may revise the draft before freezing."""
    calibrationRecord: str = ""
    """What the pilot found and what was revised because of it (written before freezing)."""
    randomStreams: Literal["seed", "seed-and-order"] = "seed"
    """What a run's initialisation and random streams derive from: the training seed alone (nav4-v1: the runs of one
    seed in different task orders share them), or the seed and the task order (every replicate independent)."""
    replicateUnit: str = "training seed x task order"
    """The replicate the gates count (one number per replicate)."""
    methodNotes: list[dict[str, str]] = Field(default_factory=list)
    """The plan's method statements (title, text)."""

    def stream_seed(self, seed: int, order: str | None) -> int:
        """The seed a run's initialisation and random streams derive from (see `randomStreams`)."""
        if self.randomStreams == "seed" or order is None:
            return seed
        import hashlib

        digest = hashlib.sha256(f"nav4|{seed}|{order}".encode()).digest()
        return int.from_bytes(digest[:4], "little") >> 1

    def task_order(self, order: str | None) -> list[str]:
        """Task ids in training order: the named task order, else the environment's order."""
        if order is None:
            return [t.id for t in self.environment.tasks]
        return list(next(o.tasks for o in self.seeds.taskOrders if o.id == order))
