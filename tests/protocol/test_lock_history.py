"""`clt protocol verify` fails on a lock rewritten to a new hash, a deleted lock, and (in git) a lock modified after
the commit that added it; a re-freeze declared in registry/locks/refrozen.json passes with a note."""

from __future__ import annotations

import json
from pathlib import Path

from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.run.runner import run_protocol
from tests.conftest import git, read, write
from tests.toy_suite import toy_protocol


def _frozen(project: Project) -> Path:
    path = project.protocol_path("toy-v1")
    write(path, toy_protocol(seeds=2))
    freeze(project, "toy-v1")
    return path


def test_a_lock_rewritten_to_the_new_hash_fails(toy, cli) -> None:
    path = _frozen(toy)
    doc = read(path)
    doc["goal"] = "Another goal."
    write(path, doc)
    lock = read(toy.lock_path("toy-v1"))
    lock["sha256"] = protocol_hash(doc)  # the quiet way around `verify`
    write(toy.lock_path("toy-v1"), lock)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "the lock or its snapshot was rewritten" in out.output, out.output


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_deleted_lock_of_a_reported_protocol_fails(toy, cli) -> None:
    _frozen(toy)
    run_protocol(toy, "toy-v1")
    assert cli("report", "-p", "toy-v1").exit_code == 0
    toy.lock_path("toy-v1").unlink()
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "toy-v1: carries a results block but has no lock" in out.output, out.output


def test_a_lock_modified_after_its_commit_fails_in_git(toy, cli) -> None:
    _frozen(toy)
    git(toy.root, "init", "-q")
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-q", "-m", "freeze")
    assert cli("protocol", "verify").exit_code == 0
    lock = read(toy.lock_path("toy-v1"))
    lock["frozenOn"] = _now()  # a re-freeze writes its own time (a date before the lock's commit is a backdating)
    write(toy.lock_path("toy-v1"), lock)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "has uncommitted changes" in out.output, out.output
    git(toy.root, "commit", "-q", "-am", "touch the lock")
    commit = git(toy.root, "rev-parse", "HEAD").strip()
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and f"was modified in commit {commit[:12]}" in out.output, out.output
    declared = {"toy-v1": [{"commit": commit, "sha256": lock["sha256"], "reason": "test"}]}
    (toy.locks_dir / "refrozen.json").write_text(json.dumps(declared))
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-q", "-m", "declare the re-freeze")
    out = cli("protocol", "verify")
    assert out.exit_code == 0 and f"re-frozen in {commit[:12]} (declared: test)" in out.output, out.output


def test_an_erratum_once_committed_cannot_be_withdrawn(toy, cli) -> None:
    path = _frozen(toy)
    git(toy.root, "init", "-q")
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-q", "-m", "freeze")
    text = "The reference adds 1e-8 to the variance. Expected effect: none."
    assert cli("protocol", "erratum", "toy-v1", "--text", text).exit_code == 0
    assert cli("protocol", "erratum", "toy-v1", "--text", "A second difference.").exit_code == 0
    git(toy.root, "commit", "-q", "-am", "errata")
    assert cli("protocol", "verify").exit_code == 0
    doc = read(path)
    doc["status"]["errata"] = doc["status"]["errata"][1:]  # outside the hash: the lock alone would not notice
    write(path, doc)
    out = cli("protocol", "verify")
    assert out.exit_code == 1
    assert "The reference adds 1e-8" in out.output
    assert "never withdrawn" in out.output
    git(toy.root, "commit", "-q", "-am", "quietly drop the first erratum")
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "never withdrawn" in out.output and "A second" not in out.output, out.output


def _repo(project: Project) -> str:
    git(project.root, "init", "-q", "-b", "main")
    git(project.root, "add", "-A")
    git(project.root, "commit", "-q", "-m", "freeze")
    return git(project.root, "rev-parse", "HEAD").strip()


