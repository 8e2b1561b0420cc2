"""The gatekeeper: run records -> the protocol's `results` block. Nothing else writes `results` / `status`."""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cltoolkit import __version__
from cltoolkit._io import atomic_write_text, dump_protocol, dump_results
from cltoolkit.component_validation import load_protocol, validate_document
from cltoolkit.errors import Refusal
from cltoolkit.gatekeeper.budgets import check_budgets, resource_costs
from cltoolkit.gatekeeper.checks import check_declared_aggregate, check_no_duplicates, check_toolkit_versions
from cltoolkit.gatekeeper.evidence import check_component_code, check_pinned_code, evidence_manifest
from cltoolkit.gatekeeper.gates import Hypothesis, decide_gates
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import CANONICALIZATION, protocol_hash
from cltoolkit.protocol.lock import require_frozen
from cltoolkit.protocol.models import ClusterPlan, ProtocolBase
from cltoolkit.protocol.results import (
    RESULTS_VERSION,
    BudgetCheck,
    ClusterLevel,
    GateResult,
    Results,
    RunCounts,
    RunSummary,
)
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import Registries, registries
from cltoolkit.run.provenance import EVALUATOR, component_digest
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import GridPoint, replicate_key
from cltoolkit.run.store import RunStore, collection_paused
from cltoolkit.run.trust import planned_points, refuse_untrusted

__all__ = ["ReportOutcome", "gatekeep", "report_protocol"]


DRAFT_NOTES = ("New version of ", "Draft from the ")
"""How the notes clt writes into a draft's status begin (`clt protocol bump`, `clt init`): they say "not frozen"
or "draft", which a report makes untrue, so a report replaces them; a note a person wrote is kept as written."""


def _reported_note(note: str, results: Results) -> str:
    if note and not note.startswith(DRAFT_NOTES):
        return note
    runs = results.runs
    partial = runs.completed < runs.planned
    return (
        f"Frozen; stage {results.stage!r} reported {results.measuredOn:%Y-%m-%d}: {runs.completed} of {runs.planned} "
        "planned runs completed" + (" (PARTIAL: gates lacking runs are not evaluable)." if partial else ".")
    )


@dataclass
class ReportOutcome:
    results: Results
    document: dict[str, Any]
    records: list[RunRecord]
    protocol: ProtocolBase
    written: bool
    reports: list[Path]


def _kept(points: list[GridPoint], excluded: frozenset[str]) -> set[str]:
    """The replicates of a comparison's planned runs that an exclusion rule did not remove."""
    return {replicate_key(p.seed, p.order, p.cell) for p in points if p.run_id not in excluded}


def _cluster_means(
    values: np.ndarray, keys: list[str], points: Mapping[str, GridPoint], plan: ClusterPlan
) -> tuple[np.ndarray, list[str]]:
    """Each cluster's mean of its replicates' values (paired differences or a method's values), by cluster id: the
    declared unit of analysis, so n counts clusters. `points`: replicate key -> a planned run of that replicate
    (its seed, order and cell name the cluster)."""
    groups: dict[str, list[float]] = {}
    for value, key in zip(values.tolist(), keys, strict=True):
        point = points[key]
        groups.setdefault(plan.cluster_of(point.seed, point.order, point.cell), []).append(value)
    ids = sorted(groups)
    return np.array([float(np.mean(groups[c])) for c in ids]), ids


def _hypotheses(
    protocol: ProtocolBase,
    usable: list[RunRecord],
    points: list[GridPoint],
    ok_ids: set[str],
    budgets: list[BudgetCheck],
    tasks: list[str],
    excluded: frozenset[str] = frozenset(),
    regs: Registries | None = None,
    clusters: ClusterPlan | None = None,
) -> list[Hypothesis]:
    """One hypothesis per gate and scope: the replicates' values (a comparison's paired differences), or the
    cluster means under the declared unit of analysis (or `clusters`, the suite's, for the not-pre-registered
    cluster-level gates)."""
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
                unit_plan = clusters or protocol.analysis.clusters
                if values is not None and unit_plan is not None:
                    of_key = {replicate_key(p.seed, p.order, p.cell): p for p in planned[gate.method]}
                    values, keys = _cluster_means(values, keys, of_key, unit_plan)
                unit = "replicates" if unit_plan is None else "clusters"
                if values is not None and values.size < 2:
                    reason, values = f"needs at least 2 {unit}, has {values.size}", None
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
    remember_seals: bool = False,
) -> tuple[LoadedProtocol, Results, list[RunRecord]]:
    """Apply every refusal rule and compute the results block (writes nothing, except with `remember_seals` the
    store's memory of checked seals: `RunStore.scan`)."""
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    lock = require_frozen(project, loaded)
    protocol = loaded.model
    check_declared_aggregate(protocol, aggregate, loaded.id)
    store = RunStore(runs_dir or project.runs_dir, loaded.id)
    where = str(store.folder)
    scan = store.scan(remember=remember_seals)
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
    reporting = {}
    if suite.analysis and lock.components is not None:  # the analysis computes the results now: evaluator code
        reporting[f"analysis:{suite.analysis}"] = component_digest(regs.analysis.target(suite.analysis))
    if lock.components is not None:  # and the gatekeeper and statistics, where the lock pins them
        reporting.update({k: component_digest(t) for k, t in EVALUATOR.items() if k in lock.components})
    code_states, unpinned = check_pinned_code(used, lock, protocol.status, allow_mixed_code, where, reporting)
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
    cluster_level = None
    derived = suite.derived_clusters(protocol) if protocol.analysis.clusters is None and protocol.gates else None
    if derived is not None:  # the same gates on the clusters the design makes: not pre-registered, shown beside
        clustered = _hypotheses(
            protocol, completed, points, ok_ids | set(excluded), budgets, tasks, frozenset(excluded), regs, derived
        )
        at_clusters = _with_units(protocol, decide_gates(list(protocol.gates), clustered, protocol.analysis))
        cluster_level = ClusterLevel(
            unit=derived.model_dump(mode="json"),
            gates=at_clusters,
            differs=[g.id for g, c in zip(gates, at_clusters, strict=True) if g.decision != c.decision],
        )
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
    diagnostics = _method_diagnostics(completed)
    if diagnostics:  # a method's own numbers (`diagnostics()`), exported beside the suite's summaries
        summaries = {**summaries, "methodDiagnostics": diagnostics}
    results = Results(
        resultsVersion=RESULTS_VERSION,
        protocolSha256=lock.sha256,
        canonicalization=CANONICALIZATION,
        measuredOn=datetime.datetime.now(datetime.UTC).replace(microsecond=0),
        toolkitVersion=__version__,
        stage=stage_id,
        runs=RunCounts(**_counts(states, excluded), redone=sum(by_id[i].redone for i in states if i in by_id) or None),
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
        resourceCosts=resource_costs(completed, used, sum(1 for v in states.values() if v == "missing")).to_json(),
        toolkitVersions=versions,
        reports=[],
        evidence=evidence_manifest(used),
        mixedComponentCode=mixed_code,
        clusterLevel=cluster_level,
        componentCode=code_states,
    )
    return loaded, results, used


