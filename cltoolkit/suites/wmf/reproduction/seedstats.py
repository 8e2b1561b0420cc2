"""Training adequacy and WorldModelsBenchmark's own descriptive analyses (`experiments/summarize_results.py`) for the
wmf report.

Adequacy: per cell, the task-A model of each comparison (held-out reconstruction of A after A over the same model's
at initialisation, and the task-A fit gain) and the from-scratch task-B reference (its held-out reconstruction of B
over its own at initialisation), against the protocol's declared thresholds; every (cell, model) below them is named
with the metrics that rest on it. Seed analyses: the distance axis (per cell the median over the declared axis
methods of each method's median RD; Spearman against the labelled level, d_trans and task-B difficulty), control
cells (no method's median relative task-A loss above the threshold), paired d_z of the declared method pairs, and
right-skew flags (max - median > factor x (median - min)). Descriptive: nothing here decides a gate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cltoolkit.run.record import RunRecord

__all__ = [
    "ON_REFERENCE",
    "ON_TASK_A",
    "adequacy",
    "adequacy_headline",
    "adequacy_lines",
    "by_cell_and_comparison",
    "fingerprint",
    "fingerprint_lines",
    "record_number",
    "seed_analyses",
    "seed_lines",
]

ON_TASK_A = ("PF", "RD", "WMF", "task-A fit gain", "encoder drift")
"""Metrics that rest on the method's task-A model."""
ON_REFERENCE = ("FT", "task-B difficulty")
"""Metrics that rest on the from-scratch task-B reference."""
LEVELS = {"min": 0, "med": 1, "max": 2}


def record_number(rec: RunRecord, key: str) -> float | None:
    """A record's metric as a finite float, else None (missing, null, non-numeric or non-finite)."""
    v = rec.metrics.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) else None


def numbers_by_seed(records: Sequence[RunRecord], key: str) -> dict[int, float]:
    """Seed -> the records' metric, for the records where it is a finite number (see `record_number`)."""
    return {r.spec.seed: v for r in records if (v := record_number(r, key)) is not None}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b > 0 else None