def _merge_side(project: Project, change) -> None:
    """Make `change` on a side branch and merge it into main with a merge commit (the way history hides it)."""
    git(project.root, "checkout", "-q", "-b", "side")
    change()
    git(project.root, "commit", "-q", "-am", "side change")
    git(project.root, "checkout", "-q", "main")
    (project.root / "other.txt").write_text("unrelated work on main\n")
    git(project.root, "add", "other.txt")
    git(project.root, "commit", "-q", "-m", "main moves on")
    git(project.root, "merge", "-q", "--no-ff", "-m", "merge side", "side")


def test_a_lock_rewritten_on_a_side_branch_and_merged_is_caught(toy, cli) -> None:
    _frozen(toy)
    _repo(toy)

    def rewrite() -> None:
        lock = read(toy.lock_path("toy-v1"))
        lock["frozenOn"] = "2020-01-01T00:00:00Z"
        write(toy.lock_path("toy-v1"), lock)

    _merge_side(toy, rewrite)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "toy-v1.lock.json was modified in commit" in out.output, out.output


def test_an_erratum_removed_or_edited_on_a_side_branch_is_caught(toy, cli) -> None:
    path = _frozen(toy)
    _repo(toy)
    assert cli("protocol", "erratum", "toy-v1", "--text", "First difference.", "--where", "a.py").exit_code == 0
    git(toy.root, "commit", "-q", "-am", "erratum")

    def edit_where() -> None:
        doc = read(path)
        doc["status"]["errata"][0]["where"] = "b.py"  # the same text, another place
        write(path, doc)

    _merge_side(toy, edit_where)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "status.errata[0]" in out.output and "changed" in out.output, out.output


def test_a_backdated_erratum_is_refused(toy, cli) -> None:
    path = _frozen(toy)
    doc = read(path)
    doc["status"] = {"stage": "frozen", "updatedOn": "2020-01-01", "errata": [{"found": "2020-01-01", "text": "x"}]}
    write(path, doc)
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "status/errata/0: dated 2020-01-01, before the freeze" in out.output, out.output


def test_a_git_removed_lock_fails_and_a_shallow_clone_fails_unless_accepted(toy, cli, tmp_path) -> None:
    path = _frozen(toy)
    _repo(toy)
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{toy.root}", str(clone))
    out = cli("protocol", "verify")
    assert out.exit_code == 0
    import os

    here = os.getcwd()
    os.chdir(clone)
    os.environ["CLT_ROOT"] = str(clone)
    try:
        out = cli("protocol", "verify")
        assert out.exit_code == 1
        assert "shallow clone" in out.output
        assert "--accept-shallow" in out.output
        out = cli("protocol", "verify", "--accept-shallow")
        assert out.exit_code == 0
        assert "history NOT checked" in out.output
    finally:
        os.chdir(here)
        os.environ["CLT_ROOT"] = str(toy.root)
    git(toy.root, "rm", "-q", str(toy.lock_path("toy-v1")), str(toy.locks_dir / "toy-v1.frozen.json"))
    doc = read(path)
    doc["status"] = {"stage": "draft", "updatedOn": "2026-12-01"}  # the silent unfreeze
    write(path, doc)
    git(toy.root, "commit", "-q", "-am", "unfreeze")
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "toy-v1.lock.json was committed and is gone" in out.output, out.output


def test_refrozen_entries_are_checked(toy, cli) -> None:
    _frozen(toy)
    _repo(toy)
    lock = read(toy.lock_path("toy-v1"))
    lock["frozenOn"] = _now()
    write(toy.lock_path("toy-v1"), lock)
    git(toy.root, "commit", "-q", "-am", "refreeze")
    commit = git(toy.root, "rev-parse", "HEAD").strip()
    ledger = toy.locks_dir / "refrozen.json"

    def declare(entry: object) -> str:
        ledger.write_text(json.dumps({"toy-v1": [entry]}))
        return str(cli("protocol", "verify").output)

    entry = {"commit": commit, "sha256": lock["sha256"], "reason": "withdrawn before any run"}
    assert "must name a full 40-hex commit" in declare({**entry, "commit": commit[:1]})
    assert "has uncommitted changes" in declare(entry)  # declared, not committed
    assert "must be {commit, sha256, reason}" in declare({"commit": commit})
    ledger.write_text("{not json")
    out = cli("protocol", "verify")
    assert out.exit_code == 1
    assert "not readable JSON" in out.output
    assert "Traceback" not in out.output
    declare(entry)
    git(toy.root, "add", str(ledger))
    git(toy.root, "commit", "-q", "-m", "declare")
    out = cli("protocol", "verify")
    assert out.exit_code == 0 and "re-frozen in" in out.output, out.output
    run_protocol(toy, "toy-v1")  # records of the hash; the re-freeze kept the hash, so nothing was withdrawn
    ledger.write_text(json.dumps({}))
    git(toy.root, "commit", "-q", "-am", "drop the declaration")
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "re-freezes are declared, never withdrawn" in out.output, out.output


