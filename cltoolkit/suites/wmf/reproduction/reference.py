"""Comparison with the WorldModelsBenchmark repository's stored runs (`reference/wmf-seed000-metrics.json`): per cell
and method, clt's mean and range beside the seed's mean, SD and range of PF, RD, FT, task-A fit gain and encoder drift,
whether clt's mean lies inside the seed's range, and per cell the RD ranking of methods in both with Kendall's tau.
Descriptive: it reports agreement and disagreement alike and decides nothing. The seed's own findings, re-tested on
clt's runs, are in `findings.py`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from cltoolkit.run.record import RunRecord

__all__ = [
    "FAMILIES",
    "METHODS",
    "QUANTITIES",
    "apart",
    "by_construction",
    "finite",
    "glance_lines",
    "load_reference",
    "per_cell",
    "ranking_calibration",
    "report_lines",
    "reproduction",
    "seed_drift",
    "tightness",
]

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


def seed_drift(m: dict[str, Any]) -> float | None:
    """Encoder drift as clt records it: held-out reconstruction of A after task B over after task A."""
    return _ratio(m.get("heldout_reconstruction_A_after_task_B"), m.get("heldout_reconstruction_A_after_task_A"))


def _ratio(a: Any, b: Any) -> float | None:
    return float(a) / float(b) if finite(a) and finite(b) and float(b) != 0 else None


def finite(x: object) -> TypeGuard[int | float]:
    """A JSON number that is finite (not a bool, not NaN or infinite)."""
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
        return {"n": 0, "mean": None, "sd": None, "median": None, "min": None, "max": None}
    a = np.asarray(values, dtype=float)
    return {
        "n": int(a.size),
        "mean": float(a.mean()),
        "sd": float(a.std(ddof=1)) if a.size > 1 else None,
        "median": float(np.median(a)),
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
            ours = _stats([float(v) for r in recs if finite(v := r.metrics.get(field))])
            theirs = _stats([float(v) for m in seed_runs if finite(v := read(m))])
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
    """The report section "Reproduction of WorldModelsBenchmark" (Markdown)."""

    def num(x: Any) -> str:
        return "-" if x is None else f"{x:.3g}"

    inside = rep["insideSeedRange"]
    lines = [
        "## Reproduction of WorldModelsBenchmark",
        "",
        f"clt's runs beside the seed repository's stored runs ({rep.get('source', 'reference')}): per cell and method, "
        "clt's mean [min, max] and the seed's mean (SD) [min, max]; `in` marks clt's mean inside the seed's range "
        f"({inside['count']} of {inside['of']} quantity-cells{_informative_words(rep.get('perCell'))}). "
        "Descriptive: agreement and disagreement alike.",
        "",
        "| cell | method | " + " | ".join(QUANTITIES) + " |",
        "|---|---|" + "---|" * len(QUANTITIES),
    ]
    outside: dict[str, list[str]] = {}
    for row in rep["rows"]:
        cells = []
        for name in QUANTITIES:
            q = row["quantities"][name]
            c, s = q["clt"], q["seed"]
            flag = {True: " in", False: " out", None: ""}[q["cltMeanInsideSeedRange"]]
            mean, low, high = num(c["mean"]), num(s["min"]), num(s["max"])
            if q["cltMeanInsideSeedRange"] is False:
                mean, low, high = apart(c["mean"], s["min"], s["max"])
                outside.setdefault(row["cell"], []).append(f"{row['method']} {name} {mean} (seed {low} to {high})")
            cells.append(
                f"{mean} [{num(c['min'])}, {num(c['max'])}] / {num(s['mean'])} ({num(s['sd'])}) [{low}, {high}]{flag}"
            )
        lines.append(f"| {row['cell']} | {row['method']} | " + " | ".join(cells) + " |")
    glance = rep.get("perCell")
    if glance:
        lines += ["", *glance_lines(glance)]
    lines += [
        "",
        *(
            ["Outside the seed's range (clt's mean beyond the seed's min or max), per cell:", ""]
            + [f"- {cell} ({len(items)} outside): {'; '.join(items)}" for cell, items in outside.items()]
            if outside
            else ["No clt mean is outside the seed's range."]
        ),
    ]
    lines += ["", "RD ranking of methods per cell (lowest RD first), clt and seed, with Kendall's tau:", ""]
    calibration = rep.get("rankingCalibration", {})
    lines += [
        f"- {cell}: clt {', '.join(r['clt'])}; seed {', '.join(r['seed'])}; tau {num(r['kendallTau'])}"
        + (
            f" (3 of the seed's own runs per method give its full ranking in {calibration[cell]['equalShare']:.0%} "
            f"of {calibration[cell]['draws']} draws, median tau {calibration[cell]['medianTau']:.2f})"
            if cell in calibration
            else ""
        )
        for cell, r in rep["rdRankings"].items()
    ]
    tight = rep.get("tightness")
    if tight:
        lines += [
            "",
            "How tight: z = (clt mean - seed mean) / seed SD per cell and method. If clt's runs and the seed's came "
            "from one distribution, |z| would have median t_0.75(n_seed - 1) x sqrt(1/n_clt + 1/n_seed) (sampling "
            "alone; a t because the seed's SD is estimated). Values equal by construction count once:",
            "",
            "| quantity | distinct quantity-cells | median abs z | by sampling alone |",
            "|---|---|---|---|",
            *(
                f"| {name} | {q['n']} | {q['medianAbsZ']:.2f} | {q['samplingMedianAbsZ']:.2f} |"
                for name, q in tight["perQuantity"].items()
            ),
            "",
        ]
        far: dict[str, list[str]] = {}
        for f in tight["farInsideRange"]:
            far.setdefault(f["cell"], []).append(
                f"{f['method']} {f['quantity']}: clt {f['cltMean']:.4g}, seed mean {f['seedMean']:.4g}"
                + (f", median {f['seedMedian']:.4g}" if f.get("seedMedian") is not None else "")
                + f" (z {f['z']:+.2f})"
            )
        lines += (
            [
                "Inside the seed's range but far from its centre (|z| above twice what sampling alone gives), "
                "per cell:",
                "",
            ]
            + [f"- {cell} ({len(items)} far): {'; '.join(items)}" for cell, items in far.items()]
            if far
            else ["No mean inside the seed's range is far from its centre."]
        )
    built = rep.get("byConstruction")
    if built:
        inside = rep["insideSeedRange"]
        lines += [
            "",
            f"Equal by construction, not evidence: {built['count']} of the {inside['of']} quantity-cells "
            "(task-A fit gain shared by the four plain methods' one task-A model; UG-MTM's encoder drift of exactly 1, "
            "its encoder frozen): "
            + "; ".join(f"{c['method']} {c['quantity']} in {c['cell']}" for c in built["checks"][:12])
            + ("; ..." if built["count"] > 12 else "")
            + "."
            if built["count"]
            else f"Equal by construction, not evidence: none of the {inside['of']} quantity-cells.",
        ]
    return [*lines, ""]


def _informative_words(glance: dict[str, Any] | None) -> str:
    if not glance:
        return ""
    k = sum(g["informativeInside"]["count"] for g in glance.values())
    n = sum(g["informativeInside"]["of"] for g in glance.values())
    return f"; {k} of the {n} not equal by construction"


def per_cell(rep: dict[str, Any]) -> dict[str, Any]:
    """Each cell at a glance, from a `reproduction` after `tightness` and `by_construction`: the most runs per method
    in clt and in the seed, the quantity-cells with clt's mean inside the seed's range (of those where both have
    one; and of those not equal by construction, the informative ones), how many of the cell's quantity-cells are
    equal by construction, the median |z| beside what sampling alone gives, and the RD ranking's Kendall tau."""
    built = {(c["cell"], c["method"], c["quantity"]) for c in (rep.get("byConstruction") or {}).get("checks", [])}
    out: dict[str, Any] = {}
    for cell in sorted({r["cell"] for r in rep["rows"]}):
        keyed = [((r["method"], n), q) for r in rep["rows"] if r["cell"] == cell for n, q in r["quantities"].items()]
        qs = [q for _, q in keyed]
        flags = [bool(q["cltMeanInsideSeedRange"]) for q in qs if q["cltMeanInsideSeedRange"] is not None]
        informative = [
            bool(q["cltMeanInsideSeedRange"])
            for (m, n), q in keyed
            if q["cltMeanInsideSeedRange"] is not None and (cell, m, n) not in built
        ]
        zs = [  # informative entries only, each distinct value once
            q
            for (m, n), q in keyed
            if q.get("z") is not None and q.get("zSamplingMedianAbs") is not None and (cell, m, n) not in built
        ]
        out[cell] = {
            "cltRuns": max(q["clt"]["n"] for q in qs),
            "seedRuns": max(q["seed"]["n"] for q in qs),
            "inside": {"count": sum(flags), "of": len(flags)},
            "informativeInside": {"count": sum(informative), "of": len(informative)},
            "byConstruction": sum(1 for b in built if b[0] == cell),
            "medianAbsZ": float(np.median([abs(q["z"]) for q in zs])) if zs else None,
            "samplingMedianAbsZ": float(np.median([q["zSamplingMedianAbs"] for q in zs])) if zs else None,
            "rdKendallTau": rep["rdRankings"].get(cell, {}).get("kendallTau"),
        }
    return out


