"""`clt status`: every planned run of a stage with its state, from the store (reads only)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cltoolkit.component_validation import load_protocol
from cltoolkit.errors import CltError, Refusal
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.registry import registries
from cltoolkit.run.store import RunStore
from cltoolkit.run.trust import planned_points, record_problems

__all__ = ["STATE_LETTERS", "GridStatus", "RunState", "grid_status", "seal_store"]

STATE_LETTERS = {
    "completed": "ok",
    "redo-pending": "r",
    "failed": "F",
    "crashed": "C",
    "timeout": "T",
    "interrupted": "I",
    "partial": "P",
    "refused": "R",
    "foreign": "X",
    "missing": ".",
}
"""States shown by `clt status`: record states, `redo-pending` (a completed record that a `--redo` is to replace: the
redo was stopped, killed or ran out of disk before its new record was sealed; the record is in place and the next
`clt run` completes the redo), `partial` (a run folder without a record: running, or interrupted
by a killed driver), `refused` (a record that cannot be trusted: unreadable, a broken seal, a symbolic link, a
folder holding another run's record, unsealed, a spec or values that disagree with the plan), `foreign` (a record
of other protocol content), `missing`."""


@dataclass(frozen=True)
class RunState:
    """One planned run's state in the store (field names are the `clt status --json` keys)."""

    runId: str
    comparison: str
    cell: str | None
    order: str | None
    seed: int
    state: str
    """One of STATE_LETTERS' keys."""
    reason: str
    attempts: int
    scores: dict[str, Any]
    """Raw declared scores of a completed run (never results)."""

    @property
    def row(self) -> str:
        """The run's row in the grid: comparison / cell / order."""
        return "/".join(x for x in (self.comparison, self.cell, self.order) if x)


@dataclass(frozen=True)
class GridStatus:
    """A stage's grid with each run's state (field names are the `clt status --json` keys)."""

    note: str
    """Why the states may mislead (the protocol changed since it was frozen), or empty."""
    protocol: str
    sha256: str
    stage: str
    store: str
    pilot: bool
    seeds: list[int]
    counts: dict[str, int]
    runs: list[RunState]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def grid_status(project: Project, ref: str, *, stage: str | None = None, pilot: bool = False) -> GridStatus:
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    digest = protocol_hash(loaded.document)
    store = RunStore(project.store_base(digest, pilot=pilot), loaded.id)
    scan = store.scan()
    pending = store.pending_redos()
    partial = {Path(p.where).name: p.message for p in scan.partial}
    suite = regs.new_suite(loaded.model.suite)
    analysis = regs.new_analysis(suite.analysis) if suite.analysis else None
    planned = planned_points(suite, loaded.model)
    st = loaded.model.stage(stage)
    runs = []
    declared = {m.id for m in loaded.model.metrics}
    for point in suite.plan(loaded.model, st.id):
        rec = scan.records.get(point.run_id)
        problems = record_problems(rec, loaded.model, rec.protocol.sha256, planned, analysis) if rec is not None else []
        if point.run_id in scan.corrupt:
            state, reason, attempts = "refused", scan.corrupt[point.run_id], 0
        elif rec is not None and rec.protocol.sha256 != digest:
            state, reason, attempts = "foreign", f"record of {rec.protocol.sha256[:19]}...", rec.status.attempts
        elif rec is not None and problems and not pilot:
            state, reason, attempts = "refused", "; ".join(problems), rec.status.attempts
        elif rec is not None and rec.status.state == "completed" and pending.get(rec.runId, {}).get("seal") == rec.seal:
            why = pending[rec.runId]["reason"]
            state, reason, attempts = (
                "redo-pending",
                f"--redo asked ({why}); `clt run` completes it",
                rec.status.attempts,
            )
        elif rec is not None:
            state, reason, attempts = rec.status.state, rec.status.reason, rec.status.attempts
        elif point.run_id in partial:
            state, reason, attempts = "partial", partial[point.run_id], 0
        else:
            state, reason, attempts = "missing", "", 0
        scores = (
            {k: v for k, v in rec.metrics.items() if k in declared}
            if rec is not None and state in ("completed", "redo-pending")
            else {}
        )
        runs.append(
            RunState(
                point.run_id, point.comparison, point.cell, point.order, point.seed, state, reason, attempts, scores
            )
        )
    counts = {state: sum(1 for r in runs if r.state == state) for state in STATE_LETTERS}
    from cltoolkit.protocol.lock import read_lock

    lock = None if pilot else read_lock(project, loaded.id)
    note = ""
    if lock is not None and lock.sha256 != digest:
        note = (
            f"{loaded.path.name} changed since it was frozen ({project.lock_path(loaded.id)}: {lock.sha256}); records "
            f"of the frozen content show as foreign (X). Undo the edit with `clt protocol restore {loaded.id}`, or "
            f"move it to a new version with `clt protocol bump {loaded.id}`"
        )
    seeds = sorted({r.seed for r in runs})
    return GridStatus(note, loaded.id, digest, st.id, str(store.folder), pilot, seeds, counts, runs)


def seal_store(project: Project, ref: str, *, pilot: bool = False) -> tuple[int, int]:
    """Seal every version-1 record of a protocol's store once (under the store's driver lock); returns (sealed,
    already sealed). Values are kept as they are: the seal only makes later edits detectable. A record that is
    not readable, or whose seal does not verify, is refused by name and nothing is sealed."""
    from cltoolkit.run.record import seal_record_file
    from cltoolkit.run.store import RECORD

    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    digest = protocol_hash(loaded.document)
    store = RunStore(project.store_base(digest, pilot=pilot), loaded.id)
    with store.driver_lock():
        scan = store.scan()
        store.refuse_corrupt(scan)
        sealed = already = 0
        for run_id in sorted(scan.records):
            try:
                changed = seal_record_file(store.run_dir(run_id) / RECORD)
            except CltError as exc:
                raise Refusal(f"{run_id}: {exc.message}") from None
            sealed += changed
            already += not changed
    return sealed, already
