"""The public method interface of the `nav4` suite: the suite owns the experiment, the method owns the learning.

The suite owns the environments (layouts drawn from the training seed range; validation and final-test layouts
never reach a method), the task order and its boundaries, the PPO learner's loop (rollouts, advantages, epochs and
minibatches, the optimiser and its gradient clipping), the budget ledger (environment steps, gradient and replay
updates, replayed samples, all counted by the suite) and every evaluation (the success matrix on final-test
layouts, learning curves on validation layouts), run on the network with no method hook firing.

A method decides:

- `regime`: the data access it is evaluated under: `sequential` (one task at a time, in the protocol's order: the
  continual-learning setting), `joint` (all tasks at once, budget x tasks: a reference) or `specialists` (a fresh
  learner per task, each evaluated on its own task: a reference).
- `network(canvas)`: its policy / value network (default: the suite's small CNN); it returns (logits over the five
  actions, value) for a batch of observations.
- `begin_task(learner, task)` / `end_task(learner, task)`: at task boundaries (create a replay memory with
  `learner.new_memory`, take snapshots, compute importances); they must not change the network's weights.
- `observe(learner, rollout)`: every training rollout, read-only, before the update it feeds (fill a memory: the
  only way into a memory is a suite-made `Rollout`, so evaluation data can never be replayed).
- `extra_loss(learner, minibatch)`: a term added to the PPO loss of every minibatch (replayed samples drawn from
  the memory, penalties, distillation). Replayed samples are counted by the memory as they are drawn; the suite
  splits the update between gradient and replay updates by those counts.
- `after_backward(learner, step)` / `after_step(learner, step)`: around every optimiser step, with the optimiser
  and the step's loss terms (`cltoolkit.suites.step.Step`, whose docstring fixes the call order): gradients may be
  changed after backward (before the suite's clipping and step); nothing may change parameter values.
- `diagnostics()`: extra numbers for the record (`metrics.methodDiagnostics`) and the report.
- `state_dict` / `load_state_dict`: the method's own state (tensors, numbers, strings, lists, dicts, numpy arrays):
  the driver checkpoints it with the learner at every task boundary of a sequential run, and an interrupted run
  resumes from its last boundary with the same record.

Enforced, not documented: a hook that changes the network's weights (an update the suite did not make and so did
not count) fails the run as a budget violation, named in the report; a method whose `data_access` asks for more
than training data is refused by `clt protocol validate`; a memory accepts suite-made rollouts only, and holds at
most the protocol's `budget.memoryCapacity`; a phase takes at most `budget.gradientUpdatesPerTask` optimiser steps.
The suite counts every sample that reaches the network (a pre-hook on its forward): the update's own data, samples
drawn from the suite's memory, and the rest (`other`: a private buffer, copies kept from rollouts), which the
protocol's `budget.unaccountedSamples` makes a budget violation (the default) or charges as replay; forwards without
gradients or outside the updates are counted as the method's bookkeeping. A NaN or infinity in a loss term, a
gradient or a parameter fails the run as `non-finite`, naming the task, the update, the term and the hook.

Mapping from the anchors: Avalanche's `before_training_exp` / `after_training_exp` are `begin_task` / `end_task`,
`after_training_iteration` with the experience's data is `observe`, a `before_backward` loss edit is `extra_loss`
(returned, not written into shared state, so no plugin order matters); Mammoth's `begin_task` / `observe` /
`end_task` keep their names (the update itself is the suite's); Continual World's `get_auxiliary_loss` is
`extra_loss`; Sequoia's Setting is the suite and its flags are `regime` plus the task boundaries the hooks mark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from cltoolkit.components import Method

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn

    from cltoolkit.suites.nav4.agent import Learner
    from cltoolkit.suites.nav4.methods import AgentParams
    from cltoolkit.suites.step import Step

__all__ = [
    "Minibatch",
    "Nav4Method",
    "Nav4Minibatch",
    "Nav4TaskEnd",
    "Nav4TaskStart",
    "Rollout",
    "Step",
    "TaskEnd",
    "TaskStart",
]

_SUITE_TOKEN = object()


class Rollout:
    """One training rollout of the suite's learner, read-only: `batch` maps obs, actions, logp, adv, ret, value and
    logits to arrays of the rollout's samples; `tasks` the task index of each sample. Made by the suite only."""

    __slots__ = ("batch", "tasks")

    def __init__(self, batch: Mapping[str, np.ndarray], tasks: np.ndarray, *, _token: object = None) -> None:
        if _token is not _SUITE_TOKEN:
            raise TypeError("a Rollout is made by the suite only: methods receive them in observe()")
        self.batch = batch
        self.tasks = tasks


def _suite_rollout(batch: Mapping[str, np.ndarray], tasks: np.ndarray) -> Rollout:
    views = {}
    for key, value in batch.items():
        view = value.view()
        view.flags.writeable = False
        views[key] = view
    task_view = tasks.view()
    task_view.flags.writeable = False
    return Rollout(views, task_view, _token=_SUITE_TOKEN)


