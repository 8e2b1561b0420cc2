"""The crl suite's methods: CW's fine-tuning, its L2 and EWC regularizers (the method library's algorithms, applied
to the actor's and the critics' shared parameters: CW's `common_variables`, heads excluded), and its perfect-memory
replay (the buffer kept across tasks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from cltoolkit.protocol._base import Strict
from cltoolkit.suites.crl.api import CrlMethod, CrlTask
from cltoolkit.suites.library import core

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import torch
    from torch import nn

    from cltoolkit.suites.crl.sac import Sac

__all__ = ["L2", "CrlEWC", "CrlFinetuning", "PerfectMemory", "SingleTask"]


def shared(sac: Sac) -> Iterator[tuple[str, nn.Parameter]]:
    """CW's `all_common_variables`: the actor's trunk (and its output layers where it has one head) and the critics'
    trunks (and their output layer where single-headed)."""
    heads = sac.config.heads > 1
    for name, p in sac.actor.named_parameters():
        if not (heads and name.split(".")[0] in ("mu", "log_std")):
            yield f"actor.{name}", p
    last = len(sac.critic.weights) - 1
    for name, p in sac.critic.named_parameters():
        if not (sac.config.critic_heads > 1 and name in (f"weights.{last}", f"biases.{last}")):
            yield f"critic.{name}", p


class NoParams(Strict):
    """No hyperparameters."""


class CrlFinetuning(CrlMethod[NoParams]):
    """SAC trained on each task in turn, nothing added: the forgetting baseline (CW's `finetuning`)."""

    Params = NoParams
    summary = "SAC fine-tuning (forgetting baseline)"


class SingleTask(CrlMethod[NoParams]):
    """The reference of forward transfer: each task learnt by a fresh SAC from scratch (CW's single-task runs),
    evaluated on the same schedule. Its role in a protocol is `reference`."""

    Params = NoParams
    summary = "reference: SAC from scratch on each task (forward transfer's baseline)"
    regime = "single-task"


class L2Params(core.L2Fields):
    """The L2 pull's strength (CW's `--cl_reg_coef`, 1e5 in the paper's runs)."""


class L2(CrlMethod[L2Params]):
    """An L2 pull of the shared parameters towards their values at the end of the previous task (CW's `l2`)."""

    Params = L2Params
    summary = "SAC with an L2 pull towards the previous task's parameters"

    def __post_init__(self) -> None:
        self.algo = core.L2Anchor(self.params)
        self.sac: Sac | None = None

    def extra_loss(self, sac: Sac, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        return self.algo.penalty(lambda: shared(sac))

    def end_task(self, sac: Sac, task: CrlTask) -> None:
        self.algo.end_task(lambda: shared(sac))

    def state_dict(self) -> dict[str, Any]:
        return {"algo": self.algo.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.algo.load_state_dict(state["algo"])


class CrlEwcParams(core.EwcFields):
    """Online EWC's fields (CW's `--cl_reg_coef` is `lambda`: 1e4 in the paper's runs)."""


class CrlEWC(CrlMethod[CrlEwcParams]):
    """Online EWC on the shared parameters (the library's `OnlineEWC`): the Fisher is the empirical diagonal of the
    SAC loss (the critics' and the actor's terms) over copies of the task's last `fisherBatches` update batches,
    which the method keeps (its bookkeeping: the passes are counted as such). CW's EWC estimates the Fisher from the
    policy's and the critics' output gradients instead; a declared difference."""

    Params = CrlEwcParams
    summary = "SAC with online EWC on the shared parameters"

    def __post_init__(self) -> None:
        self.algo = core.OnlineEWC(self.params)
        self.kept: list[dict[str, torch.Tensor]] = []

    def extra_loss(self, sac: Sac, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        self.kept = [*self.kept[-(self.params.fisherBatches - 1) :], {k: v.clone() for k, v in batch.items()}]
        return self.algo.penalty(lambda: shared(sac))

    def end_task(self, sac: Sac, task: CrlTask) -> None:
        def loss(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            parts = sac.losses(batch)
            return parts["value"] + parts["policy"]

        self.algo.end_task(lambda: shared(sac), self.kept, loss)
        self.kept = []

    def diagnostics(self) -> dict[str, float | None]:
        return self.algo.diagnostics()

    def state_dict(self) -> dict[str, Any]:
        return {"algo": self.algo.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.algo.load_state_dict(state["algo"])


class MemoryParams(Strict):
    """The replay buffer's batch (CW's perfect memory: 512)."""

    batchSize: int | None = Field(default=None, ge=1, le=65536)
    """The update's batch drawn from the kept buffer (None: the learner's `batchSize`)."""


class PerfectMemory(CrlMethod[MemoryParams]):
    """The replay buffer kept across tasks, reservoir selection at capacity (CW's `reservoir` / perfect memory):
    every transition of an earlier task in an update's batch is counted as replay."""

    Params = MemoryParams
    summary = "SAC with the replay buffer kept across tasks (reservoir)"
    keep_buffer: ClassVar[bool] = True
    selection = "reservoir"
