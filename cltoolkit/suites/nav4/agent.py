"""The nav4 suite's learner: PPO on the method's network (by default a small CNN on the egocentric full-grid
observation), batched over environments, calling the method's hooks (`api.py`); the reservoir memory a method can
ask for. Imports torch: only the worker process of a nav4 run loads this module.

Ledger conventions (the budget clauses compare them): `environmentSteps` counts training interactions only;
evaluation episodes go to `evaluationSteps`. Every optimizer step is counted once: a step whose minibatch mixes
new and replayed samples counts its new share as a gradient update and its replayed share as a replay update, so
`gradientUpdates + replayUpdates` equals the optimizer steps for every method; `replaySamples` counts replayed
samples drawn.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from minigrid.core.world_object import Door
from torch import nn

from cltoolkit.errors import BudgetViolation, NonFiniteValue
from cltoolkit.suites.guards import SampleCounter, check_finite, overrides, unchanged
from cltoolkit.suites.masks import Ownership
from cltoolkit.suites.nav4.api import Nav4Method, Nav4Minibatch, Nav4TaskEnd, _suite_rollout
from cltoolkit.suites.nav4.env import ACTIONS, CHANNELS, Nav4Env
from cltoolkit.suites.nav4.memory import SLOTS, Reservoir
from cltoolkit.suites.nav4.net import Net
from cltoolkit.suites.step import Step

if TYPE_CHECKING:
    from cltoolkit.suites.nav4.methods import AgentParams

__all__ = ["AgentLedger", "Learner", "Limits", "Net", "Reservoir", "VecTasks", "evaluate", "state_checksum"]

T = TypeVar("T")

TOGGLE = ACTIONS.index(5)


@dataclass
class AgentLedger:
    environmentSteps: int = 0
    evaluationSteps: int = 0
    gradientUpdates: float = 0.0
    replayUpdates: float = 0.0
    replaySamples: int = 0
    samplesProcessed: int = 0
    otherSamples: int = 0
    """Samples that reached the network with gradients inside an update and were neither the update's data nor drawn
    from the suite's memory (a method's private buffer)."""
    bookkeepingSamples: int = 0
    """Samples a method passed through the network without gradients, or outside every update (its own
    bookkeeping: importances, distillation targets)."""
    retrainUpdates: int = 0
    """Of `gradientUpdates`, those a method asked for after a phase (`retrain_updates`)."""
    releasedWeights: int = 0
    """Weights a masking method released to later phases (set to 0 by the suite)."""

    def samples(self, policy: str) -> dict[str, int | str]:
        """The record's `budget.samples`: what reached the network, by origin, counted by the suite."""
        return {
            "task": self.samplesProcessed - self.replaySamples,
            "memory": self.replaySamples - (self.otherSamples if policy == "replay" else 0),
            "other": self.otherSamples,
            "bookkeeping": self.bookkeepingSamples,
            "otherPolicy": policy,
        }

    def as_dict(self) -> dict[str, int]:
        return {
            "environmentSteps": self.environmentSteps,
            "evaluationSteps": self.evaluationSteps,
            "gradientUpdates": round(self.gradientUpdates),
            "replayUpdates": round(self.replayUpdates),
            "replaySamples": self.replaySamples,
            "samplesProcessed": self.samplesProcessed,
        }


