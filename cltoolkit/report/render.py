"""Markdown + self-contained HTML (plots embedded as PNG data) from a results block and its records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cltoolkit._io import atomic_write_text
from cltoolkit.project import Project
from cltoolkit.protocol.costs import ResourceCosts
from cltoolkit.protocol.load import display_path
from cltoolkit.protocol.lock_history import in_git_checkout
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.protocol.results import Results
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import Registries, registries
from cltoolkit.report.checklist import commit_lines, compute_lines, split_lines
from cltoolkit.report.figures import draw_figure_blocks
from cltoolkit.report.format import decision_text, fmt, interval_text, p_text, permutation_text
from cltoolkit.report.notes import amendment_lines, amendments_in_full, errata_lines, folded
from cltoolkit.report.page import Blank, Block, Item, Page, Paragraph, parse_markdown
from cltoolkit.report.runs import diagnostic_lines, failure_lines, redone_lines, reused_lines, sample_lines
from cltoolkit.run.record import RunRecord

__all__ = [
    "draw_figure_blocks",
    "figure_blocks",
    "markdown_report",
    "render_report",
    "report_page",
    "report_paths",
    "write_reports",
]


NO_GIT = (
    "this project is not a git checkout: the history checks (every committed record, seal, lock, erratum and "
    "amendment against earlier commits) could not run; `clt protocol verify --without-git` checks hashes and "
    "snapshots only."
)
"""The one line a report rendered outside a git checkout carries: a fact of where it was rendered, not of its results
block, so `clt report --check` compares reports without it (`without_environment_lines`)."""
NO_GIT_MARK = NO_GIT.split(";")[0]
"""The part of `NO_GIT` that reads the same in Markdown and HTML."""


def without_environment_lines(text: str) -> str:
    """A report's text without the lines that depend on where it was rendered (the no-git warning)."""
    out: list[str] = []
    skip_blank = False
    for line in text.splitlines(keepends=True):
        if NO_GIT_MARK in line:
            skip_blank = True  # and the blank line that separates it from what follows
            continue
        if not (skip_blank and not line.strip()):
            out.append(line)
        skip_blank = False
    return "".join(out)


def _verdict(p: Any, r: Results) -> str:
    """One line that answers first: how many confirmatory gates pass, which fail or cannot be evaluated."""
    if not r.gates:
        return f"**Verdict:** {_incomplete(r)}no gates are declared; the suite's summaries below are the results."
    confirmatory = {g.id for g in p.gates if g.confirmatory}
    conf = [g for g in r.gates if g.id in confirmatory and g.test != "report-only"]
    parts = []
    if conf:
        passed = [g.id for g in conf if g.decision == "pass"]
        parts.append(
            f"{len(passed)} of {len(conf)} confirmatory gates pass" + (f" ({', '.join(passed)})" if passed else "")
        )
        for decision, word in (("fail", "fail"), ("not-evaluable", "not evaluable")):
            ids = [g.id for g in conf if g.decision == decision]
            if ids:
                parts.append(f"{word}: {', '.join(ids)}")
    explo = [g for g in r.gates if g.id not in confirmatory and g.test != "report-only"]
    if explo:
        parts.append("exploratory (unadjusted): " + ", ".join(f"{g.id} {g.decision}" for g in explo))
    reported = [g.id for g in r.gates if g.test == "report-only"]
    if reported:
        parts.append(f"reported without a claim: {', '.join(reported)}")
    first = ""
    level = r.clusterLevel
    if level is not None:
        pre = {g.id: g.decision for g in r.gates}
        n = max((h.n for g in level.gates for h in g.hypotheses), default=0)
        if level.differs:
            changed = "; ".join(f"{g.id} {pre[g.id]} -> {g.decision}" for g in level.gates if g.id in level.differs)
            first = (
                f"At the cluster level of the design (replicates that share data or streams averaged, up to {n} "
                f"clusters; not pre-registered) {len(level.differs)} gate(s) would be decided otherwise: {changed}. "
                "Pre-registered: "
            )
        else:
            parts.append(
                f"the same decisions at the cluster level of the design (up to {n} clusters; not pre-registered)"
            )
    return f"**Verdict:** {_incomplete(r)}{_exploratory(p, r, conf)}{first}{'; '.join(parts)}."


