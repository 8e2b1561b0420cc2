"""The crl suite's methods: CW's fine-tuning and single-task reference; its regularizers L2, EWC, SI and MAS and its
A-GEM (the method library's algorithms, applied to the actor's and the critics' shared parameters: CW's
`common_variables`, heads excluded); LwF, the behaviour-cloning candidate and PackNet; perfect-memory replay (the
buffer kept across tasks). Each runs on either learner (CW's SAC, or PPO for discrete actions: the hooks' `sac`),
but perfect memory, which keeps SAC's off-policy buffer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.suites.crl.api import CrlMethod, CrlTask
from cltoolkit.suites.library import core

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    import torch
    from torch import nn

    from cltoolkit.suites.crl.api import Learner
    from cltoolkit.suites.step import Step

__all__ = [
    "L2",
    "CrlAGEM",
    "CrlEWC",
    "CrlFinetuning",
    "CrlMAS",
    "CrlPackNet",
    "CrlReplayCloning",
    "CrlSI",
    "MultiTask",
    "PerfectMemory",
    "SingleTask",
]


def shared(sac: Learner, critic: bool = True) -> Iterator[tuple[str, nn.Parameter]]:
    """CW's `all_common_variables`: the actor's trunk (and its output layers where it has one head) and the critics'
    trunks (and their output layer where single-headed); under PPO, the whole value network. `critic` False: the
    actor's alone (CW's `actor_common_variables`: its regularizers weight the critics' by 0 unless
    `--regularize_critic`)."""
    from cltoolkit.suites.crl.sac import TwinCritic

    heads = sac.config.heads > 1
    for name, p in sac.actor.named_parameters():
        if not (heads and name.split(".")[0] in ("mu", "log_std", "logits")):
            yield f"actor.{name}", p
    if not critic:
        return
    head: tuple[str, ...] = ()
    if isinstance(sac.critic, TwinCritic) and sac.config.critic_heads > 1:  # CW's `--regularize_critic`
        last = len(sac.critic.weights) - 1
        head = (f"weights.{last}", f"biases.{last}")
    for name, p in sac.critic.named_parameters():
        if name not in head:
            yield f"critic.{name}", p


class NoParams(Strict):
    """No hyperparameters."""


class CrlFinetuning(CrlMethod[NoParams]):
    """The learner (CW's SAC, or PPO) trained on each task in turn, nothing added: the forgetting baseline (CW's
    `finetuning`)."""

    Params = NoParams
    summary = "fine-tuning: each task in turn, nothing added (forgetting baseline)"


class SingleTask(CrlMethod[NoParams]):
    """The reference of forward transfer: each task learnt by a fresh learner from scratch (CW's single-task runs),
    evaluated on the same schedule. Its role in a protocol is `reference`."""

    Params = NoParams
    summary = "reference: a fresh learner on each task (forward transfer's baseline)"
    regime = "single-task"


class MultiTaskParams(Strict):
    """CW's `run_mt.py` settings (its defaults; the paper's runs set the learning rate to 1e-4)."""

    popart: bool = True
    """Normalise each task's value targets with PopArt (CW's `--use_popart`, default true; the paper reports both)."""
    popartBeta: float = Field(default=3e-4, gt=0, le=1)
    """PopArt's step for its statistics (CW's `--popart_beta`)."""
    lr: float | None = Field(default=None, gt=0, le=1)
    """Adam's step size for this reference (CW's paper runs: 1e-4); None: the protocol's `learner.lr`."""


class MultiTask(CrlMethod[MultiTaskParams]):
    """The multi-task reference (CW's `run_mt.py`, `MultiTaskEnv`): every task learnt at once by one learner, in one
    phase of the stream's whole budget (steps per task x tasks) that moves to the next task's environment at every
    episode's start; one replay buffer throughout; each task's actor and critic head picked by the transition's task;
    PopArt on the critics' targets by default. Its role in a protocol is `reference`: it measures what the network
    can hold at once, not continual learning. Only average performance is defined (no own-training phase: no
    forgetting, no forward transfer), as in CW's tables."""

    Params = MultiTaskParams
    summary = "reference: every task at once, one buffer, PopArt (CW's multi-task run)"
    regime = "multi-task"


