"""Freeze / verify / diff / bump."""

from __future__ import annotations

import json

import pytest

from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.protocol.lock import read_lock
from tests.conftest import read, write


def _freeze_ladder(cli, project):
    result = cli("protocol", "freeze", "ladder-v1")
    assert result.exit_code == 0, result.output
    return project.protocol_path("ladder-v1")


def test_freeze_writes_lock(cli, project) -> None:
    path = _freeze_ladder(cli, project)
    lock = read_lock(project, "ladder-v1")
    assert lock is not None
    assert lock.sha256 == protocol_hash(read(path))
    assert set(read(project.lock_path("ladder-v1"))) == {
        "protocol",
        "sha256",
        "canonicalization",
        "frozenOn",
        "schemaVersion",
        "toolkitVersion",
        "components",
    }
    assert cli("protocol", "verify").exit_code == 0


def test_freeze_refuses_twice(cli, project) -> None:
    _freeze_ladder(cli, project)
    result = cli("protocol", "freeze", "ladder-v1")
    assert result.exit_code == 1
    assert "already frozen" in result.output
    assert "clt protocol bump" in result.output


def test_freeze_refuses_invalid(cli, project) -> None:
    path = project.protocol_path("ladder-v1")
    doc = read(path)
    doc["rungs"]["control"]["gridPoints"] = 1
    write(path, doc)
    result = cli("protocol", "freeze", "ladder-v1")
    assert result.exit_code == 2
    assert "/rungs/control/gridPoints" in result.output
    assert not project.lock_path("ladder-v1").exists()


def test_freeze_refuses_failing_safeguards(cli, project) -> None:
    pytest.importorskip("minigrid")
    path = project.protocol_path("nav4-v1")
    doc = read(path)
    doc["seeds"]["splits"]["train"] = {"start": 0, "stop": 50}
    doc["seeds"]["splits"]["test"] = {"start": 2_000_000, "stop": 2_000_003}  # too few layouts to hold out 100
    write(path, doc)
    result = cli("protocol", "freeze", "nav4-v1")
    assert result.exit_code == 1
    assert "safeguard checks fail" in result.output
    assert "/seeds/splits: the test seed range holds fewer than 100 distinct" in result.output
    path = project.protocol_path("wmf-v1")
    doc = read(path)
    doc["comparisons"], doc["gates"], doc["methodPairs"], doc["budget"]["match"] = [], [], [], []
    write(path, doc)
    result = cli("protocol", "freeze", "wmf-v1")
    assert result.exit_code == 1
    assert "/comparisons: nothing to run" in result.output


def test_verify_fails_on_value_change_naming_pointer(cli, project) -> None:
    path = _freeze_ladder(cli, project)
    doc = read(path)
    doc["systems"]["true"]["a"] = 0.96
    doc["comparisons"][0]["label"] = "Bold"
    write(path, doc)
    result = cli("protocol", "verify")
    assert result.exit_code == 1
    assert "ladder-v1: /systems/true/a: changed from 0.95 to 0.96" in result.output
    assert 'ladder-v1: /comparisons/0/label: changed from "Aggressive" to "Bold"' in result.output


def test_verify_passes_on_format_order_status_results(cli, project) -> None:
    path = _freeze_ladder(cli, project)
    doc = read(path)
    reordered = dict(reversed(list(doc.items())))
    reordered["status"] = {"stage": "frozen", "updatedOn": "2026-12-01"}
    reordered["results"] = {"anything": [1, 2]}
    path.write_text(json.dumps(reordered, indent=7, sort_keys=True))
    assert cli("protocol", "verify").exit_code == 0


def test_verify_fails_without_protocol_file(cli, project) -> None:
    path = _freeze_ladder(cli, project)
    path.unlink()
    result = cli("protocol", "verify")
    assert result.exit_code == 1
    assert "protocol file" in result.output
    assert "missing" in result.output


def test_verify_detects_added_and_removed_fields(cli, project) -> None:
    path = _freeze_ladder(cli, project)
    doc = read(path)
    del doc["outsideScope"]
    doc["extra"] = 1
    write(path, doc)
    out = cli("protocol", "verify").output
    assert "/outsideScope: removed" in out
    assert "/extra: added 1" in out


def test_diff(cli, project) -> None:
    path = project.protocol_path("ladder-v1")
    other = project.protocols_dir / "ladder-v2.json"
    doc = read(path)
    doc["id"] = "ladder-v2"
    doc["status"]["note"] = "x"
    write(other, doc)
    result = cli("protocol", "diff", "ladder-v1", "ladder-v2")
    assert result.exit_code == 0
    assert "/id: changed" in result.output
    assert "1 in hashed content; hashes differ" in result.output


