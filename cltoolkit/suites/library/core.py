"""The algorithms of the method library, independent of any suite: each works on a model's named parameters, the
suite's loss on a batch, and the step hooks (`cltoolkit.suites.step`). A suite's `library` module supplies those.

- `OnlineEWC`: elastic weight consolidation, online form (Kirkpatrick et al. 2017, PNAS 114(13); the running Fisher
  of Schwarz et al. 2018, "Progress & Compress", ICML): penalty (lambda / 2) sum_i F_i (theta_i - theta*_i)^2 with
  F <- gamma F + F_task and theta* the parameters at the end of the latest task. F_task is the empirical diagonal
  Fisher: the mean over kept batches of the squared gradient of the suite's loss on each batch.
- `SynapticIntelligence`: Zenke, Poole & Ganguli 2017, "Continual Learning Through Synaptic Intelligence", ICML:
  during a task omega_i += -g_i (theta_i(t+1) - theta_i(t)) at every step (g the gradient the step applied, read
  after backward); at its end Omega_i += omega_i / ((Delta theta_i)^2 + xi); penalty c sum_i Omega_i (theta_i -
  theta*_i)^2.
- `L2Anchor`: an L2 pull towards the previous task's parameters (the unweighted baseline of both papers).
- `MAS`: Aljundi et al. 2018, "Memory Aware Synapses: Learning what (not) to forget", ECCV: importance Omega_i =
  the mean over kept batches of |d ||F(x)||^2 / d theta_i| (F the model's outputs, no labels), summed over tasks;
  penalty lambda sum_i Omega_i (theta_i - theta*_i)^2.
- `LwF`: Li & Hoiem 2016, "Learning without Forgetting", ECCV: a frozen copy of the model at each task's end; on
  every new batch the suite's suite-specific distillation term pulls the model's outputs towards the copy's (a
  temperature-softened KL for a policy's logits, a squared error for a world model's predictions), weighted by
  `strength`.
- `AGEM`: Chaudhry et al. 2019, "Efficient Lifelong Learning with A-GEM", ICLR: after backward, with g the
  gradient and g_ref the gradient of the loss on a batch drawn from memory, g <- g - (g . g_ref / g_ref . g_ref)
  g_ref when g . g_ref < 0, so the applied gradient never has a negative dot product with g_ref.
- `PackNet`: Mallya & Lazebnik 2018, "PackNet: Adding Multiple Tasks to a Single Network by Iterative Pruning", CVPR,
  as Continual World runs it (awarelab/continual_world@73f63bb, `continualworld/methods/packnet.py`): each weight of
  every weight matrix has an owner, the task that trains it (task 0 at the start). At the end of task t (all but the
  last of T), of the weights t owns, the share (T - t - 1) / (T - t) with the smallest magnitudes is released to task
  t + 1 (every remaining task gets an equal share); the suite sets released weights to 0 (they train from 0) and
  evaluates task k with the weights of every later task set to 0. During task t only the weights t owns receive
  gradients; the other managed parameters (biases, normalisation) train until the first pruning and are frozen from
  it on. The method returns the owners; setting weights to 0 and masking them at evaluation is the suite's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from cltoolkit.protocol._base import Strict

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = [
    "AGEM",
    "MAS",
    "AgemFields",
    "EwcFields",
    "L2Anchor",
    "L2Fields",
    "LwF",
    "LwfFields",
    "MasFields",
    "OnlineEWC",
    "PackNet",
    "PackNetFields",
    "ReplayFields",
    "SiFields",
    "SynapticIntelligence",
    "agem_project",
]

Named = Callable[[], Iterable[tuple[str, "nn.Parameter"]]]
"""The model's named parameters, asked for anew each time (surgery may add some)."""


class EwcFields(Strict):
    """Online EWC's hyperparameters."""

    # the protocol key is `lambda`
    lambda_: float = Field(alias="lambda", gt=0, le=1e12)
    """Penalty weight: (lambda / 2) sum F (theta - theta*)^2."""
    decay: float = Field(default=1.0, ge=0, le=1)
    """gamma of the running Fisher, F <- gamma F + F_task (1: the sum over tasks, EWC with one penalty per task
    merged; below 1: online EWC)."""
    fisherBatches: int = Field(default=8, ge=1, le=10_000)
    """Batches of the task's own training data kept for its Fisher (the last ones seen)."""


