"""Analytical compute counts, checked on seed 003's worked example."""

from __future__ import annotations

import pytest

from cltoolkit.accounting import decisions, frames, planner_model_queries


def test_seed_planner_example() -> None:
    # replan at steps 0, 10, ..., 190 of a 200-step episode; 256 candidates of length 15; one pass, one member
    assert decisions(200, 10) == 20
    assert planner_model_queries(256, 15) == 3840
    assert decisions(200, 10) * planner_model_queries(256, 15) == 76_800
    assert planner_model_queries(256, 15, iterations=3, ensemble=5) == 57_600


def test_frames_with_action_repeat_and_bad_input() -> None:
    assert frames(1000, 4) == 4000
    assert frames(7) == 7
    with pytest.raises(ValueError):
        frames(10, 0)
    with pytest.raises(ValueError, match="horizon must be >= 1"):
        planner_model_queries(10, 0)
