"""Budgets and costs from the records: the declared fairness clauses checked, and the compute accounting
(analytical counts, measured times, estimates) that the results block carries."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cltoolkit.protocol.costs import EXECUTED, LEDGER_QUANTITIES, CostEstimates, MeasuredCosts, ResourceCosts
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.protocol.results import BudgetCheck
from cltoolkit.run.record import RunRecord

__all__ = ["check_budgets", "resource_costs"]


def _ledger(record: RunRecord, quantity: str) -> float:
    b = record.budget
    if quantity == "totalUpdates":
        return float(b.gradientUpdates + b.replayUpdates)
    return float(getattr(b, quantity))


def check_budgets(protocol: ProtocolBase, records: Sequence[RunRecord]) -> list[BudgetCheck]:
    """Each declared fairness clause, from the ledgers of completed runs."""
    checks = []
    by_comp: dict[str, list[RunRecord]] = {}
    for rec in records:
        by_comp.setdefault(rec.spec.comparison, []).append(rec)
    for clause in protocol.budget.match:
        values: dict[str, float | None] = {}
        for comp in clause.across:
            vals = [_ledger(r, clause.quantity) for r in by_comp.get(comp, [])]
            values[comp] = float(np.mean(vals)) if vals else None
        known = [v for v in values.values() if v is not None]
        if len(known) < 2:
            ok, msg = True, "not enough completed runs to compare"
        else:
            lo, hi = min(known), max(known)
            rel = 0.0 if hi == 0 else (hi - lo) / abs(hi)
            ok = rel <= clause.relativeTolerance
            msg = (
                f"{clause.quantity}: "
                + ", ".join(f"{k} {v:g}" for k, v in values.items() if v is not None)
                + ("" if ok else f" differ by {rel:.1%} (allowed {clause.relativeTolerance:.1%})")
            )
        checks.append(
            BudgetCheck(quantity=clause.quantity, across=list(clause.across), values=values, ok=ok, message=msg)
        )
    return checks


def resource_costs(completed: list[RunRecord], attempted: list[RunRecord], missing: int = 0) -> ResourceCosts:
    """Compute accounting: analytical counts (ledgers), measured times, and estimates, kept apart."""
    per: dict[str, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    for rec in completed:
        row = per.setdefault(rec.spec.comparison, dict.fromkeys(LEDGER_QUANTITIES, 0.0))
        for q in LEDGER_QUANTITIES:
            row[q] += _ledger(rec, q)
        for q in EXECUTED:
            if _ledger(rec, q):
                row[q] = row.get(q, 0.0) + _ledger(rec, q)
    for rec in attempted:
        seconds[rec.spec.comparison] = round(seconds.get(rec.spec.comparison, 0.0) + rec.provenance.wallClockSeconds, 3)
    mean_s = float(np.mean([r.provenance.wallClockSeconds for r in completed])) if completed else None
    estimates = CostEstimates()
    if missing and mean_s is not None:
        estimates = CostEstimates(
            f"about {missing * mean_s:.0f} s of wall-clock for the {missing} missing run(s), extrapolated from the "
            "mean of completed runs (an estimate, not a measurement)",
            missing,
            round(missing * mean_s, 1),
        )
    measured = MeasuredCosts(
        wall_clock_s=round(sum(r.provenance.wallClockSeconds for r in attempted), 3),
        per_comparison_s=seconds,
        platforms=sorted({r.provenance.platform for r in attempted}),
        hardware=sorted({r.provenance.hardware for r in attempted if r.provenance.hardware}),
        devices=sorted({r.provenance.device for r in attempted}),
        precision=sorted({r.provenance.precision for r in attempted if r.provenance.precision}),
        runs_per_node=_per_node(attempted),
    )
    return ResourceCosts(per, measured, estimates)


def _per_node(attempted: list[RunRecord]) -> dict[str, int]:
    """Attempted runs per node (hostname, and the Ray node id where a cluster ran them); only where records name
    their node (records made before that have no `provenance.node`)."""
    if not any(r.provenance.node for r in attempted):
        return {}
    counts: dict[str, int] = {}
    for rec in attempted:
        node = rec.provenance.node or {}
        label = str(node.get("hostname") or "unrecorded")
        if node.get("rayNodeId"):
            label += f" (ray node {str(node['rayNodeId'])[:12]})"
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))
