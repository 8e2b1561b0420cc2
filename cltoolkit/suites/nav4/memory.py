"""The nav4 suite's replay memory: fixed capacity, filled from suite-made training rollouts only, every sample drawn
from it counted in the run's ledger (and matched by the sample counter) as it is drawn. Imports torch: only the
worker process of a nav4 run loads this module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import torch

from cltoolkit.errors import DataAccessViolation
from cltoolkit.suites.guards import SampleCounter
from cltoolkit.suites.nav4.api import Rollout
from cltoolkit.suites.nav4.env import ACTIONS

if TYPE_CHECKING:
    from cltoolkit.suites.nav4.agent import AgentLedger

__all__ = ["SLOTS", "Reservoir"]

SLOTS = ("obs", "actions", "logp", "adv", "ret", "value", "logits", "task")
"""A reservoir memory's arrays."""


class Reservoir:
    """Fixed-capacity memory of transitions, filled from suite-made training rollouts only, every sample drawn from it
    counted in the run's ledger as it is drawn. A method makes one with `Learner.new_memory`. Selection: `reservoir`
    (a uniform reservoir sample over every transition offered, whatever its task) or `task-balanced` (an equal share
    of the capacity per task seen, the remainder to the earliest tasks, each share a uniform reservoir sample of its
    task; a new task shrinks the older shares by evicting at random)."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        rng: np.random.Generator,
        ledger: AgentLedger,
        counter: SampleCounter | None = None,
        selection: str = "reservoir",
    ) -> None:
        if selection not in ("reservoir", "task-balanced"):
            raise ValueError(f"memory selection must be 'reservoir' or 'task-balanced', got {selection!r}")
        self.selection = selection
        self.held = 0
        """Filled slots (task-balanced; a reservoir holds min(seen, capacity))."""
        self.seen_per_task: dict[int, int] = {}
        self.capacity = capacity
        self.rng = rng
        self.ledger = ledger
        self.counter = counter
        self.seen = 0
        self.obs = np.zeros((capacity, *obs_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.logp = np.zeros(capacity, dtype=np.float32)
        self.adv = np.zeros(capacity, dtype=np.float32)
        self.ret = np.zeros(capacity, dtype=np.float32)
        self.value = np.zeros(capacity, dtype=np.float32)
        self.logits = np.zeros((capacity, len(ACTIONS)), dtype=np.float32)
        self.task = np.zeros(capacity, dtype=np.int8)

    def __len__(self) -> int:
        return self.held if self.selection == "task-balanced" else min(self.seen, self.capacity)

    def add(self, rollout: Rollout) -> None:
        """Offer every sample of a training rollout (the only way in: evaluation makes no `Rollout`)."""
        if not isinstance(rollout, Rollout):
            raise DataAccessViolation(
                f"a replay memory takes training rollouts the suite handed to observe(), got {type(rollout).__name__}"
            )
        self._offer(rollout.batch, rollout.tasks)

    def _offer(self, batch: Mapping[str, np.ndarray], task_index: np.ndarray) -> None:
        if self.selection == "task-balanced":
            self._offer_balanced(batch, task_index)
            return
        for k in range(len(batch["actions"])):
            self.seen += 1
            slot = self.seen - 1 if self.seen <= self.capacity else int(self.rng.integers(self.seen))
            if slot < self.capacity:
                self._put(slot, batch, task_index, k)

    def _put(self, slot: int, batch: Mapping[str, np.ndarray], task_index: np.ndarray, k: int) -> None:
        self.obs[slot] = batch["obs"][k]
        self.actions[slot] = batch["actions"][k]
        self.logp[slot] = batch["logp"][k]
        self.adv[slot] = batch["adv"][k]
        self.ret[slot] = batch["ret"][k]
        self.value[slot] = batch["value"][k]
        self.logits[slot] = batch["logits"][k]
        self.task[slot] = task_index[k]

    def _quotas(self) -> dict[int, int]:
        tasks = list(self.seen_per_task)
        share, extra = divmod(self.capacity, len(tasks))
        return {t: share + (1 if i < extra else 0) for i, t in enumerate(tasks)}

    def _offer_balanced(self, batch: Mapping[str, np.ndarray], task_index: np.ndarray) -> None:
        for k in range(len(batch["actions"])):
            t = int(task_index[k])
            self.seen += 1
            if t not in self.seen_per_task:
                self.seen_per_task[t] = 0
                self._shrink(self._quotas())
            self.seen_per_task[t] += 1
            quota = self._quotas()[t]
            mine = np.flatnonzero(self.task[: self.held] == t)
            if len(mine) < quota:
                self._put(self.held, batch, task_index, k)
                self.held += 1
            else:
                j = int(self.rng.integers(self.seen_per_task[t]))
                if j < quota:
                    self._put(int(mine[j]), batch, task_index, k)

    def _shrink(self, quotas: dict[int, int]) -> None:
        """Evict at random down to each task's share, then pack the held slots to the front."""
        keep = np.ones(self.held, dtype=bool)
        for t, quota in quotas.items():
            mine = np.flatnonzero(self.task[: self.held] == t)
            if len(mine) > quota:
                keep[self.rng.choice(mine, size=len(mine) - quota, replace=False)] = False
        order = np.flatnonzero(keep)
        for name in SLOTS:
            arr = getattr(self, name)
            arr[: len(order)] = arr[order]
        self.held = len(order)

    def sample(self, n: int, device: str = "cpu") -> dict[str, torch.Tensor]:
        """`n` stored samples drawn uniformly with replacement, as tensors on `device`; counted in the ledger
        (replayed samples, samples processed)."""
        idx = self.rng.integers(len(self), size=n)
        self.ledger.replaySamples += n
        self.ledger.samplesProcessed += n
        arrays = {
            "obs": self.obs[idx],
            "actions": self.actions[idx],
            "logp": self.logp[idx],
            "adv": self.adv[idx],
            "ret": self.ret[idx],
            "value": self.value[idx],
            "logits": self.logits[idx],
            "task": self.task[idx].astype(np.int64),
        }
        out = {key: torch.from_numpy(v).to(device) for key, v in arrays.items()}
        if self.counter is not None:
            self.counter.drew(out["obs"])
        return out

    def contents(self) -> dict[str, int]:
        """Transitions held per task index (disclosed)."""
        held = self.task[: len(self)]
        return {str(t): int((held == t).sum()) for t in np.unique(held)}
