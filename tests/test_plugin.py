"""A third-party method arrives through the `cltoolkit.plugins` entry-point group and runs through `clt`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, read, write


@pytest.fixture
def plugin_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(REPO / "examples" / "clt-example-plugin"),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return site


def test_plugin_method_runs_through_clt(plugin_site: Path, project) -> None:
    doc = read(project.protocol_path("ladder-v1"))
    doc["comparisons"].append(
        {
            "id": "shrunk",
            "method": "example.shrunk",
            "role": "candidate",
            "label": "Shrunk",
            "hyperparameters": {"a": 0.9, "b": 0.5, "shrink": 0.5},
        }
    )
    write(project.protocol_path("ladder-v1"), doc)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), str(REPO)]), "CLT_ROOT": str(project.root)}
    clt = [sys.executable, "-m", "cltoolkit"]
    listed = subprocess.run([*clt, "list", "method", "--json"], env=env, capture_output=True, text=True, check=True)
    assert any(r["name"] == "example.shrunk" and r["origin"].startswith("plugin") for r in json.loads(listed.stdout))
    # the contract check the README gives a plugin author, run against the installed example plugin
    contract = "from cltoolkit.plugin import check_registered as c; print(c(origin='plugin clt-example-plugin'))"
    checked = subprocess.run([sys.executable, "-c", contract], env=env, capture_output=True, text=True, check=True)
    assert checked.stdout.strip() == "[]"
    out = subprocess.run(
        [*clt, "run", "-p", "ladder-v1", "--pilot", "--methods", "shrunk", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["ran"] == {"completed": 1}
    record = read(Path(summary["store"]) / "shrunk-s0" / "record.json")
    assert record["metrics"]["coefficients"] == {"a": 0.95, "b": 0.5, "c": 0.0}
    # without the plugin on the path, the name is unknown with a clear error
    bare = subprocess.run(
        [*clt, "protocol", "validate", "ladder-v1"],
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert bare.returncode == 2
    assert "unknown method 'example.shrunk'" in bare.stderr
