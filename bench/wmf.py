"""Benchmark: milliseconds per world-model gradient step at the wmf-v1 model size (ConvVAE 32/64/128/256 -> 32,
GRU 512, batch 8 x sequence 5, Adam, 1 torch thread), in the one-pass form the suite trains with and in the
step-by-step form of seed 000 (target: at most 130 ms; the seed's own implementation takes about 295 ms here),
the wall time of one full wmf-lite-v1 cell (5 methods x 1 seed, fresh stage cache, one process), and
each method's task-B update as wmf-v1 and wmf-v2 build their models (wmf-v2: seed 000's decoder, progressive
columns and UG-MTM), on CUDA too where there is one.
Also where the step's time goes: forward / backward / Adam, and each VAE convolution's milliseconds and
GFLOP/s; with --group [protocol], where a (cell, seed) group's CPU time goes (collection and rendering per family,
each training phase; wmf-v3 unless named). Prints one JSON object. Usage: python bench/wmf.py [--steps 10]
[--cell minigrid-min] [--no-cell] [--group [wmf-v4]]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def step_ms(steps: int, stepwise: bool) -> dict[str, float]:
    """Medians of one gradient step and of its parts: forward (loss), backward, Adam."""
    import torch

    from cltoolkit.suites.wmf.world import RSSM

    torch.manual_seed(0)
    model = RSSM(32, 512, 7, (32, 64, 128, 256), 1.0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    obs, act, eps = torch.rand(8, 5, 3, 64, 64), torch.rand(8, 4, 7), torch.randn(8, 5, 32)
    loss_fn = model.loss_stepwise if stepwise else (lambda o, a, e: model.loss(o, a, e)[0])
    times: dict[str, list[float]] = {"step": [], "forward": [], "backward": [], "adam": []}
    for i in range(steps + 3):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(obs, act, eps)
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        opt.step()
        end = time.perf_counter()
        if i >= 3:
            parts = (("step", end - start), ("forward", forward - start), ("backward", backward - forward))
            for name, seconds in (*parts, ("adam", end - backward)):
                times[name].append(seconds * 1000)
    return {name: round(statistics.median(v), 1) for name, v in times.items()}


def protocol_step_ms(protocol_id: str, steps: int, device: str = "cpu") -> dict[str, float]:
    """Median milliseconds of one training update (batch x sequence of the protocol, Adam) for each method's model
    as `protocol_id` builds it (wmf-v2: the seed's decoder, progressive columns and UG-MTM), after the switch to
    task B (so progressive and UG-MTM run their task-B form)."""
    import torch

    from cltoolkit.suites.wmf.api import ModelSpec
    from cltoolkit.suites.wmf.models import WmfProtocol
    from cltoolkit.suites.wmf.suite import make_method

    protocol = WmfProtocol.model_validate_json((REPO / "protocols" / f"{protocol_id}.json").read_text(), strict=True)
    t, m = protocol.training, protocol.model
    out = {}
    for comp in protocol.comparisons:
        method = make_method(comp.method, comp.hyperparameters)
        torch.manual_seed(0)
        model = method.build(ModelSpec(m.latent, m.hidden, 7, m.channels, m.beta))
        if m.decoder == "2x2-crop":
            model.vae.use_seed_decoder()
        model = model.to(device)
        model.switch()
        model.train()
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=t.lr)
        obs = torch.rand(t.batch, t.sequenceLength, 3, 64, 64, device=device)
        act = torch.rand(t.batch, t.sequenceLength - 1, 7, device=device)
        eps = torch.randn(t.batch, t.sequenceLength, protocol.model.latent, device=device)
        times = []
        for i in range(steps + 3):
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            model.loss(obs, act, eps)[0].backward()
            opt.step()
            if device != "cpu":
                torch.cuda.synchronize()
            if i >= 3:
                times.append((time.perf_counter() - start) * 1000)
        out[comp.id] = round(statistics.median(times), 1)
    return out


def conv_layers(steps: int) -> list[dict[str, object]]:
    """Each convolution of the wmf-v1 VAE alone on an input of its shape in a step (40 frames, channels-last):
    forward and backward milliseconds and the GFLOP/s they reach (2 x multiply-adds; the backward computes the
    weight gradient and, except in the first layer, the input gradient), beside the ~160 GFLOP/s single-thread
    matrix peak the issue's estimate assumes."""
    import torch
    from torch import nn

    from cltoolkit.suites.wmf.world import RSSM

    torch.manual_seed(0)
    vae = RSSM(32, 512, 7, (32, 64, 128, 256), 1.0).vae
    encoder: list[nn.Conv2d | nn.ConvTranspose2d] = [m for m in vae.encoder if isinstance(m, nn.Conv2d)]
    decoder: list[nn.Conv2d | nn.ConvTranspose2d] = [m for m in vae.decoder if isinstance(m, nn.ConvTranspose2d)]
    shapes = []
    with torch.no_grad():
        for first, layers in ((torch.rand(40, 3, 64, 64), encoder), (torch.rand(40, vae.feat, 1, 1), decoder)):
            x = first
            for layer in layers:
                shapes.append(tuple(x.shape))
                x = layer(x.contiguous(memory_format=torch.channels_last))
    out = []
    for index, (layer, shape) in enumerate(zip(encoder + decoder, shapes, strict=True)):
        xin = torch.rand(shape).contiguous(memory_format=torch.channels_last).requires_grad_(index != 0)
        fwd, bwd = [], []
        for i in range(steps + 3):
            a = time.perf_counter()
            y = layer(xin)
            b = time.perf_counter()
            y.backward(torch.ones_like(y))
            c = time.perf_counter()
            layer.zero_grad(set_to_none=True)
            xin.grad = None
            if i >= 3:
                fwd.append((b - a) * 1000)
                bwd.append((c - b) * 1000)
        # weight (out, in, k, k) of a convolution, (in, out, k, k) of a transposed one
        macs = (y if isinstance(layer, nn.Conv2d) else xin).numel() * layer.weight[0].numel()
        f, b = statistics.median(fwd), statistics.median(bwd)
        out.append(
            {
                "layer": f"encoder{index}" if index < len(encoder) else f"decoder{index - len(encoder)}",
                "input": list(shape),
                "forwardMs": round(f, 2),
                "backwardMs": round(b, 2),
                "forwardGflops": round(2 * macs / f / 1e6, 1),
                "backwardGflops": round(2 * macs * (1 if index == 0 else 2) / b / 1e6, 1),
            }
        )
    return out


def cell_seconds(cell: str) -> dict[str, float]:
    from cltoolkit.suites.wmf.driver import run_cell
    from cltoolkit.suites.wmf.models import WmfProtocol
    from cltoolkit.suites.wmf.suite import make_method

    protocol = WmfProtocol.model_validate_json((REPO / "protocols" / "wmf-lite-v1.json").read_text(), strict=True)
    store = Path(tempfile.mkdtemp(prefix="wmf-bench-"))
    out = {}
    total = time.perf_counter()
    for comp in protocol.comparisons:
        start = time.perf_counter()
        run_cell(protocol, cell, make_method(comp.method, comp.hyperparameters), 100, store)
        out[comp.id] = round(time.perf_counter() - start, 1)
    out["total"] = round(time.perf_counter() - total, 1)
    return out


def group_cpu_breakdown(protocol_id: str, steps: int, episodes: int = 2) -> dict[str, object]:
    """Where one full-budget (cell, seed) group's CPU time goes, per family: collection and rendering (measured on
    `episodes` random episodes of each family's min-level task A, per frame, times the group's frames: 2 tasks x
    (train + held-out) episodes x steps actually taken), and the eight training phases (the shared plain task-A
    phase, UG-MTM's own, the task-B reference and five task-B phases: measured milliseconds per update times the
    declared updates). Evaluation is what the measured cell time leaves (not measured here). An estimate from
    measured parts: labelled so."""
    from cltoolkit.suites.wmf.envs import collect, collect_stream, make_env
    from cltoolkit.suites.wmf.models import WmfProtocol

    protocol = WmfProtocol.model_validate_json((REPO / "protocols" / f"{protocol_id}.json").read_text(), strict=True)
    streamed = protocol.data.collectionSeeds == "seed-stream"
    per_update = protocol_step_ms(protocol_id, steps)
    updates = protocol.training.updatesPerTask
    plain = per_update["finetuning"]
    training = {
        "phaseA plain (shared by four methods)": plain * updates / 60000,
        "phaseA ug-mtm": per_update["ug-mtm"] * updates / 60000,
        "reference B (from scratch)": plain * updates / 60000,
        **{f"phaseB {comp}": ms * updates / 60000 for comp, ms in per_update.items()},
    }
    out: dict[str, object] = {"trainingCpuMinutes": {k: round(v, 1) for k, v in training.items()}}
    collection = {}
    for family in protocol.families:
        task = family.levels[0].taskA
        physics = (task.physics.gravity, task.physics.massScale, task.physics.frictionScale)
        env = make_env(family.renderer, task.env, *physics, family.rendering)
        try:
            start = time.perf_counter()
            if streamed:
                (data,) = collect_stream(env, (episodes,), protocol.data.maxEpisodeSteps, 0)
            else:
                data = collect(env, episodes, protocol.data.maxEpisodeSteps, 0)
            seconds = time.perf_counter() - start
        finally:
            env.close()
        frames = int(data.lengths.sum()) + episodes
        per_frame_ms = 1000 * seconds / frames
        task_frames = (protocol.data.trainEpisodes + protocol.data.heldOutEpisodes) * frames / episodes
        # with seed-stream, the cells of a family with one task A collect it once per seed (shared stage)
        tasks_a = len({lv.taskA.model_dump_json() for lv in family.levels})
        share_a = tasks_a / len(family.levels) if streamed else 1.0
        group_frames = task_frames * (1 + share_a)
        minutes = per_frame_ms * group_frames / 60000
        phases_a = training["phaseA plain (shared by four methods)"] + training["phaseA ug-mtm"]
        trained = sum(training.values()) - (1 - share_a) * phases_a  # the task-A phases shared the same way
        collection[family.id] = {
            "msPerFrame": round(per_frame_ms, 2),
            "groupFrames": int(group_frames),
            "cpuMinutes": round(minutes, 1),
            "groupTrainingCpuMinutes": round(trained, 1),
            "nonTrainingShare": round(minutes / (minutes + trained), 3),
        }
    out["collectionAndRendering"] = collection
    out["trainingCpuMinutesTotal"] = round(sum(training.values()), 1)
    out["kind"] = (
        "estimate from measured parts (per-update and per-frame times); evaluation not included; with seed-stream "
        "a family's shared task A is charged to each group by its share of the family's cells"
    )
    return out


def main() -> None:
    import torch

    from cltoolkit.run.malloc import keep_freed_memory

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--cell", default="minigrid-min")
    parser.add_argument("--no-cell", action="store_true")
    parser.add_argument("--group", nargs="?", const="wmf-v3", help="also a protocol's full-budget group CPU breakdown")
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_freed_memory()  # as every worker does
    one_pass = step_ms(args.steps, False)
    result: dict[str, object] = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "wmfV1StepMs": one_pass.pop("step"),
        "wmfV1StepwiseMs": step_ms(args.steps, True)["step"],
        "targetMs": 130,
        "stepPartsMs": one_pass,
        "convLayers": conv_layers(args.steps),
        "updateMsPerMethod": {
            "wmf-v1": protocol_step_ms("wmf-v1", args.steps),
            "wmf-v2": protocol_step_ms("wmf-v2", args.steps),
        },
    }
    if torch.cuda.is_available():
        result["updateMsPerMethodCuda"] = {"wmf-v2": protocol_step_ms("wmf-v2", args.steps, "cuda")}
    result["metTarget"] = result["wmfV1StepMs"] <= 130  # type: ignore[operator]
    if args.group:
        result["groupCpu"] = {"protocol": args.group, **group_cpu_breakdown(args.group, args.steps)}
    if not args.no_cell:
        result["liteCell"] = args.cell
        result["liteCellSeconds"] = cell_seconds(args.cell)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
