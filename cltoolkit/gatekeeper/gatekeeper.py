"""The gatekeeper: run records -> the protocol's `results` block. Nothing else writes `results` / `status`."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cltoolkit import __version__
from cltoolkit._io import atomic_write_text, dump_json, dump_protocol
from cltoolkit.errors import Refusal
from cltoolkit.gatekeeper.checks import check_declared_aggregate, check_no_duplicates, check_toolkit_versions
from cltoolkit.gatekeeper.evidence import check_component_code, check_pinned_code, evidence_manifest
from cltoolkit.gatekeeper.gates import Hypothesis, decide_gates
from cltoolkit.project import Project
from cltoolkit.protocol.costs import EXECUTED, LEDGER_QUANTITIES, CostEstimates, MeasuredCosts, ResourceCosts
from cltoolkit.protocol.hashing import CANONICALIZATION, protocol_hash
from cltoolkit.protocol.lock import require_frozen
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.protocol.results import RESULTS_VERSION, BudgetCheck, GateResult, Results, RunCounts, RunSummary
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import Registries, registries
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import GridPoint, replicate_key
from cltoolkit.run.store import RunStore
from cltoolkit.run.trust import planned_points, refuse_untrusted
from cltoolkit.validation import load_protocol, validate_document

__all__ = ["CheckOutcome", "ReportOutcome", "check_budgets", "check_results", "gatekeep", "report_protocol"]


@dataclass
class ReportOutcome:
    results: Results
    document: dict[str, Any]
    records: list[RunRecord]
    protocol: ProtocolBase
    written: bool
    reports: list[Path]


def _ledger(record: RunRecord, quantity: str) -> float:
    b = record.budget
    if quantity == "totalUpdates":
        return float(b.gradientUpdates + b.replayUpdates)
    return float(getattr(b, quantity))


def check_budgets(protocol: ProtocolBase, records: Sequence[RunRecord]) -> list[BudgetCheck]:
    """Each declared fairness clause, from the ledgers of completed runs."""
    checks = []
    by_comp: dict[str, list[RunRecord]] = {}
    for rec in records:
        by_comp.setdefault(rec.spec.comparison, []).append(rec)
    for clause in protocol.budget.match:
        values: dict[str, float | None] = {}
        for comp in clause.across:
            vals = [_ledger(r, clause.quantity) for r in by_comp.get(comp, [])]
            values[comp] = float(np.mean(vals)) if vals else None
        known = [v for v in values.values() if v is not None]
        if len(known) < 2:
            ok, msg = True, "not enough completed runs to compare"
        else:
            lo, hi = min(known), max(known)
            rel = 0.0 if hi == 0 else (hi - lo) / abs(hi)
            ok = rel <= clause.relativeTolerance
            msg = (
                f"{clause.quantity}: "
                + ", ".join(f"{k} {v:g}" for k, v in values.items() if v is not None)
                + ("" if ok else f" differ by {rel:.1%} (allowed {clause.relativeTolerance:.1%})")
            )
        checks.append(
            BudgetCheck(quantity=clause.quantity, across=list(clause.across), values=values, ok=ok, message=msg)
        )
    return checks


def _kept(points: list[GridPoint], excluded: frozenset[str]) -> set[str]:
    """The replicates of a comparison's planned runs that an exclusion rule did not remove."""
    return {replicate_key(p.seed, p.order, p.cell) for p in points if p.run_id not in excluded}