def _median(values: Sequence[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def by_cell_and_comparison(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    """(cell, comparison) -> its records."""
    by: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in records:
        by.setdefault((rec.spec.cell or "", rec.spec.comparison), []).append(rec)
    return by


def fingerprint(protocol: Any, records: Sequence[RunRecord]) -> dict[str, Any] | None:
    """Per family and task A: the declared range, the reference's stored range, and the first task-A update losses of
    the records (a run outside the declared range failed before it measured anything, so it is not among them)."""
    fp = protocol.fingerprint
    if fp is None:
        return None
    rows = []
    for r in fp.ranges:
        cells = {
            f"{f.id}-{lv.id}"
            for f in protocol.families
            if f.id == r.family
            for lv in f.levels
            if lv.taskA.env == r.taskA
        }
        found = [rec.metrics.get(fp.metric) for rec in records if rec.spec.cell in cells]
        values = sorted(float(v) for v in found if isinstance(v, int | float))
        low, high = fp.bounds(r.family, r.taskA) or (r.low, r.high)
        rows.append({
            "family": r.family, "taskA": r.taskA, "cells": sorted(cells), "accepted": [low, high],
            "reference": [r.low, r.high], "n": len(values), "min": values[0] if values else None,
            "max": values[-1] if values else None, "inside": sum(low <= v <= high for v in values),
            "insideReference": sum(r.low <= v <= r.high for v in values),
        })  # fmt: skip
    return {"metric": fp.metric, "margin": fp.margin, "ranges": rows}


def fingerprint_lines(summary: dict[str, Any]) -> list[str]:
    """The fingerprint section: per family and task A, the records' first task-A update losses against the ranges."""
    lines = [
        "## Fingerprint: the first task-A update's reconstruction loss against the reference's "
        f"(margin {summary['margin']:g})",
        "",
        "A run outside the accepted range fails before it measures anything (`fingerprint:` among the failed runs).",
        "",
        "| family | task A | records | their range | inside accepted | inside the reference's range | accepted "
        "| reference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["ranges"]:
        seen = f"{r['min']:.1f}-{r['max']:.1f}" if r["n"] else "-"
        lines.append(
            f"| {r['family']} | {r['taskA']} | {r['n']} | {seen} | {r['inside']} of {r['n']} | "
            f"{r['insideReference']} of {r['n']} | {r['accepted'][0]:.1f}-{r['accepted'][1]:.1f} | "
            f"{r['reference'][0]:.1f}-{r['reference'][1]:.1f} |"
        )
    return lines


def adequacy(protocol: Any, records: Sequence[RunRecord]) -> dict[str, Any]:
    """Per cell: each comparison's task-A model and the task-B reference, with the runs below the thresholds."""
    th = protocol.adequacy
    by = by_cell_and_comparison(records)
    comps = [c.id for c in protocol.comparisons]
    cells: dict[str, Any] = {}
    flags: list[dict[str, Any]] = []
    for cell in (c for c in protocol.cell_ids() if any(k[0] == c for k in by)):  # the cells that have runs
        rows: dict[str, Any] = {}
        for comp in comps:
            recs = sorted(by.get((cell, comp), []), key=lambda r: r.spec.seed)
            if not recs:
                continue
            gains = {r.spec.seed: record_number(r, "taskAFitGain") for r in recs}
            ratios = {
                r.spec.seed: _ratio(record_number(r, "reconAAfterA"), record_number(r, "reconARandomInit"))
                for r in recs
            }
            below = sorted(
                s
                for s in gains
                if th is not None
                and (
                    ((g := gains[s]) is not None and g < th.taskAFitGainMin)
                    or ((q := ratios[s]) is not None and q > th.reconstructionRatioMax)
                )
            )
            rows[comp] = {
                "runs": len(recs),
                "taskAFitGain": _median(list(gains.values())),
                "reconAAfterA": _median([record_number(r, "reconAAfterA") for r in recs]),
                "reconRatioA": _median(list(ratios.values())),
                "seedsBelow": below,
            }
            if below:
                flags.append({"cell": cell, "model": f"task-A model of {comp}", "seeds": below, "runs": len(recs),
                              "metrics": list(ON_TASK_A)})  # fmt: skip
        refs: dict[int, tuple[float | None, float | None]] = {}
        for (c, _comp), recs in by.items():
            if c == cell:
                for r in recs:
                    refs.setdefault(
                        r.spec.seed, (record_number(r, "reconBFromScratch"), record_number(r, "reconBReferenceInit"))
                    )
        ref_ratios = {s: _ratio(a, b) for s, (a, b) in refs.items()}
        ref_below = sorted(
            s for s, q in ref_ratios.items() if th is not None and q is not None and q > th.reconstructionRatioMax
        )
        cells[cell] = {
            "methods": rows,
            "reference": {
                "seeds": len(refs),
                "reconBFromScratch": _median([a for a, _ in refs.values()]),
                "reconRatioB": _median(list(ref_ratios.values())),
                "seedsBelow": ref_below,
            },
        }
        if ref_below:
            flags.append({"cell": cell, "model": "task-B from-scratch reference", "seeds": ref_below,
                          "runs": len(refs), "metrics": list(ON_REFERENCE)})  # fmt: skip
    return {
        "thresholds": None if th is None else th.model_dump(mode="json"),
        "cells": cells,
        "underTrained": flags,
    }


def adequacy_headline(summary: dict[str, Any]) -> list[str]:
    """In words, for the top of the report: which metrics of which cells rest on an under-trained model."""
    th = summary.get("thresholds")
    if th is None:
        return [
            "**Training adequacy:** this protocol declares no adequacy thresholds; the adequacy section lists each "
            "cell's task-A fit and from-scratch reference quality without judging them.",
        ]
    flags = summary.get("underTrained", [])
    rule = (
        f"a model falls below them when its task-A fit gain is under {th['taskAFitGainMin']:g} nats or its held-out "
        f"reconstruction exceeds {th['reconstructionRatioMax']:g} x the same model's at initialisation"
    )
    runs = sum(m["runs"] for c in summary.get("cells", {}).values() for m in c["methods"].values())
    if not flags:
        return [f"**Training adequacy:** in the {len(summary.get('cells', {}))} cell(s) with runs ({runs} runs), every "
                f"task-A model and every from-scratch reference meets the declared thresholds ({rule})."]  # fmt: skip
    lines = [f"**Training adequacy: results that rest on an under-trained model** (declared thresholds: {rule}):", ""]
    lines += [
        f"- {f['cell']}: the {f['model']} (seeds {', '.join(map(str, f['seeds']))} of {f['runs']}) - "
        f"{', '.join(f['metrics'])} of this cell rest on it."
        for f in flags
    ]
    return lines


def _rank_corr(x: list[float | None], y: list[float | None]) -> dict[str, Any]:
    """Spearman's rho as WorldModelsBenchmark computes it (Pearson on average ranks), over the cells where both
    exist."""
    from scipy.stats import rankdata

    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a is not None and b is not None]
    if len(pairs) < 2:
        return {"rho": None, "cells": len(pairs)}
    rx, ry = (rankdata([p[i] for p in pairs]) for i in (0, 1))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = float(np.sqrt((rx**2).sum() * (ry**2).sum()))
    return {"rho": None if den == 0 else float((rx * ry).sum() / den), "cells": len(pairs)}


def _skewed(values: list[float], factor: float) -> bool:
    v = sorted(values)
    if len(v) < 3:
        return False
    med = float(np.median(v))
    return (v[-1] - med) > factor * (med - v[0])


def seed_analyses(protocol: Any, records: Sequence[RunRecord]) -> dict[str, Any]:
    """The distance axis, control cells, d_z of the declared pairs and skew flags, as the protocol declares them."""
    sa = protocol.seedAnalyses
    by = by_cell_and_comparison(records)
    cells = [c for c in protocol.cell_ids() if any(k[0] == c for k in by)]

    def method_medians(cell: str, key: str) -> list[float | None]:
        return [_median([record_number(r, key) for r in by.get((cell, m), [])]) for m in sa.axisMethods]

    axis = []
    for cell in cells:
        d_trans = _median([record_number(r, "dTrans") for (c, _m), recs in by.items() if c == cell for r in recs])
        axis.append(
            {
                "cell": cell,
                "level": LEVELS[cell.split("-", 1)[1]],
                "rd": _median(method_medians(cell, "rd")),
                "dTrans": d_trans,
                "taskBDifficulty": _median(method_medians(cell, "reconBAfterB")),
            }
        )
    rd = [a["rd"] for a in axis]
    correlations = {k: _rank_corr(rd, [a[k] for a in axis]) for k in ("level", "dTrans", "taskBDifficulty")}
    losses: dict[str, dict[str, float | None]] = {}
    for cell in cells:
        losses[cell] = {}
        for comp in (c.id for c in protocol.comparisons):
            ratios = [
                (after - before) / before
                for r in by.get((cell, comp), [])
                if (after := record_number(r, "reconAAfterB")) is not None
                and (before := record_number(r, "reconAAfterA")) is not None
                and before > 0
            ]
            losses[cell][comp] = float(np.median(ratios)) if ratios else None
    controls = [
        c
        for c in cells
        if (seen := [x for x in losses[c].values() if x is not None]) and max(seen) <= sa.controlThreshold
    ]
    d_z = []
    for pair in protocol.methodPairs:
        per_cell: dict[str, Any] = {}
        for cell in cells:
            a = numbers_by_seed(by.get((cell, pair.method), []), pair.metric)
            b = numbers_by_seed(by.get((cell, pair.reference), []), pair.metric)
            diffs = np.asarray([a[s] - b[s] for s in sorted(a) if s in b])
            if diffs.size >= 2:
                sd = float(np.std(diffs, ddof=1))
                per_cell[cell] = None if sd == 0 else float(np.mean(diffs)) / sd  # the seed prints inf at sd 0
        d_z.append({"method": pair.method, "reference": pair.reference, "metric": pair.metric, "perCell": per_cell})
    skew = []
    for cell in cells:
        for comp in (c.id for c in protocol.comparisons):
            for key in ("pf", "rd", "ft"):
                values = [v for r in by.get((cell, comp), []) if (v := record_number(r, key)) is not None]
                if _skewed(values, sa.skewFactor):
                    skew.append({"cell": cell, "comparison": comp, "metric": key, "values": sorted(values),
                                 "mean": float(np.mean(values)), "median": float(np.median(values))})  # fmt: skip
    return {
        "axisMethods": list(sa.axisMethods),
        "axis": axis,
        "axisSpearman": correlations,
        "taskALoss": losses,
        "controlThreshold": sa.controlThreshold,
        "controlCells": controls,
        "dZ": d_z,
        "skewFactor": sa.skewFactor,
        "rightSkewed": skew,
    }


def _f(x: float | None, spec: str = ".3g") -> str:
    return "null" if x is None else format(x, spec)


def adequacy_lines(summary: dict[str, Any]) -> list[str]:
    """The adequacy section: per cell, each comparison's task-A model and the from-scratch reference."""
    th = summary.get("thresholds")
    rule = (
        "no thresholds declared"
        if th is None
        else f"seeds below: fit gain < {th['taskAFitGainMin']:g} nats or after / at init > "
        f"{th['reconstructionRatioMax']:g}"
    )
    lines = [
        f"## Training adequacy (per cell: medians over seeds; {rule})",
        "",
        "| cell | model | runs | task-A fit gain (nats) | held-out recon A after A | after A / at init | seeds below |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell, c in summary.get("cells", {}).items():
        for comp, m in c["methods"].items():
            below = ", ".join(map(str, m["seedsBelow"])) or "-"
            lines.append(
                f"| {cell} | task A: {comp} | {m['runs']} | {_f(m['taskAFitGain'])} | {_f(m['reconAAfterA'])} | "
                f"{_f(m['reconRatioA'])} | {below} |"
            )
        ref = c["reference"]
        below = ", ".join(map(str, ref["seedsBelow"])) or "-"
        lines.append(
            f"| {cell} | task-B reference | {ref['seeds']} | - | recon B from scratch {_f(ref['reconBFromScratch'])} | "
            f"{_f(ref['reconRatioB'])} | {below} |"
        )
    lines += ["", "Records made before the reconstruction at initialisation was recorded show null ratios."]
    return lines


def seed_lines(summary: dict[str, Any]) -> list[str]:
    """WorldModelsBenchmark's analyses as report sections."""
    lines = [
        "## Distance axis as WorldModelsBenchmark reads it",
        "",
        f"Per cell: the median over {', '.join(summary['axisMethods'])} of each method's median RD over seeds; "
        "d_trans the median over the cell's runs; task-B difficulty the same median of held-out task-B "
        "reconstruction after B. Spearman (average ranks, as the seed) over the cells present.",
        "",
        "| cell | RD (axis) | d_trans | task-B difficulty |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {a['cell']} | {_f(a['rd'])} | {_f(a['dTrans'])} | {_f(a['taskBDifficulty'])} |" for a in summary["axis"]
    ]
    corr = summary["axisSpearman"]
    lines += [
        "",
        "Spearman with the axis RD: "
        + "; ".join(
            f"{name} {_f(corr[k]['rho'], '+.2f')} ({corr[k]['cells']} cells)"
            for k, name in (
                ("level", "labelled level"),
                ("dTrans", "d_trans"),
                ("taskBDifficulty", "task-B difficulty"),
            )
        )
        + ".",
        "",
        "## Control cells (WorldModelsBenchmark: no method's median relative task-A loss above "
        f"{summary['controlThreshold']:.0%})",
        "",
        "Relative task-A loss per run: (recon A after B - recon A after A) / recon A after A; median over seeds.",
        "",
        "| cell | smallest (method) | largest (method) | control |",
        "|---|---|---|---|",
    ]
    for cell, per in summary["taskALoss"].items():
        vals = {k: v for k, v in per.items() if v is not None}
        if not vals:
            continue
        lo, hi = min(vals, key=vals.__getitem__), max(vals, key=vals.__getitem__)
        lines.append(
            f"| {cell} | {vals[lo]:+.1%} ({lo}) | {vals[hi]:+.1%} ({hi}) | "
            f"{'yes' if cell in summary['controlCells'] else 'no'} |"
        )
    lines += ["", "## Paired effect sizes d_z (mean difference / its SD over seeds, per cell)", ""]
    for e in summary["dZ"]:
        cells = "; ".join(f"{c} {_f(v, '+.2f')}" for c, v in e["perCell"].items()) or "no cell with 2 seeds"
        lines.append(f"- {e['method']} - {e['reference']} on {e['metric']}: {cells}")
    lines += [
        "",
        f"## Right-skewed cells (max - median > {summary['skewFactor']:g} x (median - min); the mean describes "
        "none of the runs)",
        "",
    ]
    skew = summary["rightSkewed"]
    lines += [
        f"- {s['cell']} {s['comparison']} {s['metric']}: median {s['median']:.4g}, mean {s['mean']:.4g}, runs "
        + ", ".join(f"{v:.4g}" for v in s["values"])
        for s in skew
    ] or ["No cell is right-skewed."]
    return lines