class SiFields(Strict):
    """Synaptic Intelligence's hyperparameters."""

    strength: float = Field(gt=0, le=1e12)
    """c: the penalty's weight."""
    damping: float = Field(default=0.1, gt=0, le=1e6)
    """xi: added to the squared parameter change in Omega's denominator (Zenke et al. used 0.1 on split MNIST)."""


class L2Fields(Strict):
    """The L2 pull's hyperparameters."""

    strength: float = Field(gt=0, le=1e12)
    """Weight of sum (theta - theta_previous)^2."""


class AgemFields(Strict):
    """A-GEM's hyperparameters."""

    capacity: int = Field(ge=1, le=10**9)
    """Episodic memory in samples (the suite's memory, bounded by the protocol's `budget.memoryCapacity`)."""
    referenceSamples: int = Field(ge=1, le=10**6)
    """Samples drawn from memory for each step's reference gradient."""
    selection: Literal["reservoir", "task-balanced"] = "reservoir"
    """How the suite's memory chooses what it keeps (see `ReplayFields.selection`)."""


class ReplayFields(Strict):
    """Experience replay from the suite's memory (Rolnick et al. 2019, "Experience Replay for Continual Learning",
    NeurIPS; Chaudhry et al. 2019, "On Tiny Episodic Memories in Continual Learning")."""

    capacity: int = Field(ge=1, le=10**9)
    """Memory size (the suite's memory; bounded by the protocol's `budget.memoryCapacity`)."""
    replayShare: float = Field(gt=0, lt=1)
    """Share of each update's batch drawn from memory once it holds anything."""
    selection: Literal["reservoir", "task-balanced"] = "reservoir"
    """How the memory chooses what it keeps: a uniform reservoir over everything offered, or an equal share per task."""


class MasFields(Strict):
    """MAS's hyperparameters."""

    # the protocol key is `lambda`
    lambda_: float = Field(alias="lambda", gt=0, le=1e12)
    """Penalty weight: lambda sum Omega (theta - theta*)^2."""
    importanceBatches: int = Field(default=8, ge=1, le=10_000)
    """Batches of the task's own training data kept for its importance (the last ones seen)."""


class LwfFields(Strict):
    """LwF's hyperparameters."""

    strength: float = Field(gt=0, le=1e12)
    """Weight of the distillation term."""
    temperature: float = Field(default=2.0, gt=0, le=100)
    """Softening temperature of a policy's distilled logits (T^2 KL(softmax(old / T) || softmax(new / T)))."""


class PackNetFields(Strict):
    """PackNet's hyperparameters."""

    retrainUpdates: int = Field(default=0, ge=0, le=10**9)
    """Updates on the task's own data after each pruning, training only the weights the task kept (Mallya & Lazebnik's
    post-pruning fine-tuning; CW's `--packnet_retrain_steps`: 100,000 at 1,000,000 steps per task in the paper's
    runs). The suite runs and counts them."""


def _values(named: Named) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in named() if p.requires_grad}


def _mean_gradients(
    named: Named,
    batches: Sequence[Any],
    objective: Callable[[Any], torch.Tensor],
    transform: Callable[[torch.Tensor], torch.Tensor],
) -> dict[str, torch.Tensor]:
    """Per trainable parameter, the mean over `batches` of `transform(gradient of objective(batch))`; gradients are
    left cleared (importances are bookkeeping, never a step)."""
    import torch

    params = {n: p for n, p in named() if p.requires_grad}
    total = {n: torch.zeros_like(p) for n, p in params.items()}
    for batch in batches:
        for p in params.values():
            p.grad = None
        objective(batch).backward()
        for n, p in params.items():
            if p.grad is not None:
                total[n] += transform(p.grad.detach())
    for p in params.values():
        p.grad = None
    k = max(1, len(batches))
    return {n: t / k for n, t in total.items()}


def _quadratic(named: Named, weight: dict[str, torch.Tensor], anchor: dict[str, torch.Tensor]) -> torch.Tensor:
    import torch

    total: torch.Tensor | None = None
    for n, p in named():
        if n in weight:
            term = (weight[n] * (p - anchor[n]).pow(2)).sum()
            total = term if total is None else total + term
    return total if total is not None else torch.zeros(())