def glance_lines(glance: dict[str, Any]) -> list[str]:
    """The per-cell table of `per_cell`, and its totals per family."""

    def num(x: float | None, spec: str) -> str:
        return "-" if x is None else f"{x:{spec}}"

    lines = [
        "Per cell at a glance: runs per method (clt / seed, the most of any method); clt means inside the seed's "
        "range, of the quantity-cells where both have one, and of the informative ones (those not equal by "
        "construction: the shared task-A model's fit gain counts once); how many are equal by construction; the "
        "median |z| beside what sampling alone gives; Kendall's tau between the two RD rankings.",
        "",
        "| cell | runs (clt / seed) | inside the seed's range | informative: inside | equal by construction "
        "| median abs z (sampling alone) | RD ranking tau |",
        "|---|---|---|---|---|---|---|",
    ]
    families: dict[str, list[int]] = {}
    for cell, g in glance.items():
        inside, informative = g["inside"], g["informativeInside"]
        total = families.setdefault(cell.split("-", 1)[0], [0, 0, 0, 0])
        for i, v in enumerate((inside["count"], inside["of"], informative["count"], informative["of"])):
            total[i] += v
        lines.append(
            f"| {cell} | {g['cltRuns']} / {g['seedRuns']} | {inside['count']} of {inside['of']} | "
            f"{informative['count']} of {informative['of']} | {g['byConstruction']} | "
            f"{num(g['medianAbsZ'], '.2f')} ({num(g['samplingMedianAbsZ'], '.2f')}) | {num(g['rdKendallTau'], '.2g')} |"
        )
    lines += [
        "",
        "Inside the seed's range by family: "
        + "; ".join(f"{fam} {k} of {n} (informative {ki} of {ni})" for fam, (k, n, ki, ni) in families.items())
        + ".",
    ]
    return lines


