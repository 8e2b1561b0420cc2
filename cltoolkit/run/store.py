"""The run store: `runs/<protocol-id>/<run-id>/record.json` (official) or `pilot-runs/...` (pilot).

Lists records per protocol id and hash; detects partial writes (a run directory without a readable record);
refuses a store holding another hash of the same protocol id.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cltoolkit.errors import CltError, Problem, Refusal
from cltoolkit.run.record import RunRecord, read_record, write_record

__all__ = ["RunStore", "StoreScan"]

RECORD = "record.json"


@dataclass
class StoreScan:
    """What a store holds for one protocol id."""

    records: dict[str, RunRecord] = field(default_factory=dict)
    """run id -> record (the record's own runId)."""
    broken: list[Problem] = field(default_factory=list)
    """Run directories whose record is missing, partial or invalid (they are redone / reported)."""
    duplicates: list[str] = field(default_factory=list)
    """Run ids held by more than one record."""


@dataclass(frozen=True)
class RunStore:
    """Records of one protocol id under one base folder."""

    base: Path
    protocol_id: str

    @property
    def folder(self) -> Path:
        return self.base / self.protocol_id

    def run_dir(self, run_id: str) -> Path:
        return self.folder / run_id

    def scan(self) -> StoreScan:
        scan = StoreScan()
        if not self.folder.is_dir():
            return scan
        import gc

        enabled = gc.isenabled()
        gc.disable()  # thousands of small acyclic objects: collection passes would dominate the load
        try:
            self._scan(scan)
        finally:
            if enabled:
                gc.enable()
        return scan

    def _scan(self, scan: StoreScan) -> None:
        names = sorted(entry.name for entry in os.scandir(self.folder) if entry.is_dir())
        for run_dir in (self.folder / name for name in names):
            path = run_dir / RECORD
            if not path.exists():
                scan.broken.append(Problem(str(run_dir), "no record (interrupted or still running)"))
                continue
            try:
                record = read_record(path)
            except CltError as exc:
                scan.broken.append(Problem(str(path), f"unreadable record: {exc.message.splitlines()[0]}"))
                continue
            if record.runId in scan.records or record.runId != run_dir.name:
                scan.duplicates.append(record.runId)
            scan.records.setdefault(record.runId, record)

    def write(self, record: RunRecord) -> Path:
        path = self.run_dir(record.runId) / RECORD
        write_record(path, record)
        return path

    def refuse_foreign(self, scan: StoreScan, sha256: str) -> None:
        """Refuse a store holding records of another hash of this protocol id."""
        foreign = sorted({r.protocol.sha256 for r in scan.records.values() if r.protocol.sha256 != sha256})
        if foreign:
            n = sum(1 for r in scan.records.values() if r.protocol.sha256 != sha256)
            raise Refusal(
                f"{self.folder} holds {n} record(s) of {self.protocol_id} at another hash ({', '.join(foreign)}); "
                f"this protocol is {sha256}. Records of different protocol content are never mixed: use a new "
                "runs directory, or bump the protocol to a new version"
            )
