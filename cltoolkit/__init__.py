"""clt: protocol-first continual-learning evaluations that cannot be cherry-picked."""

from __future__ import annotations

__version__ = "0.1.0"
DISTRIBUTION = "clt-prereg"
"""The name this project installs under (`pip install clt-prereg`); the import package is `cltoolkit`, the command
`clt`. The package index's `cltoolkit` and `clt` are unrelated projects."""

__all__ = ["DISTRIBUTION", "__version__"]
