"""Evidence that cannot be quietly changed: sealed records refused by name when tampered with, results pinned to
their records (`clt report --check`), one driver per store, isolated workers, and clean errors."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from cltoolkit.run.record import record_seal
from cltoolkit.run.runner import run_protocol
from cltoolkit.run.store import RunStore
from tests.conftest import REPO, read, write
from tests.toy_suite import toy_protocol

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _ran(project: Project) -> Path:
    write(project.protocol_path("toy-v1"), toy_protocol(seeds=3))
    freeze(project, "toy-v1")
    run_protocol(project, "toy-v1")
    return project.runs_dir / "toy-v1"


def _edit(path: Path, change: Any, *, reseal: bool = False) -> None:
    """Edit a record's JSON in place as a person with an editor would (optionally recomputing its seal, as a tool
    that knows the seal rule would)."""
    data = read(path)
    change(data)
    if reseal:
        data["seal"] = record_seal(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def _refused(cli, *names: str) -> str:
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code == 1, out.output
    assert "Traceback" not in out.output
    for name in names:
        assert name in out.output, out.output
    return str(out.output)


def _set_score(data: dict[str, Any]) -> None:
    data["metrics"]["toy.score-v1"]["t1"] = 0.0001


def test_an_edited_metric_is_refused_by_name(toy, cli) -> None:
    store = _ran(toy)
    _edit(store / "cand-s0" / "record.json", _set_score)
    text = _refused(cli, "cand-s0", "the record was changed after it was written")
    assert "missing" not in text.split("\n", 1)[0]
    status = json.loads(cli("status", "-p", "toy-v1", "--json").output)
    assert {r["runId"]: r["state"] for r in status["runs"]}["cand-s0"] == "refused"


def test_a_swapped_record_is_refused(toy, cli) -> None:
    store = _ran(toy)
    shutil.copy(store / "cand-s0" / "record.json", store / "cand-s1" / "record.json")
    _refused(cli, "cand-s1", "holds a record of run 'cand-s0'")
    _edit(store / "cand-s1" / "record.json", lambda d: d.update(runId="cand-s1"))  # and the id set to match
    _refused(cli, "cand-s1", "changed after it was written")
    _edit(store / "cand-s1" / "record.json", lambda d: d.update(runId="cand-s1"), reseal=True)  # resealed too
    _refused(cli, "cand-s1", "/spec/seed is 0, but planned run 'cand-s1' has 1")


def test_a_removed_or_non_numeric_metric_is_refused(toy, cli) -> None:
    store = _ran(toy)
    _edit(store / "base-s0" / "record.json", lambda d: d["metrics"].pop("toy.score-v1"), reseal=True)
    _edit(store / "base-s1" / "record.json", lambda d: d["metrics"]["toy.score-v1"].update(t1="0.5"), reseal=True)
    _edit(store / "base-s2" / "record.json", lambda d: d["metrics"].update({"toy.score-v1": None}), reseal=True)
    _refused(
        cli,
        "base-s0: /metrics/toy.score-v1: missing",
        "base-s1: /metrics/toy.score-v1: not a finite number at t1",
        "base-s2: /metrics/toy.score-v1: expected a finite number, got null",
    )


def test_a_forged_pilot_record_is_refused(toy, cli) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=3))
    assert cli("run", "-p", "toy-v1", "--pilot").exit_code == 0
    freeze(toy, "toy-v1")
    run_protocol(toy, "toy-v1")
    lock = read(toy.lock_path("toy-v1"))
    pilot = next(toy.pilot_runs_dir.glob("*/toy-v1/cand-s0/record.json"))
    target = toy.runs_dir / "toy-v1" / "cand-s0" / "record.json"
    shutil.copy(pilot, target)

    def forge(d: dict[str, Any]) -> None:
        d["protocol"].update(pilot=False, sha256=lock["sha256"])

    _edit(target, forge)
    _refused(cli, "cand-s0", "changed after it was written")
    shutil.copy(pilot, target)  # not edited at all: a pilot record in the official store
    _refused(cli, "cand-s0: a pilot record", "pilot record(s)")


def test_symbolic_links_are_refused_not_followed(toy, cli, tmp_path) -> None:
    store = _ran(toy)
    doctored = tmp_path / "doctored.json"
    shutil.copy(store / "cand-s0" / "record.json", doctored)
    _edit(doctored, _set_score, reseal=True)
    (store / "cand-s0" / "record.json").unlink()
    (store / "cand-s0" / "record.json").symlink_to(doctored)
    (store / "cand-s1" / "record.json").unlink()
    (store / "cand-s1" / "record.json").symlink_to("/etc/passwd")
    _refused(cli, "cand-s0: holds symbolic link(s) record.json", "cand-s1: holds symbolic link(s) record.json")
    out = cli("run", "-p", "toy-v1")  # the driver refuses too: nothing is rerun over evidence
    assert out.exit_code == 1
    assert "cand-s0" in out.output
    assert doctored.exists()


def test_truncated_and_extra_field_records_are_corrupt_not_missing(toy, cli) -> None:
    store = _ran(toy)
    path = store / "base-s0" / "record.json"
    path.write_text(path.read_text()[: len(path.read_text()) // 2])
    _edit(store / "base-s1" / "record.json", lambda d: d.update(extra=1))
    _edit(store / "base-s2" / "record.json", lambda d: d.update(extra=1), reseal=True)
    text = _refused(cli, "base-s0: unreadable record", "base-s1: unreadable record", "base-s2: unreadable record")
    assert "unknown field" in text
    assert "invalid JSON" in text


def test_unsealed_records_are_sealed_once_without_changing_values(toy, cli) -> None:
    store = _ran(toy)
    before = {}
    for path in store.glob("*/record.json"):  # as records were written before sealing (version 1)
        data = read(path)
        del data["seal"]
        data["recordVersion"] = 1
        for key in ("components", "node"):
            data["provenance"].pop(key)
        path.write_text(json.dumps(data, indent=2, sort_keys=True))
        before[path] = data
    _refused(cli, "cand-s0: unsealed", "clt seal --protocol toy-v1")
    out = cli("seal", "-p", "toy-v1")
    assert out.exit_code == 0
    assert "sealed 6 record(s)" in out.output
    for path, data in before.items():
        after = read(path)
        assert after.pop("seal") == record_seal(after)
        assert after.pop("recordVersion") == 2
        assert {k: v for k, v in data.items() if k != "recordVersion"} == after
    assert "sealed 0 record(s); 6 were sealed already" in cli("seal", "-p", "toy-v1").output
    assert cli("report", "-p", "toy-v1").exit_code == 0


def test_results_pin_their_evidence_and_check_mode(toy, cli) -> None:
    store = _ran(toy)
    assert cli("report", "-p", "toy-v1").exit_code == 0
    results = read(toy.protocol_path("toy-v1"))["results"]
    assert sorted(results["evidence"]) == sorted(
        p.name for p in store.iterdir() if not p.name.startswith(".")
    )  # run folders
    assert results["evidence"]["cand-s0"] == read(store / "cand-s0" / "record.json")["seal"]
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 0
    assert "reproduces from 6 records" in out.output
    _edit(store / "cand-s0" / "record.json", _set_score, reseal=True)  # an edit that keeps a valid seal
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "/results/evidence/cand-s0: changed" not in out.output
    assert "/evidence/cand-s0: changed from" in out.output
    assert '/gates/0/decision: changed from "pass" to "fail"' in out.output
    shutil.rmtree(store / "cand-s0")
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "/evidence/cand-s0: removed" in out.output


@pytest.mark.e2e
def test_check_fails_on_a_deleted_block_or_folder_and_an_edited_or_deleted_report(toy, cli) -> None:
    _ran(toy)
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert read(toy.protocol_path("toy-v1"))["status"]["reportedStages"] == ["main"]
    folder = toy.reports_dir / "toy-v1"
    saved = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    doc = toy.protocol_path("toy-v1").read_bytes()

    def restore() -> None:
        shutil.rmtree(folder)
        for path, data in saved.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        toy.protocol_path("toy-v1").write_bytes(doc)
        assert cli("report", "-p", "toy-v1", "--check").exit_code == 0

    restore()
    md = folder / "main" / "report.md"
    md.write_text(md.read_text().replace("PASS", "FAIL"))
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "reports/toy-v1/main/report.md: differs from the report rendered" in out.output
    restore()
    html = folder / "report.html"
    html.write_text(html.read_text().replace("PASS", "FAIL"))
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "reports/toy-v1/report.html: differs" in out.output
    restore()
    (folder / "report.md").unlink()
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "reports/toy-v1/report.md: missing" in out.output
    restore()
    shutil.rmtree(folder / "main")
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "stage 'main' was reported (status.reportedStages) but" in out.output
    restore()
    data = read(toy.protocol_path("toy-v1"))
    data["results"] = None
    write(toy.protocol_path("toy-v1"), data)
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "the results block of a reported protocol is missing" in out.output


def test_check_renders_equal_blocks_once_and_still_compares_every_report(toy, cli, monkeypatch) -> None:
    """The protocol's own block and its stage's results.json are one block: the check renders it once (half of
    nav4-v1's check was drawing the same figures twice) and compares both report pairs with it."""
    import cltoolkit.report.render as render

    _ran(toy)
    assert cli("report", "-p", "toy-v1").exit_code == 0
    calls = []
    real = render.render_report

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[2].stage)
        return real(*args, **kwargs)

    monkeypatch.setattr(render, "render_report", counted)
    assert cli("report", "-p", "toy-v1", "--check").exit_code == 0
    assert calls == ["main"]
    md = toy.reports_dir / "toy-v1" / "main" / "report.md"
    md.write_text(md.read_text().replace("PASS", "FAIL"))
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code == 1
    assert "reports/toy-v1/main/report.md: differs" in out.output
    assert "reports/toy-v1/report.md" not in out.output


