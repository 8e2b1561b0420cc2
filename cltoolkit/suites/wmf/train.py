"""Training phases of the wmf suite: one task phase of a world model on windows of random-policy episodes, with the
methods' variations (replay of task A, EWC's penalty, the switch of progressive networks and UG-MTM)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from cltoolkit.errors import NonFiniteValue
from cltoolkit.suites.guards import SampleCounter, check_finite
from cltoolkit.suites.step import Step
from cltoolkit.suites.wmf.world import RSSM

if TYPE_CHECKING:
    from cltoolkit.suites.wmf.envs import Episodes
    from cltoolkit.suites.wmf.models import WmfTraining

__all__ = ["Phase", "StepHooks", "batch_tensors", "state", "train_phase"]


def batch_tensors(data: Episodes, rows: np.ndarray, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows (episode, start) -> obs (B, L, 3, 64, 64) float in [0, 1], actions (B, L-1, A)."""
    e, s = rows[:, 0:1], rows[:, 1:2] + np.arange(length)
    frames = torch.from_numpy(data.frames[e, s])  # (B, L, 64, 64, 3) uint8
    obs = frames.permute(0, 1, 4, 2, 3).float().div_(255.0)
    actions = torch.from_numpy(data.actions[e, s[:, :-1]])
    return obs, actions


@dataclass
class Phase:
    """What one task phase recorded."""

    curve: list[float]
    """Mean reconstruction loss per curve segment (training windows, pixel squared error per frame)."""
    nan_steps: int
    """Updates skipped because the loss was not finite (only under a declared skip policy; otherwise a non-finite
    loss ends the run)."""
    first: float | None = None
    """Reconstruction loss of the first finite update (WorldModelsBenchmark's `initial_reconstruction_loss`)."""
    last: float | None = None
    """Reconstruction loss of the last finite update (WorldModelsBenchmark's `final_reconstruction_loss`)."""
    drawn: list[int] = field(default_factory=list)
    """Windows drawn from each source over the phase (the suite's replay count)."""


@dataclass
class StepHooks:
    """What a method adds to a phase's updates, and the guards around them (see `cltoolkit.suites.step`)."""

    task: str
    """The phase's task, for the names in a failure."""
    extra_loss: Callable[[RSSM, torch.Tensor, torch.Tensor, int], torch.Tensor | None] | None = None
    after_backward: Callable[[Step], None] | None = None
    after_step: Callable[[Step], None] | None = None
    counter: SampleCounter | None = None
    """Counts what reaches the encoder; `on_other(frames, update)` is told of samples of neither the update's
    windows nor the suite's replay."""
    on_other: Callable[[int, int], None] | None = None
    skip_non_finite: int | None = None
    """None: a non-finite loss or gradient ends the run (`NonFiniteValue`); n: the seed code's policy, the update
    is skipped, at most n times in the phase (declared by the protocol, counted in the record)."""


def _grads_finite(params: list[torch.nn.Parameter]) -> bool:
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return True
    return bool(torch.isfinite(torch.stack(torch._foreach_norm(grads))).all())


def _pooled_rows(
    sources: list[tuple[Episodes, int]], windows: list[np.ndarray], rng: np.random.Generator
) -> list[np.ndarray]:
    """Per source, the (episode, start) rows of one pooled batch: each window picks an episode uniformly among all
    sources' episodes (that have a window), then a start uniformly within that episode."""
    owners = [(i, int(e)) for i, win in enumerate(windows) for e in np.unique(win[:, 0])]
    batch = sum(count for _, count in sources)
    chosen: list[list[list[int]]] = [[] for _ in sources]
    for k in rng.integers(len(owners), size=batch):
        src, episode = owners[int(k)]
        starts = windows[src][windows[src][:, 0] == episode]
        chosen[src].append(starts[int(rng.integers(len(starts)))].tolist())
    return [np.asarray(rows, dtype=np.int64).reshape(-1, 2) for rows in chosen]


