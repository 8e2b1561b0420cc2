"""A project's own components: identical registrations are no conflict, a real conflict names both targets, a
component module in the project folder is imported from there (by the driver and by workers), and one that
cannot be imported is a one-line error."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from cltoolkit.errors import InputError
from cltoolkit.registry import Registry, registries, reset_registries
from tests.conftest import REPO


def test_identical_registration_is_not_a_conflict_and_a_real_one_names_both() -> None:
    reg: Registry[object] = Registry("method")
    reg.register("a", "pkg.mod:A", origin="builtin")
    reg.register("a", "pkg.mod:A", origin="project x")
    words = "'a' is registered twice with different targets: pkg.mod:A (builtin) and pkg.other:B (project y)"
    with pytest.raises(InputError, match=re.escape(words)):
        reg.register("a", "pkg.other:B", origin="project y")


def test_a_clone_with_its_own_copy_of_the_builtin_components_works(project, cli) -> None:
    (project.root / "registry" / "components.json").write_text((REPO / "registry" / "components.json").read_text())
    reset_registries()
    out = cli("list", "suite")
    assert out.exit_code == 0 and "registered twice" not in out.output, out.output
    assert cli("protocol", "validate", "ladder-v1").exit_code == 0


BOOM = """
from typing import ClassVar

from cltoolkit.components import Method


class Boom(Method):
    suite: ClassVar[str] = "ladder"
    summary: ClassVar[str] = "a project-local method"
"""


def test_a_project_local_component_imports_from_the_project_folder(project, cli, tmp_path, monkeypatch) -> None:
    (project.root / "registry" / "components.json").write_text(
        json.dumps({"method": {"scratch.boom": "boom_local:Boom"}})
    )
    (project.root / "boom_local.py").write_text(BOOM)
    monkeypatch.chdir(tmp_path)  # not the project folder: the import must not rely on the working directory
    reset_registries()
    regs = registries(project.components_file)
    assert regs.method.get("scratch.boom").summary == "a project-local method"


def test_a_component_that_cannot_be_imported_is_one_line(project, cli) -> None:
    (project.root / "registry" / "components.json").write_text(
        json.dumps({"method": {"scratch.boom": "nowhere_mod:Boom"}})
    )
    reset_registries()
    doc = json.loads((project.root / "protocols" / "ladder-v1.json").read_text())
    doc["comparisons"][0]["method"] = "scratch.boom"
    doc["comparisons"][0]["hyperparameters"] = {}
    (project.root / "protocols" / "ladder-v1.json").write_text(json.dumps(doc))
    for args in (
        ("protocol", "validate", "ladder-v1"),
        ("run", "-p", "ladder-v1", "--pilot"),
        ("status", "-p", "ladder-v1"),
    ):
        out = cli(*args)
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output
        assert "cannot import 'nowhere_mod'" in out.output and len(out.output.strip().splitlines()) <= 2, out.output
    shutil.rmtree(project.root / "registry")


def test_the_library_finds_no_project_from_the_environment(project, cli, monkeypatch) -> None:
    """A project's components are known only where its components file is passed: neither CLT_ROOT nor the working
    folder leads the library to a project (the CLI passes the project it was given)."""
    (project.root / "registry" / "components.json").write_text(
        json.dumps({"method": {"scratch.boom": "boom_local:Boom"}})
    )
    (project.root / "boom_local.py").write_text(BOOM)
    monkeypatch.setenv("CLT_ROOT", str(project.root))
    monkeypatch.chdir(project.root)
    reset_registries()
    assert "scratch.boom" not in registries().method.names()
    assert "scratch.boom" in registries(project.components_file).method.names()
    listed = cli("list", "method")  # the CLI's project (CLT_ROOT here) is passed explicitly
    assert listed.exit_code == 0 and "scratch.boom" in listed.output, listed.output
