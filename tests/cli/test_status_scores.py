"""`clt status --scores` prints numbers as the report does (never 0.000 for 4.252e-04)."""

from __future__ import annotations

import json

from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from cltoolkit.report.format import fmt
from cltoolkit.run.runner import run_protocol
from tests.conftest import write
from tests.toy_suite import toy_protocol


def test_scores_use_the_report_number_format(toy: Project, cli) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    run_protocol(toy, "toy-v1")
    out = cli("status", "-p", "toy-v1", "--scores")
    assert out.exit_code == 0, out.output
    record = json.loads((toy.runs_dir / "toy-v1" / "cand-s0" / "record.json").read_text())
    score = record["metrics"]["toy.score-v1"]
    values = score.values() if isinstance(score, dict) else [score]
    assert all(fmt(v) in out.output for v in values), out.output
    assert fmt(4.252e-04) == "4.252e-04"
