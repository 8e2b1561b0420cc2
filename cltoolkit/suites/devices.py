"""Where a torch suite puts its models: `clt run --device auto|cpu|cuda[:N]` resolved in the worker.

`auto` is the first CUDA device when torch sees one, else the CPU; `cuda` / `cuda:N` fail with one line when torch
sees no such device (never a silent fall back to the CPU: the record would say one device and mean another)."""

from __future__ import annotations

import re

__all__ = ["DEVICE_PATTERN", "describe_device", "device_problem", "resolve_device"]

DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:[0-9]+)?)$")


def resolve_device(requested: str) -> str:
    """`auto` / `cpu` / `cuda` / `cuda:N` -> a torch device string that exists here (`cpu` or `cuda:N`)."""
    import torch

    if not DEVICE_PATTERN.match(requested):
        raise ValueError(f"device {requested!r}: expected auto, cpu, cuda or cuda:N")
    if requested == "cpu":
        return "cpu"
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "auto":
        return "cuda:0" if available else "cpu"
    index = int(requested.split(":", 1)[1]) if ":" in requested else 0
    if index >= available:
        seen = f"{available} CUDA device(s)" if available else "no CUDA device (torch.cuda.is_available() is False)"
        raise RuntimeError(f"device {requested!r} requested but torch sees {seen}")
    return f"cuda:{index}"


def describe_device(device: str) -> str:
    """The device as a record states it: `cpu`, or `cuda:N (<name>)`."""
    if not device.startswith("cuda"):
        return device
    import torch

    return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"


def device_problem(device: str) -> str | None:
    """`Suite.device_problem` of a torch suite: why `device` cannot be had here, or None."""
    try:
        resolve_device(device)
    except (RuntimeError, ValueError) as exc:
        return f"{exc}; use --device cpu or auto"
    return None
