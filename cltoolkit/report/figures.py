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
    `regs` are the project's registries. The toolkit's own figures are SVG text (`svg`); a suite's own may be
    matplotlib figures."""
    figs: list[tuple[str, Any]] = []
    hyps = [(g, h) for g in results.gates for h in g.hypotheses if h.interval is not None and h.estimate is not None][
        :24
    ]
    if hyps:
        figs.append(("Gate intervals with per-replicate values", _intervals(loaded, hyps)))
    figs += _profiles(loaded, results, regs)
    from cltoolkit.report.standard import curve_figures, matrix_figures, with_standard_entries

    completed = [r for r in records if r.status.state == "completed"]
    colors = comparison_colors(loaded.model)
    suite = regs.suite.get(loaded.model.suite)
    analysis = regs.new_analysis(suite.analysis) if suite.analysis else None
    shown = with_standard_entries(completed, analysis, loaded.model)
    out = {"gates": figs, "runs": matrix_figures(shown) + curve_figures(shown, colors), "suite": []}
    if analysis is not None:
        out["suite"] = analysis.figures(loaded.model, completed, dict(results.summaries))
    return out


def _intervals(loaded: LoadedProtocol, hyps: list[tuple[Any, Any]]) -> str:
    """Per gate hypothesis: the per-replicate values, the estimate, the interval and the tested bound; one panel per
    unit (values, thresholds and margins in one unit share an axis)."""
    from cltoolkit.report.svg import Axes, Chart, padded, text_width

    gates = {g.id: g for g in loaded.model.gates}
    bounds = {g.id: tested_bound(gates.get(g.id)) for g, _ in hyps}
    units: dict[str, list[Any]] = {}
    for g, h in hyps:
        units.setdefault(gates[g.id].unit if g.id in gates else "", []).append((g, h))
    left = 24 + max(text_width(f"{g.id}/{h.scope}", 9) for g, h in hyps)
    width = max(900.0, left + 420)
    row, gap, top = 24.0, 56.0, 32.0
    chart = Chart(width, top + sum(row * len(rows) + gap for rows in units.values()))
    y = top
    for k, (unit, rows) in enumerate(units.items()):
        values: list[float] = []
        for g, h in rows:
            values += [*map(float, h.replicates.values()), float(h.estimate)]
            values += [float(v) for v in (*h.interval, bounds[g.id]) if v is not None]
        ax = Axes(chart, (left, y, width - left - 24, row * len(rows)), padded(values), (-0.5, len(rows) - 0.5), True)
        lo_x, hi_x = ax.xlim
        for i, (g, h) in enumerate(rows):
            reps = [float(v) for v in h.replicates.values()]
            for j, v in enumerate(reps):
                offset = -0.25 + 0.5 * j / (len(reps) - 1) if len(reps) > 1 else 0.0
                chart.marker(ax.px(v), ax.py(i + offset), "o", 2.2, "grey", 0.5)
            ends = [h.estimate if v is None else min(max(float(v), lo_x), hi_x) for v in h.interval]
            ax.plot(ends, [i, i], "C0", 4.0)
            decision = "C2" if h.decision == "pass" else "C3" if h.decision == "fail" else "k"
            chart.marker(ax.px(float(h.estimate)), ax.py(i), "D", 5.0, decision)
            bound = bounds[g.id]
            if bound is not None:
                ax.plot([bound, bound], [i - 0.4, i + 0.4], "k", 1.2, "--")
        ax.frame(
            xlabel=f"{unit} (paired gates: method minus reference)",
            ycategories=[f"{g.id}/{h.scope}" for g, h in rows],
            title=(
                "Per-replicate values (points), estimate (diamond: green pass, red fail), interval (bar), tested "
                "bound (dashed)"
                if k == 0
                else ""
            ),
        )
        y += row * len(rows) + gap
    return chart.svg("Gate intervals with per-replicate values")


def _profiles(loaded: LoadedProtocol, results: Results, regs: Registries) -> list[tuple[str, Any]]:
    """Performance profiles of every gate metric over runs, with the threshold convention on the axis."""
    import numpy as np

    from cltoolkit.report.svg import Axes, Chart, padded, text_width
    from cltoolkit.stats import performance_profile

    figs: list[tuple[str, Any]] = []
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
        colors = comparison_colors(loaded.model)
        labels = [f"{comp} (n={len(vals)})" for comp, vals in by_comp.items()]
        legend = 40 + max(text_width(label, 8) for label in labels)
        chart = Chart(900 + legend, 380)
        ax = Axes(chart, (64, 32, 900 - 64 - 16, 380 - 32 - 48), padded(list(taus)), padded([0.0, 1.0]))
        for comp, vals in by_comp.items():
            x = np.asarray(vals) if higher else -np.asarray(vals)
            profile = performance_profile(x, taus if higher else -taus)
            ax.step(taus.tolist(), profile.tolist(), colors.get(comp, "k"))
        sign = ">" if higher else "<"
        ax.frame(
            xlabel=f"threshold tau ({decl.id}); profile = fraction of runs with score {sign} tau (strict)",
            ylabel="fraction of runs",
            title=f"Performance profile: {decl.label} ({shown})",
        )
        chart.legend(
            900 + 8,
            40,
            [(label, colors.get(comp, "k"), "-", 1.5) for label, comp in zip(labels, by_comp, strict=True)],
        )
        figs.append((f"Performance profile: {decl.id}", chart.svg(f"Performance profile: {decl.id}")))
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
    """The report's figures as HTML by the section they support, drawn now: the toolkit's own as inline SVG, a
    suite's matplotlib figures as inline PNG images."""
    return {
        section: "".join(
            f"<figure><figcaption>{html.escape(t)}</figcaption>"
            + (fig if isinstance(fig, str) else f'<img alt="{html.escape(t)}" src="data:image/png;base64,{png(fig)}">')
            + "</figure>"
            for t, fig in figs
        )
        for section, figs in figures(loaded, results, records, registries(project.components_file)).items()
    }
