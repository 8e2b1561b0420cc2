"""Refusals, completeness, budget fairness, gate decisions and the results block, on the toy suite."""

from __future__ import annotations

import datetime
import json
import shutil

import pytest

from cltoolkit.errors import Refusal
from cltoolkit.freeze_actions import freeze
from cltoolkit.gatekeeper.gatekeeper import report_protocol
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.run.record import RunRecord
from cltoolkit.run.runner import RunOptions, Selection, run_protocol
from cltoolkit.run.store import RunStore
from tests.conftest import read, write
from tests.toy_suite import toy_protocol


def _setup(project: Project, doc: dict | None = None, frozen: bool = True) -> None:  # type: ignore[type-arg]
    write(project.protocol_path("toy-v1"), doc or toy_protocol())
    if frozen:
        freeze(project, "toy-v1")


def _records(project: Project) -> list[RunRecord]:
    return list(RunStore(project.runs_dir, "toy-v1").scan().records.values())


def _rewrite(project: Project, run_id: str, **changes: object) -> None:
    store = RunStore(project.runs_dir, "toy-v1")
    rec = store.scan().records[run_id]
    data = rec.model_dump(mode="json")
    for key, value in changes.items():
        target = data
        *path, last = key.split(".")
        for p in path:
            target = target[p]
        target[last] = value
    store.write(RunRecord.model_validate_json(json.dumps(data)))


def test_report_pauses_the_collector_and_leaves_it_as_it_found_it(toy, cli, monkeypatch) -> None:
    """`clt report` pauses the cyclic collector for the whole command (its records are acyclic) and resumes it when
    the command ends, refused or not: a process that reports (a test run, a notebook) keeps its collector."""
    import gc

    from cltoolkit.gatekeeper import gatekeeper

    _setup(toy)
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0
    seen: list[bool] = []
    real = gatekeeper.report_protocol

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(gatekeeper, "report_protocol", watched)
    assert gc.isenabled()
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert seen == [False] and gc.isenabled()
    assert cli("report", "-p", "nope-v1").exit_code != 0  # refused before any record is read
    assert seen == [False, False] and gc.isenabled()


def test_end_to_end_and_idempotent(toy, cli) -> None:
    _setup(toy)
    result = cli("run", "-p", "toy-v1", "--workers", "2")
    assert result.exit_code == 0, result.output
    before = read(toy.protocol_path("toy-v1"))
    result = cli("report", "-p", "toy-v1")
    assert result.exit_code == 0, result.output
    doc = read(toy.protocol_path("toy-v1"))
    assert protocol_hash(doc) == protocol_hash(before)
    res = doc["results"]
    assert res["runs"]["completed"] == 10
    assert res["runs"]["planned"] == 10
    gates = {g["id"]: g for g in res["gates"]}
    assert gates["each"]["decision"] == "pass"
    assert len(gates["each"]["hypotheses"]) == 2
    assert gates["sup"]["decision"] == "pass"
    assert gates["info"]["decision"] == "reported"
    assert "above" in gates["info"]["wording"]
    assert gates["sup"]["hypotheses"][0]["permutationP"] == 0.03125  # one-sided: 5 replicates, all above the margin
    assert [h["signTestP"] for h in gates["each"]["hypotheses"]] == [0.03125, 0.03125]  # 5 of 5 above 0.7
    html = (toy.reports_dir / "toy-v1" / "report.html").read_text()
    # gate intervals, performance profile, one matrix per comparison, one curve figure
    for title in (
        "Gate intervals with per-replicate values",
        "Per-task matrix: cand",
        "Per-task matrix: base",
        "Curves: training score",
    ):
        assert title in html
    assert html.count("<svg ") >= 4 and "data:image/png" not in html  # the toolkit's own figures are SVG
    md = (toy.reports_dir / "toy-v1" / "report.md").read_text()
    assert "## Per-task values after each phase (mean over runs [min, max])" in md
    assert "| t2 | " in md and "| t1 | " in md  # a row per phase
    assert cli("protocol", "verify").exit_code == 0
    # again: nothing runs, and only measuredOn (and the status date) may change
    assert cli("run", "-p", "toy-v1").output.count("already completed") == 1
    cli("report", "-p", "toy-v1")
    again = read(toy.protocol_path("toy-v1"))
    for d in (doc, again):
        d["results"].pop("measuredOn")
        d["status"].pop("updatedOn")
    assert again == doc


