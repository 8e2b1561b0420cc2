"""`clt run --redo`: a completed run is run again only on purpose, with a reason; the new record keeps the replaced
record's seal, and the report counts and lists redone runs. A run that had not completed keeps its old seal too."""

from __future__ import annotations

import json

from cltoolkit.project import Project
from cltoolkit.run.record import read_record
from tests.conftest import write
from tests.toy_suite import toy_protocol


def _frozen(toy: Project, cli) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0


def test_redo_keeps_the_replaced_seal_and_the_report_counts_it(toy: Project, cli) -> None:
    _frozen(toy, cli)
    path = toy.runs_dir / "toy-v1" / "cand-s0" / "record.json"
    before = read_record(path)
    assert before.seal is not None
    refused = cli("run", "-p", "toy-v1", "--redo", "cand-s0")
    assert refused.exit_code == 2 and refused.stderr.startswith("error: --redo needs --reason"), refused.output
    assert read_record(path).seal == before.seal  # nothing was touched
    out = cli("run", "-p", "toy-v1", "--redo", "cand-s0", "--reason", "the node's clock was wrong")
    assert out.exit_code == 0, out.output
    plan = out.stderr.splitlines()
    assert plan[0].endswith(": 1 planned, 0 already completed, 1 to run on 1 worker(s)"), plan
    assert "redoing cand-s0: --redo: the node's clock was wrong" in out.stderr
    after = read_record(path)
    assert after.seal != before.seal
    assert after.redone
    assert after.replaces is not None
    assert len(after.replaces) == 1
    old = after.replaces[0]
    assert (old.seal, old.state, old.reason) == (before.seal, "completed", "the node's clock was wrong")
    assert old.finishedAt == before.provenance.finishedAt
    others = [p for p in (toy.runs_dir / "toy-v1").glob("*/record.json") if p != path]
    assert all("replaces" not in json.loads(p.read_text()) for p in others)  # the rest keep their shape
    assert cli("report", "-p", "toy-v1").exit_code == 0
    results = json.loads(toy.protocol_path("toy-v1").read_text())["results"]
    assert results["runs"]["redone"] == 1
    report = (toy.root / "reports" / "toy-v1" / "report.md").read_text()
    assert "**Redone runs:** 1 completed record(s) replaced with `clt run --redo`:" in report
    assert f"- cand-s0: the node's clock was wrong (replaced record `{before.seal[:19]}...`" in report
    assert cli("report", "-p", "toy-v1", "--check").exit_code == 0


def test_redo_refuses_what_it_cannot_redo(toy: Project, cli) -> None:
    _frozen(toy, cli)
    out = cli("run", "-p", "toy-v1", "--redo", "cand-s9,nope", "--reason", "x")
    assert out.exit_code == 2
    lines = out.stderr.splitlines()
    assert lines[1:] == [
        "--redo cand-s9: not a run of toy-v1 stage 'main' (`clt status` lists them)",
        "--redo nope: not a run of toy-v1 stage 'main' (`clt status` lists them)",
    ], out.stderr
    assert cli("run", "-p", "toy-v1", "--reason", "x").stderr.startswith("error: --reason goes with --redo")


def test_a_report_without_redone_runs_has_no_redone_field(toy: Project, cli) -> None:
    _frozen(toy, cli)
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert "redone" not in json.loads(toy.protocol_path("toy-v1").read_text())["results"]["runs"]


def test_a_run_that_had_not_completed_keeps_the_seal_of_its_earlier_record(toy: Project, cli) -> None:
    doc = toy_protocol(seeds=2)
    doc["comparisons"][0]["hyperparameters"]["behavior"] = "raise"
    write(toy.protocol_path("toy-v1"), doc)
    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 1  # the candidate's runs fail
    path = toy.runs_dir / "toy-v1" / "cand-s0" / "record.json"
    first = read_record(path)
    assert first.status.state == "failed"
    assert first.replaces is None
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 1  # run again, and fail again
    second = read_record(path)
    assert second.replaces is not None
    assert [(r.seal, r.state) for r in second.replaces] == [(first.seal, "failed")]
    assert second.replaces[0].reason == "the record was 'failed': the next clt run ran it again"
    assert not second.redone  # a retried failure is not a redone completed run
