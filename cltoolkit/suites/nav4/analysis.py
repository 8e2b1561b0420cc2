"""nav4 analysis: the replicate is one run's success rate; metrics come from its success matrix (training order).

Sequential-family runs have a square matrix (phase x task). References record one row: joint training after its
single phase, specialists each on their own task; for them immediate and final success are that row, and the
retention metrics are undefined (left out, never filled with zeros)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cltoolkit.components import NUMBER, NUMBER_MAP, Analysis, ValueKind, value_problems
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import replicate_key
from cltoolkit.stats.paired import t_interval
from cltoolkit.suites.nav4 import metrics as m
from cltoolkit.suites.nav4.metrics import AGGREGATE_VALUES, METRICS, matrix_value, run_values
from cltoolkit.suites.nav4.metrics import success_matrix as _matrix
from cltoolkit.suites.nav4.models import Nav4Protocol

__all__ = ["METRICS", "Nav4Analysis", "matrix_value", "run_values"]


class Nav4Analysis(Analysis[Nav4Protocol]):
    def record_problems(self, protocol: Nav4Protocol, record: RunRecord) -> list[str]:
        """The success matrix must be a phases x tasks table of finite numbers; each metric it defines for this
        run (immediate success per task; the rest where the matrix has more than one phase) must be recorded."""
        sm: Any = record.metrics.get("successMatrix")
        if not isinstance(sm, dict) or not all(isinstance(sm.get(k), list) for k in ("tasks", "phases", "values")):
            return ["/metrics/successMatrix: missing or not {tasks, phases, values}"]
        rows: list[Any] = sm["values"]
        if len(rows) != len(sm["phases"]) or not all(isinstance(r, list) and len(r) == len(sm["tasks"]) for r in rows):
            return ["/metrics/successMatrix/values: not one row per phase with one value per task"]
        cells = {f"{i}/{j}": v for i, r in enumerate(rows) for j, v in enumerate(r)}
        if value_problems({"v": cells}, {"v": NUMBER_MAP}) or any(v is None for v in cells.values()):
            return ["/metrics/successMatrix/values: not all finite numbers"]
        parsed = _matrix(record)
        assert parsed is not None
        expected: dict[str, ValueKind] = {METRICS[0]: NUMBER_MAP}
        for mid in METRICS[1:]:
            if matrix_value(*parsed, mid, "aggregate") is not None:
                expected[mid] = NUMBER
        return value_problems(record.metrics, expected)

    def replicates(
        self, protocol: Nav4Protocol, records: Sequence[RunRecord], metric: str, comparison: str, scope: str
    ) -> dict[str, dict[str, float]]:
        out: dict[str, float] = {}
        measure = self.project_regs().metric.get(metric)
        for rec in records:
            if rec.spec.comparison != comparison:
                continue
            value = measure.compute(rec, scope)
            if value is not None:
                out[replicate_key(rec.spec.seed, rec.spec.order, rec.spec.cell)] = value
        return {scope: out}

    def summaries(self, protocol: Nav4Protocol, records: Sequence[RunRecord]) -> dict[str, Any]:
        comps: dict[str, Any] = {}
        for comp in protocol.comparisons:
            with_matrix = sorted(
                ((r, found) for r in records if r.spec.comparison == comp.id and (found := _matrix(r)) is not None),
                key=lambda pair: (pair[0].spec.order or "", pair[0].spec.seed),
            )
            if not with_matrix:
                continue
            recs = [r for r, _ in with_matrix]
            tasks = with_matrix[0][1][0]
            per_task = {}
            for task in tasks:
                imm = [run_values(r, m.ImmediateSuccess.id, task) for r in recs]
                fin = []
                for _, (t, _, mat) in with_matrix:
                    fin.append(float(mat[-1, t.index(task)]))
                per_task[task] = {
                    "immediate": imm,
                    "final": fin,
                    "forgetting": [None if i is None else max(0.0, i - f) for i, f in zip(imm, fin, strict=True)],
                }
            with_memory = next((r for r in recs if r.metrics.get("memory")), None)
            metric_values = {mid: [run_values(r, mid, "aggregate") for r in recs] for mid in AGGREGATE_VALUES}
            comps[comp.id] = {
                "role": comp.role,
                "runs": [r.runId for r in recs],
                "orders": [r.spec.order for r in recs],
                "seeds": [r.spec.seed for r in recs],
                "taskOrders": {r.spec.order or "": mat[0] for r, mat in with_matrix},
                "perTask": per_task,
                "metrics": metric_values,
                "parameters": sorted({r.budget.parameters for r in recs if r.budget.parameters}),
                "memory": None if with_memory is None else with_memory.metrics["memory"],
                "memoryRun": None if with_memory is None else with_memory.runId,
                "trainingSeconds": [r.metrics.get("trainingSeconds") for r in recs],
                "evaluationPolicy": protocol.evaluation.policy,
            }
        return {
            "comparisons": comps,
            "note": "Success is scored on each task's own reward on final-test layouts; "
            "references (joint, specialists) have other data-access assumptions and are reported apart.",
        }

    def report_markdown(self, protocol: Nav4Protocol, records: Sequence[RunRecord], summaries: dict[str, Any]) -> str:
        comps = summaries.get("comparisons", {})
        if not comps:
            return ""
        lines = [
            "## Per-task success (final-test layouts; one table per task order, rows in training order, "
            "values per run in seed order)",
            "",
            *floor_lines(comps),
        ]

        def fmt(xs: list[float | None]) -> str:
            return ", ".join("-" if x is None else f"{x:.2f}" for x in xs)

        for cid, c in comps.items():
            for order, title, idx in _by_order(cid, c):
                seeds = ", ".join(str(c["seeds"][i]) for i in idx) if "seeds" in c else "-"
                lines += [
                    f"**{title}** ({c['role']}; {len(idx)} runs, seeds {seeds}; {c['evaluationPolicy']} policy)",
                    "",
                    "| task | immediate (after its own phase) | final (end of stream) | forgetting max(0, immediate - "
                    "final) |",
                    "|---|---|---|---|",
                ]
                for task in c.get("taskOrders", {}).get(order or "") or c["perTask"]:
                    v = c["perTask"][task]
                    cells = [fmt([v[k][i] for i in idx]) for k in ("immediate", "final", "forgetting")]
                    lines.append(f"| {task} | {' | '.join(cells)} |")
                lines.append("")
        lines += ["Disclosures from the records:", ""]
        for cid, c in comps.items():
            mem = c["memory"]
            mem_text = (
                "none"
                if not mem
                else (
                    f"capacity {mem['capacity']} transitions, {mem['held']} held at the end "
                    f"(offered {mem['offered']}); held per task in run {c.get('memoryRun', '-')}: "
                    + ", ".join(
                        f"{mem['tasks'][int(i)] if int(i) < len(mem['tasks']) else i} {n}"
                        for i, n in mem["perTaskIndex"].items()
                    )
                )
            )
            secs = [s for s in c["trainingSeconds"] if s is not None]
            clock = (
                f"{len(secs)} runs, median {float(np.median(secs)):.0f} s per run (range {min(secs):.0f}-"
                f"{max(secs):.0f} s), {sum(secs) / 3600:.2f} h in all"
                if secs
                else "not recorded"
            )
            lines.append(
                f"- {cid}: {', '.join(str(n) for n in sorted(set(c['parameters'])))} trainable parameters; replay "
                f"memory {mem_text}; training + "
                f"evaluation wall-clock: {clock}."
            )
        lines.append(
            "- Tuning effort: hyperparameters as declared in the protocol's comparisons; no search was run "
            "beyond the calibration the protocol describes."
        )
        lines += ["", *_by_order_table(comps), "", *_by_position_table(comps), *_new_task_reading(protocol, comps)]
        lines += ["", *_seed_sensitivity(comps), *_shared_seed_note(protocol, comps), ""]
        return "\n".join(lines) + "\n"


def floor_lines(comps: dict[str, Any]) -> list[str]:
    """A warning per task whose success is 0 in every run of every comparison, immediately and at the end: there
    the comparisons cannot differ, so a contrast on that task measures nothing (the budget or the task is too hard
    for every method, or the evaluation is broken)."""
    tasks: dict[str, bool] = {}
    for c in comps.values():
        for task, v in c["perTask"].items():
            values = [x for k in ("immediate", "final") for x in v[k] if x is not None]
            tasks[task] = tasks.get(task, True) and bool(values) and all(x == 0 for x in values)
    floored = [task for task, at_floor in tasks.items() if at_floor]
    if not floored:
        return []
    return [
        f"**WARNING: floor: {', '.join(floored)} at 0.00 success in every run of every comparison (immediately and at "
        "the end): the comparisons cannot differ there, so retention, forgetting and contrasts on "
        f"{'this task' if len(floored) == 1 else 'these tasks'} measure nothing (the budget or the task is too hard "
        "for every method, or the evaluation is broken).**",
        "",
    ]


def _span(xs: list[float]) -> str:
    return f"{np.mean(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]" if xs else "-"


def _positions(c: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """task -> {"first": immediate success of the runs where it is the first task, "later": where it is not}."""
    out: dict[str, dict[str, list[float]]] = {}
    for i, order in enumerate(c["orders"]):
        sequence = c["taskOrders"].get(order or "", [])
        for task, values in c["perTask"].items():
            value = values["immediate"][i]
            if value is None or not sequence:
                continue
            where = "first" if sequence[0] == task else "later"
            out.setdefault(task, {"first": [], "later": []})[where].append(float(value))
    return out


def _by_position_table(comps: dict[str, Any]) -> list[str]:
    """Immediate success on a task when it is trained first (nothing to forget, nothing in memory yet) and when it
    comes later, for every comparison that trains tasks in sequence."""
    rows = []
    for cid, c in comps.items():
        if not any(c["taskOrders"].values()) or c["role"] == "reference":  # references train otherwise
            continue
        positions = _positions(c)
        first = [x for p in positions.values() for x in p["first"]]
        later = [x for p in positions.values() for x in p["later"]]
        if not first or not later:
            continue
        per_task = "; ".join(
            f"{task} {_span(p['first'])} first / {_span(p['later'])} later"
            for task, p in positions.items()
            if p["first"]
        )
        rows.append(f"| {cid} | {_span(first)} | {_span(later)} | {per_task} |")
    if not rows:
        return []
    return [
        "## Immediate success by task position (mean [min, max] over runs)",
        "",
        "The first task of a stream has nothing to forget and an empty memory: a method that learns it more slowly "
        "than later tasks does so by its own terms, not by interference.",
        "",
        "| comparison | first task | later tasks | per task (when first / when later) |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def _new_task_reading(protocol: Nav4Protocol, comps: dict[str, Any]) -> list[str]:
    """In words, where each failing task of an each-task immediate-success gate comes from: its value per task
    order, and whether the task is the first one there, beside the other comparisons' values in that position."""
    out = []
    for gate in protocol.gates:
        if gate.metric != m.ImmediateSuccess.id or gate.scope != "each-task" or gate.threshold is None:
            continue
        c = comps.get(gate.method)
        if c is None:
            continue
        for task, values in c["perTask"].items():
            by_order: dict[str, list[float]] = {}
            for i, order in enumerate(c["orders"]):
                if values["immediate"][i] is not None:
                    by_order.setdefault(order or "-", []).append(float(values["immediate"][i]))
            mean = np.mean([x for xs in by_order.values() for x in xs]) if by_order else None
            if mean is None or mean >= gate.threshold:
                continue
            parts = []
            for order, xs in by_order.items():
                first = c["taskOrders"].get(order, [None])[0] == task
                note = " (its first task)" if first else ""
                parts.append(f"{order} {np.mean(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]{note}")
            line = (
                f"- Gate `{gate.id}` on {task}: {gate.method}'s mean immediate success {mean:.2f} is below "
                f"{gate.threshold:g}; by task order: {'; '.join(parts)}."
            )
            firsts = [o for o in by_order if c["taskOrders"].get(o, [None])[0] == task]
            if firsts:
                others = []
                for cid, oc in comps.items():
                    if cid == gate.method or task not in oc["perTask"] or oc["role"] == "reference":
                        continue
                    xs = [
                        float(v)
                        for i, v in enumerate(oc["perTask"][task]["immediate"])
                        if v is not None and oc["orders"][i] in firsts
                    ]
                    if xs:
                        others.append(f"{cid} {min(xs):.2f}-{max(xs):.2f}")
                if others:
                    line += (
                        f" Where {task} is the first task ({', '.join(firsts)}), the other comparisons reach "
                        f"{', '.join(others)}: the shortfall comes from learning the first task, where nothing can be "
                        "forgotten, which points at the method's own terms acting on the phase in progress."
                    )
            out.append(line)
    return ["## Reading the new-task gate", "", *out, ""] if out else []