def tightness(rep: dict[str, Any]) -> dict[str, Any]:
    """How tight the agreement is, beyond inside-the-range: per row and quantity z = (clt mean - seed mean) / seed
    SD beside what sampling alone gives (the scale of z when clt's runs and the seed's come from one distribution:
    sqrt(1 / n_clt + 1 / n_seed)); per quantity the median |z| and its expectation under sampling alone: the seed's
    SD is estimated from its n_seed runs, so z / scale follows a t with n_seed - 1 degrees of freedom and the median
    |z| is t_0.75(n_seed - 1) x scale (at n_clt = 3, n_seed = 10: 0.463, not the normal 0.444). Entries equal by
    construction (one shared task-A model read by four methods) count once: `n` counts distinct values. `far`
    flags a mean inside the seed's range with |z| above twice the scale."""
    from scipy.stats import t as student_t

    per_q: dict[str, dict[tuple[str, float], tuple[float, float]]] = {}
    far = []
    for row in rep["rows"]:
        for name, q in row["quantities"].items():
            c, s = q["clt"], q["seed"]
            if c["mean"] is None or s["mean"] is None or not s["sd"] or not c["n"] or not s["n"]:
                q["z"] = None
                continue
            z = (c["mean"] - s["mean"]) / s["sd"]
            sampling = math.sqrt(1 / c["n"] + 1 / s["n"])
            median_abs = float(student_t.ppf(0.75, s["n"] - 1)) * sampling if s["n"] > 1 else None
            q["z"], q["zSampling"], q["zSamplingMedianAbs"] = z, sampling, median_abs
            if median_abs is not None:  # one entry per distinct value (equal by construction counts once)
                per_q.setdefault(name, {})[(row["cell"], round(abs(z), 9))] = (abs(z), median_abs)
            if q["cltMeanInsideSeedRange"] and abs(z) > 2 * sampling:
                far.append({"cell": row["cell"], "method": row["method"], "quantity": name, "z": z,
                            "cltMean": c["mean"], "seedMean": s["mean"], "seedMedian": s.get("median")})  # fmt: skip
    summary = {
        name: {
            "medianAbsZ": float(np.median([a for a, _ in v.values()])),
            "samplingMedianAbsZ": float(np.median([s for _, s in v.values()])),
            "samplingDistribution": "t with n_seed - 1 df (the seed's SD estimated)",
            "n": len(v),
        }
        for name, v in per_q.items()
    }
    return {"perQuantity": summary, "farInsideRange": far}


def by_construction(records: Sequence[RunRecord]) -> dict[str, Any]:
    """Checks equal by construction, counted apart from the informative ones: a quantity whose per-seed values in a
    cell equal another method's exactly (the shared task-A model makes task-A fit gain one number for the four plain
    methods), or an encoder drift of exactly 1 in every run (UG-MTM freezes its encoder)."""
    values: dict[tuple[str, str, str], dict[int, float]] = {}
    for rec in records:
        if rec.status.state == "completed" and rec.spec.cell:
            for name, (field, _) in QUANTITIES.items():
                v = rec.metrics.get(field)
                if finite(v):
                    values.setdefault((rec.spec.cell, rec.spec.comparison, name), {})[rec.spec.seed] = float(v)
    out = []
    for (cell, method, name), per_seed in sorted(values.items()):
        same = [
            m
            for (c, m, q), other in sorted(values.items())
            if c == cell and q == name and m < method and other == per_seed
        ]
        if same:
            out.append({"cell": cell, "method": method, "quantity": name, "why": f"equal to {same[0]}'s in every seed"})
        elif name == "encoderDrift" and all(v == 1.0 for v in per_seed.values()):
            out.append({"cell": cell, "method": method, "quantity": name, "why": "exactly 1 in every seed"})
    return {"checks": out, "count": len(out)}


def ranking_calibration(
    reference: dict[tuple[str, str], list[dict[str, Any]]], cells: Sequence[str], runs: int = 3, draws: int = 2000
) -> dict[str, Any]:
    """What "ranking equal" is worth: per cell, how often `runs` of the seed's own runs per method (drawn without
    replacement, seeded) rank the methods by mean RD exactly as all its runs do (Kendall's tau 1), and the median
    tau."""
    import zlib

    out = {}
    for cell in cells:
        rng = np.random.default_rng(zlib.crc32(cell.encode()))  # per cell: independent of which cells are asked
        per = {
            m: np.asarray([float(r["rd"]) for r in rs if finite(r.get("rd"))])
            for (c, m), rs in sorted(reference.items())
            if c == cell
        }
        per = {m: v for m, v in per.items() if v.size >= runs}
        if len(per) < 2:
            continue
        full = np.asarray([v.mean() for v in per.values()])
        taus = []
        for _ in range(draws):
            sub = np.asarray([rng.choice(v, runs, replace=False).mean() for v in per.values()])
            i, j = np.triu_indices(len(full), 1)
            s = np.sign(full[i] - full[j]) * np.sign(sub[i] - sub[j])
            taus.append(float(s.sum() / len(s)))
        arr = np.asarray(taus)
        out[cell] = {"equalShare": float(np.mean(arr >= 1 - 1e-12)), "medianTau": float(np.median(arr)), "draws": draws}
    return out
