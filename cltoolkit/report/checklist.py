"""The report's reporting checklist details and its compute accounting section: the git commits, the realized
splits and the compute table (measured times, analytical counts and estimates, never mixed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cltoolkit.protocol.costs import TABLE_QUANTITIES, ResourceCosts
from cltoolkit.run.record import RunRecord

__all__ = ["commit_lines", "compute_lines", "split_lines"]


def commit_lines(records: Sequence[RunRecord]) -> list[str]:
    """The git commits the records were produced at (12 characters, +dirty for an uncommitted checkout)."""
    return sorted(
        {
            x.provenance.gitCommit[:12] + ("+dirty" if x.provenance.gitDirty else "")
            for x in records
            if x.provenance.gitCommit
        }
    )


def split_lines(records: Sequence[RunRecord], frozen: Path | None = None) -> list[str]:
    """Realized split manifests per evaluation set: hashes, rows and independent units (apart)."""
    sets: dict[str, list[Any]] = {}
    for rec in records:
        for set_id, man in rec.splits.items():
            sets.setdefault(set_id, []).append(man)
    if not sets:
        if frozen is not None and frozen.is_file():
            return [
                f"- Split manifest: frozen with the protocol in `registry/locks/{frozen.name}` (written by `clt "
                "protocol freeze` from the declared generator ranges; the runs draw their layouts from it)."
            ]
        return ["- Split manifests: none (the protocol declares no held-out split)."]
    out = ["- Split manifests (recorded in every run record; rows and independent units counted apart):"]
    for set_id, mans in sorted(sets.items()):

        def span(key: str, side: str, mans: list[Any] = mans) -> str:
            vals = sorted({m[key][side] for m in mans})
            return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"

        out.append(
            f"  - `{set_id}`: {mans[0]['kind']} split by {mans[0]['unit']}; {len({m['sha256'] for m in mans})} "
            f"distinct manifest(s) over {len(mans)} runs; "
            f"rows train {span('rows', 'train')} / test {span('rows', 'test')}; "
            f"independent units train {span('independentUnits', 'train')} / test {span('independentUnits', 'test')}"
        )
    return out


def compute_lines(costs: ResourceCosts) -> list[str]:
    """The compute table: measured times, analytical counts and estimates, never mixed."""
    measured, per = costs.measured, costs.per_comparison
    quantities = [q for q in TABLE_QUANTITIES if any(row.get(q) for row in per.values())]
    lines = [
        "## Compute accounting",
        "",
        "**Measured** (wall-clock of every attempted run, failed ones included): "
        f"{measured.wall_clock_s} s in total; per comparison "
        + ", ".join(f"{k} {v} s" for k, v in measured.per_comparison_s.items())
        + f"; hardware {', '.join(measured.hardware) or '-'}; "
        f"devices {', '.join(measured.devices) or '-'}; "
        f"precision {', '.join(measured.precision) or 'not recorded'}.",
        "",
    ]
    if measured.runs_per_node:
        lines += [
            "**Runs per node**: " + ", ".join(f"{k}: {v}" for k, v in measured.runs_per_node.items()) + ".",
            "",
        ]
    if quantities:
        lines += [
            "**Analytical counts** (from the drivers' ledgers, summed over completed runs):",
            "",
            "| comparison | " + " | ".join(quantities) + " |",
            "|---|" + "---|" * len(quantities),
        ]
        lines += [f"| {c} | " + " | ".join(f"{row.get(q, 0):.0f}" for q in quantities) + " |" for c, row in per.items()]
        lines.append("")
        if "updatesExecuted" in quantities:
            lines += [
                "updatesExecuted and framesExecuted count what the runs computed themselves: a shared stage once (by "
                "the run that trained or collected it), reference models included; gradientUpdates and frames charge "
                "every run with everything its method's model received (the matched budget), so they double count "
                "shared stages and leave out the references.",
                "",
            ]
        steps = {c: row.get("gradientUpdates", 0) + row.get("replayUpdates", 0) for c, row in per.items()}
        if "samplesProcessed" in quantities and any(steps.values()):
            lines += [
                "**Samples per optimiser step** (what an update sees, beside how many updates there are): "
                + ", ".join(
                    f"{c} {row['samplesProcessed'] / steps[c]:.0f}"
                    for c, row in per.items()
                    if steps[c] and row.get("samplesProcessed")
                )
                + ".",
                "",
            ]
    lines += [f"**Estimates**: {costs.estimates.note}", ""]
    return lines
