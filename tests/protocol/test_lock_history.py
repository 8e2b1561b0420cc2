"""`clt protocol verify` fails on a lock rewritten to a new hash, a deleted lock, and (in git) a lock modified after
the commit that added it; a re-freeze declared in registry/locks/refrozen.json passes with a note."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cltoolkit.freezing import freeze
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.run.runner import run_protocol
from tests.conftest import read, write
from tests.toy_suite import toy_protocol


def _frozen(project: Project) -> Path:
    path = project.protocol_path("toy-v1")
    write(path, toy_protocol(seeds=2))
    freeze(project, "toy-v1")
    return path


def _git(root: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=clt", "-c", "user.email=clt@example.invalid", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout


def test_a_lock_rewritten_to_the_new_hash_fails(toy, cli) -> None:  # type: ignore[no-untyped-def]
    path = _frozen(toy)
    doc = read(path)
    doc["goal"] = "Another goal."
    write(path, doc)
    lock = read(toy.lock_path("toy-v1"))
    lock["sha256"] = protocol_hash(doc)  # the quiet way around `verify`
    write(toy.lock_path("toy-v1"), lock)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "the lock or its snapshot was rewritten" in out.output, out.output


def test_a_deleted_lock_of_a_reported_protocol_fails(toy, cli) -> None:  # type: ignore[no-untyped-def]
    _frozen(toy)
    run_protocol(toy, "toy-v1")
    assert cli("report", "-p", "toy-v1").exit_code == 0
    toy.lock_path("toy-v1").unlink()
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "toy-v1: carries a results block but has no lock" in out.output, out.output


def test_a_lock_modified_after_its_commit_fails_in_git(toy, cli) -> None:  # type: ignore[no-untyped-def]
    _frozen(toy)
    _git(toy.root, "init", "-q")
    _git(toy.root, "add", "-A")
    _git(toy.root, "commit", "-q", "-m", "freeze")
    assert cli("protocol", "verify").exit_code == 0
    lock = read(toy.lock_path("toy-v1"))
    lock["frozenOn"] = "2020-01-01T00:00:00Z"
    write(toy.lock_path("toy-v1"), lock)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "has uncommitted changes" in out.output, out.output
    _git(toy.root, "commit", "-q", "-am", "touch the lock")
    commit = _git(toy.root, "rev-parse", "HEAD").strip()
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and f"was modified in commit {commit[:12]}" in out.output, out.output
    declared = {"toy-v1": [{"commit": commit[:10], "sha256": lock["sha256"], "reason": "test"}]}
    (toy.locks_dir / "refrozen.json").write_text(json.dumps(declared))
    out = cli("protocol", "verify")
    assert out.exit_code == 0 and f"re-frozen in {commit[:12]} (declared: test)" in out.output, out.output


def test_an_erratum_once_committed_cannot_be_withdrawn(toy, cli) -> None:  # type: ignore[no-untyped-def]
    path = _frozen(toy)
    _git(toy.root, "init", "-q")
    _git(toy.root, "add", "-A")
    _git(toy.root, "commit", "-q", "-m", "freeze")
    text = "The reference adds 1e-8 to the variance. Expected effect: none."
    assert cli("protocol", "erratum", "toy-v1", "--text", text).exit_code == 0
    assert cli("protocol", "erratum", "toy-v1", "--text", "A second difference.").exit_code == 0
    _git(toy.root, "commit", "-q", "-am", "errata")
    assert cli("protocol", "verify").exit_code == 0
    doc = read(path)
    doc["status"]["errata"] = doc["status"]["errata"][1:]  # outside the hash: the lock alone would not notice
    write(path, doc)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "The reference adds 1e-8" in out.output and "never withdrawn" in out.output
    _git(toy.root, "commit", "-q", "-am", "quietly drop the first erratum")
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "never withdrawn" in out.output and "A second" not in out.output, out.output
