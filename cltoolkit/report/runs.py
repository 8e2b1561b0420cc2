"""What a report says about the runs beside the gates: failed runs by kind, what reached each model by origin, the
methods' own diagnostics, redone and reused records."""

from __future__ import annotations

from collections.abc import Sequence

from cltoolkit.protocol.results import Results
from cltoolkit.report.checklist import commit_lines
from cltoolkit.report.format import fmt
from cltoolkit.run.record import RunRecord

__all__ = [
    "FINGERPRINT",
    "NON_FINITE",
    "diagnostic_lines",
    "failure_lines",
    "redone_lines",
    "reused_lines",
    "sample_lines",
]


NON_FINITE = "non-finite:"
"""How a run's failure reason names a NaN or infinity (`cltoolkit.errors.NonFiniteValue`)."""
FINGERPRINT = "fingerprint:"
"""How a run's failure reason names a first update outside the protocol's fingerprint (`errors.FingerprintMiss`)."""


def failure_lines(records: Sequence[RunRecord]) -> list[str]:
    """Every failed run by name, non-finite ones first (a NaN is never a success, nor hidden in a count), then
    budget and data-access violations, then the rest."""
    failed = [x for x in records if x.status.state == "failed"]
    if not failed:
        return []

    def kind(rec: RunRecord) -> int:
        reason = rec.status.reason
        if reason.startswith(NON_FINITE):
            return 0
        if reason.startswith(FINGERPRINT):
            return 1
        return 2 if "Violation" in reason.split(":", 1)[0] or reason.startswith("budget.") else 3

    names = {
        0: "non-finite (a NaN or infinity in training)",
        1: "fingerprint missed (not the reference's frames or model)",
        2: "budget or data-access violation",
        3: "failed",
    }
    lines = ["**Failed runs** (never counted in a gate):", ""]
    for rec in sorted(failed, key=lambda x: (kind(x), x.runId)):
        lines.append(f"- {names[kind(rec)]}: {rec.runId}: {rec.status.reason}")
    return [*lines, ""]


def sample_lines(completed: Sequence[RunRecord]) -> list[str]:
    """What reached the model, by origin, as the suite counted it (never "ok" over samples nobody counted)."""
    if not completed:
        return []
    uncounted = sum(1 for x in completed if x.budget.samples is None)
    lines = []
    if uncounted:
        lines.append(
            f"- samples that reached the model: not counted in {uncounted} of {len(completed)} completed records "
            "(made by code that did not count them; nav4 and wmf count them by origin since the guards of #51)"
        )
    per: dict[str, list[int]] = {}
    for rec in completed:
        c = rec.budget.samples
        if c is not None:
            row = per.setdefault(rec.spec.comparison, [0, 0, 0, 0])
            for i, value in enumerate((c.task, c.memory, c.other, c.bookkeeping)):
                row[i] += value
    for comp, (task, memory, other, book) in sorted(per.items()):
        policy = {c.budget.samples.otherPolicy for c in completed if c.budget.samples and c.spec.comparison == comp}
        lines.append(
            f"- {'ok' if not other or policy == {'replay'} else 'VIOLATED'}: samples that reached {comp}'s model: "
            f"{task:g} task data, {memory:g} from the suite's memory, {other:g} other"
            + (" (charged as replay)" if other else "")
            + f", {book:g} in the method's bookkeeping"
        )
    skipped: dict[str, int] = {}
    for rec in completed:
        n = sum(int(v) for k in ("nanStepsA", "nanStepsB") if isinstance(v := rec.metrics.get(k), int))
        if n:
            skipped[rec.spec.comparison] = skipped.get(rec.spec.comparison, 0) + n
    lines += [f"- {comp}: {n} update(s) skipped as non-finite (declared policy)" for comp, n in sorted(skipped.items())]
    return lines


def diagnostic_lines(completed: Sequence[RunRecord]) -> list[str]:
    """A method's own `diagnostics()` (nav4's `methodDiagnostics`), as a table per comparison: mean over runs."""
    per: dict[str, dict[str, list[float]]] = {}
    for rec in completed:
        diag = rec.section("methodDiagnostics")
        for key, value in (diag or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                per.setdefault(rec.spec.comparison, {}).setdefault(key, []).append(float(value))
    if not per:
        return []
    lines = ["## Method diagnostics", "", "| comparison | diagnostic | runs | mean |", "|---|---|---|---|"]
    for comp, values in sorted(per.items()):
        for key, vals in sorted(values.items()):
            lines.append(f"| {comp} | {key} | {len(vals)} | {fmt(sum(vals) / len(vals))} |")
    return [*lines, ""]


def redone_lines(r: Results, records: Sequence[RunRecord]) -> list[str]:
    """Runs whose completed record was replaced on purpose, each with its reason and the replaced seal."""
    if not r.runs.redone:
        return []
    lines = [f"**Redone runs:** {r.runs.redone} completed record(s) replaced with `clt run --redo`:", ""]
    for rec in sorted((x for x in records if x.redone), key=lambda x: x.runId):
        for old in (o for o in rec.replaces or [] if o.state == "completed"):
            lines.append(
                f"- {rec.runId}: {old.reason} (replaced record `{old.seal[:19]}...`, {old.replacedAt:%Y-%m-%d})"
            )
    return [*lines, ""]


def reused_lines(r: Results, records: Sequence[RunRecord]) -> list[str]:
    """Records this stage's gates rest on that were produced for another stage of the plan (same protocol, same
    planned run): named here, beside the gates, with the commits that produced them."""
    other: dict[str, list[RunRecord]] = {}
    for rec in records:
        if rec.spec.stage != r.stage:
            other.setdefault(rec.spec.stage, []).append(rec)
    lines = []
    for stage, recs in sorted(other.items()):
        orders = sorted({x.spec.order for x in recs if x.spec.order})
        seeds = sorted({x.spec.seed for x in recs})
        lines.append(
            f"**Reused records:** {len(recs)} of the {len(records)} records these gates use were produced for stage "
            f"`{stage}`" + (f" (task orders {', '.join(orders)}" if orders else " (") + f"; seeds {fmt(seeds)}; "
            f"commits {', '.join(commit_lines(recs)) or 'not recorded'}): "
            + ", ".join(x.runId for x in sorted(recs, key=lambda x: x.runId))
            + ". They are the same planned runs of the same frozen protocol, so the plan counts them here."
        )
    return [*lines, ""] if lines else []
