"""Task-boundary checkpoints of a run (nav4 and crl): after each task the driver saves everything the rest of the run
depends on (nav4: the learner's network, optimiser, generators and memory; crl: SAC's networks, optimiser and
entropy coefficients, the replay buffer, the episodic memory and torch's generator; both: the method's `state_dict`,
the driver's generators, the ledger and the evaluations so far). A run interrupted later (its process killed, the
machine stopped) starts again from its last task boundary and gives the same record, timing aside.

The file (`checkpoint.pt` in the run's folder) holds data only: tensors, numbers, strings, lists and dicts (numpy
arrays as tensors), loaded with `torch.load(weights_only=True)`; beside it a MAC under the machine's secret
(`cltoolkit._io.local_mac`) and the run's identity, so a checkpoint planted, copied, or of another run is never
resumed (the run starts from the beginning, and its log says why). The identity (`identity`) covers the protocol's
content without its `status` and `results`, which are edited outside the hash while runs go on (a note, a report).
Removed once the run's output is written.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cltoolkit._io import atomic_write_bytes, atomic_write_text, local_mac, read_regular_bytes

__all__ = ["clear", "identity", "load", "not_resumed", "save"]

FILE = "checkpoint.pt"
MAC = "checkpoint.mac"


def identity(protocol: Any, *parts: Any) -> str:
    """What a checkpoint must match to be resumed: the protocol's content (its pydantic model, without `status` and
    `results`) and the run's own parts (method, hyperparameters, seed, order or sample policy)."""
    import hashlib
    import json

    content = protocol.model_dump(mode="json", exclude={"status", "results"})
    return hashlib.sha256(json.dumps([content, *parts], sort_keys=True).encode()).hexdigest()


def not_resumed(workdir: Path) -> str | None:
    """The log line for a run that found a checkpoint in its folder and did not resume it (None: there was none)."""
    if not (workdir / FILE).is_file():
        return None
    return (
        "a checkpoint in this run's folder was not resumed: it is another run's (other protocol content, method, "
        "hyperparameters or seed), unreadable, or not this machine's; the run starts from its first task"
    )


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