def _method_diagnostics(completed: list[RunRecord]) -> dict[str, dict[str, dict[str, float | int]]]:
    """comparison -> diagnostic -> {runs, mean} over the completed records that carry `metrics.methodDiagnostics`
    (empty where none does, as in every record made before methods reported them)."""
    values: dict[str, dict[str, list[float]]] = {}
    for rec in completed:
        for key, value in (rec.section("methodDiagnostics") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                values.setdefault(rec.spec.comparison, {}).setdefault(key, []).append(float(value))
    return {
        comp: {key: {"runs": len(v), "mean": sum(v) / len(v)} for key, v in sorted(keys.items())}
        for comp, keys in sorted(values.items())
    }


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
    """`clt report`: gatekeep, then write `results` and `status` into the protocol and the human reports.

    The report's figures are drawn in a forked child while this process builds the document, validates it and
    writes the page (`report.forked`); nothing is written before the document validates. The garbage collector
    is paused throughout (`collection_paused`: the records are many small acyclic objects)."""
    if not dry_run:  # the results block is written into the protocol file: only one inside the project
        project.writable(project.resolve_protocol(ref))
    regs = registries(project.components_file)
    with collection_paused():
        loaded, results, records = gatekeep(
            project,
            ref,
            stage=stage,
            runs_dir=runs_dir,
            aggregate=aggregate,
            allow_mixed_code=allow_mixed_code,
            remember_seals=not dry_run,
        )
        if dry_run:
            return ReportOutcome(
                results, _reported_document(loaded, results, dry_run, regs), records, loaded.model, False, []
            )
        from cltoolkit.report.forked import Forked
        from cltoolkit.report.render import figure_blocks, report_paths, write_reports

        project.writable(project.stage_reports_dir(loaded.id, results.stage))
        reports = report_paths(project, loaded.id, results.stage)
        with Forked(lambda: figure_blocks(project, loaded, results, records)) as drawn:
            reported = results.model_copy(update={"reports": [str(p.relative_to(project.root)) for p in reports]})
            document = _reported_document(loaded, reported, dry_run, regs)
            block_text = dump_results(document["results"])
            protocol_text = dump_protocol(document, block_text)  # the block serialized once
            write_reports(project, loaded, results, records, drawn.value)
        atomic_write_text(project.stage_reports_dir(loaded.id, results.stage) / "results.json", block_text)
        atomic_write_text(loaded.path, protocol_text)
        return ReportOutcome(reported, document, records, loaded.model, True, reports)


def _reported_document(loaded: LoadedProtocol, results: Results, dry_run: bool, regs: Registries) -> dict[str, Any]:
    """The protocol document with `results` and `status` filled in, validated, its hashed content unchanged."""
    document = dict(loaded.document)
    status = dict(document.get("status") or {})
    status.update({"stage": "reported", "updatedOn": results.measuredOn.date().isoformat()})
    status["note"] = _reported_note(str(status.get("note") or ""), results)
    if not dry_run:
        status["reportedStages"] = list(dict.fromkeys([*(status.get("reportedStages") or []), results.stage]))
    document["status"] = status
    document["results"] = results.model_dump(mode="json")
    validate_document(document, str(loaded.path), regs, expected_id=loaded.id)
    if protocol_hash(document) != protocol_hash(loaded.document):
        raise Refusal("internal check: writing results would change the hashed content; nothing was written")
    return document
