"""PPO for the crl suite's discrete-action streams (`learner.algorithm: "ppo"`): proximal policy optimisation
(Schulman et al. 2017) with generalised advantage estimation (Schulman et al. 2016), as Stable-Baselines3's `PPO`
runs it with its defaults (`learner.ppo`), in PyTorch.

- Networks: CW's trunk (`cltoolkit.suites.crl.sac.Trunk`: Linear, LayerNorm, tanh, then leaky ReLU; Keras'
  initialisation) for the actor, the same categorical `DiscreteActor` as SAC for discrete actions (one logits head
  per task, the task picks it), and a value network of its own trunk with one output. SB3 (and CleanRL) use tanh
  MLPs with orthogonal initialisation; the crl suite keeps one trunk for all its learners so that a method sees the
  same parameters under every learner (a declared difference). One environment, not vectorised.
- Rollouts (`PpoRollout`): `rolloutSteps` environment steps of the current task with the actor's samples, each with the
  action's log-probability and the state's value; the time limit is not a terminal state (the value of the last
  observation is bootstrapped at a truncation, as SB3 does), a termination is. GAE(gamma, lambda) gives the
  advantages and the returns (advantages + values).
- The updates: `epochs` passes over the rollout, its rows shuffled and split into `minibatches` minibatches, one
  Adam step (eps 1e-5, SB3's) each on -mean(min(ratio A, clip(ratio, 1 - eps, 1 + eps) A)) + `valueCoef`
  mean((V - R)^2) - `entropyCoef` mean(entropy), the advantages standardised per minibatch, the value unclipped (SB3's
  default; CleanRL clips it and halves the squared error); the method's extra term joins the sum; the whole gradient
  clipped to `maxGradNorm` after the method's gradient hooks. A task's last rollout is shorter where `rolloutSteps`
  does not divide the task's steps.

Every method hook sees this learner as it sees SAC: `actor` (the same class), `critic` (the value network: called
as `critic(obs, actions, head)`, it gives (1, rows) values, the actions unused), `config`, `losses(batch)` (`value`
and `policy` terms on a batch of obs, actions, logp, adv, ret, head), `optimizer`. A batch from the suite's episodic
memory carries the advantages and returns computed when its rollout was collected (A-GEM's reference loss reads
them, as nav4's does).

Imports torch: only a worker loads this module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from cltoolkit.suites.crl.models import PpoSettings
from cltoolkit.suites.crl.sac import DiscreteActor, SacConfig, Trunk, _linear

__all__ = ["Ppo", "PpoRollout", "ValueNet", "gae"]

FIELDS = ("obs", "actions", "logp", "adv", "ret", "task")
"""A finished rollout's arrays (and a PPO episodic memory's)."""


class ValueNet(nn.Module):
    """The state-value function: CW's trunk and one linear output."""

    def __init__(self, config: SacConfig) -> None:
        super().__init__()
        self.config = config
        self.trunk = Trunk(config.obs_dim, config.hidden)
        self.out = _linear(config.hidden[-1], 1)

    def forward(self, obs: torch.Tensor, act: torch.Tensor | None = None, head: torch.Tensor | None = None) -> Any:
        """V(obs) per row, shape (1, rows) (the twin critics' layout with one critic; `act` and `head` unused)."""
        return self.out(self.trunk(obs)).T


class Ppo:
    """The actor, the value network and one Adam over both."""

    TERMS = (("value", "the value function's loss"), ("policy", "the actor's loss"), ("entropy", "the entropy term"))
    """The loss terms `losses` returns besides `total`, and how a failure names them."""

    def __init__(self, config: SacConfig, settings: PpoSettings) -> None:
        if not config.discrete:
            raise ValueError("the crl suite's PPO is for discrete actions")
        self.config, self.settings = config, settings
        self.actor = DiscreteActor(config)
        self.critic = ValueNet(config)
        self.optimizer = self.new_optimizer()

    def new_optimizer(self) -> torch.optim.Adam:
        """A fresh Adam over every trained parameter (eps 1e-5, SB3's and CleanRL's)."""
        return torch.optim.Adam(self.parameters(), lr=self.config.lr, eps=1e-5)

    def parameters(self) -> list[nn.Parameter]:
        return [*self.actor.parameters(), *self.critic.parameters()]

    def others(self) -> list[tuple[str, nn.Parameter]]:
        """Trained parameters outside the actor and the critic: none."""
        return []

    def act(self, obs: torch.Tensor, head: int, deterministic: bool = False) -> torch.Tensor:
        with torch.no_grad():
            heads = torch.full((obs.shape[0],), head, dtype=torch.long)
            action: torch.Tensor = self.actor(obs, heads, deterministic)[0]
        return action

    def sample(self, obs: torch.Tensor, head: int) -> tuple[torch.Tensor, float, float]:
        """One row's sampled action (a one-wide column), its log-probability and the state's value."""
        with torch.no_grad():
            heads = torch.full((1,), head, dtype=torch.long)
            action, logp = self.actor(obs, heads)
            return action[0], float(logp[0]), float(self.critic(obs)[0, 0])

    def value(self, obs: torch.Tensor) -> float:
        with torch.no_grad():
            return float(self.critic(obs)[0, 0])

    def losses(self, batch: Mapping[str, torch.Tensor], extra: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """PPO's losses on `batch` (obs, actions, logp, adv, ret, head): `total` is policy + valueCoef value -
        entropyCoef entropy (+ the method's term)."""
        s = self.settings
        obs, head = batch["obs"], batch["head"]
        logp_all = self.actor.distribution(obs, head)
        logp = logp_all.gather(1, batch["actions"].long()).squeeze(1)
        adv = batch["adv"]
        if s.normalizeAdvantages and len(adv) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = (logp - batch["logp"]).exp()
        clipped = ratio.clamp(1 - s.clipRatio, 1 + s.clipRatio)
        policy = -torch.min(ratio * adv, clipped * adv).mean()
        value = ((self.critic(obs)[0] - batch["ret"]) ** 2).mean()
        entropy = -(logp_all.exp() * logp_all).sum(1).mean()
        total = policy + s.valueCoef * value - s.entropyCoef * entropy
        if extra is not None:
            total = total + extra
        return {"value": value, "policy": policy, "entropy": entropy, "total": total}

    def clip(self) -> None:
        """The whole gradient to `maxGradNorm` (SB3's and CleanRL's global norm)."""
        if self.settings.maxGradNorm is not None:
            nn.utils.clip_grad_norm_(self.parameters(), self.settings.maxGradNorm)

    def update_targets(self) -> None:
        """No target networks."""

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])