def test_refuses_unfrozen(toy, cli) -> None:
    _setup(toy, frozen=False)
    result = cli("report", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "is not frozen" in result.output
    result = cli("run", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "--pilot" in result.output


def test_refuses_changed_protocol(toy, cli) -> None:
    _setup(toy)
    doc = read(toy.protocol_path("toy-v1"))
    doc["gates"][0]["threshold"] = 0.5
    write(toy.protocol_path("toy-v1"), doc)
    result = cli("report", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "changed since it was frozen" in result.output


def test_refuses_foreign_hash_records(toy, cli) -> None:
    _setup(toy)
    run_protocol(toy, "toy-v1")
    _rewrite(toy, "cand-s0", **{"protocol.sha256": "sha256:" + "0" * 64})
    result = cli("report", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "another version of the protocol content" in result.output
    result = cli("run", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "bump the protocol" in result.output


def test_refuses_pilot_records(toy, cli) -> None:
    _setup(toy)
    run_protocol(toy, "toy-v1")
    _rewrite(toy, "base-s1", **{"protocol.pilot": True})
    result = cli("report", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "pilot record(s)" in result.output


@pytest.mark.e2e
def test_pilot_runs_go_elsewhere_and_never_report(toy, cli) -> None:
    _setup(toy, frozen=False)
    assert cli("run", "-p", "toy-v1", "--pilot").exit_code == 0
    assert not (toy.runs_dir / "toy-v1").exists()
    assert any(toy.pilot_runs_dir.iterdir())
    assert cli("run", "-p", "toy-v1", "--set", "comparisons.0.hyperparameters.mean=0.8").exit_code == 0


def test_refuses_duplicate_run_ids(toy, cli) -> None:
    _setup(toy)
    run_protocol(toy, "toy-v1")
    folder = toy.runs_dir / "toy-v1"
    shutil.copytree(folder / "cand-s0", folder / "cand-s0-copy")
    result = cli("report", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "cand-s0" in result.output
    assert "more than one record" in result.output


def test_refuses_mixed_toolkit_versions(toy, cli) -> None:
    _setup(toy)
    run_protocol(toy, "toy-v1")
    _rewrite(toy, "cand-s2", **{"provenance.toolkitVersion": "0.0.9"})
    result = cli("report", "-p", "toy-v1")
    assert result.exit_code == 1
    assert "toolkit versions 0.0.9, 0.1.0" in result.output


def test_incomplete_grid_is_not_evaluable(toy, cli) -> None:
    _setup(toy)
    run_protocol(toy, "toy-v1", RunOptions(selection=Selection(seeds=(0, 1, 2, 3))))
    out = report_protocol(toy, "toy-v1", dry_run=True)
    assert out.results.runs.missing == 2
    for gate in out.results.gates:
        assert gate.decision == "not-evaluable"
        assert "4 of 5 planned runs completed" in gate.hypotheses[0].reason


def test_failed_run_counts_and_blocks(toy, cli) -> None:
    doc = toy_protocol()
    doc["comparisons"][1]["hyperparameters"]["mean"] = -1000.0
    _setup(toy, doc)
    result = cli("run", "-p", "toy-v1")
    assert result.exit_code == 1
    recs = {r.runId: r for r in _records(toy)}
    assert recs["base-s0"].status.state == "failed"
    assert "toy failure requested" in recs["base-s0"].status.reason
    assert recs["base-s0"].status.attempts == 1
    out = report_protocol(toy, "toy-v1", dry_run=True)
    assert out.results.runs.failed == 5
    gates = {g.id: g.decision for g in out.results.gates}
    assert gates == {"each": "pass", "sup": "not-evaluable", "info": "not-evaluable"}


def test_exclusion_rule_reported_with_sensitivity(toy, cli) -> None:
    doc = toy_protocol(exclusions=[{"id": "drop-failed", "description": "failed runs", "statuses": ["failed"]}])
    _setup(toy, doc)
    run_protocol(toy, "toy-v1")
    _rewrite(toy, "cand-s4", **{"status.state": "failed", "status.reason": "injected"})
    out = report_protocol(toy, "toy-v1", dry_run=True)
    assert out.results.runs.excluded == 1
    sens = out.results.exclusions[-1]["sensitivity"]
    assert isinstance(sens, dict)
    assert sens["each"] == {"withExclusions": "pass", "withoutExclusions": "not-evaluable"}


def test_budget_violation_not_evaluable(toy, cli) -> None:
    doc = toy_protocol()
    doc["comparisons"][0]["hyperparameters"]["updates"] = 150
    _setup(toy, doc)
    run_protocol(toy, "toy-v1")
    out = report_protocol(toy, "toy-v1", dry_run=True)
    check = out.results.budgetChecks[0]
    assert not check.ok
    assert "cand 150, base 100" in check.message
    gates = {g.id: g for g in out.results.gates}
    assert gates["sup"].decision == "not-evaluable"
    assert "budget fairness violated" in gates["sup"].hypotheses[0].reason
    assert gates["each"].decision == "pass"


def test_failing_gate_and_report_only_wording(toy, cli) -> None:
    doc = toy_protocol()
    doc["comparisons"][0]["hyperparameters"].update(mean=0.52, sd=0.05)
    _setup(toy, doc)
    run_protocol(toy, "toy-v1")
    out = report_protocol(toy, "toy-v1", dry_run=True)
    gates = {g.id: g for g in out.results.gates}
    assert gates["each"].decision == "fail"
    assert gates["sup"].decision == "fail"
    assert gates["info"].wording.startswith("no evidence of a difference")
    assert not toy.reports_dir.exists()  # dry run wrote nothing
    assert read(toy.protocol_path("toy-v1"))["results"] is None


def test_record_versions(toy, tmp_path) -> None:
    from cltoolkit.run import record as rec_mod

    _setup(toy)
    run_protocol(toy, "toy-v1", RunOptions(selection=Selection(seeds=(0,))))
    path = toy.runs_dir / "toy-v1" / "cand-s0" / "record.json"
    data = read(path)
    data["recordVersion"] = rec_mod.RECORD_VERSION + 1
    write(path, data)
    with pytest.raises(Refusal, match="newer than this toolkit reads"):
        rec_mod.read_record(path)
    data["recordVersion"] = 0  # a record from before sealing: no seal, and a field later versions dropped
    data["legacyField"] = 1
    del data["seal"]
    write(path, data)
    rec_mod.MIGRATIONS[0] = lambda d: {k: v for k, v in d.items() if k != "legacyField"}
    try:
        migrated = rec_mod.read_record(path)
        assert migrated.recordVersion == rec_mod.RECORD_VERSION
        assert migrated.seal is None
    finally:
        del rec_mod.MIGRATIONS[0]


def test_records_are_sorted_atomic_json(toy) -> None:
    _setup(toy)
    run_protocol(toy, "toy-v1", RunOptions(selection=Selection(seeds=(0,))))
    path = toy.runs_dir / "toy-v1" / "cand-s0" / "record.json"
    text = path.read_text()
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["provenance"]["toolkitVersion"] == "0.1.0"
    assert data["budget"]["gradientUpdates"] == 100
    assert datetime.datetime.fromisoformat(data["provenance"]["startedAt"].replace("Z", "+00:00"))
    assert not list(path.parent.glob(".*.tmp"))


def test_undeclared_aggregate_is_refused(toy, cli) -> None:
    _setup(toy, toy_protocol(aggregate="iqm"))
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0
    refused = cli("report", "-p", "toy-v1", "--aggregate", "mean")
    assert refused.exit_code == 1
    assert "aggregate 'mean' is not the declared one ('iqm')" in refused.output
    assert "clt protocol bump toy-v1" in refused.output
    assert read(toy.protocol_path("toy-v1"))["results"] is None  # nothing written
    assert cli("report", "-p", "toy-v1", "--aggregate", "iqm").exit_code == 0


def test_lower_is_better_gate_and_replicates_in_results(toy, cli) -> None:
    doc = toy_protocol()
    # base is lower than cand by about 0.4: "base below cand by more than 0.1" is a lower-is-better superiority claim
    doc["gates"] = [
        {
            "id": "low",
            "label": "base below cand",
            "metric": "toy.score-v1",
            "method": "base",
            "reference": "cand",
            "test": "superiority",
            "comparator": "<",
            "margin": 0.1,
            "unit": "score",
        },
        {
            "id": "wrong",
            "label": "base above cand",
            "metric": "toy.score-v1",
            "method": "base",
            "reference": "cand",
            "test": "superiority",
            "comparator": ">",
            "margin": 0.0,
            "unit": "score",
        },
    ]
    _setup(toy, doc)
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0
    res = json.loads(cli("report", "-p", "toy-v1", "--json", "--dry-run").output)
    gates = {g["id"]: g for g in res["gates"]}
    low, wrong = gates["low"], gates["wrong"]
    assert low["decision"] == "pass"
    assert wrong["decision"] == "fail"
    # an upper bound; with another gate of the family not rejected, Holm-compatible bounds of rejected ones sit at
    # the margin
    assert low["estimate"] < -0.1
    assert low["interval"][0] is None
    assert low["interval"][1] == pytest.approx(-0.1)
    reps = low["hypotheses"][0]["replicates"]
    assert len(reps) == 5
    assert sum(reps.values()) / 5 == pytest.approx(low["estimate"])


def test_pilot_stage_never_reports(toy, cli) -> None:
    doc = toy_protocol()
    doc["seeds"]["stages"].append({"id": "pilot", "seeds": [50, 51], "purpose": "pilot"})
    _setup(toy, doc)
    out = cli("report", "-p", "toy-v1", "--stage", "pilot")
    assert out.exit_code == 1
    assert "pilot stage" in out.output


def test_exploratory_gates_are_decided_marginally_outside_the_family(toy, cli) -> None:
    """A non-confirmatory threshold or comparison gate gets a marginal (unadjusted) decision and says so; it neither
    enters nor changes the confirmatory Holm family."""
    doc = toy_protocol()
    doc["gates"] = [
        {
            "id": "conf",
            "label": "base below cand",
            "metric": "toy.score-v1",
            "method": "base",
            "reference": "cand",
            "test": "superiority",
            "comparator": "<",
            "margin": 0.1,
            "unit": "score",
        },
        {
            "id": "explore-pass",
            "label": "base below cand (exploratory)",
            "metric": "toy.score-v1",
            "method": "base",
            "reference": "cand",
            "test": "superiority",
            "comparator": "<",
            "margin": 0.0,
            "unit": "score",
            "confirmatory": False,
        },
        {
            "id": "explore-fail",
            "label": "base above cand (exploratory)",
            "metric": "toy.score-v1",
            "method": "base",
            "reference": "cand",
            "test": "superiority",
            "comparator": ">",
            "margin": 0.0,
            "unit": "score",
            "confirmatory": False,
        },
    ]
    _setup(toy, doc)
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0
    gates = {g["id"]: g for g in json.loads(cli("report", "-p", "toy-v1", "--json", "--dry-run").output)["gates"]}
    assert gates["explore-pass"]["decision"] == "pass"
    assert gates["explore-fail"]["decision"] == "fail"
    assert gates["explore-pass"]["pAdjusted"] is None
    assert gates["explore-pass"]["wording"].startswith("exploratory, unadjusted")
    assert gates["explore-pass"]["interval"][1] < 0  # marginal upper bound of a lower-is-better claim
    assert gates["conf"]["pAdjusted"] == pytest.approx(gates["conf"]["pValue"])  # a family of one


@pytest.mark.e2e
def test_reporting_a_later_stage_keeps_the_earlier_stage_report(toy, cli) -> None:
    doc = toy_protocol()
    doc["seeds"]["stages"] = [{"id": "preliminary", "seeds": [0, 1, 2]}, {"id": "validation", "seeds": [0, 1, 2, 3, 4]}]
    _setup(toy, doc)
    for stage in ("preliminary", "validation"):
        assert cli("run", "-p", "toy-v1", "--stage", stage).exit_code == 0
        assert cli("report", "-p", "toy-v1", "--stage", stage).exit_code == 0
    folder = toy.reports_dir / "toy-v1"
    kept = read(folder / "preliminary" / "results.json")
    latest = read(folder / "validation" / "results.json")
    assert kept["stage"] == "preliminary"
    assert kept["runs"]["planned"] == 6
    assert latest == read(toy.protocol_path("toy-v1"))["results"]
    assert latest["runs"]["planned"] == 10
    assert (folder / "preliminary" / "report.md").read_text() != (folder / "report.md").read_text()
    assert (folder / "validation" / "report.md").read_text() == (folder / "report.md").read_text()
    assert "reports/toy-v1/validation/report.html" in latest["reports"]