def train_phase(
    model: RSSM,
    sources: list[tuple[Episodes, int]],
    cfg: WmfTraining,
    seed: int,
    hooks: StepHooks | None = None,
    *,
    uniform_episodes: bool = False,
    episode_first: bool = False,
    restricted: list[np.ndarray | None] | None = None,
) -> Phase:
    """`cfg.updatesPerTask` Adam updates on windows drawn uniformly from each source (`(episodes, windows per
    batch)`; the counts sum to the batch). With `uniform_episodes` the sources are pooled instead: each of the
    batch's windows picks one episode uniformly among all sources' episodes, then a start uniformly within it
    (WorldModelsBenchmark's replay buffer). With `episode_first` each source's own windows are drawn that way (an
    episode, then a start; WorldModelsBenchmark's buffer for one task). Adam is built here over the trainable
    parameters. Every random draw (windows, posterior noise, dropout) comes from generators seeded by `seed`.
    `hooks.extra_loss(model, obs, actions, step)` is a method's term added to every update's loss (None adds
    nothing); `hooks.after_backward` / `after_step` are called around each step (the order of `cltoolkit.suites.step`).
    A non-finite loss term or gradient ends the run by name unless `hooks.skip_non_finite` allows skipping it."""
    hooks = hooks or StepHooks("?")
    counter = hooks.counter
    torch.manual_seed(seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    windows = [  # a source restricted to some windows (a suite memory's share) draws from those only
        r if r is not None else data.windows(cfg.sequenceLength)
        for (data, _), r in zip(sources, restricted or [None] * len(sources), strict=True)
    ]
    params = [p for p in model.parameters() if p.requires_grad]
    device = next(model.parameters()).device
    opt = torch.optim.Adam(params, lr=cfg.lr)
    model.train()
    points = min(cfg.curvePoints, cfg.updatesPerTask)
    edges = np.linspace(0, cfg.updatesPerTask, points + 1).astype(int)
    curve: list[float] = []
    seg: list[float] = []
    nan_steps = 0
    first: float | None = None
    last: float | None = None
    drawn = [0] * len(sources)
    for step in range(cfg.updatesPerTask):
        obs_parts, act_parts = [], []
        picks = _pooled_rows(sources, windows, rng) if uniform_episodes else None
        for i, ((data, count), win) in enumerate(zip(sources, windows, strict=True)):
            if picks is not None:
                rows = picks[i]
            elif episode_first:
                rows = _pooled_rows([(data, count)], [win], rng)[0]
            else:
                rows = win[rng.integers(len(win), size=count)]
            drawn[i] += len(rows)
            if len(rows) == 0:
                continue
            o, a = batch_tensors(data, rows, cfg.sequenceLength)
            obs_parts.append(o)
            act_parts.append(a)
        obs, actions = torch.cat(obs_parts).to(device), torch.cat(act_parts).to(device)
        eps = torch.randn(obs.shape[0], obs.shape[1], model.latent).to(device)  # drawn on the CPU on every device
        if counter is not None:
            counter.begin_update(obs)
            with counter.suite_call():
                loss, parts = model.loss(obs, actions, eps)
        else:
            loss, parts = model.loss(obs, actions, eps)
        losses = {"suite": loss.detach()}
        problem: tuple[str, str] | None = None
        if not bool(torch.isfinite(loss)):
            problem = ("the suite's world-model loss", "none")
        if hooks.extra_loss is not None:
            term = hooks.extra_loss(model, obs, actions, step)
            if term is not None:
                losses["extra"] = term.detach()
                if problem is None and not bool(torch.isfinite(term.detach()).all()):
                    problem = ("the method's extra_loss term", "extra_loss")
                loss = loss + term
        taken = step - nan_steps
        if problem is None:
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if not _grads_finite(params):
                problem = ("a gradient", "extra_loss" if "extra" in losses else "none")
        if problem is None and hooks.after_backward is not None:
            hooks.after_backward(Step(hooks.task, taken, opt, losses, loss.detach()))
            if not _grads_finite(params):
                problem = ("a gradient", "after_backward")
        if counter is not None:
            other = counter.end_update()
            if other and hooks.on_other is not None:
                hooks.on_other(other, taken)
        if problem is not None:
            if hooks.skip_non_finite is None:
                raise NonFiniteValue(hooks.task, taken, *problem)
            nan_steps += 1
            if nan_steps > hooks.skip_non_finite:
                raise NonFiniteValue(
                    hooks.task, taken, f"{problem[0]} (more than the {hooks.skip_non_finite} skipped steps allowed)",
                    problem[1],
                )  # fmt: skip
        else:
            opt.step()
            if hooks.after_step is not None:
                hooks.after_step(Step(hooks.task, taken, opt, losses, loss.detach()))
            seg.append(float(parts["reconstruction"]))
            first = seg[-1] if first is None else first
            last = seg[-1]
        if step + 1 in edges[1:]:
            curve.append(float(np.mean(seg)) if seg else float("nan"))
            seg = []
    model.eval()
    for name, value in model.named_parameters():
        check_finite(value, hooks.task, cfg.updatesPerTask - nan_steps, f"parameter {name}", "end of phase")
    return Phase(curve, nan_steps, first, last, drawn)


def state(model: RSSM) -> dict[str, Any]:
    """A detached CPU copy of the model's state (parameters and buffers), whatever device the model is on."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
