"""`clt run --redo`: a completed run is run again only on purpose, with a reason; the new record keeps the replaced
record's seal, and the report counts and lists redone runs. A run that had not completed keeps its old seal too."""

from __future__ import annotations

import json

import pytest

from cltoolkit.project import Project
from cltoolkit.run.record import read_record
from tests.conftest import git, write
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


# -- a redo writes new, then replaces (#52): a fault leaves every completed record in place and the redo pending --


def _slow_protocol(toy: Project, cli) -> None:
    doc = toy_protocol(seeds=3)
    for comp in doc["comparisons"]:
        comp["hyperparameters"]["sleepSeconds"] = 0.6
    write(toy.protocol_path("toy-v1"), doc)
    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0


def _seals(toy: Project) -> dict[str, str | None]:
    return {p.parent.name: read_record(p).seal for p in (toy.runs_dir / "toy-v1").glob("*/record.json")}


def _intents(toy: Project) -> set[str]:
    return {p.parent.name for p in (toy.runs_dir / "toy-v1").glob("*/redo-intent.json")}


def _states(toy: Project, cli) -> dict[str, str]:
    out = cli("status", "-p", "toy-v1", "--json")
    return {r["runId"]: r["state"] for r in json.loads(out.output)["runs"]}


@pytest.mark.e2e
def test_a_full_disk_during_redo_keeps_the_completed_record_and_the_redo_pending(toy: Project, cli, monkeypatch):
    import errno

    from cltoolkit.run.store import RunStore

    _slow_protocol(toy, cli)
    before = _seals(toy)
    real = RunStore.write

    def full(self, record):  # the new record cannot be written: the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunStore, "write", full)
    out = cli("run", "-p", "toy-v1", "--redo", "cand-s0", "--reason", "clock skew")
    assert out.exit_code != 0
    assert _seals(toy) == before  # nothing deleted, nothing changed
    assert _states(toy, cli)["cand-s0"] == "redo-pending"
    monkeypatch.setattr(RunStore, "write", real)
    out = cli("run", "-p", "toy-v1")  # a plain run completes the pending redo, with its reason
    assert out.exit_code == 0, out.output
    assert "redoing cand-s0: pending --redo: clock skew" in out.stderr
    after = read_record(toy.runs_dir / "toy-v1" / "cand-s0" / "record.json")
    assert after.replaces is not None and after.replaces[0].seal == before["cand-s0"]
    assert after.replaces[0].reason == "clock skew"
    assert _intents(toy) == set()
    assert _states(toy, cli)["cand-s0"] == "completed"


@pytest.mark.e2e
def test_kill_9_during_redo_loses_no_completed_record_and_the_next_run_completes_it(toy: Project, cli) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    _slow_protocol(toy, cli)
    before = _seals(toy)
    redo = ["cand-s0", "cand-s1", "base-s0"]
    env = {**os.environ, "CLT_ROOT": str(toy.root), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [sys.executable, "-c", "from cltoolkit.cli import main; main()", "run", "-p", "toy-v1", "--workers", "1"]
    log = toy.root / "driver.log"
    with log.open("wb") as out:
        driver = subprocess.Popen(
            [*cmd, "--redo", ",".join(redo), "--reason", "rerun on the new node"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while len(_intents(toy)) < 3 and driver.poll() is None and time.monotonic() < deadline:  # intents come first
        time.sleep(0.02)
    assert _intents(toy) == set(redo), log.read_text()
    while len(_intents(toy)) > 2 and time.monotonic() < deadline:  # the first redo's record is sealed
        time.sleep(0.02)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    seals = _seals(toy)
    assert set(seals) == set(before)  # every completed record is still there
    states = _states(toy, cli)
    pending = _intents(toy)
    assert len(pending) in (1, 2) and pending < set(redo)
    assert all(states[r] == "redo-pending" for r in pending)
    assert all(seals[r] == before[r] for r in pending)  # the old records, untouched
    out = cli("run", "-p", "toy-v1", "--workers", "2")
    assert out.exit_code == 0, out.output
    for run_id in redo:
        rec = read_record(toy.runs_dir / "toy-v1" / run_id / "record.json")
        assert rec.replaces is not None and rec.replaces[-1].seal == before[run_id], run_id
        assert rec.replaces[-1].reason == "rerun on the new node"
    assert _intents(toy) == set()
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert json.loads(toy.protocol_path("toy-v1").read_text())["results"]["runs"]["redone"] == 3


def test_a_deleted_committed_record_is_never_run_again_silently(toy: Project, cli) -> None:
    import subprocess

    _frozen(toy, cli)
    git(toy.root, "init", "-q")
    (toy.root / ".gitignore").write_text("runs/**/.seals\n")
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-qm", "runs")
    path = toy.runs_dir / "toy-v1" / "cand-s1" / "record.json"
    path.unlink()
    out = cli("run", "-p", "toy-v1")
    assert out.exit_code == 1
    assert "have a record committed to git that is missing from the store" in out.output
    assert "cand-s1: " in out.output
    assert not path.exists()
    subprocess.run(["git", "checkout", "--", str(path)], cwd=toy.root, check=True)
    restored = path.read_bytes()
    assert cli("run", "-p", "toy-v1").exit_code == 0  # restored: nothing to run
    assert path.read_bytes() == restored