def _hypotheses(
    protocol: ProtocolBase,
    usable: list[RunRecord],
    points: list[GridPoint],
    ok_ids: set[str],
    budgets: list[BudgetCheck],
    tasks: list[str],
    excluded: frozenset[str] = frozenset(),
    regs: Registries | None = None,
) -> list[Hypothesis]:
    regs = regs or registries()
    suite = regs.suite.get(protocol.suite)
    analysis = regs.new_analysis(suite.analysis) if suite.analysis else None
    out = []
    points_of: dict[str, list[GridPoint]] = {}
    for point in points:
        points_of.setdefault(point.comparison, []).append(point)
    records_of: dict[str, list[RunRecord]] = {}
    for rec in usable:
        records_of.setdefault(rec.spec.comparison, []).append(rec)
    for gate in protocol.gates:
        scopes = tasks if gate.scope == "each-task" else ["aggregate"]
        comps = [gate.method] + ([gate.reference] if gate.reference else [])
        planned = {c: points_of.get(c, []) for c in comps}
        missing = {c: [p.run_id for p in ps if p.run_id not in ok_ids] for c, ps in planned.items()}
        broken = [b for b in budgets if not b.ok and gate.reference and set(comps) <= set(b.across)]
        for scope in scopes:
            reason = ""
            if any(missing.values()):
                reason = "incomplete inputs: " + "; ".join(
                    f"{c} has {len(planned[c]) - len(m)} of {len(planned[c])} planned runs completed"
                    for c, m in missing.items()
                    if m
                )
            elif any(not ps for ps in planned.values()):
                reason = "no planned runs in this stage"
            elif broken:
                reason = "budget fairness violated: " + "; ".join(b.message for b in broken)
            elif analysis is None:
                reason = f"suite {protocol.suite!r} has no analysis"
            values, keys = None, []
            if not reason and analysis is not None:
                mv = analysis.replicates(
                    protocol, records_of.get(gate.method, []), gate.metric, gate.method, scope
                ).get(scope, {})
                keys = sorted(
                    _kept(planned[gate.method], excluded) & _kept(planned[gate.reference], excluded)
                    if gate.reference
                    else _kept(planned[gate.method], excluded)
                )
                if gate.reference:
                    rv = analysis.replicates(
                        protocol, records_of.get(gate.reference, []), gate.metric, gate.reference, scope
                    ).get(scope, {})
                    if not all(k in mv and k in rv for k in keys):
                        reason = "the analysis has no value for some replicates"
                    else:
                        values = np.array([mv[k] - rv[k] for k in keys])
                elif not all(k in mv for k in keys):
                    reason = "the analysis has no value for some replicates"
                else:
                    values = np.array([mv[k] for k in keys])
                if values is not None and values.size < 2:
                    reason, values = f"needs at least 2 replicates, has {values.size}", None
            usable_values = values if not reason else None
            out.append(Hypothesis(gate, scope, usable_values, reason, tuple(keys) if usable_values is not None else ()))
    return out


def gatekeep(
    project: Project,
    ref: str,
    *,
    stage: str | None = None,
    runs_dir: Path | None = None,
    aggregate: str | None = None,
    allow_mixed_code: bool = False,
) -> tuple[LoadedProtocol, Results, list[RunRecord]]:
    """Apply every refusal rule and compute the results block (writes nothing)."""
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    lock = require_frozen(project, loaded)
    protocol = loaded.model
    check_declared_aggregate(protocol, aggregate, loaded.id)
    store = RunStore(runs_dir or project.runs_dir, loaded.id)
    where = str(store.folder)
    scan = store.scan()
    records = list(scan.records.values())
    suite = regs.new_suite(protocol.suite)
    analysis = regs.new_analysis(suite.analysis) if suite.analysis else None
    refuse_untrusted(scan, where, protocol, lock.sha256, planned_points(suite, protocol), analysis)
    check_no_duplicates(scan, where)
    versions = check_toolkit_versions(records, protocol.analysis.allowMixedToolkitVersions, where)
    stage_id = protocol.stage(stage).id
    if protocol.stage(stage).purpose == "pilot":
        raise Refusal(
            f"{loaded.id}: stage {stage_id!r} is a pilot stage; pilot runs plan a study and never report results"
        )
    points = suite.plan(protocol, stage_id)
    by_id = {r.runId: r for r in records}
    used = [by_id[p.run_id] for p in points if p.run_id in by_id]
    mixed_code = check_component_code(used, allow_mixed_code, where)
    code_states, unpinned = check_pinned_code(used, lock, protocol.status, allow_mixed_code, where)
    mixed_code += unpinned
    excluded: dict[str, str] = {}
    for rule in protocol.analysis.exclusions:
        for p in points:
            rec = by_id.get(p.run_id)
            if rec is not None and rec.status.state in rule.statuses and p.run_id not in excluded:
                excluded[p.run_id] = rule.id
    states = {p.run_id: (by_id[p.run_id].status.state if p.run_id in by_id else "missing") for p in points}
    completed = [by_id[p.run_id] for p in points if states[p.run_id] == "completed"]
    budgets = check_budgets(protocol, completed)
    tasks = suite.tasks(protocol)
    ok_ids = {r.runId for r in completed}
    hyps = _hypotheses(protocol, completed, points, ok_ids | set(excluded), budgets, tasks, frozenset(excluded), regs)
    gates = _with_units(protocol, decide_gates(list(protocol.gates), hyps, protocol.analysis))
    exclusions: list[dict[str, Any]] = []
    if excluded:
        strict = decide_gates(
            list(protocol.gates),
            _hypotheses(protocol, completed, points, ok_ids, budgets, tasks, regs=regs),
            protocol.analysis,
        )
        exclusions = [{"runId": rid, "rule": rule, "status": states[rid]} for rid, rule in sorted(excluded.items())] + [
            {
                "sensitivity": {
                    g.id: {"withExclusions": g.decision, "withoutExclusions": s.decision}
                    for g, s in zip(gates, strict, strict=True)
                }
            }
        ]
    declared = {m.id for m in protocol.metrics}
    summaries = analysis.summaries(protocol, completed) if analysis and completed else {}
    results = Results(
        resultsVersion=RESULTS_VERSION,
        protocolSha256=lock.sha256,
        canonicalization=CANONICALIZATION,
        measuredOn=datetime.datetime.now(datetime.UTC).replace(microsecond=0),
        toolkitVersion=__version__,
        stage=stage_id,
        runs=RunCounts(**_counts(states, excluded)),
        gates=gates,
        budgetChecks=budgets,
        # built from validated records and the plan: constructed without a second validation of every row
        perRun=[
            RunSummary.model_construct(
                **_per_run(p, by_id.get(p.run_id), states[p.run_id], excluded.get(p.run_id), declared)
            )
            for p in points
        ],
        summaries=json.loads(json.dumps(summaries, allow_nan=False)),
        exclusions=exclusions,
        resourceCosts=_costs(completed, used, sum(1 for v in states.values() if v == "missing")).to_json(),
        toolkitVersions=versions,
        reports=[],
        evidence=evidence_manifest(used),
        mixedComponentCode=mixed_code,
        componentCode=code_states,
    )
    return loaded, results, used


