"""Soft actor-critic as Continual World trains it (awarelab/continual_world@73f63bb, `continualworld/sac/sac.py` and
`models.py`; docs/cw10.md says what they define), in PyTorch.

- Networks: MLPs of `hidden` units, the first layer followed by LayerNorm and tanh, the others by leaky ReLU (slope
  0.2, TensorFlow's default); Keras' initialisation (Glorot-uniform weights, zero biases). The actor has one
  (mu, log_std) head per task, picked by the task's index (CW's `_choose_head`), log_std clipped to [-20, 2], a
  tanh-squashed Gaussian scaled to the action bound. The twin critics see (observation, action); one output unless
  `critic_heads` > 1 (CW's `--regularize_critic`).
- The update (`Sac.update`): CW's `get_gradients` and `apply_update`. All three gradients come from the parameters
  before the update, as CW's single tape gives them: the critics' from the squared Bellman error against
  r + gamma (1 - done) (min target Q(s', a') - alpha log pi(a'|s')), a' drawn from the current actor; the actor's from
  mean(alpha log pi(a|s) - min Q(s, a)) with the critics held fixed; the entropy coefficient's, per task
  (log alpha initialised to 1, as CW's `all_log_alpha`), from -mean(log alpha (log pi + target entropy)), the target
  entropy being the action dimension times the entropy of a Gaussian of std `target_output_std` (CW's 0.089). A
  method's extra term joins the actor's and the critics' losses (CW's `get_auxiliary_loss`). One Adam (eps 1e-7, Keras'
  default) over all of them; then Polyak averaging of the target critics (0.995).

Differences from CW, declared: Keras' Adam counts one step per `apply_gradients` call, three per update (actor,
critics, alpha), so its bias correction runs three times as fast; here one Adam step per update (the two agree once
the correction has decayed, within the first few thousand updates). The twin critics are computed as one batched
pair (the same arithmetic as two networks, `tests/suites/crl/test_sac.py` checks it) for speed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Actor", "Sac", "SacConfig", "TwinCritic", "target_entropy"]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
LEAKY_SLOPE = 0.2


@dataclass(frozen=True)
class SacConfig:
    """The learner's sizes and hyperparameters (CW's defaults)."""

    obs_dim: int
    act_dim: int
    heads: int = 1
    """The actor's heads: one per task (CW's multi-head actor) or 1."""
    critic_heads: int = 1
    hidden: tuple[int, ...] = (256, 256, 256, 256)
    lr: float = 1e-3
    gamma: float = 0.99
    polyak: float = 0.995
    target_output_std: float | None = 0.089
    """The action std per dimension the entropy coefficient aims at; None: SAC's usual -act_dim."""
    action_bound: float = 1.0
    clipnorm: float | None = None
    """Clip each of the three gradients to this global norm (CW's `--clipnorm`, PackNet's runs)."""
    alphas: int = field(default=0)
    """Entropy coefficients, one per task (0: as many as actor heads)."""


def target_entropy(act_dim: int, target_output_std: float | None) -> float:
    """CW's target entropy: act_dim * log(std sqrt(2 pi e)) (the entropy of a Gaussian of that std per dimension),
    or -act_dim without a target std."""
    if target_output_std is None:
        return -float(act_dim)
    return act_dim * math.log(target_output_std * math.sqrt(2 * math.pi * math.e))


def _glorot(weight: torch.Tensor, fan_in: int, fan_out: int) -> None:
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        weight.uniform_(-bound, bound)


def _linear(fan_in: int, fan_out: int) -> nn.Linear:
    layer = nn.Linear(fan_in, fan_out)
    _glorot(layer.weight, fan_in, fan_out)
    nn.init.zeros_(layer.bias)
    return layer


class Trunk(nn.Module):
    """CW's `mlp`: Linear, LayerNorm, tanh, then Linear and leaky ReLU per further layer."""

    def __init__(self, fan_in: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        sizes = (fan_in, *hidden)
        self.layers = nn.ModuleList(_linear(a, b) for a, b in itertools.pairwise(sizes))
        self.norm = nn.LayerNorm(hidden[0], eps=1e-3)  # Keras' LayerNormalization epsilon

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.norm(self.layers[0](x)))
        for layer in self.layers[1:]:
            x = F.leaky_relu(layer(x), LEAKY_SLOPE)
        return x


