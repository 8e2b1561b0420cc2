"""wmf analysis (WorldModelsBenchmark's): per cell, median [min, max] per method of every metric, PF and RD side by side
with encoder drift beside PF; exact paired permutation comparisons of the declared method pairs (per cell and pooled
over cells, Holm over the declared family of pooled tests); Spearman correlations across cells of forgetting (median RD)
with the labelled distance level, with d_trans and with task-B difficulty. Descriptive: methods are characterised,
not ranked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cltoolkit.components import NUMBER_OR_NULL, Analysis, ValueKind
from cltoolkit.errors import InputError
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import replicate_key
from cltoolkit.suites.wmf.metrics import METRICS
from cltoolkit.suites.wmf.models import WmfProtocol
from cltoolkit.suites.wmf.reproduction.seedstats import by_cell_and_comparison, numbers_by_seed, record_number

if TYPE_CHECKING:
    from cltoolkit.registry import Registries

__all__ = ["WmfAnalysis"]

COLUMNS = (
    "pf",
    "rd",
    "encoderDrift",
    "wmf",
    "wmfRdShare",
    "ft",
    "taskAFitGain",
    "reconAAfterA",
    "reconAAfterB",
    "reconBAfterB",
    "reconBFromScratch",
    "nllAAfterA",
    "nllAAfterB",
    "nllARandomInit",
    "dParam",
    "dTrans",
)
LEVELS = {"min": 1, "med": 2, "max": 3}
FIXED_IN_CODE = (
    "ConvVAE: encoder kernels 4 (stride 2), decoder kernels 5, 5, 6, 6 (stride 2; World Models' decoder), ReLU, "
    "sigmoid output; squared error summed over pixels",
    "Adam betas (0.9, 0.999), eps 1e-8; no gradient clipping",
    "UG-MTM uncertainty network Linear(z+a, hidden) - ReLU - Dropout - Linear(hidden, hidden); its MSE calibration "
    "term is added to the loss with weight 1",
    "UG-MTM threshold network Linear(window, 32) - ReLU - Linear(32, 1) - sigmoid",
    "Progressive column input [z, a, h_previous column]; its own prior head",
)


def _fixed_in_code(protocol: WmfProtocol, regs: Registries) -> list[str]:
    """FIXED_IN_CODE, with the decoder and progressive-column lines as this protocol's options build them (the
    progressive line from the comparisons whose registered method is progressive nets or builds on it)."""
    from cltoolkit.suites.wmf.methods import ProgressiveNets

    items = list(FIXED_IN_CODE)
    if protocol.model.decoder == "2x2-crop":
        items[0] = (
            "ConvVAE: encoder kernels 4 (stride 2); decoder Linear(latent, 4 c4) as (c4, 2, 2), transposed kernels 5, "
            "5, 6, 6 (stride 2) to 80 x 80, the centre 64 x 64 crop (WorldModelsBenchmark's decoder), ReLU, sigmoid "
            "output; squared error summed over pixels"
        )
    methods = regs.method
    lateral = {
        dict(c.hyperparameters).get("lateral")
        for c in protocol.comparisons
        if c.method in methods and issubclass(methods.get(c.method), ProgressiveNets)
    }
    if "shared-state" in lateral:
        items[-1] = (
            "Progressive columns share one hidden state: the frozen column runs on it without gradient and reaches "
            "the new column through a learned Linear(h, h); the new column's own prior head"
        )
    return items


_value = record_number


def _spread(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None}
    a = np.asarray(values)
    return {"n": int(a.size), "median": float(np.median(a)), "min": float(a.min()), "max": float(a.max())}


def _spearman(x: list[float], y: list[float]) -> dict[str, Any]:
    """Spearman's rho across cells (scipy) with its two-sided permutation p, exact over all n! orders of the cells
    (n <= 10; Monte Carlo beyond, labelled): scipy's t approximation is wrong at 3 or 9 cells (p = 0 for rho = 1
    with 3 cells, where the exact p is 1/3)."""
    from scipy.stats import spearmanr

    from cltoolkit.suites.wmf.reproduction.findings import exact_spearman

    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a is not None and b is not None]
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    if len(pairs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:  # too few cells, or one side constant: undefined
        return {"rho": None, "p": None, "pMethod": None, "cells": len(pairs)}
    rho = float(spearmanr(xs, ys).statistic)
    exact = exact_spearman(xs, ys) if np.isfinite(rho) else {"p": None, "pKind": None}
    return {
        "rho": rho if np.isfinite(rho) else None,
        "p": exact["p"],
        "pMethod": None if exact["pKind"] is None else f"permutation ({exact['pKind']})",
        "cells": len(pairs),
    }


def _evaluation_sizes(protocol: Any, records: Sequence[RunRecord]) -> dict[str, Any]:
    """Realized evaluation-set sizes against the declared ones. A set is drawn from the held-out episodes and is
    smaller than declared when they hold fewer transitions (MiniGrid episodes end at the environment's own step
    limit); every shortfall is listed by run. Records made before the sizes were recorded are counted apart."""
    ev = protocol.evaluation
    declared = {
        "transitionsA": ev.transitions,
        "fisherTransitions": ev.fisherTransitions,
        "framesA": ev.reconstructionFrames,
        "framesB": ev.reconstructionFrames,
    }
    shortfalls: list[dict[str, Any]] = []
    unrecorded: list[str] = []
    for rec in sorted(records, key=lambda r: r.runId):
        sizes = rec.metrics.get("evaluationSizes")
        if not isinstance(sizes, dict):
            unrecorded.append(rec.runId)
            continue
        for key, want in declared.items():
            got = sizes.get(key)
            if isinstance(got, int) and got < want:
                shortfalls.append({"run": rec.runId, "set": key, "realized": got, "declared": want})
    return {
        "declared": declared,
        "recorded": len(records) - len(unrecorded),
        "notRecorded": unrecorded,
        "shortfalls": shortfalls,
    }


def _reproduction(protocol: Any, records: Sequence[RunRecord]) -> dict[str, Any]:
    """The comparison with the seed repository's runs, where the protocol names them."""
    if not getattr(protocol, "reference", None):
        return {}
    from cltoolkit.project import find_project
    from cltoolkit.suites.wmf.reproduction import reference as ref
    from cltoolkit.suites.wmf.reproduction.modes import fit_location, fit_modes, split_cells

    path = find_project().root / protocol.reference
    if not path.is_file():
        raise InputError(
            f"{protocol.id}: /reference names {protocol.reference}, which is not in the project ({path}); copy it "
            "there (the seed's stored runs ship in this repository's reference/ folder)"
        )
    seed_runs = ref.load_reference(path)
    rep = ref.reproduction(records, seed_runs)
    rep["tightness"] = ref.tightness(rep)
    rep["byConstruction"] = ref.by_construction(records)
    rep["rankingCalibration"] = ref.ranking_calibration(seed_runs, sorted(rep["rdRankings"]))
    rep["perCell"] = ref.per_cell(rep)
    rep["splitCells"] = split_cells(records, seed_runs)
    rep["fitModes"] = fit_modes(records, seed_runs)
    rep["fitLocation"] = fit_location(records, seed_runs)
    out: dict[str, Any] = {"reproduction": {"source": protocol.reference, **rep}}
    if protocol.seedAnalyses is not None:
        from cltoolkit.suites.wmf.reproduction.findings import findings

        out["seedFindings"] = findings(records, seed_runs, protocol.seedAnalyses.axisMethods)
    return out