def _with_units(protocol: ProtocolBase, gates: list[GateResult]) -> list[GateResult]:
    out = []
    for result, gate in zip(gates, protocol.gates, strict=True):
        es = protocol.evaluation_set(gate.metric)
        if es is not None:
            result = result.model_copy(
                update={"evaluationSet": es.id, "heldOutUnit": es.heldOutUnit, "oodAxis": list(es.varies)}
            )
        out.append(result)
    return out


def _counts(states: dict[str, str], excluded: dict[str, str]) -> dict[str, int]:
    values = list(states.values())
    return {
        "planned": len(values),
        "completed": values.count("completed"),
        "failed": values.count("failed"),
        "crashed": values.count("crashed"),
        "timeout": values.count("timeout") + values.count("interrupted"),
        "missing": values.count("missing"),
        "excluded": len(excluded),
    }


def _per_run(p: GridPoint, rec: RunRecord | None, state: str, rule: str | None, declared: set[str]) -> dict[str, Any]:
    scores = {k: v for k, v in (rec.metrics.items() if rec else []) if k in declared}
    return {
        "runId": p.run_id,
        "comparison": p.comparison,
        "seed": p.seed,
        "order": p.order,
        "cell": p.cell,
        "status": state,
        "excludedBy": rule,
        "scores": scores,
    }


def _costs(completed: list[RunRecord], attempted: list[RunRecord], missing: int = 0) -> ResourceCosts:
    """Compute accounting: analytical counts (ledgers), measured times, and estimates, kept apart."""
    per: dict[str, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    for rec in completed:
        row = per.setdefault(rec.spec.comparison, dict.fromkeys(LEDGER_QUANTITIES, 0.0))
        for q in LEDGER_QUANTITIES:
            row[q] += _ledger(rec, q)
        for q in EXECUTED:
            if _ledger(rec, q):
                row[q] = row.get(q, 0.0) + _ledger(rec, q)
    for rec in attempted:
        seconds[rec.spec.comparison] = round(seconds.get(rec.spec.comparison, 0.0) + rec.provenance.wallClockSeconds, 3)
    mean_s = float(np.mean([r.provenance.wallClockSeconds for r in completed])) if completed else None
    estimates = CostEstimates()
    if missing and mean_s is not None:
        estimates = CostEstimates(
            f"about {missing * mean_s:.0f} s of wall-clock for the {missing} missing run(s), extrapolated from the "
            "mean of completed runs (an estimate, not a measurement)",
            missing,
            round(missing * mean_s, 1),
        )
    measured = MeasuredCosts(
        wall_clock_s=round(sum(r.provenance.wallClockSeconds for r in attempted), 3),
        per_comparison_s=seconds,
        platforms=sorted({r.provenance.platform for r in attempted}),
        hardware=sorted({r.provenance.hardware for r in attempted if r.provenance.hardware}),
        devices=sorted({r.provenance.device for r in attempted}),
        precision=sorted({r.provenance.precision for r in attempted if r.provenance.precision}),
        runs_per_node=_per_node(attempted),
    )
    return ResourceCosts(per, measured, estimates)


def _per_node(attempted: list[RunRecord]) -> dict[str, int]:
    """Attempted runs per node (hostname, and the Ray node id where a cluster ran them); only where records name
    their node (records made before that have no `provenance.node`)."""
    if not any(r.provenance.node for r in attempted):
        return {}
    counts: dict[str, int] = {}
    for rec in attempted:
        node = rec.provenance.node or {}
        label = str(node.get("hostname") or "unrecorded")
        if node.get("rayNodeId"):
            label += f" (ray node {str(node['rayNodeId'])[:12]})"
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


def report_protocol(
    project: Project,
    ref: str,
    *,
    stage: str | None = None,
    dry_run: bool = False,
    runs_dir: Path | None = None,
    aggregate: str | None = None,
    allow_mixed_code: bool = False,
) -> ReportOutcome:
    """`clt report`: gatekeep, then write `results` and `status` into the protocol and the human reports."""
    loaded, results, records = gatekeep(
        project, ref, stage=stage, runs_dir=runs_dir, aggregate=aggregate, allow_mixed_code=allow_mixed_code
    )
    reports: list[Path] = []
    if not dry_run:
        from cltoolkit.report.render import write_reports

        project.writable(project.stage_reports_dir(loaded.id, results.stage))

        reports = write_reports(project, loaded, results, records)
        results = results.model_copy(update={"reports": [str(p.relative_to(project.root)) for p in reports]})
    document = dict(loaded.document)
    status = dict(document.get("status") or {})
    status.update({"stage": "reported", "updatedOn": results.measuredOn.date().isoformat()})
    status.setdefault("note", "")
    if not dry_run:
        status["reportedStages"] = list(dict.fromkeys([*(status.get("reportedStages") or []), results.stage]))
    document["status"] = status
    document["results"] = results.model_dump(mode="json")
    validate_document(document, str(loaded.path), expected_id=loaded.id)
    if protocol_hash(document) != protocol_hash(loaded.document):
        raise Refusal("internal check: writing results would change the hashed content; nothing was written")
    if not dry_run:
        atomic_write_text(
            project.stage_reports_dir(loaded.id, results.stage) / "results.json",
            dump_json(document["results"], sort_keys=False, row_lists=("perRun",)),
        )
        atomic_write_text(loaded.path, dump_protocol(document))
    return ReportOutcome(results, document, records, loaded.model, not dry_run, reports)


@dataclass
class CheckOutcome:
    """One committed results block recomputed from the records in place."""

    source: str
    stage: str
    records: int
    differences: list[str]


def _committed_blocks(project: Project, loaded: LoadedProtocol) -> list[tuple[str, dict[str, Any]]]:
    """The protocol's own results block and every per-stage `reports/<id>/<stage>/results.json`."""
    from cltoolkit.protocol.load import load_json_file

    blocks: list[tuple[str, dict[str, Any]]] = []
    own = loaded.document.get("results")
    if isinstance(own, dict):
        blocks.append((f"{loaded.path.name}: /results", own))
    folder = project.reports_dir / loaded.id
    for path in sorted(folder.glob("*/results.json")) if folder.is_dir() else []:
        blocks.append((str(path.relative_to(project.root)), load_json_file(path)))
    return blocks


def _manifest_problems(project: Project, loaded: LoadedProtocol, manifest: list[str]) -> list[tuple[str, str, str]]:
    """(where, stage, problem) for each reported stage (`status.reportedStages`) whose results block or report is
    gone, and for a manifest that lists nothing though results were reported."""
    out = []
    if manifest and not isinstance(loaded.document.get("results"), dict):
        out.append(
            (f"{loaded.path.name}: /results", manifest[-1], "the results block of a reported protocol is missing")
        )
    for stage in manifest:
        folder = project.stage_reports_dir(loaded.id, stage)
        for name in ("results.json", "report.md", "report.html"):
            if not (folder / name).is_file():
                where = str((folder / name).relative_to(project.root))
                out.append(
                    (where, stage, f"stage {stage!r} was reported (status.reportedStages) but {where} is missing")
                )
    return out


def _report_pair(project: Project, protocol_id: str, source: str, stage: str) -> tuple[Path, Path]:
    """report.md and report.html beside a committed block: the protocol's own block has the top-level pair
    (`reports/<id>/`), a stage's `results.json` the pair in its folder."""
    from cltoolkit.report.render import report_paths

    paths = report_paths(project, protocol_id, stage)
    md, html = paths[:2] if source.endswith(": /results") else paths[2:]
    return md, html


def _rendering_problems(
    project: Project, loaded: LoadedProtocol, source: str, committed: dict[str, Any], records: Sequence[RunRecord]
) -> list[str]:
    """The reports beside a committed results block, rendered again from that block and its records: any
    difference (an edited PASS, a deleted file) is named with its first differing line."""
    from cltoolkit.report.render import render_report

    try:
        block = Results.model_validate_json(json.dumps(committed))
    except ValueError:
        return []  # the block itself differs from the recomputed one: named by the comparison
    md_path, html_path = _report_pair(project, loaded.id, source, block.stage)
    md, page = render_report(project, loaded, block, records)
    problems = []
    for path, text in ((md_path, md), (html_path, page)):
        where = path.relative_to(project.root)
        if not path.is_file():
            problems.append(f"{where}: missing (its results block is committed)")
            continue
        on_disk = path.read_text(encoding="utf-8")
        if on_disk != text:
            line = next(
                (i for i, (a, b) in enumerate(zip(on_disk.splitlines(), text.splitlines(), strict=False), 1) if a != b),
                min(len(on_disk.splitlines()), len(text.splitlines())) + 1,
            )
            problems.append(f"{where}: differs from the report rendered from its results block (first at line {line})")
    return problems


def render_committed(project: Project, ref: str) -> list[Path]:
    """Write the reports of every committed results block again, rendered from the block and its records (after the
    report's layout changed). The blocks must reproduce from the records first (`check_results`, reports aside)."""
    from cltoolkit.report.render import render_report

    check_results(project, ref, reports=False)
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    written = []
    for source, committed in _committed_blocks(project, loaded):
        block = Results.model_validate_json(json.dumps(committed))
        _, _, records = gatekeep(project, ref, stage=block.stage, allow_mixed_code=bool(block.mixedComponentCode))
        md, page = render_report(project, loaded, block, records)
        md_path, html_path = _report_pair(project, loaded.id, source, block.stage)
        project.writable(md_path.parent)
        atomic_write_text(md_path, md)
        atomic_write_text(html_path, page)
        written += [md_path, html_path]
    return written


def check_results(project: Project, ref: str, *, reports: bool = True) -> list[CheckOutcome]:
    """`clt report --check`: recompute every committed results block of a protocol from the records in place and
    compare (everything but `measuredOn`). Raises `CheckFailed` naming each difference: an edited, added or removed
    record, or code that now computes another number."""
    from cltoolkit.errors import CheckFailed
    from cltoolkit.protocol.lock import diff_documents
    from cltoolkit.report.render import report_paths

    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    blocks = _committed_blocks(project, loaded)
    manifest = loaded.model.status.reportedStages if loaded.model.status else []
    if not blocks and not manifest:
        raise CheckFailed(f"{loaded.id} has no results to check: report it first (`clt report --protocol {loaded.id}`)")
    outcomes = [
        CheckOutcome(where, stage, 0, [problem])
        for where, stage, problem in (_manifest_problems(project, loaded, manifest) if reports else [])
    ]
    for source, committed in blocks:
        stage = committed.get("stage")
        _, results, records = gatekeep(
            project,
            ref,
            stage=stage if isinstance(stage, str) else None,
            allow_mixed_code=bool(committed.get("mixedComponentCode")),
        )
        paths = report_paths(project, loaded.id, results.stage)
        fresh = results.model_copy(update={"reports": [str(p.relative_to(project.root)) for p in paths]})
        now = json.loads(json.dumps(fresh.model_dump(mode="json"), allow_nan=False))
        was = {k: v for k, v in committed.items() if k != "measuredOn"}
        now.pop("measuredOn", None)
        if "componentCode" not in committed and not now.get("componentCode"):
            now.pop("componentCode", None)  # a block written before locks pinned code
        changes = [str(c) for c in diff_documents(was, now)]
        if reports:
            changes += _rendering_problems(project, loaded, source, committed, records)
        # which records changed comes first: the evidence lines name them by run id
        differences = sorted(changes, key=lambda line: not line.startswith("/evidence/"))
        outcomes.append(CheckOutcome(source, results.stage, len(records), differences))
    failed = [o for o in outcomes if o.differences]
    if failed:
        lines = []
        for o in failed:
            shown = [d for d in o.differences if d.startswith("/evidence/")]
            shown += [d for d in o.differences if not d.startswith("/evidence/")][:30]
            lines += [f"{o.source}: {d}" for d in shown]
            if len(shown) < len(o.differences):
                lines.append(f"{o.source}: ... and {len(o.differences) - len(shown)} more difference(s)")
        raise CheckFailed(
            f"{loaded.id}: {len(failed)} of {len(outcomes)} committed results block(s) do not reproduce from the "
            "records in place (committed -> recomputed):\n" + "\n".join(lines)
        )
    return outcomes
