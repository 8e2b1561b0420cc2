"""World models of the wmf suite: a ConvVAE with a recurrent transition (RSSM), a progressive-network transition
and UG-MTM (an uncertainty-gated mixture of GRU experts).

Notation: frames x_t (64x64x3 in [0, 1]); the VAE posterior q(z_t | x_t) = N(mu, exp(logvar)); the transition
h_{t+1} = f(h_t, [z_t, a_t]) from h_0 = 0 and the prior p(z_t | h_t) = N(m(h_t), exp(s(h_t))), where the head's
second half is a log-variance everywhere (training loss, NLL, KL, rollouts).

Training loss of one window of L frames and L - 1 actions (the seed's loss, computed in one pass):
    mean_t [ ||dec(z_t) - x_t||^2 + beta * KL(q(z_t | x_t) || p(z_t | h_t)) ],   z_t ~ q(z_t | x_t),
summed over pixels and latent dimensions, averaged over the batch and the L steps. The seed's implementation loops
over time steps and encodes each frame twice; here every frame of the batch is encoded once, in one convolution
pass, and the GRU runs over the sequence (`RSSM.loss`). `RSSM.loss_stepwise` is the step-by-step form, kept to
test that the two give the same loss and gradients.

One module past 450 lines on purpose: the three models share the RSSM's encoder, decoder, prior head, loss and
rollouts and differ in the transition alone, which each subclass overrides method by method beside the base it
changes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn
from torch.nn import functional as F

if TYPE_CHECKING:
    from cltoolkit.suites.wmf.api import ModelSpec
    from cltoolkit.suites.wmf.methods import UgParams

__all__ = [
    "RSSM",
    "UGMTM",
    "ConvVAE",
    "ProgressiveRSSM",
    "gaussian_kl",
    "gaussian_nll",
]

LOG_2PI = math.log(2 * math.pi)


def gaussian_kl(mu_q: Tensor, logvar_q: Tensor, mu_p: Tensor, logvar_p: Tensor, var_eps: float = 0.0) -> Tensor:
    """KL(N(mu_q, exp(logvar_q)) || N(mu_p, exp(logvar_p))) of diagonal Gaussians, summed over the last axis;
    `var_eps` > 0 divides by exp(logvar_p) + var_eps instead (WorldModelsBenchmark's training KL)."""
    if var_eps:
        spread = (torch.exp(logvar_q) + (mu_q - mu_p).pow(2)) / (torch.exp(logvar_p) + var_eps)
        return 0.5 * torch.sum(logvar_p - logvar_q + spread - 1.0, dim=-1)
    return 0.5 * torch.sum(
        logvar_p - logvar_q + (torch.exp(logvar_q) + (mu_q - mu_p).pow(2)) * torch.exp(-logvar_p) - 1.0, dim=-1
    )


def gaussian_nll(x: Tensor, mu: Tensor, logvar: Tensor, var_eps: float = 0.0) -> Tensor:
    """-log N(x; mu, exp(logvar)), summed over the last axis; `var_eps` > 0 divides the squared error by
    exp(logvar) + var_eps instead (WorldModelsBenchmark's `metrics.py` and `ewc.py`)."""
    if var_eps:
        return 0.5 * torch.sum(LOG_2PI + logvar + (x - mu).pow(2) / (torch.exp(logvar) + var_eps), dim=-1)
    return 0.5 * torch.sum(LOG_2PI + logvar + (x - mu).pow(2) * torch.exp(-logvar), dim=-1)


class PointTransposedConv(nn.ConvTranspose2d):
    """A transposed convolution applied to a 1x1 input: the same parameters and the same function as
    `nn.ConvTranspose2d(cin, cout, k)` there, computed as one matrix product (the native kernel is about 3x slower
    on a 1x1 input on CPU). Inputs must be (N, cin, 1, 1)."""

    def __init__(self, cin: int, cout: int, kernel: int) -> None:
        super().__init__(cin, cout, kernel, 2)

    def forward(self, x: Tensor, output_size: list[int] | None = None) -> Tensor:
        n, cin = x.shape[:2]
        k = self.kernel_size[0]
        out = torch.matmul(x.reshape(n, cin), self.weight.reshape(cin, -1)).view(n, self.out_channels, k, k)
        out = out + self.bias.view(1, -1, 1, 1)  # type: ignore[union-attr]
        return out.contiguous(memory_format=torch.channels_last)


def _decoder(first: nn.Module, channels: tuple[int, int, int, int]) -> nn.Sequential:
    """`first` (to c3 channels), then transposed convolutions c3 -> c2 (5, stride 2) -> c1 (6, 2) -> 3 (6, 2) and a
    sigmoid; the layers are built in this order (the initialisation draws follow it)."""
    c1, c2, c3, _ = channels
    return nn.Sequential(
        first,
        nn.ReLU(),
        nn.ConvTranspose2d(c3, c2, 5, 2),
        nn.ReLU(),
        nn.ConvTranspose2d(c2, c1, 6, 2),
        nn.ReLU(),
        nn.ConvTranspose2d(c1, 3, 6, 2),
        nn.Sigmoid(),
    )


class ConvVAE(nn.Module):
    """Four 4x4 stride-2 convolutions (64 -> 31 -> 14 -> 6 -> 2) to a Gaussian latent; a transposed-convolution
    decoder (1 -> 5 -> 13 -> 30 -> 64) with a sigmoid output."""

    def __init__(self, latent: int, channels: tuple[int, int, int, int]) -> None:
        super().__init__()
        c1, c2, c3, c4 = channels
        self.channels = channels
        self.seed_decoder = False
        self.encoder = nn.Sequential(
            nn.Conv2d(3, c1, 4, 2),
            nn.ReLU(),
            nn.Conv2d(c1, c2, 4, 2),
            nn.ReLU(),
            nn.Conv2d(c2, c3, 4, 2),
            nn.ReLU(),
            nn.Conv2d(c3, c4, 4, 2),
            nn.ReLU(),
            nn.Flatten(),
        )
        feat = c4 * 2 * 2
        self.mu = nn.Linear(feat, latent)
        self.logvar = nn.Linear(feat, latent)
        self.expand = nn.Linear(latent, feat)
        self.feat = feat
        self.decoder: nn.Sequential = _decoder(PointTransposedConv(feat, c3, 5), channels)
        self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        # The point layer's weight stays in the standard layout: it is used as a (cin, cout*k*k) matrix, and in
        # channels-last every step would copy it (and its gradient) and Adam's element-wise kernels would take a
        # strided path (together ~12 ms of a 168 ms wmf-v1 step). Same values, same arithmetic.
        point = self.decoder[0]
        assert isinstance(point, PointTransposedConv)
        point.weight.data = point.weight.data.contiguous()

    def encode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(N, 3, 64, 64) -> posterior mean and log-variance (N, latent). Convolutions run channels-last (NHWC),
        which oneDNN computes 1.5-4x faster on CPU for these shapes; the values are the same function."""
        f = self.encoder(x.contiguous(memory_format=torch.channels_last))
        return self.mu(f), self.logvar(f)

    def use_seed_decoder(self) -> None:
        """WorldModelsBenchmark's decoder (`src/models/vae.py`): Linear(latent, c4 x 2 x 2), reshaped to (c4, 2, 2),
        transposed convolutions to 7, 17, 38 and 80 pixels, sigmoid, then the centre 64 x 64 crop. (The default is World
        Models' decoder: Linear(latent, c4 x 4) as (c4 x 4, 1, 1) to 5, 13, 30 and 64 pixels, no crop.)"""
        _, _, c3, c4 = self.channels
        self.expand = nn.Linear(self.expand.in_features, c4 * 2 * 2)
        self.decoder = _decoder(nn.ConvTranspose2d(c4, c3, 5, 2), self.channels)
        self.decoder.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.seed_decoder = True

    def decode(self, z: Tensor) -> Tensor:
        if self.seed_decoder:
            full: Tensor = self.decoder(self.expand(z).view(-1, self.channels[3], 2, 2))  # (N, 3, 80, 80)
            top = (full.shape[-2] - 64) // 2
            left = (full.shape[-1] - 64) // 2
            return full[:, :, top : top + 64, left : left + 64].contiguous()
        out: Tensor = self.decoder(self.expand(z).view(-1, self.feat, 1, 1))
        return out.contiguous()


def recon_error(recon: Tensor, x: Tensor) -> Tensor:
    """Squared error per frame (summed over pixels and channels), one value per frame."""
    return (recon - x).pow(2).flatten(1).sum(-1)


class RSSM(nn.Module):
    """ConvVAE + GRU transition + Gaussian prior head."""

    var_eps: float = 0.0
    """Added to the prior variance where a loss or likelihood divides by it (the protocol's `varianceEpsilon`, set
    by the suite on every model it makes)."""

    def __init__(self, latent: int, hidden: int, action: int, channels: tuple[int, int, int, int], beta: float) -> None:
        super().__init__()
        self.latent, self.hidden, self.action, self.beta = latent, hidden, action, beta
        self.vae = ConvVAE(latent, channels)
        self.gru = nn.GRU(latent + action, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 2 * latent)

    # -- transition --------------------------------------------------------------------------------------------
    def prior(self, h: Tensor) -> tuple[Tensor, Tensor]:
        mu, logvar = self.head(h).chunk(2, dim=-1)
        return mu, logvar

    def step(self, h: Tensor, z: Tensor, a: Tensor) -> Tensor:
        """One transition: h (N, H), z (N, Z), a (N, A) -> h' (N, H)."""
        h_next: Tensor = self.gru(torch.cat([z, a], -1).unsqueeze(1), h.unsqueeze(0))[1]
        return h_next.squeeze(0)

    def sequence(self, z: Tensor, a: Tensor, z_next: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Hidden states h_1..h_{L-1} of (N, L-1, .) inputs from h_0 = 0, and an auxiliary loss (0 here); `z_next`
        (N, L-1, Z) the latents the states predict (UG-MTM's calibration may read them)."""
        return self.gru(torch.cat([z, a], -1))[0], z.new_zeros(())

    def transition_parameters(self) -> list[nn.Parameter]:
        return [*self.gru.parameters(), *self.head.parameters()]

    def initial(self, n: int, like: Tensor) -> Tensor:
        return like.new_zeros(n, self.hidden)

    # -- loss ---------------------------------------------------------------------------------------------------
    def loss(self, obs: Tensor, actions: Tensor, eps: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """obs (B, L, 3, 64, 64) float, actions (B, L-1, A), eps (B, L, Z) the posterior noise."""
        b, length = obs.shape[:2]
        x = obs.reshape(b * length, *obs.shape[2:])
        mu, logvar = self.vae.encode(x)
        z = mu + eps.reshape(b * length, -1) * torch.exp(0.5 * logvar)
        recon = recon_error(self.vae.decode(z), x).mean()
        mu, logvar, z = (t.view(b, length, -1) for t in (mu, logvar, z))
        hs, aux = self.sequence(z[:, :-1], actions, z[:, 1:])
        h = torch.cat([self.initial(b, hs).unsqueeze(1), hs], 1)
        p_mu, p_logvar = self.prior(h)
        kl = gaussian_kl(mu, logvar, p_mu, p_logvar, self.var_eps).mean()
        total = recon + self.beta * kl + aux
        return total, {"reconstruction": recon.detach(), "kl": kl.detach(), "aux": aux.detach()}

    def loss_stepwise(self, obs: Tensor, actions: Tensor, eps: Tensor) -> Tensor:
        """The same loss, one time step at a time (reference for the batched form; RSSM only)."""
        b, length = obs.shape[:2]
        cell = nn.GRUCell(self.latent + self.action, self.hidden)
        cell.weight_ih, cell.weight_hh = self.gru.weight_ih_l0, self.gru.weight_hh_l0  # type: ignore[assignment]
        cell.bias_ih, cell.bias_hh = self.gru.bias_ih_l0, self.gru.bias_hh_l0  # type: ignore[assignment]
        h = obs.new_zeros(b, self.hidden)
        recon_sum = obs.new_zeros(())
        kl_sum = obs.new_zeros(())
        for t in range(length):
            mu, logvar = self.vae.encode(obs[:, t])
            z = mu + eps[:, t] * torch.exp(0.5 * logvar)
            recon_sum = recon_sum + recon_error(self.vae.decode(z), obs[:, t]).mean()
            p_mu, p_logvar = self.prior(h)
            kl_sum = kl_sum + gaussian_kl(mu, logvar, p_mu, p_logvar, self.var_eps).mean()
            if t < length - 1:
                h = cell(torch.cat([z, actions[:, t]], -1), h)
        return recon_sum / length + self.beta * kl_sum / length

    # -- switch -------------------------------------------------------------------------------------------------
    def switch(self) -> None:
        """Called between task A and task B (plain RSSM: nothing changes)."""


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
