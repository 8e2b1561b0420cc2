"""The run record (docs/design.md section 3): versioned, with provenance, sealed, written atomically, never lying.

Readers migrate older `recordVersion`s through `MIGRATIONS` and refuse newer ones.

A record is sealed: its `seal` is `sha256:` + the hex SHA-256 of the RFC 8785 (JCS) bytes of the record's JSON
object without the `seal` key (seal algorithm `jcs-sha256/v1`, as the protocol hash). The driver writes it; every
reader checks it against the bytes on disk, so an edit made after the run (by hand or by a tool) is detected.
Records of version 1 were written before sealing: they read as unsealed (`seal` is None) until `clt seal` seals
them once, which adds the seal and nothing else (their values are kept byte for byte).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, JsonValue, ValidationError

from cltoolkit._io import NotRegularFile, dump_json, read_regular_bytes, write_json
from cltoolkit.errors import Problem, Refusal, ValidationFailed, pydantic_problems
from cltoolkit.jcs import CanonicalizationError, canonical_json
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.load import decode_json_bytes, display_path, loads_plain, loads_strict

__all__ = [
    "MIGRATIONS",
    "RECORD_VERSION",
    "SEAL_ALGORITHM",
    "ComponentSource",
    "Ledger",
    "Provenance",
    "ReplacedRecord",
    "RunRecord",
    "SampleLedger",
    "read_record",
    "record_seal",
    "seal_record_file",
    "write_record",
]

RECORD_VERSION = 2
SEAL_ALGORITHM = "jcs-sha256/v1"
#: from-version -> function turning a record of that version into one of the next version.
#: 1 -> 2 adds the optional `seal` and `provenance.components`: a version-1 record reads as unsealed.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: lambda data: data}

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


class ReplacedRecord(Strict):
    """An earlier record of the same run id that this record replaced: kept by its seal, so a redo can never be a
    silent re-roll (the replaced file itself is gone; its seal identifies it in a commit or a copy)."""

    seal: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """The replaced record's seal."""
    state: RunState
    """How the replaced run had ended."""
    finishedAt: datetime.datetime
    """When the replaced run had ended (UTC)."""
    reason: str = Field(min_length=1)
    """Why it was replaced: the user's `--reason` for a completed run redone with `clt run --redo`; for a run
    that had not completed, that the next `clt run` ran it again."""
    replacedAt: datetime.datetime
    """When the new run started (UTC)."""


class SampleLedger(Strict):
    """What reached the model, by origin, counted by the suite at the model's input (not reported by the method)."""

    task: int = Field(ge=0)
    """Samples of the updates' own data (the task's training data the suite drew), summed over optimiser steps."""
    memory: int = Field(ge=0)
    """Samples drawn from the suite's memory (replay), summed over optimiser steps."""
    other: int = Field(ge=0)
    """Samples that reached the model with gradients inside an update and were neither (a method's private buffer):
    charged as replay or a budget violation, as `otherPolicy` says."""
    bookkeeping: int = Field(ge=0)
    """Samples a method passed through the model without gradients or outside the updates (its own bookkeeping:
    Fisher estimates, distillation targets)."""
    otherPolicy: Literal["violation", "replay"]
    """The protocol's `budget.unaccountedSamples`."""


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
    samplesProcessed: int = 0
    """Samples that went through the loss, new and replayed, summed over every optimiser step (a sample used in
    three epochs counts three times); 0 where the driver does not count them."""
    updatesExecuted: int = 0
    """Optimizer steps the run itself executed, where they differ from what its method's model received: its own
    phases plus the shared stages and reference models it trained, not those it reused from a stage cache (summed
    over runs: the updates actually spent); 0 where the driver does not count them."""
    framesExecuted: int = 0
    """Frames the run itself rendered (shared data stages it collected, not reused); 0 where not counted."""
    parameters: int | None = None
    """Trainable parameters of the final model."""
    samples: SampleLedger | None = None
    """What reached the model, by origin (None in records of drivers that did not count it: the report says so)."""