def _by_order(cid: str, c: dict[str, Any]) -> list[tuple[str | None, str, list[int]]]:
    """(order, label, run indices) for each task order of one comparison's summaries, in first-seen order."""
    orders = c.get("orders") or [None] * len(c["runs"])
    return [
        (order, cid if order is None else f"{cid} / {order}", [i for i, o in enumerate(orders) if o == order])
        for order in dict.fromkeys(orders)
    ]


def _short(metric: str) -> str:
    return metric.removeprefix("nav4.").removesuffix("-v1").replace("-", " ")


def _by_order_table(comps: dict[str, Any]) -> list[str]:
    """Aggregate metrics per comparison and task order (the gates pool the orders; this shows what they pool)."""
    names = {mid: _short(mid) for mid in AGGREGATE_VALUES}
    lines = [
        "## Aggregate metrics by task order (mean over seeds [min, max]; the gates pool the orders)",
        "",
        "| comparison / order | runs | " + " | ".join(names.values()) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for cid, c in comps.items():
        for _, label, idx in _by_order(cid, c):
            cells = []
            for mid in names:
                xs = [x for x in (c["metrics"][mid][i] for i in idx) if x is not None]
                cells.append(f"{np.mean(xs):.3f} [{min(xs):.3f}, {max(xs):.3f}]" if xs else "-")
            lines.append(f"| {label} | {len(idx)} | " + " | ".join(cells) + " |")
    return lines


def _shared_seed_note(protocol: Nav4Protocol, comps: dict[str, Any]) -> list[str]:
    """What the runs of one training seed in different task orders share, as `randomStreams` declares it."""
    shared = any(
        len(set(c.get("orders") or [])) > 1 and len(set(c.get("seeds") or [])) < len(c["runs"]) for c in comps.values()
    )
    if not shared:
        return []
    if protocol.randomStreams == "seed-and-order":
        return [
            "",
            "Each replicate (training seed x task order) draws its own network initialisation and random streams "
            "from its (seed, order) (randomStreams 'seed-and-order'): the orders of one seed share only the seed's "
            "number, so the seed-means column is a check on the declared independence, not a correction; every "
            "replicate is evaluated on the same final-test layouts.",
        ]
    return [
        "",
        "Runs of one training seed in different task orders share that seed's network initialisation and "
        "random streams, so the replicates (training seed x task order, as the protocol declares) are not "
        "fully independent: read the intervals with that in mind, and compare the orders above.",
    ]


def _seed_sensitivity(comps: dict[str, Any]) -> list[str]:
    """Candidate minus each baseline, paired by (seed, order): the declared replicates beside seed means over orders.

    Exploratory: two-sided 95% t intervals, no multiplicity adjustment, not gate decisions. Where the two columns
    disagree, the dependence between orders of one seed matters."""
    cands = [c for c in comps.values() if c["role"] == "candidate" and c.get("orders") is not None]
    bases = {cid: c for cid, c in comps.items() if c["role"] == "baseline" and c.get("orders") is not None}
    if not cands or not bases or len(set(cands[0]["orders"])) < 2:
        return []
    cand = cands[0]
    lines = [
        "## Seed-level sensitivity (exploratory: two-sided 95% t intervals, unadjusted, not gate decisions)",
        "",
        "| candidate minus | metric | replicates (seed x order) | seed means over orders |",
        "|---|---|---|---|",
    ]

    def keyed(c: dict[str, Any], mid: str) -> dict[tuple[int, str], float]:
        return {(s, o): x for s, o, x in zip(c["seeds"], c["orders"], c["metrics"][mid], strict=True) if x is not None}

    def cell(d: list[float]) -> str:
        if len(d) < 2:
            return "-"
        t = t_interval(np.asarray(d))
        return f"{t.estimate:+.3f} [{t.low:+.3f}, {t.high:+.3f}] (n = {len(d)})"

    for bid, base in bases.items():
        for mid in (m.ImmediateAverageSuccess.id, m.FinalAverageSuccess.id, m.RetentionLoss.id):
            a, b = keyed(cand, mid), keyed(base, mid)
            pairs = {k: a[k] - b[k] for k in sorted(a.keys() & b.keys())}
            seeds = sorted({k[0] for k in pairs})
            means = [float(np.mean([d for k, d in pairs.items() if k[0] == s])) for s in seeds]
            lines.append(f"| {bid} | {_short(mid)} | {cell(list(pairs.values()))} | {cell(means)} |")
    return lines
