"""The method library in wmf (`cltoolkit.suites.library.core`): online EWC, Synaptic Intelligence, an L2 anchor, MAS,
LwF, A-GEM, experience replay and PackNet, each the library's algorithm bound to this suite's interface. The suite's
loss on a batch is the world-model loss (`RSSM.loss`, with the posterior noise at zero for importances); each method
trains its own task-A model with its hooks (`own_task_a_model`), so its importances come from its own task-A phase.
Light to import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from cltoolkit.suites.library import core as lib
from cltoolkit.suites.wmf.api import Minibatch, ParamsT, Sampling, TaskEnd, TaskStart, WorldModelMethod

if TYPE_CHECKING:
    import torch

    from cltoolkit.suites.step import Step
    from cltoolkit.suites.wmf.memory import WindowMemory
    from cltoolkit.suites.wmf.world import RSSM

__all__ = ["WmfAGEM", "WmfL2", "WmfLwF", "WmfMAS", "WmfOnlineEWC", "WmfPackNet", "WmfReplay", "WmfSI"]


class _WmfLibrary(WorldModelMethod[ParamsT]):
    own_task_a_model: ClassVar[bool] = True

    algo: lib.OnlineEWC | lib.SynapticIntelligence | lib.L2Anchor | lib.MAS | lib.PackNet

    def state_dict(self) -> dict[str, Any]:
        return {"core": self.algo.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.algo.load_state_dict(state["core"])

    def diagnostics(self) -> dict[str, float | None]:
        return self.algo.diagnostics()


def _loss(model: RSSM) -> Any:
    import torch

    def loss(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        obs, actions = batch
        eps = torch.zeros(obs.shape[0], obs.shape[1], model.latent, device=obs.device)
        value: torch.Tensor = model.loss(obs, actions, eps)[0]
        return value

    return loss


class _WmfImportance(_WmfLibrary[ParamsT]):
    """A penalty weighted by importances computed at a task's end from the phase's last minibatches, which the
    method keeps (its own copies: used outside the updates, so their passes are its bookkeeping)."""

    algo: lib.OnlineEWC | lib.MAS

    def __post_init__(self) -> None:
        self.kept: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _keep(self) -> int:
        raise NotImplementedError

    def _importances(self, model: RSSM) -> None:
        raise NotImplementedError

    def extra_loss(self, model: RSSM, batch: Minibatch) -> torch.Tensor | None:
        self.kept.append((batch.obs.detach().clone(), batch.actions.detach().clone()))
        del self.kept[: -self._keep()]
        return self.algo.penalty(model.named_parameters)

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        if not task.last:
            self._importances(model)
        self.kept = []

    def state_dict(self) -> dict[str, Any]:
        return {"core": self.algo.state_dict(), "kept": [list(b) for b in self.kept]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.algo.load_state_dict(state["core"])
            self.kept = [(b[0], b[1]) for b in state["kept"]]


class WmfOnlineEWC(_WmfImportance[lib.EwcFields]):
    """Online EWC (Kirkpatrick et al. 2017; Schwarz et al. 2018): the empirical Fisher of the world-model loss on the
    phase's last `fisherBatches` minibatches, merged into a running Fisher at each task's end (every parameter, the
    encoder's included, unlike `wmf.ewc`'s transition-only Fisher)."""

    Params = lib.EwcFields
    algo: lib.OnlineEWC
    summary: ClassVar[str] = "online EWC on the whole world model (library)"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.algo = lib.OnlineEWC(self.params)

    def _keep(self) -> int:
        return int(self.params.fisherBatches)

    def _importances(self, model: RSSM) -> None:
        self.algo.end_task(model.named_parameters, self.kept, _loss(model))


class WmfSI(_WmfLibrary[lib.SiFields]):
    """Synaptic Intelligence (Zenke et al. 2017) on the step hooks: the path integral of the gradient read after
    backward (the world-model loss plus the penalty) times each step's parameter change."""

    Params = lib.SiFields
    algo: lib.SynapticIntelligence
    summary: ClassVar[str] = "Synaptic Intelligence (library)"

    def __post_init__(self) -> None:
        self.algo = lib.SynapticIntelligence(self.params)

    def begin_task(self, model: RSSM, task: TaskStart) -> None:
        self.algo.begin_task(model.named_parameters)

    def after_backward(self, model: RSSM, step: Step) -> None:
        self.algo.after_backward(model.named_parameters)

    def after_step(self, model: RSSM, step: Step) -> None:
        self.algo.after_step(model.named_parameters)

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        if not task.last:
            self.algo.end_task(model.named_parameters)

    def extra_loss(self, model: RSSM, batch: Minibatch) -> torch.Tensor | None:
        return self.algo.penalty(model.named_parameters)


class WmfL2(_WmfLibrary[lib.L2Fields]):
    """An L2 pull towards the parameters at the end of task A (the unweighted baseline)."""

    Params = lib.L2Fields
    algo: lib.L2Anchor
    summary: ClassVar[str] = "L2 anchor to the task-A model (library)"

    def __post_init__(self) -> None:
        self.algo = lib.L2Anchor(self.params)

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        if not task.last:
            self.algo.end_task(model.named_parameters)

    def extra_loss(self, model: RSSM, batch: Minibatch) -> torch.Tensor | None:
        return self.algo.penalty(model.named_parameters)