class ComponentSource(Strict):
    """The code of one registered component a run used."""

    target: str
    """Its registry target, `module:attr`."""
    distribution: str | None
    """The installed distribution that provides the module (None for a module outside any distribution)."""
    version: str | None
    """That distribution's version."""
    sourceSha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """SHA-256 over the component's source files (the package folder of its module, or the module file alone
    when it is a top-level module): each file's path relative to that folder and its bytes, in path order."""


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
    environment: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    """The digest of the protocol's package file whose environment ran the run (`clt env build`); None: the
    toolkit's environment."""
    components: dict[str, ComponentSource] | None = None
    """`<kind>:<name>` -> the code of every registered component the run used (suite, method, metrics, analysis).
    None in records written before it was recorded."""
    node: dict[str, JsonValue] | None = None
    """Where the run ran (hostname; a cluster node id and resources where the executor knows them)."""


class RunRecord(Strict):
    """One attempted run of a protocol."""

    recordVersion: Literal[2]
    """Format version of this record (readers migrate older ones)."""
    seal: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    """`sha256:` + SHA-256 of the RFC 8785 bytes of this record without `seal`. Required in files of version 2;
    None only for a version-1 record read before it was sealed."""
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
    replaces: list[ReplacedRecord] | None = None
    """Earlier records of this run id that this one replaced, oldest first (absent where none: a record is written
    without the key then)."""

    @property
    def redone(self) -> bool:
        """Whether a completed record of this run was replaced on purpose (`clt run --redo`)."""
        return any(r.state == "completed" for r in self.replaces or [])

    def number(self, key: str) -> float:
        """A metric the driver wrote as one number; a TypeError names the run and the key otherwise."""
        value = self.metrics.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{self.runId}: metrics.{key} is {type(value).__name__}, not a number")
        return float(value)

    def section(self, key: str) -> dict[str, Any] | None:
        """A metric the driver wrote as a JSON object (per-task values, curves, a matrix), read as written; None
        where the run has none."""
        value = self.metrics.get(key)
        return value if isinstance(value, dict) else None


def record_seal(data: dict[str, Any], *, plain: bool = False) -> str:
    """The seal of a record's JSON object: SHA-256 of its RFC 8785 bytes without the `seal` key (`plain`: parsed by
    `loads_plain`, see `cltoolkit.jcs`)."""
    body = {k: v for k, v in data.items() if k != "seal"}
    return "sha256:" + hashlib.sha256(canonical_json(body, plain=plain)).hexdigest()


def _read_text(path: Path) -> str:
    """A record file's text; its display path (a system call per component where it lies outside the working
    directory) is computed only for an error message."""
    try:
        raw = read_regular_bytes(path)
    except NotRegularFile as exc:
        raise ValidationFailed(problems=[Problem(display_path(path), exc.strerror or "not a regular file")]) from None
    except FileNotFoundError:
        raise ValidationFailed(problems=[Problem(display_path(path), "no such file")]) from None
    except OSError as exc:
        raise ValidationFailed(problems=[Problem(display_path(path), f"cannot read: {exc.strerror}")]) from None
    try:
        text = raw.decode("utf-8")
        if not text.startswith("\ufeff"):
            return text
    except UnicodeDecodeError:
        pass
    return decode_json_bytes(raw, display_path(path))  # refuses it (not UTF-8, or a byte-order mark) by its rule


def _read_raw(path: Path) -> tuple[str, dict[str, Any]]:
    text = _read_text(path)
    return text, loads_strict(text, display_path(path))


