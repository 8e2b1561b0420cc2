"""The crl suite's replay buffer (FIFO or reservoir, each transition tagged with its task), its episodic memory of
finished tasks (every draw counted as replay) and the run's ledger. Imports torch: only a worker loads this module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from cltoolkit.suites.guards import SampleCounter

__all__ = ["Buffer", "CrlLedger", "Episodic", "TaskSample"]


@dataclass
class CrlLedger:
    """What the run spent, by origin."""

    environmentSteps: int = 0
    evaluationSteps: int = 0
    gradientUpdates: int = 0
    samplesProcessed: int = 0
    replaySamples: int = 0
    otherSamples: int = 0
    bookkeepingPasses: int = 0
    retrainUpdates: int = 0
    """Of `gradientUpdates`, those a method asked for after a task's steps (`retrain_updates`)."""
    releasedWeights: int = 0
    """Weights a masking method released to later tasks (set to 0 by the suite)."""
    perTask: dict[str, dict[str, int]] = field(default_factory=dict)


class Buffer:
    """The replay buffer: transitions with the index of the task that produced them; FIFO or reservoir at capacity."""

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, selection: str, rng: np.random.Generator) -> None:
        self.capacity, self.selection, self.rng = capacity, selection, rng
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros((capacity, act_dim), np.float32)
        self.rewards = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.task = np.zeros(capacity, np.int64)
        self.size = 0
        self.offered = 0

    def clear(self) -> None:
        self.size = 0
        self.offered = 0

    def add(
        self, obs: np.ndarray, action: np.ndarray, reward: float, next_obs: np.ndarray, done: bool, task: int
    ) -> None:
        self.offered += 1
        if self.size < self.capacity:
            i = self.size
            self.size += 1
        elif self.selection == "fifo":
            i = (self.offered - 1) % self.capacity
        else:  # reservoir: the new transition replaces a random one with probability capacity / offered
            j = int(self.rng.integers(self.offered))
            if j >= self.capacity:
                return
            i = j
        self.obs[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_obs[i], self.done[i], self.task[i] = next_obs, float(done), task

    _ARRAYS = ("obs", "next_obs", "actions", "rewards", "done", "task")

    def state_dict(self) -> dict[str, Any]:
        """The filled slots (in place: FIFO's next slot follows from `offered`) and the counts."""
        return {"size": self.size, "offered": self.offered, **{k: getattr(self, k)[: self.size] for k in self._ARRAYS}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.size, self.offered = int(state["size"]), int(state["offered"])
        for k in self._ARRAYS:
            getattr(self, k)[: self.size] = state[k]

    def sample(self, n: int) -> dict[str, torch.Tensor]:
        idx = self.rng.integers(self.size, size=n)
        return {
            "obs": torch.from_numpy(self.obs[idx]),
            "next_obs": torch.from_numpy(self.next_obs[idx]),
            "actions": torch.from_numpy(self.actions[idx]),
            "rewards": torch.from_numpy(self.rewards[idx]),
            "done": torch.from_numpy(self.done[idx]),
            "task": torch.from_numpy(self.task[idx]),
        }


class Episodic:
    """The suite's episodic memory: at each task's end, `per_task` transitions drawn uniformly from the task's part
    of the replay buffer are copied in; `draw` samples uniformly over all of them, counting each as replay (in the
    ledger, and for the sample counter as drawn from the suite's memory)."""

    def __init__(self, per_task: int, ledger: CrlLedger, rng: np.random.Generator) -> None:
        self.per_task, self.ledger, self.rng = per_task, ledger, rng
        self.parts: list[dict[str, np.ndarray]] = []
        self.pool: dict[str, np.ndarray] = {}
        """The parts joined, made once per kept task (not at every draw)."""
        self.counter: SampleCounter | None = None

    def __len__(self) -> int:
        return len(self.pool["obs"]) if self.pool else 0

    def keep(self, buffer: Buffer, task: int) -> None:
        """`per_task` of the task's transitions in the replay buffer, drawn uniformly (all, where it has fewer)."""
        rows = np.flatnonzero(buffer.task[: buffer.size] == task)
        take = rows if len(rows) <= self.per_task else self.rng.choice(rows, self.per_task, replace=False)
        self.keep_rows({k: getattr(buffer, k)[take].copy() for k in Buffer._ARRAYS})

    def keep_rows(self, part: dict[str, np.ndarray]) -> None:
        """A finished task's rows as they are (PPO's: a uniform sample of the task's rollouts, `TaskSample`)."""
        self.parts.append(part)
        self.pool = {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]}

    def state_dict(self) -> dict[str, Any]:
        return {"parts": self.parts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.parts = list(state["parts"])
        self.pool = {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]} if self.parts else {}

    def draw(self, n: int) -> dict[str, torch.Tensor]:
        idx = self.rng.integers(len(self.pool["obs"]), size=n)
        batch = {k: torch.from_numpy(v[idx]) for k, v in self.pool.items()}
        batch["head"] = batch.pop("task")
        self.ledger.replaySamples += n
        self.ledger.samplesProcessed += n
        if self.counter is not None:
            self.counter.drew(batch["obs"])
            if "next_obs" in batch:
                self.counter.drew(batch["next_obs"])
        return batch


class TaskSample:
    """A uniform sample of at most `capacity` rows of everything offered (reservoir sampling, Vitter's algorithm R):
    a PPO run's episodic memory of the current task, offered each finished rollout."""

    def __init__(self, capacity: int, rng: np.random.Generator) -> None:
        self.capacity, self.rng = capacity, rng
        self.arrays: dict[str, np.ndarray] = {}
        self.size = 0
        self.seen = 0

    def clear(self) -> None:
        self.arrays, self.size, self.seen = {}, 0, 0

    def offer(self, rows: dict[str, np.ndarray]) -> None:
        if not self.arrays:
            self.arrays = {k: np.zeros((self.capacity, *v.shape[1:]), v.dtype) for k, v in rows.items()}
        for i in range(len(rows["obs"])):
            self.seen += 1
            if self.size < self.capacity:
                slot, self.size = self.size, self.size + 1
            else:
                slot = int(self.rng.integers(self.seen))
                if slot >= self.capacity:
                    continue
            for k, v in rows.items():
                self.arrays[k][slot] = v[i]

    def rows(self) -> dict[str, np.ndarray]:
        """The sample's rows (copies)."""
        return {k: v[: self.size].copy() for k, v in self.arrays.items()}
