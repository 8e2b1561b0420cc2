"""The unit of analysis (schema 2, `analysis.clusters`): replicates that share data or streams are averaged into
clusters and the gate is tested on the cluster means, n counted in clusters. Constructed clustered data where the
pooled test passes and the cluster test does not, and the reverse; validation refuses a pooled gate over dependent
replicates without a declared unit."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from cltoolkit.errors import ValidationFailed
from cltoolkit.gatekeeper.gatekeeper import _cluster_means
from cltoolkit.gatekeeper.gates import Hypothesis, decide_gates
from cltoolkit.planning import declared_replicates
from cltoolkit.protocol.models import ClusterPlan
from cltoolkit.protocol.results import GateResult
from cltoolkit.registry import registries
from cltoolkit.run.spec import GridPoint, replicate_key
from tests.toy_suite import ToyProtocol, toy_protocol

LOWER_BOUND = {"id": "lb", "test": "lower-bound", "comparator": ">", "threshold": 0.0}
BY_SEED = {"by": ["seed"], "shares": "a seed's three task orders share its streams"}


def _decide(values: list[float], keys: list[str], clusters: dict[str, Any] | None) -> GateResult:
    doc = toy_protocol()
    base = {"metric": "toy.score-v1", "method": "cand", "unit": "score", "label": "lb", "confirmatory": False}
    doc["gates"] = [{**base, **LOWER_BOUND}]
    if clusters is not None:
        doc["schemaVersion"] = 2
        doc["analysis"]["clusters"] = clusters
    protocol = ToyProtocol.model_validate(doc)
    x = np.asarray(values, dtype=float)
    plan = protocol.analysis.clusters
    if plan is not None:
        x, keys = _cluster_means(x, keys, _points(keys), plan)
    h = Hypothesis(protocol.gates[0], "aggregate", x, keys=tuple(keys))
    return decide_gates(protocol.gates, [h], protocol.analysis)[0]


_PLANNED: dict[str, GridPoint] = {}


def _point(seed: int, order: str | None, cell: str | None) -> str:
    """A planned run of the candidate at (seed, order, cell); returns its replicate key."""
    key = replicate_key(seed, order, cell)
    _PLANNED[key] = GridPoint("cand", "toy.method", seed, order, cell)
    return key


def _points(keys: list[str]) -> dict[str, GridPoint]:
    return {k: _PLANNED[k] for k in keys}


def _grid(per_seed: list[list[float]]) -> tuple[list[float], list[str]]:
    """Replicates (seed, order o1..o3) with the given values."""
    values, keys = [], []
    for seed, row in enumerate(per_seed):
        for j, v in enumerate(row):
            values.append(v)
            keys.append(_point(seed, f"o{j + 1}", None))
    return values, keys


def test_a_pooled_pass_that_rests_on_three_copies_of_each_seed_fails_at_the_seed_level() -> None:
    # four seeds, each seed's three orders nearly equal (shared streams): 12 look like evidence, 4 are
    centres = [0.30, 0.22, -0.12, 0.15]
    values, keys = _grid([[c, c + 0.001, c - 0.001] for c in centres])
    pooled = _decide(values, keys, None)
    clustered = _decide(values, keys, BY_SEED)
    assert pooled.hypotheses[0].n == 12 and clustered.hypotheses[0].n == 4
    assert pooled.decision == "pass"
    assert clustered.decision == "fail"


def test_a_cluster_level_pass_that_order_noise_hides_in_the_pooled_test() -> None:
    # every seed's mean is +0.1, but its orders swing by +-1: pooled, the swing drowns the effect
    values, keys = _grid([[0.1 + 1.0, 0.1 - 1.0, 0.1 + d] for d in (0.001, -0.002, 0.0015, -0.001, 0.002, 0.0)])
    pooled = _decide(values, keys, None)
    clustered = _decide(values, keys, BY_SEED)
    assert pooled.decision == "fail"
    assert clustered.decision == "pass"
    assert clustered.hypotheses[0].n == 6


def test_cells_of_a_group_form_one_cluster_per_seed() -> None:
    plan = ClusterPlan.model_validate(
        {"by": ["seed", "cellGroup"], "cellGroups": [["gym-min", "gym-med", "gym-max"]], "shares": "task A"}
    )
    keys = [_point(s, None, c) for s in (0, 1) for c in ("gym-min", "gym-med", "gym-max", "minigrid-min")]
    means, ids = _cluster_means(np.arange(8.0), keys, _points(keys), plan)
    assert ids == [
        "seed=0|cells=gym-min+gym-med+gym-max",
        "seed=0|cells=minigrid-min",
        "seed=1|cells=gym-min+gym-med+gym-max",
        "seed=1|cells=minigrid-min",
    ]
    assert means.tolist() == [1.0, 3.0, 5.0, 7.0]


def _wmf_v4_doc() -> dict[str, Any]:
    from pathlib import Path

    return json.loads(  # type: ignore[no-any-return]
        (Path(__file__).resolve().parents[2] / "protocols" / "wmf-v4.json").read_text()
    )


def test_schema_2_refuses_a_pooled_gate_over_cells_without_a_unit_and_counts_clusters_when_declared() -> None:
    from cltoolkit.component_validation import validate_document

    doc = _wmf_v4_doc()
    doc["schemaVersion"] = 2
    doc["analysis"].pop("clusters", None)
    with pytest.raises(ValidationFailed) as failed:
        validate_document(doc, "wmf-v4.json", regs=registries())
    assert [p.where for p in failed.value.problems] == ["wmf-v4.json: /analysis"]
    assert "declare the unit of analysis in analysis.clusters" in failed.value.problems[0].message
    groups = [["gym-min", "gym-med", "gym-max"], ["dmc-min", "dmc-med", "dmc-max"]]
    doc["analysis"]["clusters"] = {"by": ["seed", "cellGroup"], "cellGroups": groups, "shares": "task A"}
    model, _ = validate_document(doc, "wmf-v4.json", regs=registries())
    assert declared_replicates(model, stage="reproduction") == 15  # 3 seeds x (gym, dmc, three MiniGrid cells)
    doc["analysis"]["clusters"]["cellGroups"] = [["gym-min", "gym-mid"], ["gym-min"]]
    with pytest.raises(ValidationFailed) as failed:
        validate_document(doc, "wmf-v4.json", regs=registries())
    assert [p.where for p in failed.value.problems] == [
        "wmf-v4.json: /analysis/clusters/cellGroups/0/1",
        "wmf-v4.json: /analysis/clusters/cellGroups/1/0",
    ]


def test_clusters_need_schema_2_and_schema_1_documents_validate_as_frozen() -> None:
    from cltoolkit.component_validation import validate_document

    doc = _wmf_v4_doc()
    doc["schemaVersion"] = 1
    doc["analysis"]["clusters"] = {"by": ["seed"], "shares": "streams"}
    with pytest.raises(ValidationFailed) as failed:
        validate_document(doc, "wmf-v4.json", regs=registries())
    assert [p.where for p in failed.value.problems] == ["wmf-v4.json: /analysis/clusters"]
    doc["analysis"].pop("clusters")
    validate_document(doc, "wmf-v4.json", regs=registries())  # a frozen schema-1 document with pooled gates stays valid


def test_a_new_freeze_of_pooled_gates_in_format_1_is_refused(project, cli) -> None:
    out = cli("protocol", "freeze", "wmf-lite-v1")  # a format-1 copy, not frozen in this scratch project
    assert out.exit_code == 1
    assert "/schemaVersion: format 1 declares no unit of analysis" in out.output
    assert not project.lock_path("wmf-lite-v1").exists()
