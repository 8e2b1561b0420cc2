"""`clt run --redo`: completed runs run again on purpose, never as a silent re-roll. The runs must have completed
records; each new record keeps the seals of the records it replaced (`RunRecord.replaces`), and the report counts
and lists redone runs."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cltoolkit.errors import InputError
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import GridPoint

__all__ = ["Redo", "redo_points", "replaced_history", "replacing"]


@dataclass(frozen=True)
class Redo:
    """`clt run --redo <run ids> --reason "..."`: replace completed records on purpose. The replaced record's seal,
    state and end time and the reason stay in the new record (`replaces`), and the report counts redone runs."""

    run_ids: tuple[str, ...]
    reason: str

    def __post_init__(self) -> None:
        if not self.run_ids:
            raise InputError("--redo needs at least one run id")
        if not self.reason.strip():
            raise InputError(
                "--redo needs --reason: say why the completed record is replaced (the new record keeps the reason "
                "and the replaced record's seal, and the report counts redone runs)"
            )


def redo_points(
    redo: Redo, points: list[GridPoint], records: Mapping[str, RunRecord], protocol_id: str, stage: str
) -> list[GridPoint]:
    """The grid points `--redo` names: each must be a run of the stage with a completed record."""
    by_id = {p.run_id: p for p in points}
    problems = []
    for run_id in redo.run_ids:
        if run_id not in by_id:
            problems.append(f"--redo {run_id}: not a run of {protocol_id} stage {stage!r} (`clt status` lists them)")
        elif run_id not in records:
            problems.append(f"--redo {run_id}: it has no record yet; a plain `clt run` runs it")
        elif records[run_id].status.state != "completed":
            problems.append(
                f"--redo {run_id}: its record is {records[run_id].status.state!r}, which a plain `clt run` redoes"
            )
    if problems:
        raise InputError("\n".join(problems))
    return [by_id[run_id] for run_id in dict.fromkeys(redo.run_ids)]


def replaced_history(old: RunRecord, redo: Redo | None, now: datetime.datetime) -> list[dict[str, Any]]:
    """The `replaces` of the record that will replace `old`: `old`'s own history, then `old` itself with why (the
    `--redo` reason, or that the next `clt run` ran an unfinished run again)."""
    why = redo.reason if redo is not None else f"the record was {old.status.state!r}: the next clt run ran it again"
    entry = {
        "seal": old.seal,
        "state": old.status.state,
        "finishedAt": old.provenance.finishedAt.isoformat(),
        "reason": why,
        "replacedAt": now.isoformat(),
    }
    return [*(r.model_dump(mode="json") for r in old.replaces or []), entry]


def replacing(record: RunRecord, replaces: list[dict[str, Any]] | None) -> RunRecord:
    if not replaces:
        return record
    return RunRecord.model_validate({**record.model_dump(mode="json"), "replaces": replaces}, strict=False)
