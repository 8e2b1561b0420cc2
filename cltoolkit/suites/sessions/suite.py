"""The `sessions` suite: protocol model only, so `sessions-v1` validates as a skeleton draft."""

from __future__ import annotations

from cltoolkit.components import Suite
from cltoolkit.suites.sessions.models import SessionsProtocol

__all__ = ["SessionsSuite"]


class SessionsSuite(Suite):
    """Held-out sessions toy of the experimental-design chapter (skeleton)."""

    name = "sessions"
    protocol_model = SessionsProtocol
    summary = "held-out sessions example (skeleton: not runnable yet)"