def gae(
    rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray, ends: np.ndarray, gamma: float, lam: float
) -> np.ndarray:
    """Generalised advantage estimates: delta_t = r_t + gamma V'_t - V_t, A_t = delta_t + gamma lambda A_{t+1}
    within an episode (`ends` cuts the sum after a terminated or truncated step). `next_values[t]` is the value of
    the state after step t: 0 after a termination, the bootstrapped value of the last observation after a truncation
    or at the rollout's end."""
    adv = np.zeros(len(rewards), np.float64)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        running = delta + gamma * lam * (0.0 if ends[t] else running)
        adv[t] = running
    return adv.astype(np.float32)


class PpoRollout:
    """One task's rollout in progress, then finished (advantages and returns) and split into minibatches."""

    def __init__(self, capacity: int, obs_dim: int, rng: np.random.Generator) -> None:
        self.capacity, self.rng = capacity, rng
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros((capacity, 1), np.float32)
        self.logp = np.zeros(capacity, np.float32)
        self.values = np.zeros(capacity, np.float32)
        self.rewards = np.zeros(capacity, np.float32)
        self.next_values = np.zeros(capacity, np.float32)
        self.ends = np.zeros(capacity, bool)
        self.adv = np.zeros(capacity, np.float32)
        self.ret = np.zeros(capacity, np.float32)
        self.task = np.zeros(capacity, np.int64)
        self.size = 0

    def clear(self) -> None:
        self.size = 0

    @property
    def full(self) -> bool:
        return self.size == self.capacity

    def add(self, obs: np.ndarray, action: np.ndarray, logp: float, value: float, reward: float, task: int) -> None:
        i = self.size
        self.obs[i], self.actions[i], self.logp[i], self.values[i] = obs, action, logp, value
        self.rewards[i], self.task[i] = reward, task
        self.ends[i], self.next_values[i] = False, 0.0
        self.size += 1

    def end_step(self, terminated: bool, truncated: bool, bootstrap: float | None) -> None:
        """The last added step's outcome: the episode ended (terminated: no value after it; truncated: `bootstrap`,
        the value of its last observation), or it goes on (the next step's value, filled in by `finish`; at the
        rollout's end, `bootstrap`)."""
        i = self.size - 1
        self.ends[i] = terminated or truncated
        if not terminated and bootstrap is not None:
            self.next_values[i] = bootstrap

    def finish(self, gamma: float, lam: float) -> None:
        """Advantages and returns of the filled rows."""
        n = self.size
        going = ~self.ends[: n - 1]
        self.next_values[: n - 1][going] = self.values[1:n][going]
        self.adv[:n] = gae(self.rewards[:n], self.values[:n], self.next_values[:n], self.ends[:n], gamma, lam)
        self.ret[:n] = self.adv[:n] + self.values[:n]

    def rows(self, idx: np.ndarray) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(getattr(self, k)[idx]) for k in FIELDS}

    def minibatches(self, epochs: int, count: int) -> Iterator[dict[str, torch.Tensor]]:
        """`epochs` passes, each a fresh shuffle split into `count` near-equal minibatches (fewer where the rollout
        has fewer rows)."""
        for _ in range(epochs):
            order = self.rng.permutation(self.size)
            for part in np.array_split(order, min(count, self.size)):
                yield self.rows(part)

    def arrays(self) -> dict[str, np.ndarray]:
        """The filled rows' arrays (copies), as a PPO episodic memory keeps them."""
        return {k: getattr(self, k)[: self.size].copy() for k in FIELDS}
