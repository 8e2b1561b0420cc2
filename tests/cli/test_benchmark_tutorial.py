"""README's "Your own benchmark", run verbatim in an empty folder against a normal install of a wheel built from
this checkout: a declared continual-RL stream from `clt init` to a checked report."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_tutorial import wheel_env  # noqa: F401 - the fixture: a wheel of this checkout, installed
from tests.conftest import REPO

pytest.importorskip("torch")
pytest.importorskip("gymnasium")


def _blocks() -> list[str]:
    section = (REPO / "README.md").read_text().split("## Your own benchmark\n", 1)[1].split("\n## ", 1)[0]
    found: list[str] = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(found) == 2, "README's benchmark section should have its two command blocks"
    return found


@pytest.mark.walkthrough
def test_a_declared_stream_runs_from_init_to_a_checked_report(
    wheel_env: dict[str, str],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    continuous, discrete = _blocks()
    (tmp_path / "benchmark.sh").write_text(continuous + "\n" + discrete)  # the second runs in the first's project
    done = subprocess.run(
        ["bash", "-e", "benchmark.sh"], cwd=tmp_path, env=wheel_env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    project = tmp_path / "my-bench"
    doc = json.loads((project / "protocols" / "mybench-v1.json").read_text())
    assert doc["status"]["stage"] == "reported"
    records = [json.loads(p.read_text()) for p in (project / "runs" / "mybench-v1").glob("*/record.json")]
    assert len(records) == 6
    assert all(r["status"]["state"] == "completed" for r in records)
    memory = [r for r in records if r["spec"]["comparison"] == "memory"]
    assert all(r["budget"]["replaySamples"] > 0 for r in memory)
    assert all(0.0 <= r["metrics"]["crl.performance-v1"] <= 1.0 for r in records)
    level = doc["results"]["summaries"]["ownTrainingLevel"]
    report = (project / "reports" / "mybench-v1" / "report.md").read_text()
    assert ("Smoke test, not a result" in report) == (level == "floor")
    ft = doc["results"]["summaries"]["forwardTransfer"]
    assert ft["referenceRuns"] == 2 and set(ft) >= {"finetuning", "memory"}
    assert "Forward transfer (CW's normalized form" in report
    grid = json.loads((project / "protocols" / "gridbench-v1.json").read_text())
    assert grid["status"]["stage"] == "reported" and grid["learner"]["algorithm"] == "ppo"
    records = [json.loads(p.read_text()) for p in (project / "runs" / "gridbench-v1").glob("*/record.json")]
    assert len(records) == 4 and all(r["status"]["state"] == "completed" for r in records)
    assert all(r["metrics"]["updatesPerTask"] == {"empty": 48, "doorkey": 48} for r in records)
