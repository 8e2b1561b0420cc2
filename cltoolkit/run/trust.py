"""Whether a record can be trusted for a protocol's results (used by the gatekeeper, `clt status` and the runner).

A record is used only if its file is a regular file inside the store, its seal matches its content, its run id is
the one the plan derives from its spec, its spec / protocol id / hash / pilot flag agree with the planned run it
claims to be, and (when completed) the analysis finds every value it needs present, finite and of its kind. Any
record failing one of these is refused by name: never counted as missing, never used.
"""

from __future__ import annotations

from typing import Any

from cltoolkit.components import Analysis, Suite
from cltoolkit.errors import Refusal
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import GridPoint
from cltoolkit.run.store import StoreScan

__all__ = ["planned_points", "record_problems", "refuse_untrusted"]


def planned_points(suite: Suite[Any], protocol: ProtocolBase) -> dict[str, GridPoint]:
    """Every run any non-pilot stage of the protocol plans, by run id (pilot runs live in the pilot store)."""
    out: dict[str, GridPoint] = {}
    for stage in protocol.seeds.stages:
        if stage.purpose != "pilot":
            for point in suite.plan(protocol, stage.id):
                out.setdefault(point.run_id, point)
    return out


def record_problems(
    record: RunRecord,
    protocol: ProtocolBase,
    sha256: str,
    planned: dict[str, GridPoint],
    analysis: Analysis[Any] | None,
) -> list[str]:
    """Why `record` cannot be used for this protocol's results (empty when it can)."""
    problems = []
    if record.seal is None:
        problems.append(
            f"unsealed (written before records were sealed): seal it once with `clt seal --protocol {protocol.id}`"
        )
    if record.protocol.id != protocol.id:
        problems.append(f"/protocol/id is {record.protocol.id!r}, not {protocol.id!r}")
    if record.protocol.sha256 != sha256:
        problems.append(
            f"/protocol/sha256: made for another version of the protocol content ({record.protocol.sha256}; "
            f"frozen is {sha256}); results of different protocols are never mixed"
        )
    if record.protocol.pilot:
        problems.append("a pilot record (pilot runs never report results; they belong in the pilot store)")
    if protocol.packages is not None and record.status.state == "completed" and record.provenance.environment is None:
        problems.append(
            "/provenance/environment: ran in the toolkit's environment, not in the protocol's own package stack "
            "(`packages`); rerun it (`clt run` builds the environment)"
        )
    point = planned.get(record.runId)
    if point is None:
        problems.append(f"run id {record.runId!r} is not a planned run of any stage of {protocol.id}")
    else:
        spec = record.spec
        for name, got, want in (
            ("comparison", spec.comparison, point.comparison),
            ("method", spec.method, point.method),
            ("seed", spec.seed, point.seed),
            ("order", spec.order, point.order),
            ("cell", spec.cell, point.cell),
        ):
            if got != want:
                problems.append(f"/spec/{name} is {got!r}, but planned run {record.runId!r} has {want!r}")
    if record.status.state == "completed" and analysis is not None and point is not None and not problems:
        problems.extend(analysis.record_problems(protocol, record))
    return problems


def refuse_untrusted(
    scan: StoreScan,
    where: str,
    protocol: ProtocolBase,
    sha256: str,
    planned: dict[str, GridPoint],
    analysis: Analysis[Any] | None,
) -> None:
    """Refuse (exit 1) while the store holds any record that cannot be used, naming each run and what is wrong."""
    lines = [f"{name}: {why}" for name, why in sorted(scan.corrupt.items())]
    pilots = 0
    for run_id, record in sorted(scan.records.items()):
        problems = record_problems(record, protocol, sha256, planned, analysis)
        pilots += record.protocol.pilot
        lines.extend(f"{run_id}: {p}" for p in problems)
    if lines:
        extra = f" ({pilots} pilot record(s) among them)" if pilots else ""
        raise Refusal(
            f"{where}: {len(lines)} problem(s) with records, which are refused (never counted as missing){extra}:\n"
            + "\n".join(lines)
            + "\nRestore them (git checkout), move them out of the store, or rerun those runs"
        )
