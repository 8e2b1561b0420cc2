"""The five shipped wmf methods, each written on the public interface (`cltoolkit.suites.wmf.api`) alone: no driver
knows their names. Light to import (torch is imported inside the hooks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.suites.wmf.api import (
    Minibatch,
    ModelSpec,
    Sampling,
    TaskEnd,
    TaskStart,
    TrainingSet,
    WorldModelMethod,
)

if TYPE_CHECKING:
    import torch

    from cltoolkit.suites.wmf.world import RSSM

__all__ = [
    "EWC",
    "EwcParams",
    "Finetuning",
    "ProgressiveNets",
    "ProgressiveParams",
    "ReplayInfinite",
    "ReplayParams",
    "UGMTMMethod",
    "UgParams",
]


class Finetuning(WorldModelMethod[None]):
    """Sequential training, no protection (the lower bound): task B trains every parameter on B data only."""

    summary: ClassVar[str] = "sequential training, no protection"
    stream: ClassVar[str | None] = "finetuning"


class ReplayParams(Strict):
    taskAShare: float = Field(gt=0, lt=1)
    """Share of each task-B batch drawn from task-A training windows (the rest from task B); used by
    `sampling` fixed-share."""
    sampling: Literal["fixed-share", "uniform-episodes"] = "fixed-share"
    """`fixed-share` (wmf-v1): every task-B batch holds round(taskAShare x batch) task-A windows, each uniform over
    all task-A windows, and task-B windows for the rest. `uniform-episodes` (WorldModelsBenchmark's combined
    `ReplayBuffer`): each window picks one of all task-A and task-B training episodes uniformly, then a start uniformly
    within it."""


class ReplayInfinite(WorldModelMethod[ReplayParams]):
    """Keeps all data of all tasks: the task-B phase trains on batches mixing task-A and task-B windows (upper
    bound; half its updates' windows go to task A, so its FT mixes transfer with a halved budget on B)."""

    Params = ReplayParams
    summary: ClassVar[str] = "task-B phase on A+B data"
    stream: ClassVar[str | None] = "replay_infinite"

    def __post_init__(self) -> None:
        self.kept: list[TrainingSet] = []

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        self.kept.append(task.training)

    def sampling(self, task: TaskStart) -> Sampling:
        if not self.kept:
            return super().sampling(task)
        n_old = round(task.batch * float(self.params.taskAShare))
        return Sampling(
            [(self.kept[-1], n_old), (task.training, task.batch - n_old)],
            uniform_episodes=self.params.sampling == "uniform-episodes",
        )


class EwcParams(Strict):
    # the protocol key is `lambda`
    lambda_: float = Field(alias="lambda", gt=0)
    """Penalty weight: (lambda / 2) sum F (theta - theta_A)^2, or lambda sum F (...)^2 with `penalty` full."""
    penalty: Literal["half", "full"] = "half"
    """`half` (wmf-v1): (lambda / 2) sum F (theta - theta_A)^2; `full`: lambda sum F (...)^2, as WorldModelsBenchmark's
    code."""


class EWC(WorldModelMethod[EwcParams]):
    """Elastic weight consolidation with the diagonal Fisher of log p(z'|z, a) from h = 0 on held-out task-A
    transitions (exactly zero on every encoder parameter, so it cannot protect the VAE)."""

    Params = EwcParams
    summary: ClassVar[str] = "EWC on the transition component"
    stream: ClassVar[str | None] = "ewc"
    uses_importance_set: ClassVar[bool] = True
    data_access: ClassVar[frozenset[str]] = frozenset({"training", "importance-set"})

    def __post_init__(self) -> None:
        self.penalty: Any = None

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        if task.importance is None:  # the last task: nothing follows to protect it from
            return
        from cltoolkit.suites.wmf.method_models import EwcPenalty, fisher_diagonal
        from cltoolkit.suites.wmf.train import state

        imp = task.importance
        fisher = fisher_diagonal(model, imp.z, imp.a, imp.z_next)
        device = next(model.parameters()).device
        anchor = {k: v.to(device) for k, v in state(model).items()}
        factor = 1.0 if self.params.penalty == "full" else 0.5
        self.penalty = EwcPenalty(dict(fisher.items()), anchor, float(self.params.lambda_), factor)

    def extra_loss(self, model: RSSM, batch: Minibatch) -> torch.Tensor | None:
        return None if self.penalty is None else self.penalty(model)

    def diagnostics(self) -> dict[str, float | None]:
        if self.penalty is None:
            return {}
        fisher = self.penalty.fisher
        return {"ewcFisherEncoderMax": max(float(f.abs().max()) for n, f in fisher.items() if n.startswith("vae."))}


class ProgressiveParams(Strict):
    lateral: Literal["column-states", "shared-state"] = "column-states"
    """`column-states` (wmf-v1): each column keeps its own hidden state and the new column reads the frozen column's
    state directly. `shared-state` (WorldModelsBenchmark's `src/baselines/progressive_nets.py`): one hidden state, the
    frozen column is run on it and reaches the new column through a learned lateral Linear(h, h)."""


class ProgressiveNets(WorldModelMethod[ProgressiveParams]):
    """A new GRU column (and prior head) at the switch, reading the frozen column through a lateral connection;
    shared VAE keeps training; the newest column is used at inference."""

    Params = ProgressiveParams
    summary: ClassVar[str] = "progressive GRU columns, shared VAE"
    stream: ClassVar[str | None] = "progressive_nets"

    def build(self, spec: ModelSpec) -> RSSM:
        from cltoolkit.suites.wmf.method_models import ProgressiveRSSM

        lateral = self.params.lateral if self.params is not None else "column-states"
        return ProgressiveRSSM(
            spec.latent, spec.hidden, spec.action, spec.channels, spec.beta, shared_state=lateral == "shared-state"
        )

    def begin_task(self, model: RSSM, task: TaskStart) -> None:
        if task.index > 0:
            model.switch()  # a new column and head; the previous column and head frozen


class UgParams(Strict):
    experts: int = Field(ge=2)
    """GRU experts (K)."""
    dropout: float = Field(gt=0, lt=1)
    """Dropout of the uncertainty head."""
    mcPasses: int = Field(ge=2)
    """MC-dropout passes in training."""
    mcPassesEval: int = Field(ge=2)
    """MC-dropout passes in evaluation."""
    thresholdWindow: int = Field(ge=1)
    """Uncertainty values the learned threshold reads."""
    gateLambda: float = Field(gt=0)
    """Gate sharpness."""
    expertInit: Literal["global-rng", "per-expert-generator"] = "global-rng"
    """`global-rng` (wmf-v1): PyTorch's GRUCell initialisation from the run's generator. `per-expert-generator`
    (WorldModelsBenchmark): expert k uniform in +-1/sqrt(hidden) from its own generator seeded k * 1337 + 42 (the same
    in every run)."""
    thresholdHistory: Literal["per-batch", "per-step"] = "per-batch"
    """`per-batch` (wmf-v1): one history entry per update (the batch's mean uncertainty over all steps), one tau.
    `per-step` (WorldModelsBenchmark): each time step pushes its batch-mean uncertainty and reads a new tau."""
    mcEstimates: Literal["shared", "separate"] = "shared"
    """`shared` (wmf-v1): one MC-dropout estimate drives the gate and the calibration loss. `separate`
    (WorldModelsBenchmark): two independent estimates."""
    gradientFactor: Literal["none", "last-step-gate"] = "none"
    """`none` (wmf-v1): the mixture's own gate weighting only. `last-step-gate` (WorldModelsBenchmark's backward hooks):
    each trainable expert's gradient is also multiplied by its batch-mean gate at the update's last time step."""
    calibrationSteps: Literal["all-but-last", "all"] = "all-but-last"
    """`all-but-last` (wmf-v1): the calibration target of the window's last transition is not computed. `all`
    (WorldModelsBenchmark): every transition of the window."""


class UGMTMMethod(WorldModelMethod[UgParams]):
    """UG-MTM: uncertainty-gated mixture of GRU experts (MC-dropout uncertainty, learned threshold, softmax gate);
    at the switch the next expert is activated and the VAE, prior head and expert 0 are frozen. Its gating lives in
    the model's forward pass; its task-A phase is its own model's."""

    Params = UgParams
    summary: ClassVar[str] = "uncertainty-gated mixture of transition experts"
    stream: ClassVar[str | None] = "ug_mtm"
    own_task_a_model: ClassVar[bool] = True

    def build(self, spec: ModelSpec) -> RSSM:
        from cltoolkit.suites.wmf.method_models import UGMTM

        return UGMTM(spec, self.params)

    def begin_task(self, model: RSSM, task: TaskStart) -> None:
        if task.index > 0:
            model.switch()  # the next expert active; VAE, prior head and expert 0 frozen
