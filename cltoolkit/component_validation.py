"""Validation against the registered components: a protocol's structure (`cltoolkit.protocol.validate`) plus everything
that needs the registered components: the suite's model and checks, method, metric names and method hyperparameters.

This step sits above both `protocol/` and the registry, where the runner, the gatekeeper and the CLI meet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cltoolkit.components import Suite, method_problems
from cltoolkit.errors import Problem, ValidationFailed, pydantic_problems
from cltoolkit.protocol.load import display_path, load_json_file
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.protocol.validate import LoadedProtocol, id_problems, validate_structure
from cltoolkit.registry import Registries

__all__ = ["load_protocol", "validate_document"]


def validate_document(
    document: dict[str, Any], source: str, regs: Registries, expected_id: str | None = None
) -> tuple[ProtocolBase, list[str]]:
    """Validate a parsed document; returns the model and warnings, raises `ValidationFailed` with every problem."""
    suite_name = document.get("suite")
    if not isinstance(suite_name, str):
        raise ValidationFailed(problems=[Problem(f"{source}: /suite", "required string field missing")])
    if suite_name not in regs.suite:
        raise ValidationFailed(problems=[Problem(f"{source}: /suite", regs.suite.unknown_message(suite_name))])
    suite = regs.new_suite(suite_name)
    try:
        model = validate_structure(document, source, suite.protocol_model)
    except ValidationFailed as failed:  # also say what the registries find, so problems come at once, not in rounds
        seen = {(p.where, p.message) for p in failed.problems}
        more = _check_registered(
            suite_name, _raw_comparisons(document), _raw_metric_ids(document), regs, source, type(suite)
        )
        raise ValidationFailed(
            problems=[*failed.problems, *(p for p in more if (p.where, p.message) not in seen)]
        ) from None
    problems = id_problems(model, source, expected_id)
    problems.extend(_magnitude_problems(document, source))
    budget = document.get("budget")
    enforced = ", ".join(sorted(suite.budget_fields)) or "none"
    problems.extend(
        Problem(
            f"{source}: /budget/{key}",
            f"the {suite_name} suite enforces no {key} (it enforces: {enforced}); remove it, since a budget field "
            "binds or is absent",
        )
        for key in (budget if isinstance(budget, dict) else {})
        if key not in ("match", "fairness", "references") and key not in suite.budget_fields
    )
    analysis = document.get("analysis")
    analysis = analysis if isinstance(analysis, dict) else {}
    problems.extend(
        Problem(f"{source}: /analysis/{key}", f"declared, but no code uses it: {why} (remove it; no field decorates)")
        for key, why in UNUSED_ANALYSIS_FIELDS.items()
        if key in analysis
    )
    comparisons = [(i, c.method, c.hyperparameters) for i, c in enumerate(model.comparisons)]
    metric_ids = [(i, m.id) for i, m in enumerate(model.metrics)]
    problems.extend(_check_registered(model.suite, comparisons, metric_ids, regs, source, type(suite)))
    problems.extend(Problem(f"{source}: {p.where}", p.message) for p in suite.check(model))
    cells = [c for c in suite.cells(model) if c is not None]
    problems.extend(_stage_cells(model, cells, source))
    problems.extend(_stage_comparisons(model, type(suite), source))
    problems.extend(_unit_problems(model, cells, source))
    if problems:
        raise ValidationFailed(problems=problems)
    return model, _warnings(model, regs, source)


UNUSED_ANALYSIS_FIELDS = {
    "bootstrapResamples": "gate intervals are t-based and permutation tests exact or Monte Carlo; nothing bootstraps",
    "bootstrapSeed": "nothing bootstraps (see bootstrapResamples)",
    "normalization": "the gatekeeper normalizes no score",
    "zeroGapRule": "the gatekeeper normalizes no score (see normalization)",
}
"""Fields of the analysis plan that an early schema declared and no code ever used: a protocol that sets one is
refused (none of the shipped protocols does), so that no field promises what nothing does."""

MAX_MAGNITUDE = 1e12
"""No number a protocol declares (outside `results` and `status`) is larger in magnitude: a hyperparameter, a
coefficient, a threshold of 1e308 validates as a float and overflows the first computation that uses it."""


def _magnitude_problems(value: Any, source: str, pointer: str = "") -> list[Problem]:
    """One problem per number above `MAX_MAGNITUDE` in the hashed content (ints that large are sizes and seeds,
    bounded by their own fields)."""
    if isinstance(value, dict):
        return [
            p
            for key, item in value.items()
            if not (pointer == "" and key in ("results", "status"))
            for p in _magnitude_problems(item, source, f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}")
        ]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _magnitude_problems(item, source, f"{pointer}/{i}")]
    if isinstance(value, float) and abs(value) > MAX_MAGNITUDE:
        return [
            Problem(f"{source}: {pointer}", f"{value:g} exceeds {MAX_MAGNITUDE:g} in magnitude (it would overflow)")
        ]
    return []


def _unit_problems(model: ProtocolBase, cells: list[str], source: str) -> list[Problem]:
    """The unit of analysis: `analysis.clusters` needs schema 2, names known cells once each, and schema 2 refuses
    a pooled gate over replicates that share seeds across cells or task orders without it."""
    plan = model.analysis.clusters
    where = f"{source}: /analysis/clusters"
    if plan is None:
        orders = max((len(st.orders) for st in model.seeds.stages), default=0)
        if model.schemaVersion >= 2 and model.gates and (len(cells) > 1 or orders > 1):
            pooled = f"{len(cells)} cells" if len(cells) > 1 else f"{orders} task orders"
            return [
                Problem(
                    f"{source}: /analysis",
                    f"its gates pool replicates over {pooled} run with the same seeds, which may share data, "
                    "models or streams; declare the unit of analysis in analysis.clusters (what one cluster is, "
                    "and what its replicates share)",
                )
            ]
        return []
    if model.schemaVersion < 2:
        return [Problem(where, "needs schemaVersion 2 (the format that declares the unit of analysis)")]
    problems = []
    seen: dict[str, int] = {}
    for gi, group in enumerate(plan.cellGroups):
        for ci, cell in enumerate(group):
            if cell not in cells:
                choice = f"cells: {', '.join(cells)}" if cells else "this suite has no cells"
                problems.append(Problem(f"{where}/cellGroups/{gi}/{ci}", f"unknown cell {cell!r} ({choice})"))
            elif cell in seen:
                problems.append(Problem(f"{where}/cellGroups/{gi}/{ci}", f"{cell!r} is in group {seen[cell]} too"))
            seen.setdefault(cell, gi)
    if plan.cellGroups and "cellGroup" not in plan.by:
        problems.append(Problem(f"{where}/by", "cellGroups are declared but `by` does not name cellGroup"))
    return problems


def _stage_cells(model: ProtocolBase, known: list[str], source: str) -> list[Problem]:
    """A stage's cells must be cells of the protocol (a suite without cells takes none)."""
    problems = []
    for si, st in enumerate(model.seeds.stages):
        for ci, cell in enumerate(st.cells):
            if cell not in known:
                choice = f"cells: {', '.join(known)}" if known else "this suite has no cells"
                problems.append(
                    Problem(f"{source}: /seeds/stages/{si}/cells/{ci}", f"unknown cell {cell!r} ({choice})")
                )
    return problems