def test_mixed_component_code_is_refused_or_flagged(toy, cli) -> None:
    store = _ran(toy)
    key = "method:toy.method"

    def other_code(d: dict[str, Any]) -> None:
        d["provenance"]["components"][key]["sourceSha256"] = "sha256:" + "1" * 64

    assert key in read(store / "cand-s1" / "record.json")["provenance"]["components"]
    _edit(store / "cand-s1" / "record.json", other_code, reseal=True)
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code == 1
    assert "comparison 'cand'" in out.output
    assert "different code" in out.output
    out = cli("report", "-p", "toy-v1", "--allow-mixed-code")
    assert out.exit_code == 0, out.output
    assert read(toy.protocol_path("toy-v1"))["results"]["mixedComponentCode"]
    assert 'style="color:#b00020"' in (toy.reports_dir / "toy-v1" / "report.html").read_text()


def test_stale_attempt_files_are_cleaned_and_modes_follow_the_umask(toy, cli) -> None:
    store = _ran(toy)
    (store / "cand-s0" / "output-0123456789ab.json").write_text("{}")
    (store / "cand-s0" / ".record.json.x1.tmp").write_text("{")
    assert cli("run", "-p", "toy-v1").exit_code == 0
    left = sorted(p.name for p in (store / "cand-s0").iterdir())
    assert not [n for n in left if n.startswith("output-") or n.endswith(".tmp")], left
    mask = os.umask(0o022)
    os.umask(mask)
    assert (store / "cand-s0" / "record.json").stat().st_mode & 0o777 == 0o666 & ~mask
    assert RunStore(toy.runs_dir, "toy-v1").lock_path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_planted_module_does_not_run_in_workers(toy, cli) -> None:
    marker = toy.root / "planted-ran"
    # named like a dependency the worker imports; the project folder is the working directory
    (toy.root / "rfc8785.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise ImportError('planted')\n")
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    sys.modules.pop("rfc8785", None)  # (the test process imported the real one long before)
    import rfc8785  # noqa: F401

    out = cli("run", "-p", "toy-v1", "--workers", "2")
    assert out.exit_code == 0, out.output
    assert not marker.exists()


