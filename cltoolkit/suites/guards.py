"""Guards a continual-learning suite puts around any method's learning (nav4 and wmf use the same ones):

- non-finite values end the run by name (`NonFiniteValue`: task, update, term, hook), never a dropped update and
  never a budget violation;
- every sample that reaches the model with gradients inside an update is counted by the suite (`SampleCounter`),
  whoever drew it: the update's own data, the suite's memory, or the rest (a method's private buffer), which the
  protocol's `budget.unaccountedSamples` charges as replay or refuses as a budget violation;
- a hook that must not change parameter values is checked (`unchanged`), comparing bits, so a NaN produced by the
  suite's own step is never blamed on a hook.

Imports torch: only the worker process of a run loads this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import torch
from torch import nn

from cltoolkit.errors import BudgetViolation, NonFiniteValue

__all__ = ["SampleCounter", "check_finite", "first_non_finite_grad", "overrides", "unchanged"]

T = TypeVar("T")


def check_finite(value: torch.Tensor, task: str, update: int, term: str, hook: str) -> None:
    """Raise `NonFiniteValue` if `value` holds a NaN or an infinity."""
    if not bool(torch.isfinite(value.detach()).all()):
        raise NonFiniteValue(task, update, term, hook)


def first_non_finite_grad(named: Iterable[tuple[str, nn.Parameter]]) -> str | None:
    """The name of the first parameter whose gradient holds a NaN or an infinity, or None."""
    for name, p in named:
        if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
            return name
    return None


def overrides(method: object, base: type, hook: str) -> bool:
    """Whether `method`'s class defines `hook` itself (a hook left at the base's no-op costs nothing: the suite
    neither calls nor guards it)."""
    return getattr(type(method), hook) is not getattr(base, hook)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bits, so that NaN compares equal to the same NaN (`torch.equal(nan, nan)` is False)."""
    t = t.detach()
    if t.is_floating_point():
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.contiguous().view(width)
    return t


def unchanged(
    named: Callable[[], Iterable[tuple[str, nn.Parameter]]], hook: str, call: Callable[[], T], what: str
) -> T:
    """Run a method hook that must not change any existing parameter's values (added parameters are allowed); a
    change is an update the suite did not make or count: a budget violation naming the hook and the parameters."""
    before = {n: _bits(p).clone() for n, p in named()}
    out = call()
    after = dict(named())
    changed = sorted(n for n, b in before.items() if n in after and not torch.equal(b, _bits(after[n])))
    if changed:
        shown = ", ".join(changed[:3]) + (", ..." if len(changed) > 3 else "")
        raise BudgetViolation(
            f"the method's {hook} changed {what} outside the suite's updates ({shown}): every update is the suite's, "
            "counted in the budget"
        )
    return out


def _row_keys(x: torch.Tensor) -> list[int]:
    """One key per sample (first axis) from its exact bytes: equal keys for equal samples, whatever the memory
    layout (hashes of bytes: a collision is astronomically unlikely, and only within one update)."""
    rows = x.detach().to("cpu").contiguous().reshape(x.shape[0], -1).numpy()
    return [hash(r.tobytes()) for r in rows]


@dataclass
class _Update:
    own: list[torch.Tensor]
    memory: list[torch.Tensor] = field(default_factory=list)
    seen: list[torch.Tensor] = field(default_factory=list)


class SampleCounter:
    """Counts the samples that reach a model's input module (a forward pre-hook on it), by origin.

    Inside an update (`update`), the suite's own loss call (`suite_call`) passes the update's data: those samples
    are counted by the suite as it draws them. Any other forward with gradients enabled inside the update (a method's
    `extra_loss`) is matched, sample by sample, against the update's data and the samples drawn from the suite's
    memory in it (`drew`); what matches neither is `other` (a private buffer, copies kept from earlier data). A
    forward without gradients, or outside every update (a method's task-boundary hooks: Fisher estimates,
    distillation targets), is `bookkeeping`. Outside `armed` (the suite's rollouts and evaluation) nothing is
    counted."""

    def __init__(
        self, module: nn.Module, on_bookkeeping: Callable[[int], None] | None = None, also: Iterable[nn.Module] = ()
    ) -> None:
        """Count the samples entering `module` (and every module of `also`: a sample that enters several is one)."""
        self.bookkeeping = 0
        self._on_bookkeeping = on_bookkeeping
        self._armed = False
        self._suite = False
        self._update: _Update | None = None
        self._handles = [m.register_forward_pre_hook(self._seen) for m in (module, *also)]

    def _seen(self, _module: nn.Module, args: tuple[object, ...]) -> None:
        if not self._armed or self._suite or not args or not isinstance(args[0], torch.Tensor):
            return
        x = args[0]
        if self._update is None or not torch.is_grad_enabled():
            n = int(x.shape[0]) if x.dim() else 1
            self.bookkeeping += n
            if self._on_bookkeeping is not None:
                self._on_bookkeeping(n)
            return
        self._update.seen.append(x.detach())

    @contextmanager
    def armed(self) -> Iterator[None]:
        """Count while inside (the suite's updates and its calls of method hooks; never its own rollouts or
        evaluation)."""
        before, self._armed = self._armed, True
        try:
            yield
        finally:
            self._armed = before

    @contextmanager
    def suite_call(self) -> Iterator[None]:
        """The suite's own loss on the update's data (its samples are counted as drawn)."""
        self._suite = True
        try:
            yield
        finally:
            self._suite = False

    def begin_update(self, *own: torch.Tensor) -> None:
        self._update = _Update(list(own))

    def drew(self, rows: torch.Tensor) -> None:
        """Samples drawn from the suite's memory in this update (counted by the memory as drawn)."""
        if self._update is not None:
            self._update.memory.append(rows.detach())

    def end_update(self) -> int:
        """Close the update; returns how many distinct samples of it were neither its data nor the suite's memory."""
        update, self._update = self._update, None
        if update is None or not update.seen:
            return 0  # the common case (no method forward inside the update) costs nothing
        extra = 0
        known: dict[tuple[int, torch.dtype], set[int]] = {}
        counted: set[int] = set()
        for x in update.seen:
            width = x[0].numel() if x.dim() and x.shape[0] else 1
            if (width, x.dtype) not in known:  # the update's samples as rows of this width (a frame, an observation)
                known[width, x.dtype] = {
                    k
                    for t in update.own + update.memory
                    if t.dtype == x.dtype and t.numel() % width == 0
                    for k in _row_keys(t.reshape(-1, width))
                }
            for k in _row_keys(x.reshape(-1, width)):
                if k not in known[width, x.dtype] and k not in counted:
                    counted.add(k)
                    extra += 1
        return extra

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
