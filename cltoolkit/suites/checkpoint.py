"""Task-boundary checkpoints of a run (nav4 and crl): after each task the driver saves everything the rest of the run
depends on (nav4: the learner's network, optimiser, generators and memory; crl: SAC's networks, optimiser and
entropy coefficients, the replay buffer, the episodic memory and torch's generator; both: the method's `state_dict`,
the driver's generators, the ledger and the evaluations so far). A run interrupted later (its process killed, the
machine stopped) starts again from its last task boundary and gives the same record, timing aside.

The file (`checkpoint.pt` in the run's folder) holds data only: tensors, numbers, strings, lists and dicts (numpy
arrays as tensors), loaded with `torch.load(weights_only=True)`; beside it a MAC under the machine's secret
(`cltoolkit._io.local_mac`) and the run's identity, so a checkpoint planted, copied, or of another run is never
resumed (the run starts from the beginning). Removed once the run's output is written.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cltoolkit._io import atomic_write_bytes, atomic_write_text, local_mac, read_regular_bytes

__all__ = ["clear", "load", "save"]

FILE = "checkpoint.pt"
MAC = "checkpoint.mac"


def _tensors(value: Any) -> Any:
    """numpy arrays as tensors (tagged), recursively: what `weights_only` loading accepts."""
    if isinstance(value, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, dict):
        return {k: _tensors(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_tensors(v) for v in value]
    return value


def _arrays(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__ndarray__"}:
            return value["__ndarray__"].numpy()
        return {k: _arrays(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_arrays(v) for v in value]
    return value


def save(workdir: Path, identity: str, state: dict[str, Any]) -> None:
    """Write the checkpoint atomically, with its MAC (nothing is written where the machine has no secret)."""
    buffer = io.BytesIO()
    torch.save({"identity": identity, "state": _tensors(state)}, buffer)
    data = buffer.getvalue()
    mac = local_mac(data)
    if mac is None:
        return
    atomic_write_bytes(workdir / FILE, data)
    atomic_write_text(workdir / MAC, mac + "\n")


def load(workdir: Path, identity: str) -> dict[str, Any] | None:
    """The checkpoint of this run (`identity`), or None: absent, not this machine's, or another run's."""
    try:
        data = read_regular_bytes(workdir / FILE)
        mac = read_regular_bytes(workdir / MAC).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if mac != local_mac(data):
        return None
    saved = torch.load(io.BytesIO(data), weights_only=True)
    if not isinstance(saved, dict) or saved.get("identity") != identity:
        return None
    state: dict[str, Any] = _arrays(saved["state"])
    return state


def clear(workdir: Path) -> None:
    for name in (FILE, MAC):
        (workdir / name).unlink(missing_ok=True)
