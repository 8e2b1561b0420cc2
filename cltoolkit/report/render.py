"""Markdown + self-contained HTML (plots embedded as PNG data) from a results block and its records."""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cltoolkit._io import atomic_write_text
from cltoolkit.project import Project
from cltoolkit.protocol.results import Results
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import registries
from cltoolkit.run.record import RunRecord

__all__ = ["markdown_report", "write_reports"]


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (tuple, list)):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return str(x)


def _perm(h: Any) -> str:
    """The permutation p with how it was obtained."""
    if h.permutationP is None:
        return "-"
    if h.permutationMethod == "monte-carlo":
        return f"{_fmt(h.permutationP)} (Monte Carlo, {h.permutationDraws} draws, SE {_fmt(h.permutationSE)})"
    return f"{_fmt(h.permutationP)} (exact)"


def markdown_report(loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]) -> str:
    p = loaded.model
    r = results
    lines = [
        f"# {p.id}: {p.title}",
        "",
        f"Protocol hash `{r.protocolSha256}` ({r.canonicalization}); stage `{r.stage}`; measured "
        f"{r.measuredOn:%Y-%m-%d %H:%M} UTC "
        f"by clt {r.toolkitVersion} (records from {', '.join(r.toolkitVersions) or '-'}).",
        "",
        f"Goal: {p.goal}",
        "",
        f"Evidence: {len(r.evidence)} sealed run record(s), each pinned by its seal in the results block "
        f"(`evidence`); `clt report --protocol {p.id} --check` recomputes these results from them.",
        "",
        *(
            [
                "**WARNING: records of one comparison come from different component code (reported with "
                "--allow-mixed-code):**",
                "",
                *(f"- **WARNING: {line}**" for line in r.mixedComponentCode),
                "",
            ]
            if r.mixedComponentCode
            else []
        ),
        "## Runs",
        "",
        "| planned | completed | failed | crashed | timeout | missing | excluded |",
        "|---|---|---|---|---|---|---|",
        "| "
        + " | ".join(
            str(getattr(r.runs, k))
            for k in ("planned", "completed", "failed", "crashed", "timeout", "missing", "excluded")
        )
        + " |",
        "",
    ]
    held_out = "; ".join(f"{c.id}: {c.heldOutUnit}" for c in p.claims) or "-"
    lines += [
        "## Gates",
        "",
        f"Claims and their held-out units: {held_out}. Multiplicity: {p.analysis.multiplicity} at alpha "
        f"{p.analysis.alpha}; declared aggregate: {p.analysis.aggregate}.",
        "",
    ]
    if r.gates:
        lines += [
            "| gate | held-out unit | OOD axis | test | scope | n | estimate | interval | p | p adj. | permutation p "
            "(same hypothesis) | decision |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for g in r.gates:
            axis = ", ".join(g.oodAxis) or ("none (same population)" if g.heldOutUnit else "-")
            for h in g.hypotheses:
                lines.append(
                    f"| {g.id} | {g.heldOutUnit or '-'} | {axis} | {g.test} | {h.scope} | {h.n} | {_fmt(h.estimate)} | "
                    f"{_fmt(h.interval)} | {_fmt(h.pValue)} | "
                    f"{_fmt(h.pAdjusted)} | {_perm(h)} | "
                    f"**{h.decision}**{' (' + h.reason + ')' if h.reason else ''} |"
                )
        lines += [
            "",
            "Permutation p: the sign-flip test of the gate's own hypothesis (one-sided in the claimed direction for "
            "bound, superiority and non-inferiority gates; the larger one-sided p for equivalence; two-sided for "
            "report-only), exact (all 2^n sign flips) or Monte Carlo with its draws and standard error. Where the "
            "replicates have no spread the t statistic is undefined and the exact test decides.",
            "",
            *[f"- {g.id}: {g.label} -> **{g.decision}**; {g.wording}" for g in r.gates],
            "",
        ]
    else:
        lines += ["No gates are declared; the suite's summaries below are the results.", ""]
    if r.budgetChecks:
        lines += [
            "## Budget fairness",
            "",
            *[f"- {'ok' if b.ok else 'VIOLATED'}: {b.message}" for b in r.budgetChecks],
            "",
        ]
    if r.exclusions:
        lines += ["## Exclusions (declared rules, with sensitivity)", "", *[f"- {e}" for e in r.exclusions], ""]
    suite = registries().suite.get(p.suite)
    if suite.analysis:
        analysis = registries().analysis.get(suite.analysis)()
        lines += [
            analysis.report_markdown(p, [x for x in records if x.status.state == "completed"], dict(r.summaries)),
            "",
        ]
    from cltoolkit.report.standard import matrix_markdown

    lines += [matrix_markdown([x for x in records if x.status.state == "completed"])]
    lines += [
        "## Every planned run (raw scores)",
        "",
        "| run | comparison | seed | status | scores |",
        "|---|---|---|---|---|",
    ]
    for run in r.perRun:
        scores = ", ".join(f"{k} {_fmt(v)}" for k, v in run.scores.items())
        lines.append(f"| {run.runId} | {run.comparison} | {run.seed} | {run.status} | {scores} |")
    costs = r.resourceCosts
    lines += [
        "",
        "## Reporting checklist",
        "",
        f"- Artifacts: protocol `{p.id}` at `{r.protocolSha256}`; toolkit {', '.join(r.toolkitVersions) or '-'}; "
        f"git commits {', '.join(_commits(records)) or '-'}.",
        "- Seeds and stages: "
        f"{'; '.join(f'{s.id}: seeds {s.seeds} orders {s.orders or [None]}' for s in p.seeds.stages)}.",
        "- Generator seed ranges: "
        f"{', '.join(f'{k} [{v.start}, {v.stop})' for k, v in p.seeds.splits.items()) or 'none declared'}.",
        *_split_lines(records),
        f"- Budget declared: {p.budget.fairness or '-'}",
        f"- Search record: hyperparameters as declared in the protocol's comparisons; {len(p.comparisons)} "
        "comparison(s).",
        f"- Exclusions: {(len(r.exclusions) and 'see above') or 'none'}; every planned run is listed above.",
        "- Compute: see the table below (measured, analytical counts and estimates kept apart).",
        f"- Disclosures declared: {'; '.join(p.disclosures) or '-'}.",
        f"- Outside scope: {'; '.join(p.outsideScope) or '-'}.",
        "",
        *_compute_lines(costs),
    ]
    return "\n".join(lines)


def _commits(records: Sequence[RunRecord]) -> list[str]:
    """The git commits the records were produced at (12 characters, +dirty for an uncommitted checkout)."""
    return sorted({str(x.provenance.gitCommit)[:12] + ("+dirty" if x.provenance.gitDirty else "") for x in records})


def _split_lines(records: Sequence[RunRecord]) -> list[str]:
    """Realized split manifests per evaluation set: hashes, rows and independent units (apart)."""
    sets: dict[str, list[Any]] = {}
    for rec in records:
        for set_id, man in rec.splits.items():
            sets.setdefault(set_id, []).append(man)
    if not sets:
        return ["- Split manifests: none recorded by the runs."]
    out = ["- Split manifests (recorded in every run record; rows and independent units counted apart):"]
    for set_id, mans in sorted(sets.items()):

        def span(key: str, side: str, mans: list[Any] = mans) -> str:
            vals = sorted({m[key][side] for m in mans})
            return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"

        out.append(
            f"  - `{set_id}`: {mans[0]['kind']} split by {mans[0]['unit']}; {len({m['sha256'] for m in mans})} "
            "distinct "
            f"manifest(s) over {len(mans)} runs; rows train {span('rows', 'train')} / test {span('rows', 'test')}; "
            f"independent units train {span('independentUnits', 'train')} / test {span('independentUnits', 'test')}"
        )
    return out


def _compute_lines(costs: dict[str, Any]) -> list[str]:
    """The compute table: measured times, analytical counts and estimates, never mixed."""
    measured, analytical = costs.get("measured", {}), costs.get("analytical", {})
    per = analytical.get("perComparison", {})
    quantities = [
        q
        for q in (
            "environmentSteps",
            "frames",
            "evaluationSteps",
            "modelQueries",
            "gradientUpdates",
            "replayUpdates",
            "replaySamples",
        )
        if any(row.get(q) for row in per.values())
    ]
    lines = [
        "## Compute accounting",
        "",
        "**Measured** (wall-clock of every attempted run, failed ones included): "
        f"{measured.get('wallClockSeconds')} s in total; per comparison "
        + ", ".join(f"{k} {v} s" for k, v in measured.get("perComparisonSeconds", {}).items())
        + f"; hardware {', '.join(measured.get('hardware', [])) or '-'}; "
        f"devices {', '.join(measured.get('devices', [])) or '-'}; "
        f"precision {', '.join(measured.get('precision', [])) or 'not recorded'}.",
        "",
    ]
    if measured.get("runsPerNode"):
        lines += [
            "**Runs per node**: " + ", ".join(f"{k}: {v}" for k, v in measured["runsPerNode"].items()) + ".",
            "",
        ]
    if quantities:
        lines += [
            "**Analytical counts** (from the drivers' ledgers, summed over completed runs):",
            "",
            "| comparison | " + " | ".join(quantities) + " |",
            "|---|" + "---|" * len(quantities),
        ]
        lines += [f"| {c} | " + " | ".join(f"{row.get(q, 0):.0f}" for q in quantities) + " |" for c, row in per.items()]
        lines.append("")
    est = costs.get("estimates", {})
    lines += [f"**Estimates**: {est.get('note', 'none')}", ""]
    return lines


def _figures(loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]) -> list[tuple[str, Any]]:
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
        fig = Figure(figsize=(7, 0.6 + 0.35 * len(hyps) + 0.5 * len(units)))
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
                gate = gates.get(g.id)
                bound = None
                if gate is not None and gate.threshold is not None:
                    bound = gate.threshold
                elif gate is not None and gate.margin is not None and gate.test != "equivalence-tost":
                    bound = -gate.margin if gate.lower_is_better else gate.margin
                if bound is not None:
                    ax.plot([bound, bound], [i - 0.4, i + 0.4], color="k", lw=1, ls="--")
            ax.set_yticks(range(len(rows)), [f"{g.id}/{h.scope}" for g, h in rows], fontsize=7)
            ax.set_ylim(len(rows) - 0.5, -0.5)
            ax.set_xlabel(unit, fontsize=7)
        axes[0, 0].set_title(
            "Per-replicate values (points), estimate (diamond), interval (bar), bound (dashed)", fontsize=8
        )
        figs.append(("Gate intervals with per-replicate values", fig))
    figs += _profiles(loaded, results)
    from cltoolkit.report.standard import curve_figures, matrix_figures

    completed = [r for r in records if r.status.state == "completed"]
    figs += matrix_figures(completed) + curve_figures(completed)
    suite = registries().suite.get(loaded.model.suite)
    if suite.analysis:
        analysis = registries().analysis.get(suite.analysis)()
        figs += analysis.figures(
            loaded.model, [r for r in records if r.status.state == "completed"], dict(results.summaries)
        )
    return figs