PAIR_P_TESTS = "sign-flip permutation test of the mean paired difference (H0: symmetric about 0), two-sided"
"""What a declared method pair's p tests (a mean-type test, whatever the declared aggregate)."""


class WmfAnalysis(Analysis[WmfProtocol]):
    def expected_values(self, protocol: WmfProtocol, record: RunRecord) -> dict[str, ValueKind]:
        """Each declared metric's record field: a finite number, or null where the run did not measure it."""
        return {METRICS[m.id].key: NUMBER_OR_NULL for m in protocol.metrics if m.id in METRICS}

    def replicates(
        self, protocol: WmfProtocol, records: Sequence[RunRecord], metric: str, comparison: str, scope: str
    ) -> dict[str, dict[str, float]]:
        key = METRICS[metric].key
        out: dict[str, float] = {}
        for rec in records:
            if rec.spec.comparison == comparison:
                value = _value(rec, key)
                if value is not None:
                    out[replicate_key(rec.spec.seed, rec.spec.order, rec.spec.cell)] = value
        return {scope: out}

    def summaries(self, protocol: WmfProtocol, records: Sequence[RunRecord]) -> dict[str, Any]:
        from cltoolkit.stats.multiplicity import holm
        from cltoolkit.stats.paired import sign_flip_p

        comps = [c.id for c in protocol.comparisons]
        by = by_cell_and_comparison(records)
        cells: dict[str, Any] = {}
        present = [c for c in protocol.cell_ids() if any(k[0] == c for k in by)]  # a stage may run some cells
        for cell in present:
            cells[cell] = {
                comp: {
                    key: _spread([v for r in by.get((cell, comp), []) if (v := _value(r, key)) is not None])
                    for key in COLUMNS
                }
                for comp in comps
            }
        pairs = []
        for pair in protocol.methodPairs:
            per_cell: dict[str, Any] = {}
            pooled: list[float] = []
            by_cluster: dict[str, list[float]] = {}
            unit = protocol.analysis.clusters
            for cell in present:
                a = numbers_by_seed(by.get((cell, pair.method), []), pair.metric)
                b = numbers_by_seed(by.get((cell, pair.reference), []), pair.metric)
                by_seed = {s: a[s] - b[s] for s in sorted(a) if s in b}
                diffs = list(by_seed.values())
                pooled.extend(diffs)
                if unit is not None:  # the declared unit of analysis: one pooled value per cluster
                    for s, diff in by_seed.items():
                        by_cluster.setdefault(unit.cluster_of(s, None, cell), []).append(diff)
                if diffs:
                    p = sign_flip_p(np.asarray(diffs)).p  # exact: n is the seeds of one cell
                    per_cell[cell] = {
                        "n": len(diffs),
                        "medianDifference": float(np.median(diffs)),
                        "p": p,
                        "pTests": PAIR_P_TESTS,
                        "pFloor": 2.0 / 2 ** len(diffs),
                    }
            entry: dict[str, Any] = {
                "method": pair.method,
                "reference": pair.reference,
                "metric": pair.metric,
                "perCell": per_cell,
                "pooled": None,
            }
            if unit is not None:
                pooled = [float(np.mean(by_cluster[c])) for c in sorted(by_cluster)]
            if pooled:
                rng = np.random.default_rng(protocol.analysis.permutation.seed)
                perm = sign_flip_p(
                    np.asarray(pooled),
                    exact_up_to=protocol.analysis.exact_up_to(),
                    draws=protocol.analysis.permutation.monteCarloDraws,
                    rng=rng,
                )
                entry["pooled"] = {
                    "n": len(pooled),
                    "unit": "replicate (cell, seed)" if unit is None else "cluster (declared unit of analysis)",
                    "medianDifference": float(np.median(pooled)),
                    "meanDifference": float(np.mean(pooled)),
                    "p": perm.p,
                    "pTests": PAIR_P_TESTS,
                    "alternative": "two-sided",
                    "exact": perm.exact,
                    "draws": perm.draws,
                    "se": perm.se,
                }
            pairs.append(entry)
        tested = [e for e in pairs if e["pooled"] is not None]
        if tested:
            for e, adj in zip(tested, holm([e["pooled"]["p"] for e in tested]), strict=True):
                e["pooled"]["pHolm"] = float(adj)
        correlations: dict[str, Any] = {}
        for comp in comps:
            rd = [cells[c][comp]["rd"]["median"] for c in present]
            level = [float(LEVELS[c.split("-", 1)[1]]) for c in present]
            d_trans = [cells[c][comp]["dTrans"]["median"] for c in present]
            from_scratch = [cells[c][comp]["reconBFromScratch"]["median"] for c in present]
            correlations[comp] = {
                "distanceLevel": _spearman(rd, level),
                "dTrans": _spearman(rd, d_trans),
                "taskBFromScratch": _spearman(rd, from_scratch),
            }
        from cltoolkit.suites.wmf.reproduction.seedstats import adequacy, fingerprint, seed_analyses

        extra: dict[str, Any] = {"adequacy": adequacy(protocol, records)}
        if protocol.fingerprint is not None:
            extra["fingerprint"] = fingerprint(protocol, records)
        if protocol.seedAnalyses is not None:
            extra["seedAnalyses"] = seed_analyses(protocol, records)
        return {
            "cells": cells,
            **extra,
            "methodPairs": pairs,
            "spearmanRd": correlations,
            "holmFamily": [f"{e['method']} vs {e['reference']} on {e['metric']}" for e in tested],
            "evaluationSizes": _evaluation_sizes(protocol, records),
            **_reproduction(protocol, records),
        }

    def report_markdown(self, protocol: WmfProtocol, records: Sequence[RunRecord], summaries: dict[str, Any]) -> str:
        def fmt(s: dict[str, Any]) -> str:
            if not s or s.get("median") is None:
                return "null"
            return f"{s['median']:.3g} [{s['min']:.3g}, {s['max']:.3g}]"

        lines = [
            "## Forgetting per cell (median [min, max] over seeds)",
            "",
            "PF and RD are computed in the post-A latent basis and cannot see the encoder; encoder drift "
            "(held-out A reconstruction after B / after A) is beside them. WMF = 0.4 PF + 0.4 RD (PIS withdrawn); "
            "RD share = |0.4 RD| / (|0.4 PF| + |0.4 RD|).",
            "",
        ]
        lines.append(
            "| cell | method | n | PF | RD | encoder drift | WMF | RD share | FT | task-A fit gain | recon A after A |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for cell, per in summaries.get("cells", {}).items():
            for comp, s in per.items():
                lines.append(
                    f"| {cell} | {comp} | {s['pf']['n']} | {fmt(s['pf'])} | {fmt(s['rd'])} | {fmt(s['encoderDrift'])} "
                    "| "
                    f"{fmt(s['wmf'])} | {fmt(s['wmfRdShare'])} | {fmt(s['ft'])} | {fmt(s['taskAFitGain'])} | "
                    f"{fmt(s['reconAAfterA'])} |"
                )
        lines += [
            "",
            "## Declared method pairs (paired sign-flip permutation; Holm over the pooled tests)",
            "",
            f"p: {PAIR_P_TESTS}; the median difference beside it is descriptive.",
            "",
            "| pair | metric | pooled n | median diff | p (mean, two-sided) | p (Holm) | per cell: median diff (p, "
            "floor) |",
            "|---|---|---|---|---|---|---|",
        ]
        for e in summaries.get("methodPairs", []):
            pooled = e["pooled"] or {}
            cells = "; ".join(
                f"{c}: {v['medianDifference']:.3g} ({v['p']:.3g}, {v['pFloor']:.3g})" for c, v in e["perCell"].items()
            )
            lines.append(
                f"| {e['method']} - {e['reference']} | {e['metric']} | {pooled.get('n', 0)} | "
                f"{pooled.get('medianDifference', float('nan')):.3g} | {pooled.get('p', float('nan')):.3g} | "
                f"{pooled.get('pHolm', float('nan')):.3g} | {cells} |"
            )
        lines += [
            "",
            "## Does forgetting follow distance? (Spearman across cells of median RD)",
            "",
            "| method | labelled level | d_trans | task-B from-scratch reconstruction (not the seed's task-B "
            "difficulty) |",
            "|---|---|---|---|",
        ]
        for comp, c in summaries.get("spearmanRd", {}).items():
            cols = []
            for k in ("distanceLevel", "dTrans", "taskBFromScratch"):
                if k not in c:  # a results block written before the rename
                    k = "taskBDifficulty"
                rho = c[k]["rho"]
                exact = str(c[k].get("pMethod") or "").startswith("permutation (exact")
                p_word = "exact p" if exact else "p (t approximation)" if "pMethod" not in c[k] else "p"
                cols.append("null" if rho is None else f"{rho:.2f} ({p_word} {c[k]['p']:.2g}, {c[k]['cells']} cells)")
            lines.append(f"| {comp} | " + " | ".join(cols) + " |")
        lines += [
            "",
            "p: two-sided permutation p of Spearman's rho, exact over all n! orders of the n cells (scipy's t "
            "approximation, used before, is wrong at 3 to 9 cells).",
        ]
        from cltoolkit.suites.wmf.reproduction.seedstats import adequacy_lines, fingerprint_lines, seed_lines

        if summaries.get("fingerprint"):
            lines += ["", *fingerprint_lines(summaries["fingerprint"])]
        if summaries.get("adequacy"):
            lines += ["", *adequacy_lines(summaries["adequacy"])]
        if summaries.get("seedAnalyses"):
            lines += ["", *seed_lines(summaries["seedAnalyses"])]
        lines += ["", "## Fixed in code, not protocol fields (`cltoolkit/suites/wmf/world.py`)", ""]
        lines += [f"- {item}" for item in _fixed_in_code(protocol, self.project_regs())]
        if summaries.get("reproduction"):
            from cltoolkit.suites.wmf.reproduction.reference import report_lines

            lines += ["", *report_lines(summaries["reproduction"])]
            if summaries["reproduction"].get("splitCells"):
                from cltoolkit.suites.wmf.reproduction.modes import split_lines

                lines += [*split_lines(summaries["reproduction"]["splitCells"]), ""]
            if summaries["reproduction"].get("fitModes"):
                from cltoolkit.suites.wmf.reproduction.modes import fit_mode_lines

                lines += [*fit_mode_lines(summaries["reproduction"]["fitModes"]), ""]
            if summaries["reproduction"].get("fitLocation"):
                from cltoolkit.suites.wmf.reproduction.modes import fit_location_lines

                lines += [*fit_location_lines(summaries["reproduction"]["fitLocation"]), ""]
        if summaries.get("seedFindings"):
            from cltoolkit.suites.wmf.reproduction.findings import findings_lines

            lines += ["", *findings_lines(summaries["seedFindings"])]
        sizes = summaries.get("evaluationSizes")
        if sizes:
            declared = ", ".join(f"{k} {v}" for k, v in sizes["declared"].items())
            lines += ["", "## Realized evaluation-set sizes", "", f"Declared: {declared}."]
            if sizes["notRecorded"]:
                lines.append(f"{len(sizes['notRecorded'])} records do not record their sizes.")
            if sizes["shortfalls"]:
                lines += [
                    f"Sets smaller than declared ({len(sizes['shortfalls'])}; the held-out episodes hold fewer "
                    "transitions):",
                    "",
                    "| run | set | realized | declared |",
                    "|---|---|---|---|",
                ]
                lines += [
                    f"| {e['run']} | {e['set']} | {e['realized']} | {e['declared']} |" for e in sizes["shortfalls"]
                ]
            else:
                lines.append(f"Every one of the {sizes['recorded']} records that record them has the declared sizes.")
        return "\n".join(lines) + "\n"

    def headline(self, protocol: WmfProtocol, summaries: dict[str, Any]) -> list[str]:
        """Training adequacy in words, for the top of the report."""
        from cltoolkit.suites.wmf.reproduction.seedstats import adequacy_headline

        return adequacy_headline(summaries["adequacy"]) if summaries.get("adequacy") else []

    def figures(self, protocol: WmfProtocol, records: Sequence[RunRecord], summaries: dict[str, Any]) -> list[Any]:
        from matplotlib.figure import Figure

        comps = [c.id for c in protocol.comparisons]
        fig = Figure(figsize=(4.0 * len(protocol.families), 3.6))
        axes = fig.subplots(1, len(protocol.families), squeeze=False)[0]
        for ax, family in zip(axes, protocol.families, strict=True):
            for i, comp in enumerate(comps):
                pts = [
                    (_value(r, "encoderDrift"), _value(r, "pf"))
                    for r in records
                    if r.spec.comparison == comp and (r.spec.cell or "").startswith(f"{family.id}-")
                ]
                pts = [p for p in pts if p[0] is not None and p[1] is not None]
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.scatter(np.log10(np.asarray(xs)), ys, s=14, alpha=0.75, color=f"C{i}", label=comp)
            ax.axhline(0, color="grey", lw=0.7)
            ax.axvline(0, color="grey", lw=0.7)
            ax.set_xlabel("log10 encoder drift (recon A after B / after A)")
            ax.set_ylabel("PF (nats)")
            ax.set_title(family.id, fontsize=9)
        for ax in axes:  # the legend on the first family with runs (a stage may not have run every family yet)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
                break
        fig.tight_layout()
        return [("PF (latent, fixed basis) against encoder drift (pixels), one point per run, per family", fig)]