@dataclass(frozen=True)
class Nav4TaskStart:
    """A training phase begins."""

    task: str
    """The phase's task id (`joint` for the joint regime's single phase)."""
    index: int
    """Position of the phase in the run (0 first)."""
    tasks: tuple[str, ...]
    """The tasks this phase trains on (one, or all four for `joint`)."""
    steps: int
    """Environment steps of the phase (the suite's budget)."""
    total: int = 1
    """Phases of the run on this learner (the tasks of the order for a sequential method)."""


@dataclass(frozen=True)
class Nav4TaskEnd:
    """A training phase is over."""

    task: str
    index: int
    last: bool
    """No phase follows on this learner."""


@dataclass(frozen=True)
class Nav4Minibatch:
    """One PPO minibatch of new samples (tensors on the learner's device, read-only)."""

    batch: Mapping[str, torch.Tensor]
    size: int


TaskStart = Nav4TaskStart
TaskEnd = Nav4TaskEnd
Minibatch = Nav4Minibatch
"""The names methods write (`nav4.TaskStart`, as README's examples do); the classes carry the suite in their names
because wmf's hook types of the same short names are other classes (one class per name in the package)."""


ParamsT = TypeVar("ParamsT", bound="AgentParams")
"""A method's `Params`: the PPO learner's fields (`Nav4AgentParams`) and the method's own."""


@dataclass
class Nav4Method(Method, Generic[ParamsT]):
    """Base of every nav4 method (see the module docstring). Its `Params` must subclass
    `cltoolkit.plugin.Nav4AgentParams` (the suite's PPO learner reads those fields)."""

    suite: ClassVar[str] = "nav4"
    regime: ClassVar[Literal["sequential", "joint", "specialists"]] = "sequential"
    """The data access the method is evaluated under (`joint` and `specialists` are references)."""

    params: ParamsT
    """The comparison's validated hyperparameters (an instance of `Params`, typed by the class's parameter:
    `class Mine(Nav4Method[MineParams])`)."""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        """Set up the method's own state (subclasses override; called once per run)."""

    def network(self, canvas: int) -> nn.Module:
        """A freshly initialised network (the suite seeds torch first): obs (N, C, canvas, canvas) uint8 ->
        (logits (N, 5), value (N,))."""
        from cltoolkit.suites.nav4.net import Net

        return Net(canvas)

    def begin_task(self, learner: Learner, task: Nav4TaskStart) -> None:
        """A phase starts (create a memory, snapshot the weights)."""

    def observe(self, learner: Learner, rollout: Rollout) -> None:
        """A training rollout was collected (fill a memory)."""

    def extra_loss(self, learner: Learner, minibatch: Nav4Minibatch) -> torch.Tensor | None:
        """A term added to the minibatch's PPO loss (None: nothing)."""
        return None

    def after_backward(self, learner: Learner, step: Step) -> None:
        """Gradients are in `p.grad` (before the suite clips them and steps): change them here (projections,
        masks), never the parameters. Called only if the method defines it."""

    def after_step(self, learner: Learner, step: Step) -> None:
        """The step is taken: read the new parameters (path integrals); change nothing. Called only if the method
        defines it."""

    def end_task(self, learner: Learner, task: Nav4TaskEnd) -> None:
        """A phase is over (importances, snapshots)."""

    def ownership(self, learner: Learner, task: Nav4TaskEnd) -> Mapping[str, torch.Tensor] | None:
        """After `end_task` of every phase but the last (sequential methods): the owner (a phase's index) of every
        entry of the parameters the method masks, keyed by `learner.net.named_parameters()` names, as integer tensors
        of their shapes; the weights of finished phases keep their owners. The suite sets every weight owned by a
        later phase to 0 and evaluates each task with the weights of the phases after its own at 0
        (`cltoolkit.suites.masks`, PackNet). None (the default): the method masks nothing."""
        return None

    def retrain_updates(self) -> int:
        """Optimiser steps the suite runs after `ownership` (every phase but the last) on the phase's last rollout,
        its PPO loss, in whole passes of `epochs` x `minibatches`, with a fresh optimiser before and after; counted
        as the phase's gradient updates (and against `budget.gradientUpdatesPerTask`)."""
        return 0

    def diagnostics(self) -> dict[str, float | None]:
        """Extra numbers for the record and the report (e.g. a penalty's size, an importance's range)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The method's own state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""


def __getattr__(attr: str) -> Any:
    """`Learner` on first use (it imports torch), `Step`: for annotations in a method's module."""
    if attr == "Step":
        from cltoolkit.suites.step import Step

        return Step
    if attr == "Learner":
        import importlib

        return getattr(importlib.import_module("cltoolkit.suites.nav4.agent"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
