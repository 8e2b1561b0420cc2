"""Report parts every suite gets by recording two conventional metric entries (docs/design.md section 3, the record):

- `successMatrix`: {"tasks": [...], "phases": [...], "values": [[value of task j after phase i]]} - the per-task
  success (or any per-task score) evaluated after each training phase; a null is a task not evaluated then.
- `curves`: {name: {"x": [...], "y": [...], "xLabel": str, "yLabel": str}} - learning curves and the like.

The report shows the matrix averaged over runs with the per-run range beside it, and curves as the mean with every
run drawn thinly beside it (per-seed values beside every aggregate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cltoolkit.run.record import RunRecord

if TYPE_CHECKING:
    from cltoolkit.components import Analysis
    from cltoolkit.protocol.models import ProtocolBase

__all__ = ["curve_figures", "matrix_figures", "matrix_markdown", "with_standard_entries"]


def with_standard_entries(
    records: Sequence[RunRecord], analysis: Analysis[Any] | None, protocol: ProtocolBase
) -> list[RunRecord]:
    """The records as the report's matrix and curves read them: each completed record with the conventional entries
    its suite's analysis derives (`Analysis.standard_entries`) where the record holds none of its own. Copies for
    display; the records themselves (and their seals) are untouched."""
    out = []
    for rec in records:
        extra = analysis.standard_entries(protocol, rec) if analysis is not None else {}
        missing = {k: v for k, v in extra.items() if k not in rec.metrics}
        out.append(rec.model_copy(update={"metrics": {**rec.metrics, **missing}}) if missing else rec)
    return out


def _group(records: Sequence[RunRecord], key: str) -> dict[str, list[Any]]:
    """Completed records' `key` entries by comparison (and task order, where the grid has orders)."""
    out: dict[str, list[Any]] = {}
    for rec in records:
        value = rec.metrics.get(key)
        if rec.status.state == "completed" and isinstance(value, dict):
            label = (
                rec.spec.comparison
                + (f" / {rec.spec.order}" if rec.spec.order else "")
                + (f" / {rec.spec.cell}" if rec.spec.cell else "")
            )
            out.setdefault(label, []).append(value)
    return out


def _matrices(entries: list[Any]) -> tuple[list[str], list[str], np.ndarray] | None:
    first = entries[0]
    tasks, phases = list(first.get("tasks", [])), list(first.get("phases", []))
    stack = []
    for e in entries:
        if list(e.get("tasks", [])) != tasks or list(e.get("phases", [])) != phases:
            return None  # runs disagree on the layout: not averaged
        stack.append([[np.nan if v is None else float(v) for v in row] for row in e["values"]])
    return tasks, phases, np.asarray(stack, dtype=float)