class VecTasks:
    """`n` environments stepped together; each episode starts on a fresh layout drawn from `layout_seeds`.
    Tasks are assigned round-robin from `tasks` (one task for sequential phases, all four for joint training)."""

    def __init__(
        self,
        tasks: Sequence[str],
        n: int,
        layout_seeds: Sequence[int],
        rng: np.random.Generator,
        size: int,
        max_steps: int,
        min_path: int,
        bonus: tuple[float, float] = (0.0, 0.0),
    ) -> None:
        self.envs = [
            Nav4Env(tasks[i % len(tasks)], size=size, max_steps=max_steps, min_path=min_path) for i in range(n)
        ]
        self.seeds = np.asarray(layout_seeds)
        self.rng = rng
        self.bonus = bonus
        self.bonused = np.zeros((n, 2), dtype=bool)
        self.obs = np.stack([e.reset(seed=self._seed())[0] for e in self.envs])

    def _seed(self) -> int:
        return int(self.seeds[self.rng.integers(len(self.seeds))])

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bool]]:
        """Returns observations, training rewards (task reward + subgoal bonus), done flags and, per finished
        episode, its success on the task's own reward."""
        rewards = np.zeros(len(self.envs), dtype=np.float32)
        dones = np.zeros(len(self.envs), dtype=bool)
        successes: list[bool] = []
        for i, (env, a) in enumerate(zip(self.envs, actions, strict=True)):
            had_key = env.carrying is not None
            obs, r, term, trunc, info = env.step(int(a))
            bonus = 0.0
            if not had_key and env.carrying is not None and not self.bonused[i, 0]:
                self.bonused[i, 0] = True
                bonus += self.bonus[0]
            if int(a) == TOGGLE and not self.bonused[i, 1]:
                front = env.grid.get(*env.front_pos)
                if isinstance(front, Door) and front.is_open:
                    self.bonused[i, 1] = True
                    bonus += self.bonus[1]
            rewards[i] = r + bonus
            if term or trunc:
                dones[i] = True
                successes.append(bool(info["success"]))
                self.bonused[i] = False
                obs, _ = env.reset(seed=self._seed())
            self.obs[i] = obs
        return self.obs, rewards, dones, successes


def state_checksum(net: nn.Module, memory: Reservoir | None) -> str:
    """SHA-256 over the network parameters and the replay memory: evaluation must leave it unchanged."""
    h = hashlib.sha256()
    for p in net.state_dict().values():
        h.update(p.detach().cpu().numpy().tobytes())
    if memory is not None:
        h.update(memory.obs[: len(memory)].tobytes())
        h.update(memory.actions[: len(memory)].tobytes())
        h.update(str(memory.seen).encode())
    return h.hexdigest()


def _guarded(net: nn.Module, hook: str, call: Callable[[], T]) -> T:
    """Run a method hook that must not change the network's weights (compared bit for bit, so a NaN the suite's own
    step produced is never blamed on a hook): a change is an update the suite did not make or count, so the run
    fails as a budget violation."""
    return unchanged(net.named_parameters, hook, call, "the network's weights")


@dataclass(frozen=True)
class Limits:
    """The protocol's budget fields that bind a learner (None: not declared)."""

    memory_capacity: int | None = None
    """`budget.memoryCapacity`: the most transitions a suite memory may hold."""
    updates_per_task: int | None = None
    """`budget.gradientUpdatesPerTask`: the most optimiser steps per task phase (a joint phase of k tasks: k x)."""
    unaccounted: str = "violation"
    """`budget.unaccountedSamples`: what samples of neither the update's data nor the suite's memory are
    (`violation`: the run fails; `replay`: they are charged as replayed samples)."""


