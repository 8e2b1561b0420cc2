"""The method library in nav4 (`cltoolkit.suites.library.core`): online EWC, Synaptic Intelligence, an L2 anchor and
A-GEM, each the library's algorithm bound to this suite's interface. The suite's loss on a batch is the PPO loss
(`Learner.policy_loss`); importances are computed from samples the method keeps from the phase's last rollouts (its
bookkeeping, counted as such); A-GEM's reference batch is drawn from the suite's memory (counted as replay). Light to
import (torch is imported inside the hooks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cltoolkit.suites.library import core
from cltoolkit.suites.nav4.api import Nav4Method, Nav4Minibatch, Nav4TaskEnd, Nav4TaskStart, ParamsT, Rollout
from cltoolkit.suites.nav4.methods import AgentParams

if TYPE_CHECKING:
    import torch

    from cltoolkit.suites.nav4.agent import Learner, Reservoir
    from cltoolkit.suites.step import Step

__all__ = ["Nav4AGEM", "Nav4L2", "Nav4LwF", "Nav4MAS", "Nav4OnlineEWC", "Nav4PackNet", "Nav4SI"]


class Nav4EwcParams(AgentParams, core.EwcFields):
    """The PPO learner's fields and online EWC's."""


class Nav4SiParams(AgentParams, core.SiFields):
    """The PPO learner's fields and Synaptic Intelligence's."""


class Nav4L2Params(AgentParams, core.L2Fields):
    """The PPO learner's fields and the L2 anchor's."""


class Nav4AgemParams(AgentParams, core.AgemFields):
    """The PPO learner's fields and A-GEM's."""


class Nav4MasParams(AgentParams, core.MasFields):
    """The PPO learner's fields and MAS's."""


class Nav4LwfParams(AgentParams, core.LwfFields):
    """The PPO learner's fields and LwF's."""


class Nav4PackNetParams(AgentParams, core.PackNetFields):
    """The PPO learner's fields and PackNet's (`retrainUpdates`: optimiser steps on the phase's last rollout)."""


class _Nav4Library(Nav4Method[ParamsT]):
    """The library's nav4 methods keep their algorithm's state in `algo`; it round-trips with the checkpoints the
    driver writes at task boundaries."""

    algo: core.OnlineEWC | core.SynapticIntelligence | core.L2Anchor | core.AGEM | core.MAS | core.PackNet

    def state_dict(self) -> dict[str, Any]:
        return {"algo": self.algo.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.algo.load_state_dict(state["algo"])

    def diagnostics(self) -> dict[str, float | None]:
        return self.algo.diagnostics()


class _Nav4Importance(_Nav4Library[ParamsT]):
    """A penalty weighted by importances computed at a task's end from samples of the phase's last rollouts, which
    the method keeps (its own copies: used outside the updates, so their passes are its bookkeeping)."""

    algo: core.OnlineEWC | core.MAS

    def __post_init__(self) -> None:
        self.kept: list[dict[str, Any]] = []

    def _keep(self) -> int:
        raise NotImplementedError

    def _importances(self, learner: Learner, batches: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def observe(self, learner: Learner, rollout: Rollout) -> None:
        _keep(self.kept, rollout, self.params.minibatches, self._keep())

    def end_task(self, learner: Learner, task: Nav4TaskEnd) -> None:
        self._importances(learner, [{k: v.to(learner.device) for k, v in b.items()} for b in self.kept])
        self.kept = []

    def extra_loss(self, learner: Learner, minibatch: Nav4Minibatch) -> torch.Tensor | None:
        return self.algo.penalty(learner.net.named_parameters)


class Nav4OnlineEWC(_Nav4Importance[Nav4EwcParams]):
    """Online EWC (Kirkpatrick et al. 2017; Schwarz et al. 2018): the empirical Fisher of the PPO loss on samples of
    the phase's last `fisherBatches` rollouts (each rollout's every `minibatches`-th sample), merged into a running
    Fisher at each task's end."""

    Params = Nav4EwcParams
    algo: core.OnlineEWC
    summary = "online EWC (library)"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.algo = core.OnlineEWC(self.params)

    def _keep(self) -> int:
        return int(self.params.fisherBatches)

    def _importances(self, learner: Learner, batches: list[dict[str, Any]]) -> None:
        self.algo.end_task(learner.net.named_parameters, batches, learner.policy_loss)


class Nav4SI(_Nav4Library[Nav4SiParams]):
    """Synaptic Intelligence (Zenke et al. 2017) on the step hooks: the path integral of the gradient read after
    backward (the PPO loss plus the penalty, before clipping) times each step's parameter change."""

    Params = Nav4SiParams
    algo: core.SynapticIntelligence
    summary = "Synaptic Intelligence (library)"

    def __post_init__(self) -> None:
        self.algo = core.SynapticIntelligence(self.params)

    def begin_task(self, learner: Learner, task: Nav4TaskStart) -> None:
        self.algo.begin_task(learner.net.named_parameters)

    def after_backward(self, learner: Learner, step: Step) -> None:
        self.algo.after_backward(learner.net.named_parameters)

    def after_step(self, learner: Learner, step: Step) -> None:
        self.algo.after_step(learner.net.named_parameters)

    def end_task(self, learner: Learner, task: Nav4TaskEnd) -> None:
        self.algo.end_task(learner.net.named_parameters)

    def extra_loss(self, learner: Learner, minibatch: Nav4Minibatch) -> torch.Tensor | None:
        return self.algo.penalty(learner.net.named_parameters)


class Nav4L2(_Nav4Library[Nav4L2Params]):
    """An L2 pull towards the parameters at the end of the previous task (the unweighted baseline)."""

    Params = Nav4L2Params
    algo: core.L2Anchor
    summary = "L2 anchor to the previous task (library)"

    def __post_init__(self) -> None:
        self.algo = core.L2Anchor(self.params)

    def end_task(self, learner: Learner, task: Nav4TaskEnd) -> None:
        self.algo.end_task(learner.net.named_parameters)

    def extra_loss(self, learner: Learner, minibatch: Nav4Minibatch) -> torch.Tensor | None:
        return self.algo.penalty(learner.net.named_parameters)


class Nav4AGEM(_Nav4Library[Nav4AgemParams]):
    """A-GEM (Chaudhry et al. 2019) on the after-backward hook: every training rollout goes to the suite's reservoir
    memory; each step's gradient is projected against the PPO loss's gradient on `referenceSamples` samples drawn
    from it (counted as replayed samples, so the step counts partly as a replay update)."""

    Params = Nav4AgemParams
    algo: core.AGEM
    summary = "A-GEM with the suite's reservoir memory (library)"

    def __post_init__(self) -> None:
        self.algo = core.AGEM(self.params)
        self.memory: Reservoir | None = None

    def begin_task(self, learner: Learner, task: Nav4TaskStart) -> None:
        if self.memory is None:
            self.memory = learner.memory or learner.new_memory(self.params.capacity, self.params.selection)

    def observe(self, learner: Learner, rollout: Rollout) -> None:
        if self.memory is not None:
            self.memory.add(rollout)

    def after_backward(self, learner: Learner, step: Step) -> None:
        memory = self.memory

        def reference() -> torch.Tensor | None:
            if memory is None or len(memory) == 0 or learner.task == 0:
                return None  # the first task has nothing to protect
            return learner.policy_loss(memory.sample(self.params.referenceSamples, learner.device))

        self.algo.after_backward(learner.net.named_parameters, reference)


def _keep(kept: list[dict[str, Any]], rollout: Rollout, every: int, last: int) -> None:
    """Keep every `every`-th sample of a rollout, for the last `last` rollouts (the method's own copies: used only
    at the task's end, outside the updates, so the suite counts their passes as bookkeeping)."""
    import numpy as np
    import torch

    kept.append({k: torch.from_numpy(np.array(v[::every])) for k, v in rollout.batch.items()})
    del kept[:-last]


class Nav4MAS(_Nav4Importance[Nav4MasParams]):
    """Memory Aware Synapses (Aljundi et al. 2018): importance from the gradient of the squared norm of the policy's
    logits on samples of the phase's last `importanceBatches` rollouts, summed over tasks."""

    Params = Nav4MasParams
    algo: core.MAS
    summary = "MAS (library)"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.algo = core.MAS(self.params)

    def _keep(self) -> int:
        return int(self.params.importanceBatches)

    def _importances(self, learner: Learner, batches: list[dict[str, Any]]) -> None:
        self.algo.end_task(learner.net.named_parameters, batches, lambda b: learner.net(b["obs"])[0])


class Nav4LwF(Nav4Method[Nav4LwfParams]):
    """Learning without Forgetting (Li & Hoiem 2016): a frozen copy of the network at each task's end; every
    minibatch adds the temperature-softened KL from the copy's action distribution to the network's, on the
    minibatch's own observations (the copy's passes are the method's, without gradients)."""

    Params = Nav4LwfParams
    summary = "LwF: policy distillation towards the previous task's network (library)"

    def __post_init__(self) -> None:
        self.algo = core.LwF(self.params)

    def begin_task(self, learner: Learner, task: Nav4TaskStart) -> None:
        self.algo.begin_task(learner.net)  # a checkpoint's copy is rebuilt in this network's shape

    def end_task(self, learner: Learner, task: Nav4TaskEnd) -> None:
        self.algo.end_task(learner.net)

    def extra_loss(self, learner: Learner, minibatch: Nav4Minibatch) -> torch.Tensor | None:
        import torch

        old = self.algo.old
        if old is None:
            return None
        obs = minibatch.batch["obs"]
        with torch.no_grad():
            target = old(obs)[0]
        return self.algo.distill_logits(learner.net(obs)[0], target)

    def state_dict(self) -> dict[str, Any]:
        return self.algo.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.algo.load_state_dict(state)


class Nav4PackNet(_Nav4Library[Nav4PackNetParams]):
    """PackNet (the library's) on the whole network (nav4's policy has one head): during phase t only the weights t
    owns learn (biases until the first pruning); after it t keeps the largest 1 / (T - t) of its weights and releases
    the rest to phase t + 1 (`ownership`; the suite sets them to 0 and retrains on the phase's last rollout); each task
    is evaluated with the weights of the phases after its own at 0. Evaluation so knows the task, which no other nav4
    method is told: a declared difference (PackNet needs task identity at test time)."""

    Params = Nav4PackNetParams
    algo: core.PackNet
    summary = "PackNet: iterative pruning, an equal share of the network per task (library)"

    def __post_init__(self) -> None:
        self.algo = core.PackNet(self.params, tasks=1)
        self.index = 0

    def begin_task(self, learner: Learner, task: Nav4TaskStart) -> None:
        self.algo.tasks, self.index = task.total, task.index

    def after_backward(self, learner: Learner, step: Step) -> None:
        self.algo.mask_gradients(learner.net.named_parameters, self.index)

    def ownership(self, learner: Learner, task: Nav4TaskEnd) -> dict[str, torch.Tensor]:
        return self.algo.prune(learner.net.named_parameters, task.index)

    def retrain_updates(self) -> int:
        return int(self.params.retrainUpdates)
