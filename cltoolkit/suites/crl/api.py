"""The method interface of the `crl` suite: the suite owns the stream, the environments, the replay buffer, every
update and every evaluation; the method owns what it adds to learning, through the same hooks as nav4 and wmf
(`cltoolkit.suites.step`). Each hook's `sac` is the run's learner: CW's SAC (`cltoolkit.suites.crl.sac`), or PPO where
the protocol's `learner.algorithm` is `ppo` (`cltoolkit.suites.crl.ppo`: its `critic` is the value network, its
batches carry each row's old log-probability, advantage and return, and it keeps no buffer across tasks):

- `begin_task(sac, task)` / `end_task(sac, task)`: a task of the stream starts / ends (snapshots, importances);
- `extra_loss(sac, batch, task)`: a term added to the update's SAC losses (it joins the actor's and the critics', as
  CW's `get_auxiliary_loss`); None adds nothing;
- `after_backward(sac, step)` / `after_step(sac, step)`: gradients before the step (projections), parameters after it;
  called only where the method defines them, and checked as nav4's and wmf's are;
- `ownership(sac, task)` / `retrain_updates()`: a masking method (PackNet) declares, after a task's last step and
  before its last evaluation (every task but the last), which task owns each weight it manages; the suite sets the
  weights released to later tasks to 0 and evaluates each task with its later tasks' weights at 0
  (`cltoolkit.suites.masks`); then the suite runs `retrain_updates()` more updates on the task's buffer, with a fresh
  optimiser before and after, counted as the task's updates (PackNet's retraining of the weights the task kept);
- `keep_buffer`: the suite keeps its replay buffer across task changes (CW's perfect memory, `reservoir` selection);
  every transition drawn from an earlier task is counted as replay;
- `diagnostics()` for the record; `state_dict` / `load_state_dict`, checkpointed at every task boundary (an
  interrupted run resumes from the last one with the same record).

Light to import: torch and gymnasium are imported by the driver only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

from cltoolkit.components import Method
from cltoolkit.protocol._base import Strict

if TYPE_CHECKING:
    import torch

    from cltoolkit.suites.crl.ppo import Ppo
    from cltoolkit.suites.crl.sac import Sac
    from cltoolkit.suites.step import Step

    Learner = Sac | Ppo
    """What every hook receives as `sac`: CW's SAC, or PPO where the protocol's `learner.algorithm` is `ppo` (the same
    `actor`, `critic`, `config`, `losses(batch)` and `optimizer`; `cltoolkit.suites.crl.ppo`)."""

__all__ = ["CrlMethod", "CrlTask", "EpisodicMemory", "ParamsT"]

ParamsT = TypeVar("ParamsT", bound=Strict | None)


class EpisodicMemory(Protocol):
    """The suite's episodic memory (`CrlMethod.episodic_per_task`): transitions of finished tasks, kept by the suite
    at each task's end; every transition drawn is counted as replay."""

    def __len__(self) -> int: ...

    def draw(self, n: int) -> dict[str, torch.Tensor]:
        """`n` transitions drawn uniformly (obs, next_obs, actions, rewards, done, head), counted as replay."""
        ...


@dataclass(frozen=True)
class CrlTask:
    """A task of the stream, as the hooks see it."""

    id: str
    index: int
    """Position in the stream (0 first): the actor head it trains; -1 in a multi-task phase, which trains every task's
    head at once (no transition there is replay)."""
    steps: int
    """Environment steps of the task."""
    memory: EpisodicMemory | None = None
    """The suite's episodic memory of the earlier tasks, where the method asked for one."""
    total: int = 1
    """Tasks in the stream."""


@dataclass
class CrlMethod(Method, Generic[ParamsT]):
    """Base of every crl method; it is plain fine-tuning of the learner (CW's `finetuning`), until a subclass adds
    something."""

    suite: ClassVar[str] = "crl"
    regime: ClassVar[Literal["sequential", "single-task", "multi-task"]] = "sequential"
    """`single-task`: a reference that learns every task from scratch (a fresh learner and buffer per task; its
    own-training success is forward transfer's baseline, CW's `run_single.py`). `multi-task`: a reference that learns
    every task at once, in one phase of the stream's whole budget that moves to the next task's environment at every
    episode's start, with one buffer (CW's `run_mt.py`; `cltoolkit.suites.crl.multitask`)."""
    keep_buffer: ClassVar[bool] = False
    """Keep the replay buffer across tasks (reservoir selection at capacity): replay of earlier tasks."""
    selection: ClassVar[Literal["fifo", "reservoir"]] = "fifo"
    """How the buffer makes room at capacity."""

    params: ParamsT
    """The comparison's validated hyperparameters (an instance of `Params`)."""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        """Set up the method's own state (called once per run)."""

    def episodic_per_task(self) -> int:
        """Transitions of each finished task the suite keeps in its episodic memory for this method (CW's
        `episodic_mem_per_task`; 0: none)."""
        return 0

    def begin_task(self, sac: Learner, task: CrlTask) -> None:
        """A task starts."""

    def extra_loss(self, sac: Learner, batch: Mapping[str, torch.Tensor], task: CrlTask) -> torch.Tensor | None:
        """A term added to the update's losses (None: nothing)."""
        return None

    def after_backward(self, sac: Learner, step: Step) -> None:
        """Gradients are in `p.grad`: change them here, never the parameters."""

    def after_step(self, sac: Learner, step: Step) -> None:
        """The step is taken: read the new parameters; change nothing."""

    def end_task(self, sac: Learner, task: CrlTask) -> None:
        """A task is over."""

    def ownership(self, sac: Learner, task: CrlTask) -> Mapping[str, torch.Tensor] | None:
        """After the task's last step and before its last evaluation (every task but the last): the owner (a task's
        index) of every entry of the parameters the method masks, keyed `actor.<name>` / `critic.<name>`, as integer
        tensors of the parameters' shapes; the weights of finished tasks keep their owners. The suite sets every
        weight owned by a later task to 0 and evaluates task k with the weights of tasks after k at 0. None (the
        default): the method masks nothing."""
        return None

    def retrain_updates(self) -> int:
        """Updates the suite runs on the task's own buffer after `ownership` (every task but the last), with a fresh
        optimiser before and after; counted as the task's gradient updates."""
        return 0

    def diagnostics(self) -> dict[str, float | None]:
        """Extra numbers for the record."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The method's own state (tensors, numbers, strings, lists, dicts, numpy arrays): the driver checkpoints it
        with SAC, the buffers and its generators after every task but the last, and an interrupted run resumes from
        its last task boundary with the same record. A method whose state needs the networks to be rebuilt keeps it
        until its next `begin_task` (`CrlReplayCloning`); nothing it builds may draw from torch's generator."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (before the next task's `begin_task`)."""
