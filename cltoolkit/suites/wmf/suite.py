"""The `wmf` suite: protocol model only, so `wmf-v1` validates as a skeleton draft."""

from __future__ import annotations

from cltoolkit.components import Suite
from cltoolkit.suites.wmf.models import WmfProtocol

__all__ = ["WmfSuite"]


class WmfSuite(Suite):
    """World-model forgetting benchmark (skeleton)."""

    name = "wmf"
    protocol_model = WmfProtocol
    summary = "world-model forgetting benchmark (skeleton: not runnable yet)"
