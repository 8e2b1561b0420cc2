"""Editing a frozen protocol, and what freezing checks first (#19 items 5, 6, 8)."""

from __future__ import annotations

import json

from cltoolkit.freeze_actions import freeze
from cltoolkit.protocol.hashing import protocol_hash
from tests.conftest import read, write
from tests.toy_suite import toy_protocol


def _frozen_toy(toy) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=3))
    freeze(toy, "toy-v1")


def test_validate_fails_on_an_edited_frozen_protocol_and_restore_undoes_it(toy, cli) -> None:
    _frozen_toy(toy)
    frozen = protocol_hash(read(toy.protocol_path("toy-v1")))
    doc = read(toy.protocol_path("toy-v1"))
    doc["goal"] = "Edited after freezing."
    write(toy.protocol_path("toy-v1"), doc)
    out = cli("protocol", "validate", "toy-v1")
    assert out.exit_code == 1 and "is frozen" in out.output and "toy-v1.lock.json" in out.output, out.output
    assert "clt protocol restore toy-v1" in out.output
    assert "clt protocol bump toy-v1" in out.output
    status = cli("status", "-p", "toy-v1")
    assert "changed since it was frozen" in status.output
    assert "toy-v1.lock.json" in status.output
    out = cli("protocol", "restore", "toy-v1")
    assert out.exit_code == 0
    assert "restored" in out.output
    assert protocol_hash(read(toy.protocol_path("toy-v1"))) == frozen
    assert cli("protocol", "validate", "toy-v1").exit_code == 0


def test_bump_moves_the_edits_to_a_new_version_and_restores_the_frozen_one(toy, cli) -> None:
    _frozen_toy(toy)
    frozen = protocol_hash(read(toy.protocol_path("toy-v1")))
    doc = read(toy.protocol_path("toy-v1"))
    doc["goal"] = "The next study."
    write(toy.protocol_path("toy-v1"), doc)
    out = cli("protocol", "bump", "toy-v1")
    assert out.exit_code == 0, out.output
    assert read(toy.protocol_path("toy-v2"))["goal"] == "The next study."
    assert protocol_hash(read(toy.protocol_path("toy-v1"))) == frozen
    assert cli("protocol", "verify").exit_code == 0


def test_a_gate_without_two_replicates_is_refused_at_freeze(toy, cli) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=1))
    out = cli("protocol", "freeze", "toy-v1")
    assert out.exit_code == 1 and "needs at least 2" in out.output and "/gates/0" in out.output, out.output
    assert not toy.lock_path("toy-v1").exists()


def test_power_warnings_come_from_validate_and_before_the_freeze(toy, cli) -> None:
    doc = toy_protocol(seeds=3)
    doc["gates"][1]["delta"] = 0.05  # a declared effect and no planning SD: its power is unknown
    write(toy.protocol_path("toy-v1"), doc)
    out = cli("protocol", "validate", "toy-v1")
    assert out.exit_code == 0 and "power is unknown" in out.output, out.output
    out = cli("protocol", "freeze", "toy-v1")
    assert out.exit_code == 0
    assert out.output.index("power is unknown") < out.output.index("froze toy-v1")


def test_a_pilot_of_a_frozen_protocol_on_confirmatory_seeds_is_warned(toy, cli) -> None:
    _frozen_toy(toy)
    out = cli("run", "-p", "toy-v1", "--pilot")
    assert out.exit_code == 0 and "are the confirmatory ones" in out.output, out.output


def test_a_method_that_ignores_the_run_seed_is_warned(project, cli) -> None:
    path = project.root / "protocols" / "ladder-v1.json"
    doc = json.loads(path.read_text())
    doc["seeds"]["stages"][0]["seeds"] = [0, 1, 2]
    doc["comparisons"][0]["method"] = "ladder.least-squares"
    doc["comparisons"][0]["hyperparameters"] = {"transitions": 200, "seed": 7}
    path.write_text(json.dumps(doc))
    out = cli("protocol", "validate", "ladder-v1")
    assert out.exit_code == 0 and "draws from its own `seed` hyperparameter (7)" in out.output, out.output
    assert "/comparisons/0/hyperparameters/seed" in out.output