class WmfReplay(WorldModelMethod[lib.ReplayFields]):
    """Experience replay from the suite's window memory: at a task's end its training windows are offered to the
    memory (reservoir or task-balanced, at most `capacity` windows); from then on `replayShare` of each update's
    windows are drawn from memory (counted as replay). Unlike `wmf.replay-infinite`, which keeps every window."""

    Params = lib.ReplayFields
    summary: ClassVar[str] = "experience replay from the suite's window memory (library)"

    def __post_init__(self) -> None:
        self.memory: WindowMemory | None = None

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        if not task.last and task.memory is not None:
            self.memory = task.memory.new(self.params.capacity, self.params.selection)
            self.memory.add(task.training)

    def sampling(self, task: TaskStart) -> Sampling:
        if self.memory is None or len(self.memory) == 0:
            return super().sampling(task)
        n = max(1, round(task.batch * self.params.replayShare))
        replayed = self.memory.sources(n)
        return Sampling([(task.training, task.batch - sum(c for _, c in replayed)), *replayed])

    def diagnostics(self) -> dict[str, float | None]:
        return {"memoryWindows": float(len(self.memory))} if self.memory is not None else {}


class WmfAGEM(WorldModelMethod[lib.AgemFields]):
    """A-GEM (Chaudhry et al. 2019) on the after-backward hook: at task A's end its training windows go to the
    suite's window memory; every task-B step's gradient is projected against the world-model loss's gradient on
    `referenceSamples` windows drawn from it (drawn and counted by the suite as replay)."""

    Params = lib.AgemFields
    summary: ClassVar[str] = "A-GEM with the suite's window memory (library)"

    def __post_init__(self) -> None:
        self.algo = lib.AGEM(self.params)
        self.memory: WindowMemory | None = None

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        if not task.last and task.memory is not None:
            self.memory = task.memory.new(self.params.capacity, self.params.selection)
            self.memory.add(task.training)

    def after_backward(self, model: RSSM, step: Step) -> None:
        memory = self.memory

        def reference() -> torch.Tensor | None:
            batch = memory.draw(self.params.referenceSamples) if memory is not None else None
            return None if batch is None else _loss(model)(batch)

        self.algo.after_backward(model.named_parameters, reference)

    def diagnostics(self) -> dict[str, float | None]:
        return self.algo.diagnostics()


def _predictions(model: RSSM, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """What a world model outputs on a window, per window: the posterior means of its frames and the prior means the
    transition predicts for the next ones (MAS's F(x); LwF's distilled outputs)."""
    b, length = obs.shape[:2]
    mu, _ = model.vae.encode(obs.reshape(b * length, *obs.shape[2:]))
    z = mu.view(b, length, -1)
    h, _ = model.sequence(z[:, :-1], actions)
    prior, _ = model.prior(h)
    import torch

    return torch.cat([z.flatten(1), prior.flatten(1)], -1)


class WmfMAS(_WmfImportance[lib.MasFields]):
    """Memory Aware Synapses (Aljundi et al. 2018): importance from the gradient of the squared norm of the model's
    predictions (posterior and prior means) on the phase's last `importanceBatches` minibatches, summed over tasks;
    its own task-A phase runs its hooks."""

    Params = lib.MasFields
    algo: lib.MAS
    summary: ClassVar[str] = "MAS on the whole world model (library)"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.algo = lib.MAS(self.params)

    def _keep(self) -> int:
        return int(self.params.importanceBatches)

    def _importances(self, model: RSSM) -> None:
        self.algo.end_task(model.named_parameters, self.kept, lambda b: _predictions(model, *b))


class WmfLwF(WorldModelMethod[lib.LwfFields]):
    """Learning without Forgetting (Li & Hoiem 2016) for a world model: a frozen copy of the task-A model; every
    task-B update adds the squared error between the model's predictions (posterior and prior means) and the copy's
    on the update's own windows."""

    Params = lib.LwfFields
    summary: ClassVar[str] = "LwF: distillation towards the task-A world model (library)"

    def __post_init__(self) -> None:
        self.algo = lib.LwF(self.params)

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        if not task.last:
            self.algo.end_task(model)

    def extra_loss(self, model: RSSM, batch: Minibatch) -> torch.Tensor | None:
        import torch

        old = self.algo.old
        if old is None:
            return None
        with torch.no_grad():
            target = _predictions(old, batch.obs, batch.actions)  # type: ignore[arg-type]
        return self.algo.distill_values(_predictions(model, batch.obs, batch.actions), target)


class WmfPackNet(_WmfLibrary[lib.PackNetFields]):
    """PackNet (Mallya & Lazebnik 2018; the library's, as Continual World runs it) on the whole world model: task A
    trains every weight for `training.updatesPerTask - retrainUpdates` updates, keeps the largest half of each weight
    matrix (`ownership`; the suite sets the rest to 0 and retrains task A's half for `retrainUpdates` updates, biases
    and normalisation frozen from then on); task B trains only the weights released to it. Task A is evaluated with
    task B's weights at 0, so its task-A model is exactly the one it left task A with (PF 0, RD 0 up to rounding:
    the price is the capacity, seen in task B's fit and FT). Evaluation so knows the task, which no other wmf method
    is told: a declared difference (PackNet needs task identity at test time)."""

    Params = lib.PackNetFields
    algo: lib.PackNet
    summary: ClassVar[str] = "PackNet: iterative pruning, half the network per task (library)"

    def __post_init__(self) -> None:
        self.algo = lib.PackNet(self.params, tasks=2)
        self.index = 0

    def begin_task(self, model: RSSM, task: TaskStart) -> None:
        self.index = task.index

    def after_backward(self, model: RSSM, step: Step) -> None:
        self.algo.mask_gradients(model.named_parameters, self.index)

    def ownership(self, model: RSSM, task: TaskEnd) -> dict[str, torch.Tensor]:
        return self.algo.prune(model.named_parameters, task.index)

    def retrain_updates(self) -> int:
        return int(self.params.retrainUpdates)
