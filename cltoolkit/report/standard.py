"""Report parts every suite gets by recording two conventional metric entries (docs/design.md section 3, the record):

- `successMatrix`: {"tasks": [...], "phases": [...], "values": [[value of task j after phase i]]} - the per-task
  success (or any per-task score) evaluated after each training phase; a null is a task not evaluated then.
- `curves`: {name: {"x": [...], "y": [...], "xLabel": str, "yLabel": str}} - learning curves and the like.

The report shows the matrix averaged over runs with the per-run range beside it, and curves as the mean with every
run drawn thinly beside it (per-seed values beside every aggregate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cltoolkit.run.record import RunRecord

__all__ = ["curve_figures", "matrix_figures", "matrix_markdown"]


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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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
    figs = []
    for label, tasks, phases, m, mean in means:
        fig = Figure(figsize=(2.0 + 1.1 * len(tasks), 1.4 + 0.6 * len(phases)))
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        im = ax.imshow(np.ma.masked_invalid(mean), vmin=lo, vmax=hi, cmap="viridis", aspect="auto")
        for i in range(len(phases)):
            for j in range(len(tasks)):
                if not np.isnan(mean[i, j]):
                    light = (float(mean[i, j]) - lo) / ((hi - lo) or 1.0) > 0.55  # viridis turns yellow: dark text
                    ax.text(
                        j, i, f"{mean[i, j]:.2f}", ha="center", va="center", fontsize=9, color="k" if light else "w"
                    )
        ax.set_xticks(range(len(tasks)), tasks, fontsize=9)
        ax.set_yticks(range(len(phases)), [f"after {p}" for p in phases], fontsize=9)
        ax.set_xlabel("evaluated on task", fontsize=9)
        ax.set_title(f"{label}: mean over {m.shape[0]} runs", fontsize=10)
        bar = fig.colorbar(im, ax=ax)
        bar.set_label("mean value (same scale in every matrix)", fontsize=8)
        figs.append((f"Per-task matrix: {label}", fig))
    return figs


def curve_figures(records: Sequence[RunRecord], colors: dict[str, str] | None = None) -> list[tuple[str, Any]]:
    """Learning curves, one figure per curve name; a comparison keeps its colour (`colors`: comparison -> colour)
    in every figure of the report, with task orders / cells of one comparison drawn dashed and dotted."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    by_name: dict[str, dict[str, list[Any]]] = {}
    for label, entries in _group(records, "curves").items():
        for entry in entries:
            for name, curve in entry.items():
                if isinstance(curve, dict) and "x" in curve and "y" in curve:
                    by_name.setdefault(name, {}).setdefault(label, []).append(curve)
    figs = []
    for name, groups in by_name.items():  # every curve: a report never drops one silently
        fig = Figure(figsize=(8, 3.6))
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        meta: dict[str, Any] = {}
        styles = ("-", "--", ":", "-.")
        seen: dict[str, int] = {}
        for k, (label, curves) in enumerate(list(groups.items())[:10]):
            comparison = label.split(" / ")[0]
            color = (colors or {}).get(comparison, f"C{k}")
            style = styles[seen.setdefault(comparison, 0) % len(styles)]
            seen[comparison] += 1
            for c in curves:
                ax.plot(c["x"], c["y"], color=color, lw=0.6, alpha=0.35)
            lengths = {len(c["x"]) for c in curves}
            if len(lengths) == 1 and all(list(c["x"]) == list(curves[0]["x"]) for c in curves):
                ax.plot(
                    curves[0]["x"],
                    np.mean([c["y"] for c in curves], axis=0),
                    color=color,
                    ls=style,
                    lw=2,
                    label=f"{label} (n={len(curves)})",
                )
            meta = curves[0]
        ax.set_xlabel(str(meta.get("xLabel", "")), fontsize=9)
        ax.set_ylabel(str(meta.get("yLabel", name)), fontsize=9)
        ax.set_title(f"{name}: mean (thick) and every run (thin)", fontsize=10)
        ax.legend(fontsize=8)
        figs.append((f"Curves: {name}", fig))
    return figs
