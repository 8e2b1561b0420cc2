"""The run record (DESIGN.md section 3): versioned, with provenance, written atomically, never lying.

Readers migrate older `recordVersion`s through `MIGRATIONS` and refuse newer ones.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, JsonValue, ValidationError

from cltoolkit._io import write_json
from cltoolkit.errors import Problem, Refusal, ValidationFailed, pydantic_problems
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.load import loads_strict, read_json_text

__all__ = [
    "MIGRATIONS",
    "RECORD_VERSION",
    "Ledger",
    "Provenance",
    "RunRecord",
    "read_record",
    "write_record",
]

RECORD_VERSION = 1
#: from-version -> function turning a record of that version into one of the next version.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

RunState = Literal["completed", "failed", "crashed", "timeout", "interrupted"]


class ProtocolRef(Strict):
    """Which protocol, at which hash, and whether the run is a pilot."""

    id: str
    """Protocol id."""
    sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """Hash of the (effective) protocol the run executed."""
    pilot: bool
    """Pilot runs (draft protocols, overrides) never report results."""


class SpecRef(Strict):
    """The grid point."""

    comparison: str
    """Comparison id."""
    method: str
    """Registered method name."""
    seed: int
    """Training seed."""
    order: str | None
    """Task order id."""
    cell: str | None
    """Grid cell."""
    stage: str
    """Stage."""


class RunStatus(Strict):
    """How the run ended."""

    state: RunState
    """`completed`, `failed` (exception), `crashed` (process died), `timeout`, `interrupted` (stopped by the user)."""
    reason: str
    """Last line of the exception, the signal, or the limit."""
    attempts: int = Field(ge=1)
    """Attempts made (crashes are retried up to a declared number)."""


class Ledger(Strict):
    """Compute spent by the run, counted by the driver."""

    environmentSteps: int = 0
    """Environment interactions that count against the budget."""
    frames: int = 0
    """Frames rendered or observed (with action repeat)."""
    evaluationSteps: int = 0
    """Environment steps of evaluation rollouts (not counted against the budget)."""
    gradientUpdates: int = 0
    """Optimizer steps on new data."""
    replayUpdates: int = 0
    """Optimizer steps (or their share) on replayed data."""
    replaySamples: int = 0
    """Replayed samples drawn."""
    modelQueries: int = 0
    """Model evaluations (e.g. K x H x I x E for planners)."""
    parameters: int | None = None
    """Trainable parameters of the final model."""


class Provenance(Strict):
    """Where and how the record was produced."""

    toolkitVersion: str
    """clt version."""
    gitCommit: str | None
    """Commit of the project checkout, if any."""
    gitDirty: bool | None
    """Whether the checkout had uncommitted changes."""
    packages: dict[str, str]
    """Versions of the packages that matter."""
    python: str
    """Python version."""
    platform: str
    """OS and machine."""
    torchThreads: int | None
    """Torch intra-op threads, where torch was used."""
    device: str
    """Compute device."""
    hardware: str | None = None
    """Processor (and accelerator) the run used, as the driver saw it."""
    precision: str | None = None
    """Numeric precision of the computation (e.g. `float64`, `float32`, `bf16-mixed`)."""
    wallClockSeconds: float
    """Wall-clock time of the run (all attempts)."""
    startedAt: datetime.datetime
    """Start (UTC)."""
    finishedAt: datetime.datetime
    """End (UTC)."""


class RunRecord(Strict):
    """One attempted run of a protocol."""

    recordVersion: Literal[1]
    """Format version of this record."""
    runId: str
    """Deterministic run id."""
    protocol: ProtocolRef
    """Protocol, hash, pilot flag."""
    spec: SpecRef
    """Grid point."""
    status: RunStatus
    """Outcome."""
    budget: Ledger
    """Compute ledger."""
    metrics: dict[str, JsonValue]
    """Raw per-phase / per-task values and curves (suite-defined); empty unless completed."""
    reused: list[str] = Field(default_factory=list)
    """Content hashes of shared stages this run reused instead of recomputing."""
    splits: dict[str, JsonValue] = Field(default_factory=dict)
    """Realized split manifests by evaluation set: kind, unit, train / test lists, their hash, row counts and
    independent-unit counts (see `cltoolkit.splits.SplitManifest`)."""
    provenance: Provenance
    """Provenance."""


def read_record(path: Path) -> RunRecord:
    """Read a record, migrating older versions; refuse newer ones and anything malformed."""
    text = read_json_text(path)
    data = loads_strict(text, str(path))
    version = data.get("recordVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValidationFailed(problems=[Problem(f"{path}: /recordVersion", "missing or not an integer")])
    if version > RECORD_VERSION:
        raise Refusal(
            f"{path}: recordVersion {version} is newer than this toolkit reads ({RECORD_VERSION}); upgrade clt"
        )
    migrated = version < RECORD_VERSION
    while version < RECORD_VERSION:
        if version not in MIGRATIONS:
            raise ValidationFailed(
                problems=[Problem(f"{path}: /recordVersion", f"no migration from version {version}")]
            )
        data = MIGRATIONS[version](data)
        version += 1
        data["recordVersion"] = version
    try:
        return RunRecord.model_validate_json(json.dumps(data) if migrated else text, strict=True)
    except ValidationError as exc:
        raise ValidationFailed(problems=pydantic_problems(exc, str(path))) from None


def write_record(path: Path, record: RunRecord) -> None:
    """Atomic write, sorted keys, no NaN."""
    write_json(path, record.model_dump(mode="json"))
