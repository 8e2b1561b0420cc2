"""README's "Evaluate your own method", run verbatim in an empty folder against a normal (non-editable) install of
a wheel built from this checkout: every `clt` command of it works without the source."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _tutorial() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Evaluate your own method", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, "the tutorial's command block is missing"
    return found.group(1)


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a normal install: a wheel built from this checkout in its own site folder, a `clt`
    script and `python` on PATH, nothing of the checkout on the module path."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheels, site, bin_dir = tmp / "wheels", tmp / "site", tmp / "bin"
    bin_dir.mkdir()
    pip = [sys.executable, "-m", "pip", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)]
    subprocess.run(build, check=True, capture_output=True, text=True, timeout=300)
    wheel = next(wheels.glob("clt_prereg-*.whl"))  # the distribution's name, not the package index's `cltoolkit`
    install_block = (REPO / "README.md").read_text().split("## Install", 1)[1].split("```", 2)[1]
    assert f"pip install 'dist/{wheel.name}[nav]'" in install_block, "README's Install names another wheel"
    install = [*pip, "install", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, text=True, timeout=300)
    (bin_dir / "python").symlink_to(sys.executable)
    clt = bin_dir / "clt"  # the console script a normal install writes
    clt.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from cltoolkit.cli import main; main()" "$@"\n')
    clt.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CLT_ROOT", "PYTHONPATH")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHONPATH=str(site))
    # git as a researcher's machine has it (the tutorial commits its lock), whatever this machine's own settings
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="A Researcher")
    env.update(GIT_AUTHOR_EMAIL="researcher@example.org", GIT_COMMITTER_NAME="A Researcher")
    env.update(GIT_COMMITTER_EMAIL="researcher@example.org")
    where = subprocess.run(
        [sys.executable, "-c", "import cltoolkit; print(cltoolkit.__file__)"],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(str(site)), where.stdout  # the wheel, not this checkout
    return env


@pytest.mark.walkthrough
def test_the_tutorial_runs_verbatim_on_a_wheel(wheel_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "tutorial.sh").write_text(_tutorial())
    done = subprocess.run(
        ["bash", "-e", "tutorial.sh"], cwd=tmp_path, env=wheel_env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "reproduces from 6 records" in done.stdout
    assert "mystudy-v2.json" in done.stdout
    assert (tmp_path / "my-eval" / "runs" / "mystudy-v1" / "damped-s0" / "record.json").is_file()


@pytest.mark.walkthrough
def test_a_copy_of_this_repository_works_with_a_normal_install(wheel_env: dict[str, str], tmp_path: Path) -> None:
    """Its registry/components.json equals the packaged built-ins: no conflict, and every command works."""
    clone = tmp_path / "clone"
    for folder in ("protocols", "registry", "runs", "reports"):
        shutil.copytree(REPO / folder, clone / folder)
    commands = [
        ["list"],
        ["list", "method", "ladder.least-squares"],
        ["protocol", "validate", "ladder-v1"],
        ["protocol", "verify", "--without-git"],  # a copy outside git: hashes and snapshots only, said so
        ["status", "-p", "sessions-v1"],
        ["report", "-p", "ladder-v1", "--check"],
        ["plan", "power", "--sigma", "0.1", "--delta", "0.05"],
        ["schema", "results"],
    ]
    for args in commands:
        done = subprocess.run(["clt", *args], cwd=clone, env=wheel_env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"clt {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        assert "registered twice" not in done.stdout + done.stderr
