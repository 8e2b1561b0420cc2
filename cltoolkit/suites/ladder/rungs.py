"""The five rungs, computed exactly as seed 001 defines them (numpy only)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cltoolkit.suites.ladder.methods import LinearModel
from cltoolkit.suites.ladder.models import Control, Intervention, LadderProtocol, OneStep, RolloutRung, System
from cltoolkit.suites.ladder.sampling import Transitions, sample_transitions

__all__ = [
    "Transitions",
    "closed_loop",
    "continuous_equilibrium",
    "forced_amplitude",
    "intervention",
    "one_step",
    "population_mse",
    "rollout",
    "sample_transitions",
    "simulate",
    "steady_state",
    "tail_cycle",
]


def population_mse(model: LinearModel, system: System, rung: OneStep) -> float:
    """Residual variance: (da sd_s)^2 + (db sd_u)^2 + (dc sd_uprev)^2 + noise^2 (independent zero-mean inputs)."""
    return float(
        ((system.a - model.a) * rung.stateSd) ** 2
        + ((system.b - model.b) * rung.actionSd) ** 2
        + ((system.c - model.c) * rung.prevActionSd) ** 2
        + system.noiseSd**2
    )


def one_step(model: LinearModel, protocol: LadderProtocol) -> dict[str, Any]:
    rung = protocol.rungs.oneStep
    data = sample_transitions(protocol, rung.transitions, np.random.default_rng(rung.seed))
    losses = (data.s_next - model.predict(data.s, data.u, data.u_prev)) ** 2
    v = population_mse(model, protocol.systems.true, rung)
    return {
        "mse": float(losses.mean()),
        "populationMse": v,
        "marginalSe": v * float(np.sqrt(2.0 / rung.transitions)),
        "losses": [float(x) for x in losses],
    }


def simulate(a: float, b: float, c: float, s0: float, u_prev0: float, actions: np.ndarray) -> np.ndarray:
    """States s_1..s_H of s' = a s + b u + c u_prev under `actions` (noiseless)."""
    s, prev = s0, u_prev0
    out = np.empty(actions.size)
    for t, u in enumerate(actions):
        s = a * s + b * u + c * prev
        out[t] = s
        prev = u
    return out


def _alternating(amplitude: float, steps: int) -> np.ndarray:
    return amplitude * (-1.0) ** np.arange(steps)


def steady_state(a: float, b: float, c: float, u: float) -> float | None:
    """(b + c) u / (1 - a) for a stable model under constant input; None when |a| >= 1 (no attracting state)."""
    return (b + c) * u / (1 - a) if abs(a) < 1 else None


def forced_amplitude(a: float, b: float, c: float, amplitude: float) -> float | None:
    """Signed K of s_t = -K (-1)^t under u_t = A (-1)^t: K = A (b - c) / (1 + a); None when unstable."""
    return amplitude * (b - c) / (1 + a) if abs(a) < 1 else None


