"""Evaluation of wmf world models (never updates a model: no optimizer, `torch.no_grad`, eval mode; UG-MTM's MC
dropout draws from a generator seeded per call, and its uncertainty history is not touched).

D_i is a latent transition set (z, a, z') from held-out task-i episodes, encoded once (posterior means) by the
post-task-i model, so the models compared on it see identical inputs and targets; that is also why the latent
metrics cannot see drift in the encoder (reported beside them as pixel reconstruction)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from cltoolkit.suites.wmf.world import RSSM, gaussian_kl, gaussian_nll, recon_error

if TYPE_CHECKING:
    from cltoolkit.suites.wmf.envs import Episodes

__all__ = ["LatentSet", "d_param", "encode_transitions", "nll", "reconstruction", "rollout_divergence"]


@dataclass
class LatentSet:
    z: torch.Tensor
    a: torch.Tensor
    z_next: torch.Tensor


def _device(model: RSSM) -> torch.device:
    return next(model.parameters()).device


def _frames(data: Episodes, e: np.ndarray, t: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(data.frames[e, t]).to(device).permute(0, 3, 1, 2).float().div_(255.0)


@torch.no_grad()
def encode_transitions(model: RSSM, data: Episodes, rows: np.ndarray) -> LatentSet:
    """Transitions (episode, t) -> posterior means of frames t and t+1 and the action between them."""
    model.eval()
    e, t, dev = rows[:, 0], rows[:, 1], _device(model)
    z = model.vae.encode(_frames(data, e, t, dev))[0]
    z_next = model.vae.encode(_frames(data, e, t + 1, dev))[0]
    return LatentSet(z, torch.from_numpy(data.actions[e, t]).to(dev), z_next)


@torch.no_grad()
def nll(model: RSSM, d: LatentSet, seed: int = 0) -> float:
    """NLL(M, D) = mean over D of -log p_M(z' | z, a), one transition from h = 0 (nats per transition)."""
    model.eval()
    torch.manual_seed(seed)
    h = model.step(model.initial(d.z.shape[0], d.z), d.z, d.a)
    mu, logvar = model.prior(h)
    return float(gaussian_nll(d.z_next, mu, logvar, model.var_eps).mean())


@torch.no_grad()
def rollout_divergence(m_i: RSSM, m_k: RSSM, d: LatentSet, horizon: int, starts: int, seed: int) -> float:
    """RD = mean over `horizon` steps and `starts` start states of KL(p_i(z_t) || p_k(z_t)) along imagined rollouts
    of both models from the same start latents (the first `starts` of a seeded permutation of D), driven by the same
    actions resampled from D's actions, each model propagating its own prior mean."""
    m_i.eval()
    m_k.eval()
    gen = np.random.default_rng(np.random.SeedSequence([seed, 13]))
    n = min(starts, d.z.shape[0])
    idx = torch.from_numpy(gen.permutation(d.z.shape[0])[:n]).to(d.z.device)
    z_i = z_k = d.z[idx]
    h_i, h_k = m_i.initial(n, z_i), m_k.initial(n, z_k)
    total = 0.0
    for step in range(horizon):
        a = d.a[torch.from_numpy(gen.integers(d.a.shape[0], size=n)).to(d.a.device)]
        torch.manual_seed(seed * 1000 + step)
        h_i = m_i.step(h_i, z_i, a)
        torch.manual_seed(seed * 1000 + step)
        h_k = m_k.step(h_k, z_k, a)
        mu_i, lv_i = m_i.prior(h_i)
        mu_k, lv_k = m_k.prior(h_k)
        total += float(gaussian_kl(mu_i, lv_i, mu_k, lv_k).mean())
        z_i, z_k = mu_i, mu_k
    return total / horizon


@torch.no_grad()
def reconstruction(model: RSSM, data: Episodes, rows: np.ndarray) -> float:
    """Held-out pixel reconstruction: mean over frames of the squared error per frame (sum over 64x64x3 values in
    [0, 1]) of decoding the posterior mean."""
    model.eval()
    x = _frames(data, rows[:, 0], rows[:, 1], _device(model))
    return float(recon_error(model.vae.decode(model.vae.encode(x)[0]), x).mean())


def d_param(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """||p_B - p_A|| / ||p_A|| of the physics vectors [gravity, mass scale, friction scale]."""
    pa, pb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.linalg.norm(pb - pa) / np.linalg.norm(pa))
