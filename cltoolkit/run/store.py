"""The run store: `runs/<protocol-id>/<run-id>/record.json` (official) or `pilot-runs/...` (pilot).

Lists records per protocol id and hash. A run folder without a record is *partial* (running, or interrupted);
a record that cannot be trusted (unreadable, truncated, an unknown field, a broken seal, a symbolic link, a folder
named for another run) is *corrupt*: it is named and refused, never counted as missing. One driver at a time
holds the store's lock (`<base>/.<protocol-id>.driver.lock`) for its whole grid.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cltoolkit._io import NotRegularFile, file_mode, local_mac, open_append_nofollow, read_regular_bytes, write_json
from cltoolkit.errors import CltError, Problem, Refusal
from cltoolkit.run.record import RunRecord, raw_digest, read_record, write_record

__all__ = ["LOCK_FILE", "RECORD", "REDO_INTENT", "RunStore", "StoreScan", "collection_paused"]

RECORD = "record.json"
REDO_INTENT = "redo-intent.json"
"""In a run folder: a `--redo` was asked for and its new record is not written yet (its reason, the seal of the
record it will replace, when it was asked). Removed once the new record is sealed in place."""
LOCK_FILE = ".driver.lock"  # suffix of the lock file beside the store
SEALS = ".seals"
"""In a store folder, one line per record file whose seal was checked (by the driver that wrote it, or a report
that read it): the SHA-256 of the file's bytes and the seal. Only saves re-canonicalizing and re-parsing unchanged
files; never trusted for changed bytes (a different digest), never committed (a fresh clone checks every seal in
full). Each line carries a MAC under this machine's secret (`cltoolkit._io.local_mac`), so a `.seals` committed,
copied or planted from elsewhere vouches for nothing. It adds no trust: a seal is an unkeyed digest that anyone
editing a record could recompute; what pins records is the results block's evidence manifest and git history."""


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block that loads or holds thousands of records: they are many
    small acyclic objects, so each full collection pass walks all of them and frees nothing (measured over 10,000
    records: 0.25 s of the gatekeeper's 1.7 s and 0.2 s of the report's figures). Cycles made inside the block are
    collected after it; reference counting frees everything else as usual."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class StoreScan:
    """What a store holds for one protocol id."""

    records: dict[str, RunRecord] = field(default_factory=dict)
    """run id -> record (the record's own runId, which equals its folder's name)."""
    partial: list[Problem] = field(default_factory=list)
    """Run folders without a record (a run still going, or one interrupted by a killed driver): redone later."""
    corrupt: dict[str, str] = field(default_factory=dict)
    """Run folder name -> why its record cannot be trusted. Refused by name, never counted as missing."""
    duplicates: list[str] = field(default_factory=list)
    """Run ids held by more than one record."""

    @property
    def broken(self) -> list[Problem]:
        """Partial folders and corrupt records together (where = run folder)."""
        return self.partial + [Problem(name, why) for name, why in sorted(self.corrupt.items())]


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

    @property
    def lock_path(self) -> Path:
        """`<base>/.<protocol-id>.driver.lock`, beside the store (so a refused grid leaves its folder untouched)."""
        return self.base / f".{self.protocol_id}{LOCK_FILE}"

    def _seals(self) -> dict[str, str]:
        """The remembered seals: lines `<64 hex> sha256:<64 hex> hmac-sha256:<64 hex>` whose MAC this machine's
        secret verifies (`local_mac`); any other line (committed, copied, planted, or of the older unkeyed format)
        is ignored, and its record is checked in full."""
        try:
            lines = (self.folder / SEALS).read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            return {}
        out = {}
        for line in lines:
            key, seal, mac = [*line.split(" "), "", ""][:3]
            if len(key) == 64 and seal.startswith("sha256:") and len(seal) == 71 and mac:
                if local_mac(f"{key} {seal}".encode()) == mac:
                    out[key] = seal
        return out

    def _remember(self, seals: dict[str, str]) -> None:
        """Append lines (a write per record stays O(1)); best effort: a store that cannot be written to (a
        read-only checkout), or a machine without a local secret, just checks seals in full again."""
        lines = []
        for key, seal in seals.items():
            mac = local_mac(f"{key} {seal}".encode())
            if mac is None:
                return
            lines.append(f"{key} {seal} {mac}\n")
        try:
            with open_append_nofollow(self.folder / SEALS) as out:
                out.write("".join(lines).encode())
        except OSError:
            pass

    def scan(self, *, remember: bool = False) -> StoreScan:
        """Every record of the store, each seal checked (`remember`: keep the digests of the files whose seals
        were checked, so the next scan skips re-canonicalizing them; see `SEALS`)."""
        scan = StoreScan()
        if not self.folder.is_dir():
            return scan
        seals = self._seals()
        known = len(seals)
        with collection_paused():
            self._scan(scan, seals)
        if remember and len(seals) != known:
            self._remember(dict(list(seals.items())[known:]))
        return scan

    def _scan(self, scan: StoreScan, seals: dict[str, str]) -> None:
        entries = sorted(os.scandir(self.folder), key=lambda e: e.name)
        for entry in entries:
            if entry.name.startswith("."):
                continue  # the driver lock, stage caches
            if entry.is_symlink():
                scan.corrupt[entry.name] = "the run folder is a symbolic link (records are read only inside the store)"
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            with os.scandir(entry.path) as items:  # one listing: links and the record's type, no stat per file
                kinds = {item.name: item for item in items}
            links = sorted(name for name, item in kinds.items() if item.is_symlink())
            if links:
                scan.corrupt[entry.name] = (
                    f"holds symbolic link(s) {', '.join(links)}: nothing in a run folder is followed outside the store"
                )
                continue
            found = kinds.get(RECORD)
            if found is None:
                scan.partial.append(Problem(entry.path, "no record (interrupted or still running)"))
                continue
            if not found.is_file(follow_symlinks=False):
                scan.corrupt[entry.name] = "record.json is not a regular file"
                continue
            path = Path(found.path)
            try:
                record = read_record(path, seals)
            except CltError as exc:
                first = exc.problems[0] if exc.problems else None
                why = f"{first.where.rsplit(RECORD, 1)[-1].lstrip(': ') or '/'}: {first.message}" if first else ""
                scan.corrupt[entry.name] = f"unreadable record ({why or exc.message.splitlines()[0]})"
                continue
            if record.runId != entry.name:
                scan.corrupt[entry.name] = (
                    f"holds a record of run {record.runId!r}, not of its own name (a copied or renamed folder: more "
                    "than one record for one run)"
                )
                scan.duplicates.append(record.runId)
                continue
            if record.runId in scan.records:
                scan.duplicates.append(record.runId)
            scan.records.setdefault(record.runId, record)

    def pending_redos(self) -> dict[str, dict[str, Any]]:
        """Run id -> the durable intent to redo it (`REDO_INTENT` in its folder): a `--redo` that has not yet
        written its new record (stopped, killed, or out of disk). The completed record is still in place."""
        out: dict[str, dict[str, Any]] = {}
        if not self.folder.is_dir():
            return out
        for path in sorted(self.folder.glob(f"*/{REDO_INTENT}")):
            try:
                data = json.loads(read_regular_bytes(path))
            except (OSError, NotRegularFile, ValueError):
                continue  # a half-written or planted intent is not an intent; the record stays as it is
            reason = data.get("reason") if isinstance(data, dict) else None
            if isinstance(reason, str) and reason.strip() and isinstance(data.get("seal"), str):
                out[path.parent.name] = data
        return out

    def record_redo_intent(self, run_id: str, seal: str, reason: str, when: str) -> None:
        """Write the intent to redo a completed run before any work starts (atomically; a full disk raises here,
        before the run starts, and leaves the record untouched)."""
        write_json(self.run_dir(run_id) / REDO_INTENT, {"reason": reason, "seal": seal, "requestedAt": when})

    def clear_redo_intent(self, run_id: str) -> None:
        (self.run_dir(run_id) / REDO_INTENT).unlink(missing_ok=True)

    def write(self, record: RunRecord) -> Path:
        """Seal and write a record atomically; its seal is remembered for the next scan (see `SEALS`)."""
        path = self.run_dir(record.runId) / RECORD
        seal = write_record(path, record)
        self._remember({raw_digest(path.read_text()): seal})  # the bytes this process just sealed and wrote
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

    def refuse_corrupt(self, scan: StoreScan) -> None:
        """Refuse a store holding records that cannot be trusted, naming each (nothing is redone over them)."""
        if scan.corrupt:
            raise Refusal(
                f"{self.folder}: {len(scan.corrupt)} record(s) cannot be trusted and are refused:\n"
                + "\n".join(f"{name}: {why}" for name, why in sorted(scan.corrupt.items()))
                + "\nRestore them (e.g. `git checkout -- <folder>`) or move them out of the store; nothing was run"
            )

    @contextmanager
    def driver_lock(self, *, wait: bool = False, poll_s: float = 0.5) -> Iterator[None]:
        """Hold the store's lock for a whole grid: a second driver exits at once naming the holder (or waits).

        An advisory `flock` on `lock_path`, released by the kernel when the holder dies; the file
        names the holder (pid, host, start time) for the message."""
        import fcntl

        self.base.mkdir(parents=True, exist_ok=True)
        path = self.lock_path
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, file_mode())
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if not wait:
                        raise Refusal(
                            f"{self.folder} is in use by another clt driver ({_holder(fd)}); two drivers on one "
                            "store would compute runs twice. Wait for it to finish, or pass --wait"
                        ) from None
                    time.sleep(poll_s)
            holder = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "startedAt": datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def clean_stale(self) -> list[Path]:
        """Remove what killed attempts left: `output-*.json` and atomic-write `.tmp` files (call under the lock)."""
        removed: list[Path] = []
        if not self.folder.is_dir():
            return removed
        for entry in os.scandir(self.folder):
            if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                continue
            for item in os.scandir(entry.path):
                name = item.name
                stale = (name.startswith("output-") and name.endswith(".json")) or (
                    name.startswith(".") and name.endswith(".tmp")
                )
                if stale and not item.is_dir(follow_symlinks=False):
                    os.unlink(item.path)
                    removed.append(Path(item.path))
        return removed


def _holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict) or "pid" not in data:
        return "holder unknown"
    return f"pid {data.get('pid')} on {data.get('host')}, started {data.get('startedAt')}"
