"""RunSpecs: one planned run, with a deterministic id, the resources it asks for, the job an executor runs; and
what a driver or executor returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

__all__ = [
    "ExecutionResult",
    "GridPoint",
    "Job",
    "Resources",
    "RunOutput",
    "RunSpec",
    "job_payload",
    "replicate_key",
    "run_id",
    "spec_from_payload",
]


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
class Resources:
    """What every run of one `clt run` asks of the machine it runs on (flags folded at the command line)."""

    threads: int = 1
    """Torch (and BLAS) threads in the run's process."""
    timeout_s: float | None = None
    """Wall-clock limit of one attempt; past it the run is stopped and recorded as `timeout`."""
    max_attempts: int = 2
    """Attempts for a run whose process dies (`crashed`); a Python exception (`failed`) is never retried."""
    cpus: float = 1.0
    """CPUs a run needs (Ray schedules by it; the local pool runs `workers` at a time)."""
    gpus: float = 0.0
    """GPUs a run needs (a request on a cluster without GPUs fails fast)."""
    memory_mb: int | None = None
    """Memory a run needs, where the executor can reserve it."""
    device: str = "cpu"
    """Torch device requested for the run's models (`auto`, `cpu`, `cuda`, `cuda:N`; resolved in the worker)."""


@dataclass(frozen=True)
class RunSpec:
    """What one planned run of a protocol is (its record's `spec`), and the resources it asks for.

    A suite's `execute` receives it; `device` and `threads` are the two resources a suite reads."""

    protocol_id: str
    protocol_sha256: str
    pilot: bool
    stage: str
    comparison: str
    method: str
    seed: int
    order: str | None = None
    cell: str | None = None
    resources: Resources = field(default_factory=Resources)

    @property
    def run_id(self) -> str:
        return run_id(self.comparison, self.seed, self.order, self.cell)

    @property
    def device(self) -> str:
        return self.resources.device

    @property
    def threads(self) -> int:
        return self.resources.threads

    def spec_dict(self) -> dict[str, Any]:
        return {
            "comparison": self.comparison,
            "method": self.method,
            "seed": self.seed,
            "order": self.order,
            "cell": self.cell,
            "stage": self.stage,
        }


@dataclass(frozen=True)
class Job:
    """A run handed to an executor: its spec and where its files are (both paths always set)."""

    spec: RunSpec
    run_dir: Path
    """The run's folder in the store: job file, log, attempt outputs; the driver writes the record there."""
    protocol_path: Path
    """The protocol file the worker loads (the effective document of a `--set` pilot)."""
    interpreter: Path | None = None
    """The Python that runs the worker: a protocol's own package environment (None: the driver's)."""
    environment: str | None = None
    """The digest of the package file that environment must have been built from (checked by the worker)."""
    package_file: Path | None = None
    """That package file (on a cluster, each node builds the environment from it: a shared filesystem)."""

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    @property
    def resources(self) -> Resources:
        return self.spec.resources


IDENTITY = ("protocol_id", "protocol_sha256", "pilot", "stage", "comparison", "method", "seed", "order", "cell")


def _pip_args() -> list[str]:
    from cltoolkit.packages import pip_options

    return pip_options()


def job_payload(job: Job, components: Path | None) -> dict[str, Any]:
    """The job file a worker process reads (`job.json` in the run's folder)."""
    spec = job.spec
    return {
        "runDir": str(job.run_dir),
        "protocolPath": str(job.protocol_path),
        "components": str(components) if components else None,
        "threads": spec.threads,
        "environment": job.environment,
        "packageFile": str(job.package_file) if job.package_file else None,
        "pipArgs": _pip_args() if job.package_file else None,
        "spec": {**{name: getattr(spec, name) for name in IDENTITY}, "threads": spec.threads, "device": spec.device},
    }


def spec_from_payload(data: dict[str, Any]) -> RunSpec:
    """The RunSpec a worker hands the suite: the run's identity and the two resources a suite reads."""
    resources = Resources(threads=int(data["threads"]), device=str(data["device"]))
    return RunSpec(**{name: data[name] for name in IDENTITY}, resources=resources)


@dataclass
class RunOutput:
    """What a suite driver returns for one run, and the one form it travels in from the worker (a subprocess or a
    Ray task) to the driver that writes the record (`to_json` / `from_json`)."""

    metrics: dict[str, Any]
    budget: dict[str, int] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)
    device: str = "cpu"
    precision: str | None = None
    splits: dict[str, Any] = field(default_factory=dict)
    torch_threads: int | None = None
    """torch's intra-op threads in the process that ran it, read there by the worker (never set by a suite)."""
    environment: str | None = None
    """The digest of the protocol package file whose environment ran it (`cltoolkit.packages`), read there by the
    worker; None: the toolkit's environment."""
    packages: dict[str, str] | None = None
    """The package versions of the process that ran it, where that was a protocol's own environment."""

    def to_json(self) -> dict[str, Any]:
        return {
            "metrics": self.metrics,
            "budget": self.budget,
            "reused": self.reused,
            "device": self.device,
            "precision": self.precision,
            "splits": self.splits,
            "torchThreads": self.torch_threads,
            "environment": self.environment,
            "packages": self.packages,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOutput:
        return cls(
            data["metrics"],
            data["budget"],
            data.get("reused", []),
            data.get("device", "cpu"),
            data.get("precision"),
            data.get("splits", {}),
            data.get("torchThreads"),
            data.get("environment"),
            data.get("packages"),
        )


@dataclass
class ExecutionResult:
    """What an executor reports for one run attempt sequence."""

    spec: RunSpec
    state: str  # completed | failed | crashed | timeout | interrupted
    reason: str
    attempts: int
    wall_clock_s: float
    output: RunOutput | None = None
    node: dict[str, Any] | None = None
    """Where it ran, where the executor knows more than the driver's hostname (a Ray node id, resources)."""
