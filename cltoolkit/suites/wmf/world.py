"""The wmf suite's world model: a ConvVAE with a recurrent transition (RSSM). The engine knows no method: the shipped
methods' variants (a progressive-network transition, UG-MTM's mixture of experts) subclass it in `method_models.py`.

Notation: frames x_t (64x64x3 in [0, 1]); the VAE posterior q(z_t | x_t) = N(mu, exp(logvar)); the transition
h_{t+1} = f(h_t, [z_t, a_t]) from h_0 = 0 and the prior p(z_t | h_t) = N(m(h_t), exp(s(h_t))), where the head's
second half is a log-variance everywhere (training loss, NLL, KL, rollouts).

Training loss of one window of L frames and L - 1 actions (the seed's loss, computed in one pass):
    mean_t [ ||dec(z_t) - x_t||^2 + beta * KL(q(z_t | x_t) || p(z_t | h_t)) ],   z_t ~ q(z_t | x_t),
summed over pixels and latent dimensions, averaged over the batch and the L steps. The seed's implementation loops
over time steps and encodes each frame twice; here every frame of the batch is encoded once, in one convolution
pass, and the GRU runs over the sequence (`RSSM.loss`). `RSSM.loss_stepwise` is the step-by-step form, kept to
test that the two give the same loss and gradients."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = [
    "RSSM",
    "ConvVAE",
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
