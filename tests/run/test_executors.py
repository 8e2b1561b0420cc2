"""The executor contract, run against every registered executor (Ray under the `dist` marker): success and
resume, a SIGKILLed run leaving its neighbours to finish, exceptions recorded and not retried, timeouts recorded,
crashes retried up to the declared attempts; and `kill -9` of the driver mid-grid followed by a resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from cltoolkit.run.store import RunStore
from tests.conftest import REPO, write
from tests.toy_suite import toy_protocol

EXECUTORS = ["local", pytest.param("ray", marks=pytest.mark.dist)]


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray cluster (2 CPUs, offline, no dashboard, no usage statistics) for the module's Ray tests, on the
    loopback address (Ray otherwise registers its node under the machine's own address)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # one-machine cluster: node address 127.0.0.1
    ray = pytest.importorskip("ray")
    import ray._private.ray_constants as constants

    constants.ENABLE_RAY_CLUSTER = False  # (in case Ray was imported before this fixture set the variable)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["PYTHONPATH"] = str(REPO)  # workers import the tests' toy suite
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield ray
    ray.shutdown()


@pytest.fixture(params=EXECUTORS)
def executor(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
    return str(request.param)


def _protocol(project: Project, behaviors: dict[str, dict[str, Any]], seeds: int = 3) -> None:
    doc = toy_protocol(seeds=seeds)
    doc["comparisons"] = [
        {
            "id": cid,
            "method": "toy.method",
            "role": "candidate",
            "label": cid,
            "hyperparameters": {"mean": 0.5, "sd": 0.01, **extra},
        }
        for cid, extra in behaviors.items()
    ]
    doc["budget"] = {}
    doc["gates"] = []
    write(project.protocol_path("toy-v1"), doc)
    freeze(project, "toy-v1")


def _states(project: Project) -> dict[str, tuple[str, int, str]]:
    scan = RunStore(project.runs_dir, "toy-v1").scan()
    assert not scan.broken, scan.broken
    return {rid: (r.status.state, r.status.attempts, r.status.reason) for rid, r in scan.records.items()}


def _driver(project: Project, workers: int, **popen: Any) -> subprocess.Popen:  # type: ignore[type-arg]
    """`clt run -p toy-v1` in its own process (so it can be killed or interrupted)."""
    # faulthandler: a driver that hangs is sent SIGABRT by _finish and prints every thread's stack
    env = {**os.environ, "CLT_ROOT": str(project.root), "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"}
    cmd = [
        sys.executable,
        "-c",
        "from cltoolkit.cli import main; main()",
        "run",
        "-p",
        "toy-v1",
        "--workers",
        str(workers),
    ]
    return subprocess.Popen(cmd, env=env, **popen)


def _finish(driver: subprocess.Popen, timeout: float = 60) -> str:  # type: ignore[type-arg]
    """The driver's output once it exits; a driver still running after `timeout` fails the test with its threads'
    stacks (so a hang seen once in CI says where it was)."""
    try:
        output, _ = driver.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        driver.send_signal(signal.SIGABRT)
        output, _ = driver.communicate(timeout=30)
        pytest.fail(f"the driver did not exit within {timeout:g} s; its stacks:\n{output}")
    return str(output)


def _wait_for_records(project: Project, count: int) -> None:
    """Until `count` runs have finished; a loaded machine may take long to start workers, so fail loudly, never on."""
    deadline = time.monotonic() + 180
    while len(list((project.runs_dir / "toy-v1").glob("*/record.json"))) < count:
        assert time.monotonic() < deadline, f"fewer than {count} record(s) after 180 s"
        time.sleep(0.05)


def _wait_for_a_running_run(project: Project) -> None:
    """Until a run is under way: its job is written and its record is not (records are written once, at the end)."""
    folder = project.runs_dir / "toy-v1"
    deadline = time.monotonic() + 60
    while not any(not (p.parent / "record.json").exists() for p in folder.glob("*/job.json")):
        assert time.monotonic() < deadline, "no run started"
        time.sleep(0.05)


def _wait_until_no_worker(project: Project) -> None:
    deadline = time.monotonic() + 30
    while _workers_alive(project):
        assert time.monotonic() < deadline, f"workers still alive: {_workers_alive(project)}"
        time.sleep(0.05)


def _run(cli, executor: str, *extra: str):
    return cli("run", "-p", "toy-v1", "--executor", executor, "--workers", "2", *extra)


def test_success_and_resume(toy, cli, executor) -> None:
    _protocol(toy, {"a": {}, "b": {}})
    out = _run(cli, executor)
    assert out.exit_code == 0, out.output
    states = _states(toy)
    assert sorted(states) == [f"{c}-s{s}" for c in "ab" for s in range(3)]
    assert all(v == ("completed", 1, "") for v in states.values())
    before = {p: p.read_bytes() for p in toy.runs_dir.rglob("record.json")}
    assert "6 already completed, ran 0" in _run(cli, executor).output
    (toy.runs_dir / "toy-v1" / "b-s1" / "record.json").unlink()
    out = _run(cli, executor)
    assert "5 already completed, ran 1" in out.output
    assert "redoing b-s1" in out.output
    for path, data in before.items():
        if path.parent.name != "b-s1":
            assert path.read_bytes() == data  # finished runs are never recomputed


def test_killed_run_leaves_neighbours_finishing(toy, cli, executor) -> None:
    _protocol(toy, {"good": {"sleepSeconds": 0.3}, "killer": {"behavior": "kill"}}, seeds=2)
    out = _run(cli, executor, "--max-attempts", "2")
    assert out.exit_code == 1
    states = _states(toy)
    assert states["good-s0"] == states["good-s1"] == ("completed", 1, "")
    for rid in ("killer-s0", "killer-s1"):
        state, attempts, reason = states[rid]
        assert state == "crashed" and attempts == 2, states[rid]  # retried up to the declared attempts, then kept
        assert "signal" in reason or "died" in reason


def test_crash_once_is_retried_and_counted(toy, cli, executor) -> None:
    _protocol(toy, {"flaky": {"behavior": "kill-once"}}, seeds=1)
    assert _run(cli, executor).exit_code == 0
    assert _states(toy)["flaky-s0"] == ("completed", 2, "")


def test_exception_is_recorded_not_retried(toy, cli, executor) -> None:
    _protocol(toy, {"bad": {"behavior": "raise"}}, seeds=1)
    assert _run(cli, executor, "--max-attempts", "3").exit_code == 1
    assert _states(toy)["bad-s0"] == ("failed", 1, "RuntimeError: toy failure requested")
    log = (toy.runs_dir / "toy-v1" / "bad-s0" / "log.txt").read_text()
    assert "Traceback" in log
    assert "toy failure requested" in log


def test_timeout_is_recorded(toy, cli, executor) -> None:
    _protocol(toy, {"slow": {"sleepSeconds": 60}}, seeds=1)
    start = time.monotonic()
    assert _run(cli, executor, "--timeout", "2").exit_code == 1
    assert time.monotonic() - start < 40
    state, attempts, reason = _states(toy)["slow-s0"]
    assert state == "timeout"
    assert attempts == 1
    assert "2 s" in reason


@pytest.mark.e2e
def test_driver_killed_mid_grid_then_resumed(toy, cli) -> None:
    _protocol(toy, {"a": {"sleepSeconds": 0.4}, "b": {"sleepSeconds": 0.4}}, seeds=4)
    driver = _driver(toy, 1, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    folder = toy.runs_dir / "toy-v1"
    _wait_for_records(toy, 2)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    _wait_until_no_worker(toy)  # an orphaned worker notices within a second and stops
    finished = {p.parent.name: p.read_bytes() for p in folder.glob("*/record.json")}
    assert 2 <= len(finished) < 8
    for data in finished.values():
        json.loads(data)  # atomic writes: nothing half written
    out = cli("run", "-p", "toy-v1", "--workers", "2")
    assert out.exit_code == 0, out.output
    assert f"{len(finished)} already completed" in out.output
    states = _states(toy)
    assert len(states) == 8
    assert all(s[0] == "completed" for s in states.values())
    for rid, data in finished.items():
        assert (folder / rid / "record.json").read_bytes() == data  # not recomputed
    status = json.loads(cli("status", "-p", "toy-v1", "--json").output)
    assert status["counts"]["completed"] == 8


def test_status_shows_partial_refused_and_missing(toy, cli) -> None:
    _protocol(toy, {"a": {}}, seeds=4)
    assert cli("run", "-p", "toy-v1", "--seeds", "0").exit_code == 0
    (toy.runs_dir / "toy-v1" / "a-s1").mkdir()
    (toy.runs_dir / "toy-v1" / "a-s1" / "record.json").write_text('{"recordVersion": 1, "runId": ')  # truncated
    (toy.runs_dir / "toy-v1" / "a-s2").mkdir()  # a run folder without a record: running, or its driver was killed
    status = json.loads(cli("status", "-p", "toy-v1", "--json").output)
    states = {r["runId"]: r["state"] for r in status["runs"]}
    assert states == {"a-s0": "completed", "a-s1": "refused", "a-s2": "partial", "a-s3": "missing"}
    assert "unreadable record" in next(r["reason"] for r in status["runs"] if r["runId"] == "a-s1")
    rows = cli("status", "-p", "toy-v1").output.splitlines()
    assert rows[2].split() == ["a", "ok", "R", "P", "."]
    refused = cli("run", "-p", "toy-v1")  # a record that cannot be trusted is named, never silently redone
    assert refused.exit_code == 1
    assert "a-s1: unreadable record" in refused.output
    assert (toy.runs_dir / "toy-v1" / "a-s1" / "record.json").exists()
    (toy.runs_dir / "toy-v1" / "a-s1" / "record.json").unlink()
    out = cli("run", "-p", "toy-v1")
    assert out.exit_code == 0
    assert "redoing a-s2: no record" in out.output
    assert "ran 3" in out.output


@pytest.mark.dist
def test_ray_gpu_request_without_gpus_fails_fast(toy, cli, ray_cluster) -> None:
    _protocol(toy, {"a": {}}, seeds=1)
    start = time.monotonic()
    out = cli("run", "-p", "toy-v1", "--executor", "ray", "--gpus-per-run", "1")
    assert out.exit_code == 1
    assert time.monotonic() - start < 30
    assert "request 1 GPU(s) each but the Ray cluster has 0; nothing was started" in out.output
    assert not list(toy.runs_dir.glob("toy-v1/*/record.json"))


def test_ray_missing_is_a_clear_error(toy, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    _protocol(toy, {"a": {}}, seeds=1)
    out = cli("run", "-p", "toy-v1", "--executor", "ray")
    assert out.exit_code == 2
    assert "the ray executor needs Ray: pip install 'clt-prereg[ray]'" in out.output
    assert not list(toy.runs_dir.glob("toy-v1/*"))  # nothing half made


@pytest.mark.e2e
def test_ctrl_c_marks_running_runs_interrupted_and_keeps_finished(toy, cli) -> None:
    _protocol(toy, {"a": {"sleepSeconds": 1.0}}, seeds=6)
    driver = _driver(toy, 2, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for_records(toy, 1)
    _wait_for_a_running_run(toy)
    driver.send_signal(signal.SIGINT)
    output = _finish(driver)
    assert driver.returncode == 130
    assert "Traceback" not in output
    assert "interrupted: clt run --protocol toy-v1 stopped by the user" in output and "to resume" in output, output
    states = _states(toy)
    assert {s[0] for s in states.values()} <= {"completed", "interrupted"}
    assert any(s[0] == "interrupted" for s in states.values())
    assert any(s[0] == "completed" for s in states.values())
    done = sum(1 for s in states.values() if s[0] == "completed")
    out = cli("run", "-p", "toy-v1", "--workers", "2")
    assert out.exit_code == 0
    assert f"{done} already completed" in out.output
    assert all(s[0] == "completed" for s in _states(toy).values())


@pytest.mark.e2e
def test_sigterm_stops_the_grid_like_ctrl_c(toy, cli) -> None:
    _protocol(toy, {"a": {"sleepSeconds": 1.0}}, seeds=4)
    driver = _driver(toy, 2, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for_records(toy, 1)
    _wait_for_a_running_run(toy)
    driver.terminate()
    output = _finish(driver)
    assert driver.returncode != 0
    assert "Traceback" not in output
    states = _states(toy)
    assert "interrupted" in {s[0] for s in states.values()}
    assert "completed" in {s[0] for s in states.values()}


def _workers_alive(project: Project, parent: int | None = None) -> list[int]:
    """Worker processes of this project's runs still alive (their command line names a job in the run folder),
    optionally only the children of `parent`: a worker's own short-lived fork (before it execs a helper such as
    `uname`) shows the same command line and is not a second worker."""
    alive = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if "cltoolkit.run.worker" in cmdline and str(project.runs_dir) in cmdline:
            if parent is None or ppid == parent:
                alive.append(int(proc.name))
    return alive


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_driver_alone_stops_running_workers_at_once(toy, sig) -> None:
    """`kill -INT` / `kill -TERM` of the driver (not of its process group, as a terminal's Ctrl-C would be): the
    running workers are killed, not waited for, and their runs are recorded as interrupted; a run that never
    started gets no record."""
    _protocol(toy, {"a": {"sleepSeconds": 120.0}}, seeds=3)
    driver = _driver(toy, 2, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while len(_workers_alive(toy, driver.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_workers_alive(toy, driver.pid)) == 2
    start = time.monotonic()
    driver.send_signal(sig)
    output = _finish(driver)
    assert time.monotonic() - start < 20, "the driver waited for its running workers"
    assert driver.returncode != 0
    assert "Traceback" not in output
    assert _workers_alive(toy) == []
    states = _states(toy)  # the two running runs are interrupted; the third never started and has no record
    assert len(states) == 2
    assert {s[0] for s in states.values()} == {"interrupted"}


def test_a_failing_run_set_up_stops_the_grid_and_reaches_the_caller(toy) -> None:
    """An error while a run is being set up (here: the progress callback raises when the third run starts) stops
    the grid at once: the running workers are killed, no further run starts, and the error reaches the caller."""
    from cltoolkit.run.runner import Callbacks, RunOptions, run_protocol

    _protocol(toy, {"a": {"sleepSeconds": 120.0}}, seeds=4)
    begun: list[str] = []

    def on_start(spec) -> None:
        begun.append(spec.run_id)
        if len(begun) == 2:
            deadline = time.monotonic() + 60
            while len(_workers_alive(toy, os.getpid())) < 1 and time.monotonic() < deadline:
                time.sleep(0.05)  # the first run's worker is running
            raise RuntimeError("set-up failed")

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="set-up failed"):
        run_protocol(toy, "toy-v1", RunOptions(workers=2), Callbacks(on_start=on_start))
    assert time.monotonic() - start < 30, "the grid waited for its running worker"
    assert len(begun) == 2
    assert _workers_alive(toy) == []


def test_ctrl_c_just_after_a_record_is_written_keeps_it_completed(toy, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CI race behind this test: Ctrl-C landed between a finished run's record write and the driver noting
    the run done, and the finished record was overwritten as `interrupted`."""
    from cltoolkit.run.store import RunStore

    _protocol(toy, {"a": {}}, seeds=1)

    def ctrl_c(self: RunStore, run_id: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(RunStore, "clear_redo_intent", ctrl_c)
    out = cli("run", "-p", "toy-v1")
    assert out.exit_code == 130, out.output
    assert _states(toy) == {"a-s0": ("completed", 1, "")}
