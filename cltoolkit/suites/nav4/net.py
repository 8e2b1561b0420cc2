"""The nav4 suite's default policy / value network (a method may bring its own: `Nav4Method.network`)."""

from __future__ import annotations

import torch
from torch import nn

from cltoolkit.suites.nav4.env import ACTIONS, CHANNELS

__all__ = ["Net"]


class Net(nn.Module):
    """Small CNN: three 3x3 convolutions (16, 32, 32; the last two with stride 2), a 128-unit layer, policy
    logits over the five actions and a value head."""

    def __init__(self, canvas: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(len(CHANNELS), 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n = self.body(torch.zeros(1, len(CHANNELS), canvas, canvas)).shape[1]
        self.hidden = nn.Sequential(nn.Linear(n, 128), nn.ReLU())
        self.policy = nn.Linear(128, len(ACTIONS))
        self.value = nn.Linear(128, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.hidden(self.body(obs.float()))
        return self.policy(h), self.value(h).squeeze(-1)
