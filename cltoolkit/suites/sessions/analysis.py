"""Sessions analysis: one row per evaluation set (held-out unit, OOD axis, estimand), both models' run-level MAE
and their paired difference, with row counts and independent-unit counts kept apart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cltoolkit import stats
from cltoolkit.components import Analysis, Metric
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import replicate_key
from cltoolkit.suites.sessions.models import SessionsProtocol

__all__ = ["SessionsAnalysis"]


def _json(metrics: dict[str, Any]) -> Any:
    """A record's metrics as the driver wrote them (nested JSON, read by key)."""
    return metrics


def _metric_values(records: Sequence[RunRecord], measure: type[Metric], comparison: str) -> dict[str, float]:
    """Replicate key -> the metric's value (`Metric.compute`) for the comparison's runs that measured it."""
    out = {}
    for rec in records:
        if rec.spec.comparison == comparison and (value := measure.compute(rec)) is not None:
            out[replicate_key(rec.spec.seed, rec.spec.order, rec.spec.cell)] = value
    return out


def _pair(protocol: SessionsProtocol, metric: str) -> tuple[str, str] | None:
    for gate in protocol.gates:
        if gate.metric == metric and gate.reference is not None:
            return gate.method, gate.reference
    comps = [c.id for c in protocol.comparisons]
    return (comps[0], comps[1]) if len(comps) >= 2 else None


