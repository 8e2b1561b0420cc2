"""No write leaves the project: folders clt writes into that are symbolic links to elsewhere are refused by name
before anything is written; lock and stage files are opened without following links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cltoolkit.freeze_actions import freeze
from cltoolkit.run.runner import run_protocol
from tests.conftest import read, write
from tests.toy_suite import toy_protocol


@pytest.mark.parametrize("linked", ["runs", "runs/toy-v1", "runs/toy-v1/cand-s0", "pilot-runs"])
def test_a_run_folder_linked_outside_is_refused(toy, cli, tmp_path: Path, linked: str) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = toy.root / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    out = cli("run", "-p", "toy-v1", *(["--pilot"] if linked == "pilot-runs" else []))
    assert out.exit_code == 1
    assert "Traceback" not in out.output
    said = "inside the store" if linked.endswith("cand-s0") else "leads outside the project folder"
    assert said in out.output, out.output  # a linked run folder: the store refuses it, as it refuses planted records
    assert list(elsewhere.iterdir()) == []


def test_a_report_folder_linked_outside_is_refused(toy, cli, tmp_path: Path) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    run_protocol(toy, "toy-v1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    toy.reports_dir.mkdir()
    (toy.reports_dir / "toy-v1").symlink_to(elsewhere, target_is_directory=True)
    out = cli("report", "-p", "toy-v1")
    assert out.exit_code == 1 and "leads outside the project folder" in out.output, out.output
    assert list(elsewhere.iterdir()) == []
    assert read(toy.protocol_path("toy-v1")).get("results") is None  # nothing written into the protocol either


def test_a_planted_stage_lock_link_never_truncates_its_target(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from cltoolkit.suites.wmf.stages import FOLDER, StageCache

    store = tmp_path / "store"
    cache = StageCache(store)
    sha = cache.key_hash({"a": 1})
    (store / FOLDER).mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (store / FOLDER / f"{sha}.lock").symlink_to(victim)
    with pytest.raises(OSError):
        cache.get("x", {"a": 1}, lambda: 1)
    assert victim.read_text() == "precious"
    linked = StageCache(tmp_path / "store2")
    (tmp_path / "store2").mkdir()
    (tmp_path / "store2" / FOLDER).symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(RuntimeError, match="link out of its store"):
        linked.get("x", {"a": 1}, lambda: 1)


def test_a_missing_reference_file_is_one_line_not_a_traceback(project, cli) -> None:
    pytest.importorskip("torch")
    from cltoolkit.suites.wmf.analysis import _reproduction
    from cltoolkit.suites.wmf.models import WmfProtocol

    doc = read(project.protocol_path("wmf-v2"))
    protocol = WmfProtocol.model_validate_json(json.dumps(doc), strict=True)
    from cltoolkit.errors import InputError

    with pytest.raises(InputError, match=r"/reference names reference/wmf-seed000-metrics\.json, which is not in"):
        _reproduction(protocol, [])
