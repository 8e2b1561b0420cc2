"""The crl driver: one run of a method over the protocol's task stream, Continual World's loop (`continualworld/sac/
sac.py`, `SAC.run`) on Gymnasium environments.

Per task, in order: a fresh training environment (its first reset seeded from (seed, task)); `startSteps` uniform
random actions, then the actor's samples from the task's head; every `updateEvery` steps after `updateAfter`, as many
updates on batches drawn uniformly from the replay buffer (FIFO, cleared at a task change unless the method keeps
it); the time limit is not a terminal state for bootstrapping (CW: `d = False` at the episode-length cut). Every
`evaluation.every` steps and at each task's last step, `episodes` episodes of every task on evaluation environments
of their own (seeds from seed + `seedOffset`, never a training episode), with the task's head. SAC's actions lie in
[-1, 1] and are mapped linearly onto each environment's action box.

Guards, as in nav4 and wmf (`cltoolkit.suites.guards`): a non-finite loss term or gradient ends the run by name;
`after_backward` may not change parameter values; every sample that reaches the actor or the critics inside an update
is counted by origin (the update's batch; transitions of earlier tasks in it are replay; anything else is charged as
`budget.unaccountedSamples` declares).

With `learner.algorithm: "ppo"` (discrete actions; `cltoolkit.suites.crl.ppo`) the loop is PPO's: the actor's
samples from the first step, and after every `rolloutSteps` steps (and at each task's last step) GAE over the rollout
and `epochs` x `minibatches` updates on it; the episodic memory of a finished task is a uniform sample of its
rollouts' rows (their advantages and returns as computed then). Methods that keep an off-policy buffer are refused.

A masking method (PackNet): after a task's last step and before its last evaluation (every task but the last), the
method's `ownership` says which task owns each weight it manages; the suite sets the weights released to later tasks
to 0, runs the method's `retrain_updates()` on the task's buffer with a fresh optimiser before and after (counted as
the task's updates; CW's `PackNet_SAC.on_task_end`), and evaluates every task k with the weights of tasks after k at 0
(`cltoolkit.suites.masks`).

A multi-task reference (`regime` "multi-task") runs in `cltoolkit.suites.crl.multitask` instead (every task at once;
the suite's `execute` picks the loop).

Checkpoints (`cltoolkit.suites.checkpoint`), given the run's folder: after every task but the last, the driver saves
what the rest of the run depends on (SAC's networks, targets, entropy coefficients and optimiser; the replay buffer;
the episodic memory; torch's and the driver's generators; the ledger; the evaluations so far; the method's
`state_dict`); an interrupted run resumes after its last finished task and gives the same record.

Imports torch and gymnasium: only a worker loads this module.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cltoolkit.errors import BudgetViolation, CheckFailed, NonFiniteValue
from cltoolkit.suites import checkpoint
from cltoolkit.suites.crl.api import CrlMethod, CrlTask
from cltoolkit.suites.crl.memory import Buffer, CrlLedger, Episodic, TaskSample
from cltoolkit.suites.crl.metrics import cw_metrics
from cltoolkit.suites.crl.models import CrlLearner, CrlProtocol, StreamTask
from cltoolkit.suites.crl.ppo import Ppo, PpoRollout
from cltoolkit.suites.crl.sac import Sac, SacConfig
from cltoolkit.suites.guards import SampleCounter, check_finite, first_non_finite_grad, overrides, unchanged
from cltoolkit.suites.masks import Named, Ownership
from cltoolkit.suites.step import Step

__all__ = ["Buffer", "CrlLedger", "budget", "run_stream", "sac_config"]


def _make(task: StreamTask, max_steps: int) -> Any:
    import importlib

    import gymnasium as gym

    try:
        kwargs: dict[str, Any] = dict(task.kwargs)
        env = gym.make(task.env, max_episode_steps=max_steps, **kwargs)
    except Exception as exc:  # an unknown id or bad kwargs: the task's own words
        raise CheckFailed(f"stream task {task.id!r}: gymnasium.make({task.env!r}) failed: {exc}") from exc
    for i, name in enumerate(task.wrappers):
        module, _, attr = name.partition(":")
        try:
            env = getattr(importlib.import_module(module), attr)(env)
        except Exception as exc:  # not importable, not a wrapper, or refusing this environment
            env.close()
            raise CheckFailed(f"stream task {task.id!r}: wrappers/{i} {name!r} failed: {exc}") from exc
    return env


def _spaces(envs: list[Any], tasks: list[StreamTask], algorithm: str = "sac") -> tuple[int, int]:
    """The common observation width and action width (or number of discrete actions); every task must have the same
    (one network serves the stream)."""
    from gymnasium import spaces

    discrete = algorithm != "sac"
    shapes = set()
    for env, task in zip(envs, tasks, strict=True):
        act, obs = env.action_space, env.observation_space
        if not isinstance(obs, spaces.Box):
            raise CheckFailed(f"stream task {task.id!r}: the crl learners need Box observations, {task.env} has {obs}")
        if discrete and isinstance(act, spaces.Discrete) and act.start == 0 and act.n >= 2:
            shapes.add((int(np.prod(obs.shape)), int(act.n)))
        elif not discrete and isinstance(act, spaces.Box):
            shapes.add((int(np.prod(obs.shape)), int(np.prod(act.shape))))
        else:
            needs = "Discrete actions 0..n-1 (n >= 2)" if discrete else "Box actions"
            hint = ""
            if isinstance(act, spaces.Discrete) and not discrete:
                hint = " (discrete actions: learner.algorithm 'sac-discrete' or 'ppo')"
            elif isinstance(act, spaces.Box) and discrete:
                hint = " (continuous actions: learner.algorithm 'sac')"
            raise CheckFailed(
                f"stream task {task.id!r}: learner.algorithm {algorithm!r} needs {needs}, {task.env} has {act}{hint}"
            )
    if len(shapes) != 1:
        raise CheckFailed(f"the stream's tasks differ in (observation, action) width: {sorted(shapes)}")
    obs_dim, act_dim = shapes.pop()
    return obs_dim, act_dim


def _to_env(action: np.ndarray, space: Any) -> Any:
    """SAC's action in [-1, 1] onto the environment's box; a discrete action's index as an int."""
    if not hasattr(space, "low"):
        return int(action[0])
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    mapped: np.ndarray = (low + (action.astype(np.float64) + 1.0) * 0.5 * (high - low)).astype(space.dtype)
    return mapped


