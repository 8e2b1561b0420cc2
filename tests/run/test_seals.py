"""The store remembers which record files' seals it has checked (by the SHA-256 of their bytes), so reporting
10,000 records does not canonicalize each one again; a changed byte is checked in full, and a fresh clone (no
memory) checks everything."""

from __future__ import annotations

import json

import pytest

from cltoolkit.errors import ValidationFailed
from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from cltoolkit.run.record import read_record
from cltoolkit.run.runner import run_protocol
from cltoolkit.run.store import SEALS, RunStore
from tests.conftest import write
from tests.toy_suite import toy_protocol


def _ran(project: Project) -> RunStore:
    write(project.protocol_path("toy-v1"), toy_protocol(seeds=3))
    freeze(project, "toy-v1")
    run_protocol(project, "toy-v1")
    return RunStore(project.runs_dir, "toy-v1")


def test_the_driver_remembers_the_seals_it_wrote_and_a_changed_record_is_still_refused(toy: Project) -> None:
    store = _ran(toy)
    memory = (store.folder / SEALS).read_text().splitlines()
    assert len(memory) == len(list(store.folder.glob("*/record.json")))
    assert len(store.scan().records) == len(memory)

    path = next(iter(sorted(store.folder.glob("*/record.json"))))
    data = json.loads(path.read_text())
    data["metrics"]["toy.score-v1"] = 0.999  # an edit that leaves the seal as it was
    path.write_text(json.dumps(data, sort_keys=True, indent=1))
    scan = store.scan()
    assert path.parent.name in scan.corrupt
    assert "/seal" in scan.corrupt[path.parent.name]


def test_a_damaged_memory_is_ignored_and_only_a_full_report_writes_it(toy: Project, cli) -> None:
    store = _ran(toy)
    (store.folder / SEALS).write_text("not a digest\n" + "0" * 64 + " sha256:" + "1" * 64 + "\n")
    assert len(store.scan().records) > 0  # every seal checked in full
    (store.folder / SEALS).unlink()
    assert cli("report", "-p", "toy-v1", "--dry-run").exit_code == 0
    assert not (store.folder / SEALS).exists()  # a dry run writes nothing
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert (store.folder / SEALS).exists()


def test_the_scan_names_each_kind_of_damaged_run_folder(toy: Project) -> None:
    """The scan takes links and the record's file type from one listing of each run folder: a missing record is an
    unfinished run, a folder or a link in its place is refused by name, and a seal that fails names the file."""
    store = _ran(toy)
    folders = sorted(p for p in store.folder.iterdir() if p.is_dir())
    missing, folder, linked, edited = folders[:4]
    (missing / "record.json").unlink()
    (folder / "record.json").unlink()
    (folder / "record.json").mkdir()
    (linked / "record.json").unlink()
    (linked / "record.json").symlink_to(edited / "record.json")
    data = json.loads((edited / "record.json").read_text())
    data["metrics"]["toy.score-v1"] = 0.5
    (edited / "record.json").write_text(json.dumps(data, sort_keys=True, indent=2))
    (store.folder / SEALS).unlink()
    scan = store.scan()
    assert [p.where for p in scan.partial] == [str(missing)]
    assert scan.corrupt[folder.name] == "record.json is not a regular file"
    assert "holds symbolic link(s) record.json" in scan.corrupt[linked.name]
    assert "/seal: does not match the content" in scan.corrupt[edited.name]
    assert len(scan.records) == len(folders) - 4
    with pytest.raises(ValidationFailed) as caught:
        read_record(edited / "record.json")
    assert caught.value.problems[0].where.endswith(f"{edited.name}/record.json: /seal")  # the path, for the message


@pytest.mark.parametrize("value", [1.5e-05, 2.0, 0.125, 3e16])
def test_a_seal_checks_the_same_on_the_plain_and_the_full_parse(toy: Project, value: float) -> None:
    """A record's seal is checked on a parse that writes its numbers as RFC 8785 does without walking them
    (`loads_plain`) or, for numbers that parse cannot take (an exponent), in full: both agree, and an edit is found
    on both."""
    from cltoolkit.protocol.load import loads_plain, loads_strict
    from cltoolkit.run.record import record_seal

    store = _ran(toy)
    path = next(iter(sorted(store.folder.glob("*/record.json"))))
    data = json.loads(path.read_text())
    data["metrics"]["toy.score-v1"] = {"t1": value}
    data["seal"] = record_seal(data)
    path.write_text(json.dumps(data, sort_keys=True, indent=2))
    plain = loads_plain(path.read_text())
    assert (plain is None) == (value in (1.5e-05, 3e16))
    if plain is not None:
        assert record_seal(plain, plain=True) == record_seal(loads_strict(path.read_text())) == data["seal"]
    assert read_record(path).metrics["toy.score-v1"] == {"t1": value}
    data["metrics"]["toy.score-v1"] = {"t1": value * 2}
    path.write_text(json.dumps(data, sort_keys=True, indent=2))
    with pytest.raises(ValidationFailed, match="/seal"):
        read_record(path)
