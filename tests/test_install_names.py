"""Every install command a user is shown names this project (`clt-prereg`), a path, or a dependency of it: the
package index's `cltoolkit` and `clt` are other projects. And the README's cluster steps are the dist test's."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from cltoolkit import DISTRIBUTION
from cltoolkit.scaffold import init_project
from tests.conftest import REPO


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def _allowed() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = [*project["dependencies"], *(d for group in project["optional-dependencies"].values() for d in group)]
    return {_name(DISTRIBUTION), *(_name(d) for d in deps)}


def install_targets(text: str) -> list[str]:
    """The requirement names (not paths, wheels or URLs) of every `pip install` command in `text`."""
    names = []
    for match in re.finditer(r"pip install\s+([^`\n]*)", text):  # a command may wrap onto the next line
        command = re.split(r" #| \(", match.group(1))[0].rstrip(").;:,")
        try:
            tokens = shlex.split(command)
        except ValueError:  # an unbalanced quote in prose: read the words as they are
            tokens = command.replace("'", " ").replace('"', " ").split()
        for token in tokens:
            default = re.fullmatch(r"\$\{\w+:-(.+)\}", token)
            token = default.group(1) if default else token
            if token.startswith(("-", ".", "/", "$", "<", "git+", "http")) or ".whl" in token or "/" in token:
                continue
            names.append(_name(token))
    return names


def _shown_texts(tmp_path: Path) -> dict[str, str]:
    texts = {"README.md": (REPO / "README.md").read_text()}
    texts.update({f"docs/{p.name}": p.read_text() for p in sorted((REPO / "docs").glob("*.md"))})
    for path in init_project(tmp_path / "new"):
        if path.is_file():
            texts[f"clt init: {path.name}"] = path.read_text()
    for path in sorted((REPO / "cltoolkit").rglob("*.py")):
        texts[str(path.relative_to(REPO))] = path.read_text()
    return texts


def test_every_install_command_names_this_project(tmp_path: Path) -> None:
    allowed = _allowed()
    wrong = [
        f"{where}: pip install {name}"
        for where, text in _shown_texts(tmp_path).items()
        for name in install_targets(text)
        if name not in allowed
    ]
    assert wrong == []
    workflow = (tmp_path / "new" / ".github" / "workflows" / "clt.yml").read_text()
    assert install_targets(workflow) == [DISTRIBUTION], workflow  # the generated CI installs clt itself


def test_the_checker_catches_another_projects_name() -> None:
    assert install_targets("run `pip install cltoolkit` then") == ["cltoolkit"]
    assert install_targets("pip install 'clt[ray]'") == ["clt"]
    assert install_targets('pip install "${CLT_SOURCE:-clt-prereg==0.1.0}"') == ["clt-prereg"]
    assert install_targets("pip install -e '.[nav]' ./examples/x dist/clt_prereg-0.1.0-py3-none-any.whl") == []


def test_distribution_name_is_the_one_built() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    plugin = tomllib.loads((REPO / "examples" / "clt-example-plugin" / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    assert plugin["dependencies"] == [DISTRIBUTION]


def _ray_steps(lines: list[str]) -> list[tuple[str, str]]:
    steps = []
    for line in lines:
        words = [w for w in line.split("#")[0].split() if not re.fullmatch(r"RAY_\w+=\S*", w)]  # env settings
        if words[:1] == ["ray"]:
            steps.append((words[1], words[2].split("=")[0]))
    return steps


def test_the_readme_cluster_steps_are_the_dist_tests() -> None:
    readme = (REPO / "docs" / "cluster.md").read_text()
    block = re.search(r"```\n(.*?)```", readme, re.S)
    assert block is not None
    lines = block.group(1).splitlines()
    test = (REPO / "tests" / "test_ray_cluster.py").read_text()
    calls = re.findall(r'c\.ray\((?:\s*#[^\n]*)?\s*"([\w-]+)",\s*f?"(--[\w-]+)', test)
    assert calls == [("get-auth-token", "--generate"), ("start", "--head"), ("start", "--address")], calls
    assert _ray_steps(lines) == calls
    worker = next(line for line in lines if "--address=" in line and "ray start" in line)
    assert worker.startswith("RAY_AUTH_MODE=token ray start")
    assert 'RAY_AUTH_MODE="token"' in test