def _success(task: StreamTask, infos: list[dict[str, Any]], total: float) -> bool:
    if task.success.info is not None:
        return any(bool(i.get(task.success.info, False)) for i in infos)
    assert task.success.returnAtLeast is not None
    return total >= task.success.returnAtLeast


Learner = Sac | Ppo


def _evaluate(
    sac: Learner,
    envs: list[Any],
    protocol: CrlProtocol,
    seed: int,
    round_: int,
    ledger: CrlLedger,
    owners: Ownership | None = None,
    tagged: Named | None = None,
) -> list[float]:
    """Every task's success rate over the evaluation's episodes (task k with the weights of later tasks at 0, where a
    masking method declared owners)."""
    rates = []
    for k, env in enumerate(envs):
        with owners.view(tagged, k) if owners is not None and tagged is not None else nullcontext():
            rates.append(_success_rate(sac, env, k, protocol, seed, round_, ledger))
    return rates


def _success_rate(
    sac: Learner, env: Any, k: int, protocol: CrlProtocol, seed: int, round_: int, ledger: CrlLedger
) -> float:
    """Task `k`'s success rate over the evaluation's episodes."""
    ev, task = protocol.evaluation, protocol.stream.tasks[k]
    wins = 0
    for e in range(ev.episodes):
        episode_seed = int(np.random.SeedSequence([seed + ev.seedOffset, round_, k, e]).generate_state(1)[0] >> 1)
        obs, info = env.reset(seed=episode_seed)
        infos, total, done = [info], 0.0, False
        while not done:
            head = k if protocol.learner.heads == "per-task" else 0
            action = sac.act(torch.as_tensor(obs, dtype=torch.float32).reshape(1, -1), head, ev.deterministic)
            obs, reward, terminated, truncated, info = env.step(_to_env(action[0].numpy(), env.action_space))
            infos.append(info)
            total += float(reward)
            ledger.evaluationSteps += 1
            done = terminated or truncated
        wins += _success(task, infos, total)
    return wins / ev.episodes


