"""`report.forked.Forked`: the figures computed once, when asked for, in this process; an error surfaces there."""

from __future__ import annotations

import os

import pytest

from cltoolkit.report.forked import Forked


def test_the_value_is_computed_once_in_this_process_when_asked() -> None:
    calls: list[int] = []

    def draw() -> tuple[int, dict[str, str]]:
        calls.append(1)
        return os.getpid(), {"gates": "<figure>" * 20_000}

    with Forked(draw) as job:
        assert calls == []  # nothing drawn before the page asks
        pid, blocks = job.value()
        assert job.value() == (pid, blocks)
    assert calls == [1]
    assert pid == os.getpid()
    assert blocks == {"gates": "<figure>" * 20_000}


def test_an_error_of_the_function_surfaces_where_the_value_is_asked_for() -> None:
    def draw() -> int:
        raise ValueError("no figure for you")

    with Forked(draw) as job, pytest.raises(ValueError, match="no figure for you"):
        job.value()


def test_a_value_never_asked_for_is_never_computed() -> None:
    calls: list[int] = []
    with pytest.raises(RuntimeError), Forked(lambda: calls.append(1)):
        raise RuntimeError("the parent's own work failed")
    assert calls == []