@dataclass
class Learner:
    """The suite's PPO learner (clipped surrogate, GAE, entropy bonus) on the method's network, with the method's
    hooks: `observe` on every rollout, `extra_loss` on every minibatch."""

    params: AgentParams
    canvas: int
    seed: int
    ledger: AgentLedger
    method: Nav4Method[Any]
    device: str = "cpu"
    """Torch device of the network (initialised on the CPU, then moved: every device starts from one init)."""
    task: int = field(init=False, default=0)
    """Task index of the phase in progress."""
    limits: Limits = field(default_factory=Limits)
    net: nn.Module = field(init=False)
    memory: Reservoir | None = field(init=False, default=None)
    phase: str = field(init=False, default="")
    """The phase in progress (its task id, `joint`), for the names in a failure."""

    def __post_init__(self) -> None:
        torch.manual_seed(self.seed)
        self.rng = np.random.default_rng([self.seed, 7])
        self.eval_rng = np.random.default_rng([self.seed, 11])  # evaluation never shifts training randomness
        net = self.method.network(self.canvas)
        if not isinstance(net, nn.Module):
            raise TypeError(f"network() must return a torch.nn.Module, got {type(net).__name__}")
        self.net = net.to(self.device)
        self.opt = self.new_optimizer()
        self.counter = SampleCounter(self.net, self._bookkeeping)
        self.steps = 0
        """Optimiser steps taken in the phase in progress."""
        self._after_backward = overrides(self.method, Nav4Method, "after_backward")
        self._after_step = overrides(self.method, Nav4Method, "after_step")
        self.owners: Ownership | None = None
        """Which phase owns each weight, where the method masks (`release`)."""
        self.positions: dict[str, int] = {}
        """Each task's phase index on this learner: the view its evaluation runs under."""
        self.last_rollout: dict[str, np.ndarray] | None = None

    @property
    def masks_or_retrains(self) -> bool:
        """Whether the method declares owners or retraining updates (the suite's `release` after a phase)."""
        return overrides(self.method, Nav4Method, "ownership") or self.method.retrain_updates() > 0

    def release(self, task: Nav4TaskEnd, phases: int) -> None:
        """After a phase but the last: take the method's owners (checked; the weights released to later phases set
        to 0), then its retraining updates on the phase's last rollout, with a fresh optimiser before and after."""
        declared = self.hook("ownership", partial(self.method.ownership, self, task))
        if declared is not None:
            if self.owners is None:
                self.owners = Ownership(phases)
            self.ledger.releasedWeights += self.owners.assign(self.net.named_parameters, declared, task.index)
        wanted = self.method.retrain_updates()
        self.opt = self.new_optimizer()  # Adam's moments would move the weights just released or frozen
        if wanted and self.last_rollout is not None:
            p = self.params
            passes = math.ceil(wanted / (p.epochs * p.minibatches))
            cap = self.limits.updates_per_task
            if cap is not None and self.steps + passes * p.epochs * p.minibatches > cap:
                raise BudgetViolation(
                    f"budget.gradientUpdatesPerTask: phase {self.phase or self.task} takes {self.steps} optimiser "
                    f"steps and the method's {passes * p.epochs * p.minibatches} retraining steps; the protocol "
                    f"declares at most {cap} per task"
                )
            before = self.steps
            for _ in range(passes):
                self._update(self.last_rollout)
            self.ledger.retrainUpdates += self.steps - before
        self.opt = self.new_optimizer()

    def new_optimizer(self) -> torch.optim.Adam:
        return torch.optim.Adam(self.net.parameters(), lr=self.params.learningRate, eps=1e-5)

    def masked(self, task: str) -> AbstractContextManager[None]:
        """Evaluate `task` with the weights of the phases after its own at 0 (a masking method's view)."""
        if self.owners is None or task not in self.positions:
            return nullcontext()
        return self.owners.view(self.net.named_parameters, self.positions[task])

    def _bookkeeping(self, n: int) -> None:
        self.ledger.bookkeepingSamples += n

    def new_memory(self, capacity: int, selection: str = "reservoir") -> Reservoir:
        """A fixed-capacity memory for the method (one per learner; `selection` reservoir or task-balanced), drawing
        from the learner's generator; `evaluate` checks that evaluation leaves it unchanged."""
        if self.memory is not None:
            raise ValueError("this learner already has a memory")
        cap = self.limits.memory_capacity
        if cap is not None and capacity > cap:
            raise BudgetViolation(
                f"budget.memoryCapacity: the method asked for a memory of {capacity} transitions; the protocol "
                f"declares at most {cap}"
            )
        shape = (len(CHANNELS), self.canvas, self.canvas)
        self.memory = Reservoir(capacity, shape, self.rng, self.ledger, self.counter, selection)
        return self.memory

    def hook(self, name: str, call: Callable[[], T]) -> T:
        """A method hook outside the updates (task boundaries, `observe`): it must not change the weights, and the
        samples it passes through the network are counted as bookkeeping."""
        with self.counter.armed():
            return _guarded(self.net, name, call)

    def parameters_count(self) -> int:
        return sum(p.numel() for p in self.net.parameters())

    def state_dict(self) -> dict[str, Any]:
        """Everything the rest of the run depends on: network, optimiser, both generators, torch's global generator
        (sampled actions), the phase in progress and the memory's contents."""
        memory = self.memory
        return {
            "net": {k: v.detach().clone() for k, v in self.net.state_dict().items()},
            "opt": self.opt.state_dict(),
            "rng": self.rng.bit_generator.state,
            "evalRng": self.eval_rng.bit_generator.state,
            "torchRng": torch.get_rng_state(),
            "task": self.task,
            **({"ownership": {"phases": self.owners.tasks, "owner": self.owners.state_dict()}} if self.owners else {}),
            "memory": None
            if memory is None
            else {
                "capacity": memory.capacity,
                "seen": memory.seen,
                "selection": memory.selection,
                "held": memory.held,
                "seenPerTask": {str(t): n for t, n in memory.seen_per_task.items()},
                **{k: getattr(memory, k).copy() for k in SLOTS},
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict` into a learner built with the same parameters, canvas, seed and method."""
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        self.rng.bit_generator.state = state["rng"]
        self.eval_rng.bit_generator.state = state["evalRng"]
        torch.set_rng_state(state["torchRng"])
        self.task = state["task"]
        if state.get("ownership") is not None:
            self.owners = Ownership(state["ownership"]["phases"])
            self.owners.load_state_dict(state["ownership"]["owner"])
        saved = state["memory"]
        if saved is not None:
            memory = self.memory or self.new_memory(saved["capacity"], saved.get("selection", "reservoir"))
            memory.seen = saved["seen"]
            memory.held = int(saved.get("held", 0))
            memory.seen_per_task = {int(t): int(n) for t, n in saved.get("seenPerTask", {}).items()}
            for k in SLOTS:
                getattr(memory, k)[...] = saved[k]

    def act(self, obs: np.ndarray, greedy: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        with torch.no_grad():
            logits, value = self.net(torch.from_numpy(obs).to(self.device))
            if greedy:
                actions = logits.argmax(-1)
            else:
                actions = torch.distributions.Categorical(logits=logits).sample()
            logp = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
        return actions.cpu().numpy(), logp.cpu().numpy(), value.cpu().numpy(), logits.cpu().numpy()

    def train(
        self,
        vec: VecTasks,
        steps: int,
        task_index: Callable[[int], int],
        on_iteration: Callable[[int], None] | None = None,
        *,
        phase_tasks: int = 1,
    ) -> list[float]:
        """Collect `steps` interactions (rounded up to whole rollouts) and update after each rollout (a phase over
        `phase_tasks` tasks: the joint regime's phase spends that many tasks' budgets). Returns the training success
        rate per rollout (episodes finished in it)."""
        p = self.params
        ledger = self.ledger
        n, t_len = len(vec.envs), p.rolloutSteps
        iterations = math.ceil(steps / (n * t_len))
        self.task = int(task_index(0))
        self.steps = 0
        planned = iterations * p.epochs * p.minibatches
        cap = self.limits.updates_per_task
        if cap is not None and planned > cap * phase_tasks:
            raise BudgetViolation(
                f"budget.gradientUpdatesPerTask: phase {self.phase or self.task} takes {planned} optimiser steps "
                f"({iterations} rollouts x {p.epochs} epochs x {p.minibatches} minibatches); the protocol declares "
                f"at most {cap} per task"
            )
        curve = []
        for it in range(iterations):
            obs_buf = np.zeros((t_len, n, *vec.obs.shape[1:]), dtype=np.uint8)
            act_buf = np.zeros((t_len, n), dtype=np.int64)
            logp_buf = np.zeros((t_len, n), dtype=np.float32)
            val_buf = np.zeros((t_len + 1, n), dtype=np.float32)
            rew_buf = np.zeros((t_len, n), dtype=np.float32)
            done_buf = np.zeros((t_len, n), dtype=np.float32)
            logit_buf = np.zeros((t_len, n, len(ACTIONS)), dtype=np.float32)
            successes: list[bool] = []
            for t in range(t_len):
                obs_buf[t] = vec.obs
                a, lp, v, lg = self.act(vec.obs)
                act_buf[t], logp_buf[t], val_buf[t], logit_buf[t] = a, lp, v, lg
                _, r, d, s = vec.step(a)
                rew_buf[t], done_buf[t] = r, d
                successes += s
            ledger.environmentSteps += n * t_len
            val_buf[t_len] = self.act(vec.obs)[2]
            adv = np.zeros((t_len, n), dtype=np.float32)
            last = np.zeros(n, dtype=np.float32)
            for t in reversed(range(t_len)):
                nonterminal = 1.0 - done_buf[t]
                delta = rew_buf[t] + p.gamma * val_buf[t + 1] * nonterminal - val_buf[t]
                last = delta + p.gamma * p.gaeLambda * nonterminal * last
                adv[t] = last
            batch = {
                "obs": obs_buf.reshape(-1, *obs_buf.shape[2:]),
                "actions": act_buf.reshape(-1),
                "logp": logp_buf.reshape(-1),
                "adv": adv.reshape(-1),
                "ret": (adv + val_buf[:t_len]).reshape(-1),
                "value": val_buf[:t_len].reshape(-1),
                "logits": logit_buf.reshape(-1, len(ACTIONS)),
            }
            tasks = np.array([task_index(i % n) for i in range(n)] * t_len, dtype=np.int8)
            self.last_rollout = batch
            rollout = _suite_rollout(batch, tasks)
            self.hook("observe", partial(self.method.observe, self, rollout))
            self._update(batch)
            curve.append(float(np.mean(successes)) if successes else 0.0)
            if on_iteration is not None:
                on_iteration(it)
        return curve

    def _update(self, batch: dict[str, np.ndarray]) -> None:
        p, ledger, counter = self.params, self.ledger, self.counter
        size = len(batch["actions"])
        mb = size // p.minibatches
        phase = self.phase or str(self.task)
        for _ in range(p.epochs):
            order = self.rng.permutation(size)
            for k in range(p.minibatches):
                idx = order[k * mb : (k + 1) * mb]
                new = {key: torch.from_numpy(v[idx]).to(self.device) for key, v in batch.items()}
                with counter.armed():
                    counter.begin_update(new["obs"])
                    with counter.suite_call():
                        loss = self.policy_loss(new)
                    check_finite(loss, phase, self.steps, "the suite's PPO loss", "none")
                    ledger.samplesProcessed += len(idx)
                    replayed_before = ledger.replaySamples
                    minibatch = Nav4Minibatch(new, len(idx))
                    term = _guarded(self.net, "extra_loss", partial(self.method.extra_loss, self, minibatch))
                    losses = {"suite": loss.detach()}
                    last_hook = "none"
                    if term is not None:
                        check_finite(term, phase, self.steps, "the method's extra_loss term", "extra_loss")
                        losses["extra"] = term.detach()
                        loss = loss + term
                        last_hook = "extra_loss"
                    self.opt.zero_grad()
                    loss.backward()
                    step = Step(phase, self.steps, self.opt, losses, loss.detach())
                    if self._after_backward:
                        _guarded(self.net, "after_backward", partial(self.method.after_backward, self, step))
                        last_hook = "after_backward"
                    other = counter.end_update()
                if other:
                    self._charge_other(other, phase)
                replayed = ledger.replaySamples - replayed_before
                share_new = mb / (mb + replayed) if replayed else 1.0
                norm = nn.utils.clip_grad_norm_(self.net.parameters(), p.maxGradNorm)
                if not bool(torch.isfinite(norm)):
                    raise NonFiniteValue(phase, self.steps, f"a gradient (norm {float(norm)})", last_hook)
                self.opt.step()
                self.steps += 1
                ledger.gradientUpdates += share_new
                ledger.replayUpdates += 1.0 - share_new
                if self._after_step:
                    with counter.armed():
                        _guarded(self.net, "after_step", partial(self.method.after_step, self, step))

    def _charge_other(self, other: int, phase: str) -> None:
        """Samples of an update that were neither its data nor the suite's memory: a budget violation, or replayed
        samples, as the protocol declares (`budget.unaccountedSamples`)."""
        self.ledger.otherSamples += other
        if self.limits.unaccounted == "replay":
            self.ledger.replaySamples += other
            self.ledger.samplesProcessed += other
            return
        raise BudgetViolation(
            f"budget.unaccountedSamples: in phase {phase}, update {self.steps}, {other} sample(s) reached the network "
            "with gradients that were neither the update's data nor drawn from the suite's memory (a private buffer?); "
            "the protocol declares such samples a violation (draw replay from `learner.new_memory`, or declare "
            '`"unaccountedSamples": "replay"` in a new version)'
        )

    def check_parameters(self) -> None:
        """At a phase's end: every parameter finite (a step cannot make one NaN from finite gradients; a method's
        surgery can)."""
        for name, value in self.net.named_parameters():
            if not bool(torch.isfinite(value.detach()).all()):
                raise NonFiniteValue(self.phase or str(self.task), self.steps, f"parameter {name}", "end of phase")

    def policy_loss(self, b: Mapping[str, torch.Tensor], normalize: bool = True) -> torch.Tensor:
        """The PPO loss of a batch with stored behaviour log-probabilities and advantages (normalised over the
        batch): clipped surrogate + value loss - entropy bonus, with the protocol's coefficients."""
        p = self.params
        logits, value = self.net(b["obs"])
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(1, b["actions"][:, None]).squeeze(1)
        adv = b["adv"]
        if normalize and adv.numel() > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = torch.exp(logp - b["logp"])
        policy = -torch.min(ratio * adv, torch.clamp(ratio, 1 - p.clip, 1 + p.clip) * adv).mean()
        value_loss = 0.5 * (value - b["ret"]).pow(2).mean()
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
        loss: torch.Tensor = policy + p.valueCoef * value_loss - p.entropyCoef * entropy
        return loss


def evaluate(
    agent: Learner,
    task: str,
    layout_seeds: Sequence[int],
    greedy: bool,
    ledger: AgentLedger,
    *,
    size: int,
    max_steps: int,
    min_path: int,
    batch: int = 16,
) -> float:
    """Held-out success on the given layouts (one episode each). Never updates the model or the memory: the
    parameters and the replay memory are checksummed around it and a change is an error."""
    before = state_checksum(agent.net, agent.memory)
    agent.net.eval()
    wins = 0
    seeds = list(layout_seeds)
    with agent.masked(task), torch.inference_mode():
        for start in range(0, len(seeds), batch):
            chunk = seeds[start : start + batch]
            envs = [Nav4Env(task, size=size, max_steps=max_steps, min_path=min_path) for _ in chunk]
            obs = np.stack([e.reset(seed=s)[0] for e, s in zip(envs, chunk, strict=True)])
            alive = np.ones(len(envs), dtype=bool)
            while alive.any():
                logits = agent.net(torch.from_numpy(obs).to(agent.device))[0].cpu()
                if greedy:
                    actions = logits.argmax(-1).numpy()
                else:
                    g = torch.Generator().manual_seed(int(agent.eval_rng.integers(2**31)))
                    actions = torch.multinomial(torch.softmax(logits, -1), 1, generator=g).squeeze(1).numpy()
                for i, env in enumerate(envs):
                    if not alive[i]:
                        continue
                    o, _, term, trunc, info = env.step(int(actions[i]))
                    ledger.evaluationSteps += 1
                    obs[i] = o
                    if term or trunc:
                        alive[i] = False
                        wins += int(info["success"])
    agent.net.train()
    if state_checksum(agent.net, agent.memory) != before:
        raise RuntimeError("evaluation changed the model or the replay memory")
    return wins / max(1, len(seeds))