class Actor(nn.Module):
    """Tanh-squashed Gaussian policy with one (mu, log_std) head per task."""

    def __init__(self, config: SacConfig) -> None:
        super().__init__()
        self.config = config
        self.trunk = Trunk(config.obs_dim, config.hidden)
        width = config.act_dim * config.heads
        self.mu = _linear(config.hidden[-1], width)
        self.log_std = _linear(config.hidden[-1], width)

    def _head(self, out: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        if self.config.heads == 1:
            return out
        out = out.view(out.shape[0], self.config.heads, self.config.act_dim)
        return out[torch.arange(out.shape[0], device=out.device), head]

    def distribution(self, obs: torch.Tensor, head: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian before the tanh: (mu, log_std) for each row, from the head each row names."""
        x = self.trunk(obs)
        return self._head(self.mu(x), head), self._head(self.log_std(x), head).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def forward(
        self, obs: torch.Tensor, head: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(action, log pi(action | obs)) for each row, from the head each row names."""
        mu, log_std = self.distribution(obs, head)
        pre = mu if deterministic else mu + torch.randn_like(mu) * log_std.exp()
        # the Gaussian's log-density, then the tanh correction in CW's (Spinning Up's) stable form
        logp = (-0.5 * (((pre - mu) / (log_std.exp() + 1e-8)) ** 2 + 2 * log_std + math.log(2 * math.pi))).sum(1)
        logp = logp - (2 * (math.log(2) - pre - F.softplus(-2 * pre))).sum(1)
        return torch.tanh(pre) * self.config.action_bound, logp


class TwinCritic(nn.Module):
    """The two critics as one batched pair: weights of shape (2, fan_in, fan_out), each critic's arithmetic that of
    its own `Trunk` and head."""

    def __init__(self, config: SacConfig) -> None:
        super().__init__()
        self.config = config
        sizes = (config.obs_dim + config.act_dim, *config.hidden, config.critic_heads)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in itertools.pairwise(sizes):
            w = torch.empty(2, a, b)
            _glorot(w, a, b)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.zeros(2, 1, b)))
        self.norm_weight = nn.Parameter(torch.ones(2, 1, config.hidden[0]))
        self.norm_bias = nn.Parameter(torch.zeros(2, 1, config.hidden[0]))

    def forward(self, obs: torch.Tensor, act: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """Both critics' Q for each row: shape (2, rows)."""
        x = torch.cat([obs, act], dim=1).expand(2, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = torch.baddbmm(b, x, w)
            if i == 0:
                x = torch.tanh(F.layer_norm(x, x.shape[-1:], eps=1e-3) * self.norm_weight + self.norm_bias)
            elif i < last:
                x = F.leaky_relu(x, LEAKY_SLOPE)
        if self.config.critic_heads == 1:
            return x[..., 0]
        return x[:, torch.arange(x.shape[1], device=x.device), head]


class Sac:
    """The actor, the twin critics and their targets, the entropy coefficients, one Adam."""

    def __init__(self, config: SacConfig) -> None:
        self.config = config
        self.actor = Actor(config)
        self.critic = TwinCritic(config)
        self.target = TwinCritic(config)
        self.target.load_state_dict(self.critic.state_dict())
        self.target.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.ones(config.alphas or config.heads))
        self.target_entropy = target_entropy(config.act_dim, config.target_output_std)
        self.optimizer = self.new_optimizer()

    def new_optimizer(self) -> torch.optim.Adam:
        """A fresh Adam over every trained parameter (CW resets it at a task change)."""
        return torch.optim.Adam(self.parameters(), lr=self.config.lr, eps=1e-7)

    def parameters(self) -> list[nn.Parameter]:
        return [*self.actor.parameters(), *self.critic.parameters(), self.log_alpha]

    def act(self, obs: torch.Tensor, head: int, deterministic: bool = False) -> torch.Tensor:
        with torch.no_grad():
            heads = torch.full((obs.shape[0],), head, dtype=torch.long)
            action: torch.Tensor = self.actor(obs, heads, deterministic)[0]
        return action

    def losses(self, batch: Mapping[str, torch.Tensor], extra: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The update's losses on `batch` (obs, next_obs, actions, rewards, done, head): `total` carries every
        gradient (the critics', the actor's and alpha's, each only its own; see the module's docstring)."""
        obs, head = batch["obs"], batch["head"]
        log_alpha = self.log_alpha[head]
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            next_action, next_logp = self.actor(batch["next_obs"], head)
            target_q = self.target(batch["next_obs"], next_action, head).min(0).values
            backup = batch["rewards"] + self.config.gamma * (1 - batch["done"]) * (target_q - alpha * next_logp)
        q = self.critic(obs, batch["actions"], head)
        action, logp = self.actor(obs, head)
        q_pi = torch.func.functional_call(
            self.critic, {k: v.detach() for k, v in self.critic.named_parameters()}, (obs, action, head)
        )
        value = 0.5 * ((backup - q) ** 2).mean(1).sum()
        policy = (alpha * logp - q_pi.min(0).values).mean()
        entropy = -(log_alpha * (logp.detach() + self.target_entropy)).mean()
        total = value + policy + entropy
        out = {"value": value, "policy": policy, "entropy": entropy}
        if extra is not None:
            total = total + extra  # one term: its actor part reaches the actor, its critic part the critics
            out["extra"] = extra
        out["total"] = total
        out["logp"] = logp.detach().mean()
        return out

    def clip(self) -> None:
        """CW's `--clipnorm`: each of the three gradients clipped to the norm on its own."""
        if self.config.clipnorm is None:
            return
        nn.utils.clip_grad_norm_(list(self.actor.parameters()), self.config.clipnorm)
        nn.utils.clip_grad_norm_(list(self.critic.parameters()), self.config.clipnorm)
        nn.utils.clip_grad_norm_([self.log_alpha], self.config.clipnorm)

    def update_targets(self) -> None:
        """Polyak averaging: target <- polyak target + (1 - polyak) critic."""
        with torch.no_grad():
            torch._foreach_lerp_(
                list(self.target.parameters()), list(self.critic.parameters()), 1.0 - self.config.polyak
            )

    def update(self, batch: Mapping[str, torch.Tensor]) -> dict[str, float]:
        """One plain update (no method): losses, backward, clipping, Adam, targets."""
        losses = self.losses(batch)
        self.optimizer.zero_grad(set_to_none=True)
        losses["total"].backward()
        self.clip()
        self.optimizer.step()
        self.update_targets()
        return {k: float(v.detach()) for k, v in losses.items() if k != "total"}
