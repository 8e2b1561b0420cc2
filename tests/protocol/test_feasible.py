"""Freeze only what can run: negative seeds and sizes beyond a suite's stated bounds are refused at validation, one
line each; a run selection that matches nothing exits non-zero and says so."""

from __future__ import annotations

import json

from cltoolkit.freeze_actions import freeze
from tests.conftest import REPO, read, write
from tests.toy_suite import toy_protocol


def test_a_negative_seed_is_refused_at_validation(toy, cli) -> None:
    doc = toy_protocol(seeds=2)
    doc["seeds"]["stages"][0]["seeds"] = [0, -1]
    write(toy.protocol_path("toy-v1"), doc)
    out = cli("protocol", "validate", "toy-v1")
    assert out.exit_code == 2
    assert "/seeds/stages/0/seeds/1" in out.output
    assert "Traceback" not in out.output
    out = cli("protocol", "freeze", "toy-v1")
    assert out.exit_code != 0
    assert not toy.lock_path("toy-v1").exists()


def test_wmf_sizes_beyond_the_suite_bounds_are_refused_one_line_each(project, cli) -> None:
    doc = read(project.protocol_path("wmf-lite-v1"))
    doc["data"]["maxEpisodeSteps"] = 10**9
    doc["training"]["updatesPerTask"] = 10**12
    doc["budget"]["interactionsPerTask"] = 10**12
    write(project.protocol_path("wmf-lite-v1"), doc)
    out = cli("protocol", "validate", "wmf-lite-v1")
    assert out.exit_code == 2
    assert "Traceback" not in out.output
    assert "/budget/interactionsPerTask" in out.output
    doc["budget"]["interactionsPerTask"] = 1000
    write(project.protocol_path("wmf-lite-v1"), doc)
    out = cli("protocol", "validate", "wmf-lite-v1")
    lines = [line for line in out.output.splitlines() if "wmf-lite-v1.json" in line]
    assert any("/data:" in line and "GiB of frames" in line for line in lines), out.output
    assert any("/training/updatesPerTask" in line for line in lines), out.output


def test_a_selection_that_matches_nothing_exits_non_zero(toy, cli) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    for args, said in (
        (("--methods", "../../x"), "--methods ../../x: not in this stage's grid (it has: base, cand)"),
        (("--seeds", "7"), "--seeds 7: not in this stage's grid (it has: 0, 1)"),
    ):
        out = cli("run", "-p", "toy-v1", *args)
        assert out.exit_code == 2 and said in out.output and "ran 0" not in out.output, out.output
    assert not list((toy.runs_dir / "toy-v1").glob("*/record.json")) if (toy.runs_dir / "toy-v1").exists() else True


def test_every_shipped_protocol_has_non_negative_seeds() -> None:
    for path in sorted((REPO / "protocols").glob("*.json")):
        for stage in json.loads(path.read_text())["seeds"]["stages"]:
            assert min(stage["seeds"]) >= 0, path.name


def test_each_suite_states_its_bounds(project, cli) -> None:
    for pid, path in (
        ("nav4-v1", ("environment", "gridSize")),
        ("ladder-v1", ("rungs", "oneStep", "transitions")),
        ("ladder-v1", ("rungs", "control", "gridPoints")),
    ):
        doc = read(project.protocol_path(pid))
        saved = json.dumps(doc)
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = 10**12
        write(project.protocol_path(pid), doc)
        out = cli("protocol", "validate", pid)
        assert out.exit_code == 2 and "/" + "/".join(path) in out.output, out.output
        write(project.protocol_path(pid), json.loads(saved))