def _charge_other(ledger: CrlLedger, other: int, policy: str, task: str, update: int) -> None:
    ledger.otherSamples += other
    if policy == "replay":
        ledger.replaySamples += other
        ledger.samplesProcessed += other
        return
    raise BudgetViolation(
        f"budget.unaccountedSamples: in task {task}, update {update}, {other} sample(s) reached the actor or the "
        "critics with gradients that were neither the update's batch nor the suite's buffer (a private buffer?); "
        "the protocol declares such samples a violation (keep the suite's buffer with `keep_buffer`, or declare "
        '`"unaccountedSamples": "replay"` in a new version)'
    )


class _OffPolicy:
    """SAC's side of the loop: `startSteps` random actions, then the actor's; the replay buffer; every
    `updateEvery` steps after `updateAfter`, as many updates on batches drawn uniformly from it."""

    def __init__(self, learner: CrlLearner, buffer: Buffer, batch_size: int, act_dim: int, rng: np.random.Generator):
        self.learner, self.buffer, self.batch_size, self.act_dim, self.rng = learner, buffer, batch_size, act_dim, rng

    def begin_task(self, clear: bool) -> None:
        if clear:
            self.buffer.clear()

    def act(self, sac: Learner, obs: Any, t: int, head: int) -> np.ndarray:
        if t < self.learner.startSteps and self.learner.algorithm == "sac-discrete":
            return np.array([self.rng.integers(self.act_dim)], np.float32)
        if t < self.learner.startSteps:
            return self.rng.uniform(-1.0, 1.0, size=self.act_dim).astype(np.float32)
        action: np.ndarray = sac.act(torch.as_tensor(obs, dtype=torch.float32).reshape(1, -1), head)[0].numpy()
        return action

    def observe(
        self, sac: Learner, obs: Any, action: np.ndarray, reward: float, next_obs: Any, ends: tuple[bool, bool],
        task: int, last: bool,
    ) -> None:  # fmt: skip
        self.buffer.add(np.ravel(obs), action, reward, np.ravel(next_obs), ends[0], task)

    def batches(self, t: int, last: bool) -> Iterator[dict[str, torch.Tensor]]:
        if t >= self.learner.updateAfter and (t + 1) % self.learner.updateEvery == 0:
            for _ in range(self.learner.updateEvery):
                yield self.buffer.sample(self.batch_size)

    def retrain(self, n: int) -> Iterator[dict[str, torch.Tensor]]:
        for _ in range(n):
            yield self.buffer.sample(self.batch_size)

    def keep(self, episodic: Episodic, task: int) -> None:
        episodic.keep(self.buffer, task)


class _OnPolicy:
    """PPO's side of the loop: the actor's samples from the first step; after every `rolloutSteps` steps (and at a
    task's last step) GAE over the rollout and `epochs` x `minibatches` updates on it; a uniform sample of the task's
    rollouts for the episodic memory."""

    def __init__(self, learner: CrlLearner, obs_dim: int, per_task: int, rng: np.random.Generator) -> None:
        self.learner, self.settings = learner, learner.ppo_settings
        self.rollout = PpoRollout(self.settings.rolloutSteps, obs_dim, rng)
        self.sample = TaskSample(per_task, rng) if per_task else None
        self.pending = (0.0, 0.0)

    def begin_task(self, clear: bool) -> None:
        self.rollout.clear()
        if self.sample is not None:
            self.sample.clear()

    def act(self, ppo: Learner, obs: Any, t: int, head: int) -> np.ndarray:
        assert isinstance(ppo, Ppo)
        action, logp, value = ppo.sample(torch.as_tensor(obs, dtype=torch.float32).reshape(1, -1), head)
        self.pending = (logp, value)
        out: np.ndarray = action.numpy()
        return out

    def observe(
        self, ppo: Learner, obs: Any, action: np.ndarray, reward: float, next_obs: Any, ends: tuple[bool, bool],
        task: int, last: bool,
    ) -> None:  # fmt: skip
        assert isinstance(ppo, Ppo)
        self.rollout.add(np.ravel(obs), action, *self.pending, reward, task)
        terminated, truncated = ends
        bootstrap = None
        if not terminated and (truncated or self.rollout.full or last):  # the value after the rollout's last step
            bootstrap = ppo.value(torch.as_tensor(next_obs, dtype=torch.float32).reshape(1, -1))
        self.rollout.end_step(terminated, truncated, bootstrap)

    def batches(self, t: int, last: bool) -> Iterator[dict[str, torch.Tensor]]:
        if not (self.rollout.full or last):
            return
        self.rollout.finish(self.learner.gamma, self.settings.gaeLambda)
        if self.sample is not None:
            self.sample.offer(self.rollout.arrays())
        yield from self.rollout.minibatches(self.settings.epochs, self.settings.minibatches)
        if not last:  # a task's last rollout stays for a masking method's retraining
            self.rollout.clear()

    def retrain(self, n: int) -> Iterator[dict[str, torch.Tensor]]:
        """`n` updates on the task's last rollout, in passes of `minibatches`."""
        parts = min(self.settings.minibatches, self.rollout.size)
        return itertools.islice(self.rollout.minibatches(math.ceil(n / parts), parts), n)

    def keep(self, episodic: Episodic, task: int) -> None:
        assert self.sample is not None
        episodic.keep_rows(self.sample.rows())


