"""The figures' cache (`report.figure_cache`, #52's report time): where the suite draws figures of its own
(matplotlib), a repeated `clt report` of unchanged inputs takes the figures this machine drew last time; a changed
input, or a cache file this machine did not write, draws them again; `clt report --check` never reads the cache; a
suite that draws none keeps no cache (the toolkit's SVG charts cost less than its key)."""

from __future__ import annotations

import json

import pytest

from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from cltoolkit.registry import reset_registries
from cltoolkit.report import render
from cltoolkit.report.figure_cache import CACHE_FILE, store_figures
from tests.conftest import write
from tests.toy_suite import COMPONENTS, toy_protocol

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _reported(toy: Project, cli, drawing: bool = True) -> None:
    """Toy runs reported; `drawing`: the suite's analysis draws a matplotlib figure of its own."""
    if drawing:
        write(toy.components_file, {**COMPONENTS, "analysis": {"toy": "tests.toy_suite:DrawingToyAnalysis"}})
        reset_registries()
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0
    assert cli("report", "-p", "toy-v1").exit_code == 0


def _no_drawing(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count drawings."""
    drawn: list[int] = []
    real = render.draw_figure_blocks

    def counted(*args, **kwargs):
        drawn.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(render, "draw_figure_blocks", counted)
    return drawn


def test_a_repeated_report_takes_the_kept_figures_and_writes_the_same_page(toy: Project, cli, monkeypatch) -> None:
    _reported(toy, cli)
    page = (toy.reports_dir / "toy-v1" / "report.html").read_text()
    folder = toy.stage_reports_dir("toy-v1", "main")
    assert (folder / CACHE_FILE).is_file()
    assert "Toy seeds" in page and "data:image/png;base64" in page and "<svg " in page  # the suite's and ours
    drawn = _no_drawing(monkeypatch)
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert drawn == []
    assert (toy.reports_dir / "toy-v1" / "report.html").read_text() == page
    assert cli("report", "-p", "toy-v1", "--check").exit_code == 0
    assert drawn == [1]  # the check draws the figures again (once: the two blocks are one), never from the cache


def test_a_changed_record_set_draws_again(toy: Project, cli, monkeypatch) -> None:
    _reported(toy, cli)
    drawn = _no_drawing(monkeypatch)
    assert cli("run", "-p", "toy-v1", "--redo", "cand-s0", "--reason", "a test").exit_code == 0
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert drawn == [1]


def test_a_cache_file_from_elsewhere_is_ignored(toy: Project, cli, monkeypatch) -> None:
    _reported(toy, cli)
    path = toy.stage_reports_dir("toy-v1", "main") / CACHE_FILE
    data = json.loads(path.read_text())
    data["blocks"] = json.dumps({"gates": "<p>planted</p>"})  # the key still matches; the MAC does not
    path.write_text(json.dumps(data))
    drawn = _no_drawing(monkeypatch)
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert drawn == [1]
    assert "planted" not in (toy.reports_dir / "toy-v1" / "report.html").read_text()


def test_the_check_catches_figures_a_cache_put_in_the_page(toy: Project, cli) -> None:
    """Even a cache this machine vouches for is not evidence: the check draws again and compares."""
    _reported(toy, cli)
    path = toy.stage_reports_dir("toy-v1", "main") / CACHE_FILE
    key = json.loads(path.read_text())["key"]
    store_figures(path.parent, key, {"gates": "<p>not the figures</p>", "runs": "", "suite": ""})
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert "not the figures" in (toy.reports_dir / "toy-v1" / "report.html").read_text()
    out = cli("report", "-p", "toy-v1", "--check")
    assert out.exit_code != 0
    assert "report.html" in out.output


def test_a_suite_without_figures_of_its_own_keeps_no_cache_and_draws_each_time(toy: Project, cli, monkeypatch) -> None:
    _reported(toy, cli, drawing=False)
    folder = toy.stage_reports_dir("toy-v1", "main")
    assert not (folder / CACHE_FILE).exists()
    page = (toy.reports_dir / "toy-v1" / "report.html").read_text()
    assert "<svg " in page and "data:image/png" not in page
    drawn = _no_drawing(monkeypatch)
    assert cli("report", "-p", "toy-v1").exit_code == 0
    assert drawn == [1]
    assert not (folder / CACHE_FILE).exists()
    assert (toy.reports_dir / "toy-v1" / "report.html").read_text() == page
