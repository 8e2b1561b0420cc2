"""The results block's `resourceCosts`: analytical counts (the drivers' ledgers), measured times and estimates, kept
apart. One typed value that the gatekeeper builds and the report reads; the block itself stays the JSON object
older results blocks already hold (`from_json` reads those, keys they lack taking their empty value)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EXECUTED", "LEDGER_QUANTITIES", "TABLE_QUANTITIES", "CostEstimates", "MeasuredCosts", "ResourceCosts"]

LEDGER_QUANTITIES = (
    "environmentSteps",
    "frames",
    "evaluationSteps",
    "gradientUpdates",
    "replayUpdates",
    "replaySamples",
    "modelQueries",
    "samplesProcessed",
)
"""Quantities summed per comparison over completed runs (every row has each, 0 where a ledger lacks it)."""
EXECUTED = ("updatesExecuted", "framesExecuted")
"""Counts of what runs themselves executed (shared stages once, references included): shown where a driver counts
them."""
TABLE_QUANTITIES = (
    "environmentSteps",
    "frames",
    "evaluationSteps",
    "modelQueries",
    "gradientUpdates",
    "replayUpdates",
    "replaySamples",
    "samplesProcessed",
    *EXECUTED,
)
"""The report's compute table columns, in order (those some comparison counts)."""

ANALYTICAL_NOTE = "counted by the drivers (ledgers), summed over completed runs"
MEASURED_NOTE = "wall-clock of every attempted run, including failed ones"
NO_ESTIMATE = "none (every planned run has a record)"


@dataclass(frozen=True)
class MeasuredCosts:
    wall_clock_s: float | None
    """Wall-clock of every attempted run, failed ones included."""
    per_comparison_s: dict[str, float] = field(default_factory=dict)
    platforms: list[str] = field(default_factory=list)
    hardware: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    precision: list[str] = field(default_factory=list)
    runs_per_node: dict[str, int] = field(default_factory=dict)
    """Attempted runs per node; empty where no record names its node."""
    note: str = MEASURED_NOTE


@dataclass(frozen=True)
class CostEstimates:
    note: str = NO_ESTIMATE
    missing_runs: int | None = None
    wall_clock_s: float | None = None
    """Extrapolated wall-clock of the missing runs (an estimate, not a measurement)."""


@dataclass(frozen=True)
class ResourceCosts:
    per_comparison: dict[str, dict[str, float]]
    """Comparison -> ledger quantity -> sum over completed runs."""
    measured: MeasuredCosts
    estimates: CostEstimates = CostEstimates()
    analytical_note: str = ANALYTICAL_NOTE

    def to_json(self) -> dict[str, Any]:
        m, e = self.measured, self.estimates
        measured: dict[str, Any] = {
            "note": m.note,
            "wallClockSeconds": m.wall_clock_s,
            "perComparisonSeconds": m.per_comparison_s,
            "platforms": m.platforms,
            "hardware": m.hardware,
            "devices": m.devices,
            "precision": m.precision,
        }
        if m.runs_per_node:
            measured["runsPerNode"] = m.runs_per_node
        estimates: dict[str, Any] = {"note": e.note}
        if e.missing_runs is not None:
            estimates = {"missingRuns": e.missing_runs, "wallClockSeconds": e.wall_clock_s, "note": e.note}
        return {
            "analytical": {"note": self.analytical_note, "perComparison": self.per_comparison},
            "measured": measured,
            "estimates": estimates,
        }

    @classmethod
    def from_json(cls, block: Mapping[str, Any]) -> ResourceCosts:
        analytical, measured, est = (dict(block.get(k) or {}) for k in ("analytical", "measured", "estimates"))
        return cls(
            per_comparison={c: dict(row) for c, row in (analytical.get("perComparison") or {}).items()},
            measured=MeasuredCosts(
                wall_clock_s=measured.get("wallClockSeconds"),
                per_comparison_s=dict(measured.get("perComparisonSeconds") or {}),
                platforms=list(measured.get("platforms") or []),
                hardware=list(measured.get("hardware") or []),
                devices=list(measured.get("devices") or []),
                precision=list(measured.get("precision") or []),
                runs_per_node=dict(measured.get("runsPerNode") or {}),
                note=measured.get("note", MEASURED_NOTE),
            ),
            estimates=CostEstimates(est.get("note", "none"), est.get("missingRuns"), est.get("wallClockSeconds")),
            analytical_note=analytical.get("note", ANALYTICAL_NOTE),
        )
