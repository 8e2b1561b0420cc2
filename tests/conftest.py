from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cltoolkit.cli import app
from cltoolkit.project import Project
from cltoolkit.registry import reset_registries

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _clt_root_kept() -> Iterator[None]:
    """`clt --root` sets CLT_ROOT for its process (workers and plugins find the project that way); a test that invokes
    the CLI in process must not leave it set for the tests after it (their subprocesses inherit it)."""
    before = os.environ.get("CLT_ROOT")
    yield
    if before is None:
        os.environ.pop("CLT_ROOT", None)
    else:
        os.environ["CLT_ROOT"] = before


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    """A scratch copy of this repository's protocols (no locks) as the current project."""
    root = tmp_path / "proj"
    shutil.copytree(REPO / "protocols", root / "protocols")
    for path in (root / "protocols").glob("*.json"):  # drafts: without locks, a reported protocol fails verify
        doc = json.loads(path.read_text())
        doc["status"] = {"stage": "draft", "updatedOn": "2026-12-01", "note": "scratch copy"}
        doc["results"] = None
        path.write_text(json.dumps(doc, indent=2))
    (root / "registry" / "locks").mkdir(parents=True)
    monkeypatch.setenv("CLT_ROOT", str(root))
    monkeypatch.setenv("CLT_WITHOUT_GIT", "1")  # a scratch project outside git: verify checks hashes only, and says so
    monkeypatch.chdir(root)
    reset_registries()
    yield Project(root)
    reset_registries()


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    """A scratch project whose components file registers the tests' toy suite (workers find it via PYTHONPATH)."""
    from cltoolkit.registry import registries
    from tests.toy_suite import COMPONENTS

    root = tmp_path / "toyproj"
    (root / "protocols").mkdir(parents=True)
    (root / "registry" / "locks").mkdir(parents=True)
    write(root / "registry" / "components.json", COMPONENTS)
    monkeypatch.setenv("CLT_ROOT", str(root))
    monkeypatch.setenv("CLT_WITHOUT_GIT", "1")  # as above; inside a git repository of its own, history is checked
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.chdir(root)
    reset_registries()
    registries(root / "registry" / "components.json")
    yield Project(root)
    reset_registries()


class Cli:
    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str) -> Any:
        return self.runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def cli() -> Cli:
    return Cli()


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def write(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n")


def git(root: Path, *args: str) -> str:
    """`git *args` in `root` with a committer identity of its own (a test's repository), its stdout; fails loudly."""
    cmd = ["git", "-c", "user.name=clt", "-c", "user.email=clt@example.invalid", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout
