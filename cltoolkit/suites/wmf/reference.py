"""Comparison with the seed-000 repository's stored runs (`reference/wmf-seed000-metrics.json`): per cell and
method, clt's mean and range beside the seed's mean, SD and range of PF, RD, FT, task-A fit gain and encoder drift,
whether clt's mean lies inside the seed's range, and per cell the RD ranking of methods in both with Kendall's tau.
Descriptive: it reports agreement and disagreement alike and decides nothing."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cltoolkit.run.record import RunRecord

__all__ = [
    "FAMILIES",
    "METHODS",
    "QUANTITIES",
    "apart",
    "by_construction",
    "exact_spearman",
    "findings",
    "findings_lines",
    "load_reference",
    "ranking_calibration",
    "report_lines",
    "reproduction",
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
            "from one distribution, |z| would have median about 0.674 x sqrt(1/n_clt + 1/n_seed) (sampling alone):",
            "",
            "| quantity | quantity-cells | median abs z | by sampling alone |",
            "|---|---|---|---|",
            *(
                f"| {name} | {q['n']} | {q['medianAbsZ']:.2f} | {q['samplingMedianAbsZ']:.2f} |"
                for name, q in tight["perQuantity"].items()
            ),
            "",
        ]
        far = tight["farInsideRange"]
        lines.append(
            "Inside the seed's range but far from its centre (|z| above twice what sampling alone gives): "
            + "; ".join(
                f"{f['method']} {f['quantity']} in {f['cell']}: clt {f['cltMean']:.4g}, seed mean {f['seedMean']:.4g}"
                + (f", median {f['seedMedian']:.4g}" if f.get("seedMedian") is not None else "")
                + f" (z {f['z']:+.2f})"
                for f in far
            )
            + "."
            if far
            else "No mean inside the seed's range is far from its centre."
        )
    built = rep.get("byConstruction")
    if built:
        inside = rep["insideSeedRange"]
        lines += [
            "",
            f"Equal by construction, not evidence: {built['count']} of the {inside['of']} quantity-cells "
            "(task-A fit gain shared by the four plain methods' one task-A model; UG-MTM's encoder drift of exactly 1, "
            "its encoder frozen): "
            + ("; ".join(f"{c['method']} {c['quantity']} in {c['cell']}" for c in built["checks"][:12]) or "none")
            + ("; ..." if built["count"] > 12 else "")
            + ".",
        ]
    return [*lines, ""]


def findings_lines(f: dict[str, Any]) -> list[str]:
    """The report section "The seed's findings, re-tested" (Markdown)."""

    def num(x: Any, spec: str = "+.2f") -> str:
        return "-" if x is None else format(x, spec)

    sp = f["spearman"]
    names = {"level": "labelled level", "dTrans": "d_trans", "taskBDifficulty": "task-B difficulty"}
    lines = [
        "## The seed's findings, re-tested",
        "",
        f"First finding: the labelled distance does not order forgetting, the measured ones do. Per cell the axis RD "
        f"(median over {', '.join(f['axisMethods'])} of each method's median RD); Spearman's rho with each distance "
        "over the cells, with its two-sided permutation p (every order of the cells enumerated).",
        "",
        "| distance | clt (its cells) | seed, same cells | seed, all its cells |",
        "|---|---|---|---|",
    ]
    for key, name in names.items():
        cols = [sp[who][key] for who in ("clt", "seedSameCells", "seedAllCells")]
        lines.append(
            f"| {name} | "
            + " | ".join(f"rho {num(c['rho'])}, p {num(c['p'], '.3f')} ({c['n']} cells)" for c in cols)
            + " |"
        )
    clt, seed = sp["clt"], sp["seedSameCells"]
    n = clt["level"]["n"]
    words = []
    for key, name in names.items():
        a, b = clt[key]["rho"], seed[key]["rho"]
        if a is None or b is None:
            words.append(f"{name}: not computable from clt's {n} cells")
            continue
        signs = (int(np.sign(round(a, 12))), int(np.sign(round(b, 12))))
        how = {True: "the same sign as", False: "the opposite sign to"}[signs[0] == signs[1]]
        if 0 in signs and signs[0] != signs[1]:
            how = "a different sign from"
        words.append(
            f"{name}: clt's rho {a:+.2f} has {how} the seed's {b:+.2f} on these cells (difference {a - b:+.2f})"
        )
    lines += [
        "",
        ("Read with care: " if n < 9 else "")
        + f"over {n} of the nine cells, "
        + "; ".join(words)
        + ". No rho here is decided by a threshold: the p-values say how often a random order of the cells gives one "
        "as large.",
        "",
        "Second finding: forgetting in the encoder that PF and RD cannot see (medians over each family's runs; "
        "encoder drift = held-out reconstruction of A after B over after A):",
        "",
        "| family | method | clt encoder drift | clt PF | seed encoder drift | seed PF |",
        "|---|---|---|---|---|---|",
    ]
    for row in f["drift"]:
        c, s = row["clt"], row["seed"]
        lines.append(
            f"| {row['family']} | {row['method']} | {num(c['encoderDrift'], '.3g')} | {num(c['pf'], '.3g')} | "
            f"{num(s['encoderDrift'], '.3g')} | {num(s['pf'], '.3g')} |"
        )
    return [*lines, ""]


LEVEL_RANK = {"min": 1, "med": 2, "max": 3}
"""The labelled distance as a number (the seed's `min` < `med` < `max`)."""
SEED_READ: dict[str, Reader] = {
    "rd": lambda m: m.get("rd"),
    "pf": lambda m: m.get("pf"),
    "dTrans": lambda m: m.get("d_trans"),
    "reconBAfterB": lambda m: m.get("heldout_reconstruction_B_after_task_B"),
    "encoderDrift": _drift,
}
"""clt record field -> how to read it from a seed run's metrics (the findings' inputs)."""
EXACT_UP_TO = 10
"""Cells up to which the Spearman permutation p is enumerated exactly (10! orders); Monte Carlo beyond."""


@functools.cache
def _orders(n: int) -> np.ndarray:
    """Every order of n items, (n!, n) indices (built once per n)."""
    import itertools

    return np.asarray(list(itertools.permutations(range(n))), dtype=np.int8)


def exact_spearman(x: Sequence[float], y: Sequence[float], draws: int = 100_000) -> dict[str, Any]:
    """Spearman's rho (Pearson on average ranks, as the seed computes it) with its two-sided permutation p: exact by
    enumerating every order of y's ranks up to `EXACT_UP_TO` points, labelled Monte Carlo (draws) beyond."""
    from scipy.stats import rankdata

    n = len(x)
    if n < 3:
        return {"rho": None, "p": None, "n": n, "pKind": None}
    rx, ry = rankdata(x) - (n + 1) / 2, rankdata(y) - (n + 1) / 2
    den = float(np.sqrt((rx**2).sum() * (ry**2).sum()))
    if den == 0:
        return {"rho": None, "p": None, "n": n, "pKind": None}
    rho = float((rx * ry).sum() / den)
    if n <= EXACT_UP_TO:
        perms = ry[_orders(n)]
        kind = f"exact, all {len(perms)} orders"
    else:
        rng = np.random.default_rng(0)
        perms = np.asarray([rng.permutation(ry) for _ in range(draws)])
        kind = f"Monte Carlo, {draws} orders"
    null = perms @ rx / den
    p = float(np.mean(np.abs(null) >= abs(rho) - 1e-12))
    return {"rho": rho, "p": p, "n": n, "pKind": kind}


def _cell_axis(
    values: dict[tuple[str, str], list[dict[str, Any]]], axis_methods: Sequence[str]
) -> list[dict[str, Any]]:
    """Per cell (values: (cell, method) -> runs as {field: number}): the median over `axis_methods` of each method's
    median RD, the median d_trans and task-B difficulty over the cell's runs (seed 000's distance axis)."""

    def med(xs: list[Any]) -> float | None:
        xs = [float(v) for v in xs if _finite(v)]
        return float(np.median(xs)) if xs else None

    out = []
    for cell in sorted({c for c, _ in values}, key=lambda c: (c.split("-")[0], LEVEL_RANK.get(c.split("-")[-1], 0))):
        per_method = [med([r.get("rd") for r in values.get((cell, m), [])]) for m in axis_methods]
        runs = [r for (c, _), rs in values.items() if c == cell for r in rs]
        out.append(
            {
                "cell": cell,
                "level": LEVEL_RANK.get(cell.split("-")[-1]),
                "rd": med(per_method),
                "dTrans": med([r.get("dTrans") for r in runs]),
                "taskBDifficulty": med([r.get("reconBAfterB") for r in runs]),
            }
        )
    return out


def _axis_spearman(axis: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for key in ("level", "dTrans", "taskBDifficulty"):
        pairs = [(a["rd"], a[key]) for a in axis if a["rd"] is not None and a[key] is not None]
        out[key] = exact_spearman([p[0] for p in pairs], [p[1] for p in pairs])
    return out


def _as_values(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in records:
        if rec.status.state == "completed" and rec.spec.cell:
            out.setdefault((rec.spec.cell, rec.spec.comparison), []).append({k: rec.metrics.get(k) for k in SEED_READ})
    return out


def findings(
    records: Sequence[RunRecord], reference: dict[tuple[str, str], list[dict[str, Any]]], axis_methods: Sequence[str]
) -> dict[str, Any]:
    """The seed's two findings, re-tested. First: the labelled distance does not order forgetting, the measured
    quantities do (Spearman over cells of the axis RD with the label, d_trans and task-B difficulty), for clt's cells,
    for the seed's runs of the same cells, and for all the seed's cells. Second: forgetting in the encoder that PF
    and RD cannot see (fine-tuning's and EWC's median encoder drift beside their median PF, per family)."""
    mine = _as_values(records)
    seed_values = {k: [{f: read(m) for f, read in SEED_READ.items()} for m in runs] for k, runs in reference.items()}
    cells = {c for c, _ in mine}
    axes = {
        "clt": _cell_axis(mine, axis_methods),
        "seedSameCells": _cell_axis({k: v for k, v in seed_values.items() if k[0] in cells}, axis_methods),
        "seedAllCells": _cell_axis(seed_values, axis_methods),
    }
    drift = []
    for family in sorted({c.split("-")[0] for c in cells}):
        for method in ("finetuning", "ewc"):
            row: dict[str, Any] = {"family": family, "method": method}
            for who, source in (("clt", mine), ("seed", seed_values)):
                runs = [r for (c, m), rs in source.items() if m == method and c.split("-")[0] == family for r in rs]
                row[who] = {
                    q: (float(np.median(xs)) if (xs := [float(r[q]) for r in runs if _finite(r.get(q))]) else None)
                    for q in ("encoderDrift", "pf")
                } | {"runs": len(runs)}
            drift.append(row)
    return {
        "axisMethods": list(axis_methods),
        "axis": axes,
        "spearman": {who: _axis_spearman(axis) for who, axis in axes.items()},
        "drift": drift,
    }


def tightness(rep: dict[str, Any]) -> dict[str, Any]:
    """How tight the agreement is, beyond inside-the-range: per row and quantity z = (clt mean - seed mean) / seed
    SD beside what sampling alone gives (the SD of z when clt's runs and the seed's come from one distribution:
    sqrt(1 / n_clt + 1 / n_seed)); per quantity the median |z| and its expectation under sampling alone (0.674 x
    that SD, the half-normal median); `far` flags a mean inside the seed's range with |z| above twice that SD."""
    per_q: dict[str, list[tuple[float, float]]] = {}
    far = []
    for row in rep["rows"]:
        for name, q in row["quantities"].items():
            c, s = q["clt"], q["seed"]
            if c["mean"] is None or s["mean"] is None or not s["sd"] or not c["n"] or not s["n"]:
                q["z"] = None
                continue
            z = (c["mean"] - s["mean"]) / s["sd"]
            sampling = math.sqrt(1 / c["n"] + 1 / s["n"])
            q["z"], q["zSampling"] = z, sampling
            per_q.setdefault(name, []).append((abs(z), sampling))
            if q["cltMeanInsideSeedRange"] and abs(z) > 2 * sampling:
                far.append({"cell": row["cell"], "method": row["method"], "quantity": name, "z": z,
                            "cltMean": c["mean"], "seedMean": s["mean"], "seedMedian": s.get("median")})  # fmt: skip
    summary = {
        name: {
            "medianAbsZ": float(np.median([a for a, _ in v])),
            "samplingMedianAbsZ": 0.6745 * float(np.median([s for _, s in v])),
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
                if _finite(v):
                    values.setdefault((rec.spec.cell, rec.spec.comparison, name), {})[rec.spec.seed] = float(v)  # type: ignore[arg-type]
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
            m: np.asarray([float(r["rd"]) for r in rs if _finite(r.get("rd"))])
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