def test_bump(cli, project) -> None:
    result = cli("protocol", "bump", "ladder-v1")
    assert result.exit_code == 1
    assert "not frozen" in result.output
    _freeze_ladder(cli, project)
    assert cli("protocol", "bump", "ladder-v1").exit_code == 0
    new = read(project.protocol_path("ladder-v2"))
    lock = read_lock(project, "ladder-v1")
    assert lock is not None
    assert new["id"] == "ladder-v2"
    assert new["supersedes"] == f"ladder-v1@{lock.sha256}"
    assert new["results"] is None
    assert new["status"]["stage"] == "draft"
    assert not project.lock_path("ladder-v2").exists()
    assert cli("protocol", "validate", "ladder-v2").exit_code == 0
    assert cli("protocol", "bump", "ladder-v1").exit_code == 1


def test_hash_command_matches_library(cli, project) -> None:
    result = cli("protocol", "hash", "ladder-v1")
    assert result.output.strip() == protocol_hash(read(project.protocol_path("ladder-v1")))


def test_project_found_upward(cli, project, monkeypatch) -> None:
    monkeypatch.delenv("CLT_ROOT")
    sub = project.root / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert cli("protocol", "validate", "ladder-v1").exit_code == 0
    assert cli("--root", str(project.root), "protocol", "validate", "ladder-v1").exit_code == 0


def test_a_new_version_declares_every_change_or_does_not_freeze(cli, project) -> None:
    """`changes` in a bumped protocol: diff marks each difference declared or UNDECLARED; freeze refuses an
    undeclared change and a declaration that covers no change, and accepts a version whose changes are all
    declared (a pointer covers everything under it)."""
    _freeze_ladder(cli, project)
    assert cli("protocol", "bump", "ladder-v1").exit_code == 0
    path = project.protocol_path("ladder-v2")
    doc = read(path)
    doc["title"] = doc["title"] + " (v2)"
    doc["goal"] = doc["goal"] + " Second version."
    write(path, doc)
    out = cli("protocol", "freeze", "ladder-v2")
    assert out.exit_code == 1
    assert "/title" in out.output
    assert "undeclared change from ladder-v1" in out.output
    before = cli("protocol", "diff", "ladder-v1", "ladder-v2").output  # no `changes` yet: every change is marked
    marked = [line for line in before.splitlines() if line.endswith("  [UNDECLARED]")]
    assert {line.split(":")[0] for line in marked} == {"/title", "/goal"}, before
    assert "2 undeclared change(s)" in before
    assert "ladder-v2 declares no `changes` yet" in before
    doc["changes"] = [{"pointers": ["/title"], "reason": "a clearer title"}]
    write(path, doc)
    diff = cli("protocol", "diff", "ladder-v1", "ladder-v2")
    assert "/title: changed" in diff.output
    assert "[declared: change 1]" in diff.output
    assert "/goal: changed" in diff.output
    assert "[UNDECLARED]" in diff.output
    assert "1 undeclared change(s)" in diff.output
    doc["changes"].append({"pointers": ["/goal", "/claims"], "reason": "the goal says what changed"})
    doc["changes"].append({"pointers": ["/seeds"], "reason": "nothing changed there"})
    write(path, doc)
    out = cli("protocol", "freeze", "ladder-v2")
    assert out.exit_code == 1
    assert "/changes/2" in out.output
    assert "not there" in out.output
    doc["changes"].pop()
    write(path, doc)
    assert "0 undeclared change(s)" in cli("protocol", "diff", "ladder-v1", "ladder-v2").output
    out = cli("protocol", "freeze", "ladder-v2")
    assert out.exit_code == 0, out.output


def test_an_erratum_is_recorded_outside_the_hash_and_carried_to_the_next_version(cli, project) -> None:
    text = "The reference divides by variance + 1e-8; this protocol divides exactly. Expected effect: none."
    refused = cli("protocol", "erratum", "ladder-v1", "--text", text)
    assert refused.exit_code == 1
    assert "not frozen" in refused.output
    assert "disclosures" in refused.output
    path = _freeze_ladder(cli, project)
    before = protocol_hash(read(path))
    out = cli("protocol", "erratum", "ladder-v1", "--text", f"  {text}\n", "--where", "src/metrics.py")
    assert out.exit_code == 0, out.output
    doc = read(path)
    assert doc["status"]["errata"] == [
        {"found": doc["status"]["errata"][0]["found"], "text": text, "where": "src/metrics.py"}
    ]
    assert protocol_hash(doc) == before
    assert cli("protocol", "verify").exit_code == 0
    again = cli("protocol", "erratum", "ladder-v1", "--text", text)
    assert again.exit_code == 1
    assert "already records" in again.output
    empty = cli("protocol", "erratum", "ladder-v1", "--text", "   ")
    assert empty.exit_code == 2
    assert "empty" in empty.output
    assert len(read(path)["status"]["errata"]) == 1  # refusals wrote nothing
    assert cli("protocol", "bump", "ladder-v1").exit_code == 0
    note = read(project.protocol_path("ladder-v2"))["status"]["note"]
    assert "1 erratum(s)" in note
    assert "disclosures" in note
