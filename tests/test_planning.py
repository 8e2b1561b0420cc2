"""Power planning uses the family and the stage the report will use; TOST's normal plan at a true difference of 0."""

from __future__ import annotations

import json

from cltoolkit.planning import _alpha, declared_replicates, family_size, reported_stage
from cltoolkit.registry import registries
from tests.conftest import REPO


def test_nav4_is_planned_with_its_seven_hypothesis_family_and_validation_stage() -> None:
    from cltoolkit.validation import load_protocol

    protocol = load_protocol(REPO / "protocols" / "nav4-v1.json").model
    tasks = len(registries().suite.get("nav4")().tasks(protocol))
    assert family_size(protocol, tasks) == 7  # as many hypotheses as the Holm family in the results block
    results = json.loads((REPO / "protocols" / "nav4-v1.json").read_text())["results"]
    in_family = [h for g in results["gates"] for h in g["hypotheses"] if h["pAdjusted"] is not None]
    assert len(in_family) == 7
    assert reported_stage(protocol) == "validation" and declared_replicates(protocol) == 30
    gate = next(g for g in protocol.gates if g.confirmatory)
    assert _alpha(protocol, gate, tasks) == protocol.analysis.alpha / 7


def test_tost_plan_on_the_command_line(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli("plan", "power", "--sigma", "0.1", "--delta", "0.05", "--test", "tost", "--json")
    assert out.exit_code == 0, out.output
    plan = json.loads(out.output)
    assert plan["normal"] == 35 and plan["exact"] >= 35
