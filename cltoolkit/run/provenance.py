"""Provenance of a run: toolkit, git commit and dirty flag, package versions, platform."""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from cltoolkit import __version__

__all__ = ["git_state", "package_versions", "platform_text", "toolkit_version"]

_PACKAGES = ("numpy", "scipy", "pydantic", "torch", "gymnasium", "minigrid", "mujoco", "dm_control", "ray")


def toolkit_version() -> str:
    return __version__


@functools.cache
def git_state(root: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding `root`, or (None, None) outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root, capture_output=True, text=True, check=True, timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit, bool(status.strip())


@functools.cache
def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def platform_text() -> str:
    return f"{platform.system()} {platform.release()} {platform.machine()}"


def python_version() -> str:
    return sys.version.split()[0]