def test_a_planted_log_link_is_refused(toy, cli, tmp_path) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    outside = tmp_path / "outside.txt"
    (toy.runs_dir / "toy-v1" / "cand-s0").mkdir(parents=True)
    (toy.runs_dir / "toy-v1" / "cand-s0" / "log.txt").symlink_to(outside)
    out = cli("run", "-p", "toy-v1")
    assert out.exit_code == 1
    assert "cand-s0: holds symbolic link(s) log.txt" in out.output
    assert not outside.exists()


def _driver(project: Project, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CLT_ROOT": str(project.root), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", "from cltoolkit.cli import main; main()", "run", "-p", "toy-v1", *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _two_drivers(project: Project, wait: bool, together: bool = False) -> tuple[list[str], list[int]]:
    first = _driver(project, "--workers", "2")
    deadline = time.monotonic() + 30
    lock = RunStore(project.runs_dir, "toy-v1").lock_path
    while not together and (not lock.exists() or not lock.read_text()):
        assert time.monotonic() < deadline
        assert first.poll() is None
        time.sleep(0.02)
    second = _driver(project, "--workers", "2", *(["--wait"] if wait else []))
    outs = [p.communicate(timeout=120)[0] for p in (first, second)]
    return outs, [first.returncode, second.returncode]


def _slow_protocol(project: Project) -> None:
    doc = toy_protocol(seeds=3)
    for comp in doc["comparisons"]:
        comp["hyperparameters"].update(behavior="sleep", sleepSeconds=0.5)
    write(project.protocol_path("toy-v1"), doc)
    freeze(project, "toy-v1")


def _check_once_each(project: Project) -> None:
    scan = RunStore(project.runs_dir, "toy-v1").scan()
    assert not scan.broken
    assert len(scan.records) == 6
    assert all(r.status.state == "completed" and r.status.attempts == 1 for r in scan.records.values())
    for run_dir in (project.runs_dir / "toy-v1").glob("[!.]*"):  # each run's worker started once
        assert (run_dir / "log.txt").read_text().count("cltoolkit.run.worker") <= 1


@pytest.mark.e2e
def test_a_second_driver_on_one_store_is_refused_at_once(toy) -> None:
    _slow_protocol(toy)
    (out1, out2), (rc1, rc2) = _two_drivers(toy, wait=False)
    assert rc1 == 0, out1
    assert rc2 == 1 and "in use by another clt driver (pid" in out2 and "Traceback" not in out2, out2
    _check_once_each(toy)


@pytest.mark.e2e
def test_a_waiting_second_driver_runs_nothing_twice(toy) -> None:
    _slow_protocol(toy)
    (out1, out2), (rc1, rc2) = _two_drivers(toy, wait=True)
    assert rc1 == 0 and rc2 == 0, out1 + out2
    assert "6 already completed, ran 0" in out2
    _check_once_each(toy)


@pytest.mark.slow
@pytest.mark.parametrize("repeat", range(10))
def test_two_drivers_in_a_loop(toy, repeat: int) -> None:
    _slow_protocol(toy)
    (out1, out2), (rc1, rc2) = _two_drivers(toy, wait=repeat % 2 == 1, together=repeat % 3 != 0)
    assert sorted((rc1, rc2)) in ([0, 0], [0, 1]), out1 + out2
    ran = [out for out in (out1, out2) if "ran 6" in out]
    assert len(ran) == 1, out1 + out2  # exactly one of them ran the grid
    _check_once_each(toy)


def test_environment_faults_are_one_line(toy, cli, monkeypatch) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    for code, words in ((errno.EROFS, "read-only"), (errno.ENOSPC, "no space left")):

        def fail(self: RunStore, record: object, code: int = code) -> Path:
            raise OSError(code, os.strerror(code), str(self.folder / "x"))

        monkeypatch.setattr(RunStore, "write", fail)
        out = cli("run", "-p", "toy-v1")
        assert out.exit_code == 1 and words in out.output and "Traceback" not in out.output, out.output
        assert sum(line.startswith("error") for line in out.output.splitlines()) == 1


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("seeds.stages.0.seeds.5=3", "is a list of 5; '5' is not an index"),
        ("comparisons.x=1", "'x' is not an index"),
        ("nothing.here=1", "no field 'nothing'"),
    ],
)
def test_bad_set_overrides_are_one_line(toy, cli, override: str, words: str) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=5))
    out = cli("run", "-p", "toy-v1", "--set", override)
    assert out.exit_code == 2 and words in out.output and "Traceback" not in out.output, out.output


def test_a_huge_integer_is_a_clear_error(toy, cli) -> None:
    text = json.dumps(toy_protocol(seeds=2)).replace('"updates": 100', '"updates": ' + "9" * 5000, 1)
    toy.protocol_path("toy-v1").write_text(text)
    for args in (("protocol", "validate", "toy-v1"), ("protocol", "freeze", "toy-v1"), ("protocol", "hash", "toy-v1")):
        out = cli(*args)
        assert out.exit_code == 2 and "out of range" in out.output and len(out.output) < 400, out.output
