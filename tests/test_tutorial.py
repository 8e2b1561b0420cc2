"""README's "Evaluate your own method", run verbatim in an empty folder against a normal (non-editable) install of
a wheel built from this checkout: every `clt` command of it works without the source."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def _tutorial() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Evaluate your own method", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, "the tutorial's command block is missing"
    return found.group(1)


def test_the_tutorial_runs_verbatim_on_a_wheel(tmp_path: Path) -> None:
    wheels, site, bin_dir, work = (tmp_path / n for n in ("wheels", "site", "bin", "work"))
    for folder in (bin_dir, work):
        folder.mkdir()
    pip = [sys.executable, "-m", "pip", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)]
    subprocess.run(build, check=True, capture_output=True, text=True, timeout=300)
    wheel = next(wheels.glob("cltoolkit-*.whl"))
    install = [*pip, "install", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, text=True, timeout=300)
    (bin_dir / "python").symlink_to(sys.executable)
    clt = bin_dir / "clt"  # the console script a normal install writes
    clt.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from cltoolkit.cli import main; main()" "$@"\n')
    clt.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CLT_ROOT", "PYTHONPATH")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHONPATH=str(site))
    where = subprocess.run(
        [sys.executable, "-c", "import cltoolkit; print(cltoolkit.__file__)"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(str(site)), where.stdout  # the wheel, not this checkout
    (work / "tutorial.sh").write_text(_tutorial())
    done = subprocess.run(["bash", "-e", "tutorial.sh"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "reproduces from 6 records" in done.stdout and "mystudy-v2.json" in done.stdout
    assert (work / "my-eval" / "runs" / "mystudy-v1" / "damped-s0" / "record.json").is_file()