class SessionsAnalysis(Analysis[SessionsProtocol]):
    """The matrix of estimands of seed 003: which unit was held out, what varied, what the number estimates."""

    def replicates(
        self, protocol: SessionsProtocol, records: Sequence[RunRecord], metric: str, comparison: str, scope: str
    ) -> dict[str, dict[str, float]]:
        return {"aggregate": _metric_values(records, self.project_regs().metric.get(metric), comparison)}

    def summaries(self, protocol: SessionsProtocol, records: Sequence[RunRecord]) -> dict[str, Any]:
        plan = protocol.analysis
        sets = []
        for es in protocol.evaluationSets:
            metric = next((m.id for m in protocol.metrics if m.evaluationSet == es.id), None)
            if metric is None:
                continue
            manifests = [r.splits[es.id] for r in records if es.id in r.splits]
            per_method = {}
            for comp in protocol.comparisons:
                vals = _metric_values(records, self.project_regs().metric.get(metric), comp.id)
                if not vals:
                    continue
                x = np.array(list(vals.values()))
                entry: dict[str, Any] = {
                    "values": vals,
                    "aggregate": stats.aggregate(
                        x, plan.aggregate, higher_is_better=False, tail_fraction=plan.tailFraction
                    ),
                }
                if x.size >= 2:
                    t = stats.t_interval(x, plan.alpha)
                    entry["meanInterval"] = [t.low, t.high]
                per_method[comp.id] = entry
            row: dict[str, Any] = {
                "id": es.id,
                "label": es.label,
                "heldOutUnit": es.heldOutUnit,
                "varies": list(es.varies),
                "estimand": es.estimand,
                "metric": metric,
                "perMethod": per_method,
            }
            if manifests:
                man: list[Any] = manifests
                row["rows"] = {
                    "test": sorted({m["rows"]["test"] for m in man}),
                    "train": sorted({m["rows"]["train"] for m in man}),
                }
                row["independentUnits"] = {
                    "test": sorted({m["independentUnits"]["test"] for m in man}),
                    "train": sorted({m["independentUnits"]["train"] for m in man}),
                    "unit": man[0]["unit"] if man[0]["unit"] != "row" else "row (sessions touched counted)",
                }
            pair = _pair(protocol, metric)
            if pair is not None:
                row["contrast"] = self._contrast(
                    protocol, records, self.project_regs().metric.get(metric), es.id, *pair
                )
            sets.append(row)
        # a seed's sessions are simulated from the seed alone, so every comparison's record of that seed carries the
        # same sessions: each seed's sessions count once
        per_seed = {r.spec.seed: r for r in sorted(records, key=lambda r: r.runId) if "sessionEffects" in r.metrics}
        effects = (
            {
                cohort: np.concatenate(
                    [np.asarray(_json(r.metrics)["sessionEffects"][cohort]) for r in per_seed.values()]
                )
                for cohort in ("main", "shifted")
            }
            if per_seed
            else {}
        )
        return {
            "aggregate": {
                "name": plan.aggregate,
                "tailFraction": plan.tailFraction if plan.aggregate == "cvar" else None,
            },
            "evaluationSets": sets,
            "sessionEffects": {
                c: {"mean": float(v.mean()), "sd": float(v.std(ddof=1)), "n": int(v.size), "unit": "unique session"}
                for c, v in effects.items()
            },
            "note": "Each row is a different estimand; a random transition split measures within-session "
            "interpolation, never transfer to new sessions.",
        }

    @staticmethod
    def _contrast(
        protocol: SessionsProtocol, records: Sequence[RunRecord], measure: type[Metric], set_id: str, a: str, b: str
    ) -> dict[str, Any]:
        va, vb = _metric_values(records, measure, a), _metric_values(records, measure, b)
        keys = sorted(set(va) & set(vb))
        hashes: dict[str, set[str]] = {}
        for rec in records:
            if rec.spec.comparison in (a, b) and isinstance(rec.metrics.get("evaluations"), dict):
                key = replicate_key(rec.spec.seed, rec.spec.order, rec.spec.cell)
                hashes.setdefault(key, set()).add(_json(rec.metrics)["evaluations"][set_id]["manifestSha256"])
        out: dict[str, Any] = {
            "method": a,
            "reference": b,
            "differences": {k: va[k] - vb[k] for k in keys},
            "identicalRows": all(len(hashes.get(k, ())) == 1 for k in keys),
        }
        d = np.array([va[k] - vb[k] for k in keys])
        if d.size >= 2:
            plan = protocol.analysis
            t = stats.two_sided_t(d, 0.0, plan.alpha)
            wil = stats.wilcoxon_test(d, 0.0)
            perm = stats.sign_flip_p(
                d,
                0.0,
                exact_up_to=plan.exact_up_to(),
                draws=plan.permutation.monteCarloDraws,
                rng=np.random.default_rng(plan.permutation.seed),
            )
            out.update(
                {
                    "n": int(d.size),
                    "estimate": t.estimate,
                    "interval": [t.low, t.high],
                    "tP": None if t.degenerate else t.p,
                    "permutationP": perm.p,
                    "permutationExact": perm.exact,
                    "permutationDraws": perm.draws,
                    "permutationSE": perm.se,
                    "alternative": "two-sided",
                    "wilcoxonP": None if wil is None else wil.p,
                    "wilcoxonMethod": None if wil is None else wil.method,
                    "sdDifference": float(d.std(ddof=1)),
                }
            )
        return out

    def report_markdown(
        self, protocol: SessionsProtocol, records: Sequence[RunRecord], summaries: dict[str, Any]
    ) -> str:
        sets = summaries.get("evaluationSets", [])
        if not sets:
            return ""
        comps = list(sets[0]["perMethod"])
        agg = summaries["aggregate"]["name"]
        lines = [
            "## Estimands side by side (one row per evaluation set)",
            "",
            f"Run-level MAE ({agg} over runs; declared aggregate). Each row measures a different estimand: only the "
            "held-out unit and the varied factor say what a number generalizes over.",
            "",
            "| evaluation set | held-out unit | varies (OOD axis) | estimand | test rows | test units | "
            + " | ".join(f"{c} MAE" for c in comps)
            + " | difference [95% t CI] | exact permutation p |",
            "|---|---|---|---|---|---|" + "---|" * len(comps) + "---|---|",
        ]
        for s in sets:
            c = s.get("contrast", {})
            diff = (
                f"{c['method']} - {c['reference']}: {c['estimate']:+.5f} [{c['interval'][0]:+.5f}, "
                f"{c['interval'][1]:+.5f}]"
                if "estimate" in c
                else "-"
            )
            pp = (
                f"{c['permutationP']:.4g}" + ("" if c.get("permutationExact") else " (MC)")
                if "permutationP" in c
                else "-"
            )
            units = s.get("independentUnits", {})
            lines.append(
                f"| {s['label']} | {s['heldOutUnit']} | {', '.join(s['varies']) or 'none (same population)'} | "
                f"{s['estimand']} | "
                f"{'/'.join(map(str, s.get('rows', {}).get('test', [])))} | "
                f"{'/'.join(map(str, units.get('test', [])))} | "
                + " | ".join(f"{s['perMethod'][m]['aggregate']:.5f}" if m in s["perMethod"] else "-" for m in comps)
                + f" | {diff} | {pp} |"
            )
        lines += [
            "",
            "Rows paired within each run: "
            + ", ".join(
                f"{s['id']} {'identical' if s.get('contrast', {}).get('identicalRows') else 'NOT identical'}"
                for s in sets
            )
            + " (split-manifest hashes of both models' runs compared per seed).",
            "",
        ]
        eff = summaries.get("sessionEffects", {})
        if eff:
            lines.append(
                "Session constants c_j pooled over runs: "
                + "; ".join(f"{k} mean {v['mean']:+.4f}, SD {v['sd']:.4f} (n = {v['n']})" for k, v in eff.items())
                + "."
            )
        lines.append(summaries.get("note", ""))
        return "\n".join(lines) + "\n"

    def figures(self, protocol: SessionsProtocol, records: Sequence[RunRecord], summaries: dict[str, Any]) -> list[Any]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sets = summaries.get("evaluationSets", [])
        figs = []
        if sets:
            fig, axes = plt.subplots(1, len(sets), figsize=(3.2 * len(sets), 3.4), sharey=False, squeeze=False)
            for ax, s in zip(axes[0], sets, strict=True):
                for i, (_comp, entry) in enumerate(s["perMethod"].items()):
                    vals = list(entry["values"].values())
                    ax.plot(np.full(len(vals), i) + np.linspace(-0.12, 0.12, len(vals)), vals, "o", ms=3, alpha=0.6)
                    ax.plot([i - 0.25, i + 0.25], [entry["aggregate"]] * 2, "k-", lw=2)
                ax.set_xticks(range(len(s["perMethod"])), list(s["perMethod"]), fontsize=8)
                ax.set_title(f"{s['label']}\n(held out: {s['heldOutUnit']})", fontsize=8)
                ax.set_ylabel("run-level MAE")
            fig.tight_layout()
            figs.append(("Run-level MAE per seed (points) beside the declared aggregate (bar)", fig))
            fig, ax = plt.subplots(figsize=(6.5, 3.2))
            for i, s in enumerate(sets):
                c = s.get("contrast", {})
                if "estimate" not in c:
                    continue
                d = list(c["differences"].values())
                ax.plot(np.full(len(d), i) + np.linspace(-0.1, 0.1, len(d)), d, "o", ms=3, alpha=0.5, color="C0")
                ax.errorbar(
                    [i + 0.25],
                    [c["estimate"]],
                    yerr=[[c["estimate"] - c["interval"][0]], [c["interval"][1] - c["estimate"]]],
                    fmt="s",
                    color="k",
                    capsize=4,
                )
            ax.axhline(0, color="grey", lw=0.8)
            ax.set_xticks(range(len(sets)), [f"{s['id']}\n({s['heldOutUnit']})" for s in sets], fontsize=7)
            pair = next((s["contrast"] for s in sets if "contrast" in s), None)
            ax.set_ylabel(f"{pair['method']} - {pair['reference']} MAE" if pair else "difference")
            ax.set_title("Paired differences per run and their 95% t intervals", fontsize=9)
            fig.tight_layout()
            figs.append(("Paired differences by estimand", fig))
        effects: list[Any] = [
            r.metrics["sessionEffects"] for r in records if isinstance(r.metrics.get("sessionEffects"), dict)
        ]
        if effects:
            fig, ax = plt.subplots(figsize=(6, 3))
            for cohort in ("main", "shifted"):
                hist = np.concatenate([np.asarray(e[cohort]) for e in effects])
                ax.hist(hist, bins=40, alpha=0.5, label=cohort, density=True)
            ax.set_xlabel("session constant c_j")
            ax.set_title("What moved in the shifted cohort: the c_j population", fontsize=9)
            ax.legend()
            fig.tight_layout()
            figs.append(("Session constants, main vs shifted cohort", fig))
        return figs