def test_a_refreeze_that_withdrew_a_hash_runs_used_is_refused(toy, cli) -> None:
    path = _frozen(toy)
    run_protocol(toy, "toy-v1")
    _repo(toy)
    old = read(toy.lock_path("toy-v1"))["sha256"]
    doc = read(path)
    doc["goal"] = "Another goal."
    write(path, doc)
    toy.lock_path("toy-v1").unlink()
    (toy.locks_dir / "toy-v1.frozen.json").unlink()
    freeze(toy, "toy-v1")
    new = read(toy.lock_path("toy-v1"))["sha256"]
    git(toy.root, "commit", "-q", "-am", "refreeze")
    commit = git(toy.root, "rev-parse", "HEAD").strip()
    (toy.locks_dir / "refrozen.json").write_text(
        json.dumps({"toy-v1": [{"commit": commit, "sha256": new, "reason": "before any run (not true)"}]})
    )
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-q", "-m", "declare")
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and f"withdrew {old}" in out.output and "record.json carry it" in out.output, out.output


def test_a_new_lock_not_yet_committed_says_commit_it(toy, cli) -> None:
    git(toy.root, "init", "-q")
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    out = cli("protocol", "freeze", "toy-v1")
    assert out.exit_code == 0
    assert "next: commit the lock with its protocol: git add registry/locks/" in out.output
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and "is not committed yet: commit it with its protocol" in out.output, out.output
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-q", "-m", "freeze")
    assert cli("protocol", "verify").exit_code == 0


def test_a_withdrawal_is_checked_against_history_not_the_working_tree(toy, cli) -> None:
    """#52: runs of the first content committed, then deleted (with their report) before a re-freeze declared
    "withdrawn before any run": the committed records and results block are named with their commits."""
    path = _frozen(toy)
    run_protocol(toy, "toy-v1")
    assert cli("report", "-p", "toy-v1").exit_code == 0
    _repo(toy)
    old = read(toy.lock_path("toy-v1"))["sha256"]
    import shutil

    shutil.rmtree(toy.runs_dir / "toy-v1")  # the evidence removed from the working tree...
    shutil.rmtree(toy.reports_dir / "toy-v1")
    doc = read(path)
    doc["goal"] = "Another goal."
    doc["results"] = None
    doc["status"] = {"stage": "draft", "updatedOn": "2026-12-04"}
    write(path, doc)
    toy.lock_path("toy-v1").unlink()
    (toy.locks_dir / "toy-v1.frozen.json").unlink()
    freeze(toy, "toy-v1")
    new = read(toy.lock_path("toy-v1"))["sha256"]
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-q", "-m", "refreeze")
    commit = git(toy.root, "rev-parse", "HEAD").strip()
    (toy.locks_dir / "refrozen.json").write_text(
        json.dumps({"toy-v1": [{"commit": commit, "sha256": new, "reason": "withdrawn before any run (not true)"}]})
    )
    git(toy.root, "add", "-A")
    git(toy.root, "commit", "-q", "-m", "declare")
    out = cli("protocol", "verify")
    assert out.exit_code == 1 and f"withdrew {old}" in out.output, out.output
    assert "/record.json in commit" in out.output  # ...but not from history
    assert "protocols/toy-v1.json in commit" in out.output