def sac_config(learner: CrlLearner, method: CrlMethod[Any], obs_dim: int, act_dim: int, tasks: int) -> SacConfig:
    """The learner's sizes and hyperparameters for a stream of `tasks` tasks; a method's own `clipNorm`, `lr` and
    PopArt settings where it has them."""
    heads = tasks if learner.heads == "per-task" else 1
    params = method.params
    popart = getattr(params, "popart", False)
    return SacConfig(
        obs_dim,
        act_dim,
        heads=heads,
        critic_heads=tasks if learner.criticHeads == "per-task" else 1,
        hidden=tuple(learner.hidden),
        lr=getattr(params, "lr", None) or learner.lr,
        gamma=learner.gamma,
        polyak=learner.polyak,
        target_output_std=learner.targetOutputStd,
        alphas=heads,
        discrete=learner.algorithm != "sac",
        target_entropy_scale=learner.targetEntropyScale,
        clipnorm=getattr(params, "clipNorm", None) or learner.clipNorm,
        popart_beta=getattr(params, "popartBeta", None) if popart else None,
    )


def run_stream(
    protocol: CrlProtocol,
    method: CrlMethod[Any],
    seed: int,
    unaccounted: str = "violation",
    on_evaluation: Callable[[int, list[float]], None] | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Train `method` over the stream from `seed`; returns the metrics and the budget ledger. With `workdir` (the
    run's folder), a checkpoint after every task but the last, and a resume from the last one found there."""
    if method.regime == "multi-task":
        raise CheckFailed(f"{method.name or type(method).__name__} learns every task at once: run it with "
                          "cltoolkit.suites.crl.multitask.run_multitask")  # fmt: skip
    stream, learner, ev = protocol.stream, protocol.learner, protocol.evaluation
    tasks = stream.tasks
    torch.manual_seed(seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    train_envs = [_make(t, stream.maxEpisodeSteps) for t in tasks]
    eval_envs = [_make(t, stream.maxEpisodeSteps) for t in tasks]
    try:
        obs_dim, act_dim = _spaces(train_envs, tasks, learner.algorithm)
        config = sac_config(learner, method, obs_dim, act_dim, len(tasks))
        heads = config.heads
        on_policy = learner.algorithm == "ppo"
        if on_policy and method.keep_buffer:
            raise CheckFailed(f"{method.name or type(method).__name__} keeps an off-policy replay buffer across tasks; "
                              "learner.algorithm 'ppo' learns from its own rollouts")  # fmt: skip

        def new_learner() -> Learner:
            return Ppo(config, learner.ppo_settings) if on_policy else Sac(config)

        sac = new_learner()
        collector: _OffPolicy | _OnPolicy
        if on_policy:
            collector = _OnPolicy(learner, obs_dim, method.episodic_per_task(), rng)
        else:
            capacity = min(learner.bufferSize, stream.stepsPerTask * (len(tasks) if method.keep_buffer else 1))
            buffer = Buffer(capacity, obs_dim, config.action_width, method.selection, rng)
            batch_size = getattr(method.params, "batchSize", None) or learner.batchSize
            collector = _OffPolicy(learner, buffer, batch_size, act_dim, rng)
        ledger = CrlLedger()
        counter = SampleCounter(sac.actor, also=[sac.critic], on_bookkeeping=lambda n: _book(ledger, n))

        def named() -> list[tuple[str, torch.nn.Parameter]]:
            return [*sac.actor.named_parameters(), *sac.critic.named_parameters()]

        def update(task: CrlTask, index: int, batch: dict[str, torch.Tensor]) -> None:  # `sac`, `counter` as now
            _update(
                sac,
                method,
                batch,
                task,
                index,
                counter,
                ledger,
                unaccounted,
                after_backward,
                after_step,
                named,
            )

        def tagged() -> list[tuple[str, torch.nn.Parameter]]:  # the names `ownership` uses
            return [
                *((f"actor.{n}", p) for n, p in sac.actor.named_parameters()),
                *((f"critic.{n}", p) for n, p in sac.critic.named_parameters()),
            ]

        after_backward = overrides(method, CrlMethod, "after_backward")
        after_step = overrides(method, CrlMethod, "after_step")
        success: list[list[float]] = []
        active: list[int] = []
        episodic = Episodic(method.episodic_per_task(), ledger, rng) if method.episodic_per_task() else None
        masking = method.regime != "single-task" and overrides(method, CrlMethod, "ownership")
        owners = Ownership(len(tasks)) if masking else None
        retrain = method.retrain_updates() if method.regime != "single-task" else 0
        if episodic is not None:
            episodic.counter = counter
        identity = checkpoint.identity(protocol, method.name, dict(method.hyperparameters), seed, unaccounted)
        keeps = not on_policy and method.regime != "single-task"
        keeps = keeps and (method.keep_buffer or not learner.resetBufferOnTaskChange)
        first = 0
        saved = checkpoint.load(workdir, identity) if workdir is not None else None
        if saved is not None:  # an interrupted run: resume after its last finished task
            first = _Resumable(sac, collector, episodic, rng, ledger, method, keeps, owners).restore(saved)
            success, active = saved["success"], saved["active"]
            print(f"resumed from the checkpoint after task {first} (of {len(tasks)})", flush=True)  # the run's log
        elif workdir is not None and (why := checkpoint.not_resumed(workdir)) is not None:
            print(why, flush=True)
        for index, spec in enumerate(tasks):
            if index < first:
                continue
            memory = episodic if episodic is not None and len(episodic) else None
            task = CrlTask(spec.id, index, stream.stepsPerTask, memory, total=len(tasks))
            head = index if heads > 1 else 0
            if index and method.regime == "single-task":  # a reference: every task learnt from scratch
                counter.close()
                torch.manual_seed(int(np.random.SeedSequence([seed, index, 3]).generate_state(1)[0] >> 1))
                sac = new_learner()
                counter = SampleCounter(sac.actor, also=[sac.critic], on_bookkeeping=lambda n: _book(ledger, n))
                collector.begin_task(clear=True)
            elif index and learner.resetOptimizerOnTaskChange:
                sac.optimizer = sac.new_optimizer()
            if index and not method.keep_buffer and learner.resetBufferOnTaskChange:
                collector.begin_task(clear=True)
            with counter.armed():
                unchanged(named, "begin_task", partial(method.begin_task, sac, task), "the networks' weights")
            env = train_envs[index]
            obs, _ = env.reset(seed=int(np.random.SeedSequence([seed, index]).generate_state(1)[0] >> 1))
            env.action_space.seed(int(rng.integers(2**31)))  # unused by the suite's own sampling; kept: it moves rng
            updates = 0
            for t in range(stream.stepsPerTask):
                last = t + 1 == stream.stepsPerTask
                action = collector.act(sac, obs, t, head)
                next_obs, reward, terminated, truncated, _ = env.step(_to_env(action, env.action_space))
                ends = (bool(terminated), bool(truncated))
                collector.observe(sac, obs, action, float(reward), next_obs, ends, index, last)
                ledger.environmentSteps += 1
                obs = next_obs
                if terminated or truncated:
                    obs, _ = env.reset()
                for batch in collector.batches(t, last):
                    update(task, updates, batch)
                    updates += 1
                if last and index + 1 < len(tasks) and (masking or retrain):
                    if owners is not None:
                        declared = unchanged(
                            named, "ownership", partial(method.ownership, sac, task), "the networks' weights"
                        )
                        if declared is not None:
                            ledger.releasedWeights += owners.assign(tagged, declared, index)
                    sac.optimizer = sac.new_optimizer()  # Adam's moments would move the weights just released
                    for batch in collector.retrain(retrain):
                        update(task, updates, batch)
                        updates += 1
                    ledger.retrainUpdates += retrain
                    sac.optimizer = sac.new_optimizer()
                if (t + 1) % ev.every == 0 or last:
                    rates = _evaluate(sac, eval_envs, protocol, seed, len(success), ledger, owners, tagged)
                    success.append(rates)
                    active.append(index)
                    if on_evaluation is not None:
                        on_evaluation(ledger.environmentSteps, rates)
            with counter.armed():
                unchanged(named, "end_task", partial(method.end_task, sac, task), "the networks' weights")
            if episodic is not None:
                collector.keep(episodic, index)
            for name, value in named():
                if not bool(torch.isfinite(value.detach()).all()):
                    raise NonFiniteValue(spec.id, updates, f"parameter {name}", "end of task")
            ledger.perTask[spec.id] = {"environmentSteps": stream.stepsPerTask, "gradientUpdates": updates}
            if workdir is not None and index + 1 < len(tasks):
                state = _Resumable(sac, collector, episodic, rng, ledger, method, keeps, owners).state(index + 1)
                checkpoint.save(workdir, identity, {**state, "success": success, "active": active})
        counter.close()
        if workdir is not None:
            checkpoint.clear(workdir)
    finally:
        for env in (*train_envs, *eval_envs):
            env.close()
    m = cw_metrics(success, active, ev.last)
    ids = [t.id for t in tasks]
    return {
        "metrics": {
            "crl.performance-v1": m.performance,
            "crl.forgetting-v1": m.forgetting,
            "finalSuccess": dict(zip(ids, m.final, strict=True)),
            "endOfOwnTraining": dict(zip(ids, m.end_of_own, strict=True)),
            "ownAuc": dict(zip(ids, m.auc, strict=True)),
            "evaluations": {"tasks": ids, "active": [ids[i] for i in active], "success": success},
            "updatesPerTask": {t: v["gradientUpdates"] for t, v in ledger.perTask.items()},
            "episodicMemory": len(episodic) if episodic is not None else 0,
            "methodDiagnostics": method.diagnostics(),
            **(
                {"masking": {"retrainUpdates": ledger.retrainUpdates, "releasedWeights": ledger.releasedWeights}}
                if masking or retrain
                else {}
            ),
        },
        "budget": budget(ledger, sac, unaccounted),
    }


def budget(ledger: CrlLedger, learner: Learner, unaccounted: str) -> dict[str, Any]:
    """A run's budget block: what it spent, by origin (samples charged to `budget.unaccountedSamples` "replay"
    are counted as replay but not as memory)."""
    return {
        "environmentSteps": ledger.environmentSteps,
        "evaluationSteps": ledger.evaluationSteps,
        "gradientUpdates": ledger.gradientUpdates,
        "replaySamples": ledger.replaySamples,
        "samplesProcessed": ledger.samplesProcessed,
        "parameters": sum(p.numel() for p in learner.parameters()),
        "samples": {
            "task": ledger.samplesProcessed - ledger.replaySamples,
            "memory": ledger.replaySamples - (ledger.otherSamples if unaccounted == "replay" else 0),
            "other": ledger.otherSamples,
            "bookkeeping": ledger.bookkeepingPasses,
            "otherPolicy": unaccounted,
        },
    }


@dataclass
class _Resumable:
    """What the rest of a run depends on at a task boundary (the evaluations so far travel beside it)."""

    sac: Learner
    collector: _OffPolicy | _OnPolicy
    episodic: Episodic | None
    rng: np.random.Generator
    ledger: CrlLedger
    method: CrlMethod[Any]
    keeps_buffer: bool
    """The next task starts with this buffer (kept across tasks): saved; otherwise it is cleared there, and a
    checkpoint of CW's 1,000,000-transition buffer would be 340 MB of nothing."""
    owners: Ownership | None = None

    def state(self, next_task: int) -> dict[str, Any]:
        collector = self.collector
        buffer = collector.buffer.state_dict() if isinstance(collector, _OffPolicy) and self.keeps_buffer else None
        return {
            "next": next_task,
            **self.sac.state_dict(),
            "torch": torch.get_rng_state(),
            "rng": self.rng.bit_generator.state,
            "buffer": buffer,
            "episodic": self.episodic.state_dict() if self.episodic is not None else None,
            "ledger": dict(vars(self.ledger)),
            "method": self.method.state_dict(),
            **({"ownership": self.owners.state_dict()} if self.owners is not None else {}),
        }

    def restore(self, saved: dict[str, Any]) -> int:
        """Put a checkpoint's state back; returns the index of the task to run next."""
        self.sac.load_state_dict(saved)
        torch.set_rng_state(saved["torch"])
        self.rng.bit_generator.state = saved["rng"]
        if saved["buffer"] is not None and isinstance(self.collector, _OffPolicy):
            self.collector.buffer.load_state_dict(saved["buffer"])
        if self.episodic is not None and saved["episodic"] is not None:
            self.episodic.load_state_dict(saved["episodic"])
        if self.owners is not None and saved.get("ownership") is not None:
            self.owners.load_state_dict(saved["ownership"])
        for key, value in saved["ledger"].items():
            setattr(self.ledger, key, value)
        self.method.load_state_dict(saved["method"])
        return int(saved["next"])


def _book(ledger: CrlLedger, n: int) -> None:
    ledger.bookkeepingPasses += n


def _update(
    sac: Learner,
    method: CrlMethod[Any],
    batch: dict[str, torch.Tensor],
    task: CrlTask,
    update: int,
    counter: SampleCounter,
    ledger: CrlLedger,
    unaccounted: str,
    after_backward: bool,
    after_step: bool,
    named: Callable[[], list[tuple[str, torch.nn.Parameter]]],
) -> None:
    rows = batch.pop("task")
    batch["head"] = rows if sac.config.heads > 1 else torch.zeros_like(rows)
    with counter.armed():
        counter.begin_update(*(batch[k] for k in ("obs", "next_obs") if k in batch))
        extra = method.extra_loss(sac, batch, task)
        with counter.suite_call():
            losses = sac.losses(batch, extra)
        for term, name in sac.TERMS:
            check_finite(losses[term], task.id, update, name, "none")
        last = "none"
        if extra is not None:
            check_finite(extra, task.id, update, "the method's extra_loss term", "extra_loss")
            last = "extra_loss"
        sac.optimizer.zero_grad(set_to_none=True)
        losses["total"].backward()
        step = Step(
            task.id,
            update,
            sac.optimizer,
            {k: v.detach() for k, v in losses.items() if k != "total"},
            losses["total"].detach(),
        )
        if after_backward:
            unchanged(named, "after_backward", partial(method.after_backward, sac, step), "the networks' weights")
            last = "after_backward"
        other = counter.end_update()
    if other:
        _charge_other(ledger, other, unaccounted, task.id, update)
    bad = first_non_finite_grad([*named(), *sac.others()])
    if bad is not None:
        raise NonFiniteValue(task.id, update, f"the gradient of {bad}", last)
    if isinstance(sac, Sac):
        sac.update_statistics()  # PopArt's, where the learner has it
    sac.clip()
    sac.optimizer.step()
    sac.update_targets()
    replayed = int((rows != task.index).sum()) if task.index >= 0 else 0  # a multi-task phase replays nothing
    ledger.gradientUpdates += 1
    ledger.samplesProcessed += len(rows)
    ledger.replaySamples += replayed
    if after_step:
        with counter.armed():
            unchanged(named, "after_step", partial(method.after_step, sac, step), "the networks' weights")
