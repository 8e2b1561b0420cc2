"""Split cells: where the seed repository's stored runs of a (cell, method, quantity) fall in two groups, and what
three runs per cell can and cannot say about such a cell.

A split is the largest gap between consecutive sorted values, over the pooled within-group SD of the two groups it
leaves (`gap_statistic`). It counts when a sample of the same size from one normal distribution shows a larger
statistic with probability under `LEVEL` (`critical_value`, by seeded simulation): two modes, or a heavy tail; the
report says "split" and names neither. For each split, the minority group's share of the seed's runs, the chance that
three of the seed's own runs (drawn without replacement) contain none of it, how far one minority run moves a 3-run
mean, and how many of clt's runs lie on each side of the gap's midpoint, with Fisher's exact test of the two shares.
Three runs cannot detect a split themselves (one group would have a single run), so detection rests on the seed's 5
or 10 runs. Descriptive: it decides nothing.

Fit modes (`fit_modes`) apply the same rule to the models rather than to a method's runs: the held-out reconstruction
of each trained model (task A's after A, the final model's on B, B's from-scratch reference), pooled over a cell's
methods with one value per distinct model, so that a two-mode fit (a reconstruction plateau and a model that left
it) is seen across methods, and clt's models are counted in each group. A final model whose encoder task B left
untouched (encoder drift exactly 1: UG-MTM freezes it) is not a fit of B's frames and is left out of `reconBAfterB`.

Fit location (`fit_location`) looks for a shift rather than two groups: each of clt's models against the range of the
seed's models of the same cell and methods (below, inside, above), beside how many would lie outside by chance were
clt's models drawn from the seed's own distribution (2/(n+1) for a range of n exchangeable models), and per clt seed,
since a seed's models share its task-A model and its B reference and are not independent. Descriptive: no p-value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from cltoolkit.run.record import RunRecord
from cltoolkit.suites.wmf.reproduction.reference import QUANTITIES, finite, seed_drift

__all__ = [
    "FIT",
    "LEVEL",
    "RUNS",
    "critical_value",
    "fit_location",
    "fit_location_lines",
    "fit_mode_lines",
    "fit_modes",
    "gap_statistic",
    "split_cells",
    "split_lines",
]

LEVEL = 0.01
"""A split counts when one normal sample of the same size shows a larger gap statistic with probability under this."""
RUNS = 3
"""The runs per cell the statement is about (wmf's seeds 0-2)."""
_DRAWS = 20_000
FIT: dict[str, str] = {
    "reconAAfterA": "heldout_reconstruction_A_after_task_A",
    "reconBAfterB": "heldout_reconstruction_B_after_task_B",
    "reconBFromScratch": "heldout_reconstruction_B_from_scratch",
}
"""Fit quantity -> the seed's metric: held-out reconstruction of one trained model (clt record field, seed field)."""


def gap_statistic(values: Sequence[float] | np.ndarray) -> tuple[float, int] | None:
    """(largest gap between consecutive sorted values / pooled within-group SD of the two groups it leaves, the size
    of the lower group); None with fewer than 4 values or all equal. Infinite when both groups are constant."""
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n < 4 or x[0] == x[-1]:
        return None
    i = int(np.argmax(np.diff(x))) + 1
    gap = float(x[i] - x[i - 1])
    ss = sum(float(((g - g.mean()) ** 2).sum()) for g in (x[:i], x[i:]))
    s = math.sqrt(ss / (n - 2))
    return (math.inf if s == 0 else gap / s), i


@cache
def critical_value(n: int) -> float:
    """The (1 - LEVEL) quantile of `gap_statistic` over normal samples of size n (seeded; the same every call)."""
    x = np.sort(np.random.default_rng(n).standard_normal((_DRAWS, n)), axis=1)
    i = np.argmax(np.diff(x, axis=1), axis=1) + 1
    gap = x[np.arange(_DRAWS), i] - x[np.arange(_DRAWS), i - 1]
    k = np.arange(n)
    low = k[None, :] < i[:, None]
    ss = np.zeros(_DRAWS)
    for side in (low, ~low):
        cnt = side.sum(axis=1)
        mean = np.where(side, x, 0.0).sum(axis=1) / cnt
        ss += np.where(side, (x - mean[:, None]) ** 2, 0.0).sum(axis=1)
    return float(np.quantile(gap / np.sqrt(ss / (n - 2)), 1 - LEVEL))


def _split(values: Sequence[float]) -> tuple[np.ndarray, int, float] | None:
    """(the values sorted, the size of the lower group, the gap statistic) where they fall in two groups at `LEVEL`;
    None otherwise."""
    stat = gap_statistic(values)
    if stat is None or stat[0] <= critical_value(len(values)):
        return None
    return np.sort(np.asarray(values, dtype=float)), stat[1], stat[0]


def _group(x: np.ndarray) -> dict[str, Any]:
    return {"n": int(x.size), "mean": float(x.mean()), "min": float(x.min()), "max": float(x.max())}


def split_cells(records: Sequence[RunRecord], reference: dict[tuple[str, str], list[dict[str, Any]]]) -> dict[str, Any]:
    """Every (cell, quantity) split in the seed's stored runs, for the cells clt ran; methods whose seed values are
    identical (one shared task-A model) form one entry, whose clt runs are its first method's (the methods share
    that model in clt too)."""
    from scipy.stats import fisher_exact

    mine: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in records:
        if rec.status.state == "completed" and rec.spec.cell:
            mine.setdefault((rec.spec.cell, rec.spec.comparison), []).append(rec)
    found: dict[tuple[str, str, tuple[float, ...]], dict[str, Any]] = {}
    tested = 0
    for (cell, method), recs in sorted(mine.items()):
        seed_runs = reference.get((cell, method), [])
        for name, (field, read) in QUANTITIES.items():
            theirs = sorted(float(v) for m in seed_runs if finite(v := read(m)))
            key = (cell, name, tuple(theirs))
            if key in found:
                found[key]["methods"].append(method)
                continue
            tested += gap_statistic(theirs) is not None
            if (split := _split(theirs)) is None:
                continue
            x, i, t = split
            n = len(theirs)
            lower, upper = x[:i], x[i:]
            minority = "upper" if upper.size <= lower.size else "lower"
            k = min(lower.size, upper.size)
            midpoint = float((x[i - 1] + x[i]) / 2)
            ours = [float(v) for r in recs if finite(v := r.metrics.get(field))]
            ours_upper = sum(v > midpoint for v in ours)
            ours_minority = ours_upper if minority == "upper" else len(ours) - ours_upper
            p = None
            if ours:
                p = float(fisher_exact([[ours_minority, len(ours) - ours_minority], [k, n - k]]).pvalue)
            found[key] = {
                "cell": cell,
                "quantity": name,
                "methods": [method],
                "seedRuns": n,
                "statistic": t,
                "critical": critical_value(n),
                "lower": _group(lower),
                "upper": _group(upper),
                "midpoint": midpoint,
                "minority": minority,
                "minorityShare": k / n,
                "missedByThreeRuns": math.comb(n - k, RUNS) / math.comb(n, RUNS) if n >= RUNS else None,
                "shiftPerRun": float(upper.mean() - lower.mean()) / RUNS,
                "clt": {"n": len(ours), "minority": ours_minority},
                "fisherP": p,
            }
    splits = sorted(found.values(), key=lambda s: (s["cell"], s["quantity"], s["methods"]))
    return {
        "level": LEVEL,
        "tested": tested,
        "splits": splits,
        "rule": (
            "largest gap between consecutive sorted seed values over the pooled within-group SD, against its "
            f"{1 - LEVEL:.0%} quantile over normal samples of the same size ({_DRAWS} seeded draws)"
        ),
    }


def split_lines(rep: dict[str, Any]) -> list[str]:
    """The report's paragraph on split cells (Markdown)."""
    splits = rep["splits"]
    head = (
        f"Split cells: of {rep['tested']} distinct (cell, quantity) sets of the seed's stored runs, {len(splits)} fall "
        f"in two groups ({rep['rule']}; at this level about {rep['level'] * rep['tested']:.1f} would by chance). "
        "Two modes or a heavy tail alike: "
        f"{RUNS} runs cannot resolve such a cell. They estimate the minority group's share as 0, 1/3, 2/3 or 1, a "
        "single minority run moves their mean by a third of the distance between the groups, and whether their mean "
        "falls inside the seed's range mostly says which group they drew; what they can be compared on is the share "
        "(Fisher's exact test, clt's runs split at the gap's midpoint)."
    )
    if not splits:
        return [head, "", "No split cell."]
    lines = [
        head,
        "",
        "| cell | quantity | methods | seed groups: lower / upper (n, mean, range) | seed minority share "
        f"| {RUNS} seed runs miss it | one minority run moves a {RUNS}-run mean by | clt runs in the minority | "
        "Fisher p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in splits:
        lo, up = s["lower"], s["upper"]
        missed = "-" if s["missedByThreeRuns"] is None else f"{s['missedByThreeRuns']:.0%}"
        p = "-" if s["fisherP"] is None else f"{s['fisherP']:.2g}"
        lines.append(
            f"| {s['cell']} | {s['quantity']} | {', '.join(s['methods'])} | "
            f"{lo['n']}, {lo['mean']:.3g} [{lo['min']:.3g}, {lo['max']:.3g}] / "
            f"{up['n']}, {up['mean']:.3g} [{up['min']:.3g}, {up['max']:.3g}] | "
            f"{s['minority']} {s['minorityShare']:.0%} | {missed} | {s['shiftPerRun']:.3g} | "
            f"{s['clt']['minority']} of {s['clt']['n']} | {p} |"
        )
    return lines


def _models(pairs: Sequence[tuple[Any, Any]]) -> list[float]:
    """One value per distinct model, sorted: (seed, value) pairs, a pair repeated (methods sharing a model) once."""
    return sorted(v for _, v in {(seed, float(v)) for seed, v in pairs if finite(v)})


def fit_modes(records: Sequence[RunRecord], reference: dict[tuple[str, str], list[dict[str, Any]]]) -> dict[str, Any]:
    """Per cell clt ran and fit quantity (`FIT`): the seed's models pooled over the cell's methods, tested for two
    groups by `gap_statistic`; for each split the two groups, and clt's models on each side of the gap's midpoint
    with Fisher's exact test of the lower group's share."""
    from scipy.stats import fisher_exact

    cells = sorted({r.spec.cell for r in records if r.status.state == "completed" and r.spec.cell})
    found: list[dict[str, Any]] = []
    tested = 0
    for cell in cells:
        seed_runs = [m for (c, _), runs in sorted(reference.items()) if c == cell for m in runs]
        recs = [r for r in records if r.status.state == "completed" and r.spec.cell == cell]
        for field, theirs_field in FIT.items():
            b_fit = field == "reconBAfterB"
            theirs = _models(
                [(m.get("seed"), m.get(theirs_field)) for m in seed_runs if not b_fit or seed_drift(m) != 1]
            )
            ours = _models(
                [(r.spec.seed, r.metrics.get(field)) for r in recs if not b_fit or r.metrics.get("encoderDrift") != 1]
            )
            tested += gap_statistic(theirs) is not None
            if (split := _split(theirs)) is None:
                continue
            x, i, t = split
            n = len(theirs)
            midpoint = float((x[i - 1] + x[i]) / 2)
            low = sum(v < midpoint for v in ours)
            p = float(fisher_exact([[low, len(ours) - low], [i, n - i]]).pvalue) if ours else None
            found.append(
                {
                    "cell": cell,
                    "quantity": field,
                    "seedModels": n,
                    "statistic": t,
                    "critical": critical_value(n),
                    "lower": _group(x[:i]),
                    "upper": _group(x[i:]),
                    "midpoint": midpoint,
                    "clt": {"n": len(ours), "lower": low, "values": ours},
                    "fisherP": p,
                }
            )
    return {"level": LEVEL, "tested": tested, "splits": found}


def fit_mode_lines(rep: dict[str, Any]) -> list[str]:
    """The report's paragraph on fit modes (Markdown)."""
    splits = rep["splits"]
    head = (
        f"Fit modes: the held-out reconstruction of each trained model (task A's after A, the final model's on B, "
        "B's from-scratch reference), pooled over a cell's methods with one value per distinct model (methods that "
        f"share a task-A or reference model count it once), by the same two-group rule. Of {rep['tested']} (cell, "
        f"quantity) sets of the seed's models, {len(splits)} fall in two groups; a final model whose encoder task B "
        "left untouched (encoder drift exactly 1) is not a fit of B's frames and is left out. clt's models are "
        "counted on each side of the gap's midpoint (Fisher's exact test of the lower group's share). Where clt's and "
        "the seed's models sit in different groups, the cell's forgetting quantities compare different fits rather "
        "than methods."
    )
    if not splits:
        return [head, "", "No cell's models fall in two groups."]
    lines = [
        head,
        "",
        "| cell | fit | seed models: lower / upper (n, mean, range) | seed models in the lower group | clt models in "
        "the lower group | clt values | Fisher p |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in splits:
        lo, up, ours = s["lower"], s["upper"], s["clt"]
        p = "-" if s["fisherP"] is None else f"{s['fisherP']:.2g}"
        lines.append(
            f"| {s['cell']} | {s['quantity']} | {lo['n']}, {lo['mean']:.3g} [{lo['min']:.3g}, {lo['max']:.3g}] / "
            f"{up['n']}, {up['mean']:.3g} [{up['min']:.3g}, {up['max']:.3g}] | {lo['n']} of {s['seedModels']} | "
            f"{ours['lower']} of {ours['n']} | {', '.join(f'{v:.3g}' for v in ours['values'])} | {p} |"
        )
    return lines


def _fit_models(
    pairs: Sequence[tuple[Any, str, Any]],
) -> dict[tuple[Any, float], set[str]]:
    """(seed, value) of each distinct model -> the methods that have it, from (seed, method, value) triples."""
    out: dict[tuple[Any, float], set[str]] = {}
    for seed, method, v in pairs:
        if finite(v):
            out.setdefault((seed, float(v)), set()).add(method)
    return out


def _spread(values: Sequence[float]) -> dict[str, Any]:
    x = np.asarray(values, dtype=float)
    return {"n": int(x.size), "median": float(np.median(x)), "min": float(x.min()), "max": float(x.max())}


def fit_location(
    records: Sequence[RunRecord], reference: dict[tuple[str, str], list[dict[str, Any]]]
) -> dict[str, Any]:
    """Per cell clt ran and fit quantity (`FIT`): each of clt's distinct models (a model several methods share counted
    once) below, inside or above the range of the seed's distinct models of the same cell and methods; the count a
    draw from the seed's own distribution would put outside by chance (the sum of 2/(n+1)); the same per clt seed.
    A final model whose encoder task B left untouched (encoder drift exactly 1) is left out of `reconBAfterB`, the
    seed's and clt's alike."""
    cells = sorted({r.spec.cell for r in records if r.status.state == "completed" and r.spec.cell})
    rows: list[dict[str, Any]] = []
    for cell in cells:
        recs = [r for r in records if r.status.state == "completed" and r.spec.cell == cell]
        for field, theirs_field in FIT.items():
            b_fit = field == "reconBAfterB"
            theirs = _fit_models(
                [
                    (m.get("seed"), method, m.get(theirs_field))
                    for (c, method), runs in sorted(reference.items())
                    if c == cell
                    for m in runs
                    if not b_fit or seed_drift(m) != 1
                ]
            )
            ours = _fit_models(
                [
                    (r.spec.seed, r.spec.comparison, r.metrics.get(field))
                    for r in recs
                    if not b_fit or r.metrics.get("encoderDrift") != 1
                ]
            )
            sides = {"below": 0, "inside": 0, "above": 0}
            by_seed: dict[Any, dict[str, int]] = {}
            chance = 0.0
            for (seed, v), methods in sorted(ours.items()):
                ref = [w for (_, w), theirs_methods in theirs.items() if theirs_methods & methods]
                if not ref:
                    continue
                side = "below" if v < min(ref) else "above" if v > max(ref) else "inside"
                sides[side] += 1
                by_seed.setdefault(seed, {"below": 0, "inside": 0, "above": 0})[side] += 1
                chance += 2 / (len(ref) + 1)
            compared = sum(sides.values())
            if not compared:
                continue
            rows.append(
                {
                    "cell": cell,
                    "quantity": field,
                    "seed": _spread([w for _, w in theirs]),
                    "clt": _spread([v for _, v in ours]),
                    "compared": compared,
                    **sides,
                    "outsideByChance": chance,
                    "bySeed": [{"seed": s, **c} for s, c in sorted(by_seed.items())],
                }
            )
    return {"rows": rows}


def fit_location_lines(rep: dict[str, Any]) -> list[str]:
    """The report's paragraph on fit location (Markdown)."""
    rows = rep["rows"]
    head = (
        "Fit location: where each of clt's trained models lies against the range of the seed's models of the same "
        "cell and methods (held-out reconstruction, one value per distinct model; a model several methods share is "
        "compared once, with the seed's models of those methods; a final model whose encoder task B left untouched is "
        "left out of the B fit), below, inside or above it. The fit-mode rule above looks for two groups among the "
        "seed's models; this looks for a shift of clt's. 'By chance': how many would lie outside were clt's models "
        "drawn from the seed's own distribution (a range of n exchangeable models misses a new one with chance "
        "2/(n+1)). No p-value is given: a clt seed's models share its task-A model and its B reference, so the "
        "per-seed column (below/inside/above) shows whether a shift is one seed's. Where clt's fits lie apart from the "
        "seed's, the forgetting quantities built on them (FT on the B reference, PF and RD on the models) compare "
        "different fits as well as methods."
    )
    if not rows:
        return [head, "", "No model to compare."]
    lines = [
        head,
        "",
        "| cell | fit | seed models (n, median, range) | clt models (n, median, range) | below / inside / above | "
        "outside by chance | per clt seed (below/inside/above) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        theirs, ours = r["seed"], r["clt"]
        per_seed = ", ".join(f"{s['seed']}: {s['below']}/{s['inside']}/{s['above']}" for s in r["bySeed"])
        lines.append(
            f"| {r['cell']} | {r['quantity']} | {theirs['n']}, {theirs['median']:.3g} [{theirs['min']:.3g}, "
            f"{theirs['max']:.3g}] | {ours['n']}, {ours['median']:.3g} [{ours['min']:.3g}, {ours['max']:.3g}] | "
            f"{r['below']} / {r['inside']} / {r['above']} of {r['compared']} | {r['outsideByChance']:.1f} | "
            f"{per_seed} |"
        )
    return lines
