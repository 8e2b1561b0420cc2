"""keep_freed_memory: buffers freed and allocated again come from the heap, without page faults."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from cltoolkit.run.malloc import keep_freed_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")


def _faults_for_reallocations(n: int = 10, buffers: int = 6, size: int = 8 << 20) -> int:
    """Page faults of `n` steps that each allocate, fill and free `buffers` buffers (like a training step's
    activations and gradients)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        held = [np.ones(size // 8) for _ in range(buffers)]
        del held
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_reallocated_buffers_do_not_fault_after_keep_freed_memory() -> None:
    assert keep_freed_memory()
    _faults_for_reallocations(2)  # the heap grows once
    # Without the settings glibc trims the freed heap top after every step and the next step faults on every
    # page again (measured: ~30,000 faults here; 0 with them).
    assert _faults_for_reallocations() < 500
