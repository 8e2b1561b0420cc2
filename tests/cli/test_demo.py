"""`make demo` (scripts/demo.sh) runs as README says, on this checkout's installed `clt`: every frozen protocol verifies
in its scratch copy (the copy takes every file a lock names), ladder-v1 runs and reports, and a changed frozen
protocol is refused. The nav4 pilot at its end (minutes of training) is left out here; the nav4 tests cover it."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.walkthrough


def test_the_demo_runs_to_its_pilot() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CLT_ROOT",)}
    env["CLT_DEMO_PILOT"] = "0"
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=600
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    first_verify = out.split("== clt run --protocol ladder-v1", 1)[0]
    assert "frozen protocol(s) verified" in first_verify and "changed or broke" not in first_verify, first_verify
    assert "results written into ladder-v1" in out
    assert "(verify failed as it should)" in out
    assert "demo done (the nav4 pilot skipped" in out