def _exploratory(p: Any, r: Results, confirmatory: list[Any]) -> str:
    """An exploratory stage of a protocol with confirmatory gates says, before its gate lines, that the decisions are
    another stage's."""
    if not confirmatory or p.stage(r.stage).purpose != "exploratory":
        return ""
    deciding = [s.id for s in p.seeds.stages if s.purpose == "confirmatory"]
    where = f"stage `{deciding[-1]}` decides them" if deciding else "no stage of the protocol is confirmatory"
    return (
        f"stage `{r.stage}` is exploratory: its confirmatory-gate lines are readings at this stage's replicates, not "
        f"the protocol's decisions ({where}). "
    )


def _incomplete(r: Results) -> str:
    """A stage reported while its runs go on says so before any decision."""
    runs = r.runs
    if not runs.missing:
        return ""
    return (
        f"incomplete stage ({runs.completed} of {runs.planned} planned runs completed, {runs.missing} not yet run): "
        "every number below is of the runs so far. "
    )


def _unit(gate: Any, regs: Registries) -> str:
    """The gate's declared unit (the protocol's word; its metric's may name another)."""
    if gate is None:
        return "-"
    if gate.unit:
        return str(gate.unit)
    return str(regs.metric.get(gate.metric).unit) if gate.metric in regs.metric else "-"


