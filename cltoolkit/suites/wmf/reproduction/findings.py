"""The seed's findings, re-tested on clt's runs: its distance axis (Spearman correlations across cells of forgetting
with the labelled level, d_trans and task-B difficulty, with exact permutation p over all orderings where the cells
are few), the drift of encoder and transition, and the report section that states them beside the seed's values
(WorldModelsBenchmark's `experiments/summarize_results.py` and paper). Descriptive, like `reference.py`."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from cltoolkit.run.record import RunRecord
from cltoolkit.suites.wmf.reproduction.reference import Reader, finite, seed_drift

__all__ = [
    "EXACT_UP_TO",
    "LEVEL_RANK",
    "exact_spearman",
    "findings",
    "findings_lines",
    "rho_calibration",
    "within_family_spearman",
    "without_family",
]


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
            + _calibration_words(a, f.get("rhoCalibration", {}).get(key))
        )
    lines += [
        "",
        ("Read with care: " if n < 9 else "")
        + f"over {n} of the nine cells, "
        + "; ".join(words)
        + ". No rho here is decided by a threshold: the p-values say how often a random order of the cells gives one "
        "as large." + _calibration_note(f.get("rhoCalibration")),
        "",
        *_without_family_lines(f.get("withoutFamily") or {}, names),
        *_within_family_lines(f.get("withinFamily") or {}, names),
        "Second finding: forgetting in the encoder that PF and RD cannot see (per family, the median over its cells "
        "of each cell's median, cells weighed equally, clt's and the seed's over the same cells; encoder drift = "
        "held-out reconstruction of A after B over after A):",
        "",
        "| family | method | clt encoder drift | clt PF | seed encoder drift | seed PF | "
        "encoder drift per cell, clt / seed |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in f["drift"]:
        c, s = row["clt"], row["seed"]
        per_cell = "; ".join(
            f"{cell} {num(c['perCell'][cell]['encoderDrift'], '.3g')} / "
            f"{num(s['perCell'][cell]['encoderDrift'], '.3g')}"
            for cell in row.get("cells", [])
        )
        lines.append(
            f"| {row['family']} | {row['method']} | {num(c['encoderDrift'], '.3g')} | {num(c['pf'], '.3g')} | "
            f"{num(s['encoderDrift'], '.3g')} | {num(s['pf'], '.3g')} | {per_cell or '-'} |"
        )
    return [*lines, "", *_drift_words(f["drift"])]


def _drift_words(drift: list[dict[str, Any]]) -> list[str]:
    """The second finding in words, per family: EWC's encoder drift as a multiple of fine-tuning's and its |PF| as a
    share of fine-tuning's, clt's beside the seed's (no threshold decides it)."""

    def ratios(who: str, family: str) -> tuple[float, float, float] | None:
        rows = {r["method"]: r[who] for r in drift if r["family"] == family}
        ft, ewc = rows.get("finetuning", {}), rows.get("ewc", {})
        vals = [ft.get("encoderDrift"), ewc.get("encoderDrift"), ft.get("pf"), ewc.get("pf")]
        if not all(finite(v) for v in vals) or vals[0] == 0 or vals[2] == 0:
            return None
        return float(vals[0]), float(vals[1]) / float(vals[0]), abs(float(vals[3])) / abs(float(vals[2]))

    lines = []
    for family in sorted({r["family"] for r in drift}):
        mine, seed = ratios("clt", family), ratios("seed", family)
        if mine is None or seed is None:
            lines.append(f"- {family}: not computable (a median is missing or fine-tuning's is 0)")
            continue
        lines.append(
            f"- {family}: fine-tuning's encoder drift {mine[0]:.3g} (seed {seed[0]:.3g}); EWC's is {mine[1]:.2f} x "
            f"fine-tuning's (seed {seed[1]:.2f} x) while its |PF| is {mine[2]:.2f} of fine-tuning's "
            f"(seed {seed[2]:.2f})"
        )
    return [
        "In words (the seed's finding: under fine-tuning the encoder forgets, its drift well above 1, where 1 is no "
        "change; under EWC it drifts about as much, a ratio near 1, while PF shows a small share of fine-tuning's "
        "forgetting):",
        "",
        *lines,
        "",
    ]


