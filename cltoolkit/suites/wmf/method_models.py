"""The models and penalties of the shipped wmf methods, apart from the engine (`world.py`: the plain RSSM;
`train.py`: the training loop), which knows no method: EWC's penalty and diagonal Fisher (`wmf.ewc`), progressive
networks on the transition (`wmf.progressive-nets`) and UG-MTM's uncertainty-gated mixture of GRU experts
(`wmf.ug-mtm`). Each differs from the RSSM in its transition alone, overriding the base's methods one by one. Imports
torch: loaded by the methods' hooks, in the worker."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cltoolkit.suites.wmf.world import RSSM, gaussian_nll

if TYPE_CHECKING:
    from cltoolkit.suites.wmf.api import ModelSpec
    from cltoolkit.suites.wmf.methods import UgParams

__all__ = ["UGMTM", "EwcPenalty", "ProgressiveRSSM", "fisher_diagonal"]


@dataclass
class EwcPenalty:
    """factor x lambda x sum_i F_i (theta_i - theta*_i)^2 over the parameters with a Fisher entry: factor 1/2
    (wmf-v1, Kirkpatrick et al.'s form) or 1 (WorldModelsBenchmark's `src/baselines/ewc.py`)."""

    fisher: dict[str, torch.Tensor]
    anchor: dict[str, torch.Tensor]
    lam: float
    factor: float = 0.5

    def __call__(self, model: RSSM) -> torch.Tensor:
        total = torch.zeros((), device=next(iter(self.fisher.values())).device)
        for name, p in model.named_parameters():
            if name in self.fisher:
                total = total + (self.fisher[name] * (p - self.anchor[name]).pow(2)).sum()
        return self.factor * self.lam * total  # (factor x lambda) x total: for 1/2 the same arithmetic as before


def fisher_diagonal(model: RSSM, z: torch.Tensor, a: torch.Tensor, z_next: torch.Tensor) -> dict[str, torch.Tensor]:
    """Empirical diagonal Fisher of log p(z' | z, a) from h = 0: the mean over transitions of the squared gradient
    of each transition's log-likelihood, for every parameter of the model. The latents are fixed inputs (encoded
    once by the post-A model), so every encoder and decoder entry is exactly zero, and so is the GRU's recurrent
    weight (h = 0): EWC protects the transition component only."""
    params = dict(model.named_parameters())
    fisher = {n: torch.zeros_like(p) for n, p in params.items()}
    model.eval()
    for i in range(z.shape[0]):
        model.zero_grad(set_to_none=True)
        h = model.step(model.initial(1, z), z[i : i + 1], a[i : i + 1])
        mu, logvar = model.prior(h)
        (-gaussian_nll(z_next[i : i + 1], mu, logvar, model.var_eps).sum()).backward()
        for n, p in params.items():
            if p.grad is not None:
                fisher[n] += p.grad.detach().pow(2)
    model.zero_grad(set_to_none=True)
    return {n: f / z.shape[0] for n, f in fisher.items()}


class ProgressiveRSSM(RSSM):
    """Progressive networks on the transition: at the switch a new GRU column (and its own prior head) is added; it
    reads the frozen previous column's hidden state through a lateral connection (its input is [z, a, h_prev]); the
    VAE is shared and keeps training; the newest column is used at inference."""

    def __init__(
        self,
        latent: int,
        hidden: int,
        action: int,
        channels: tuple[int, int, int, int],
        beta: float,
        *,
        shared_state: bool = False,
    ) -> None:
        super().__init__(latent, hidden, action, channels, beta)
        self.column2: nn.GRU | None = None
        self.head2: nn.Linear | None = None
        self.shared_state = shared_state
        """WorldModelsBenchmark's form: one hidden state; the frozen column runs on it and feeds the new one through
        `lateral`."""
        self.lateral: nn.Linear | None = None

    def switch(self) -> None:
        self.column2 = nn.GRU(self.latent + self.action + self.hidden, self.hidden, batch_first=True)
        self.head2 = nn.Linear(self.hidden, 2 * self.latent)
        if self.shared_state:
            self.lateral = nn.Linear(self.hidden, self.hidden)
        for p in [*self.gru.parameters(), *self.head.parameters()]:
            p.requires_grad_(False)

    def prior(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """The state is [h1, h2] once the second column exists (shared state: h alone); the newest column's head
        reads h2."""
        if self.head2 is None:
            return super().prior(h)
        mu, logvar = self.head2(h if self.shared_state else h[..., self.hidden :]).chunk(2, dim=-1)
        return mu, logvar

    def _shared_step(self, h: Tensor, x: Tensor) -> Tensor:
        """h' = column2([z, a, V column1([z, a], h)], h): WorldModelsBenchmark's transition with the frozen column under
        no_grad (its lateral V is trained with the new column)."""
        assert self.column2 is not None and self.lateral is not None
        with torch.no_grad():
            frozen = self.gru(x.unsqueeze(1), h.unsqueeze(0).contiguous())[1].squeeze(0)
        inputs = torch.cat([x, self.lateral(frozen)], -1).unsqueeze(1)
        out: Tensor = self.column2(inputs, h.unsqueeze(0).contiguous())[1].squeeze(0)
        return out

    def step(self, h: Tensor, z: Tensor, a: Tensor) -> Tensor:
        if self.column2 is None:
            return super().step(h, z, a)
        if self.shared_state:
            return self._shared_step(h, torch.cat([z, a], -1))
        h1, h2 = h.chunk(2, dim=-1)
        x = torch.cat([z, a], -1).unsqueeze(1)
        h1n = self.gru(x, h1.unsqueeze(0).contiguous())[1].squeeze(0)
        h2n = self.column2(torch.cat([x, h1n.unsqueeze(1)], -1), h2.unsqueeze(0).contiguous())[1].squeeze(0)
        return torch.cat([h1n, h2n], -1)

    def sequence(self, z: Tensor, a: Tensor, z_next: Tensor | None = None) -> tuple[Tensor, Tensor]:
        x = torch.cat([z, a], -1)
        if self.column2 is not None and self.shared_state:  # the frozen column reads the shared state: step by step
            h = z.new_zeros(z.shape[0], self.hidden)
            states = []
            for t in range(x.shape[1]):
                h = self._shared_step(h, x[:, t])
                states.append(h)
            return torch.stack(states, 1), z.new_zeros(())
        h1 = self.gru(x)[0]
        if self.column2 is None:
            return h1, z.new_zeros(())
        h2 = self.column2(torch.cat([x, h1], -1))[0]
        return torch.cat([h1, h2], -1), z.new_zeros(())

    def initial(self, n: int, like: Tensor) -> Tensor:
        width = self.hidden if self.column2 is None or self.shared_state else 2 * self.hidden
        return like.new_zeros(n, width)

    def transition_parameters(self) -> list[nn.Parameter]:
        if self.column2 is None:
            return super().transition_parameters()
        assert self.head2 is not None
        lateral = [*self.lateral.parameters()] if self.lateral is not None else []
        return [*self.column2.parameters(), *self.head2.parameters(), *lateral]


class UGMTM(RSSM):
    """Uncertainty-gated mixture of K GRU experts.

    u_t = Var over `mc_passes` dropout passes of an uncertainty head on [z_t, a_t] (mean over output units);
    tau = a small MLP over the last `window` batch-mean uncertainties seen in training (sigmoid output);
    gate logits: -lambda (u_t - tau) for experts already trained, +lambda (u_t - tau) for the active expert,
    -inf for the rest; h_{t+1} = sum_k g_k GRU_k([z_t, a_t], h_t). The uncertainty head learns to predict the
    next-latent error ||z_{t+1} - m(h_{t+1})||^2 (an MSE term added to the loss). At the switch the next expert becomes
    active and the VAE, the prior head and expert 0 are frozen.

    Five choices where wmf-v1 and WorldModelsBenchmark's `src/models/ug_mtm.py` differ, each a field of the method's
    `UgParams` (wmf-v1's value first): `expertInit` global-rng (PyTorch's default GRUCell initialisation from the
    global generator) or per-expert-generator (the reference: expert k's parameters uniform in +-1/sqrt(hidden) from
    its own generator seeded k * 1337 + 42, the same in every run); `thresholdHistory` per-batch (one history entry
    per update, the batch's mean u over every step, one tau per update) or per-step (the reference: each time step
    pushes its batch-mean u_t and reads a new tau); `mcEstimates` shared (one MC estimate drives gate and
    calibration) or separate (the reference: two independent estimates); `gradientFactor` none or last-step-gate (the
    reference's backward hooks: each trainable expert's whole gradient is multiplied by its batch-mean gate at the
    last time step of the update, on top of the mixture's own per-step, per-sample gate weighting);
    `calibrationSteps` all-but-last (wmf-v1: the last step's error is not computed) or all (the reference: every
    transition of the window)."""

    history: Tensor
    filled: Tensor
    active: Tensor

    def __init__(self, spec: ModelSpec, params: UgParams) -> None:
        """The model of `spec` (the protocol's model section) with the method's declared hyperparameters."""
        latent, hidden, action = spec.latent, spec.hidden, spec.action
        super().__init__(latent, hidden, action, spec.channels, spec.beta)
        del self.gru
        width = latent + action
        self.experts = nn.ModuleList(nn.GRUCell(width, hidden) for _ in range(params.experts))
        if params.expertInit == "per-expert-generator":
            stdv = 1.0 / math.sqrt(hidden)
            with torch.no_grad():
                for k, cell in enumerate(self.experts):
                    generator = torch.Generator().manual_seed(k * 1337 + 42)
                    for p in cell.parameters():
                        p.uniform_(-stdv, stdv, generator=generator)
        self.unc = nn.Sequential(
            nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(params.dropout), nn.Linear(hidden, hidden)
        )
        window = params.thresholdWindow
        self.tau = nn.Sequential(nn.Linear(window, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
        self.register_buffer("history", torch.zeros(window))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        self.register_buffer("active", torch.zeros((), dtype=torch.long))
        self.mc_passes, self.mc_passes_eval, self.gate_lambda = params.mcPasses, params.mcPassesEval, params.gateLambda
        self.per_step_history = params.thresholdHistory == "per-step"
        self.separate_estimates = params.mcEstimates == "separate"
        self.last_step_factor = params.gradientFactor == "last-step-gate"
        self.calibrate_all = params.calibrationSteps == "all"
        self._hooks: list[torch.utils.hooks.RemovableHandle] = []

    def uncertainty(self, x: Tensor) -> Tensor:
        """MC-dropout variance (dropout active in every pass, training or not)."""
        passes = self.mc_passes if self.training else self.mc_passes_eval
        drop = self.unc[2]
        was = drop.training
        drop.train(True)
        outs = torch.stack([self.unc(x) for _ in range(passes)])
        drop.train(was)
        return outs.var(dim=0).mean(-1)

    def gates(self, u: Tensor, tau: Tensor | None = None) -> Tensor:
        """Gate weights (N, K) of uncertainties u (N,); tau a scalar or one per row (default: from the history)."""
        k_active = int(self.active)
        if tau is None:
            tau = self.tau(self.history.unsqueeze(0)).squeeze()
        diff = u - tau
        logits = torch.full((u.shape[0], len(self.experts)), -torch.inf, device=u.device)
        logits[:, :k_active] = (-self.gate_lambda * diff).unsqueeze(-1)
        logits[:, k_active] = self.gate_lambda * diff
        return torch.softmax(logits, -1)

    def _mix(self, x: Tensor, h: Tensor, g: Tensor) -> Tensor:
        out = h.new_zeros(h.shape)
        for k in range(int(self.active) + 1):  # experts beyond the active one have gate exactly 0
            out = out + g[:, k : k + 1] * self.experts[k](x, h)
        return out

    def step(self, h: Tensor, z: Tensor, a: Tensor) -> Tensor:
        x = torch.cat([z, a], -1)
        return self._mix(x, h, self.gates(self.uncertainty(x)))

    @torch.no_grad()
    def _push(self, value: Tensor) -> None:
        self.history[int(self.filled) % self.history.numel()] = value
        self.filled += 1

    def _step_taus(self, u: Tensor) -> Tensor:
        """Per-step history (the seed): push each step's batch-mean u, then read tau; one tau per step."""
        snapshots = []
        for t in range(u.shape[1]):
            self._push(u[:, t].mean())
            snapshots.append(self.history.clone())
        taus: Tensor = self.tau(torch.stack(snapshots)).squeeze(-1)
        return taus

    def _scale_gradients(self, last: Tensor) -> None:
        """The seed's backward hooks: each trainable expert's gradient times its batch-mean gate at the last step."""
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()
        for k, factor in enumerate(last.mean(0).tolist()):
            for p in self.experts[k].parameters():
                if p.requires_grad:
                    self._hooks.append(p.register_hook(lambda grad, s=factor: grad * s))

    def sequence(self, z: Tensor, a: Tensor, z_next: Tensor | None = None) -> tuple[Tensor, Tensor]:
        x = torch.cat([z, a], -1)
        n, steps = x.shape[:2]
        u = self.uncertainty(x.reshape(n * steps, -1)).view(n, steps)
        tau = None
        if self.training and self.per_step_history:
            tau = self._step_taus(u).repeat(n)  # rows are (sample, step) in sample-major order
        elif self.training:
            self._push(u.mean())
        g = self.gates(u.reshape(-1), tau).view(n, steps, -1)
        if self.training and self.last_step_factor:
            self._scale_gradients(g[:, -1].detach())
        h = x.new_zeros(n, self.hidden)
        hs = []
        for t in range(steps):
            h = self._mix(x[:, t], h, g[:, t])
            hs.append(h)
        hseq = torch.stack(hs, 1)
        u_cal = self.uncertainty(x.reshape(n * steps, -1)).view(n, steps) if self.separate_estimates else u
        with torch.no_grad():
            target_mu = self.prior(hseq)[0]
        # calibration: u_t predicts the squared error of the next latent under the model's prior
        if self.calibrate_all and z_next is not None:
            err = (z_next.detach() - target_mu).pow(2).mean(-1)
            return hseq, F.mse_loss(u_cal, err)
        err = (z[:, 1:].detach() - target_mu[:, :-1]).pow(2).mean(-1) if steps > 1 else u.new_zeros(n, 0)
        aux = F.mse_loss(u_cal[:, :-1], err) if steps > 1 else u.new_zeros(())
        return hseq, aux

    def transition_parameters(self) -> list[nn.Parameter]:
        return [*self.experts.parameters(), *self.head.parameters()]

    def switch(self) -> None:
        self.active += 1
        for p in [*self.vae.parameters(), *self.head.parameters(), *self.experts[0].parameters()]:
            p.requires_grad_(False)
