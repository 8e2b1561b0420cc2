"""Provenance of a run: toolkit, git commit and dirty flag, package versions, platform."""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from cltoolkit import __version__

__all__ = ["git_state", "hardware_text", "package_versions", "platform_text", "toolkit_version"]

_PACKAGES = ("numpy", "scipy", "pydantic", "torch", "gymnasium", "minigrid", "mujoco", "dm_control", "ray")


def toolkit_version() -> str:
    return __version__


@functools.cache
def git_state(root: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding `root`, or (None, None) outside git. Dirty means uncommitted
    changes to tracked files other than outputs (runs/, reports/, pilot-runs/, protocols/, whose content the
    protocol hash covers)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            # outputs (records, reports, results blocks) are not code: changes there do not make a run dirty
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!runs",
                ":!reports",
                ":!pilot-runs",
                ":!protocols",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
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


@functools.cache
def hardware_text() -> str:
    """CPU model and logical core count (from /proc/cpuinfo where present)."""
    import os

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} x{os.cpu_count() or 1}"


def python_version() -> str:
    return sys.version.split()[0]
