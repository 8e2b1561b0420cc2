"""Fail closed on the environment (#52): reports of every protocol are kept by git, `--workers` is at least 1,
`python -m cltoolkit` never imports from the working folder, a report is never written into a protocol file
outside the project, and the recorded torch thread count is torch's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_gitignore_keeps_the_reports_of_every_protocol() -> None:
    for path in ("reports/cw10-v1/report.md", "reports/nav4-v2/preliminary/results.json", "reports/x-v9/report.html"):
        done = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
        assert done.returncode == 1, f"{path} is ignored by .gitignore: a fresh clone would lack it"


def test_workers_must_be_at_least_one(project, cli) -> None:
    for bad in ("0", "-3"):
        out = cli("run", "-p", "nav4-v1", "--pilot", "--workers", bad)
        assert out.exit_code == 2 and "Traceback" not in out.output
        assert "--workers" in out.output


def test_python_m_cltoolkit_never_imports_from_the_working_folder(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "numpy.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(9)\n")
    (tmp_path / "typer.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(9)\n")
    done = subprocess.run(
        [sys.executable, "-m", "cltoolkit", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists()


def test_report_refuses_to_write_into_a_protocol_outside_the_project(project, cli, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    target = outside / "nav4-v1.json"
    shutil.copy(project.protocol_path("nav4-v1"), target)
    before = target.read_bytes()
    out = cli("report", "--protocol", str(target))
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert "lies outside the project folder" in out.output
    assert target.read_bytes() == before


def test_recorded_torch_threads_are_what_torch_has() -> None:
    torch = pytest.importorskip("torch")
    from cltoolkit.run.worker import _torch_threads

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert _torch_threads() == 1 == torch.get_num_threads()  # read, never set
    finally:
        torch.set_num_threads(before)


def test_verify_fails_closed_without_git_unless_told(tmp_path: Path) -> None:
    """Outside a git checkout (or with git missing) the history checks cannot run: verify fails in one line, and
    passes only with --without-git, which its output names."""
    clone = tmp_path / "copy"
    for folder in ("protocols", "registry"):
        shutil.copytree(REPO / folder, clone / folder)
    clt = str(Path(sys.executable).parent / "clt")
    env = {k: v for k, v in os.environ.items() if k not in ("CLT_WITHOUT_GIT", "CLT_ROOT")}  # found from cwd
    done = subprocess.run([clt, "protocol", "verify"], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "is not a git checkout: verify reads the history" in done.stderr
    done = subprocess.run(
        [clt, "protocol", "verify", "--without-git"], cwd=clone, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "history NOT checked, --without-git" in done.stdout
    no_git = tmp_path / "bin"  # git missing from the PATH, in a real checkout
    no_git.mkdir()
    env_no_git = {**env, "PATH": str(no_git)}
    done = subprocess.run([clt, "protocol", "verify"], cwd=REPO, env=env_no_git, capture_output=True, text=True)
    assert done.returncode == 1 and "git is not installed" in done.stderr


@pytest.mark.committed
def test_a_report_outside_git_says_the_history_was_not_checked(tmp_path: Path) -> None:
    clone = tmp_path / "copy"
    for folder in ("protocols", "registry", "runs/ladder-v1"):
        shutil.copytree(REPO / folder, clone / folder)
    clt = str(Path(sys.executable).parent / "clt")
    env = {k: v for k, v in os.environ.items() if k != "CLT_ROOT"}  # the project is the one in `cwd`
    done = subprocess.run([clt, "report", "-p", "ladder-v1"], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = (clone / "reports" / "ladder-v1" / "report.md").read_text()
    assert "this project is not a git checkout: the history checks" in page
    assert "not a git checkout" not in (REPO / "reports" / "ladder-v1" / "report.md").read_text()


@pytest.mark.parametrize("target", ["registry/locks/ladder-v1.lock.json", "protocols/ladder-v1.json",
                                    "registry/locks/refrozen.json"])  # fmt: skip
def test_verify_names_a_link_out_of_the_checkout_in_one_line(tmp_path: Path, target: str) -> None:
    clone = tmp_path / "clone"
    for folder in ("protocols", "registry"):
        shutil.copytree(REPO / folder, clone / folder)
    outside = tmp_path / "outside.json"
    shutil.move(clone / target, outside)
    (clone / target).symlink_to(outside)
    clt = str(Path(sys.executable).parent / "clt")
    env = {k: v for k, v in os.environ.items() if k != "CLT_ROOT"}  # the project is the one in `cwd`
    done = subprocess.run(
        [clt, "protocol", "verify", "--without-git"], cwd=clone, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{target} is a symbolic link (to {outside})" in done.stderr


BOUNDS = [
    ("ladder-v1", ("rungs", "rollout", "constantSteps"), 10**9, "/rungs/rollout/constantSteps"),
    ("ladder-v1", ("rungs", "rollout", "alternatingHorizons"), [40, 10**9], "/rungs/rollout/alternatingHorizons/1"),
    ("ladder-v1", ("systems", "true", "noiseSd"), 1e308, "/systems/true/noiseSd: 1e+308 exceeds"),
    ("nav4-v1", ("budget", "memoryCapacity"), 10**9, "/budget/memoryCapacity: 1000000000 transitions"),
]


@pytest.mark.parametrize(("protocol", "where", "value", "expected"), BOUNDS)
def test_size_fields_are_bounded_at_validation(
    project, cli, protocol: str, where: tuple[str, ...], value: object, expected: str
) -> None:
    """#52: sizes no documented machine can run, and floats that overflow, are refused in one line each at
    validation (they used to validate, freeze, and fail every run)."""
    from tests.conftest import read, write

    path = project.protocol_path(protocol)
    doc = read(path)
    section = doc
    for key in where[:-1]:
        section = section[key]
    section[where[-1]] = value
    write(path, doc)
    out = cli("protocol", "validate", protocol)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert expected in out.output, out.output


@pytest.mark.parametrize("field", ["bootstrapResamples", "bootstrapSeed", "normalization", "zeroGapRule"])
def test_an_analysis_field_nothing_uses_is_refused(project, cli, field: str) -> None:
    """#51: no decorative field: the analysis plan's fields that no code ever used are refused when declared."""
    from tests.conftest import read, write

    values = {
        "bootstrapResamples": 500,
        "bootstrapSeed": 1,
        "normalization": {"goal": [0.0, 1.0]},
        "zeroGapRule": "refuse",
    }
    path = project.protocol_path("nav4-v1")
    doc = read(path)
    doc["analysis"][field] = values[field]
    write(path, doc)
    out = cli("protocol", "validate", "nav4-v1")
    assert out.exit_code == 2 and f"/analysis/{field}: declared, but no code uses it" in out.output, out.output