def raw_digest(text: str) -> str:
    """SHA-256 of a record file's text (its exact bytes): the key under which a verified seal is remembered."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_record(path: Path, verified: MutableMapping[str, str] | None = None) -> RunRecord:
    """Read a record (a regular file: a symbolic link is refused), check its seal, migrate older versions; refuse
    newer ones and anything malformed. A version-1 record comes back unsealed (`seal` None).

    `verified` maps the SHA-256 of a record file's bytes to the seal already checked for exactly those bytes (see
    `RunStore.scan`): such a record is not canonicalized again (RFC 8785 is a large part of the cost of reading
    10,000 records, see `cltoolkit.jcs`) or parsed twice (exactly these bytes passed the strict parse and the seal
    check, at the current record version); any other, and any changed byte, is checked in full and added."""
    text = _read_text(path)
    key = raw_digest(text) if verified is not None else ""
    if verified is not None and key in verified:
        try:
            known = RunRecord.model_validate_json(text, strict=True)
        except ValidationError:
            known = None
        if known is not None and known.seal == verified[key]:
            return known

    def where() -> str:  # the display path costs system calls: computed only for a message
        return display_path(path)

    data = loads_plain(text)  # numbers as RFC 8785 writes them: the seal needs no walk over the values
    plain = data is not None
    if data is None or data.get("recordVersion") != RECORD_VERSION:  # an older version is migrated from its values
        data, plain = loads_strict(text, where), False
    version = data.get("recordVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValidationFailed(problems=[Problem(f"{where()}: /recordVersion", "missing or not an integer")])
    if version > RECORD_VERSION:
        raise Refusal(
            f"{where()}: recordVersion {version} is newer than this toolkit reads ({RECORD_VERSION}); upgrade clt"
        )
    if version >= 2:
        seal = data.get("seal")
        if not isinstance(seal, str):
            raise ValidationFailed(problems=[Problem(f"{where()}: /seal", "missing: every record is sealed")])
        try:
            actual = record_seal(data, plain=plain)  # bytes the store had checked returned above
        except CanonicalizationError as exc:
            raise ValidationFailed(problems=[Problem(where(), f"cannot canonicalize (RFC 8785): {exc}")]) from None
        if actual != seal:
            raise ValidationFailed(
                problems=[
                    Problem(
                        f"{where()}: /seal",
                        f"does not match the content (content {actual}): the record was changed after it was written",
                    )
                ]
            )
        if verified is not None and version == RECORD_VERSION:
            verified[key] = seal
    elif "seal" in data:
        raise ValidationFailed(problems=[Problem(f"{where()}: /seal", "a version-1 record carries no seal")])
    migrated = version < RECORD_VERSION
    while version < RECORD_VERSION:
        if version not in MIGRATIONS:
            raise ValidationFailed(
                problems=[Problem(f"{where()}: /recordVersion", f"no migration from version {version}")]
            )
        data = MIGRATIONS[version](data)
        version += 1
        data["recordVersion"] = version
    try:
        return RunRecord.model_validate_json(json.dumps(data) if migrated else text, strict=True)
    except ValidationError as exc:
        raise ValidationFailed(problems=pydantic_problems(exc, where())) from None


def write_record(path: Path, record: RunRecord) -> str:
    """Seal, then write atomically (sorted keys, no NaN); returns the seal."""
    data = record.model_dump(mode="json")
    if data.get("replaces") is None:
        data.pop("replaces", None)  # records that replaced nothing keep the shape they always had
    if data["budget"].get("samples") is None:
        data["budget"].pop("samples", None)  # as records of drivers that do not count samples always were
    data["seal"] = record_seal(data)
    write_json(path, data)
    return str(data["seal"])


def seal_record_file(path: Path) -> bool:
    """Seal a version-1 record once: the same JSON values, `recordVersion` 2 and its `seal`. Returns whether it
    changed anything (a sealed record is left as it is; a broken one raises)."""
    _, data = _read_raw(path)
    if data.get("recordVersion") != 1:
        read_record(path)  # a sealed record must verify
        return False
    read_record(path)  # validates the version-1 content
    data["recordVersion"] = RECORD_VERSION
    data["seal"] = record_seal(data)
    text = dump_json(data)
    from cltoolkit._io import atomic_write_text

    atomic_write_text(path, text)
    return True