def rollout(model: LinearModel, protocol: LadderProtocol) -> dict[str, Any]:
    r: RolloutRung = protocol.rungs.rollout
    true = protocol.systems.true
    const = np.full(r.constantSteps, r.constantAction)
    truth = simulate(true.a, true.b, true.c, r.s0, r.uPrev0, const)

    def predicted(actions: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            states = simulate(model.a, model.b, model.c, r.s0, r.uPrev0, actions)
        if not np.isfinite(states).all():
            raise ValueError(
                f"the model's rollout {model.coefficients} leaves float range within {actions.size} steps "
                f"(|a| = {abs(model.a):.3g}): an unstable fit; the rollout rung cannot score it"
            )
        return states

    pred = predicted(const)
    alternating = {}
    for horizon in r.alternatingHorizons:
        acts = _alternating(r.alternatingAmplitude, horizon)
        t_alt = simulate(true.a, true.b, true.c, r.s0, r.uPrev0, acts)
        m_alt = predicted(acts)
        alternating[str(horizon)] = {"rmse": _rmse(m_alt, t_alt)}
    return {
        "rmse": _rmse(pred, truth),
        "trajectory": [float(x) for x in pred],
        "trueTrajectory": [float(x) for x in truth],
        "steadyState": steady_state(model.a, model.b, model.c, r.constantAction),
        "trueSteadyState": steady_state(true.a, true.b, true.c, r.constantAction),
        "alternating": alternating,
        "forcedAmplitude": forced_amplitude(model.a, model.b, model.c, r.alternatingAmplitude),
        "trueForcedAmplitude": forced_amplitude(true.a, true.b, true.c, r.alternatingAmplitude),
    }


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        value = float(np.sqrt(np.mean((a - b) ** 2)))
    if not np.isfinite(value):
        raise ValueError("a rollout left float range within the declared horizon: an unstable fitted model")
    return value


def intervention(model: LinearModel, protocol: LadderProtocol) -> dict[str, Any]:
    r: Intervention = protocol.rungs.intervention
    true = protocol.systems.true
    base = np.full(r.steps, r.baselineAction)
    inter = _alternating(r.interventionAmplitude, r.steps)

    def delta(a: float, b: float, c: float) -> float:
        return float(simulate(a, b, c, r.s0, r.uPrev0, inter)[-1] - simulate(a, b, c, r.s0, r.uPrev0, base)[-1])

    d_model, d_true = delta(model.a, model.b, model.c), delta(true.a, true.b, true.c)
    return {"error": abs(d_model - d_true), "deltaModel": d_model, "deltaTrue": d_true}


def closed_loop(model: LinearModel | None, env: System, r: Control, *, zero: bool = False) -> dict[str, Any]:
    """One-step MPC over the action grid with `model` (None: the oracle uses `env`'s own coefficients),
    executed in the deterministic `env`; `zero` always acts 0."""
    grid = np.linspace(r.actionLow, r.actionHigh, r.gridPoints)
    planner = model if model is not None else LinearModel(env.a, env.b, env.c)
    s, prev = r.s0, r.uPrev0
    states, actions = [], []
    queries = 0
    for _ in range(r.steps):
        if zero:
            u = 0.0
        else:
            cost = (planner.predict(s, grid, prev) - r.target) ** 2
            u = float(grid[int(np.argmin(cost))])  # first minimum = lowest action on a tie
            queries += grid.size
        s = env.a * s + env.b * u + env.c * prev
        prev = u
        states.append(float(s))
        actions.append(u)
    tail = np.abs(np.array(states[r.tailFirst - 1 : r.tailLast]) - r.target)
    return {
        "mae": float(tail.mean()),
        "states": states,
        "actions": actions,
        "modelQueries": queries,
        "cycle": tail_cycle(actions[r.tailFirst - 1 : r.tailLast], env),
    }


def tail_cycle(actions: list[float], env: System, max_period: int = 10, tol: float = 1e-12) -> dict[str, Any] | None:
    """The shortest period p of the executed actions over the tail, and the limit-cycle states the
    environment converges to under those periodic actions (None when the tail is not periodic)."""
    n = len(actions)
    for p in range(1, max_period + 1):
        if n < 2 * p:
            break
        if all(abs(actions[i] - actions[i + p]) <= tol for i in range(n - p)):
            cycle = actions[n - p :]
            if abs(env.a) >= 1:
                return {"period": p, "actions": cycle, "limitStates": None}
            repeats = np.tile(np.array(cycle), 4000)
            states = simulate(env.a, env.b, env.c, 0.0, cycle[-1], repeats)
            return {"period": p, "actions": cycle, "limitStates": [float(x) for x in states[-p:]]}
    return None


def continuous_equilibrium(model: LinearModel, env: System, target: float) -> float | None:
    """Fixed point of the unconstrained continuous one-step controller: (1 - a_env) s = b_env u and
    g = a_m s + (b_m + c_m) u, so s = g / (a_m + (b_m + c_m)(1 - a_env) / b_env). None if undefined."""
    if env.b == 0 or model.b == 0:
        return None
    denom = model.a + (model.b + model.c) * (1 - env.a) / env.b
    return None if denom == 0 else target / denom
