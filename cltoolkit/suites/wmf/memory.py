"""The wmf suite's memory of training windows: what a method keeps of a finished task to replay later, held by the
suite, bounded by a capacity in windows (at most the protocol's `budget.memoryCapacity`), filled from suite-made
`TrainingSet`s only, and drawn by the suite (every window counted as replay).

Selection (declared by the method when it asks for the memory):
- `reservoir`: a uniform reservoir sample over every window offered (Vitter's algorithm R), whatever its task;
- `task-balanced`: an equal share of the capacity per task seen (the remainder to the earliest tasks), each task's
  windows a uniform sample of its own; a new task shrinks the older tasks' shares by dropping windows at random.

A method names the memory's windows in `sampling()` with `memory.sources(n)` (n windows of each update, split over
the tasks held in proportion to what is held), or draws a batch of its own with `memory.draw(n)` (A-GEM's reference
batch: drawn by the suite, counted as replayed windows and as memory samples). Light to import (numpy only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import numpy as np

from cltoolkit.errors import BudgetViolation
from cltoolkit.suites.wmf.api import _SUITE_TOKEN, TrainingSet

if TYPE_CHECKING:
    import torch

__all__ = ["MemoryRequest", "WindowMemory"]

Selection = Literal["reservoir", "task-balanced"]


class WindowMemory:
    """See the module docstring. Made by the suite (`MemoryRequest.new`); a method keeps it and offers it finished
    tasks' `TrainingSet`s (`add`)."""

    def __init__(
        self,
        capacity: int,
        selection: Selection,
        rng: np.random.Generator,
        length: int,
        draw: Callable[[list[tuple[TrainingSet, int]]], tuple[torch.Tensor, torch.Tensor]],
        *,
        _token: object = None,
    ) -> None:
        if _token is not _SUITE_TOKEN:
            raise TypeError("a WindowMemory is made by the suite only: ask for one with task.memory.new(...)")
        if selection not in ("reservoir", "task-balanced"):
            raise ValueError(f"memory selection must be 'reservoir' or 'task-balanced', got {selection!r}")
        self.capacity = capacity
        self.selection = selection
        self._rng = rng
        self._length = length
        self._draw = draw
        self._sets: dict[str, TrainingSet] = {}
        self._held: dict[str, np.ndarray] = {}
        self._seen = 0

    def __len__(self) -> int:
        return int(sum(len(rows) for rows in self._held.values()))

    def contents(self) -> dict[str, int]:
        """Windows held per task."""
        return {task: len(rows) for task, rows in self._held.items()}

    def add(self, training: TrainingSet) -> None:
        """Offer every window of a finished task's training set (the only way in: held-out data is never a
        `TrainingSet`)."""
        if not isinstance(training, TrainingSet) or training._rows is not None:
            raise TypeError("a memory takes the whole TrainingSet the suite handed to the method (TaskStart / TaskEnd)")
        windows = training._episodes.windows(self._length)
        self._sets[training.task] = training
        if self.selection == "reservoir":
            self._reservoir(training.task, windows)
        else:
            self._balanced(training.task, windows)

    def _reservoir(self, task: str, windows: np.ndarray) -> None:
        slots: list[tuple[str, np.ndarray]] = [(t, r) for t, rows in self._held.items() for r in rows]
        for row in windows:
            self._seen += 1
            if len(slots) < self.capacity:
                slots.append((task, row))
            else:
                k = int(self._rng.integers(self._seen))
                if k < self.capacity:
                    slots[k] = (task, row)
        held: dict[str, list[np.ndarray]] = {}
        for t, r in slots:
            held.setdefault(t, []).append(r)
        self._held = {t: np.asarray(rows, dtype=np.int64).reshape(-1, 2) for t, rows in held.items()}

    def _balanced(self, task: str, windows: np.ndarray) -> None:
        tasks = [*self._held, task] if task not in self._held else list(self._held)
        share, extra = divmod(self.capacity, len(tasks))
        quota = {t: share + (1 if i < extra else 0) for i, t in enumerate(tasks)}
        pools = {**self._held, task: windows}
        self._held = {}
        for t in tasks:
            rows = pools[t]
            keep = np.sort(self._rng.permutation(len(rows))[: quota[t]])
            if len(keep):
                self._held[t] = rows[keep]

    def sources(self, n: int) -> list[tuple[TrainingSet, int]]:
        """`n` windows of an update, as `sampling()` sources: one restricted `TrainingSet` per task held, the counts
        split in proportion to what each holds (largest remainder); empty when nothing is held."""
        total = len(self)
        if n <= 0 or total == 0:
            return []
        tasks = sorted(self._held)
        exact = [n * len(self._held[t]) / total for t in tasks]
        counts = [int(x) for x in exact]
        for i in sorted(range(len(tasks)), key=lambda i: exact[i] - counts[i], reverse=True)[: n - sum(counts)]:
            counts[i] += 1
        return [
            (TrainingSet(self._sets[t]._episodes, t, _token=_SUITE_TOKEN, _rows=self._held[t]), c)
            for t, c in zip(tasks, counts, strict=True)
            if c
        ]

    def draw(self, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """A batch of `n` windows from memory (obs, actions), drawn and counted by the suite; None when empty."""
        sources = self.sources(n)
        return self._draw(sources) if sources else None


class MemoryRequest:
    """How a method asks the suite for its memory (`TaskStart.memory` / `TaskEnd.memory`): one per run, of at most
    the protocol's `budget.memoryCapacity` windows."""

    def __init__(self, make: Callable[[int, Selection], WindowMemory], limit: int | None) -> None:
        self._make = make
        self._limit = limit
        self.memory: WindowMemory | None = None

    def new(self, capacity: int, selection: Selection = "reservoir") -> WindowMemory:
        """The run's memory (the one made earlier, if any); a capacity above the protocol's
        `budget.memoryCapacity` is a budget violation."""
        if self.memory is not None:
            return self.memory
        if self._limit is not None and capacity > self._limit:
            raise BudgetViolation(
                f"budget.memoryCapacity: the method asked for a memory of {capacity} windows; the protocol declares "
                f"at most {self._limit}"
            )
        self.memory = self._make(capacity, selection)
        return self.memory
