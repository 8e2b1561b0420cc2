"""Ladder analysis: raw metric per model per rung, within-rung ranks (1 = best), no summed score."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cltoolkit.components import NUMBER, Analysis, ValueKind
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import replicate_key
from cltoolkit.suites.ladder.models import LadderProtocol

__all__ = ["LadderAnalysis", "ranks"]

RUNGS = (
    ("oneStep", "one-step prediction"),
    ("rollout", "open-loop rollout (constant input)"),
    ("intervention", "intervention response"),
    ("control", "closed-loop control"),
    ("transfer", "transfer"),
)


def ranks(values: dict[str, float]) -> dict[str, int]:
    """Competition ranks, 1 = lowest value; ties share the best rank."""
    return {k: 1 + sum(1 for o in values.values() if o < v) for k, v in values.items()}


def _num(x: Any, none: str = "-") -> str:
    """Four significant digits (the report's fixed number format); `none` for a missing value."""
    return none if x is None else f"{float(x):.4g}"


def _metric_ids(p: LadderProtocol) -> dict[str, str]:
    r = p.rungs
    return {
        "oneStep": r.oneStep.metric,
        "rollout": r.rollout.metric,
        "intervention": r.intervention.metric,
        "control": r.control.metric,
        "transfer": r.control.transferMetric,
    }


class LadderAnalysis(Analysis[LadderProtocol]):
    """Per rung: raw values, ranks among candidates, the favoured model; diagnostics shown apart."""

    def expected_values(self, protocol: LadderProtocol, record: RunRecord) -> dict[str, ValueKind]:
        """Every run is scored on control and transfer; a model (not a controls-only diagnostic) also on the
        one-step, rollout and intervention rungs, with its raw rung results beside them."""

        ids = _metric_ids(protocol)
        out = {ids["control"]: NUMBER, ids["transfer"]: NUMBER}
        method = self.project_regs().method.get(protocol.comparison(record.spec.comparison).method)
        if not getattr(method, "controls_only", False):
            out |= {ids["oneStep"]: NUMBER, ids["rollout"]: NUMBER, ids["intervention"]: NUMBER}
        return out

    def replicates(
        self, protocol: LadderProtocol, records: Sequence[RunRecord], metric: str, comparison: str, scope: str
    ) -> dict[str, dict[str, float]]:
        out: dict[str, float] = {}
        measure = self.project_regs().metric.get(metric)
        for rec in records:
            if rec.spec.comparison == comparison and (value := measure.compute(rec)) is not None:
                out[replicate_key(rec.spec.seed, rec.spec.order, rec.spec.cell)] = value
        return {"aggregate": out}

    def summaries(self, protocol: LadderProtocol, records: Sequence[RunRecord]) -> dict[str, Any]:
        runs: dict[str, list[RunRecord]] = {}
        for rec in sorted(records, key=lambda r: r.spec.seed):
            runs.setdefault(rec.spec.comparison, []).append(rec)
        by_comp = {c: recs[0] for c, recs in runs.items()}  # the lowest seed: its rung details are shown
        metrics: dict[str, Any] = {
            c: r.metrics for c, r in by_comp.items()
        }  # JSON values, read as the driver wrote them

        def mean(comp: str, metric: str) -> float:
            """The rung's raw value: the mean over every seed of the comparison (never one seed's)."""
            return float(np.mean([r.number(metric) for r in runs[comp]]))

        metric_ids = _metric_ids(protocol)
        competitors = [c.id for c in protocol.comparisons if c.diagnostic is None]
        diagnostics = [c.id for c in protocol.comparisons if c.diagnostic is not None]
        rungs: dict[str, Any] = {}
        for key, label in RUNGS:
            metric = metric_ids[key]
            raw = {c: mean(c, metric) for c in competitors if c in by_comp and metric in metrics[c]}
            diag = {c: mean(c, metric) for c in diagnostics if c in by_comp and metric in metrics[c]}
            rk = ranks(raw)
            best = sorted(c for c, r in rk.items() if r == 1)
            rungs[key] = {
                "label": label,
                "metric": metric,
                "values": raw,
                "ranks": rk,
                "favours": best,
                "diagnostics": diag,
            }
        rungs["oneStep"]["populationMse"] = {
            c: metrics[c]["oneStep"]["populationMse"] for c in rungs["oneStep"]["values"]
        }
        rungs["oneStep"]["marginalSe"] = {c: metrics[c]["oneStep"]["marginalSe"] for c in rungs["oneStep"]["values"]}
        rungs["oneStep"]["pairedDifferenceSe"] = self._paired_se(by_comp, list(rungs["oneStep"]["values"]))
        rungs["rollout"]["steadyState"] = {c: metrics[c]["rollout"]["steadyState"] for c in rungs["rollout"]["values"]}
        rungs["rollout"]["alternating"] = {
            h: {c: metrics[c]["rollout"]["alternating"][h]["rmse"] for c in rungs["rollout"]["values"]}
            for h in (str(x) for x in protocol.rungs.rollout.alternatingHorizons)
        }
        rungs["rollout"]["forcedAmplitude"] = {
            c: metrics[c]["rollout"]["forcedAmplitude"] for c in rungs["rollout"]["values"]
        }
        any_model = next((c for c in competitors if c in by_comp), None)
        if any_model is not None:
            roll = metrics[any_model]["rollout"]
            rungs["rollout"]["trueSteadyState"] = roll["trueSteadyState"]
            rungs["rollout"]["trueForcedAmplitude"] = roll["trueForcedAmplitude"]
        for key in ("control", "transfer"):
            rungs[key]["equilibrium"] = {c: metrics[c][key]["equilibrium"] for c in rungs[key]["values"]}
            rungs[key]["cycle"] = {
                c: metrics[c][key]["cycle"] for c in [*rungs[key]["values"], *rungs[key]["diagnostics"]]
            }
        return {
            "rungs": rungs,
            "seeds": {c: [r.spec.seed for r in recs] for c, recs in runs.items()},
            "note": "Ranks are within each rung (1 = best); they are never summed. Raw values are means over each "
            "comparison's seeds; rung details (population MSE, steady states, cycles) are those of its lowest seed.",
        }

    @staticmethod
    def _paired_se(by_comp: dict[str, RunRecord], comps: list[str]) -> dict[str, float]:
        losses = {c: np.asarray((by_comp[c].section("oneStep") or {})["losses"], dtype=float) for c in comps}
        out = {}
        for i, a in enumerate(comps):
            for b in comps[i + 1 :]:
                d = losses[a] - losses[b]
                out[f"{a}-{b}"] = float(d.std(ddof=1) / np.sqrt(d.size))
        return out

    def report_markdown(self, protocol: LadderProtocol, records: Sequence[RunRecord], summaries: dict[str, Any]) -> str:
        rungs = summaries["rungs"]
        comps = list(rungs["oneStep"]["values"])
        seeds = summaries.get("seeds", {})
        counts = sorted({len(v) for v in seeds.values()}) or [1]
        over = f"mean over {counts[0]} seed(s)" if len(counts) == 1 else "mean over each comparison's seeds"
        lines = [f"## Ladder: raw metric ({over}) and rank per rung (1 = best; ranks are never summed)", ""]
        lines.append("| rung | metric | " + " | ".join(comps) + " | favours |")
        lines.append("|---|---|" + "---|" * len(comps) + "---|")
        for key, label in RUNGS:
            r = rungs[key]
            cells = [f"{_num(r['values'][c])} ({r['ranks'][c]})" if c in r["values"] else "-" for c in comps]
            lines.append(f"| {label} | `{r['metric']}` | " + " | ".join(cells) + f" | {', '.join(r['favours'])} |")
        lines += [
            "",
            "Diagnostic controllers (not competitors): "
            + (
                "; ".join(
                    f"{key}: " + ", ".join(f"{c} {_num(v)}" for c, v in rungs[key]["diagnostics"].items())
                    for key in ("control", "transfer")
                    if rungs[key]["diagnostics"]
                )
                or "none declared"
            )
            + ".",
            "",
        ]
        one = rungs["oneStep"]
        lines.append(
            "One-step population MSE (closed form) beside the sample: "
            + ", ".join(f"{c} {one['populationMse'][c]:.4f} (SE {one['marginalSe'][c]:.5f})" for c in comps)
            + "; paired-difference SE: "
            + ", ".join(f"{k} {v:.5f}" for k, v in one["pairedDifferenceSe"].items())
            + "."
        )
        roll = rungs["rollout"]
        lines.append(
            f"Steady state under constant input: true {_num(roll.get('trueSteadyState'))}; "
            + ", ".join(f"{c} {_num(roll['steadyState'][c], 'none (unstable)')}" for c in comps)
            + ". Forced alternating amplitude: true "
            + f"{_num(roll.get('trueForcedAmplitude'))}; "
            + ", ".join(f"{c} {_num(roll['forcedAmplitude'][c], 'none (unstable)')}" for c in comps)
            + "."
        )
        for key in ("control", "transfer"):
            eq = rungs[key]["equilibrium"]
            cyc = rungs[key]["cycle"]
            equilibria = ", ".join(f"{c} {eq[c]:.7g}" for c in eq if eq[c] is not None)
            cycles = ", ".join(
                f"{c} period {v['period']} (limit states {', '.join(f'{s:.7f}' for s in v['limitStates'] or [])})"
                for c, v in cyc.items()
                if v
            )
            lines.append(
                f"{key.capitalize()}: continuous-controller equilibria {equilibria or 'none (no controller settled)'}"
                f"; grid-controller tail cycles {cycles or 'none (no grid controller reached a cycle)'}."
            )
        return "\n".join(lines) + "\n"

    def figures(self, protocol: LadderProtocol, records: Sequence[RunRecord], summaries: dict[str, Any]) -> list[Any]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figs = []
        colors = {c.id: f"C{i % 10}" for i, c in enumerate(protocol.comparisons)}  # as every other figure of the report
        ordered = sorted(records, key=lambda r: (r.spec.comparison, r.spec.seed))
        for key, title in (("control", "Closed-loop control (true system)"), ("transfer", "Transfer system")):
            fig, ax = plt.subplots(figsize=(8, 3.8))
            seen: set[str] = set()
            for rec in ordered:
                loop = rec.section(key)
                if loop is not None:
                    comp = rec.spec.comparison
                    label = None if comp in seen else comp  # one legend entry per comparison, not per run
                    seen.add(comp)
                    ax.plot(range(1, len(loop["states"]) + 1), loop["states"], color=colors.get(comp), label=label)
            ax.axhline(protocol.rungs.control.target, color="k", lw=0.8, ls="--", label="target s*")
            ax.set_xlabel("step")
            ax.set_ylabel("state")
            ax.set_title(title)
            ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
            figs.append((title, fig))
        fig, ax = plt.subplots(figsize=(8, 3.8))
        first = True
        seen = set()
        for rec in ordered:
            roll = rec.section("rollout")
            if roll is not None:
                if first:
                    ax.plot(roll["trueTrajectory"], "k--", label="true (noiseless)")
                    first = False
                comp = rec.spec.comparison
                ax.plot(roll["trajectory"], color=colors.get(comp), label=None if comp in seen else comp)
                seen.add(comp)
        ax.set_ylim(-0.5, 4)
        ax.set_xlabel("step")
        ax.set_ylabel("state")
        ax.set_title("Open-loop rollout, constant input")
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
        figs.append(("Open-loop rollout", fig))
        return figs
