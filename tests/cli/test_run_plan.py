"""`clt run` says what it has begun before the first run ends: the plan, and an estimate labelled with its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from cltoolkit.run.estimate import MeasuredTimes, estimate, measured_times
from cltoolkit.run.spec import GridPoint
from tests.conftest import REPO


@pytest.mark.e2e
def test_plan_and_estimate_printed_first(project, cli) -> None:
    assert cli("protocol", "freeze", "sessions-v1").exit_code == 0
    first = cli("run", "--protocol", "sessions-v1", "--workers", "2", "--seeds", "0")
    assert first.exit_code == 0, first.output
    lines = first.stderr.splitlines()
    assert lines[0].startswith("sessions-v1 stage main (sha256:"), lines[0]
    assert lines[0].endswith(": 2 planned, 0 already completed, 2 to run on 2 worker(s)"), lines[0]
    assert lines[1].startswith("estimate: none yet (no run of sessions-v1 has been measured"), lines[1]
    # the runs finished once are the estimate's source for the rest, and the label says so
    rest = cli("run", "--protocol", "sessions-v1", "--workers", "2")
    plan, guess = rest.stderr.splitlines()[:2]
    assert plan.endswith(": 24 planned, 2 already completed, 22 to run on 2 worker(s)"), plan
    assert guess.startswith("estimate: ") and "CPU-minutes" in guess, guess
    assert "(an estimate from 2 finished run(s) in runs/sessions-v1; not a measurement)" in guess
    # not a terminal: one line per finished run
    assert sum(": completed - running" in line for line in rest.stderr.splitlines()) == 22


@pytest.mark.committed
def test_estimate_uses_nearest_measurement() -> None:
    protocols = REPO / "protocols"
    own = measured_times([], "store", "wmf-v2", protocols / "wmf-v2.json")
    assert own is not None
    assert own.source.startswith("wmf-v2's results block (45 measured runs on ")
    sibling = measured_times([], "store", "wmf-v1", protocols / "wmf-v1.json")  # wmf-v1 was never reported
    assert sibling is not None
    assert "another version of this protocol" in sibling.source
    assert measured_times([], "store", "mine-v1", Path("/nonexistent/mine-v1.json")) is None


def test_wall_time_is_longest_first_makespan() -> None:
    times = MeasuredTimes({("a", None): [300.0], ("b", None): [100.0]}, "test")
    points = [GridPoint("a", "a", 0), GridPoint("a", "a", 1), GridPoint("b", "b", 0), GridPoint("b", "b", 1)]
    two = estimate(points, times, workers=2, cpus_per_run=1.0)
    assert two is not None
    assert two.wall_s == 400.0
    assert two.cpu_hours == 800.0 / 3600
    assert estimate(points, times, workers=8, cpus_per_run=1.0).wall_s == 300.0  # type: ignore[union-attr]
    assert estimate(points, None, workers=2, cpus_per_run=1.0) is None