class OnlineEWC:
    """See the module docstring. State: the running Fisher and the anchor (tensors)."""

    def __init__(self, params: EwcFields) -> None:
        self.params = params
        self.fisher: dict[str, torch.Tensor] = {}
        self.anchor: dict[str, torch.Tensor] = {}

    def end_task(self, named: Named, batches: Sequence[Any], loss: Callable[[Any], torch.Tensor]) -> None:
        """F_task from the kept batches (the squared gradient of each batch's loss, averaged), merged into the
        running Fisher; the anchor moves to the parameters now. Gradients are left cleared."""
        task = _mean_gradients(named, batches, loss, lambda g: g.pow(2))
        gamma = self.params.decay
        self.fisher = {
            n: (gamma * self.fisher[n] + f) if n in self.fisher and self.fisher[n].shape == f.shape else f
            for n, f in task.items()
        }
        self.anchor = _values(named)

    def penalty(self, named: Named) -> torch.Tensor | None:
        if not self.anchor:
            return None
        return 0.5 * self.params.lambda_ * _quadratic(named, self.fisher, self.anchor)

    def diagnostics(self) -> dict[str, float | None]:
        if not self.fisher:
            return {}
        return {"fisherMax": max(float(f.max()) for f in self.fisher.values())}

    def state_dict(self) -> dict[str, Any]:
        return {"fisher": dict(self.fisher), "anchor": dict(self.anchor)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fisher, self.anchor = dict(state["fisher"]), dict(state["anchor"])


class SynapticIntelligence:
    """See the module docstring. State: omega (this task's path integral), Omega, the anchor, the parameters at the
    task's start and after the last step, and the last gradient (tensors)."""

    def __init__(self, params: SiFields) -> None:
        self.params = params
        self.omega: dict[str, torch.Tensor] = {}
        self.big_omega: dict[str, torch.Tensor] = {}
        self.anchor: dict[str, torch.Tensor] = {}
        self.start: dict[str, torch.Tensor] = {}
        self.previous: dict[str, torch.Tensor] = {}
        self.grad: dict[str, torch.Tensor] = {}

    def begin_task(self, named: Named) -> None:
        import torch

        self.start = _values(named)
        self.previous = _values(named)
        self.omega = {n: torch.zeros_like(v) for n, v in self.start.items()}

    def after_backward(self, named: Named) -> None:
        """The gradient the step will apply (read after every other change to it, so call this hook last)."""
        self.grad = {n: p.grad.detach().clone() for n, p in named() if p.grad is not None and n in self.omega}

    def after_step(self, named: Named) -> None:
        for n, p in named():
            if n in self.grad and n in self.previous:
                now = p.detach()
                self.omega[n] -= self.grad[n] * (now - self.previous[n])
                self.previous[n] = now.clone()

    def end_task(self, named: Named) -> None:
        now = _values(named)
        xi = self.params.damping
        for n, w in self.omega.items():
            if n in now:
                add = w / ((now[n] - self.start[n]).pow(2) + xi)
                self.big_omega[n] = self.big_omega[n] + add if n in self.big_omega else add
        self.anchor = now

    def penalty(self, named: Named) -> torch.Tensor | None:
        if not self.anchor:
            return None
        return self.params.strength * _quadratic(named, self.big_omega, self.anchor)

    def diagnostics(self) -> dict[str, float | None]:
        if not self.big_omega:
            return {}
        return {"importanceMax": max(float(w.max()) for w in self.big_omega.values())}

    def state_dict(self) -> dict[str, Any]:
        keys = ("omega", "big_omega", "anchor", "start", "previous", "grad")
        return {k: dict(getattr(self, k)) for k in keys}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, dict(value))


