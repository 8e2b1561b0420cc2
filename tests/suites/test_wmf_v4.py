"""wmf-v4's camera, seeding and fingerprint: HalfCheetah from the `track` camera matches the seed's first-update loss
(the free camera does not), data is collected as the seed's `collect_cell_buffers` does (one environment per task,
seeded once), the cells of a family share task A, and a run whose first update misses the fingerprint fails by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("minigrid")

from cltoolkit.errors import FingerprintMiss  # noqa: E402
from cltoolkit.registry import registries  # noqa: E402
from cltoolkit.suites.wmf.data import derived_seed, stored_as_the_seed_does  # noqa: E402
from cltoolkit.suites.wmf.driver import _fresh, _plain, run_cell  # noqa: E402
from cltoolkit.suites.wmf.envs import collect_stream, make_env  # noqa: E402
from cltoolkit.suites.wmf.models import WmfProtocol  # noqa: E402
from cltoolkit.suites.wmf.suite import make_method  # noqa: E402
from cltoolkit.suites.wmf.train import StepHooks, train_phase  # noqa: E402
from tests.suites.test_wmf import _tiny_doc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _v4() -> WmfProtocol:
    return WmfProtocol.model_validate_json((ROOT / "protocols" / "wmf-v4.json").read_text(), strict=True)


def _first_update_loss(protocol: WmfProtocol, rendering: str, seed: int) -> float:
    """The first task-A update's reconstruction loss on one 60-step HalfCheetah episode (gym task A)."""
    env = make_env("mujoco", "HalfCheetah-v4", 9.8, 1.0, 1.0, rendering)
    try:
        (train,) = collect_stream(env, (1,), 60, seed)
    finally:
        env.close()
    data = stored_as_the_seed_does(train, protocol.training.sequenceLength)
    model = _fresh(protocol, _plain, env.width, seed, "cpu")
    cfg = protocol.training.model_copy(update={"updatesPerTask": 1})
    log = train_phase(
        model, [(data, cfg.batch)], cfg, derived_seed(seed, "phase", "A"), StepHooks("A"), episode_first=True
    )
    assert log.first is not None
    return log.first


@pytest.mark.e2e
def test_gym_track_camera_passes_the_fingerprint_and_the_free_camera_misses_it() -> None:
    protocol = _v4()
    assert protocol.fingerprint is not None
    bounds = protocol.fingerprint.bounds("gym", "HalfCheetah-v4")
    assert bounds is not None
    low, high = bounds
    track = _first_update_loss(protocol, "track-resized", 0)
    free = _first_update_loss(protocol, "default-resized", 0)  # wmf-v2/v3's frames (Gymnasium 1.x's free camera)
    assert low <= track <= high
    assert 490 < track < 560  # the seed's stored first updates: 513.6-528.6
    assert free > 3 * high


def test_wmf_v4_declares_every_family_and_task_a_in_its_fingerprint() -> None:
    protocol = _v4()
    assert protocol.fingerprint is not None
    for family in protocol.families:
        for level in family.levels:
            assert protocol.fingerprint.bounds(family.id, level.taskA.env) is not None, (family.id, level.id)
    gym = next(f for f in protocol.families if f.id == "gym")
    assert gym.rendering == "track-resized"
    assert protocol.data.collectionSeeds == "seed-stream"


def _seed_wrapper_episodes(env_id: str, seed: int, counts: tuple[int, ...], steps: int) -> list[list[np.ndarray]]:
    """MiniGrid episodes as WorldModelsBenchmark's MiniGridEnv + collect_rollouts draw them (its seed(): reset with
    the seed and seed the action space once; then seedless resets), written here from its source, not clt's."""
    import gymnasium as gym
    import minigrid  # noqa: F401
    from PIL import Image

    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=seed)
    env.action_space.seed(seed)

    def frame() -> np.ndarray:
        rgb: np.ndarray = env.render()  # type: ignore[assignment]
        return np.asarray(Image.fromarray(rgb).resize((64, 64), Image.Resampling.BILINEAR), np.uint8)

    out = []
    for n in counts:
        for _ in range(n):
            env.reset()
            frames, done, t = [frame()], False, 0
            while not done and t < steps:
                _, _, term, trunc, _ = env.step(int(env.action_space.sample()))
                frames.append(frame())
                done, t = term or trunc, t + 1
            out.append(frames)
    env.close()
    return out


def test_seed_stream_collects_what_the_seed_wrappers_collect() -> None:
    env = make_env("minigrid", "MiniGrid-Empty-5x5-v0", rendering="default-resized")
    try:
        train, held = collect_stream(env, (2, 1), 12, 3)
    finally:
        env.close()
    reference = _seed_wrapper_episodes("MiniGrid-Empty-5x5-v0", 3, (2, 1), 12)
    mine = [(train, e) for e in range(2)] + [(held, 0)]
    for (episodes, e), ref in zip(mine, reference, strict=True):
        n = int(episodes.lengths[e])
        assert n == len(ref) - 1
        assert np.array_equal(episodes.frames[e, : n + 1], np.stack(ref))
    assert not np.array_equal(train.frames[0], held.frames[0])  # held-out episodes continue the stream