def _inside(rho: float | None, cal: dict[str, Any] | None) -> str | None:
    """ "inside" or "outside" the calibrated 5-95% range; None where either is missing."""
    if rho is None or not cal or cal.get("low") is None:
        return None
    return "inside" if cal["low"] - 1e-12 <= rho <= cal["high"] + 1e-12 else "outside"


def _calibration_words(rho: float, cal: dict[str, Any] | None) -> str:
    where = _inside(rho, cal)
    if where is None or cal is None:
        return ""
    return (
        f"; {where} the 5-95% range of the seed's rho from as many of its own runs per cell "
        f"({cal['low']:+.2f} to {cal['high']:+.2f}, median {cal['median']:+.2f})"
    )


def _calibration_note(cal: dict[str, Any] | None) -> str:
    if not cal:
        return ""
    per = ", ".join(f"{c} {k}" for c, k in cal["runsPerCell"].items())
    return (
        " The 5-95% ranges: the seed's rho over the same cells when each cell keeps only as many of the seed's runs "
        "as clt has there (its seeds drawn without replacement, all methods of a drawn seed kept; "
        f"{cal['draws']} seeded draws; seeds per cell: {per}): what sampling alone moves the seed's own rho by at "
        "clt's run count."
    )


LEVEL_RANK = {"min": 1, "med": 2, "max": 3}
"""The labelled distance as a number (the seed's `min` < `med` < `max`)."""
SEED_READ: dict[str, Reader] = {
    "rd": lambda m: m.get("rd"),
    "pf": lambda m: m.get("pf"),
    "dTrans": lambda m: m.get("d_trans"),
    "reconBAfterB": lambda m: m.get("heldout_reconstruction_B_after_task_B"),
    "encoderDrift": seed_drift,
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
        kind = f"exact, all {len(perms)} orders, two-sided"
    else:
        rng = np.random.default_rng(0)
        perms = np.asarray([rng.permutation(ry) for _ in range(draws)])
        kind = f"Monte Carlo, {draws} orders, two-sided"
    null = perms @ rx / den
    p = float(np.mean(np.abs(null) >= abs(rho) - 1e-12))
    return {"rho": rho, "p": p, "n": n, "pKind": kind}


def _cell_axis(
    values: dict[tuple[str, str], list[dict[str, Any]]], axis_methods: Sequence[str]
) -> list[dict[str, Any]]:
    """Per cell (values: (cell, method) -> runs as {field: number}): the median over `axis_methods` of each method's
    median RD and of each method's median held-out task-B reconstruction after B (task-B difficulty), and the median
    d_trans over the cell's runs (WorldModelsBenchmark's distance axis: summarize_results.py axis_value)."""

    def med(xs: list[Any]) -> float | None:
        xs = [float(v) for v in xs if finite(v)]
        return float(np.median(xs)) if xs else None

    out = []
    for cell in sorted({c for c, _ in values}, key=_cell_order):
        per_method = [med([r.get("rd") for r in values.get((cell, m), [])]) for m in axis_methods]
        difficulty = [med([r.get("reconBAfterB") for r in values.get((cell, m), [])]) for m in axis_methods]
        runs = [r for (c, _), rs in values.items() if c == cell for r in rs]
        out.append(
            {
                "cell": cell,
                "level": LEVEL_RANK.get(cell.split("-")[-1]),
                "rd": med(per_method),
                "dTrans": med([r.get("dTrans") for r in runs]),
                "taskBDifficulty": med(difficulty),
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
    drift = drift_rows(mine, seed_values)
    seeds_by_cell: dict[str, set[int]] = {}
    for rec in records:
        if rec.status.state == "completed" and rec.spec.cell:
            seeds_by_cell.setdefault(rec.spec.cell, set()).add(rec.spec.seed)
    runs_per_cell = {c: len(s) for c, s in seeds_by_cell.items()}
    return {
        "axisMethods": list(axis_methods),
        "axis": axes,
        "spearman": {who: _axis_spearman(axis) for who, axis in axes.items()},
        "rhoCalibration": rho_calibration(reference, runs_per_cell, axis_methods),
        "withoutFamily": without_family(axes, reference, runs_per_cell, axis_methods),
        "withinFamily": {who: within_family_spearman(axis) for who, axis in axes.items()},
        "drift": drift,
    }


def drift_rows(
    mine: dict[tuple[str, str], list[dict[str, Any]]], seed_values: dict[tuple[str, str], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The second finding's table: per family and method (fine-tuning, EWC), each cell's median encoder drift and PF,
    and the median of those cell medians, cells weighed equally; clt's and the seed's over the same cells (those clt
    has runs of). A median pooled over runs would lean on the cells with more runs: the seed ran 10 gym-max seeds
    beside 5 in every other cell, so its pooled gym median was gym-max's forgetting encoder."""
    rows = []
    for family in sorted({c.split("-")[0] for c, _ in mine}):
        cells = sorted({c for c, _ in mine if c.split("-")[0] == family}, key=lambda c: LEVEL_RANK.get(c[-3:], 0))
        for method in ("finetuning", "ewc"):
            row: dict[str, Any] = {"family": family, "method": method, "cells": cells}
            for who, source in (("clt", mine), ("seed", seed_values)):
                per_cell = {c: _cell_medians(source.get((c, method), [])) for c in cells}
                row[who] = {
                    q: (float(np.median(xs)) if (xs := [v[q] for v in per_cell.values() if v[q] is not None]) else None)
                    for q in ("encoderDrift", "pf")
                } | {"runs": sum(v["runs"] for v in per_cell.values()), "perCell": per_cell}
            rows.append(row)
    return rows


def _cell_medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        q: (float(np.median(xs)) if (xs := [float(r[q]) for r in runs if finite(r.get(q))]) else None)
        for q in ("encoderDrift", "pf")
    } | {"runs": len(runs)}


def without_family(
    axes: dict[str, list[dict[str, Any]]],
    reference: dict[tuple[str, str], list[dict[str, Any]]],
    runs_per_cell: dict[str, int],
    axis_methods: Sequence[str],
) -> dict[str, Any]:
    """Whether the first finding's comparison rests on one family: per family, clt's and the seed's Spearman rho
    over the same cells with that family's cells left out, and the seed's rho at clt's run count there
    (`rho_calibration`). Empty unless clt's cells span two families or more."""
    families = sorted({a["cell"].split("-")[0] for a in axes["clt"]})
    out: dict[str, Any] = {}
    if len(families) < 2:
        return out
    for family in families:
        kept = {who: [a for a in axes[who] if a["cell"].split("-")[0] != family] for who in ("clt", "seedSameCells")}
        out[family] = {
            "cells": [a["cell"] for a in kept["clt"]],
            "clt": _axis_spearman(kept["clt"]),
            "seedSameCells": _axis_spearman(kept["seedSameCells"]),
            "rhoCalibration": rho_calibration(
                reference, {c: k for c, k in runs_per_cell.items() if c.split("-")[0] != family}, axis_methods
            ),
        }
    return out


def _without_family_lines(without: dict[str, Any], names: dict[str, str]) -> list[str]:
    if not without:
        return []

    def rho(c: dict[str, Any]) -> str:
        return "-" if c["rho"] is None else f"rho {c['rho']:+.2f}, p {c['p']:.3f}"

    lines = [
        "Without one family: the same comparison with one family's cells left out, to see whether it rests on one "
        "family (a family whose cells an erratum makes incomparable with the seed's is read here without them):",
        "",
        "| cells | distance | clt | seed, same cells | seed at clt's runs per cell (5-95%) |",
        "|---|---|---|---|---|",
    ]
    for family, w in without.items():
        for key, name in names.items():
            cal = (w.get("rhoCalibration") or {}).get(key) or {}
            where = _inside(w["clt"][key]["rho"], cal)
            band = "-" if cal.get("low") is None else f"{cal['low']:+.2f} to {cal['high']:+.2f}"
            band += f" (clt {where})" if where else ""
            lines.append(
                f"| without {family} ({len(w['cells'])} cells) | {name} | {rho(w['clt'][key])} | "
                f"{rho(w['seedSameCells'][key])} | {band} |"
            )
    return [*lines, ""]


EXACT_ORDERS = 1_000_000
"""Within-family orders up to which the permutation p is enumerated exactly; Monte Carlo beyond."""


def within_family_spearman(axis: list[dict[str, Any]], draws: int = 100_000) -> dict[str, Any]:
    """The first finding at the unit the design makes: a family's cells share task A (its episodes and its model, in
    the seed's design and clt's), so nine cells are three clusters, not nine independent points. Per distance: the
    rank correlation of the axis RD with the distance among each family's own cells, pooled (ranks centred within
    each family, then Pearson over all of them: the mean of the families' Spearman rho when each has three untied
    cells), with its two-sided p over the orders that permute the distance only within families (all of them
    enumerated up to `EXACT_ORDERS`, seeded Monte Carlo beyond). Families with fewer than two usable cells drop
    out; None where nothing is left or nothing varies."""
    import math

    from scipy.stats import rankdata

    out: dict[str, Any] = {}
    for key in ("level", "dTrans", "taskBDifficulty"):
        groups: dict[str, list[tuple[float, float]]] = {}
        for a in axis:
            if a["rd"] is not None and a[key] is not None:
                groups.setdefault(a["cell"].split("-")[0], []).append((float(a["rd"]), float(a[key])))
        kept = [g for _, g in sorted(groups.items()) if len(g) >= 2]
        rx = [rankdata([p[0] for p in g]) - (len(g) + 1) / 2 for g in kept]
        ry = [rankdata([p[1] for p in g]) - (len(g) + 1) / 2 for g in kept]
        den = math.sqrt(sum(float((r**2).sum()) for r in rx) * sum(float((r**2).sum()) for r in ry))
        entry: dict[str, Any] = {"rho": None, "p": None, "families": len(kept), "cells": sum(map(len, kept))}
        if den == 0:
            out[key] = entry | {"pKind": None}
            continue
        rho = sum(float(a @ b) for a, b in zip(rx, ry, strict=True)) / den
        total = math.prod(math.factorial(len(g)) for g in kept)
        if total <= EXACT_ORDERS:  # every within-family order: the sum over families of each family's terms
            null = np.zeros(1)
            for a, b in zip(rx, ry, strict=True):
                null = np.add.outer(null, b[_orders(len(b))] @ a).ravel()
            kind = f"exact, all {total} within-family orders, two-sided"
        else:
            rng = np.random.default_rng(0)
            null = np.zeros(draws)
            for a, b in zip(rx, ry, strict=True):
                null += b[np.argsort(rng.random((draws, len(b))), axis=1)] @ a
            kind = f"Monte Carlo, {draws} within-family orders, two-sided"
        p = float(np.mean(np.abs(np.asarray(null) / den) >= abs(rho) - 1e-12))
        out[key] = entry | {"rho": rho, "p": p, "pKind": kind}
    return out


def _within_family_lines(within: dict[str, Any], names: dict[str, str]) -> list[str]:
    if not within:
        return []

    def rho(c: dict[str, Any]) -> str:
        families = f"{c['families']} {'family' if c['families'] == 1 else 'families'}"
        if c["rho"] is None:
            return f"- ({families})"
        return f"rho {c['rho']:+.2f}, p {c['p']:.3f} ({families}, {c['cells']} cells)"

    lines = [
        "Within families, the unit the design makes: a family's cells share task A (its episodes and model, in the "
        "seed's design and in clt's), so the cells are clusters, and the p-values above, which treat every order of "
        "the cells as equally likely, count them as independent. Here each distance is ranked against the axis RD "
        "only among a family's own cells (ranks centred per family, pooled: the mean of the families' Spearman rho "
        "when each has three untied cells), and p counts the orders that permute the distance within families only "
        "(216 with three families of three cells, so p cannot fall below 2/216):",
        "",
        "| distance | clt (its cells) | seed, same cells | seed, all its cells |",
        "|---|---|---|---|",
    ]
    for key, name in names.items():
        cols = [(within.get(who) or {}).get(key) for who in ("clt", "seedSameCells", "seedAllCells")]
        lines.append(f"| {name} | " + " | ".join("-" if c is None else rho(c) for c in cols) + " |")
    return [*lines, ""]


def _cell_order(cell: str) -> tuple[str, int]:
    return cell.split("-")[0], LEVEL_RANK.get(cell.split("-")[-1], 0)


def rho_calibration(
    reference: dict[tuple[str, str], list[dict[str, Any]]],
    runs_per_cell: dict[str, int],
    axis_methods: Sequence[str],
    draws: int = 2000,
) -> dict[str, Any]:
    """What clt's run count is worth for the first finding: the seed's Spearman rho over the cells of
    `runs_per_cell` when each cell keeps only that many of the seed's own seeds (drawn without replacement, seeded;
    every method's run of a drawn seed kept, as clt's methods share their seeds), per distance: median and 5th and
    95th percentiles over `draws`. Empty where fewer than three cells are asked or a cell has fewer of the seed's
    seeds than asked (the calibration is over exactly the cells clt's rho is over, or none)."""
    import zlib

    from scipy.stats import rankdata

    fields = ("rd", "dTrans", "reconBAfterB")
    cells, tables = [], []  # per cell: (field, method, seed) array of the seed's values, NaN where missing
    for cell in sorted(runs_per_cell, key=_cell_order):
        methods = sorted(m for c, m in reference if c == cell)
        seeds = sorted({int(r["seed"]) for m in methods for r in reference[(cell, m)] if finite(r.get("seed"))})
        if not methods or len(seeds) < runs_per_cell[cell]:
            return {}
        table = np.full((len(fields), len(methods), len(seeds)), np.nan)
        for i, m in enumerate(methods):
            for r in reference[(cell, m)]:
                if finite(r.get("seed")):
                    for k, field in enumerate(fields):
                        v = SEED_READ[field](r)
                        table[k, i, seeds.index(int(r["seed"]))] = float(v) if finite(v) else np.nan
        axis = np.asarray([m in axis_methods for m in methods])
        cells.append((cell, runs_per_cell[cell], axis))
        tables.append(table)
    if len(cells) < 3:
        return {}
    rng = np.random.default_rng(zlib.crc32("|".join(c for c, _, _ in cells).encode()))
    rd, dtrans, diff = (np.empty((draws, len(cells))) for _ in range(3))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN slice is a missing value, as in _cell_axis
        for j, ((_, k, axis), table) in enumerate(zip(cells, tables, strict=True)):
            pick = np.argsort(rng.random((draws, table.shape[2])), axis=1)[:, :k]  # k seeds per draw, no repeats
            sub = table[:, :, pick]  # (field, method, draw, k)
            rd[:, j] = np.nanmedian(np.nanmedian(sub[0][axis], axis=2), axis=0)
            dtrans[:, j] = np.nanmedian(sub[1].transpose(1, 0, 2).reshape(draws, -1), axis=1)
            diff[:, j] = np.nanmedian(np.nanmedian(sub[2][axis], axis=2), axis=0)
    levels = np.asarray([LEVEL_RANK.get(c.split("-")[-1], 0) for c, _, _ in cells], dtype=float)
    out: dict[str, Any] = {}
    for key, other in (("level", np.broadcast_to(levels, rd.shape)), ("dTrans", dtrans), ("taskBDifficulty", diff)):
        rhos = _rowwise_spearman(rd, other, rankdata)
        rhos = rhos[np.isfinite(rhos)]
        out[key] = {"median": None, "low": None, "high": None, "draws": 0}
        if rhos.size:
            low, median, high = (float(q) for q in np.quantile(rhos, [0.05, 0.5, 0.95]))
            out[key] = {"median": median, "low": low, "high": high, "draws": int(rhos.size)}
    return out | {"runsPerCell": {c: k for c, k, _ in cells}, "draws": draws}


def _rowwise_spearman(x: np.ndarray, y: np.ndarray, rankdata: Any) -> np.ndarray:
    """Spearman's rho of each row pair (average ranks, as `exact_spearman`); NaN where a row has a missing value or
    no spread."""
    ok = np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)
    rx = rankdata(np.where(ok[:, None], x, 0.0), axis=1)
    ry = rankdata(np.where(ok[:, None], y, 0.0), axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(all="ignore"):
        rho = (rx * ry).sum(axis=1) / den
    return np.where(ok & (den > 0), rho, np.nan)
