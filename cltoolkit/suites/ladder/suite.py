"""The `ladder` suite: five rungs of world-model evaluation on a scalar linear system (seed 001)."""

from __future__ import annotations

from collections.abc import Iterator

from cltoolkit.components import Suite
from cltoolkit.errors import Problem
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.suites.ladder.models import LadderProtocol

__all__ = ["LadderSuite"]


class LadderSuite(Suite):
    """The world-model evaluation ladder."""

    name = "ladder"
    protocol_model = LadderProtocol
    analysis = "ladder"
    summary = "world-model evaluation ladder on a scalar linear system"

    def check(self, protocol: ProtocolBase) -> Iterator[Problem]:
        assert isinstance(protocol, LadderProtocol)
        declared = {m.id for m in protocol.metrics}
        rungs = protocol.rungs
        for pointer, metric in (
            ("/rungs/oneStep/metric", rungs.oneStep.metric),
            ("/rungs/rollout/metric", rungs.rollout.metric),
            ("/rungs/intervention/metric", rungs.intervention.metric),
            ("/rungs/control/metric", rungs.control.metric),
            ("/rungs/control/transferMetric", rungs.control.transferMetric),
        ):
            if metric not in declared:
                yield Problem(pointer, f"metric {metric!r} is not among the protocol's metrics")
