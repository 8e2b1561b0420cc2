"""Layout sets of a nav4 protocol, from its declared generator seed ranges, and the split manifest.

- training: every seed of the `train` range (episodes draw from it);
- validation (learning curves, model selection): the first `curveEpisodes` seeds of the `validation` range whose
  layouts are distinct;
- final test: the first `episodesPerTask` seeds of the `test` range whose layouts are distinct.

The manifest holds, per task and split, the fingerprints and their hash, duplicates within each split, and
test layouts that duplicate a training or validation layout (freeze refuses those).
"""

from __future__ import annotations

import hashlib
from typing import Any

from cltoolkit.suites.nav4.models import Nav4Protocol

__all__ = ["fingerprints", "layout_pool", "split_manifest", "test_layouts", "validation_layouts"]


def _kw(protocol: Nav4Protocol) -> dict[str, int]:
    env = protocol.environment
    return {"size": env.gridSize, "min_path": env.minPathLength}


def layout_pool(protocol: Nav4Protocol, split: str) -> list[int]:
    r = protocol.seeds.splits[split]
    return list(range(r.start, r.stop))


def fingerprints(protocol: Nav4Protocol, task: str, seeds: list[int]) -> list[str]:
    from cltoolkit.suites.nav4.env import Nav4Env

    env = Nav4Env(task, max_steps=protocol.environment.episodeActionLimit, **_kw(protocol))
    out = []
    for s in seeds:
        env.reset(seed=s)
        out.append(env.fingerprint)
    return out


def _distinct(protocol: Nav4Protocol, task: str, split: str, count: int) -> list[int]:
    from cltoolkit.suites.nav4.env import Nav4Env

    env = Nav4Env(task, max_steps=protocol.environment.episodeActionLimit, **_kw(protocol))
    seen: set[str] = set()
    chosen = []
    for s in layout_pool(protocol, split):
        env.reset(seed=s)
        if env.fingerprint not in seen:
            seen.add(env.fingerprint)
            chosen.append(s)
            if len(chosen) == count:
                return chosen
    raise ValueError(f"the {split} seed range holds fewer than {count} distinct {task} layouts")


def test_layouts(protocol: Nav4Protocol, task: str) -> list[int]:
    return _distinct(protocol, task, "test", protocol.evaluation.episodesPerTask)


def validation_layouts(protocol: Nav4Protocol, task: str) -> list[int]:
    return _distinct(protocol, task, "validation", protocol.evaluation.curveEpisodes)


def _digest(items: list[str]) -> str:
    return "sha256:" + hashlib.sha256("\n".join(items).encode()).hexdigest()


def split_manifest(protocol: Nav4Protocol) -> dict[str, Any]:
    """Fingerprint lists per task and split with their hashes, duplicate counts, and cross-split collisions."""
    tasks: dict[str, Any] = {}
    for task in (t.id for t in protocol.environment.tasks):
        train = fingerprints(protocol, task, layout_pool(protocol, "train"))
        val_seeds, test_seeds = validation_layouts(protocol, task), test_layouts(protocol, task)
        val, test = fingerprints(protocol, task, val_seeds), fingerprints(protocol, task, test_seeds)
        train_set, val_set = set(train), set(val)
        tasks[task] = {
            "train": {"seeds": f"[{protocol.seeds.splits['train'].start}, {protocol.seeds.splits['train'].stop})",
                      "layouts": len(train), "distinct": len(train_set), "sha256": _digest(train)},
            "validation": {"seeds": val_seeds, "fingerprints": val, "sha256": _digest(val)},
            "test": {"seeds": test_seeds, "fingerprints": test, "sha256": _digest(test)},
            "testInTrain": sorted(s for s, f in zip(test_seeds, test, strict=True) if f in train_set),
            "testInValidation": sorted(s for s, f in zip(test_seeds, test, strict=True) if f in val_set),
            "validationInTrain": sorted(s for s, f in zip(val_seeds, val, strict=True) if f in train_set),
        }
    return {"protocol": protocol.id, "tasks": tasks}
