"""The `nav4` suite: its protocol model and method declarations.

Declared so that `nav4-v1` validates as a draft; running it (environments, agents, driver, analysis) is the
nav4 suite issue's work, and until then `clt run` refuses with a message saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from cltoolkit.components import Method, Suite
from cltoolkit.errors import Problem, Refusal
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.suites.nav4.models import Nav4Protocol

__all__ = ["AgentParams", "Nav4Suite", "ReplayParams", "Sequential", "UniformReplay"]


class SubgoalBonus(Strict):
    """Training-only shaping; success is always scored on the task's own reward."""

    keyPickup: float = Field(ge=0.0)
    """Bonus on the first key pickup of an episode."""
    doorOpen: float = Field(ge=0.0)
    """Bonus on the first door opening of an episode."""


class AgentParams(Strict):
    """PPO agent shared by every nav4 comparison."""

    envs: int = Field(ge=1)
    """Parallel environments."""
    rolloutSteps: int = Field(ge=1)
    """Steps per environment per update."""
    epochs: int = Field(ge=1)
    """PPO epochs per update."""
    minibatches: int = Field(ge=1)
    """Minibatches per epoch."""
    learningRate: float = Field(gt=0.0)
    """Adam learning rate."""
    clip: float = Field(gt=0.0)
    """PPO clip range."""
    entropyCoef: float = Field(ge=0.0)
    """Entropy bonus coefficient."""
    valueCoef: float = Field(ge=0.0)
    """Value-loss coefficient."""
    gamma: float = Field(gt=0.0, le=1.0)
    """Discount."""
    gaeLambda: float = Field(ge=0.0, le=1.0)
    """GAE lambda."""
    maxGradNorm: float = Field(gt=0.0)
    """Gradient-norm clip."""
    network: str
    """Network name (e.g. `small-cnn`)."""
    subgoalBonus: SubgoalBonus
    """Training-only exploration help, identical for every comparison."""
    torchThreads: int = Field(default=1, ge=1)
    """Torch threads per run."""


class ReplayParams(AgentParams):
    """A PPO agent with a fixed-capacity reservoir replay memory over all tasks seen."""

    capacity: int = Field(ge=1)
    """Replay capacity in transitions (disclosed)."""
    replayFraction: float = Field(gt=0.0, lt=1.0)
    """Share of each update's samples drawn from replay (counted as replay updates)."""
    behaviourCloningCoef: float = Field(default=0.0, ge=0.0)
    """Weight of the policy-distillation loss on replayed states (CLEAR-style); 0 for plain replay."""


class Sequential(Method):
    """Sequential training without replay: the forgetting baseline."""

    suite: ClassVar[str] = "nav4"
    Params = AgentParams
    summary = "sequential PPO, no replay (forgetting baseline)"


class UniformReplay(Method):
    """Fixed-capacity uniform (reservoir) replay over all tasks seen."""

    suite: ClassVar[str] = "nav4"
    Params = ReplayParams
    summary = "PPO with fixed-capacity reservoir replay"


class ReplayCloning(Method):
    """Replay plus behaviour cloning of the old policy on replayed states (CLEAR-style candidate)."""

    suite: ClassVar[str] = "nav4"
    Params = ReplayParams
    summary = "replay + behaviour cloning of the old policy (CLEAR-style)"


class Joint(Method):
    """Joint training on all tasks at once (reference: different data access)."""

    suite: ClassVar[str] = "nav4"
    Params = AgentParams
    summary = "joint multi-task PPO (reference)"


class Specialist(Method):
    """One network per task (reference: different capacity assumptions)."""

    suite: ClassVar[str] = "nav4"
    Params = AgentParams
    summary = "single-task specialists (reference)"


class Nav4Suite(Suite):
    """Four-task MiniGrid navigation diagnostic."""

    name = "nav4"
    protocol_model = Nav4Protocol
    summary = "four-task 9x9 navigation diagnostic (draft: not runnable yet)"

    def check(self, protocol: ProtocolBase) -> Iterator[Problem]:
        assert isinstance(protocol, Nav4Protocol)
        tasks = {t.id for t in protocol.environment.tasks}
        for i, order in enumerate(protocol.seeds.taskOrders):
            if sorted(order.tasks) != sorted(tasks):
                yield Problem(f"/seeds/taskOrders/{i}/tasks", f"must be a permutation of {sorted(tasks)}")
        for split in ("train", "validation", "test"):
            if split not in protocol.seeds.splits:
                yield Problem("/seeds/splits", f"missing generator seed range for split {split!r}")

    def freeze_checks(self, protocol: ProtocolBase, document_path: Path) -> Iterable[Problem]:
        return [
            Problem(
                "/safeguards",
                "the duplicate-layout check needs the nav4 environments, which are not implemented yet; "
                "nav4 protocols cannot be frozen before they are",
            )
        ]

    def tasks(self, protocol: ProtocolBase) -> list[str]:
        assert isinstance(protocol, Nav4Protocol)
        return [t.id for t in protocol.environment.tasks]

    def execute(self, protocol: ProtocolBase, spec: object, workdir: Path) -> object:  # type: ignore[override]
        raise Refusal("the nav4 suite cannot run yet: its environments and agents are not implemented")
