"""Atomic file writes and the one JSON writer (sorted or ordered keys, never NaN, never `default=str`)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_text", "dump_json", "write_json"]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def dump_json(obj: Any, *, sort_keys: bool = True) -> str:
    """Indented JSON with a final newline; raises on NaN/Infinity and on non-JSON types."""
    return json.dumps(obj, indent=2, sort_keys=sort_keys, allow_nan=False, ensure_ascii=False) + "\n"


def write_json(path: Path, obj: Any, *, sort_keys: bool = True) -> None:
    atomic_write_text(path, dump_json(obj, sort_keys=sort_keys))
