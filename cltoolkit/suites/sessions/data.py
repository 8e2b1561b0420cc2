"""Simulated sessions and the rows every model is scored on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cltoolkit.suites.sessions.models import Cohort, SessionsProtocol

__all__ = ["Rows", "simulate"]


@dataclass(frozen=True)
class Rows:
    """One row per (session, t) with t = W-1 .. T-1: the state window s_{t-W+1..t}, the action a_t and the
    target s_{t+1}."""

    session: np.ndarray
    """Session index of each row (the grouping key)."""
    t: np.ndarray
    """Time index of each row's centre."""
    window: np.ndarray
    """(rows, W) states, oldest first; the last column is s_t."""
    action: np.ndarray
    """a_t."""
    target: np.ndarray
    """s_{t+1}."""
    effects: np.ndarray
    """c_j per session (never given to a model; kept for the report)."""

    def __len__(self) -> int:
        return int(self.target.size)


def simulate(protocol: SessionsProtocol, cohort: Cohort, rng: np.random.Generator) -> Rows:
    """Simulate every session of `cohort`: s_{t+1} = A s_t + B a_t + c_j + e_t under the declared action policy."""
    sys_ = protocol.system
    n, steps, w = cohort.sessions, protocol.sessionLength, protocol.featureWindow
    effects = rng.normal(cohort.sessionEffectMean, cohort.sessionEffectSd, size=n)
    policy = protocol.actionPolicy
    if policy.kind == "gaussian":
        actions = rng.normal(0.0, policy.scale, size=(n, steps))
    else:
        actions = rng.uniform(-policy.scale, policy.scale, size=(n, steps))
    noise = rng.normal(0.0, sys_.noiseSd, size=(n, steps))
    states = np.empty((n, steps + 1))
    states[:, 0] = rng.normal(0.0, sys_.initialStateSd, size=n)
    for k in range(steps):
        states[:, k + 1] = sys_.stateCoef * states[:, k] + sys_.actionCoef * actions[:, k] + effects + noise[:, k]
    ts = np.arange(w - 1, steps)
    session = np.repeat(np.arange(n), ts.size)
    t = np.tile(ts, n)
    window = np.stack([states[session, t - w + 1 + i] for i in range(w)], axis=1)
    return Rows(session, t, window, actions[session, t], states[session, t + 1], effects)
