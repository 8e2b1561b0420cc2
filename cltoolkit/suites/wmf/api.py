"""The public method interface of the `wmf` suite: the suite owns the experiment, the method owns the learning.

The suite owns the data (random-policy episodes of tasks A and B, training and held-out), the task sequence A -> B,
the training loop (windows drawn by the suite, `training.updatesPerTask` Adam updates per task over the model's
trainable parameters, Adam rebuilt at each task start: one reset policy for every method), the budget ledger and
every evaluation (PF, RD, FT, reconstructions, d_trans) on held-out data. A method decides:

- `build`: its world model (an `RSSM` or a subclass: columns, experts, heads). Default: the plain RSSM.
- `own_task_a_model`: False (default) starts task B from the suite's shared plain task-A model (the task-A
  reference, trained once per (cell, seed)); True trains the method's own model on task A with its hooks.
- `begin_task(model, task)`: model surgery at a task start (new columns, frozen parts, the active expert).
- `sampling(task)`: what each update's windows are drawn from: the task's `TrainingSet` and any kept earlier
  `TrainingSet` (replay), or the shares of the suite's window memory (`task.memory.new(capacity, selection)`, filled
  with `add(training_set)` at a task's end, named with `sources(n)`), with counts per batch. The suite draws the
  windows and counts replayed ones.
- `extra_loss(model, batch)`: a term added to the world-model loss of every update (penalties, distillation).
- `after_backward(model, step)` / `after_step(model, step)`: around every optimiser step of the method's phases,
  with the optimiser and the step's loss terms (`cltoolkit.suites.step.Step`, whose docstring fixes the call order):
  gradients may be changed after backward, before the step; nothing may change parameter values.
- `end_task(model, task)`: what to keep once a task's training is over (importances, anchors, data to replay).
- `ownership(model, task)` / `retrain_updates()`: a masking method (PackNet; with `own_task_a_model`) declares, after
  task A's updates, which task owns each entry of the parameters it manages; the suite sets the weights given to task
  B to 0, runs `retrain_updates()` more task-A updates (task A's first phase is that much shorter: the task's budget
  is the same), and evaluates task A with task B's weights at 0 (`cltoolkit.suites.masks`).
- `diagnostics()`: extra numbers for the record (never a suite metric's name) and the report.
- `state_dict` / `load_state_dict`: the method's own state (tensors, numbers, lists), saved with cached stages.

What a method cannot do is enforced: it is handed training data only (`TrainingSet`, made by the suite alone;
held-out episodes and frames never reach it, and a sampling source that is not a suite-made `TrainingSet` is
refused), so replay from evaluation data cannot be written; the only held-out-derived input, the importance set of
a method that declares `uses_importance_set` (WorldModelsBenchmark's EWC design), is a set of task-A latents the suite
encodes from transitions disjoint from D_A, never frames. The suite counts every update and every replayed window; a
hook that changes an existing parameter's values outside the suite's updates is recorded as a budget violation (the
run fails with that reason, listed in the report). The suite also counts every frame that reaches the model's
encoder with gradients inside an update (a pre-hook on `model.vae.encoder`): frames of neither the update's windows
(the task's and the replayed ones the suite drew) are `other` (a private buffer), a budget violation or charged as
replay as the protocol's `budget.unaccountedSamples` declares; passes without gradients or outside the updates are
the method's bookkeeping. The replayed transitions a method keeps are bounded by `budget.memoryCapacity`, a phase's
updates by `budget.gradientUpdatesPerTask`. A NaN or infinity in a loss term or a gradient ends the run as
`non-finite` (task, update, term, hook) unless the protocol declares `training.nonFinite` skip with a cap.

Mapping from the anchors: Avalanche's `before_training_exp` / `after_training_exp` are `begin_task` / `end_task`,
its `before_backward` loss edit is `extra_loss`, `DynamicModule.adaptation` is the surgery in `begin_task` (the
suite rebuilds the optimiser after it), a storage policy is what `end_task` keeps and `sampling` draws; Mammoth's
`begin_task` / `end_task` are the same names and its `observe` is the suite's update with `extra_loss` added;
Continual World's `get_auxiliary_loss` is `extra_loss`; Sequoia's Setting is the suite (it owns evaluation and
the budget).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from cltoolkit.components import Method

if TYPE_CHECKING:
    import numpy as np
    import torch

    from cltoolkit.protocol._base import Strict
    from cltoolkit.suites.step import Step
    from cltoolkit.suites.wmf.envs import Episodes
    from cltoolkit.suites.wmf.memory import MemoryRequest
    from cltoolkit.suites.wmf.world import RSSM

__all__ = [
    "ImportanceSet",
    "Minibatch",
    "ModelSpec",
    "Sampling",
    "Step",
    "TaskEnd",
    "TaskStart",
    "TrainingSet",
    "WorldModelMethod",
]

_SUITE_TOKEN = object()
"""Only the suite holds this: a `TrainingSet` cannot be made from other data by a method."""


class TrainingSet:
    """A read-only view of one task's training episodes, made by the suite. A method keeps it to replay it later
    and names it in `sampling`; it cannot make one (held-out data is never wrapped in this type)."""

    __slots__ = ("_episodes", "_rows", "task")

    def __init__(
        self, episodes: Episodes, task: str, *, _token: object = None, _rows: np.ndarray | None = None
    ) -> None:
        if _token is not _SUITE_TOKEN:
            raise TypeError("a TrainingSet is made by the suite only: methods receive them in TaskStart / TaskEnd")
        self._episodes = episodes
        self._rows = _rows
        """The windows (episode, start) this set is restricted to (a suite memory's share), or None: all of them."""
        self.task = task
        """The task whose training episodes these are (`A` or `B`)."""

    @property
    def episodes(self) -> int:
        """Number of episodes."""
        return len(self._episodes.lengths)

    @property
    def transitions(self) -> int:
        """Number of (frame, action, next frame) transitions."""
        return int(self._episodes.lengths.sum())

    @property
    def held(self) -> int | None:
        """Windows it is restricted to (a memory's share of a task), or None for the whole set."""
        return None if self._rows is None else len(self._rows)

    def __repr__(self) -> str:
        held = "" if self._rows is None else f", windows={len(self._rows)}"
        return f"TrainingSet(task={self.task!r}, episodes={self.episodes}{held})"


def _suite_training_set(episodes: Episodes, task: str) -> TrainingSet:
    return TrainingSet(episodes, task, _token=_SUITE_TOKEN)


def _episodes_of(source: object, where: str) -> Episodes:
    """The episodes behind a sampling source; a source the suite did not make is refused."""
    if not isinstance(source, TrainingSet):
        raise TypeError(
            f"{where}: a sampling source must be a TrainingSet the suite handed to the method, got "
            f"{type(source).__name__} (methods see training data only)"
        )
    return source._episodes


@dataclass(frozen=True)
class ModelSpec:
    """What `build` needs: the protocol's model section and the task's action width."""

    latent: int
    hidden: int
    action: int
    channels: tuple[int, int, int, int]
    beta: float


@dataclass(frozen=True)
class ImportanceSet:
    """Task-A transitions as latents of the post-A model (posterior means of frames t and t+1, the action between):
    z (N, latent), a (N, action), z_next (N, latent). Disjoint from D_A; given only to methods that declare
    `uses_importance_set`, at the end of task A (EWC's Fisher set in WorldModelsBenchmark's design)."""

    z: torch.Tensor
    a: torch.Tensor
    z_next: torch.Tensor


@dataclass(frozen=True)
class TaskStart:
    """A task phase begins."""

    task: str
    """`A` or `B`."""
    index: int
    """0 for A, 1 for B."""
    training: TrainingSet
    """This task's training episodes."""
    batch: int
    """Windows per update (the protocol's `training.batch`)."""
    updates: int
    """Updates of this phase (the protocol's `training.updatesPerTask`)."""
    memory: MemoryRequest | None = None
    """Where the method asks the suite for its memory of windows (`memory.new(capacity, selection)`)."""


@dataclass(frozen=True)
class TaskEnd:
    """A task phase is over (its model trained)."""

    task: str
    index: int
    training: TrainingSet
    """This task's training episodes (keep it to replay it)."""
    last: bool
    """No task follows."""
    importance: ImportanceSet | None = None
    """Only for methods with `uses_importance_set`, only at the end of task A."""
    memory: MemoryRequest | None = None
    """Where the method asks the suite for its memory of windows (`memory.new(capacity, selection)`; then
    `add(task.training)`)."""


@dataclass(frozen=True)
class Sampling:
    """What a phase's windows are drawn from: `(TrainingSet, windows per batch)` pairs (the counts sum to the
    batch). `uniform_episodes`: pool the sources; each window picks an episode uniformly among all their episodes,
    then a start (WorldModelsBenchmark's replay buffer); otherwise each source's windows are drawn uniformly from its
    own."""

    sources: Sequence[tuple[TrainingSet, int]]
    uniform_episodes: bool = False


@dataclass(frozen=True)
class Minibatch:
    """One update's windows, read-only: obs (B, L, 3, 64, 64) in [0, 1], actions (B, L - 1, A)."""

    obs: torch.Tensor
    actions: torch.Tensor
    task: str
    step: int
    """Update index within the phase."""


ParamsT = TypeVar("ParamsT", bound="Strict | None")
"""A method's `Params` (None for a method without hyperparameters)."""


@dataclass
class WorldModelMethod(Method, Generic[ParamsT]):
    """Base of every wmf method (see the module docstring). One instance per run; hooks return values or change the
    model they are handed; the suite applies them."""

    suite: ClassVar[str] = "wmf"
    stream: ClassVar[str | None] = None
    """Name the run's random streams derive from (default: the registered method name). The shipped methods keep
    wmf-v1's names, so their records reproduce."""
    own_task_a_model: ClassVar[bool] = False
    """True: task A trains this method's own model with its hooks (cached per (cell, seed, hyperparameters));
    False: task B starts from the suite's shared plain task-A model, loaded into `build`'s model."""
    uses_importance_set: ClassVar[bool] = False
    """True: `end_task` of task A receives an `ImportanceSet`."""
    data_access: ClassVar[frozenset[str]] = frozenset({"training"})
    """What the method is given: `training` (always), `importance-set` (with `uses_importance_set`). Anything else
    (e.g. `test`, `validation`) is refused by `clt protocol validate`."""

    params: ParamsT
    """The comparison's validated hyperparameters (an instance of `Params`, or None), typed by the class's
    parameter: `class Mine(WorldModelMethod[MineParams])`."""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    """The comparison's hyperparameters as written in the protocol."""
    name: str = ""
    """The registered method name."""

    def __post_init__(self) -> None:
        """Set up the method's own state (subclasses override; called once per run)."""

    @classmethod
    def contract_problems(cls) -> list[str]:
        if cls.ownership is not WorldModelMethod.ownership and not cls.own_task_a_model:
            return [
                "overrides ownership() with own_task_a_model False: masking prunes and retrains the method's own "
                "task-A phase (the shared task-A model has spent task A's updates), so ownership() would never be "
                "called; set own_task_a_model = True"
            ]
        return []

    @property
    def stream_name(self) -> str:
        return self.stream or self.name

    def build(self, spec: ModelSpec) -> RSSM:
        """A freshly initialised world model (the suite seeds torch before the call)."""
        from cltoolkit.suites.wmf.world import RSSM

        return RSSM(spec.latent, spec.hidden, spec.action, spec.channels, spec.beta)

    def begin_task(self, model: RSSM, task: TaskStart) -> None:
        """Model surgery at a task start (add columns, freeze parts). Existing parameter values must not change."""

    def sampling(self, task: TaskStart) -> Sampling:
        """The phase's sources of windows. Default: the task's own training windows only."""
        return Sampling([(task.training, task.batch)])

    def extra_loss(self, model: RSSM, batch: Minibatch) -> torch.Tensor | None:
        """A term added to every update's loss (None: nothing)."""
        return None

    def after_backward(self, model: RSSM, step: Step) -> None:
        """Gradients are in `p.grad`, before the step: change them here (projections, masks), never the parameters.
        Called only if the method defines it."""

    def after_step(self, model: RSSM, step: Step) -> None:
        """The step is taken: read the new parameters; change nothing. Called only if the method defines it."""

    def end_task(self, model: RSSM, task: TaskEnd) -> None:
        """What to keep after a task (importances, anchors, a TrainingSet to replay). Must not change the model."""

    def ownership(self, model: RSSM, task: TaskEnd) -> Mapping[str, torch.Tensor] | None:
        """A masking method's owners after task A's updates: per managed parameter (`model.named_parameters()`
        names), an integer tensor of its shape, 0 (task A keeps it) or 1 (given to task B). The suite checks them,
        sets task B's weights to 0 and evaluates task A with them at 0. Needs `own_task_a_model` (the task-A phase
        is the method's own; a method without it is refused at validation); None (default): no masking."""
        return None

    def retrain_updates(self) -> int:
        """Updates the suite runs on task A's windows after `ownership`, with a fresh optimiser, as the last of
        task A's `training.updatesPerTask` (PackNet's retraining of the weights the task kept). Default 0."""
        return 0

    def diagnostics(self) -> dict[str, float | None]:
        """Extra record fields (their names must not be the suite's metrics)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The method's own state (tensors, numbers, strings, lists, dicts of them)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""


def __getattr__(attr: str) -> Any:
    """`RSSM` on first use (it imports torch), `Step`: for annotations in a method's module."""
    if attr == "Step":
        from cltoolkit.suites.step import Step

        return Step
    if attr == "RSSM":
        import importlib

        return getattr(importlib.import_module("cltoolkit.suites.wmf.world"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
