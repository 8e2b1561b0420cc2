"""Power planning inside the workflow: sigma_D per declared gate from pilot runs, replicates needed for the
gate's declared `delta`, and the power the declared seeds give (used by `clt plan power --from-pilot` and by
`clt protocol freeze`).

Planning is approximate by nature (seed 003): the normal approximation and the exact noncentral-t answer are
reported side by side, the pilot SD is itself uncertain, and confirmatory gates are planned at alpha / m (the
first Holm step, m the hypotheses of the family: one per task for each-task gates), which is conservative, at the
replicates of the stage the report will use (the last confirmatory stage).

A gate is planned for the test that decides it: the t test (TOST for equivalence) when the declared aggregate is
the mean, the exact sign test (two one-sided sign tests for equivalence) when it is the median, each under normal
paired differences with the pilot's or the declared SD; the normal approximation beside it is Noether's for the
sign test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cltoolkit import stats
from cltoolkit.component_validation import load_protocol
from cltoolkit.errors import InputError
from cltoolkit.project import Project
from cltoolkit.protocol.models import Gate, ProtocolBase
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import Registries, registries
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import replicate_key
from cltoolkit.run.store import RunStore

__all__ = [
    "GatePlan",
    "declared_replicates",
    "family_size",
    "freeze_power_warnings",
    "gate_plan",
    "pilot_plan",
    "pilot_stores",
    "reported_stage",
]


@dataclass(frozen=True)
class GatePlan:
    """Planning numbers for one hypothesis of one gate."""

    gate: str
    scope: str
    test: str
    decidedBy: str
    sd: float | None
    sdSource: str
    pilotReplicates: int
    delta: float | None
    alpha: float
    sides: int
    declaredReplicates: int
    powerAtDeclared: float | None
    neededNormal: int | None
    neededExact: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PilotPlan:
    """`clt plan --from-pilot`: sigma_D per declared gate from a pilot store, with the replicates each needs (field
    names are the `--json` keys)."""

    protocol: str
    pilotStore: str
    pilotStages: list[str]
    pilotReplicates: int
    targetPower: float
    declaredReplicates: int
    reportedStage: str
    familySize: int
    gates: list[GatePlan]
    note: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reported_stage(protocol: ProtocolBase) -> str:
    """The stage whose report carries the confirmatory decisions: the last confirmatory stage (stages run in
    order), else the last stage."""
    stages = [s for s in protocol.seeds.stages if s.purpose == "confirmatory"] or list(protocol.seeds.stages)
    return stages[-1].id


def declared_replicates(protocol: ProtocolBase, cells: int = 1, stage: str | None = None) -> int:
    """Replicates per hypothesis in the stage the report will use (seeds x task orders x cells): `stage`, or the
    last confirmatory stage. With a declared unit of analysis (`analysis.clusters`), the clusters they form: what
    the gatekeeper counts."""
    st = protocol.stage(stage or reported_stage(protocol))
    plan = protocol.analysis.clusters
    if plan is not None and st.cells:
        orders: list[str | None] = list(st.orders) or [None]
        return len({plan.cluster_of(int(s), o, c) for s in st.seeds for o in orders for c in st.cells})
    if plan is not None and "order" not in plan.by:
        return len(st.seeds) * (len(st.cells) or cells) if "cellGroup" in plan.by else len(st.seeds)
    return len(st.seeds) * max(1, len(st.orders)) * (len(st.cells) or cells)


def family_size(protocol: ProtocolBase, tasks: int) -> int:
    """Hypotheses in the confirmatory family as the gatekeeper forms it: one per task for `each-task` gates."""
    return sum(tasks if g.scope == "each-task" else 1 for g in protocol.gates if g.confirmatory)


def _alpha(protocol: ProtocolBase, gate: Gate, tasks: int = 1) -> float:
    """Planning level: alpha / m for confirmatory gates, m the family's hypotheses (the first Holm step)."""
    plan = protocol.analysis
    m = family_size(protocol, tasks)
    return plan.alpha / m if gate.confirmatory and plan.multiplicity != "none" and m > 1 else plan.alpha


