"""What the step-level hooks of a continual-learning suite receive (the same type in nav4 and wmf).

The suite owns every optimiser step. Around each one it calls the method, in this order (the order is part of the
contract):

1. the suite's loss on the update's data, then `extra_loss(...)` (the method's term, added to it);
2. `loss.backward()`;
3. `after_backward(model, step)`: gradients are in `p.grad`, before any clipping and before the step; the method may
   change gradients (A-GEM's projection, masks) but not parameter values;
4. the suite's gradient clipping (where the suite clips) and `optimizer.step()`;
5. `after_step(model, step)`: parameters hold their new values; the method may read them (SI's path integral) but
   not change them.

Light to import: no torch at module level (the tensors are torch's, the annotations only name them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["Step"]


@dataclass(frozen=True)
class Step:
    """One optimiser step of a training phase, as the step hooks see it."""

    task: str
    """The phase's task id."""
    update: int
    """Optimiser steps already taken in this phase (0 for the first)."""
    optimizer: torch.optim.Optimizer
    """The suite's optimiser (read its state and parameter groups; stepping or zeroing it is the suite's)."""
    losses: Mapping[str, torch.Tensor]
    """The step's loss terms: `suite` (the suite's loss on the update's data) and, where the method returned one,
    `extra` (its `extra_loss`); detached."""
    loss: torch.Tensor
    """Their sum, the loss the step minimised (detached)."""
