"""Benchmark and numerics check: does the seed's platform (a GPU, cuDNN's TF32 convolutions) explain dm_control's
reconstruction plateau? wmf-v4 issue, item 5.

Seed 000's own world model (WorldModelsBenchmark's `RSSM` with its `ConvVAE`, read from a checkout of that
repository) is trained for a few hundred updates on the same dm_control frames clt trains on (wmf-v4, family dmc,
task A cheetah/run, seed 0's stream) under four numerics: the CPU; CUDA with PyTorch's defaults (cuDNN convolutions
in TF32, matrix products in full fp32: the seed's platform); CUDA with TF32 off everywhere; CUDA with TF32 everywhere.
Each of several initialisations runs under every numerics with common random numbers: the same initial weights, the
same training windows and the same reparameterisation noise (drawn on the CPU and moved), so two runs of one
initialisation differ only in arithmetic. Each run reports its training reconstruction curve (the seed's
`train_task` quantity), its held-out reconstruction at the end (the seed's `evaluate_reconstruction`: 200 held-out
frames, z = mu) and its updates per second.

Two steps, because the device that runs the check has neither dm_control nor clt's dependencies:

    python bench/wmf_gpu_numerics.py prepare --reference ../WorldModelsBenchmark --out .gpucheck
    python bench/wmf_gpu_numerics.py run --data .gpucheck [--updates 500] [--inits 0,1,2,3] [--configs cpu,...] > a.json
    python bench/wmf_gpu_numerics.py merge a.json b.json ...

Run `prepare` with another environment's interpreter to render the same episodes with another simulator stack
(`clt env build`-style, `cltoolkit.packages`: the seed's mujoco 3.1.1 and dm_control 1.0.16, say) and train on both
sets under one numerics to compare the stacks' frames.

`prepare` (here, with clt installed) renders the frames with clt's collection code and copies the seed's two model
files beside them; `run` needs only numpy and torch, and prints one JSON object; `merge` joins several (the CPU's
initialisations can run as processes beside the GPU's) and adds each numerics' largest difference from the CPU run of
the same initialisation, and the GPU's own run-to-run difference (the default numerics twice).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CONFIGS = ("cpu", "cuda-default", "cuda-default-again", "cuda-tf32-off", "cuda-tf32-all")
MODEL_FILES = ("cf_worldmodels/src/models/vae.py", "cf_worldmodels/src/models/rssm.py")


def prepare(reference: Path, out: Path, train_episodes: int) -> dict[str, Any]:
    """Render wmf-v4's dmc task-A episodes (seed 0's stream: training episodes, then held-out ones) and copy the
    seed's model files; `train_episodes` keeps the first training episodes only (the device's upload is limited)."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    from cltoolkit.component_validation import load_protocol
    from cltoolkit.registry import registries
    from cltoolkit.suites.wmf.envs import collect_stream, make_env

    protocol = load_protocol(REPO / "protocols" / "wmf-v4.json", registries()).model
    family = next(f for f in protocol.families if f.id == "dmc")  # type: ignore[attr-defined]
    task = family.levels[0].taskA
    d = protocol.data  # type: ignore[attr-defined]
    env = make_env(family.renderer, task.env, None, 1.0, 1.0, family.rendering)
    try:
        train, held = collect_stream(env, (d.trainEpisodes, d.heldOutEpisodes), d.maxEpisodeSteps, 0)
    finally:
        env.close()
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out / "frames.npz",
        train_frames=train.frames[:train_episodes],
        train_actions=train.actions[:train_episodes],
        train_lengths=train.lengths[:train_episodes],
        heldout_frames=held.frames,
        heldout_lengths=held.lengths,
    )
    models = out / "src" / "models"
    models.mkdir(parents=True, exist_ok=True)
    for name in ("src/__init__.py", "src/models/__init__.py"):
        (out / name).write_text("")
    for name in MODEL_FILES:
        shutil.copyfile(reference / name, models / Path(name).name)
    from importlib import metadata

    return {
        "renderedWith": {name: metadata.version(name) for name in ("mujoco", "dm_control", "numpy")},
        "task": task.env,
        "rendering": family.rendering,
        "trainEpisodes": int(min(train_episodes, len(train.lengths))),
        "heldOutEpisodes": len(held.lengths),
        "bytes": (out / "frames.npz").stat().st_size,
    }


