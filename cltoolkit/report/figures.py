"""The report's figures, each for the section it supports: gate intervals and performance profiles (`gates`),
per-task matrices and learning curves (`runs`), the suite's own (`suite`); one colour per comparison throughout."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any

from cltoolkit.project import Project
from cltoolkit.protocol.results import Results
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import Registries, registries
from cltoolkit.run.record import RunRecord

__all__ = ["Figures", "comparison_colors", "draw_figure_blocks", "figures", "png", "tested_bound"]

Figures = dict[str, list[tuple[str, Any]]]


def comparison_colors(protocol: Any) -> dict[str, str]:
    """One colour per comparison, the same in every figure of a report (matplotlib's cycle, in declaration order)."""
    return {c.id: f"C{i % 10}" for i, c in enumerate(protocol.comparisons)}


def tested_bound(gate: Any) -> float | None:
    """Where a gate's tested bound lies on its axis: the threshold of a bound gate; on the difference axis + margin
    for superiority and - margin for non-inferiority when higher is better, mirrored when lower is better."""
    if gate is None:
        return None
    if gate.threshold is not None:
        return float(gate.threshold)
    if gate.margin is not None and gate.test in ("superiority", "non-inferiority"):
        side = 1.0 if gate.test == "superiority" else -1.0
        return side * float(gate.margin) * (-1.0 if gate.lower_is_better else 1.0)
    return None


def figures(
    loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord], regs: Registries
) -> dict[str, list[tuple[str, Any]]]:
    """Figures by the section they support: `gates` (intervals, profiles), `suite`, `runs` (matrices, curves);
    `regs` are the project's registries."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: lighter, and no global figure state

    figs: list[tuple[str, Any]] = []
    hyps = [(g, h) for g in results.gates for h in g.hypotheses if h.interval is not None and h.estimate is not None][
        :24
    ]
    if hyps:
        import numpy as np

        gates = {g.id: g for g in loaded.model.gates}
        units: dict[str, list[Any]] = {}
        for g, h in hyps:  # one panel per unit: values, thresholds and margins in one unit share an axis
            units.setdefault(gates[g.id].unit if g.id in gates else "", []).append((g, h))
        fig = Figure(figsize=(9, 1.0 + 0.45 * len(hyps) + 0.6 * len(units)))
        FigureCanvasAgg(fig)  # a real canvas, so layout can measure text
        axes = fig.subplots(
            len(units), 1, squeeze=False, gridspec_kw={"height_ratios": [len(v) for v in units.values()]}
        )
        for ax, (unit, rows) in zip(axes[:, 0], units.items(), strict=True):
            for i, (g, h) in enumerate(rows):
                vals = np.array(list(h.replicates.values()))
                if vals.size:
                    ax.plot(vals, i + np.linspace(-0.25, 0.25, vals.size), "o", ms=2.5, color="grey", alpha=0.5)
                lo, hi = h.interval
                ax.plot(
                    [lo if lo is not None else h.estimate, hi if hi is not None else h.estimate],
                    [i, i],
                    color="C0",
                    lw=3,
                )
                ax.plot(
                    [h.estimate],
                    [i],
                    "D",
                    color="C2" if h.decision == "pass" else "C3" if h.decision == "fail" else "k",
                )
                bound = tested_bound(gates.get(g.id))
                if bound is not None:
                    ax.plot([bound, bound], [i - 0.4, i + 0.4], color="k", lw=1, ls="--")
            ax.set_yticks(range(len(rows)), [f"{g.id}/{h.scope}" for g, h in rows], fontsize=9)
            ax.set_ylim(len(rows) - 0.5, -0.5)
            ax.set_xlabel(f"{unit} (paired gates: method minus reference)", fontsize=9)
        axes[0, 0].set_title(
            "Per-replicate values (points), estimate (diamond: green pass, red fail), interval (bar), tested bound "
            "(dashed)",
            fontsize=9,
        )
        figs.append(("Gate intervals with per-replicate values", fig))
    figs += _profiles(loaded, results, regs)
    from cltoolkit.report.standard import curve_figures, matrix_figures

    completed = [r for r in records if r.status.state == "completed"]
    colors = comparison_colors(loaded.model)
    out = {"gates": figs, "runs": matrix_figures(completed) + curve_figures(completed, colors), "suite": []}
    suite = regs.suite.get(loaded.model.suite)
    if suite.analysis:
        analysis = regs.new_analysis(suite.analysis)
        out["suite"] = analysis.figures(loaded.model, completed, dict(results.summaries))
    return out


def _profiles(loaded: LoadedProtocol, results: Results, regs: Registries) -> list[tuple[str, Any]]:
    """Performance profiles of every gate metric over runs, with the threshold convention on the axis."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from cltoolkit.stats import performance_profile

    figs = []
    for decl in loaded.model.metrics:
        if decl.kind != "gate" or decl.id not in regs.metric:
            continue
        higher = regs.metric.get(decl.id).higher_is_better
        by_comp: dict[str, list[float]] = {}
        for run in results.perRun:
            value = run.scores.get(decl.id)
            if isinstance(value, (int, float)) and run.status == "completed":
                by_comp.setdefault(run.comparison, []).append(float(value))
        if not by_comp:
            continue
        shown = f"{len(by_comp)} comparisons"
        if len(by_comp) > 10:  # unreadable beyond that: the comparisons named in gates, then the first others
            named = [c for g in loaded.model.gates if g.metric == decl.id for c in (g.method, g.reference) if c]
            keep = list(dict.fromkeys([*named, *by_comp]))[:10]
            by_comp = {c: by_comp[c] for c in keep if c in by_comp}
            shown = f"{len(by_comp)} of {shown} (those in gates first)"
        allv = np.concatenate([np.asarray(v) for v in by_comp.values()])
        pad = 0.02 * (allv.max() - allv.min() or 1.0)  # past both ends, so every profile reaches 0 and 1
        taus = np.linspace(allv.min() - pad, allv.max() + pad, 200)
        fig = Figure(figsize=(9, 3.6))
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        colors = comparison_colors(loaded.model)
        for comp, vals in by_comp.items():
            x = np.asarray(vals) if higher else -np.asarray(vals)
            profile = performance_profile(x, taus if higher else -taus)
            ax.step(taus, profile, where="post", label=f"{comp} (n={len(vals)})", color=colors.get(comp))
        sign = ">" if higher else "<"
        ax.set_xlabel(
            f"threshold tau ({decl.id}); profile = fraction of runs with score {sign} tau (strict)", fontsize=9
        )
        ax.set_ylabel("fraction of runs", fontsize=9)
        ax.set_title(f"Performance profile: {decl.label} ({shown})", fontsize=10)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
        figs.append((f"Performance profile: {decl.id}", fig))
    return figs


def png(fig: Any) -> str:
    import sys

    buf = io.BytesIO()
    fig.tight_layout(pad=1.5)  # cheaper than bbox_inches="tight", which draws the figure twice
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    if "matplotlib.pyplot" in sys.modules:  # suites' figures may come from pyplot: release them
        sys.modules["matplotlib.pyplot"].close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def draw_figure_blocks(
    project: Project, loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]
) -> dict[str, str]:
    """The report's figures as HTML by the section they support (PNG images inlined), drawn now."""
    return {
        section: "".join(
            f'<figure><figcaption>{html.escape(t)}</figcaption><img alt="{html.escape(t)}" '
            f'src="data:image/png;base64,{png(fig)}"></figure>'
            for t, fig in figs
        )
        for section, figs in figures(loaded, results, records, registries(project.components_file)).items()
    }