def matrix_markdown(records: Sequence[RunRecord]) -> str:
    groups = _group(records, "successMatrix")
    if not groups:
        return ""
    lines = ["## Per-task values after each phase (mean over runs [min, max])", ""]
    for label, entries in groups.items():
        parsed = _matrices(entries)
        if parsed is None:
            lines += [f"{label}: runs record different task / phase layouts; see the per-run records.", ""]
            continue
        tasks, phases, m = parsed
        lines += [
            f"**{label}** ({m.shape[0]} runs)",
            "",
            "| after phase | " + " | ".join(tasks) + " |",
            "|---|" + "---|" * len(tasks),
        ]
        for i, phase in enumerate(phases):
            cells = []
            for j in range(len(tasks)):
                col = m[:, i, j]
                col = col[~np.isnan(col)]
                cells.append("-" if col.size == 0 else f"{col.mean():.3f} [{col.min():.3f}, {col.max():.3f}]")
            lines.append(f"| {phase} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def matrix_figures(records: Sequence[RunRecord]) -> list[tuple[str, Any]]:
    """Per comparison, the per-task matrix averaged over runs as a heat map (SVG), on one colour scale for all."""
    from cltoolkit.report.svg import Axes, Chart, nice_ticks, text_width, tick_labels, viridis

    parsed_all: list[tuple[str, list[str], list[str], np.ndarray]] = []
    for label, entries in list(_group(records, "successMatrix").items())[:12]:
        parsed = _matrices(entries)
        if parsed is not None:
            parsed_all.append((label, *parsed))
    means: list[tuple[str, list[str], list[str], np.ndarray, np.ndarray]] = []
    for label, tasks, phases, m in parsed_all:
        counts = np.sum(~np.isnan(m), axis=0)
        mean = np.where(counts > 0, np.nansum(m, axis=0) / np.maximum(counts, 1), np.nan)  # null cells stay empty
        if np.any(~np.isnan(mean)):
            means.append((label, tasks, phases, m, mean))
    if not means:
        return []
    finite = np.concatenate([mean[~np.isnan(mean)] for *_, mean in means])
    # one colour scale for every matrix of the report: [0, 1] for rates, else the range of all of them
    lo, hi = (0.0, 1.0) if finite.min() >= 0 and finite.max() <= 1 else (float(finite.min()), float(finite.max()))
    span = (hi - lo) or 1.0
    figs: list[tuple[str, Any]] = []
    for label, tasks, phases, m, mean in means:
        cell_w = max(72.0, 12 + max(text_width(t, 9) for t in tasks))
        cell_h = 34.0
        left = 20 + max(text_width(f"after {p}", 9) for p in phases)
        title = f"{label}: mean over {m.shape[0]} runs"
        plot_w, plot_h = cell_w * len(tasks), cell_h * len(phases)
        width = max(left + plot_w + 120, left + text_width(title, 10) + 40)
        chart = Chart(width, 40 + plot_h + 48)
        ax = Axes(chart, (left, 40, plot_w, plot_h), (-0.5, len(tasks) - 0.5), (-0.5, len(phases) - 0.5), True)
        for i in range(len(phases)):
            for j in range(len(tasks)):
                value = float(mean[i, j])
                x, y = ax.px(j - 0.5), ax.py(i - 0.5)
                if np.isnan(value):
                    chart.rect(x, y, cell_w, cell_h, "#ffffff")
                    continue
                fraction = (value - lo) / span
                chart.rect(x, y, cell_w, cell_h, viridis(fraction))
                light = fraction > 0.55  # viridis turns yellow: dark text
                chart.text(ax.px(j), ax.py(i), f"{value:.2f}", 9, "middle", "k" if light else "w")
        ax.frame(
            xlabel="evaluated on task",
            title=title,
            xcategories=tasks,
            ycategories=[f"after {p}" for p in phases],
        )
        bar_x, stripes = left + plot_w + 16, 48
        for k in range(stripes):  # the colour bar, low at the bottom
            chart.rect(
                bar_x, 40 + plot_h * (1 - (k + 1) / stripes), 14, plot_h / stripes + 0.3, viridis(k / (stripes - 1))
            )
        chart.outline(bar_x, 40, 14, plot_h)
        ticks = nice_ticks(lo, hi, 5) if hi > lo else [lo]
        for t, s in zip(ticks, tick_labels(ticks), strict=True):
            ty = 40 + plot_h * (1 - (t - lo) / span) if hi > lo else 40 + plot_h / 2
            chart.line(bar_x + 14, ty, bar_x + 18, ty, "k", 0.8)
            chart.text(bar_x + 20, ty, s, 8)
        chart.text(bar_x + 66, 40 + plot_h / 2, "mean value (same scale in every matrix)", 8, "middle", rotate=True)
        figs.append((f"Per-task matrix: {label}", chart.svg(f"Per-task matrix: {label}")))
    return figs


def curve_figures(records: Sequence[RunRecord], colors: dict[str, str] | None = None) -> list[tuple[str, Any]]:
    """Learning curves, one figure per curve name (SVG); a comparison keeps its colour (`colors`: comparison ->
    colour) in every figure of the report, with task orders / cells of one comparison drawn dashed and dotted."""
    from cltoolkit.report.svg import Axes, Chart, padded, text_width

    by_name: dict[str, dict[str, list[Any]]] = {}
    for label, entries in _group(records, "curves").items():
        for entry in entries:
            for name, curve in entry.items():
                if isinstance(curve, dict) and isinstance(curve.get("x"), list) and isinstance(curve.get("y"), list):
                    by_name.setdefault(name, {}).setdefault(label, []).append(curve)
    figs: list[tuple[str, Any]] = []
    for name, groups in by_name.items():  # every curve: a report never drops one silently
        shown = list(groups.items())[:10]
        xs = [_number(v) for _, curves in shown for c in curves for v in c["x"]]
        ys = [_number(v) for _, curves in shown for c in curves for v in c["y"]]
        styles = ("-", "--", ":", "-.")
        seen: dict[str, int] = {}
        drawn: list[tuple[str, str, str, list[Any], bool]] = []
        for k, (label, curves) in enumerate(shown):
            comparison = label.split(" / ")[0]
            style = styles[seen.setdefault(comparison, 0) % len(styles)]
            seen[comparison] += 1
            lengths = {len(c["x"]) for c in curves}
            same_x = len(lengths) == 1 and all(
                list(c["x"]) == list(curves[0]["x"]) and len(c["y"]) == len(c["x"]) for c in curves
            )
            drawn.append((label, (colors or {}).get(comparison, f"C{k}"), style, curves, same_x))
        no_mean = ", runs differ in x or length: no mean"
        entries = [
            (f"{label} (n={len(curves)})" + ("" if same_x else no_mean), color, style, 2.2)
            for label, color, style, curves, same_x in drawn
        ]
        legend = 40 + max(text_width(e[0], 8) for e in entries)
        chart = Chart(820 + legend, 380)
        ax = Axes(chart, (72, 32, 820 - 72 - 16, 380 - 32 - 48), padded(xs, 0.0), padded(ys))
        for _, color, style, curves, same_x in drawn:
            for c in curves:
                n = min(len(c["x"]), len(c["y"]))  # a suite's malformed curve is drawn as far as it goes
                ax.plot([_number(v) for v in c["x"][:n]], [_number(v) for v in c["y"][:n]], color, 0.9, "-", 0.35)
            if same_x:
                mean = np.mean(np.asarray([[_number(v) for v in c["y"]] for c in curves], dtype=float), axis=0)
                ax.plot([_number(v) for v in curves[0]["x"]], list(mean), color, 2.2, style)
        meta = drawn[-1][3][0]
        ax.frame(
            xlabel=str(meta.get("xLabel", "")),
            ylabel=str(meta.get("yLabel", name)),
            title=f"{name}: mean (thick) and every run (thin)",
        )
        chart.legend(820 + 8, 40, entries)
        figs.append((f"Curves: {name}", chart.svg(f"Curves: {name}")))
    return figs


def _number(v: Any) -> float:
    """A curve's value as a float; null (not measured), or anything not a number, is NaN: the line breaks there."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")
