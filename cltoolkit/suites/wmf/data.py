"""The data stages of a wmf run: random-policy episodes of a task, collected once per key and shared through
`StageCache` (every cell, method and seed that asks for the same data reads one file), and the seeds every stage
derives from the run seed and its role."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch

from cltoolkit.suites.wmf.envs import Episodes, collect, collect_stream, make_env
from cltoolkit.suites.wmf.models import Family, TaskRef, WmfProtocol
from cltoolkit.suites.wmf.stages import StageCache

__all__ = ["derived_seed", "stage_data", "stored_as_the_seed_does"]


def derived_seed(*parts: object) -> int:
    """A 31-bit seed from the run seed and a role (stable across processes, unlike `hash`)."""
    text = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") >> 1


def _physics(task: TaskRef) -> tuple[float | None, float, float]:
    return task.physics.gravity, task.physics.massScale, task.physics.frictionScale


def stage_data(
    cache: StageCache, protocol: WmfProtocol, family: Family, task: TaskRef, label: str, split: str, seed: int
) -> Episodes:
    if protocol.data.collectionSeeds == "seed-stream":
        value = _streamed(cache, protocol, family, task, label, seed)[("train", "heldout").index(split)]
    else:
        value = _collected(cache, protocol, family, task, label, split, seed)
    if protocol.data.terminalFrame == "dropped":
        value = stored_as_the_seed_does(value, protocol.training.sequenceLength)
    return value


def _encode(ep: Episodes) -> dict[str, Any]:
    return {"frames": torch.from_numpy(ep.frames), "actions": torch.from_numpy(ep.actions),
            "lengths": torch.from_numpy(ep.lengths)}  # fmt: skip


def _decode(d: dict[str, Any]) -> Episodes:
    return Episodes(d["frames"].numpy(), d["actions"].numpy(), d["lengths"].numpy())


def _collected(
    cache: StageCache, protocol: WmfProtocol, family: Family, task: TaskRef, label: str, split: str, seed: int
) -> Episodes:
    """One split of one task, each episode reset with its own derived seed (`by-task`, `by-role`)."""
    episodes = protocol.data.trainEpisodes if split == "train" else protocol.data.heldOutEpisodes
    key = {
        "stage": "data",
        "renderer": family.renderer,
        "task": task.model_dump(mode="json"),
        "split": split,
        "episodes": episodes,
        "maxSteps": protocol.data.maxEpisodeSteps,
        "seed": seed,
    }
    if family.rendering != "native-64":  # wmf-v1's keys stay as they were
        key["rendering"] = family.rendering
    by_role = protocol.data.collectionSeeds == "by-role"
    if by_role:  # wmf-v2's keys stay as they were
        key["role"] = label
    collection_seed = (
        derived_seed(seed, label, task.env, _physics(task), split)
        if by_role
        else derived_seed(seed, task.env, _physics(task), split)
    )

    def compute() -> Episodes:
        env = make_env(family.renderer, task.env, *_physics(task), family.rendering)
        try:
            return collect(env, episodes, protocol.data.maxEpisodeSteps, collection_seed)
        finally:
            env.close()

    value: Episodes = cache.get(f"data-{split}-{label}", key, compute, _encode, _decode)[0]
    return value


def _streamed(
    cache: StageCache, protocol: WmfProtocol, family: Family, task: TaskRef, label: str, seed: int
) -> tuple[Episodes, Episodes]:
    """Both splits of one task from one environment seeded once (`seed-stream`): task A with the seed, task B with
    seed + 1, training episodes first. The key names neither the cell nor the other task, so cells of a family with
    the same task A share its data."""
    stream_seed = seed + "AB".index(label)
    d = protocol.data
    key = {
        "stage": "data-stream",
        "renderer": family.renderer,
        "rendering": family.rendering,
        "task": task.model_dump(mode="json"),
        "episodes": [d.trainEpisodes, d.heldOutEpisodes],
        "maxSteps": d.maxEpisodeSteps,
        "streamSeed": stream_seed,
    }

    def compute() -> dict[str, Episodes]:
        env = make_env(family.renderer, task.env, *_physics(task), family.rendering)
        try:
            train, held = collect_stream(env, (d.trainEpisodes, d.heldOutEpisodes), d.maxEpisodeSteps, stream_seed)
        finally:
            env.close()
        return {"train": train, "heldout": held}

    def encode(v: dict[str, Episodes]) -> dict[str, Any]:
        return {split: _encode(ep) for split, ep in v.items()}

    def decode(v: dict[str, Any]) -> dict[str, Episodes]:
        return {split: _decode(ep) for split, ep in v.items()}

    both: dict[str, Episodes] = cache.get(f"data-{label}", key, compute, encode, decode)[0]
    return both["train"], both["heldout"]


def stored_as_the_seed_does(data: Episodes, length: int) -> Episodes:
    """The episodes as WorldModelsBenchmark's buffer holds them: each step's frame before its action, never the frame
    after an episode's last action, and no episode with fewer than `length` steps. The valid frames of an episode of n
    >= length steps become 0..n-1 (n - 1 transitions between stored frames); a shorter one keeps none."""
    lengths = np.where(data.lengths >= length, data.lengths - 1, 0)
    return Episodes(data.frames, data.actions, lengths.astype(data.lengths.dtype))
