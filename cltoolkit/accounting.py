"""Analytical compute counts (seed 003, "compute accounting"): what suites put in a run's ledger, computed from
a disclosed design rather than measured. Measured times live in provenance; estimates are labelled as such in the
report. Keep these three apart.
"""

from __future__ import annotations

__all__ = ["decisions", "frames", "planner_model_queries"]


def frames(environment_steps: int, action_repeat: int = 1) -> int:
    """Environment frames: with action repeat R one environment step is R frames (never report one as the other)."""
    if environment_steps < 0 or action_repeat < 1:
        raise ValueError("need environment_steps >= 0 and action_repeat >= 1")
    return environment_steps * action_repeat


def planner_model_queries(candidates: int, horizon: int, iterations: int = 1, ensemble: int = 1) -> int:
    """Single-candidate, one-step model-transition evaluations of one planning decision: I x E x K x H
    (full-length candidates, no early termination, no reused prefixes; batching does not change the count)."""
    for name, value in (
        ("candidates", candidates),
        ("horizon", horizon),
        ("iterations", iterations),
        ("ensemble", ensemble),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    return iterations * ensemble * candidates * horizon


def decisions(episode_steps: int, replan_every: int) -> int:
    """Planning decisions in an episode that replans every `replan_every` steps from step 0."""
    if episode_steps < 1 or replan_every < 1:
        raise ValueError("need episode_steps >= 1 and replan_every >= 1")
    return -(-episode_steps // replan_every)