def gate_plan(
    protocol: ProtocolBase,
    gate: Gate,
    scope: str,
    sd: float | None,
    source: str,
    pilot_n: int,
    n_declared: int,
    tasks: int = 1,
) -> GatePlan:
    """Power at the declared replicates and replicates needed, for one hypothesis."""
    alpha = _alpha(protocol, gate, tasks)
    sides = 2 if gate.test == "report-only" else 1
    power = normal = exact = None
    delta = gate.delta
    median = protocol.analysis.aggregate == "median"
    decided_by = "sign test" if median else "t test"
    if sd is not None and sd > 0 and delta is not None:
        target = protocol.analysis.targetPower
        if gate.test == "equivalence-tost":
            margin = float(gate.margin or 0.0)
            # true difference `delta` inside the +-margin band (delta >= margin means the claim cannot be planned)
            true_diff = 0.0 if delta >= margin else margin - delta
            if median:
                power = stats.sign_tost_power(n_declared, sd, margin, true_diff, alpha)
                exact = stats.n_sign_tost(sd, margin, alpha, target, true_diff)
            else:
                power = stats.tost_power(n_declared, sd, margin, true_diff, alpha) if n_declared >= 2 else 0.0
                exact = stats.n_tost(sd, margin, alpha, target, true_diff)
                normal = stats.n_normal_tost(sd, margin, alpha, target, true_diff) if true_diff < margin else None
        elif median:
            power = stats.sign_test_power(n_declared, sd, delta, alpha, sides)
            normal = stats.n_sign_noether(sd, delta, alpha, target, sides)
            exact = stats.n_sign_test(sd, delta, alpha, target, sides)
        else:
            power = stats.power_t(n_declared, sd, delta, alpha, sides) if n_declared >= 2 else 0.0
            normal = stats.n_normal(sd, delta, alpha, target, sides)
            exact = stats.n_exact_t(sd, delta, alpha, target, sides)
    elif sd == 0.0:
        source += " (zero spread: planning is undefined)"
    return GatePlan(
        gate.id,
        scope,
        gate.test,
        decided_by,
        sd,
        source,
        pilot_n,
        delta,
        alpha,
        sides,
        n_declared,
        power,
        normal,
        exact,
    )


def pilot_stores(project: Project, protocol_id: str) -> dict[str, Path]:
    """Pilot run folders of a protocol id: hash prefix -> folder."""
    base = project.pilot_runs_dir
    if not base.is_dir():
        return {}
    return {
        p.parent.name: p for p in sorted(base.glob(f"*/{protocol_id}")) if p.parent.name != "effective" and p.is_dir()
    }


def _pilot_records(project: Project, loaded: LoadedProtocol, pilot_hash: str | None) -> tuple[str, list[RunRecord]]:
    from cltoolkit.protocol.hashing import protocol_hash

    stores = pilot_stores(project, loaded.id)
    current = protocol_hash(loaded.document).removeprefix("sha256:")[:16]
    if pilot_hash is not None:
        chosen = [h for h in stores if h.startswith(pilot_hash.removeprefix("sha256:"))]
        if len(chosen) != 1:
            raise InputError(
                f"--pilot-hash {pilot_hash!r} matches {len(chosen)} pilot stores of {loaded.id} "
                f"(available: {', '.join(stores) or 'none'})"
            )
        key = chosen[0]
    elif current in stores:
        key = current
    elif len(stores) == 1:
        key = next(iter(stores))
    else:
        raise InputError(
            f"{loaded.id}: no pilot runs at the current hash ({current}); "
            + (
                f"choose one with --pilot-hash (available: {', '.join(stores)})"
                if stores
                else f"run a pilot first: `clt run --protocol {loaded.id} --pilot`"
            )
        )
    scan = RunStore(project.pilot_store_base(key), loaded.id).scan()
    records = [r for r in scan.records.values() if r.status.state == "completed"]
    if not records:
        raise InputError(f"{loaded.id}: the pilot store {key} holds no completed runs")
    return key, records


