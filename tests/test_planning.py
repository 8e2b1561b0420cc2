"""Power planning uses the family and the stage the report will use; TOST's normal plan at a true difference of 0."""

from __future__ import annotations

import json

import pytest

from cltoolkit.planning import _alpha, declared_replicates, family_size, reported_stage
from cltoolkit.registry import registries
from tests.conftest import REPO


@pytest.mark.committed
def test_nav4_is_planned_with_its_seven_hypothesis_family_and_validation_stage() -> None:
    from cltoolkit.component_validation import load_protocol

    protocol = load_protocol(REPO / "protocols" / "nav4-v1.json", regs=registries()).model
    tasks = len(registries().suite.get("nav4")().tasks(protocol))
    assert family_size(protocol, tasks) == 7  # as many hypotheses as the Holm family in the results block
    results = json.loads((REPO / "protocols" / "nav4-v1.json").read_text())["results"]
    in_family = [h for g in results["gates"] for h in g["hypotheses"] if h["pAdjusted"] is not None]
    assert len(in_family) == 7
    assert reported_stage(protocol) == "validation"
    assert declared_replicates(protocol) == 30
    gate = next(g for g in protocol.gates if g.confirmatory)
    assert _alpha(protocol, gate, tasks) == protocol.analysis.alpha / 7


def test_tost_plan_on_the_command_line(cli) -> None:
    out = cli("plan", "power", "--sigma", "0.1", "--delta", "0.05", "--test", "tost", "--json")
    assert out.exit_code == 0, out.output
    plan = json.loads(out.output)
    assert plan["normal"] == 35
    assert plan["exact"] >= 35


def test_a_median_aggregate_gate_is_planned_for_the_sign_test_that_decides_it() -> None:
    from cltoolkit import stats
    from cltoolkit.component_validation import load_protocol
    from cltoolkit.planning import gate_plan

    protocol = load_protocol(REPO / "protocols" / "nav4-v1.json", regs=registries()).model
    gate = next(g for g in protocol.gates if g.confirmatory and g.test != "equivalence-tost")
    gate = gate.model_copy(update={"delta": 0.1})
    t_plan = gate_plan(protocol, gate, "aggregate", 0.2, "declared", 0, 30)
    median = protocol.model_copy(update={"analysis": protocol.analysis.model_copy(update={"aggregate": "median"})})
    sign_plan = gate_plan(median, gate, "aggregate", 0.2, "declared", 0, 30)
    assert (t_plan.decidedBy, sign_plan.decidedBy) == ("t test", "sign test")
    assert sign_plan.neededExact is not None
    assert t_plan.neededExact is not None
    assert sign_plan.neededExact > t_plan.neededExact
    assert sign_plan.powerAtDeclared == stats.sign_test_power(30, 0.2, 0.1, sign_plan.alpha, sign_plan.sides)
    assert sign_plan.powerAtDeclared is not None
    assert t_plan.powerAtDeclared is not None
    assert sign_plan.powerAtDeclared < t_plan.powerAtDeclared


def test_median_plan_on_the_command_line(cli) -> None:
    t = json.loads(cli("plan", "power", "--sigma", "1", "--delta", "0.5", "--test", "one-sided", "--json").output)
    out = cli("plan", "power", "--sigma", "1", "--delta", "0.5", "--test", "one-sided", "--median", "--json")
    assert out.exit_code == 0, out.output
    sign = json.loads(out.output)
    assert (t["exact"], sign["exact"], sign["decidedBy"]) == (27, 42, "sign test")
    text = cli("plan", "power", "--sigma", "1", "--delta", "0.5", "--test", "tost", "--median")
    assert text.exit_code == 0
    assert "(exact sign test)" in text.output
    assert "None" not in text.output
