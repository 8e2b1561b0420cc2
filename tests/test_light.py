"""`clt --help`, `clt protocol verify` and `clt protocol validate` import no heavy library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "gymnasium", "minigrid", "mujoco", "dm_control", "ray", "matplotlib")
SCRIPT = """
import sys
from typer.testing import CliRunner
from cltoolkit.cli import app
r = CliRunner().invoke(app, {args!r})
assert r.exit_code == 0, r.output
heavy = [m for m in {heavy!r} if m in sys.modules]
print(",".join(heavy))
"""


@pytest.mark.parametrize(
    "args", [["--help"], ["protocol", "verify"], ["protocol", "validate", "nav4-v1"], ["list"]], ids=" ".join
)
def test_no_heavy_imports(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(args=args, heavy=HEAVY)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "", f"heavy modules imported: {out.stdout}"