def _profiles(loaded: LoadedProtocol, results: Results) -> list[tuple[str, Any]]:
    """Performance profiles of every gate metric over runs, with the threshold convention on the axis."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from cltoolkit.stats import performance_profile

    regs = registries()
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
        fig = Figure(figsize=(6, 3))
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        for comp, vals in by_comp.items():
            x = np.asarray(vals) if higher else -np.asarray(vals)
            ax.step(
                taus, performance_profile(x, taus if higher else -taus), where="post", label=f"{comp} (n={len(vals)})"
            )
        sign = ">" if higher else "<"
        ax.set_xlabel(
            f"threshold tau ({decl.id}); profile = fraction of runs with score {sign} tau (strict)", fontsize=7
        )
        ax.set_ylabel("fraction of runs")
        ax.set_title(f"Performance profile: {decl.label} ({shown})", fontsize=9)
        ax.legend(fontsize=7)
        figs.append((f"Performance profile: {decl.id}", fig))
    return figs


def _png(fig: Any) -> str:
    import sys

    buf = io.BytesIO()
    fig.tight_layout(pad=1.5)  # cheaper than bbox_inches="tight", which draws the figure twice
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    if "matplotlib.pyplot" in sys.modules:  # suites' figures may come from pyplot: release them
        sys.modules["matplotlib.pyplot"].close(fig)
    return base64.b64encode(buf.getvalue()).decode()


_WARN = ' style="color:#b00020"'


def _md_to_html(md: str) -> str:
    out, table = [], False
    for line in md.splitlines():
        inline = html.escape(line)
        inline = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", inline)
        inline = re.sub(r"`(.+?)`", r"<code>\1</code>", inline)
        if line.startswith("|"):
            cells = [c.strip() for c in inline.strip("|").split("|")]
            if all(set(c) <= {"-"} for c in cells):
                continue
            tag = "th" if not table else "td"
            out.append(
                ("<table>" if not table else "") + "<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>"
            )
            table = True
            continue
        if table:
            out.append("</table>")
            table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{inline[level:].strip()}</h{level}>")
        elif line.startswith("- "):
            out.append(f"<li{_WARN if 'WARNING:' in line else ''}>{inline[2:]}</li>")
        elif line.strip():
            out.append(f"<p{_WARN if line.startswith('**WARNING:') else ''}>{inline}</p>")
    if table:
        out.append("</table>")
    return "\n".join(out)


def write_reports(
    project: Project, loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]
) -> list[Path]:
    """`reports/<id>/report.{md,html}` (the stage reported last, beside the protocol's results block) and the same
    pair under `reports/<id>/<stage>/`, so that reporting a later stage (validation after preliminary) never erases
    an earlier stage's report; `clt report` adds that stage's results block there as `results.json`."""
    md = markdown_report(loaded, results, records)
    figs = [(title, _png(fig)) for title, fig in _figures(loaded, results, records)]
    body = _md_to_html(md) + "".join(
        f'<h3>{html.escape(t)}</h3><img alt="{html.escape(t)}" src="data:image/png;base64,{data}">' for t, data in figs
    )
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}"
    )
    page = (
        "<!doctype html><html><head><meta "
        f"charset='utf-8'><title>{loaded.id}</title><style>{style}</style></head><body>{body}</body></html>\n"
    )
    written = report_paths(project, loaded.id, results.stage)
    for md_path, html_path in zip(written[::2], written[1::2], strict=True):
        atomic_write_text(md_path, md)
        atomic_write_text(html_path, page)
    return written


def report_paths(project: Project, protocol_id: str, stage: str) -> list[Path]:
    """Where `write_reports` writes: report.md and report.html under reports/<id>/ and reports/<id>/<stage>/."""
    folders = (project.reports_dir / protocol_id, project.stage_reports_dir(protocol_id, stage))
    return [folder / name for folder in folders for name in ("report.md", "report.html")]
