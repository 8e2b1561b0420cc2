"""A report replaces the draft note clt wrote ("not frozen") with what is now true; a person's note is kept."""

from __future__ import annotations

from cltoolkit.freeze_actions import freeze
from cltoolkit.gatekeeper.gatekeeper import report_protocol
from cltoolkit.project import Project
from cltoolkit.run.runner import RunOptions, Selection, run_protocol
from tests.conftest import read, write
from tests.toy_suite import toy_protocol


def _frozen(toy: Project, note: str) -> None:
    doc = toy_protocol(seeds=3)
    doc["status"] = {"stage": "draft", "updatedOn": "2026-12-01", "note": note}
    write(toy.protocol_path("toy-v1"), doc)
    freeze(toy, "toy-v1")


def test_a_partial_report_replaces_the_draft_note(toy: Project) -> None:
    _frozen(toy, "New version of toy-v0; not frozen.")
    run_protocol(toy, "toy-v1", RunOptions(selection=Selection(seeds=(0,))))
    report_protocol(toy, "toy-v1")
    note = read(toy.protocol_path("toy-v1"))["status"]["note"]
    assert "not frozen" not in note
    assert note.startswith("Frozen; stage 'main' reported ")
    assert "2 of 6 planned runs completed (PARTIAL" in note


def test_a_persons_note_is_kept(toy: Project) -> None:
    _frozen(toy, "Runs on the lab cluster; see the wiki.")
    run_protocol(toy, "toy-v1")
    report_protocol(toy, "toy-v1")
    assert read(toy.protocol_path("toy-v1"))["status"]["note"] == "Runs on the lab cluster; see the wiki."