class _Library(CrlMethod[Any]):
    """A library algorithm (`algo`) whose state round-trips and whose diagnostics reach the record."""

    algo: Any

    def anchored(self, sac: Learner) -> Iterator[tuple[str, nn.Parameter]]:
        """The parameters a regularizer protects: the shared ones, the critics' only where `regularizeCritic`."""
        return shared(sac, critic=getattr(self.params, "regularizeCritic", True))

    def diagnostics(self) -> dict[str, float | None]:
        out: dict[str, float | None] = self.algo.diagnostics()
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"algo": self.algo.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.algo.load_state_dict(state["algo"])


class _FromLastBatches(_Library):
    """A penalty whose end-of-task estimate (a Fisher, an importance) reads copies of the task's last `keep` update
    batches, kept by the method (its bookkeeping: the estimate's passes are counted as such)."""

    kept: list[dict[str, torch.Tensor]]
    keep: int

    def estimate_of(self, sac: Learner) -> Callable[[dict[str, torch.Tensor]], torch.Tensor]:
        """What the library's `end_task` differentiates on each kept batch."""
        raise NotImplementedError

    def extra_loss(self, sac: Learner, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        older = self.kept[max(0, len(self.kept) - self.keep + 1) :]  # the last keep - 1 (none when keep is 1)
        self.kept = [*older, _copied(batch)]
        penalty: torch.Tensor | None = self.algo.penalty(lambda: self.anchored(sac))
        return penalty

    def end_task(self, sac: Learner, task: CrlTask) -> None:
        self.algo.end_task(lambda: self.anchored(sac), self.kept, self.estimate_of(sac))
        self.kept = []


def _copied(batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in batch.items()}


class L2Params(core.L2Fields):
    """The L2 pull's strength (CW's `--cl_reg_coef`, 1e5 in the paper's runs)."""

    regularizeCritic: bool = True
    """Penalise the critics' shared parameters as well as the actor's. CW's default is False (its regularizers weight
    the critics' parameters by 0 unless `--regularize_critic`, which the paper's L2, EWC and MAS runs leave unset); True
    is what every protocol frozen before this field ran (docs/cw10.md)."""


class L2(_Library):
    """An L2 pull of the shared parameters towards their values at the end of the previous task (CW's `l2`)."""

    Params = L2Params
    summary = "an L2 pull towards the previous task's parameters"

    def __post_init__(self) -> None:
        self.algo = core.L2Anchor(self.params)

    def extra_loss(self, sac: Learner, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        penalty: torch.Tensor | None = self.algo.penalty(lambda: self.anchored(sac))
        return penalty

    def end_task(self, sac: Learner, task: CrlTask) -> None:
        self.algo.end_task(lambda: self.anchored(sac))


class CrlEwcParams(core.EwcFields):
    """Online EWC's fields (CW's `--cl_reg_coef` is `lambda`: 1e4 in the paper's runs)."""

    regularizeCritic: bool = True
    """Penalise the critics' shared parameters as well as the actor's. CW's default is False (its regularizers weight
    the critics' parameters by 0 unless `--regularize_critic`, which the paper's L2, EWC and MAS runs leave unset); True
    is what every protocol frozen before this field ran (docs/cw10.md)."""


class CrlEWC(_FromLastBatches):
    """Online EWC on the shared parameters (the library's `OnlineEWC`): the Fisher is the empirical diagonal of the
    learner's loss (SAC's critics' and actor's terms; PPO's value and surrogate terms) over copies of the task's last
    `fisherBatches` update batches, which the method keeps (its bookkeeping: the passes are counted as such). CW's
    EWC estimates the Fisher from the policy's and the critics' output gradients instead; a declared difference."""

    Params = CrlEwcParams
    summary = "online EWC on the shared parameters"

    def __post_init__(self) -> None:
        self.algo = core.OnlineEWC(self.params)
        self.kept = []
        self.keep = self.params.fisherBatches

    def estimate_of(self, sac: Learner) -> Callable[[dict[str, torch.Tensor]], torch.Tensor]:
        def loss(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            parts = sac.losses(batch)
            return parts["value"] + parts["policy"]

        return loss


class CrlSiParams(core.SiFields):
    """Synaptic Intelligence's fields."""

    regularizeCritic: bool = True
    """Penalise the critics' shared parameters as well as the actor's. CW's default is False (its regularizers weight
    the critics' parameters by 0 unless `--regularize_critic`, which the paper's L2, EWC and MAS runs leave unset); True
    is what every protocol frozen before this field ran (docs/cw10.md)."""


class CrlSI(_Library):
    """Synaptic Intelligence (the library's) on the shared parameters, on the step hooks: the path integral of the
    gradient read after backward (the learner's losses plus the penalty) times each step's parameter change."""

    Params = CrlSiParams
    summary = "Synaptic Intelligence on the shared parameters"

    def __post_init__(self) -> None:
        self.algo = core.SynapticIntelligence(self.params)

    def begin_task(self, sac: Learner, task: CrlTask) -> None:
        self.algo.begin_task(lambda: self.anchored(sac))

    def after_backward(self, sac: Learner, step: Step) -> None:
        self.algo.after_backward(lambda: self.anchored(sac))

    def after_step(self, sac: Learner, step: Step) -> None:
        self.algo.after_step(lambda: self.anchored(sac))

    def end_task(self, sac: Learner, task: CrlTask) -> None:
        self.algo.end_task(lambda: self.anchored(sac))

    def extra_loss(self, sac: Learner, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        penalty: torch.Tensor | None = self.algo.penalty(lambda: self.anchored(sac))
        return penalty


class CrlMasParams(core.MasFields):
    """MAS's fields (CW's `--cl_reg_coef` is `lambda`: 1e4 in the paper's runs)."""

    regularizeCritic: bool = True
    """Penalise the critics' shared parameters as well as the actor's. CW's default is False (its regularizers weight
    the critics' parameters by 0 unless `--regularize_critic`, which the paper's L2, EWC and MAS runs leave unset); True
    is what every protocol frozen before this field ran (docs/cw10.md)."""


class CrlMAS(_FromLastBatches):
    """Memory Aware Synapses (the library's) on the shared parameters: importance from the gradient of the squared
    norm of the actor's outputs (SAC's action means, or the action probabilities) and the critics' values (PPO: the
    state value) on copies of the task's last `importanceBatches` update batches (the method's bookkeeping), summed
    over tasks."""

    Params = CrlMasParams
    summary = "MAS on the shared parameters"

    def __post_init__(self) -> None:
        self.algo = core.MAS(self.params)
        self.kept = []
        self.keep = self.params.importanceBatches

    def estimate_of(self, sac: Learner) -> Callable[[dict[str, torch.Tensor]], torch.Tensor]:
        import torch

        def outputs(b: dict[str, torch.Tensor]) -> torch.Tensor:
            action = sac.actor.output(b["obs"], b["head"])
            return torch.cat([action, sac.critic(b["obs"], b["actions"], b["head"]).T], dim=1)

        return outputs


class CrlAgemParams(Strict):
    """A-GEM's fields as CW names them."""

    memoryPerTask: int = Field(default=10_000, ge=1, le=10**8)
    """Transitions of each finished task the suite keeps in its episodic memory (CW's `episodic_mem_per_task`)."""
    referenceSamples: int = Field(default=128, ge=1, le=65536)
    """Transitions drawn from it for each update's reference gradient (CW's `episodic_batch_size`)."""


class CrlAGEM(_Library):
    """A-GEM (the library's projection) on the actor and the critics, as CW runs it (`--regularize_critic`): from
    the second task on, each update's gradient is projected against the gradient of the learner's loss (SAC's
    critics' and actor's terms; PPO's value and surrogate terms on the advantages and returns stored with the rows)
    on `referenceSamples` transitions drawn from the suite's episodic memory (counted as replay)."""

    Params = CrlAgemParams
    summary = "A-GEM on the suite's episodic memory"

    def __post_init__(self) -> None:
        self.algo = core.AGEM(
            core.AgemFields(capacity=self.params.memoryPerTask, referenceSamples=self.params.referenceSamples)
        )
        self.task: CrlTask | None = None

    def episodic_per_task(self) -> int:
        return int(self.params.memoryPerTask)

    def begin_task(self, sac: Learner, task: CrlTask) -> None:
        self.task = task

    def after_backward(self, sac: Learner, step: Step) -> None:
        memory = self.task.memory if self.task is not None else None

        def reference() -> torch.Tensor | None:
            if memory is None:
                return None  # the first task has nothing to protect
            parts = sac.losses(memory.draw(self.params.referenceSamples))
            return parts["value"] + parts["policy"]

        self.algo.after_backward(lambda: [*sac.actor.named_parameters(), *sac.critic.named_parameters()], reference)


class CrlLwfParams(Strict):
    """LwF's weight (a Gaussian policy has no temperature to soften)."""

    strength: float = Field(gt=0, le=1e12)
    """Weight of the distillation term."""


class CrlLwF(_Library):
    """Learning without Forgetting (Li & Hoiem 2016) for the actor: at each task's end the library's LwF keeps a
    frozen copy of the actor; on every later update, `strength` times the KL divergence from the copy's policy (the
    Gaussian before the tanh, or the categorical) to the actor's, on the update's own observations, under each
    earlier task's head (averaged over them; the one head of a single-head actor). No memory: the current task's
    observations stand in for the earlier tasks' (the contrast with the cloning candidate, which draws them from the
    suite's episodic memory). The copy's passes carry no gradient; the actor's are on the update's own batch
    (counted as the task's data)."""

    Params = CrlLwfParams
    summary = "LwF: the previous actor's policies distilled on the current task's observations (library)"

    def __post_init__(self) -> None:
        self.algo = core.LwF(core.LwfFields(strength=self.params.strength))
        self.kl: list[float] = []

    def begin_task(self, sac: Learner, task: CrlTask) -> None:
        self.algo.begin_task(sac.actor)  # a checkpoint's copy is rebuilt in the actor's shape

    def end_task(self, sac: Learner, task: CrlTask) -> None:
        self.algo.end_task(sac.actor)

    def extra_loss(self, sac: Learner, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        import torch

        from cltoolkit.suites.crl.sac import policy_kl

        old = self.algo.old
        if old is None:
            return None
        obs = batch["obs"]
        heads = range(task.index) if sac.config.heads > 1 else range(1)
        kls = []
        for k in heads:
            head = torch.full((len(obs),), k, dtype=torch.long)
            kls.append(policy_kl(old, sac.actor, obs, head))
        kl = torch.stack(kls).mean()
        self.kl.append(float(kl.detach()))
        term: torch.Tensor = self.params.strength * kl
        return term

    def diagnostics(self) -> dict[str, float | None]:
        return {"meanDistillationKl": sum(self.kl) / len(self.kl) if self.kl else None}

    def state_dict(self) -> dict[str, Any]:
        return {**self.algo.state_dict(), "kl": list(self.kl)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.algo.load_state_dict(state)
        self.kl = list(state.get("kl", []))


class CrlPackNetParams(core.PackNetFields):
    """PackNet's fields (CW's `--packnet_retrain_steps` is `retrainUpdates`: 100,000 at 1,000,000 steps per task in
    the paper's runs)."""

    clipNorm: float | None = Field(default=None, gt=0, le=1e6)
    """This comparison's SAC gradient clipping in place of `learner.clipNorm` (CW clips for its PackNet runs only:
    `--clipnorm=2e-5`); None: the learner's. SAC only."""


def packed(sac: Learner) -> Iterator[tuple[str, nn.Parameter]]:
    """What PackNet manages, as CW's `PackNet_SAC` does without `--regularize_critic` (its paper runs): the actor's
    trunk where the actor has one head per task (the heads are each task's own), the whole actor where it has one;
    never the critics. Named as the suite's `ownership` expects (`actor.<name>`)."""
    heads = sac.config.heads > 1
    for name, p in sac.actor.named_parameters():
        if not (heads and name.split(".")[0] in ("mu", "log_std", "logits")):
            yield f"actor.{name}", p


class CrlPackNet(_Library):
    """PackNet (the library's) on the actor, CW's `packnet`: during task t only the trunk weights t owns learn (the
    biases and the LayerNorm only until the first pruning); after its last step t releases the smallest
    (T - t - 1) / (T - t) of them to task t + 1 (`ownership`; the suite sets them to 0), and the suite runs
    `retrainUpdates` updates on t's buffer for the weights t kept; each task is evaluated with the weights of later
    tasks at 0. The critics learn freely (CW's PackNet runs did not regularise them)."""

    Params = CrlPackNetParams
    summary = "PackNet: iterative pruning, an equal share of the actor's trunk per task (library)"

    def __post_init__(self) -> None:
        self.algo = core.PackNet(self.params, tasks=1)
        self.index = 0

    def begin_task(self, sac: Learner, task: CrlTask) -> None:
        self.algo.tasks, self.index = task.total, task.index

    def after_backward(self, sac: Learner, step: Step) -> None:
        self.algo.mask_gradients(lambda: packed(sac), self.index)

    def ownership(self, sac: Learner, task: CrlTask) -> dict[str, torch.Tensor]:
        owners: dict[str, torch.Tensor] = self.algo.prune(lambda: packed(sac), task.index)
        return owners

    def retrain_updates(self) -> int:
        return int(self.params.retrainUpdates)


class CloningParams(Strict):
    """Behaviour cloning of earlier tasks' policies on the suite's episodic memory."""

    memoryPerTask: int = Field(default=10_000, ge=1, le=10**8)
    """Transitions of each finished task the suite keeps in its episodic memory."""
    cloningSamples: int = Field(default=128, ge=1, le=65536)
    """Transitions drawn from it for each update's cloning term (counted as replay)."""
    cloningCoef: float = Field(gt=0, le=1e12)
    """Weight of the cloning term."""


class CrlReplayCloning(CrlMethod[CloningParams]):
    """Replay with behaviour cloning, nav4's candidate idea on this suite (the closest published relative: ClonEx-SAC,
    Wolczyk et al. 2022): at each task's end the method keeps a frozen copy of the actor; on every later update it
    draws `cloningSamples` transitions from the suite's episodic memory (earlier tasks only, counted as replay) and
    adds `cloningCoef` times the mean KL divergence from the copy's policy (the Gaussian before the tanh, or the
    categorical of discrete actions) to the actor's, each row on its own task's head. The actor alone is cloned; the
    critics learn the current task."""

    Params = CloningParams
    summary = "behaviour cloning of earlier tasks' policies on the suite's episodic memory"

    def __post_init__(self) -> None:
        self.old: nn.Module | None = None
        self.pending: dict[str, Any] | None = None
        """The copy's weights from a checkpoint, made into a module at the next task's start (it needs the config)."""
        self.kl: list[float] = []

    def episodic_per_task(self) -> int:
        return int(self.params.memoryPerTask)

    def begin_task(self, sac: Learner, task: CrlTask) -> None:
        if self.pending is not None:
            self._copy(sac, self.pending)
            self.pending = None

    def end_task(self, sac: Learner, task: CrlTask) -> None:
        self._copy(sac, sac.actor.state_dict())

    def _copy(self, sac: Learner, weights: Mapping[str, Any]) -> None:
        import torch

        from cltoolkit.suites.crl.sac import make_actor

        with torch.random.fork_rng(devices=[]):  # its throwaway initialisation draws nothing from the run's stream
            old = make_actor(sac.config)  # a fresh module: the suite's counting hooks stay on the suite's actor
        old.load_state_dict(weights)
        self.old = old.requires_grad_(False)

    def state_dict(self) -> dict[str, Any]:
        return {"old": self.old.state_dict() if self.old is not None else None, "kl": list(self.kl)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pending, self.kl = state["old"], list(state["kl"])

    def extra_loss(self, sac: Learner, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        from cltoolkit.suites.crl.sac import policy_kl

        if task.memory is None or self.old is None:
            return None
        drawn = task.memory.draw(self.params.cloningSamples)
        kl = policy_kl(self.old, sac.actor, drawn["obs"], drawn["head"])
        self.kl.append(float(kl.detach()))
        term: torch.Tensor = self.params.cloningCoef * kl
        return term

    def diagnostics(self) -> dict[str, float | None]:
        return {"meanCloningKl": sum(self.kl) / len(self.kl) if self.kl else None}


class MemoryParams(Strict):
    """The replay buffer's batch (CW's perfect memory: 512)."""

    batchSize: int | None = Field(default=None, ge=1, le=65536)
    """The update's batch drawn from the kept buffer (None: the learner's `batchSize`)."""


class PerfectMemory(CrlMethod[MemoryParams]):
    """The replay buffer kept across tasks, reservoir selection at capacity (CW's `reservoir` / perfect memory):
    every transition of an earlier task in an update's batch is counted as replay."""

    Params = MemoryParams
    summary = "the replay buffer kept across tasks (reservoir; off-policy learners only)"
    keep_buffer: ClassVar[bool] = True
    selection = "reservoir"
