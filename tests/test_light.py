"""`clt --help`, `clt protocol verify` and `clt protocol validate` import no heavy library; a Ctrl-C while the
command line loads exits 130 without a traceback."""

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


# Ctrl-C at a chosen moment of start-up: when `module` is first imported, or (None) when the command line starts.
# SIGINT gets Python's own handler first, as at a terminal: a shell without job control starts a background command
# with SIGINT ignored, and Python then leaves it ignored (the test would see a clean exit 0, not the interrupt).
CTRL_C_AT = """
import builtins, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv = ["clt", "--help"]
at = {module!r}
real = builtins.__import__
def interrupt_on(name, globals=None, locals=None, fromlist=(), level=0):
    if at in [name, *(name + "." + f for f in fromlist or ())] and at not in sys.modules:
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, globals, locals, fromlist, level)
builtins.__import__ = interrupt_on
import cltoolkit.cli
if at is None:
    def interrupted():
        raise KeyboardInterrupt
    cltoolkit.cli.app = interrupted
cltoolkit.cli.main()
"""


@pytest.mark.parametrize("module", ["typer", "cltoolkit.cli.run", None], ids=str)
def test_ctrl_c_while_the_command_line_loads_exits_quietly(module: str | None) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CTRL_C_AT.format(module=module)], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 130 and "Traceback" not in out.stderr, out.stderr