def _values(
    protocol: ProtocolBase, records: Sequence[RunRecord], gate: Gate, scope: str, regs: Registries
) -> np.ndarray:
    suite = regs.suite.get(protocol.suite)
    analysis = regs.new_analysis(suite.analysis) if suite.analysis else None
    if analysis is None:
        raise InputError(f"suite {protocol.suite!r} has no analysis to compute pilot values")
    mv = analysis.replicates(protocol, records, gate.metric, gate.method, scope).get(scope, {})
    if gate.reference is None:
        return np.array([mv[k] for k in sorted(mv)])
    rv = analysis.replicates(protocol, records, gate.metric, gate.reference, scope).get(scope, {})
    return np.array([mv[k] - rv[k] for k in sorted(set(mv) & set(rv))])


def pilot_plan(project: Project, ref: str, *, pilot_hash: str | None = None) -> PilotPlan:
    """sigma_D per declared gate (and task) from completed pilot runs, with the replicates each needs."""
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    protocol = loaded.model
    key, records = _pilot_records(project, loaded, pilot_hash)
    suite = regs.new_suite(protocol.suite)
    cells = len([c for c in suite.cells(protocol) if c is not None]) or 1
    n_declared = declared_replicates(protocol, cells)
    tasks = len(suite.tasks(protocol))
    stages = sorted({r.spec.stage for r in records})
    seeds = sorted({replicate_key(r.spec.seed, r.spec.order, r.spec.cell) for r in records})
    plans = []
    for gate in protocol.gates:
        for scope in suite.tasks(protocol) if gate.scope == "each-task" else ["aggregate"]:
            x = _values(protocol, records, gate, scope, regs)
            sd = float(x.std(ddof=1)) if x.size >= 2 else None
            source = f"pilot store {key} ({x.size} replicates)"
            plans.append(gate_plan(protocol, gate, scope, sd, source, int(x.size), n_declared, tasks))
    m, stage = family_size(protocol, tasks), reported_stage(protocol)
    note = (
        "Planning, not inference: the pilot SD is uncertain (explore larger values); confirmatory gates use "
        f"alpha / m with m = {m} hypotheses in the Holm family (first Holm step), at the replicates of stage {stage!r}."
    )
    target = protocol.analysis.targetPower
    return PilotPlan(loaded.id, key, stages, len(seeds), target, n_declared, stage, m, plans, note)


def freeze_power_warnings(project: Project, loaded: LoadedProtocol) -> list[str]:
    """Warnings for `clt protocol freeze`: gates whose declared seeds give less than the declared power."""
    protocol = loaded.model
    regs = registries(project.components_file)
    suite = regs.new_suite(protocol.suite)
    cells = len([c for c in suite.cells(protocol) if c is not None]) or 1
    n_declared = declared_replicates(protocol, cells)
    tasks = len(suite.tasks(protocol))
    pilot: list[RunRecord] | None = None
    out = []
    for gate in protocol.gates:
        if gate.delta is None or gate.test == "report-only":
            continue
        sd, source = gate.planningSd, "planningSd"
        if sd is None:
            if pilot is None:
                try:
                    pilot = _pilot_records(project, loaded, None)[1]
                except InputError:
                    pilot = []
            x = (
                _values(protocol, pilot, gate, "aggregate", regs)
                if pilot and gate.scope == "aggregate"
                else np.array([])
            )
            if x.size < 2:
                out.append(
                    f"gate {gate.id!r}: declares delta {gate.delta} but no planningSd and no pilot runs; its "
                    "power is unknown (run a pilot and `clt plan power --protocol <id> --from-pilot`)"
                )
                continue
            sd, source = float(x.std(ddof=1)), "pilot runs"
        plan = gate_plan(protocol, gate, "aggregate", sd, source, 0, n_declared, tasks)
        if plan.powerAtDeclared is not None and plan.powerAtDeclared < protocol.analysis.targetPower:
            out.append(
                f"gate {gate.id!r}: {n_declared} replicates give power {plan.powerAtDeclared:.2f} < target "
                f"{protocol.analysis.targetPower} at delta {gate.delta} (SD {sd:.4g} from {source}); "
                f"{plan.neededExact} needed (exact {plan.decidedBy})"
                + ("" if plan.neededNormal is None else f", {plan.neededNormal} (normal approximation)")
            )
    return out
