"""Weights owned by tasks, kept by a suite for a masking method (PackNet, `cltoolkit.suites.library.core.PackNet`).

A method may not change weights outside the suite's updates, and no method hook fires during evaluation; a masking
method's two acts on the weights are therefore the suite's, done from the owners the method declares at a task's end
(`Ownership.assign`):

- weights released to a later task are set to 0 there (they train from 0 when their task comes);
- every evaluation of task k runs with the weights owned by tasks after k set to 0 (`Ownership.view`), and puts them
  back bit for bit afterwards; the policy evaluated on task k is the network task k was trained and pruned with.

The suite checks what it is given: an integer tensor of the parameter's shape for each named parameter, owners
between 0 and the last task, and no weight of a finished task reassigned (task k's weights stay task k's).

Imports torch: only the worker process of a run loads this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

__all__ = ["Ownership"]

Named = Callable[[], Iterable[tuple[str, nn.Parameter]]]


class Ownership:
    """The owner of every entry of the parameters a masking method manages, as the suite holds it."""

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks
        self.owner: dict[str, torch.Tensor] = {}

    def assign(self, named: Named, owners: Mapping[str, Any], index: int) -> int:
        """Take the owners a method declared at the end of task `index` (checked), set every weight owned by a later
        task to 0; returns how many weights that released now (zeroed here for the first time)."""
        params = dict(named())
        checked: dict[str, torch.Tensor] = {}
        for name, owner in owners.items():
            p = params.get(name)
            if p is None:
                raise ValueError(f"ownership names {name!r}, which is not a parameter of the networks")
            if not isinstance(owner, torch.Tensor) or owner.dtype.is_floating_point or owner.shape != p.shape:
                raise ValueError(f"ownership of {name!r} must be an integer tensor of shape {tuple(p.shape)}")
            owner = owner.detach().to(torch.long).cpu()
            if bool((owner < 0).any()) or bool((owner >= self.tasks).any()):
                raise ValueError(f"ownership of {name!r} names a task outside 0..{self.tasks - 1}")
            before = self.owner.get(name, torch.zeros_like(owner))
            finished = before < index
            if bool((owner[finished] != before[finished]).any()):
                raise ValueError(f"ownership of {name!r} reassigns weights of a finished task (before task {index})")
            if bool((owner[~finished] < index).any()):
                raise ValueError(f"ownership of {name!r} gives weights of task {index} or later to a finished task")
            checked[name] = owner
        released = 0
        with torch.no_grad():
            for name, owner in checked.items():
                later = owner > index
                released += int((later & (self.owner.get(name, torch.zeros_like(owner)) <= index)).sum())
                params[name].masked_fill_(later.to(params[name].device), 0.0)
        self.owner.update(checked)
        return released

    @contextmanager
    def view(self, named: Named, task: int) -> Iterator[None]:
        """Evaluate task `task` with every weight owned by a later task set to 0; restored bit for bit after."""
        if not self.owner:
            yield
            return
        params = dict(named())
        saved = {n: params[n].detach().clone() for n in self.owner}
        try:
            with torch.no_grad():
                for name, owner in self.owner.items():
                    params[name].masked_fill_((owner > task).to(params[name].device), 0.0)
            yield
        finally:
            with torch.no_grad():
                for name, value in saved.items():
                    params[name].copy_(value)

    def state_dict(self) -> dict[str, Any]:
        return {n: o.clone() for n, o in self.owner.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.owner = {n: o.clone() for n, o in state.items()}
