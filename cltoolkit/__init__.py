"""clt: protocol-first continual-learning evaluations that cannot be cherry-picked."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
