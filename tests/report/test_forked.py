"""`report.forked.Forked`: the figures' child process gives the value the parent would compute, and any failure of
the child falls back to computing it in the parent."""

from __future__ import annotations

import os
import sys

import pytest

from cltoolkit.report.forked import Forked

forks = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Forked runs inline where it does not fork")


@forks
def test_the_value_is_computed_in_a_child_process() -> None:
    parent = os.getpid()
    with Forked(lambda: (os.getpid(), {"gates": "<figure>" * 20_000})) as job:  # more than a pipe's buffer
        pid, blocks = job.value()
    assert pid != parent
    assert blocks == {"gates": "<figure>" * 20_000}


@forks
def test_a_child_that_dies_is_replaced_by_the_parent_computing_the_value() -> None:
    parent = os.getpid()

    def draw() -> int:
        if os.getpid() != parent:
            os._exit(3)  # a crash in the child only
        return 42

    with Forked(draw) as job:
        assert job.value() == 42


def test_an_error_of_the_function_surfaces_in_the_parent() -> None:
    def draw() -> int:
        raise ValueError("no figure for you")

    with Forked(draw) as job, pytest.raises(ValueError, match="no figure for you"):
        job.value()


@forks
def test_leaving_the_block_without_the_value_reaps_the_child() -> None:
    def slow() -> None:
        import time

        time.sleep(60)

    job = Forked(slow)
    pid = job._pid
    assert pid
    with pytest.raises(RuntimeError), job:
        raise RuntimeError("the parent's own work failed")
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped: no zombie left behind
