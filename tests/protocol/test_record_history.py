"""History is the reference for run records (#52): `clt protocol verify` compares every record with what earlier
commits held. An edit resealed, a `replaces` scrubbed, a deleted record run again, a record deleted: each is named
with its commit; a redo that names what it replaced passes. Each case in a scratch git repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cltoolkit.project import Project
from cltoolkit.run.record import record_seal
from tests.conftest import git, write
from tests.toy_suite import toy_protocol


def _commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


@pytest.fixture
def repo(toy: Project, cli) -> Project:
    """The toy project frozen, run and committed in a git repository of its own."""
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0
    subprocess.run(["git", "init", "-q"], cwd=toy.root, check=True)
    (toy.root / ".gitignore").write_text("runs/**/.seals\n")  # as `clt init` writes it: the seal memory is local
    _commit(toy.root, "runs")
    assert cli("protocol", "verify").exit_code == 0
    return toy


def _record(project: Project, run_id: str = "cand-s0") -> Path:
    return project.runs_dir / "toy-v1" / run_id / "record.json"


def _resealed(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    data["seal"] = record_seal(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def _verify_fails(cli, *expected: str) -> str:
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    for text in expected:
        assert text in out.output, out.output
    return str(out.output)


def test_an_edited_and_resealed_record_is_named_committed_or_not(repo: Project, cli) -> None:
    path = _record(repo)
    _resealed(path, lambda d: d["metrics"].update({"toy.score-v1": 0.99}))
    _verify_fails(cli, "runs/toy-v1/cand-s0/record.json: changed in place", "(working tree, not committed)")
    _commit(repo.root, "tuned")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo.root, capture_output=True, text=True).stdout
    _verify_fails(cli, "runs/toy-v1/cand-s0/record.json: changed in place", f"(commit {head[:12]})")


def test_a_scrubbed_replaces_is_named(repo: Project, cli) -> None:
    assert cli("run", "-p", "toy-v1", "--redo", "cand-s1", "--reason", "clock").exit_code == 0
    _commit(repo.root, "redo")
    assert cli("protocol", "verify").exit_code == 0  # a redo that names what it replaced passes
    _resealed(_record(repo, "cand-s1"), lambda d: d.pop("replaces"))
    _commit(repo.root, "scrub")
    _verify_fails(cli, "runs/toy-v1/cand-s1/record.json: replaced without naming")


def test_a_deleted_record_run_again_is_a_re_roll(repo: Project, cli) -> None:
    path = _record(repo)
    path.unlink()
    _commit(repo.root, "delete")
    _verify_fails(cli, "runs/toy-v1/cand-s0/record.json: a committed record is gone (commit")
    # run again (the git refusal of `clt run` bypassed: the deletion is committed), then committed
    assert cli("run", "-p", "toy-v1").exit_code == 0
    assert path.exists()
    _commit(repo.root, "re-roll")
    _verify_fails(cli, "runs/toy-v1/cand-s0/record.json: changed in place")


def test_a_record_deleted_in_the_working_tree_is_named(repo: Project, cli) -> None:
    _record(repo).unlink()
    _verify_fails(cli, "a committed record is gone (the working tree (not committed))")


def test_a_planted_seals_line_vouches_for_nothing_and_a_committed_one_is_named(repo: Project, cli) -> None:
    """The store's seal memory is keyed by this machine's secret: a line planted for an edited record (its bytes'
    digest and the original seal, in the old unkeyed format or with a made-up MAC) is ignored, so the edit is
    caught; a `.seals` force-committed is named by verify."""
    import hashlib

    path = _record(repo)
    original = json.loads(path.read_text())["seal"]
    data = json.loads(path.read_text())
    data["metrics"]["toy.score-v1"] = 0.99  # edited, not resealed
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
    digest = hashlib.sha256(path.read_text().encode()).hexdigest()
    seals = repo.runs_dir / "toy-v1" / ".seals"
    seals.write_text(f"{digest} {original}\n{digest} {original} hmac-sha256:{'0' * 64}\n")
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code != 0 and "cand-s0" in out.output and "does not match the content" in out.output
    git(repo.root, "add", "-f", str(seals))
    subprocess.run(["git", "checkout", "--", str(path)], cwd=repo.root, check=True)
    _commit(repo.root, "planted seals")
    _verify_fails(cli, "runs/toy-v1/.seals: a committed `.seals` is ignored")


def test_a_backdated_freeze_a_stripped_lock_and_an_erratum_before_the_freeze_are_named(toy: Project, cli) -> None:
    """Dates are checked against the commits (#52): a lock edited before its first commit to backdate the freeze or
    drop its code pins, and an erratum dated before the freeze."""
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    lock_path = toy.lock_path("toy-v1")
    lock = json.loads(lock_path.read_text())
    lock["frozenOn"] = "2020-01-01T00:00:00Z"
    lock.pop("components")
    lock_path.write_text(json.dumps(lock, indent=2))
    doc = json.loads(toy.protocol_path("toy-v1").read_text())
    doc.setdefault("status", {"stage": "frozen", "updatedOn": "2020-01-01"})
    doc["status"]["errata"] = [{"found": "2019-06-01", "text": "found before the freeze?"}]
    toy.protocol_path("toy-v1").write_text(json.dumps(doc, indent=2))
    subprocess.run(["git", "init", "-q"], cwd=toy.root, check=True)
    _commit(toy.root, "frozen")
    out = _verify_fails(
        cli,
        "frozenOn 2020-01-01 00:00 precedes the commit that added the lock",
        "its lock pins no code, but was committed",
        "/status/errata/0: the erratum is dated 2019-06-01, before the freeze (2020-01-01)",
    )
    assert "Traceback" not in out