def _numerics(config: str) -> str:
    """Set PyTorch's TF32 switches for `config`; returns the device."""
    import torch

    if config == "cpu":
        return "cpu"
    conv, matmul = {
        "cuda-default": (True, False),
        "cuda-default-again": (True, False),  # the same numerics twice: cuDNN's own run-to-run differences
        "cuda-tf32-off": (False, False),
        "cuda-tf32-all": (True, True),
    }[config]
    torch.backends.cudnn.allow_tf32 = conv
    torch.backends.cuda.matmul.allow_tf32 = matmul
    return "cuda"


class Windows:
    """The seed's `ReplayBuffer.sample`: episodes uniformly, then a start uniformly inside the episode; a window of
    `length` frames with their actions. Drawn from one RandomState, so every numerics sees the same windows."""

    def __init__(self, frames: Any, actions: Any, lengths: Any, seed: int) -> None:
        import numpy as np

        self.frames, self.actions, self.lengths = frames, actions, lengths
        self.rng = np.random.RandomState(seed)

    def sample(self, batch: int, length: int) -> tuple[Any, Any]:
        import numpy as np
        import torch

        episodes = self.rng.randint(0, len(self.lengths), size=batch)
        obs, act = [], []
        for e in episodes:
            start = self.rng.randint(0, int(self.lengths[e]) - length + 1)
            obs.append(self.frames[e, start : start + length])
            act.append(self.actions[e, start : start + length])
        x = torch.from_numpy(np.stack(obs).astype(np.float32) / 255.0).permute(0, 1, 4, 2, 3)
        return x, torch.from_numpy(np.stack(act))


def _heldout(frames: Any, lengths: Any, n: int) -> Any:
    """The seed's `evaluate_reconstruction` frames: `n` of the held-out episodes' frames, chosen with seed 0."""
    import numpy as np

    pool = np.concatenate([frames[e, : int(lengths[e])] for e in range(len(lengths))])
    idx = np.random.default_rng(0).choice(len(pool), size=min(n, len(pool)), replace=False)
    return pool[idx].astype(np.float32) / 255.0


def train_once(data: dict[str, Any], config: str, init: int, updates: int, every: int) -> dict[str, Any]:
    """One run of the seed's model under `config` from initialisation `init`, with common random numbers."""
    import torch
    from src.models.rssm import RSSM, reconstruction_loss  # type: ignore[import-not-found]  # the seed's own code, copied by `prepare`

    device = _numerics(config)
    noise = torch.Generator().manual_seed(10_000 + init)
    plain_randn_like = torch.randn_like

    def common_randn_like(x: torch.Tensor, **_: Any) -> torch.Tensor:
        return torch.randn(x.shape, generator=noise, dtype=x.dtype).to(x.device)

    torch.manual_seed(init)
    model = RSSM(32, 512, data["train_actions"].shape[-1], beta_kl=1.0).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    windows = Windows(data["train_frames"], data["train_actions"], data["train_lengths"], 1_000 + init)
    curve: list[list[float]] = []
    torch.randn_like = common_randn_like  # type: ignore[assignment]
    try:
        model.train()
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for step in range(1, updates + 1):
            obs, act = windows.sample(8, 5)
            loss, parts = model.compute_loss({"obs": obs.to(device), "actions": act.to(device)})
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == 1 or step % every == 0:
                curve.append([step, round(parts["reconstruction"], 4)])
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    finally:
        torch.randn_like = plain_randn_like
    model.eval()
    with torch.no_grad():
        x = torch.from_numpy(data["heldout"]).permute(0, 3, 1, 2).to(device)
        total = 0.0
        for s in range(0, len(x), 64):
            chunk = x[s : s + 64]
            recon = model.decode(torch.zeros(len(chunk), model.hidden_dim, device=device), model.encode(chunk))
            total += float(reconstruction_loss(recon, chunk)) * len(chunk)
    return {
        "config": config,
        "init": init,
        "curve": curve,
        "lastReconstruction": curve[-1][1],
        "heldOutReconstruction": round(total / len(x), 4),
        "seconds": round(seconds, 2),
        "updatesPerSecond": round(updates / seconds, 1),
    }


