"""The ladder reproduces what follows from seed 001's definitions; a new protocol file runs without code."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from cltoolkit.component_validation import load_protocol
from cltoolkit.registry import registries
from cltoolkit.suites.ladder import rungs
from cltoolkit.suites.ladder.analysis import ranks
from cltoolkit.suites.ladder.methods import LinearModel
from cltoolkit.suites.ladder.models import LadderProtocol
from tests.conftest import REPO, read, write

PROTOCOL = cast(LadderProtocol, load_protocol(REPO / "protocols" / "ladder-v1.json", regs=registries()).model)
MODELS = {c.id: LinearModel(**c.hyperparameters) for c in PROTOCOL.comparisons if c.method == "ladder.linear"}  # type: ignore[arg-type]


def test_population_risks() -> None:
    got = {k: rungs.population_mse(m, PROTOCOL.systems.true, PROTOCOL.rungs.oneStep) for k, m in MODELS.items()}
    assert got == pytest.approx({"aggressive": 0.0053, "conservative": 0.0229, "delayed": 0.0404})
    # the sample keeps the population order for the declared seed, and the SE is 5% of the risk at M = 800
    sample = {k: rungs.one_step(m, PROTOCOL)["mse"] for k, m in MODELS.items()}
    assert sorted(sample, key=sample.get) == ["aggressive", "conservative", "delayed"]  # type: ignore[arg-type]
    assert rungs.one_step(MODELS["delayed"], PROTOCOL)["marginalSe"] == pytest.approx(0.05 * 0.0404)


def test_steady_states_and_amplitudes() -> None:
    t = PROTOCOL.systems.true
    assert rungs.steady_state(t.a, t.b, t.c, 0.2) == pytest.approx(2.0)
    assert rungs.steady_state(1.02, 0.5, 0.0, 0.2) is None
    assert rungs.steady_state(0.8, 0.5, 0.0, 0.2) == pytest.approx(0.5)
    assert rungs.steady_state(0.95, 0.5, 0.2, 0.2) == pytest.approx(2.8)
    assert rungs.forced_amplitude(t.a, t.b, t.c, 0.4) == pytest.approx(0.1025641, abs=1e-7)
    assert rungs.forced_amplitude(0.8, 0.5, 0.0, 0.4) == pytest.approx(0.1111111, abs=1e-7)
    assert rungs.forced_amplitude(0.95, 0.5, 0.2, 0.4) == pytest.approx(0.0615385, abs=1e-7)


def test_rollout_rankings() -> None:
    roll = {k: rungs.rollout(m, PROTOCOL) for k, m in MODELS.items()}
    assert min(roll, key=lambda k: roll[k]["rmse"]) == "delayed"
    assert min(roll, key=lambda k: roll[k]["alternating"]["40"]["rmse"]) == "delayed"
    assert roll["conservative"]["alternating"]["500"]["rmse"] < roll["delayed"]["alternating"]["500"]["rmse"]
    inter = {k: rungs.intervention(m, PROTOCOL)["error"] for k, m in MODELS.items()}
    assert min(inter, key=inter.get) == "delayed"  # type: ignore[arg-type]


def test_equilibria() -> None:
    target = PROTOCOL.rungs.control.target
    same = {k: rungs.continuous_equilibrium(m, PROTOCOL.systems.true, target) for k, m in MODELS.items()}
    transfer = {k: rungs.continuous_equilibrium(m, PROTOCOL.systems.transfer, target) for k, m in MODELS.items()}
    assert same == pytest.approx({"aggressive": 0.9345794, "conservative": 1.1764706, "delayed": 0.9803922}, abs=1e-7)
    assert transfer == pytest.approx({"aggressive": 0.8196721, "conservative": 1.0, "delayed": 0.8130081}, abs=1e-7)


def test_closed_loop_and_delayed_cycles() -> None:
    c = PROTOCOL.rungs.control
    same = {k: rungs.closed_loop(m, PROTOCOL.systems.true, c) for k, m in MODELS.items()}
    transfer = {k: rungs.closed_loop(m, PROTOCOL.systems.transfer, c) for k, m in MODELS.items()}
    assert min(same, key=lambda k: same[k]["mae"]) == "delayed"
    assert max(same, key=lambda k: same[k]["mae"]) == "conservative"
    assert min(transfer, key=lambda k: transfer[k]["mae"]) == "conservative"
    d = transfer["delayed"]
    assert d["mae"] == pytest.approx(0.1875, abs=1e-6)
    assert d["cycle"]["period"] == 2
    assert d["cycle"]["limitStates"] == pytest.approx([0.8152778, 0.8097222], abs=1e-7)
    assert d["cycle"]["actions"] == pytest.approx([0.335, 0.315])
    assert same["delayed"]["cycle"]["period"] == 5
    assert same["delayed"]["modelQueries"] == 201 * 40


def test_ranks_never_summed() -> None:
    assert ranks({"a": 0.1, "b": 0.3, "c": 0.1}) == {"a": 1, "b": 3, "c": 1}


@pytest.mark.e2e
def test_end_to_end_and_declarative(project, cli) -> None:
    """ladder-v1 runs and reports; a second protocol with other coefficients, lengths and grid needs no code."""
    assert cli("protocol", "freeze", "ladder-v1").exit_code == 0
    assert cli("run", "-p", "ladder-v1").exit_code == 0
    assert cli("report", "-p", "ladder-v1").exit_code == 0
    res = read(project.protocol_path("ladder-v1"))["results"]
    favours = {k: v["favours"] for k, v in res["summaries"]["rungs"].items()}
    assert favours == {
        "oneStep": ["aggressive"],
        "rollout": ["delayed"],
        "intervention": ["delayed"],
        "control": ["delayed"],
        "transfer": ["conservative"],
    }
    doc = read(project.protocol_path("ladder-v1"))
    doc["id"] = "ladder-v2"
    doc["results"] = None
    doc["systems"]["true"] = {"a": 0.9, "b": 0.4, "c": 0.0, "noiseSd": 0.05}
    doc["rungs"]["oneStep"].update(transitions=200, seed=3)
    doc["rungs"]["rollout"].update(constantSteps=25, alternatingHorizons=[10])
    doc["rungs"]["control"].update(gridPoints=51, steps=20, tailFirst=11, tailLast=20, actionHigh=0.8)
    doc["comparisons"].append(
        {
            "id": "fitted",
            "method": "ladder.least-squares",
            "role": "candidate",
            "label": "Fitted",
            "hyperparameters": {"transitions": 300, "seed": 11},
        }
    )
    write(project.protocol_path("ladder-v2"), doc)
    assert cli("protocol", "freeze", "ladder-v2").exit_code == 0
    assert cli("run", "-p", "ladder-v2").exit_code == 0
    assert cli("report", "-p", "ladder-v2").exit_code == 0
    res2 = read(project.protocol_path("ladder-v2"))["results"]
    assert res2["runs"]["completed"] == 6
    fitted = next(r for r in res2["perRun"] if r["comparison"] == "fitted")
    assert fitted["scores"]["ladder.one-step-mse-v1"] < 0.005  # a least-squares fit is close to the true system
    control = res2["summaries"]["rungs"]["control"]
    assert set(control["values"]) == {"aggressive", "conservative", "delayed", "fitted"}


@pytest.mark.committed
def test_shipped_results_reproduce(tmp_path: Path) -> None:
    """The committed ladder-v1 results come from the committed records (same summaries recomputed)."""
    committed = read(REPO / "protocols" / "ladder-v1.json")
    if committed.get("results") is None:
        pytest.skip("ladder-v1 not reported yet")
    from cltoolkit.gatekeeper.gatekeeper import gatekeep
    from cltoolkit.project import Project

    _, results, _ = gatekeep(Project(REPO), "ladder-v1")
    assert results.model_dump(mode="json")["summaries"] == committed["results"]["summaries"]
    assert results.protocolSha256 == committed["results"]["protocolSha256"]


def test_non_finite_model_blames_the_method(monkeypatch: pytest.MonkeyPatch) -> None:
    """A method whose fit returns NaN is named as the cause; an unstable but finite fit is called unstable."""
    from cltoolkit.registry import registries
    from cltoolkit.run.spec import RunSpec
    from cltoolkit.suites.ladder.methods import Linear

    monkeypatch.setattr(
        Linear, "build", classmethod(lambda cls, params, protocol, rng: LinearModel(float("nan"), 0.5, 0))
    )
    comparison = next(c for c in PROTOCOL.comparisons if c.method == "ladder.linear")
    spec = RunSpec("ladder-v1", "0" * 64, False, "main", comparison.id, comparison.method, 0)
    with pytest.raises(ValueError, match=r"^method 'ladder.linear' built a model with non-finite coefficients"):
        registries().new_suite("ladder").execute(PROTOCOL, spec, Path("."))
    with pytest.raises(ValueError, match=r"leaves float range within \d+ steps \(\|a\| = 1e\+03\): an unstable fit"):
        rungs.rollout(LinearModel(1000.0, 1.0, 0.0), PROTOCOL)


def test_worker_names_the_non_finite_value() -> None:
    from cltoolkit.run.worker import _non_finite

    assert _non_finite({"a": [1.0, {"b": float("inf")}], "c": float("nan")}, "/metrics") == "/metrics/a/1/b = inf"
    assert _non_finite({"a": [1.0, 2], "s": "nan"}, "/metrics") is None
