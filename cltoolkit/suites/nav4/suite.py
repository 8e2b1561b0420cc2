"""The `nav4` suite: protocol model, method declarations, the freeze-time duplicate-layout check and the driver
(environments in `env.py`, agents in `agent.py`, the run in `driver.py`, analysis in `analysis.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from cltoolkit.components import Method, Suite
from cltoolkit.errors import Problem
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.suites.nav4.models import Nav4Protocol

if TYPE_CHECKING:
    from cltoolkit.run.spec import RunOutput, RunSpec

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
    """How many replayed samples join each minibatch of m new ones: round(m f / (1 - f)), a share f of the samples
    processed. A count, not a weight: their loss is added to the new samples' loss with weight `replayLossWeight` (a
    sum of two means), and the update is counted as gradient and replay updates in proportion to the two counts."""
    replayLossWeight: float = Field(default=1.0, ge=0.0)
    """Weight of the replayed samples' loss in the sum with the new samples' loss (nav4-v1: 1, implicitly): the
    replay weight is this loss weight; `replayFraction` only sets how many replayed samples are drawn."""
    behaviourCloningCoef: float = Field(default=0.0, ge=0.0)
    """Weight of the cloning terms on replayed samples (CLEAR-style): KL(stored policy || current policy) plus half
    the squared error between the current and the stored value estimate; 0 for plain replay."""
    cloneFrom: Literal["all-memory", "completed-phases"] = "all-memory"
    """Which replayed samples the cloning terms act on: every sample in memory (nav4-v1), or only samples of
    phases already completed, so that the phase in progress is never cloned towards its own early behaviour."""


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
    analysis = "nav4"
    summary = "four-task 9x9 MiniGrid navigation diagnostic (PPO agents, replay, references)"

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
        """Refuse when a final-test layout duplicates a training or validation layout (fingerprints)."""
        from cltoolkit.suites.nav4.layouts import split_manifest

        assert isinstance(protocol, Nav4Protocol)
        try:
            self._manifest = split_manifest(protocol)
        except ValueError as exc:  # too few distinct layouts in a seed range
            return [Problem("/seeds/splits", str(exc))]
        problems = []
        for task, entry in self._manifest["tasks"].items():
            for key, other in (("testInTrain", "training"), ("testInValidation", "validation")):
                if entry[key]:
                    problems.append(
                        Problem(
                            "/seeds/splits",
                            f"{task}: final-test layouts of seeds {entry[key][:5]} duplicate {other} layouts "
                            f"({len(entry[key])} in all); change the seed ranges",
                        )
                    )
        return problems

    def split_manifest(self, protocol: ProtocolBase) -> dict[str, object] | None:
        manifest = getattr(self, "_manifest", None)
        if manifest is None:
            from cltoolkit.suites.nav4.layouts import split_manifest

            assert isinstance(protocol, Nav4Protocol)
            manifest = split_manifest(protocol)
        return manifest

    def tasks(self, protocol: ProtocolBase) -> list[str]:
        assert isinstance(protocol, Nav4Protocol)
        return [t.id for t in protocol.environment.tasks]

    def device_problem(self, device: str) -> str | None:
        """A torch suite: `device` must resolve on this machine (cuda needs a CUDA device torch can see)."""
        from cltoolkit.suites.devices import device_problem

        return device_problem(device)

    def execute(self, protocol: ProtocolBase, spec: RunSpec, workdir: Path) -> RunOutput:
        from cltoolkit.run.spec import RunOutput
        from cltoolkit.suites.devices import describe_device, resolve_device
        from cltoolkit.suites.nav4.driver import run

        assert isinstance(protocol, Nav4Protocol)
        device = resolve_device(spec.device)
        out = run(protocol, spec.comparison, spec.seed, spec.order, workdir, device)
        return RunOutput(
            metrics=out["metrics"], budget=out["budget"], device=describe_device(device), precision="float32"
        )
