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


def markdown_report(loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]) -> str:
    p = loaded.model
    r = results
    lines = [
        f"# {p.id}: {p.title}",
        "",
        f"Protocol hash `{r.protocolSha256}` ({r.canonicalization}); stage `{r.stage}`; measured {r.measuredOn:%Y-%m-%d %H:%M} UTC "
        f"by clt {r.toolkitVersion} (records from {', '.join(r.toolkitVersions) or '-'}).",
        "",
        f"Goal: {p.goal}",
        "",
        "## Runs",
        "",
        "| planned | completed | failed | crashed | timeout | missing | excluded |",
        "|---|---|---|---|---|---|---|",
        "| " + " | ".join(str(getattr(r.runs, k)) for k in ("planned", "completed", "failed", "crashed", "timeout", "missing", "excluded")) + " |",
        "",
    ]
    held_out = "; ".join(f"{c.id}: {c.heldOutUnit}" for c in p.claims) or "-"
    lines += ["## Gates", "", f"Held-out units: {held_out}. Multiplicity: {p.analysis.multiplicity} at alpha {p.analysis.alpha}.", ""]
    if r.gates:
        lines += ["| gate | test | scope | n | estimate | interval | p | p adj. | permutation p | decision |", "|---|---|---|---|---|---|---|---|---|---|"]
        for g in r.gates:
            for h in g.hypotheses:
                lines.append(
                    f"| {g.id} | {g.test} | {h.scope} | {h.n} | {_fmt(h.estimate)} | {_fmt(h.interval)} | {_fmt(h.pValue)} | "
                    f"{_fmt(h.pAdjusted)} | {_fmt(h.permutationP)} | **{h.decision}**{' (' + h.reason + ')' if h.reason else ''} |"
                )
        lines += ["", *[f"- {g.id}: {g.label} -> **{g.decision}**; {g.wording}" for g in r.gates], ""]
    else:
        lines += ["No gates are declared; the suite's summaries below are the results.", ""]
    if r.budgetChecks:
        lines += ["## Budget fairness", "", *[f"- {'ok' if b.ok else 'VIOLATED'}: {b.message}" for b in r.budgetChecks], ""]
    if r.exclusions:
        lines += ["## Exclusions (declared rules, with sensitivity)", "", *[f"- {e}" for e in r.exclusions], ""]
    suite = registries().suite.get(p.suite)
    if suite.analysis:
        analysis = registries().analysis.get(suite.analysis)()
        lines += [analysis.report_markdown(p, [x for x in records if x.status.state == "completed"], dict(r.summaries)), ""]
    lines += ["## Every planned run (raw scores)", "", "| run | comparison | seed | status | scores |", "|---|---|---|---|---|"]
    for run in r.perRun:
        scores = ", ".join(f"{k} {_fmt(v)}" for k, v in run.scores.items())
        lines.append(f"| {run.runId} | {run.comparison} | {run.seed} | {run.status} | {scores} |")
    costs = r.resourceCosts
    lines += [
        "",
        "## Reporting checklist",
        "",
        f"- Artifacts: protocol `{p.id}` at `{r.protocolSha256}`; toolkit {', '.join(r.toolkitVersions) or '-'}; "
        f"git commits {', '.join(sorted({str(x.provenance.gitCommit)[:12] + ('+dirty' if x.provenance.gitDirty else '') for x in records})) or '-'}.",
        f"- Seeds and stages: {'; '.join(f'{s.id}: seeds {s.seeds} orders {s.orders or [None]}' for s in p.seeds.stages)}.",
        f"- Split manifests: {', '.join(f'{k} [{v.start}, {v.stop})' for k, v in p.seeds.splits.items()) or 'none declared'}.",
        f"- Budget declared: {p.budget.fairness or '-'}",
        f"- Search record: hyperparameters as declared in the protocol's comparisons; {len(p.comparisons)} comparison(s).",
        f"- Exclusions: {len(r.exclusions) and 'see above' or 'none'}; every planned run is listed above.",
        f"- Compute (analytical, from ledgers): {costs.get('analytical', {}).get('perComparison')}",
        f"- Compute (measured): wall-clock {costs.get('measured', {}).get('wallClockSeconds')} s on {costs.get('measured', {}).get('platforms')}.",
        f"- Disclosures declared: {'; '.join(p.disclosures) or '-'}.",
        f"- Outside scope: {'; '.join(p.outsideScope) or '-'}.",
        "",
    ]
    return "\n".join(lines)


def _figures(loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]) -> list[tuple[str, Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: list[tuple[str, Any]] = []
    hyps = [(g, h) for g in results.gates for h in g.hypotheses if h.interval is not None and h.estimate is not None]
    if hyps:
        fig, ax = plt.subplots(figsize=(7, 0.5 + 0.4 * len(hyps)))
        for i, (g, h) in enumerate(hyps):
            lo, hi = h.interval  # type: ignore[misc]
            lo = lo if lo is not None else h.estimate
            hi = hi if hi is not None else h.estimate
            ax.plot([lo, hi], [i, i], color="C0")
            ax.plot([h.estimate], [i], "o", color="C1" if h.decision == "pass" else "C3")
        ax.set_yticks(range(len(hyps)), [f"{g.id}/{h.scope}" for g, h in hyps], fontsize=7)
        ax.set_title("Gate estimates with simultaneous bounds (one-sided bounds drawn to the estimate)")
        figs.append(("Gate intervals", fig))
    suite = registries().suite.get(loaded.model.suite)
    if suite.analysis:
        analysis = registries().analysis.get(suite.analysis)()
        figs += analysis.figures(loaded.model, [r for r in records if r.status.state == "completed"], dict(results.summaries))
    return figs


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


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
            out.append(("<table>" if not table else "") + "<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
            table = True
            continue
        if table:
            out.append("</table>")
            table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{inline[level:].strip()}</h{level}>")
        elif line.startswith("- "):
            out.append(f"<li>{inline[2:]}</li>")
        elif line.strip():
            out.append(f"<p>{inline}</p>")
    if table:
        out.append("</table>")
    return "\n".join(out)


def write_reports(project: Project, loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]) -> list[Path]:
    folder = project.reports_dir / loaded.id
    md = markdown_report(loaded, results, records)
    figs = [(title, _png(fig)) for title, fig in _figures(loaded, results, records)]
    md_path, html_path = folder / "report.md", folder / "report.html"
    atomic_write_text(md_path, md)
    body = _md_to_html(md) + "".join(
        f'<h3>{html.escape(t)}</h3><img alt="{html.escape(t)}" src="data:image/png;base64,{data}">' for t, data in figs
    )
    style = "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}"
    atomic_write_text(html_path, f"<!doctype html><html><head><meta charset='utf-8'><title>{loaded.id}</title><style>{style}</style></head><body>{body}</body></html>\n")
    return [md_path, html_path]
