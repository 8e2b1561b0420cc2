"""`clt status`: every planned run of a stage with its state, from the store (reads only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.registry import registries
from cltoolkit.run.store import RunStore
from cltoolkit.validation import load_protocol

__all__ = ["STATE_LETTERS", "grid_status"]

STATE_LETTERS = {
    "completed": "ok",
    "failed": "F",
    "crashed": "C",
    "timeout": "T",
    "interrupted": "I",
    "partial": "P",
    "foreign": "X",
    "missing": ".",
}
"""States shown by `clt status`: record states, `partial` (a run folder without a readable record: running,
interrupted by a killed driver, or half written), `foreign` (a record of other protocol content), `missing`."""


def grid_status(project: Project, ref: str, *, stage: str | None = None, pilot: bool = False) -> dict[str, Any]:
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    digest = protocol_hash(loaded.document)
    base = project.pilot_runs_dir / digest.removeprefix("sha256:")[:16] if pilot else project.runs_dir
    store = RunStore(base, loaded.id)
    scan = store.scan()
    broken = {
        Path(p.where).parent.name if Path(p.where).name == "record.json" else Path(p.where).name: p.message
        for p in scan.broken
    }
    suite = regs.suite.get(loaded.model.suite)()
    st = loaded.model.stage(stage)
    runs = []
    declared = {m.id for m in loaded.model.metrics}
    for point in suite.plan(loaded.model, st.id):
        rec = scan.records.get(point.run_id)
        if rec is not None and rec.protocol.sha256 != digest:
            state, reason, attempts = "foreign", f"record of {rec.protocol.sha256[:19]}...", rec.status.attempts
        elif rec is not None:
            state, reason, attempts = rec.status.state, rec.status.reason, rec.status.attempts
        elif point.run_id in broken:
            state, reason, attempts = "partial", broken[point.run_id], 0
        else:
            state, reason, attempts = "missing", "", 0
        scores = (
            {k: v for k, v in rec.metrics.items() if k in declared} if rec is not None and state == "completed" else {}
        )
        runs.append(
            {
                "runId": point.run_id,
                "comparison": point.comparison,
                "cell": point.cell,
                "order": point.order,
                "seed": point.seed,
                "state": state,
                "reason": reason,
                "attempts": attempts,
                "scores": scores,
            }
        )
    counts = {state: sum(1 for r in runs if r["state"] == state) for state in STATE_LETTERS}
    return {
        "protocol": loaded.id,
        "sha256": digest,
        "stage": st.id,
        "store": str(store.folder),
        "pilot": pilot,
        "seeds": sorted({r["seed"] for r in runs}),
        "counts": counts,
        "runs": runs,
    }