def _stage_comparisons(model: ProtocolBase, suite: type[Suite[Any]], source: str) -> list[Problem]:
    """A stage's comparisons must be the protocol's, include what each gate compares (pilot stages aside), and be
    honoured by the suite's planner (a suite that plans its own grid, wmf's, plans every comparison)."""
    problems = []
    ids = [c.id for c in model.comparisons]
    for si, st in enumerate(model.seeds.stages):
        where = f"{source}: /seeds/stages/{si}/comparisons"
        if st.comparisons and suite.plan is not Suite.plan:
            problems.append(
                Problem(where, f"the {model.suite} suite plans its own grid: every stage runs every comparison")
            )
            continue
        for ci, comp in enumerate(st.comparisons):
            if comp not in ids:
                problems.append(
                    Problem(f"{where}/{ci}", f"unknown comparison {comp!r} (comparisons: {', '.join(ids)})")
                )
        if not st.comparisons or st.purpose == "pilot":
            continue
        for gate in model.gates:
            missing = [c for c in (gate.method, gate.reference) if c is not None and c not in st.comparisons]
            problems.extend(
                Problem(where, f"stage {st.id!r} leaves out comparison {c!r}, which gate {gate.id!r} needs")
                for c in missing
            )
    return problems


def _raw_comparisons(document: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(index, method, hyperparameters) of each comparison of a document that failed structural validation."""
    items = document.get("comparisons")
    out = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, dict) and isinstance(item.get("method"), str):
            hyper = item.get("hyperparameters")
            out.append((i, item["method"], hyper if isinstance(hyper, dict) else {}))
    return out


def _raw_metric_ids(document: dict[str, Any]) -> list[tuple[int, str]]:
    items = document.get("metrics")
    return [
        (i, item["id"])
        for i, item in enumerate(items if isinstance(items, list) else [])
        if isinstance(item, dict) and isinstance(item.get("id"), str)
    ]


def _check_registered(
    suite_name: str,
    comparisons: list[tuple[int, str, dict[str, Any]]],
    metric_ids: list[tuple[int, str]],
    regs: Registries,
    source: str,
    suite: type[Suite[Any]],
) -> list[Problem]:
    problems = []
    # built-in methods are named <suite>.<method>: suggest this suite's and those of no known suite (a project's)
    mine = [n for n in regs.method.names() if n.split(".")[0] == suite_name or n.split(".")[0] not in regs.suite]
    for i, name, hyperparameters in comparisons:
        where = f"{source}: /comparisons/{i}"
        if name not in regs.method:
            problems.append(
                Problem(f"{where}/method", regs.method.unknown_message(name, mine, f" for suite {suite_name!r}"))
            )
            continue
        method = regs.method.get(name)
        if method.suite != suite_name:
            problems.append(
                Problem(f"{where}/method", f"method {name!r} belongs to suite {method.suite!r}, not {suite_name!r}")
            )
        else:
            problems.extend(Problem(f"{where}/method", line) for line in method_problems(suite, name, method))
        if method.Params is not None:
            try:
                method.Params.model_validate_json(json.dumps(hyperparameters), strict=True)
            except ValidationError as exc:
                problems.extend(pydantic_problems(exc, source, f"/comparisons/{i}/hyperparameters"))
        elif hyperparameters:
            problems.append(Problem(f"{where}/hyperparameters", f"method {name!r} takes no hyperparameters"))
    for i, metric_id in metric_ids:
        if metric_id not in regs.metric:
            problems.append(Problem(f"{source}: /metrics/{i}/id", regs.metric.unknown_message(metric_id)))
    return problems


def _unit(text: str) -> str:
    """Normalized held-out unit: case, separators and a plural `s` do not matter."""
    words = text.lower().replace("-", " ").replace("_", " ").split()
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def _warnings(model: ProtocolBase, regs: Registries, source: str) -> list[str]:
    """Design warnings that do not block validation: claims resting on a unit no evaluation set holds out,
    metrics without an evaluation set, and gates whose direction contradicts the metric's."""
    out = []
    held = {_unit(e.heldOutUnit): e.heldOutUnit for e in model.evaluationSets}
    for i, claim in enumerate(model.claims):
        if _unit(claim.heldOutUnit).startswith("none"):
            continue  # a claim about a known system holds nothing out
        if not model.evaluationSets:
            out.append(
                f"{source}: /claims/{i}/heldOutUnit: claim {claim.id!r} generalizes over {claim.heldOutUnit!r} but the "
                "protocol declares no evaluationSets, so no held-out unit supports it"
            )
        elif _unit(claim.heldOutUnit) not in held:
            out.append(
                f"{source}: /claims/{i}/heldOutUnit: claim {claim.id!r} generalizes over {claim.heldOutUnit!r}, which "
                f"no evaluation set holds out (held out: {', '.join(sorted(held.values()))})"
            )
    if model.evaluationSets:
        for i, metric in enumerate(model.metrics):
            if metric.evaluationSet is None and metric.kind == "gate":
                out.append(f"{source}: /metrics/{i}/evaluationSet: gate metric {metric.id!r} names no evaluation set")
    replicated = any(len(st.seeds) > 1 for st in model.seeds.stages)
    for i, comp in enumerate(model.comparisons):
        method = regs.method.get(comp.method) if comp.method in regs.method else None
        params = getattr(method, "Params", None)
        if replicated and params is not None and "seed" in params.model_fields:
            value = comp.hyperparameters.get("seed", params.model_fields["seed"].default)
            out.append(
                f"{source}: /comparisons/{i}/hyperparameters/seed: method {comp.method!r} draws from its own `seed` "
                f"hyperparameter ({value}), not from the run seed: the replicates of {comp.id!r} across seeds are "
                "identical runs, so they cannot estimate its variability"
            )
    for i, gate in enumerate(model.gates):
        if gate.metric in regs.metric and gate.unit != regs.metric.get(gate.metric).unit:
            out.append(
                f"{source}: /gates/{i}/unit: gate {gate.id!r} declares unit {gate.unit!r} where its metric "
                f"{gate.metric!r} is in {regs.metric.get(gate.metric).unit!r}: the report prints the declared unit, "
                "so the threshold must be in it"
            )
        if gate.test not in ("superiority", "non-inferiority") or gate.metric not in regs.metric:
            continue
        higher = regs.metric.get(gate.metric).higher_is_better
        if higher == gate.lower_is_better:
            better = "higher" if higher else "lower"
            out.append(
                f"{source}: /gates/{i}/comparator: gate {gate.id!r} claims {gate.comparator!r} but {gate.metric!r} is "
                f"better when {better}"
            )
    return out


def load_protocol(path: Path, regs: Registries) -> LoadedProtocol:
    """Strictly load and validate the protocol file at `path` (its id must match the file name)."""
    document = load_json_file(path)
    model, warnings = validate_document(document, display_path(path), regs, expected_id=path.stem)
    return LoadedProtocol(path, document, model, tuple(warnings))
