"""Samples of the true system's transitions, shared by the one-step rung and the least-squares baseline."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cltoolkit.suites.ladder.models import LadderProtocol

__all__ = ["Transitions", "sample_transitions"]


class Transitions(NamedTuple):
    s: np.ndarray
    u: np.ndarray
    u_prev: np.ndarray
    s_next: np.ndarray


def sample_transitions(protocol: LadderProtocol, m: int, rng: np.random.Generator) -> Transitions:
    """M i.i.d. transitions of the true system: state, action, previous action, noise (drawn in that order)."""
    r, sys = protocol.rungs.oneStep, protocol.systems.true
    s = rng.normal(0.0, r.stateSd, m)
    u = rng.normal(0.0, r.actionSd, m)
    u_prev = rng.normal(0.0, r.prevActionSd, m)
    noise = rng.normal(0.0, sys.noiseSd, m)
    return Transitions(s, u, u_prev, sys.a * s + sys.b * u + sys.c * u_prev + noise)