@pytest.mark.parametrize(
    ("protocol", "field", "value"),
    [("wmf-lite-v1", "interactionsPerTask", 1000), ("ladder-v1", "memoryCapacity", 10), ("sessions-v1",
     "gradientUpdatesPerTask", 5), ("ladder-v1", "unaccountedSamples", "replay")],
)  # fmt: skip
def test_a_budget_field_the_suite_does_not_enforce_is_refused(
    project, cli, protocol: str, field: str, value: object
) -> None:
    """#51: every budget field binds or is absent: one the protocol's suite does not enforce is refused."""
    from tests.conftest import read, write

    path = project.protocol_path(protocol)
    doc = read(path)
    doc["budget"][field] = value
    write(path, doc)
    out = cli("protocol", "validate", protocol)
    assert out.exit_code == 2 and f"/budget/{field}: the " in out.output and "enforces no" in out.output, out.output


@pytest.mark.committed
def test_a_report_checked_from_another_working_folder_reads_the_project_it_was_given(tmp_path: Path) -> None:
    clt = str(Path(sys.executable).parent / "clt")
    env = {k: v for k, v in os.environ.items() if k != "CLT_ROOT"}
    done = subprocess.run(
        [clt, "--root", str(REPO), "report", "-p", "ladder-v1", "--check"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "reproduces from 5 records" in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written where it was run from
