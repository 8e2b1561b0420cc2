"""The five shipped nav4 methods, each written on the public interface (`cltoolkit.suites.nav4.api`) alone: no
driver knows their names. Light to import (torch is imported inside the hooks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.suites.nav4.api import Nav4Method, Nav4Minibatch, Nav4TaskEnd, Nav4TaskStart, Rollout

if TYPE_CHECKING:
    import torch

    from cltoolkit.suites.nav4.agent import Learner, Reservoir

__all__ = [
    "AgentParams",
    "Joint",
    "Nav4ReplayParams",
    "ReplayCloning",
    "Sequential",
    "Specialist",
    "SubgoalBonus",
    "UniformReplay",
]


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


class Nav4ReplayParams(AgentParams):
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
    cloneTargets: Literal["stored", "phase-end-copy"] = "stored"
    """What the cloning terms pull towards: the policy and value stored with each sample when it was collected
    (CLEAR; nav4-v1), or a frozen copy of the network taken at the end of the last completed phase, evaluated on the
    replayed states (ClonEx, Wolczyk et al. 2022; the crl suite's candidate). A stored target is the behaviour of the
    moment the sample was collected, early in its phase as often as late; the copy is the phase's final policy."""


class Sequential(Nav4Method[AgentParams]):
    """Sequential training without replay: the forgetting baseline."""

    Params = AgentParams
    summary = "sequential PPO, no replay (forgetting baseline)"


class UniformReplay(Nav4Method[Nav4ReplayParams]):
    """Fixed-capacity uniform (reservoir) replay over all tasks seen: every training rollout is offered to the
    memory; each minibatch of m new samples is joined by round(m f / (1 - f)) replayed ones, whose clipped-surrogate
    loss (with their stored behaviour probabilities and advantages) is added with weight `replayLossWeight`."""

    Params = Nav4ReplayParams
    summary = "PPO with fixed-capacity reservoir replay"
    cloning: ClassVar[bool] = False
    """Add the CLEAR-style cloning terms on replayed samples (with `behaviourCloningCoef`)."""

    def __post_init__(self) -> None:
        self.memory: Reservoir | None = None
        self.task = 0
        self.old: torch.nn.Module | None = None
        """The network's frozen copy from the last completed phase's end (cloneTargets `phase-end-copy`)."""
        self.pending: dict[str, Any] | None = None
        """The copy's weights from a checkpoint, made into a module at the next phase's start."""

    def _copies(self) -> bool:
        return self.cloning and self.params.cloneTargets == "phase-end-copy"

    def begin_task(self, learner: Learner, task: Nav4TaskStart) -> None:
        if self.memory is None:  # the learner's memory (restored with it), else a new one
            self.memory = learner.memory or learner.new_memory(self.params.capacity)
        self.task = task.index
        if self.pending is not None:
            self._copy(learner, self.pending)
            self.pending = None

    def end_task(self, learner: Learner, task: Nav4TaskEnd) -> None:
        if self._copies():
            self._copy(learner, learner.net.state_dict())

    def _copy(self, learner: Learner, weights: dict[str, Any]) -> None:
        import torch

        with torch.random.fork_rng(devices=[]):  # its throwaway initialisation draws nothing from the run's stream
            old = self.network(learner.canvas)  # a fresh module: the suite's counting hooks stay on its own network
        old.load_state_dict(weights)
        self.old = old.to(learner.device).requires_grad_(False).eval()

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"task": self.task}  # the memory's contents are the learner's (it made it)
        if self.old is not None:
            state["old"] = {k: v.detach().cpu().clone() for k, v in self.old.state_dict().items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.task = int(state["task"])
        self.pending = state.get("old")

    def observe(self, learner: Learner, rollout: Rollout) -> None:
        assert self.memory is not None
        self.memory.add(rollout)

    def extra_loss(self, learner: Learner, minibatch: Nav4Minibatch) -> torch.Tensor | None:
        p = self.params
        n = round(minibatch.size * p.replayFraction / (1 - p.replayFraction))
        if not n or self.memory is None or len(self.memory) == 0:
            return None
        old = self.memory.sample(n, learner.device)
        term: torch.Tensor = p.replayLossWeight * self._replay_loss(learner, old)  # x 1.0: exact
        return term

    def _replay_loss(self, learner: Learner, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """The clipped surrogate on replayed samples; with cloning, plus KL(old policy || current) and value
        cloning towards the stored values (CLEAR-style)."""
        import torch

        loss = learner.policy_loss(b)
        coef = self.params.behaviourCloningCoef if self.cloning else 0.0
        if coef > 0:
            if self.params.cloneFrom == "completed-phases":  # only behaviour of completed phases is cloned
                keep = b["task"] < self.task
                if not bool(keep.any()):
                    return loss
                b = {key: value[keep] for key, value in b.items()}
            target_logits, target_value = b["logits"], b["value"]
            if self._copies():
                if self.old is None:  # no phase has completed: nothing to clone
                    return loss
                with torch.no_grad():
                    target_logits, target_value = self.old(b["obs"])
            logits, value = learner.net(b["obs"])
            old = torch.log_softmax(target_logits, -1)
            kl = (old.exp() * (old - torch.log_softmax(logits, -1))).sum(-1).mean()
            loss = loss + coef * (kl + 0.5 * (value - target_value).pow(2).mean())
        return loss


class ReplayCloning(UniformReplay):
    """Replay plus behaviour cloning of the old policy on replayed states (CLEAR-style candidate)."""

    summary = "replay + behaviour cloning of the old policy (CLEAR-style)"
    cloning: ClassVar[bool] = True


class Joint(Nav4Method[AgentParams]):
    """Joint training on all tasks at once (reference: different data access)."""

    Params = AgentParams
    summary = "joint multi-task PPO (reference)"
    regime = "joint"


class Specialist(Nav4Method[AgentParams]):
    """One network per task (reference: different capacity assumptions)."""

    Params = AgentParams
    summary = "single-task specialists (reference)"
    regime = "specialists"