def _claims(p: Any, r: Results, regs: Registries) -> list[str]:
    """Each claim with estimate, interval (level and kind), unit and decision, before any detail."""
    if not r.gates:
        return []
    gates = {g.id: g for g in p.gates}
    lines = [
        "## Claims",
        "",
        "| gate | claim | test | n | estimate | interval | unit | decision |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in r.gates:
        decider = next((h for h in g.hypotheses if h.estimate == g.estimate), g.hypotheses[0] if g.hypotheses else None)
        declared = gates.get(g.id)
        lines.append(
            f"| {g.id} | {g.label} | {g.test} | {g.n} | {fmt(g.estimate)} | {interval_text(decider)} | "
            f"{_unit(declared, regs)} | {decision_text(g.decision, bool(declared and declared.confirmatory))} |"
        )
    stat = "median" if p.analysis.aggregate == "median" else "mean"
    by_median = (
        " The declared aggregate is the median: the exact sign test decides and intervals are order statistics "
        "(distribution-free); the t test and the permutation p about the mean are sensitivity analyses."
        if stat == "median"
        else ""
    )
    lines += [
        "",
        f"Sign convention: a paired gate's estimate is the {stat} paired difference, the gate's method minus its "
        f"reference, in the metric's unit; a one-sample gate's is the {stat}.{by_median} Intervals are one-sided "
        "bounds (`>=`, `<=`) or two-sided intervals at the stated confidence level; Holm-simultaneous bounds hold "
        "jointly over the confirmatory family, marginal ones for one hypothesis alone; for a hypothesis Holm "
        "rejects, the compatible bound is the tested threshold itself (it says the claim holds, not by how much). "
        "Exploratory gates are decided at the unadjusted level and are not confirmatory evidence.",
        "",
    ]
    return lines


def _headline(p: Any, r: Results, regs: Registries) -> list[str]:
    """The suite analysis's lines for the top of the report (with a blank line after), or none."""
    suite = regs.suite.get(p.suite)
    if not suite.analysis:
        return []
    lines = regs.new_analysis(suite.analysis).headline(p, dict(r.summaries))
    return [*lines, ""] if lines else []


def report_page(loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord], regs: Registries) -> Page:
    """The report as one page model; `regs` are the project's registries."""
    p = loaded.model
    r = results
    blocks: list[Block] = parse_markdown(
        [
            f"# {p.id}: {p.title}",
            "",
            f"Protocol hash `{r.protocolSha256}` ({r.canonicalization}); stage `{r.stage}`; measured "
            f"{r.measuredOn:%Y-%m-%d %H:%M} UTC "
            f"by clt {r.toolkitVersion} (records from {', '.join(r.toolkitVersions) or '-'}).",
            "",
        ]
    )
    blocks += [Paragraph(_verdict(p, r), "verdict"), Blank()]
    headline, headline_full = folded(_headline(p, r, regs))
    errata, errata_full = folded(errata_lines(p))
    blocks += parse_markdown(
        [
            *headline,
            f"Goal: {p.goal}",
            "",
            f"Evidence: {len(r.evidence)} sealed run record(s), each pinned by its seal in the results block "
            f"(`evidence`); `clt report --protocol {p.id} --check` recomputes these results from them.",
            "",
        ]
    )
    if r.mixedComponentCode:
        blocks += [
            Paragraph(
                "**WARNING: records of one comparison come from different component code (reported with "
                "--allow-mixed-code):**",
                "warning",
            ),
            Blank(),
            *(Item(f"**WARNING: {line}**", "warning") for line in r.mixedComponentCode),
            Blank(),
        ]
    if not in_git_checkout(loaded.path.parent):
        blocks += [Paragraph(f"**WARNING: {NO_GIT}**", "warning"), Blank()]
    if loaded.warnings:
        source = display_path(loaded.path) + ": "
        blocks += [
            Paragraph(
                "**WARNING: the protocol's design warnings (from validation; they did not block it):**", "warning"
            ),
            Blank(),
            *(Item(f"**WARNING: {w.removeprefix(source)}**", "warning") for w in loaded.warnings),
            Blank(),
        ]
    lines = [
        *amendment_lines(p),
        *errata,
        *_claims(p, r, regs),
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
        *failure_lines(records),
        *redone_lines(r, records),
    ]
    held_out = "; ".join(f"{c.id}: {c.heldOutUnit}" for c in p.claims) or "-"
    lines += [
        "## Gates",
        "",
        f"Claims and their held-out units: {held_out}. Multiplicity: {p.analysis.multiplicity} at alpha "
        f"{p.analysis.alpha}; declared aggregate: {p.analysis.aggregate}.",
        "",
        *reused_lines(r, records),
    ]
    median = p.analysis.aggregate == "median"
    if r.gates:
        lines += [
            "| gate | held-out unit | OOD axis | test | scope | n | estimate | interval | p | p adj. | permutation p "
            + ("(mean; sensitivity) | decision |" if median else "(same hypothesis) | decision |"),
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        confirmatory = {g.id for g in p.gates if g.confirmatory}
        for g in r.gates:
            axis = ", ".join(g.oodAxis) or ("none (same population)" if g.heldOutUnit else "-")
            for h in g.hypotheses:
                lines.append(
                    f"| {g.id} | {g.heldOutUnit or '-'} | {axis} | {g.test} | {h.scope} | {h.n} | {fmt(h.estimate)} | "
                    f"{interval_text(h)} | {p_text(h.pValue)} | "
                    f"{p_text(h.pAdjusted)} | {permutation_text(h)} | "
                    f"{decision_text(h.decision, g.id in confirmatory)}{' (' + h.reason + ')' if h.reason else ''} |"
                )
        lines += [
            "",
            "Permutation p: the sign-flip test of the gate's own hypothesis (one-sided in the claimed direction for "
            "bound, superiority and non-inferiority gates; the larger one-sided p for equivalence; two-sided for "
            "report-only), exact (all 2^n sign flips) or Monte Carlo with its draws and standard error. Where the "
            "replicates have no spread the t statistic is undefined and the exact test decides."
            + (
                " Under the declared median aggregate the p column is the exact sign test (which decides) and the "
                "permutation p tests symmetry about the threshold (a mean-type test): a sensitivity analysis, not the "
                "same hypothesis."
                if median
                else ""
            ),
            "",
            *_unit_lines(p),
            *_cluster_level_lines(r),
            *[
                f"- {g.id}: {g.label} -> {decision_text(g.decision, g.id in confirmatory)}; {g.wording}"
                for g in r.gates
            ],
            "",
            "<!-- figures:gates -->",
            "",
        ]
    else:
        lines += ["No gates are declared; the suite's summaries below are the results.", ""]
    if r.budgetChecks:
        lines += [
            "## Budget fairness",
            "",
            *[f"- {'ok' if b.ok else 'VIOLATED'}: {b.message}" for b in r.budgetChecks],
            *(
                sample_lines([x for x in records if x.status.state == "completed"])
                if regs.suite.get(p.suite).counts_samples
                else []
            ),
            "",
        ]
    lines += diagnostic_lines([x for x in records if x.status.state == "completed"])
    if r.exclusions:
        lines += ["## Exclusions (declared rules, with sensitivity)", "", *[f"- {e}" for e in r.exclusions], ""]
    suite = regs.suite.get(p.suite)
    analysis = regs.new_analysis(suite.analysis) if suite.analysis else None
    completed = [x for x in records if x.status.state == "completed"]
    if analysis is not None:
        lines += [analysis.report_markdown(p, completed, dict(r.summaries)), "", "<!-- figures:suite -->", ""]
    from cltoolkit.report.standard import matrix_markdown, with_standard_entries

    lines += [matrix_markdown(with_standard_entries(completed, analysis, p)), "<!-- figures:runs -->", ""]
    lines += [
        *amendments_in_full(p),
        *errata_full,
        *headline_full,
        "## Every planned run (raw scores)",
        "",
        "| run | comparison | seed | status | scores |",
        "|---|---|---|---|---|",
    ]
    for run in r.perRun:
        scores = ", ".join(f"{k} {fmt(v)}" for k, v in run.scores.items())
        lines.append(f"| {run.runId} | {run.comparison} | {run.seed} | {run.status} | {scores} |")
    costs = ResourceCosts.from_json(r.resourceCosts)
    lines += [
        "",
        "## Reporting checklist",
        "",
        f"- Artifacts: protocol `{p.id}` at `{r.protocolSha256}`; toolkit {', '.join(r.toolkitVersions) or '-'}; "
        f"git commits {', '.join(commit_lines(records)) or 'not recorded'}.",
        "- Seeds and stages: "
        + "; ".join(
            f"{s.id}: seeds {fmt(s.seeds)}"
            + (f", task orders {', '.join(s.orders)}" if s.orders else "")
            + (f", comparisons {', '.join(s.comparisons)}" if s.comparisons else "")
            for s in p.seeds.stages
        )
        + ".",
        "- Generator seed ranges: "
        f"{', '.join(f'{k} [{v.start}, {v.stop})' for k, v in p.seeds.splits.items()) or 'none declared'}.",
        *split_lines(records, loaded.path.resolve().parent.parent / "registry" / "locks" / f"{p.id}.splits.json"),
        f"- Budget declared: {p.budget.fairness or '-'}",
        f"- Search record: hyperparameters as declared in the protocol's comparisons; {len(p.comparisons)} "
        "comparison(s).",
        f"- Exclusions: {(len(r.exclusions) and 'see above') or 'none'}; every planned run is listed above.",
        "- Compute: see the table below (measured, analytical counts and estimates kept apart).",
        f"- Disclosures declared: {'; '.join(p.disclosures) or '-'}.",
        _code_line(r),
        f"- Errata found after freezing (not pre-registered): {len(p.status.errata) if p.status else 0}"
        + (" (see the top)." if p.status and p.status.errata else "."),
        f"- Outside scope: {'; '.join(p.outsideScope) or '-'}.",
        "",
        *compute_lines(costs),
    ]
    return Page((*blocks, *parse_markdown(lines)))


def _cluster_level_lines(r: Results) -> list[str]:
    """The gates at the cluster level of the design, beside the pre-registered ones (not pre-registered)."""
    level = r.clusterLevel
    if level is None:
        return []
    unit = level.unit
    groups = "; ".join("+".join(str(c) for c in g) for g in unit.get("cellGroups") or [])  # type: ignore[union-attr]
    lines = [
        "### Gates at the cluster level (not pre-registered)",
        "",
        f"This protocol declared no unit of analysis; its design makes replicates that agree on "
        f"{', '.join(str(b) for b in unit.get('by') or [])} dependent"  # type: ignore[union-attr]
        + (f" (cell groups: {groups})" if groups else "")
        + f": {unit.get('shares')}. The same gates on cluster means (n counts clusters); the pre-registered "
        "decisions above stand.",
        "",
        "| gate | scope | n (clusters) | estimate | interval | p | decision | pre-registered |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pre = {(g.id, h.scope): h.decision for g in r.gates for h in g.hypotheses}
    for g in level.gates:
        for h in g.hypotheses:
            before = pre.get((g.id, h.scope))
            mark = " (differs)" if h.decision != before else ""
            lines.append(
                f"| {g.id} | {h.scope} | {h.n} | {fmt(h.estimate)} | {interval_text(h)} | {p_text(h.pValue)} | "
                f"{h.decision}{mark} | {before} |"
            )
    return [*lines, ""]


def _unit_lines(p: ProtocolBase) -> list[str]:
    """The declared unit of analysis (what n counts) and a schema-1 permutation plan the code exceeded."""
    lines = []
    plan = p.analysis.clusters
    if plan is not None:
        groups = "; ".join("+".join(g) for g in plan.cellGroups)
        lines += [
            f"Unit of analysis (declared): replicates agreeing on {', '.join(plan.by)} are one cluster"
            + (f" (cell groups: {groups})" if groups else "")
            + f"; n counts clusters, each the mean of its replicates' values. Shared within a cluster: {plan.shares}",
            "",
        ]
    note = p.analysis.permutation_plan_note()
    if note:
        lines += [f"Permutation plan: {note}.", ""]
    return lines


def markdown_report(loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord], regs: Registries) -> str:
    """The Markdown report; `regs` are the project's registries."""
    return report_page(loaded, results, records, regs).markdown()


def _code_line(r: Results) -> str:
    """Per component: the records' code as frozen, amended or differing; or that the lock pins no code."""
    if not r.componentCode:
        return (
            "- Evaluator code: not pinned (this protocol was frozen before locks pinned component code; the records "
            "carry their own source digests)."
        )
    return (
        "- Evaluator code (pinned at freezing): "
        + "; ".join(f"`{k}` {v}" for k, v in sorted(r.componentCode.items()))
        + "."
    )


def write_reports(
    project: Project,
    loaded: LoadedProtocol,
    results: Results,
    records: Sequence[RunRecord],
    blocks: Callable[[], dict[str, str]] | None = None,
) -> list[Path]:
    """`reports/<id>/report.{md,html}` (the stage reported last, beside the protocol's results block) and the same
    pair under `reports/<id>/<stage>/`, so that reporting a later stage (validation after preliminary) never erases
    an earlier stage's report; `clt report` adds that stage's results block there as `results.json`. `blocks`: the
    figures (`figure_blocks`, deferred: `report.forked`), asked for once the page is built."""
    md, page = render_report(project, loaded, results, records, blocks)
    written = report_paths(project, loaded.id, results.stage)
    for md_path, html_path in zip(written[::2], written[1::2], strict=True):
        atomic_write_text(md_path, md)
        atomic_write_text(html_path, page)
    return written


def figure_blocks(
    project: Project, loaded: LoadedProtocol, results: Results, records: Sequence[RunRecord]
) -> dict[str, str]:
    """The report's figures as HTML by the section they support, as `clt report` writes them. Where the suite draws
    figures of its own (matplotlib: 0.4 CPU-seconds and more), kept from the last report of the same inputs where
    this machine drew them (`figure_cache`), drawn and kept otherwise; where it draws none, drawn now: the toolkit's
    own SVG charts cost less than the cache's key (about 0.03 against 0.05 CPU-seconds over 10,000 records)."""
    from cltoolkit.report.figure_cache import figures_key, load_figures, store_figures

    regs = registries(project.components_file)
    if not _suite_draws(loaded, regs):
        return draw_figure_blocks(project, loaded, results, records)
    folder = project.stage_reports_dir(loaded.id, results.stage)
    key = figures_key(project, loaded, results, records, regs)
    kept = load_figures(folder, key)
    if kept is not None:
        return kept
    blocks = draw_figure_blocks(project, loaded, results, records)
    store_figures(folder, key, blocks)
    return blocks


def _suite_draws(loaded: LoadedProtocol, regs: Registries) -> bool:
    """Whether the protocol's suite has an analysis that draws figures of its own (overrides `Analysis.figures`)."""
    from cltoolkit.components import Analysis

    name = regs.suite.get(loaded.model.suite).analysis
    return name is not None and type(regs.new_analysis(name)).figures is not Analysis.figures


def render_report(
    project: Project,
    loaded: LoadedProtocol,
    results: Results,
    records: Sequence[RunRecord],
    blocks: Callable[[], dict[str, str]] | None = None,
) -> tuple[str, str]:
    """The Markdown and HTML text of a report: a function of the results block, the records and the protocol only
    (no clock, no machine), so `clt report --check` can render it again and compare. `blocks`: see `write_reports`
    (default: the figures are drawn here, never taken from the cache, so `clt report --check` draws them again)."""
    regs = registries(project.components_file)
    page_model = report_page(loaded, results, records, regs)
    md = page_model.markdown()  # the Markdown report lists no images
    body = page_model.html_body(blocks() if blocks else draw_figure_blocks(project, loaded, results, records))
    style = (
        "body{font-family:sans-serif;max-width:1180px;margin:auto;padding:0 12px;line-height:1.4}"
        "table{border-collapse:collapse;margin:6px 0;max-width:100%}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px;vertical-align:top}.n{white-space:nowrap}"
        "th{background:#f3f3f3}#verdict{font-size:18px;padding:8px 12px;background:#f6f8fa;border-left:4px solid #444}"
        ".pass{color:#0a7d32}.fail{color:#b00020}.ne{color:#666}.rep{color:#1f4e9c}"
        "figure{margin:12px 0}figcaption{font-weight:bold;margin-bottom:4px}img{max-width:100%;height:auto}"
    )
    page = (
        "<!doctype html><html><head><meta "
        f"charset='utf-8'><title>{loaded.id}</title><style>{style}</style></head><body>{body}</body></html>\n"
    )
    return md, page


def report_paths(project: Project, protocol_id: str, stage: str) -> list[Path]:
    """Where `write_reports` writes: report.md and report.html under reports/<id>/ and reports/<id>/<stage>/."""
    folders = (project.reports_dir / protocol_id, project.stage_reports_dir(protocol_id, stage))
    return [folder / name for folder in folders for name in ("report.md", "report.html")]