def run(data_dir: Path, configs: list[str], inits: list[int], updates: int, every: int) -> dict[str, Any]:
    import numpy as np
    import torch

    sys.path.insert(0, str(data_dir))
    with np.load(data_dir / "frames.npz") as z:
        data = {k: z[k] for k in ("train_frames", "train_actions", "train_lengths")}
        data["heldout"] = _heldout(z["heldout_frames"], z["heldout_lengths"], 200)
    if not torch.cuda.is_available():
        configs = [c for c in configs if c == "cpu"]
    return {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu only",
        "cpuThreads": torch.get_num_threads(),
        "updates": updates,
        "trainEpisodes": len(data["train_lengths"]),
        "runs": [train_once(data, c, i, updates, every) for c in configs for i in inits],
    }


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several `run` outputs (the CPU's initialisations run as processes beside the GPU's) as one, with each
    numerics' largest difference from the CPU run of the same initialisation."""
    runs = [r for p in parts for r in p["runs"]]
    by = {(r["config"], r["init"]): r for r in runs}
    configs = sorted({r["config"] for r in runs}, key=lambda c: CONFIGS.index(c) if c in CONFIGS else 99)

    def differences(c: str, base: str) -> dict[str, float]:
        pairs = [(by[c, i], by[base, i]) for (k, i) in by if k == c and (base, i) in by]
        return {
            "maxAbsHeldOutDifference": round(
                max(abs(a["heldOutReconstruction"] - b["heldOutReconstruction"]) for a, b in pairs), 4
            ),
            "maxAbsCurveDifference": round(
                max(abs(x[1] - y[1]) for a, b in pairs for x, y in zip(a["curve"], b["curve"], strict=True)), 4
            ),
        }

    head = {k: v for k, v in parts[0].items() if k != "runs"}
    head["device"] = next((p["device"] for p in parts if p["device"] != "cpu only"), head["device"])
    head["cpuThreads"] = sorted({p["cpuThreads"] for p in parts})
    return {
        **head,
        "againstCpu": {c: differences(c, "cpu") for c in configs if c != "cpu" and "cpu" in configs},
        "gpuRunToRun": differences("cuda-default-again", "cuda-default") if "cuda-default-again" in configs else None,
        "runs": sorted(runs, key=lambda r: (configs.index(r["config"]), r["init"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--reference", type=Path, required=True, help="a checkout of WorldModelsBenchmark")
    p.add_argument("--out", type=Path, default=REPO / ".gpucheck")
    p.add_argument("--train-episodes", type=int, default=8)
    r = sub.add_parser("run")
    r.add_argument("--data", type=Path, default=REPO / ".gpucheck")
    r.add_argument("--configs", default=",".join(CONFIGS))
    r.add_argument("--inits", default="0,1,2,3", help="initialisations, comma-separated")
    r.add_argument("--updates", type=int, default=500)
    r.add_argument("--every", type=int, default=25)
    m = sub.add_parser("merge")
    m.add_argument("parts", type=Path, nargs="+", help="`run` outputs")
    args = parser.parse_args()
    if args.command == "prepare":
        result = prepare(args.reference, args.out, args.train_episodes)
    elif args.command == "run":
        inits = [int(i) for i in args.inits.split(",")]
        result = run(args.data, args.configs.split(","), inits, args.updates, args.every)
    else:
        result = merge([json.loads(p.read_text()) for p in args.parts])
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