def _streamed_protocol() -> WmfProtocol:
    doc: dict[str, Any] = _tiny_doc()
    doc["data"].update(collectionSeeds="seed-stream")
    return WmfProtocol.model_validate_json(json.dumps(doc), strict=True)


def test_seed_stream_shares_task_a_across_cells_and_b_at_s_with_a_at_s_plus_1(tmp_path: Path) -> None:
    protocol = _streamed_protocol()
    minigrid = protocol.families[0]
    # wmf-lite-v1's MiniGrid chain: a cell's task B is the next cell's task A
    assert minigrid.levels[0].taskB.env == minigrid.levels[1].taskA.env
    method = make_method("wmf.finetuning", {}, registries())
    low = run_cell(protocol, "minigrid-min", method, 0, tmp_path)
    med = run_cell(protocol, "minigrid-med", method, 1, tmp_path)
    reused = {r.split(":")[0] for r in med["reused"]}
    assert "data-A" in reused  # minigrid-med's task A at seed 1 is minigrid-min's task B at seed 0 (stream seed 1)
    assert med["metrics"]["stages"]["data-A"] == low["metrics"]["stages"]["data-B"]
    # and two cells with one task A share its data and its task-A model (nothing of task B in the phase's key)
    doc = _tiny_doc()
    doc["data"].update(collectionSeeds="seed-stream")
    doc["families"][0]["levels"][1]["taskA"] = doc["families"][0]["levels"][0]["taskA"]
    shared = WmfProtocol.model_validate_json(json.dumps(doc), strict=True)
    one = run_cell(shared, "minigrid-min", method, 0, tmp_path / "s")
    two = run_cell(shared, "minigrid-med", method, 0, tmp_path / "s")
    assert {"data-A", "phase-A-rssm"} <= {r.split(":")[0] for r in two["reused"]}
    assert one["metrics"]["reconAAfterA"] == two["metrics"]["reconAAfterA"]
    assert one["metrics"]["stages"]["data-B"] != two["metrics"]["stages"]["data-B"]


def test_a_run_outside_the_fingerprint_fails_by_name(tmp_path: Path) -> None:
    doc: dict[str, Any] = _tiny_doc()
    task_a = doc["families"][0]["levels"][0]["taskA"]["env"]
    ranges = [{"family": "minigrid", "taskA": task_a, "low": 1.0, "high": 2.0, "values": 1}]
    doc["fingerprint"] = {"metric": "firstUpdateReconstructionLossA", "margin": 0.1, "ranges": ranges, "source": "t"}
    protocol = WmfProtocol.model_validate_json(json.dumps(doc), strict=True)
    with pytest.raises(FingerprintMiss, match=r"^fingerprint: the first task-A update's reconstruction loss is "):
        run_cell(protocol, "minigrid-min", make_method("wmf.finetuning", {}, registries()), 0, tmp_path)
    doc["fingerprint"]["ranges"][0].update(low=1.0, high=1e6)
    inside = WmfProtocol.model_validate_json(json.dumps(doc), strict=True)
    out = run_cell(
        inside, "minigrid-min", make_method("wmf.finetuning", {}, registries()), 0, tmp_path
    )  # its stages reused
    assert out["metrics"]["firstUpdateReconstructionLossA"] > 1.0


def test_the_report_lists_the_fingerprint_per_family_and_task_a() -> None:
    from types import SimpleNamespace

    from cltoolkit.suites.wmf.reproduction.seedstats import fingerprint, fingerprint_lines

    protocol = _v4()

    def rec(cell: str, value: float) -> Any:
        return SimpleNamespace(spec=SimpleNamespace(cell=cell), metrics={"firstUpdateReconstructionLossA": value})

    summary = fingerprint(protocol, [rec("gym-min", 516.8), rec("gym-max", 512.3), rec("dmc-med", 600.0)])
    assert summary is not None
    gym = next(r for r in summary["ranges"] if r["family"] == "gym")
    assert gym["cells"] == ["gym-max", "gym-med", "gym-min"]
    assert (gym["n"], gym["inside"], gym["insideReference"]) == (2, 2, 1)  # 512.3 < 513.6, inside the margin
    dmc = next(r for r in summary["ranges"] if r["family"] == "dmc")
    assert dmc["cells"] == ["dmc-max", "dmc-med", "dmc-min"] and dmc["n"] == 1
    text = "\n".join(fingerprint_lines(summary))
    assert "| gym | HalfCheetah-v4 | 2 | 512.3-516.8 | 2 of 2 | 1 of 2 | 462.2-581.5 | 513.6-528.6 |" in text
