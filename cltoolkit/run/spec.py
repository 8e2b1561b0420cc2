"""RunSpecs: one planned run, with a deterministic id; and what a driver or executor returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

__all__ = ["ExecutionResult", "GridPoint", "RunOutput", "RunSpec", "replicate_key", "run_id"]


def replicate_key(seed: int, order: str | None, cell: str | None) -> str:
    """The replicate a run belongs to (paired across comparisons): cell, task order and seed."""
    return f"{cell or '-'}|{order or '-'}|s{seed}"


def run_id(comparison: str, seed: int, order: str | None, cell: str | None) -> str:
    """Readable and deterministic: `<comparison>[-<cell>][-<order>]-s<seed>`."""
    parts = [comparison]
    if cell:
        parts.append(cell)
    if order:
        parts.append(order)
    parts.append(f"s{seed}")
    return "-".join(parts)


@dataclass(frozen=True)
class GridPoint:
    """One point of a protocol's grid: comparison x seed x task order x cell."""

    comparison: str
    method: str
    seed: int
    order: str | None = None
    cell: str | None = None

    @cached_property
    def run_id(self) -> str:
        return run_id(self.comparison, self.seed, self.order, self.cell)


@dataclass(frozen=True)
class RunSpec:
    """One planned run of a protocol."""

    protocol_id: str
    protocol_sha256: str
    pilot: bool
    stage: str
    comparison: str
    method: str
    seed: int
    order: str | None = None
    cell: str | None = None
    run_dir: Path | None = None
    protocol_path: Path | None = None
    threads: int = 1
    timeout_s: float | None = None
    max_attempts: int = 2
    cpus: float = 1.0
    """CPUs a run needs (Ray schedules by it; the local pool runs `workers` at a time)."""
    gpus: float = 0.0
    """GPUs a run needs (a request on a cluster without GPUs fails fast)."""
    memory_mb: int | None = None
    """Memory a run needs, where the executor can reserve it."""
    device: str = "cpu"
    """Torch device requested for the run's models (`auto`, `cpu`, `cuda`, `cuda:N`; resolved in the worker)."""

    @property
    def run_id(self) -> str:
        return run_id(self.comparison, self.seed, self.order, self.cell)

    def spec_dict(self) -> dict[str, Any]:
        return {
            "comparison": self.comparison,
            "method": self.method,
            "seed": self.seed,
            "order": self.order,
            "cell": self.cell,
            "stage": self.stage,
        }


@dataclass
class RunOutput:
    """What a suite driver returns for one run."""

    metrics: dict[str, Any]
    budget: dict[str, int] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)
    device: str = "cpu"
    precision: str | None = None
    splits: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecutionResult:
    """What an executor reports for one run attempt sequence."""

    spec: RunSpec
    state: str  # completed | failed | crashed | timeout | interrupted
    reason: str
    attempts: int
    wall_clock_s: float
    output: RunOutput | None = None
    torch_threads: int | None = None
    node: dict[str, Any] | None = None
    """Where it ran, where the executor knows more than the driver's hostname (a Ray node id, resources)."""
