"""A protocol's own package stack (`packages`; `cltoolkit.packages`): resolved and hash-pinned at freezing, the
package file pinned by the lock, an environment built from it alone, runs executed and recorded there, and a run
outside it refused. pip stays on this machine: it resolves and installs from the local wheel store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cltoolkit.project import Project
from tests.conftest import read, write
from tests.toy_suite import toy_protocol

STORE = Path("/opt/pypi/files")
WHEEL = "rfc3986-2.0.0-py2.py3-none-any.whl"
pytestmark = pytest.mark.skipif(not (STORE / WHEEL).is_file(), reason=f"no local wheel store with {WHEEL}")


@pytest.fixture
def stack(toy: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("CLT_PIP_ARGS", f"--no-index --find-links {STORE}")
    monkeypatch.setenv("CLT_ENV_CACHE", str(tmp_path / "envs"))
    doc = toy_protocol(seeds=2)
    doc["packages"] = {"requirements": ["rfc3986==2.0.0"]}
    write(toy.protocol_path("toy-v1"), doc)
    return toy


def test_freeze_pins_the_resolved_stack_and_verify_catches_an_edit(stack: Project, cli) -> None:
    done = cli("protocol", "freeze", "toy-v1")
    assert done.exit_code == 0, done.output
    lock = read(stack.lock_path("toy-v1"))
    assert lock["packages"]["file"] == "toy-v1.packages.txt"
    package_file = stack.locks_dir / "toy-v1.packages.txt"
    lines = [line for line in package_file.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["rfc3986==2.0.0 --hash=sha256:" + lines[0].rsplit(":", 1)[1]]
    assert len(lines[0].rsplit(":", 1)[1]) == 64
    assert cli("protocol", "verify").exit_code == 0
    package_file.write_text(package_file.read_text().replace("2.0.0", "1.5.0"))
    done = cli("protocol", "verify")
    assert done.exit_code != 0
    assert "differs from the lock's" in done.output and "the package stack was edited" in done.output


@pytest.mark.e2e
def test_runs_execute_in_the_built_environment_and_record_it(stack: Project, cli) -> None:
    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    done = cli("env", "build", "toy-v1")
    assert done.exit_code == 0, done.output
    digest = read(stack.lock_path("toy-v1"))["packages"]["sha256"]
    assert digest[7:19] in done.output
    assert cli("run", "-p", "toy-v1", "--workers", "1").exit_code == 0
    records = [read(p) for p in (stack.runs_dir / "toy-v1").glob("*/record.json")]
    assert len(records) == 4 and all(r["status"]["state"] == "completed" for r in records)
    assert {r["provenance"]["environment"] for r in records} == {digest}
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert cli("protocol", "verify").exit_code == 0
    path = next((stack.runs_dir / "toy-v1").glob("*/record.json"))  # a record claiming another environment
    record = read(path)
    record["provenance"]["environment"] = "sha256:" + "1" * 64
    write(path, record)
    done = cli("protocol", "verify")
    assert done.exit_code != 0 and "not in the environment of the lock's package file" in done.output


def test_two_toolkit_checkouts_never_share_an_environment(stack: Project, cli, tmp_path: Path) -> None:
    """The environment's `.pth` names the toolkit's source: a worktree running a frozen protocol must not reuse the
    environment another checkout built, whose `.pth` would run that checkout's code."""
    from cltoolkit.packages import build, pip_options

    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    package_file = stack.locks_dir / "toy-v1.packages.txt"
    roots = [tmp_path / "checkout-a", tmp_path / "checkout-b"]
    envs = []
    for root in roots:
        root.mkdir()
        envs.append(build(package_file, root, pip_options()))
    assert envs[0] != envs[1]
    for env, root in zip(envs, roots, strict=True):
        (pth,) = env.glob("lib/python*/site-packages/clt-toolkit.pth")
        assert pth.read_text().splitlines()[0] == str(root.resolve())
    assert build(package_file, roots[0], pip_options()) == envs[0]  # built once per checkout, then reused


def test_a_worker_outside_the_required_environment_fails_its_run_in_one_line(tmp_path: Path) -> None:
    from cltoolkit.run.worker import execute_job

    job = {"threads": 1, "environment": "sha256:" + "0" * 64, "runDir": str(tmp_path)}
    out = execute_job(job)
    assert out["state"] == "failed"
    assert out["reason"].startswith("environment: this run needs the protocol's package environment (sha256:000")


def test_a_record_made_outside_the_stack_is_refused_at_report_time(stack: Project, cli, monkeypatch) -> None:
    from cltoolkit.run.trust import record_problems

    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    assert cli("run", "-p", "toy-v1", "--workers", "1").exit_code == 0
    path = next((stack.runs_dir / "toy-v1").glob("*/record.json"))
    from cltoolkit.component_validation import load_protocol
    from cltoolkit.registry import registries
    from cltoolkit.run.record import read_record

    record = read_record(path)
    loaded = load_protocol(stack.protocol_path("toy-v1"), registries(stack.components_file))
    outside = record.model_copy(update={"provenance": record.provenance.model_copy(update={"environment": None})})
    problems = record_problems(outside, loaded.model, record.protocol.sha256, {}, None)
    assert any(p.startswith("/provenance/environment: ran in the toolkit's environment") for p in problems)
    assert not any("environment" in p for p in record_problems(record, loaded.model, record.protocol.sha256, {}, None))


def test_a_requirement_that_is_a_url_or_an_option_is_refused_at_validation(stack: Project, cli) -> None:
    doc = json.loads(stack.protocol_path("toy-v1").read_text())
    doc["packages"] = {"requirements": ["--index-url=http://example.org", "pkg@https://example.org/x.whl"]}
    write(stack.protocol_path("toy-v1"), doc)
    done = cli("protocol", "validate", "toy-v1")
    assert done.exit_code != 0
    assert "/packages/requirements/0" in done.output and "/packages/requirements/1" in done.output
