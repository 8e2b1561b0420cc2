"""The `wmf` suite: world-model forgetting benchmark (seed 000) across three families x three labelled distances,
five continual-learning methods, from-scratch references shared per (cell, seed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from cltoolkit.components import Method, Suite
from cltoolkit.errors import Problem
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.suites.wmf.models import WmfProtocol

if TYPE_CHECKING:
    from cltoolkit.run.spec import GridPoint, RunOutput, RunSpec

__all__ = ["EWC", "Finetuning", "ProgressiveNets", "ReplayInfinite", "UGMTMMethod", "WmfSuite"]


class Finetuning(Method):
    """Sequential training, no protection (the lower bound): task B trains every parameter on B data only."""

    suite: ClassVar[str] = "wmf"
    summary: ClassVar[str] = "sequential training, no protection"


class ReplayParams(Strict):
    taskAShare: float = Field(gt=0, lt=1)
    """Share of each task-B batch drawn from task-A training windows (the rest from task B); used by
    `sampling` fixed-share."""
    sampling: Literal["fixed-share", "uniform-episodes"] = "fixed-share"
    """`fixed-share` (wmf-v1): every task-B batch holds round(taskAShare x batch) task-A windows, each uniform over
    all task-A windows, and task-B windows for the rest. `uniform-episodes` (seed 000's combined `ReplayBuffer`): each
    window picks one of all task-A and task-B training episodes uniformly, then a start uniformly within it."""


class ReplayInfinite(Method):
    """Keeps all data of all tasks: the task-B phase trains on batches mixing task-A and task-B windows (upper
    bound; half its updates' windows go to task A, so its FT mixes transfer with a halved budget on B)."""

    suite: ClassVar[str] = "wmf"
    Params = ReplayParams
    summary: ClassVar[str] = "task-B phase on A+B data"


class EwcParams(Strict):
    # the protocol key is `lambda`
    lambda_: float = Field(alias="lambda", gt=0)
    """Penalty weight: (lambda / 2) sum F (theta - theta_A)^2, or lambda sum F (...)^2 with `penalty` full."""
    penalty: Literal["half", "full"] = "half"
    """`half` (wmf-v1): (lambda / 2) sum F (theta - theta_A)^2; `full`: lambda sum F (...)^2, as seed 000's code."""


class EWC(Method):
    """Elastic weight consolidation with the diagonal Fisher of log p(z'|z, a) from h = 0 on held-out task-A
    transitions (exactly zero on every encoder parameter, so it cannot protect the VAE)."""

    suite: ClassVar[str] = "wmf"
    Params = EwcParams
    summary: ClassVar[str] = "EWC on the transition component"


class ProgressiveParams(Strict):
    lateral: Literal["column-states", "shared-state"] = "column-states"
    """`column-states` (wmf-v1): each column keeps its own hidden state and the new column reads the frozen column's
    state directly. `shared-state` (seed 000's `src/baselines/progressive_nets.py`): one hidden state, the frozen
    column is run on it and reaches the new column through a learned lateral Linear(h, h)."""


class ProgressiveNets(Method):
    """A new GRU column (and prior head) at the switch, reading the frozen column through a lateral connection;
    shared VAE keeps training; the newest column is used at inference."""

    suite: ClassVar[str] = "wmf"
    Params = ProgressiveParams
    summary: ClassVar[str] = "progressive GRU columns, shared VAE"


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
    (seed 000): expert k uniform in +-1/sqrt(hidden) from its own generator seeded k * 1337 + 42 (the same in every
    run)."""
    thresholdHistory: Literal["per-batch", "per-step"] = "per-batch"
    """`per-batch` (wmf-v1): one history entry per update (the batch's mean uncertainty over all steps), one tau.
    `per-step` (seed 000): each time step pushes its batch-mean uncertainty and reads a new tau."""
    mcEstimates: Literal["shared", "separate"] = "shared"
    """`shared` (wmf-v1): one MC-dropout estimate drives the gate and the calibration loss. `separate` (seed 000):
    two independent estimates."""
    gradientFactor: Literal["none", "last-step-gate"] = "none"
    """`none` (wmf-v1): the mixture's own gate weighting only. `last-step-gate` (seed 000's backward hooks): each
    trainable expert's gradient is also multiplied by its batch-mean gate at the update's last time step."""
    calibrationSteps: Literal["all-but-last", "all"] = "all-but-last"
    """`all-but-last` (wmf-v1): the calibration target of the window's last transition is not computed. `all` (seed
    000): every transition of the window."""


class UGMTMMethod(Method):
    """UG-MTM: uncertainty-gated mixture of GRU experts (MC-dropout uncertainty, learned threshold, softmax gate);
    at the switch the next expert is activated and the VAE, prior head and expert 0 are frozen."""

    suite: ClassVar[str] = "wmf"
    Params = UgParams
    summary: ClassVar[str] = "uncertainty-gated mixture of transition experts"


_METHODS = {
    "wmf.finetuning": "finetuning",
    "wmf.replay-infinite": "replay_infinite",
    "wmf.ewc": "ewc",
    "wmf.progressive-nets": "progressive_nets",
    "wmf.ug-mtm": "ug_mtm",
}


class WmfSuite(Suite):
    """World-model forgetting benchmark."""

    name = "wmf"
    protocol_model = WmfProtocol
    analysis = "wmf"
    summary = "world-model forgetting: 3 families x 3 distances, 5 methods, PF / RD / FT beside encoder drift"

    def check(self, protocol: ProtocolBase) -> Iterator[Problem]:
        """Beyond `clt protocol validate`'s registry and hyperparameter checks: the driver runs these five methods
        only, method pairs name declared comparisons, MiniGrid tasks carry no physics."""
        assert isinstance(protocol, WmfProtocol)
        for i, comp in enumerate(protocol.comparisons):
            if comp.method not in _METHODS:
                yield Problem(f"/comparisons/{i}/method", f"the wmf driver runs {', '.join(_METHODS)} only")
        ids = {c.id for c in protocol.comparisons}
        for i, pair in enumerate(protocol.methodPairs):
            for field in ("method", "reference"):
                if getattr(pair, field) not in ids:
                    yield Problem(f"/methodPairs/{i}/{field}", f"unknown comparison {getattr(pair, field)!r}")
        if protocol.seedAnalyses is not None:
            for i, comp_id in enumerate(protocol.seedAnalyses.axisMethods):
                if comp_id not in ids:
                    yield Problem(f"/seedAnalyses/axisMethods/{i}", f"unknown comparison {comp_id!r}")
        for fi, family in enumerate(protocol.families):
            for li, level in enumerate(family.levels):
                if family.renderer == "minigrid" and (level.taskA.physics.gravity or level.taskB.physics.gravity):
                    yield Problem(f"/families/{fi}/levels/{li}", "MiniGrid tasks have no physics")

    def cells(self, protocol: ProtocolBase) -> list[str | None]:
        assert isinstance(protocol, WmfProtocol)
        return list(protocol.cell_ids())

    def plan(self, protocol: ProtocolBase, stage: str | None) -> list[GridPoint]:
        """comparisons x cells (the stage's, or all) x (stage seeds that the cell declares): control cells run fewer
        seeds."""
        from cltoolkit.run.spec import GridPoint

        assert isinstance(protocol, WmfProtocol)
        st = protocol.stage(stage)
        points = []
        cells = [c for c in protocol.cell_ids() if not st.cells or c in st.cells]
        for comp in protocol.comparisons:
            for cell in cells:
                level = protocol.cell(cell)[1]
                for seed in st.seeds:
                    if st.purpose == "pilot" or seed in level.seeds:
                        points.append(GridPoint(comp.id, comp.method, seed, None, cell))
        return points

    def device_problem(self, device: str) -> str | None:
        """A torch suite: `device` must resolve on this machine (cuda needs a CUDA device torch can see)."""
        from cltoolkit.suites.devices import device_problem

        return device_problem(device)

    def execute(self, protocol: ProtocolBase, spec: RunSpec, workdir: Path) -> RunOutput:
        from cltoolkit.run.spec import RunOutput
        from cltoolkit.suites.devices import describe_device, resolve_device
        from cltoolkit.suites.wmf.driver import run_cell

        assert isinstance(protocol, WmfProtocol) and spec.cell is not None
        comp = protocol.comparison(spec.comparison)
        device = resolve_device(spec.device)
        out = run_cell(
            protocol, spec.cell, _METHODS[comp.method], dict(comp.hyperparameters), spec.seed, workdir.parent, device
        )
        return RunOutput(
            metrics=out["metrics"],
            budget=out["budget"],
            reused=out["reused"],
            device=describe_device(device),
            precision="float32",
        )
