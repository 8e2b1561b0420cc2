"""The layer rules of docs/design.md section 1 are import-linter contracts (`pyproject.toml`, run by `make lint`).

The contracts pass on the package, and each kind of broken rule, planted in a scratch copy, makes them fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"


def lint(package_parent: Path) -> subprocess.CompletedProcess[str]:
    """Run the repository's contracts over the `cltoolkit` package found in `package_parent`."""
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(REPO / "pyproject.toml")],
        cwd=package_parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_contracts_pass_on_the_package() -> None:
    out = lint(REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


PLANTED = {
    # file to edit, the line added at its top, the contract that must break and the words that name the import
    "protocol-imports-registry": (
        "protocol/hashing.py",
        "import cltoolkit.registry",
        "Layers only point down",
        "cltoolkit.protocol.hashing -> cltoolkit.registry",
    ),
    "stats-imports-torch": ("stats/aggregate.py", "import torch", "never import torch", "cltoolkit.stats.aggregate"),
    "suite-imports-cli": ("suites/ladder/metrics.py", "import cltoolkit.cli", "Suites never import the CLI", "ladder"),
    "ladder-circle": (
        "suites/ladder/methods.py",
        "import cltoolkit.suites.ladder.rungs",
        "No import circles",
        "cycles are allowed in cltoolkit.suites.ladder",
    ),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_planted_wrong_import_breaks_a_contract(case: str, tmp_path: Path) -> None:
    rel, line, contract, names = PLANTED[case]
    shutil.copytree(REPO / "cltoolkit", tmp_path / "cltoolkit", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "cltoolkit" / rel
    text = target.read_text()
    head, sep, body = text.partition("from __future__ import annotations\n")
    target.write_text(head + sep + line + "  # planted\n" + body if sep else line + "\n" + text)
    out = lint(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    broken = out.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and names in broken, out.stdout
