"""The sessions suite (seed 003's executable example): the simulator, paired rows, the three estimands, and the
workflow pilot -> plan -> freeze (power warning) -> run -> report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from cltoolkit.component_validation import load_protocol, validate_document
from cltoolkit.errors import ValidationFailed
from cltoolkit.registry import registries
from cltoolkit.run.spec import RunSpec
from cltoolkit.suites.sessions.data import simulate
from cltoolkit.suites.sessions.methods import Affine, KNearest, KNearestParams
from cltoolkit.suites.sessions.models import SessionsProtocol
from tests.conftest import REPO, read, write

PROTOCOL = cast(SessionsProtocol, load_protocol(REPO / "protocols" / "sessions-v1.json", regs=registries()).model)
assert isinstance(PROTOCOL, SessionsProtocol)


def _spec(comparison: str, seed: int) -> RunSpec:
    method = PROTOCOL.comparison(comparison).method
    return RunSpec("sessions-v1", "sha256:" + "0" * 64, True, "main", comparison, method, seed)


def test_simulator_follows_the_declared_dynamics() -> None:
    rows = simulate(PROTOCOL, PROTOCOL.cohort("main"), np.random.default_rng(0))
    s = PROTOCOL.system
    resid = rows.target - s.stateCoef * rows.window[:, -1] - s.actionCoef * rows.action - rows.effects[rows.session]
    assert abs(resid.std() - s.noiseSd) < 0.1 * s.noiseSd  # what is left is the process noise
    assert abs(resid.mean()) < 0.002
    assert len(rows) == 40 * (PROTOCOL.sessionLength - PROTOCOL.featureWindow + 1)
    # window columns are consecutive states of the same session
    same = rows.t[1:] == rows.t[:-1] + 1
    assert np.allclose(rows.window[1:, 0][same], rows.window[:-1, 1][same])
    assert abs(rows.effects.std() - 0.12) < 0.05
    shifted = simulate(PROTOCOL, PROTOCOL.cohort("shifted"), np.random.default_rng(0))
    assert shifted.effects.mean() - rows.effects.mean() == pytest.approx(0.25, abs=1e-12)  # same draws, moved


def test_affine_recovers_the_shared_coefficients_without_session_constants() -> None:
    doc = json.loads((REPO / "protocols" / "sessions-v1.json").read_text())
    doc["cohorts"][0]["sessionEffectSd"] = 0.0
    proto, _ = validate_document(doc, "test", regs=registries())
    assert isinstance(proto, SessionsProtocol)
    rows = simulate(proto, proto.cohort("main"), np.random.default_rng(1))
    model = Affine(None)
    model.fit(rows, np.arange(len(rows)))
    assert model.coef == pytest.approx([0.0, 0.9, 0.35], abs=0.01)


def test_knn_standardization_is_fitted_on_training_rows_only() -> None:
    rows = simulate(PROTOCOL, PROTOCOL.cohort("main"), np.random.default_rng(2))
    model = KNearest(KNearestParams(k=3, window=3))
    train = np.arange(500)
    model.fit(rows, train)
    (scaler,) = model.preprocessing()
    scaler.check(train)
    assert scaler.fitted_rows is not None
    assert np.array_equal(scaler.fitted_rows, train)
    assert model.predict(rows, np.arange(500, 510)).shape == (10,)


def test_both_methods_see_identical_data_and_rows(tmp_path: Path) -> None:
    suite = registries().new_suite("sessions")
    a = suite.execute(PROTOCOL, _spec("affine", 7), tmp_path)
    k = suite.execute(PROTOCOL, _spec("knn", 7), tmp_path)
    assert a.metrics["sessionEffects"] == k.metrics["sessionEffects"]
    assert set(a.splits) == {"new-sessions", "random-transitions", "shifted-cohort"}
    for set_id in a.splits:
        assert a.splits[set_id] == k.splits[set_id]
        assert a.metrics["evaluations"][set_id]["manifestSha256"] == a.splits[set_id]["sha256"]
    grouped = a.splits["new-sessions"]
    assert set(grouped["train"]).isdisjoint(grouped["test"])
    assert grouped["independentUnits"] == {"train": 28, "test": 12}
    assert grouped["rows"]["test"] == 12 * 48
    rand = a.splits["random-transitions"]
    assert rand["unit"] == "row" and rand["independentUnits"]["test"] == 40  # every session on both sides
    other = suite.execute(PROTOCOL, _spec("affine", 8), tmp_path)
    assert other.splits["new-sessions"]["sha256"] != grouped["sha256"]


def test_check_requires_the_right_held_out_unit() -> None:
    doc = json.loads((REPO / "protocols" / "sessions-v1.json").read_text())
    doc["evaluationSets"][1]["heldOutUnit"] = "session"
    with pytest.raises(ValidationFailed) as info:
        validate_document(doc, "p.json", regs=registries())
    assert "p.json: /splits/randomSet: evaluation set 'random-transitions' must hold out 'transition'" in str(
        info.value
    )


def test_claim_on_a_unit_not_held_out_warns() -> None:
    doc = json.loads((REPO / "protocols" / "sessions-v1.json").read_text())
    doc["claims"].append({"id": "new-robot", "text": "Transfers to a new arm.", "heldOutUnit": "robot"})
    _, warnings = validate_document(doc, "p.json", regs=registries())
    assert warnings == [
        "p.json: /claims/2/heldOutUnit: claim 'new-robot' generalizes over 'robot', which no evaluation set holds "
        "out (held out: session, transition)"
    ]
    doc["claims"][2]["heldOutUnit"] = "Sessions"  # case and plural do not matter
    assert validate_document(doc, "p.json", regs=registries())[1] == []


def test_gate_direction_against_metric_warns() -> None:
    doc = json.loads((REPO / "protocols" / "sessions-v1.json").read_text())
    doc["gates"][0]["comparator"] = ">"
    _, warnings = validate_document(doc, "p.json", regs=registries())
    assert any("/gates/0/comparator" in w and "better when lower" in w for w in warnings)


@pytest.mark.e2e
def test_workflow_pilot_plan_freeze_run_report(project, cli) -> None:
    # a pilot stage is run with --pilot only
    refused = cli("run", "--protocol", "sessions-v1", "--stage", "pilot")
    assert refused.exit_code == 1
    assert "draft" in refused.output
    out = cli("run", "--protocol", "sessions-v1", "--pilot", "--stage", "pilot", "--workers", "2")
    assert out.exit_code == 0, out.output
    plan = json.loads(cli("plan", "power", "--protocol", "sessions-v1", "--from-pilot", "--json").output)
    gate = next(g for g in plan["gates"] if g["gate"] == "affine-below-knn-new-sessions")
    assert gate["pilotReplicates"] == 6
    assert gate["sd"] > 0
    assert gate["declaredReplicates"] == 12
    assert gate["neededExact"] >= gate["neededNormal"] - 2
    assert 0 < gate["powerAtDeclared"] < 1
    # freeze warns when the declared seeds give less than the declared power (delta 0.005 is small)
    frozen = cli("protocol", "freeze", "sessions-v1")
    assert frozen.exit_code == 0, frozen.output
    assert f"{plan['declaredReplicates']} replicates give power" in frozen.output
    out = cli("run", "--protocol", "sessions-v1", "--workers", "2")
    assert out.exit_code == 0, out.output
    assert cli("report", "--protocol", "sessions-v1", "--stage", "pilot").exit_code == 1
    rep = cli("report", "--protocol", "sessions-v1", "--json")
    assert rep.exit_code == 0, rep.output
    results = json.loads(rep.output)
    assert results["runs"]["completed"] == 24
    assert results["runs"]["planned"] == 24
    gates = {g["id"]: g for g in results["gates"]}
    primary = gates["affine-below-knn-new-sessions"]
    assert primary["heldOutUnit"] == "session"
    assert primary["oodAxis"] == []
    assert gates["random-split-contrast"]["heldOutUnit"] == "transition"
    assert gates["shifted-cohort-contrast"]["oodAxis"]
    assert primary["decision"] in ("pass", "fail")
    assert primary["n"] == 12
    # lower is better: the interval is an upper bound on affine - knn
    assert primary["interval"][0] is None
    assert primary["interval"][1] is not None
    sets = {s["id"]: s for s in results["summaries"]["evaluationSets"]}
    assert set(sets) == {"new-sessions", "random-transitions", "shifted-cohort"}
    for s in sets.values():
        assert s["contrast"]["identicalRows"]
        assert s["contrast"]["n"] == 12
        assert s["contrast"]["permutationExact"]
        assert s["contrast"]["permutationP"] >= 2 / 2**12
    md = (project.root / "reports" / "sessions-v1" / "report.md").read_text()
    assert "| Random transition split | transition |" in md
    assert "within-session interpolation" in md
    assert read(project.root / "protocols" / "sessions-v1.json")["status"]["stage"] == "reported"


def test_official_run_of_pilot_stage_refused(project, cli) -> None:
    assert cli("protocol", "freeze", "sessions-v1").exit_code == 0
    out = cli("run", "--protocol", "sessions-v1", "--stage", "pilot")
    assert out.exit_code == 1
    assert "is a pilot stage; run it with --pilot" in out.output


def test_a_stage_of_fewer_comparisons_runs_and_reports_those_sharing_the_other_stages_runs(project, cli) -> None:
    """A table stage runs every comparison at a few seeds, a gates stage the gate's two at more; their shared
    (comparison, seed) runs are run once and the gates stage reports from its own comparisons alone."""
    path = project.protocol_path("sessions-v1")
    doc = read(path)
    knn = next(c for c in doc["comparisons"] if c["id"] == "knn")
    wide = {**knn, "id": "knn-wide", "label": "k-NN, k = 30", "hyperparameters": {"k": 30, "window": 3}}
    doc["comparisons"].append(wide)
    doc["budget"]["match"][0]["across"].append("knn-wide")
    table = {"id": "table", "seeds": [0, 1, 2], "purpose": "exploratory", "description": "every comparison"}
    gates = {"id": "gates", "seeds": list(range(6)), "comparisons": ["affine", "knn"], "description": "the gate's two"}
    doc["seeds"]["stages"] = [table, gates, *(s for s in doc["seeds"]["stages"] if s["purpose"] == "pilot")]
    write(path, doc)
    assert cli("protocol", "freeze", "sessions-v1").exit_code == 0
    out = cli("run", "--protocol", "sessions-v1", "--stage", "table", "--workers", "2")
    assert out.exit_code == 0, out.output
    assert len(list((project.root / "runs" / "sessions-v1").glob("*/record.json"))) == 9
    out = cli("run", "--protocol", "sessions-v1", "--stage", "gates", "--workers", "2")
    assert out.exit_code == 0, out.output
    assert "6 already completed, 6 to run" in out.output
    assert len(list((project.root / "runs" / "sessions-v1").glob("*/record.json"))) == 15
    results = json.loads(cli("report", "--protocol", "sessions-v1", "--stage", "gates", "--json").output)
    assert results["runs"]["planned"] == results["runs"]["completed"] == 12
    assert {r["comparison"] for r in results["perRun"]} == {"affine", "knn"}
    assert next(g for g in results["gates"] if g["id"] == "affine-below-knn-new-sessions")["n"] == 6
    md = (project.root / "reports" / "sessions-v1" / "gates" / "report.md").read_text()
    assert "comparisons affine, knn" in md
    assert "is exploratory" not in md
    table_results = json.loads(cli("report", "--protocol", "sessions-v1", "--stage", "table", "--json").output)
    assert {r["comparison"] for r in table_results["perRun"]} == {"affine", "knn", "knn-wide"}
    md = (project.root / "reports" / "sessions-v1" / "table" / "report.md").read_text()
    assert "stage `table` is exploratory: its confirmatory-gate lines are readings" in md
    assert "(stage `gates` decides them)" in md