class L2Anchor:
    """sum (theta - theta_previous)^2 times `strength`, from the second task on."""

    def __init__(self, params: L2Fields) -> None:
        self.params = params
        self.anchor: dict[str, torch.Tensor] = {}
        self.ones: dict[str, torch.Tensor] = {}

    def end_task(self, named: Named) -> None:
        import torch

        self.anchor = _values(named)
        self.ones = {n: torch.ones_like(v) for n, v in self.anchor.items()}

    def penalty(self, named: Named) -> torch.Tensor | None:
        if not self.anchor:
            return None
        return self.params.strength * _quadratic(named, self.ones, self.anchor)

    def diagnostics(self) -> dict[str, float | None]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"anchor": dict(self.anchor), "ones": dict(self.ones)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.anchor, self.ones = dict(state["anchor"]), dict(state["ones"])


class MAS:
    """See the module docstring. State: the summed importance and the anchor (tensors)."""

    def __init__(self, params: MasFields) -> None:
        self.params = params
        self.importance: dict[str, torch.Tensor] = {}
        self.anchor: dict[str, torch.Tensor] = {}

    def end_task(self, named: Named, batches: Sequence[Any], outputs: Callable[[Any], torch.Tensor]) -> None:
        """Omega from the kept batches: |gradient| of the mean squared L2 norm of the outputs, averaged over batches,
        added to the importance so far; the anchor moves to the parameters now. Gradients are left cleared."""
        task = _mean_gradients(named, batches, lambda b: outputs(b).pow(2).flatten(1).sum(-1).mean(), lambda g: g.abs())
        for n, w in task.items():
            old = self.importance.get(n)
            self.importance[n] = w + old if old is not None and old.shape == w.shape else w
        self.anchor = _values(named)

    def penalty(self, named: Named) -> torch.Tensor | None:
        if not self.anchor:
            return None
        return self.params.lambda_ * _quadratic(named, self.importance, self.anchor)

    def diagnostics(self) -> dict[str, float | None]:
        return {"importanceMax": max(float(w.max()) for w in self.importance.values())} if self.importance else {}

    def state_dict(self) -> dict[str, Any]:
        return {"importance": dict(self.importance), "anchor": dict(self.anchor)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.importance, self.anchor = dict(state["importance"]), dict(state["anchor"])


class LwF:
    """See the module docstring. State: the frozen copy of the model at the latest task's end."""

    def __init__(self, params: LwfFields) -> None:
        self.params = params
        self.old: nn.Module | None = None
        self.pending: dict[str, Any] | None = None
        """A checkpoint's copy, rebuilt in the model's shape at the next `begin_task` (loading has no model)."""

    def begin_task(self, model: nn.Module) -> None:
        if self.pending is not None:
            self.load_state_dict(self.pending, model)
            self.pending = None

    def end_task(self, model: nn.Module) -> None:
        import copy

        old = copy.deepcopy(model)
        for p in old.parameters():
            p.requires_grad_(False)
        for module in old.modules():  # the suite's counting hooks stay on the trained model only
            module._forward_pre_hooks.clear()
            module._forward_hooks.clear()
        self.old = old.eval()

    def distill_logits(self, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
        """T^2 KL(softmax(old / T) || softmax(new / T)), averaged over the batch (Hinton et al.'s scaling)."""
        import torch

        t = self.params.temperature
        target = torch.log_softmax(old.detach() / t, -1)
        current = torch.log_softmax(new / t, -1)
        kl = (target.exp() * (target - current)).sum(-1).mean()
        return self.params.strength * t * t * kl

    def distill_values(self, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
        """The squared error towards the copy's predictions (LwF for a regression output), averaged over the batch."""
        return self.params.strength * (new - old.detach()).pow(2).flatten(1).sum(-1).mean()

    def state_dict(self) -> dict[str, Any]:
        return {"old": None if self.old is None else {k: v.clone() for k, v in self.old.state_dict().items()}}

    def load_state_dict(self, state: dict[str, Any], model: nn.Module | None = None) -> None:
        """Restore the copy into a model shaped like the one it was taken from (`model`; without it, at the next
        `begin_task`)."""
        if state.get("old") is None:
            return
        if model is None:
            self.pending = state
            return
        self.end_task(model)
        assert self.old is not None
        self.old.load_state_dict(state["old"])


def agem_project(g: torch.Tensor, g_ref: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A-GEM's projection of a flat gradient `g` against the reference `g_ref`; returns (the gradient to apply,
    whether it was projected). The result's dot product with `g_ref` is never negative (up to rounding: exactly 0
    after a projection)."""
    dot = float(g @ g_ref)
    if dot >= 0:
        return g, False
    norm = float(g_ref @ g_ref)
    if norm == 0:
        return g, False
    return g - (dot / norm) * g_ref, True


class AGEM:
    """See the module docstring. Counts the steps whose gradient it projected (a diagnostic)."""

    def __init__(self, params: AgemFields) -> None:
        self.params = params
        self.projected = 0
        self.steps = 0

    def after_backward(self, named: Named, reference_loss: Callable[[], torch.Tensor | None]) -> None:
        """Project the step's gradient (in `p.grad`) against the gradient of `reference_loss()` (None: nothing in
        memory yet, the gradient is left as it is)."""
        import torch

        params = [p for _, p in named() if p.requires_grad]
        grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params]
        for p in params:
            p.grad = None
        ref = reference_loss()
        if ref is None:
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            return
        ref.backward()
        ref_grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params]
        flat, flat_ref = torch.cat([g.flatten() for g in grads]), torch.cat([g.flatten() for g in ref_grads])
        out, projected = agem_project(flat, flat_ref)
        self.steps += 1
        self.projected += int(projected)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = out[offset : offset + n].view_as(p).clone()
            offset += n

    def diagnostics(self) -> dict[str, float | None]:
        return {"projectedShare": self.projected / self.steps if self.steps else None}

    def state_dict(self) -> dict[str, Any]:
        return {"projected": self.projected, "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.projected, self.steps = int(state["projected"]), int(state["steps"])


class PackNet:
    """See the module docstring. State: the owner of every managed weight matrix's entries (integer tensors) and
    whether the biases and normalisation are frozen (after the first pruning)."""

    def __init__(self, params: PackNetFields, tasks: int) -> None:
        self.params = params
        self.tasks = tasks
        self.owner: dict[str, torch.Tensor] = {}
        self.frozen = False

    def _owners(self, named: Named) -> dict[str, torch.Tensor]:
        import torch

        for n, p in named():
            if p.dim() >= 2 and n not in self.owner:
                self.owner[n] = torch.zeros(p.shape, dtype=torch.long)
        return self.owner

    def prune(self, named: Named, index: int) -> dict[str, torch.Tensor]:
        """The owners once task `index` has released the smallest (T - t - 1) / (T - t) of its weights (by
        magnitude, per matrix) to task `index` + 1; the weights themselves are left as they are (releasing them is
        the suite's). Biases and normalisation are frozen from here on."""
        import torch

        owners = self._owners(named)
        left = self.tasks - index - 1
        share = left / (left + 1)
        for n, p in named():
            if n not in owners:
                continue
            owner = owners[n]
            mine = owner == index
            values = p.detach().abs()[mine].sort().values
            if values.numel() == 0:
                continue
            threshold = values[min(int(values.numel() * share), values.numel() - 1)]
            release = mine & (p.detach().abs() <= threshold)
            owners[n] = torch.where(release, torch.full_like(owner, index + 1), owner)
        self.frozen = True
        return {n: o.clone() for n, o in owners.items()}

    def mask_gradients(self, named: Named, index: int) -> None:
        """Keep the gradient of the weights task `index` owns; zero every other managed weight's, and the biases' and
        normalisation's once they are frozen."""
        owners = self._owners(named)
        for n, p in named():
            if p.grad is None:
                continue
            if n in owners:
                p.grad.mul_((owners[n] == index).to(p.grad.dtype))
            elif self.frozen:
                p.grad.zero_()

    def diagnostics(self) -> dict[str, float | None]:
        """The share of the managed weights each task owns now (task `k` as `ownedShare<k>`)."""
        import torch

        if not self.owner:
            return {}
        flat = torch.cat([o.flatten() for o in self.owner.values()])
        counts = torch.bincount(flat, minlength=self.tasks)
        return {f"ownedShare{k}": float(c) / flat.numel() for k, c in enumerate(counts.tolist())}

    def state_dict(self) -> dict[str, Any]:
        return {"owner": {n: o.clone() for n, o in self.owner.items()}, "frozen": self.frozen}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.owner, self.frozen = dict(state["owner"]), bool(state["frozen"])
