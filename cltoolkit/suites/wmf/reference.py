"""Comparison with the seed-000 repository's stored runs (`reference/wmf-seed000-metrics.json`): per cell and
method, clt's mean and range beside the seed's mean, SD and range of PF, RD, FT, task-A fit gain and encoder drift,
whether clt's mean lies inside the seed's range, and per cell the RD ranking of methods in both with Kendall's tau.
Descriptive: it reports agreement and disagreement alike and decides nothing."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cltoolkit.run.record import RunRecord

__all__ = ["FAMILIES", "METHODS", "QUANTITIES", "apart", "load_reference", "report_lines", "reproduction"]

FAMILIES = {"dmcontrol": "dmc", "gymnasium": "gym", "minigrid": "minigrid"}
"""Seed repository family -> clt cell prefix."""
METHODS = {
    "finetuning": "finetuning",
    "ewc": "ewc",
    "replay_infinite": "replay-infinite",
    "progressive_nets": "progressive-nets",
    "ug_mtm": "ug-mtm",
}
"""Seed repository method -> clt comparison id."""
Reader = Callable[[dict[str, Any]], Any]
QUANTITIES: dict[str, tuple[str, Reader]] = {
    "pf": ("pf", lambda m: m.get("pf")),
    "rd": ("rd", lambda m: m.get("rd")),
    "ft": ("ft", lambda m: m.get("ft")),
    "taskAFitGain": ("taskAFitGain", lambda m: m.get("task_A_fit_gain")),
    "encoderDrift": (
        "encoderDrift",
        lambda m: _ratio(
            m.get("heldout_reconstruction_A_after_task_B"), m.get("heldout_reconstruction_A_after_task_A")
        ),
    ),
}
"""Quantity -> (clt record field, how to read it from a seed run's metrics)."""


def _drift(m: dict[str, Any]) -> float | None:
    """Encoder drift as clt records it: held-out reconstruction of A after task B over after task A."""
    return _ratio(m.get("heldout_reconstruction_A_after_task_B"), m.get("heldout_reconstruction_A_after_task_A"))


def _ratio(a: Any, b: Any) -> float | None:
    return float(a) / float(b) if _finite(a) and _finite(b) and float(b) != 0 else None


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def load_reference(path: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(clt cell, clt comparison) -> the seed repository's runs' metrics."""
    data = json.loads(path.read_text())
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in data["runs"]:
        cell = f"{FAMILIES.get(run['family'], run['family'])}-{run['distance']}"
        out.setdefault((cell, METHODS.get(run["method"], run["method"])), []).append(run["metrics"])
    return out


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None}
    a = np.asarray(values, dtype=float)
    return {
        "n": int(a.size),
        "mean": float(a.mean()),
        "sd": float(a.std(ddof=1)) if a.size > 1 else None,
        "min": float(a.min()),
        "max": float(a.max()),
    }


def reproduction(
    records: Sequence[RunRecord], reference: dict[tuple[str, str], list[dict[str, Any]]]
) -> dict[str, Any]:
    """Per cell x method and quantity: clt's and the seed's statistics and whether clt's mean is inside the seed's
    range; per cell the RD ranking in both (1 = lowest RD) and Kendall's tau between the two rankings."""
    from scipy.stats import kendalltau

    mine: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in records:
        if rec.status.state == "completed" and rec.spec.cell:
            mine.setdefault((rec.spec.cell, rec.spec.comparison), []).append(rec)
    rows = []
    for (cell, comp), recs in sorted(mine.items()):
        seed_runs = reference.get((cell, comp), [])
        entry: dict[str, Any] = {"cell": cell, "method": comp, "quantities": {}}
        for name, (field, read) in QUANTITIES.items():
            ours = _stats([float(v) for r in recs if _finite(v := r.metrics.get(field))])  # type: ignore[arg-type]
            theirs = _stats([float(v) for m in seed_runs if _finite(v := read(m))])
            flag = None
            if ours["mean"] is not None and theirs["min"] is not None:
                flag = bool(theirs["min"] <= ours["mean"] <= theirs["max"])
            entry["quantities"][name] = {"clt": ours, "seed": theirs, "cltMeanInsideSeedRange": flag}
        rows.append(entry)
    rankings: dict[str, Any] = {}
    for cell in sorted({r["cell"] for r in rows}):
        pairs = [
            (r["method"], r["quantities"]["rd"]["clt"]["mean"], r["quantities"]["rd"]["seed"]["mean"])
            for r in rows
            if r["cell"] == cell
            and r["quantities"]["rd"]["clt"]["mean"] is not None
            and r["quantities"]["rd"]["seed"]["mean"] is not None
        ]
        if len(pairs) < 2:
            continue
        rank_clt = [m for m, *_ in sorted(pairs, key=lambda p: p[1])]
        rank_seed = [m for m, *_ in sorted(pairs, key=lambda p: p[2])]
        tau = kendalltau([p[1] for p in pairs], [p[2] for p in pairs])
        rankings[cell] = {
            "clt": rank_clt,
            "seed": rank_seed,
            "kendallTau": None if not math.isfinite(tau.statistic) else float(tau.statistic),
            "methods": len(pairs),
        }
    flags: list[bool] = [
        bool(q["cltMeanInsideSeedRange"])
        for r in rows
        for q in r["quantities"].values()
        if q["cltMeanInsideSeedRange"] is not None
    ]
    return {
        "rows": rows,
        "rdRankings": rankings,
        "insideSeedRange": {"count": sum(flags), "of": len(flags)},
        "note": "Descriptive comparison with the seed repository's stored runs; agreement and disagreement alike.",
    }


def apart(mean: float, low: float, high: float) -> tuple[str, str, str]:
    """The mean and the seed's range at the fewest significant digits (3 or more) at which the mean differs in print
    from the bound it lies beyond, so a mean outside the range never reads as equal to its bound."""
    bound = low if mean < low else high
    digits = 3
    while digits < 12 and f"{mean:.{digits}g}" == f"{bound:.{digits}g}":
        digits += 1
    return f"{mean:.{digits}g}", f"{low:.{digits}g}", f"{high:.{digits}g}"


def report_lines(rep: dict[str, Any]) -> list[str]:
    """The report section "Reproduction of seed 000" (Markdown)."""

    def num(x: Any) -> str:
        return "-" if x is None else f"{x:.3g}"

    inside = rep["insideSeedRange"]
    lines = [
        "## Reproduction of seed 000",
        "",
        f"clt's runs beside the seed repository's stored runs ({rep.get('source', 'reference')}): per cell and method, "
        "clt's mean [min, max] and the seed's mean (SD) [min, max]; `in` marks clt's mean inside the seed's range "
        f"({inside['count']} of {inside['of']} quantity-cells). Descriptive: agreement and disagreement alike.",
        "",
        "| cell | method | " + " | ".join(QUANTITIES) + " |",
        "|---|---|" + "---|" * len(QUANTITIES),
    ]
    outside = []
    for row in rep["rows"]:
        cells = []
        for name in QUANTITIES:
            q = row["quantities"][name]
            c, s = q["clt"], q["seed"]
            flag = {True: " in", False: " out", None: ""}[q["cltMeanInsideSeedRange"]]
            mean, low, high = num(c["mean"]), num(s["min"]), num(s["max"])
            if q["cltMeanInsideSeedRange"] is False:
                mean, low, high = apart(c["mean"], s["min"], s["max"])
                outside.append(f"{row['method']} in {row['cell']}, {name} {mean} (seed {low} to {high})")
            cells.append(
                f"{mean} [{num(c['min'])}, {num(c['max'])}] / {num(s['mean'])} ({num(s['sd'])}) [{low}, {high}]{flag}"
            )
        lines.append(f"| {row['cell']} | {row['method']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Outside the seed's range: {'; '.join(outside)}." if outside else "No clt mean is outside the seed's range.",
    ]
    lines += ["", "RD ranking of methods per cell (lowest RD first), clt and seed, with Kendall's tau:", ""]
    lines += [
        f"- {cell}: clt {', '.join(r['clt'])}; seed {', '.join(r['seed'])}; tau {num(r['kendallTau'])}"
        for cell, r in rep["rdRankings"].items()
    ]
    return [*lines, ""]
