"""How long a `clt run` will take, said before it starts: an estimate from measured run times, never a guess.

Sources, nearest first: the finished runs of this store (this protocol, this hash, usually this machine), then the
measured costs in the protocol's own results block, then those of another version of the same protocol (the same
suite and comparisons, perhaps another budget: the label says which). Each run's time is the mean of the measured
runs of its comparison and cell, else of its comparison, else of every measured run. The wall time is the makespan
of the longest-first assignment of those times to the workers. Where nothing was measured there is no estimate.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import GridPoint

__all__ = ["Estimate", "MeasuredTimes", "estimate", "measured_times"]


@dataclass(frozen=True)
class MeasuredTimes:
    """Seconds of measured runs, keyed by (comparison, cell); `source` says where they were measured."""

    seconds: Mapping[tuple[str, str | None], Sequence[float]]
    source: str

    def per_run(self, comparison: str, cell: str | None) -> float | None:
        exact = self.seconds.get((comparison, cell))
        if exact:
            return sum(exact) / len(exact)
        same = [s for (c, _), times in self.seconds.items() if c == comparison for s in times]
        if same:
            return sum(same) / len(same)
        every = [s for times in self.seconds.values() for s in times]
        return sum(every) / len(every) if every else None


@dataclass(frozen=True)
class Estimate:
    runs: int
    cpu_hours: float
    wall_s: float
    source: str

    def line(self, workers: int) -> str:
        return (
            f"estimate: {self._cpu()}, about {_duration(self.wall_s)} of wall time on {workers} "
            f"worker{'s' if workers != 1 else ''} (an estimate from {self.source}; not a measurement)"
        )

    def _cpu(self) -> str:
        return f"{self.cpu_hours:.1f} CPU-hours" if self.cpu_hours >= 1 else f"{self.cpu_hours * 60:.1f} CPU-minutes"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _from_records(records: Iterable[RunRecord], source: str) -> MeasuredTimes | None:
    seconds: dict[tuple[str, str | None], list[float]] = {}
    for record in records:
        if record.status.state == "completed":
            key = (record.spec.comparison, record.spec.cell)
            seconds.setdefault(key, []).append(record.provenance.wallClockSeconds)
    if not seconds:
        return None
    return MeasuredTimes(seconds, f"{sum(map(len, seconds.values()))} finished run(s) in {source}")


def _from_results(protocol_id: str, results: Mapping[str, Any], note: str = "") -> MeasuredTimes | None:
    """Per-comparison means from a results block: its measured seconds over its attempted runs of each comparison."""
    costs = (results.get("resourceCosts") or {}).get("measured") or {}
    per_comparison = costs.get("perComparisonSeconds") or {}
    counts: dict[str, int] = {}
    for row in results.get("perRun") or []:
        if row.get("status") not in (None, "missing"):
            counts[row["comparison"]] = counts.get(row["comparison"], 0) + 1
    seconds: dict[tuple[str, str | None], list[float]] = {
        (comparison, None): [total / counts[comparison]]
        for comparison, total in per_comparison.items()
        if counts.get(comparison) and total
    }
    if not seconds:
        return None
    hardware = ", ".join(costs.get("hardware") or []) or "unrecorded hardware"
    return MeasuredTimes(
        seconds,
        f"{protocol_id}'s results block{note} ({sum(counts.values())} measured runs on {hardware})",
    )


def measured_times(
    records: Iterable[RunRecord], store: str, protocol_id: str, protocol_path: Path
) -> MeasuredTimes | None:
    """The nearest measured run times for `protocol_id` (see the module docstring), or None."""
    own = _from_records(records, store)
    if own is not None:
        return own
    document = _read(protocol_path)
    if document.get("results"):
        found = _from_results(protocol_id, document["results"])
        if found is not None:
            return found
    match = re.fullmatch(r"(.+)-v([0-9]+)", protocol_id)
    if match is None:
        return None
    name, version = match.group(1), int(match.group(2))
    siblings = []
    for path in protocol_path.parent.glob(f"{name}-v*.json"):
        other = re.fullmatch(rf"{re.escape(name)}-v([0-9]+)", path.stem)
        if other is not None and int(other.group(1)) != version:
            siblings.append((abs(int(other.group(1)) - version), -int(other.group(1)), path))
    for _, _, path in sorted(siblings):
        sibling = _read(path)
        if sibling.get("suite") == document.get("suite") and sibling.get("results"):
            found = _from_results(path.stem, sibling["results"], ", another version of this protocol")
            if found is not None:
                return found
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def estimate(
    points: Sequence[GridPoint], times: MeasuredTimes | None, workers: int, cpus_per_run: float
) -> Estimate | None:
    """CPU-hours and wall time of running `points` on `workers` parallel slots, from measured times."""
    if times is None or not points:
        return None
    durations = sorted((times.per_run(p.comparison, p.cell) or 0.0 for p in points), reverse=True)
    slots = [0.0] * max(1, min(workers, len(durations)))
    for seconds in durations:  # longest first onto the least loaded worker
        heapq.heappush(slots, heapq.heappop(slots) + seconds)
    return Estimate(len(points), sum(durations) * cpus_per_run / 3600, max(slots), times.source)
