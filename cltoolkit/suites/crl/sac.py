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

Discrete actions (`discrete=True`, the protocol's `sac-discrete`): soft actor-critic for discrete action settings
(Christodoulou 2019), on the same trunks, heads, optimiser and targets: the actor's heads give the logits of a
categorical policy over the `act_dim` actions; each critic maps an observation to one Q value per action (the taken
action's is read off); the soft value of a state is the policy's expectation, sum_a pi(a|s) (min Q(s, a) -
alpha log pi(a|s)), computed exactly over the actions instead of from a sample; the actor's loss is sum_a pi(a|s)
(alpha log pi(a|s) - min Q(s, a)); the target entropy is `target_entropy_scale` times the maximum, log act_dim (the
paper's 0.98). An action travels as its index in a one-wide float column, so buffers and batches keep one layout.

PopArt (`popart_beta` set; CW's `PopArtMlpCritic`, its multi-task reference `run_mt.py`): the critics have one head
per task and output values normalised per task, `(Q - mu_k) / sigma_k`; the backup is
`normalise_k(r + gamma (1 - done) (unnormalise_k(min target Q(s', a')) - alpha log pi(a'|s')))`; the actor's loss reads
the normalised values, as CW's does. After the backward and before the step, the statistics move a fraction `beta`
towards each task's batch moments of the backup (tasks absent from the batch keep theirs) and the first critic's
output layer is rescaled so that its unnormalised outputs stay where they were (Pop-Art's "preserving outputs"). Three
things follow CW's code where the Pop-Art paper (van Hasselt et al. 2016) reads otherwise, kept for fidelity: the
moments are of the *normalised* backup (CW passes `q_backup` to `update_stats`); only the first critic's output layer
is rescaled (the second critic and the targets are not; CW keeps the statistics in `critic1` alone); and the
statistics are shared by both critics. One guard CW lacks: a variance estimate below 0 by rounding is taken as 0 before
the square root (CW's would be NaN), then sigma is clipped to [1e-4, 1e6] as CW clips it.

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
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Actor", "DiscreteActor", "PopArt", "Sac", "SacConfig", "TwinCritic", "policy_kl", "target_entropy"]

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
    discrete: bool = False
    """A categorical policy over `act_dim` actions (SAC for discrete actions) instead of a squashed Gaussian."""
    target_entropy_scale: float = 0.98
    """Discrete actions: the target entropy as a fraction of the maximum, log act_dim (Christodoulou 2019: 0.98)."""
    popart_beta: float | None = None
    """PopArt's step for its per-task statistics (CW's `--popart_beta`, 3e-4); None: no PopArt. Needs one critic head
    per task (`critic_heads`) and continuous actions."""

    @property
    def action_width(self) -> int:
        """Columns an action takes in a batch: its dimensions, or one (the index) for a discrete action."""
        return 1 if self.discrete else self.act_dim


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


def _pick(out: torch.Tensor, head: torch.Tensor, heads: int, width: int) -> torch.Tensor:
    """Each row's `width` outputs from the head the row names (all of them where there is one head)."""
    if heads == 1:
        return out
    out = out.view(out.shape[0], heads, width)
    return out[torch.arange(out.shape[0], device=out.device), head]


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
        return _pick(out, head, self.config.heads, self.config.act_dim)

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

    def output(self, obs: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """The policy's differentiable output per row (MAS's importance): the mean action."""
        mu, _ = self.distribution(obs, head)
        return torch.tanh(mu) * self.config.action_bound


class DiscreteActor(nn.Module):
    """Categorical policy over `act_dim` actions with one logits head per task."""

    def __init__(self, config: SacConfig) -> None:
        super().__init__()
        self.config = config
        self.trunk = Trunk(config.obs_dim, config.hidden)
        self.logits = _linear(config.hidden[-1], config.act_dim * config.heads)

    def distribution(self, obs: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """Normalised log-probabilities of every action for each row, from the head each row names."""
        out = _pick(self.logits(self.trunk(obs)), head, self.config.heads, self.config.act_dim)
        return F.log_softmax(out, dim=1)

    def forward(
        self, obs: torch.Tensor, head: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(action index as a one-wide float column, log pi(action | obs)) for each row."""
        logp = self.distribution(obs, head)
        if deterministic:
            index = logp.argmax(1)
        else:
            index = torch.multinomial(logp.exp(), 1).squeeze(1)
        return index.to(logp.dtype).unsqueeze(1), logp.gather(1, index.unsqueeze(1)).squeeze(1)

    def output(self, obs: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """The policy's differentiable output per row (MAS's importance): the action probabilities."""
        return self.distribution(obs, head).exp()


def policy_kl(old: nn.Module, new: nn.Module, obs: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    """KL(old policy || new policy) per row, averaged over the rows, with gradients to `new` only: of the Gaussians
    before the tanh (summed over the action's dimensions), or of the categorical policies."""
    with torch.no_grad():
        before = old.distribution(obs, head)  # type: ignore[operator]
    after = new.distribution(obs, head)  # type: ignore[operator]
    if isinstance(before, torch.Tensor):
        kl: torch.Tensor = (before.exp() * (before - after)).sum(1).mean()
        return kl
    (mu_old, log_std_old), (mu, log_std) = before, after
    var, var_old = (2 * log_std).exp(), (2 * log_std_old).exp()
    kl = (log_std - log_std_old + (var_old + (mu_old - mu) ** 2) / (2 * var) - 0.5).sum(1).mean()
    return kl


def make_actor(config: SacConfig) -> Actor | DiscreteActor:
    return DiscreteActor(config) if config.discrete else Actor(config)


class TwinCritic(nn.Module):
    """The two critics as one batched pair: weights of shape (2, fan_in, fan_out), each critic's arithmetic that of
    its own `Trunk` and head."""

    def __init__(self, config: SacConfig) -> None:
        super().__init__()
        self.config = config
        fan_in = config.obs_dim + (0 if config.discrete else config.act_dim)
        self.outputs = config.act_dim if config.discrete else 1
        """Values per critic head: one per action (discrete), or Q of the given action."""
        sizes = (fan_in, *config.hidden, config.critic_heads * self.outputs)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in itertools.pairwise(sizes):
            w = torch.empty(2, a, b)
            _glorot(w, a, b)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.zeros(2, 1, b)))
        self.norm_weight = nn.Parameter(torch.ones(2, 1, config.hidden[0]))
        self.norm_bias = nn.Parameter(torch.zeros(2, 1, config.hidden[0]))

    def forward(self, obs: torch.Tensor, act: torch.Tensor | None, head: torch.Tensor) -> torch.Tensor:
        """Both critics' Q of each row's action: shape (2, rows). Discrete actions without `act`: every action's Q,
        shape (2, rows, actions)."""
        if self.config.discrete:
            q_all = self._forward(obs, head)
            return q_all if act is None else q_all.gather(2, act.long().expand(2, -1, -1)).squeeze(2)
        assert act is not None
        return self._forward(torch.cat([obs, act], dim=1), head)

    def all(self, obs: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """Discrete actions: both critics' Q of every action for each row, shape (2, rows, actions)."""
        q_all: torch.Tensor = self(obs, None, head)
        return q_all

    def _forward(self, x: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        x = x.expand(2, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = torch.baddbmm(b, x, w)
            if i == 0:
                x = torch.tanh(F.layer_norm(x, x.shape[-1:], eps=1e-3) * self.norm_weight + self.norm_bias)
            elif i < last:
                x = F.leaky_relu(x, LEAKY_SLOPE)
        if self.config.discrete:
            if self.config.critic_heads == 1:
                return x
            x = x.view(2, x.shape[1], self.config.critic_heads, self.outputs)
            return x[:, torch.arange(x.shape[1], device=x.device), head]
        if self.config.critic_heads == 1:
            return x[..., 0]
        return x[:, torch.arange(x.shape[1], device=x.device), head]


class PopArt:
    """Per-task statistics of the critics' targets (CW's `PopArtMlpCritic`: `moment1`, `moment2`, `sigma`; see the
    module's docstring) and the rescaling of the first critic's output layer that keeps its outputs."""

    def __init__(self, heads: int, beta: float) -> None:
        self.beta = beta
        self.moment1 = torch.zeros(heads)
        self.moment2 = torch.ones(heads)
        self.sigma = torch.ones(heads)

    def normalize(self, x: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        return (x - self.moment1[head]) / self.sigma[head]

    def unnormalize(self, x: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        return x * self.sigma[head] + self.moment1[head]

    def update(self, targets: torch.Tensor, head: torch.Tensor, critic: TwinCritic) -> None:
        """Move the statistics towards the batch's per-task moments of `targets`; rescale critic 0's output layer."""
        with torch.no_grad():
            onehot = F.one_hot(head, len(self.sigma)).to(targets.dtype)
            counts = onehot.sum(0)
            first = (targets.unsqueeze(1) * onehot).sum(0) / counts.clamp(min=1.0)
            second = (targets.square().unsqueeze(1) * onehot).sum(0) / counts.clamp(min=1.0)
            step = self.beta * (counts > 0).to(targets.dtype)
            moment1 = self.moment1 + step * (first - self.moment1)
            moment2 = self.moment2 + step * (second - self.moment2)
            sigma = (moment2 - moment1.square()).clamp(min=0.0).sqrt().clamp(1e-4, 1e6)
            last = len(critic.weights) - 1
            critic.weights[last][0].mul_(self.sigma / sigma)
            critic.biases[last][0].copy_((critic.biases[last][0] * self.sigma + self.moment1 - moment1) / sigma)
            self.moment1, self.moment2, self.sigma = moment1, moment2, sigma

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"moment1": self.moment1.clone(), "moment2": self.moment2.clone(), "sigma": self.sigma.clone()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.moment1, self.moment2, self.sigma = (state[k].clone() for k in ("moment1", "moment2", "sigma"))


class Sac:
    """The actor, the twin critics and their targets, the entropy coefficients, one Adam; PopArt's statistics where
    the config asks for them."""

    TERMS = (("value", "the critics' loss"), ("policy", "the actor's loss"), ("entropy", "alpha's loss"))
    """The loss terms `losses` returns besides `total`, and how a failure names them."""

    def __init__(self, config: SacConfig) -> None:
        self.config = config
        self.actor = make_actor(config)
        self.critic = TwinCritic(config)
        self.target = TwinCritic(config)
        self.target.load_state_dict(self.critic.state_dict())
        self.target.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.ones(config.alphas or config.heads))
        self.target_entropy = (
            config.target_entropy_scale * math.log(config.act_dim)
            if config.discrete
            else target_entropy(config.act_dim, config.target_output_std)
        )
        self.optimizer = self.new_optimizer()
        self.popart: PopArt | None = None
        self._targets: tuple[torch.Tensor, torch.Tensor] | None = None
        """The last `losses` call's normalised backup and heads, for PopArt's `update`."""
        if config.popart_beta is not None:
            if config.discrete or config.critic_heads < 2:
                raise ValueError("PopArt needs continuous actions and one critic head per task (CW's: multi-head only)")
            self.popart = PopArt(config.critic_heads, config.popart_beta)

    def new_optimizer(self) -> torch.optim.Adam:
        """A fresh Adam over every trained parameter (CW resets it at a task change)."""
        return torch.optim.Adam(self.parameters(), lr=self.config.lr, eps=1e-7)

    def parameters(self) -> list[nn.Parameter]:
        return [*self.actor.parameters(), *self.critic.parameters(), self.log_alpha]

    def others(self) -> list[tuple[str, nn.Parameter]]:
        """Trained parameters outside the actor and the critics: the entropy coefficients."""
        return [("log_alpha", self.log_alpha)]

    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, entropy coefficients and optimiser (a checkpoint's part)."""
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "target": self.target.state_dict(),
            "logAlpha": self.log_alpha.detach().clone(),
            "optimizer": self.optimizer.state_dict(),
            **({"popart": self.popart.state_dict()} if self.popart is not None else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["logAlpha"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.popart is not None:
            self.popart.load_state_dict(state["popart"])

    def act(self, obs: torch.Tensor, head: int, deterministic: bool = False) -> torch.Tensor:
        with torch.no_grad():
            heads = torch.full((obs.shape[0],), head, dtype=torch.long)
            action: torch.Tensor = self.actor(obs, heads, deterministic)[0]
        return action

    def losses(self, batch: Mapping[str, torch.Tensor], extra: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The update's losses on `batch` (obs, next_obs, actions, rewards, done, head): `total` carries every
        gradient (the critics', the actor's and alpha's, each only its own; see the module's docstring)."""
        log_alpha = self.log_alpha[batch["head"]]
        alpha = log_alpha.detach().exp()
        terms = (self._categorical if self.config.discrete else self._gaussian)(batch, alpha)
        value, policy, neg_entropy = terms
        entropy = -(log_alpha * (neg_entropy.detach() + self.target_entropy)).mean()
        total = value + policy + entropy
        out = {"value": value, "policy": policy, "entropy": entropy}
        if extra is not None:
            total = total + extra  # one term: its actor part reaches the actor, its critic part the critics
            out["extra"] = extra
        out["total"] = total
        out["logp"] = neg_entropy.detach().mean()
        return out

    def _gaussian(
        self, batch: Mapping[str, torch.Tensor], alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critics' and the actor's losses, and log pi of the sampled actions (CW's)."""
        obs, head = batch["obs"], batch["head"]
        with torch.no_grad():
            next_action, next_logp = self.actor(batch["next_obs"], head)
            target_q = self.target(batch["next_obs"], next_action, head).min(0).values
            if self.popart is not None:
                target_q = self.popart.unnormalize(target_q, head)
            backup = batch["rewards"] + self.config.gamma * (1 - batch["done"]) * (target_q - alpha * next_logp)
            if self.popart is not None:
                backup = self.popart.normalize(backup, head)
                self._targets = (backup, head)
        q = self.critic(obs, batch["actions"], head)
        action, logp = self.actor(obs, head)
        q_pi = torch.func.functional_call(
            self.critic, {k: v.detach() for k, v in self.critic.named_parameters()}, (obs, action, head)
        )
        value = 0.5 * ((backup - q) ** 2).mean(1).sum()
        policy = (alpha * logp - q_pi.min(0).values).mean()
        return value, policy, logp

    def _categorical(
        self, batch: Mapping[str, torch.Tensor], alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """SAC for discrete actions: the same terms with the policy's expectation taken exactly over the actions;
        the third is sum_a pi(a|s) log pi(a|s) (minus the entropy)."""
        obs, head = batch["obs"], batch["head"]
        actor = self.actor
        assert isinstance(actor, DiscreteActor)
        weight = alpha.unsqueeze(1)
        with torch.no_grad():
            next_logp = actor.distribution(batch["next_obs"], head)
            next_q = self.target.all(batch["next_obs"], head).min(0).values
            soft = (next_logp.exp() * (next_q - weight * next_logp)).sum(1)
            backup = batch["rewards"] + self.config.gamma * (1 - batch["done"]) * soft
        q = self.critic(obs, batch["actions"], head)
        logp = actor.distribution(obs, head)
        probs = logp.exp()
        q_all = torch.func.functional_call(
            self.critic, {k: v.detach() for k, v in self.critic.named_parameters()}, (obs, None, head)
        )
        value = 0.5 * ((backup - q) ** 2).mean(1).sum()
        policy = (probs * (weight * logp - q_all.min(0).values)).sum(1).mean()
        return value, policy, (probs * logp).sum(1)

    def update_statistics(self) -> None:
        """PopArt's step after the backward and before the optimiser's (CW's `update_stats` inside
        `get_gradients`): nothing without PopArt."""
        if self.popart is not None and self._targets is not None:
            self.popart.update(*self._targets, self.critic)
            self._targets = None

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
        self.update_statistics()
        self.clip()
        self.optimizer.step()
        self.update_targets()
        return {k: float(v.detach()) for k, v in losses.items() if k != "total"}
