"""Provenance of a run: toolkit, git commit and dirty flag, package versions, platform."""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from cltoolkit import __version__

__all__ = [
    "EVALUATOR",
    "component_digest",
    "component_source",
    "cpu_text",
    "evaluator_sources",
    "git_state",
    "hardware_text",
    "hostname",
    "package_versions",
    "platform_text",
    "toolkit_digest",
    "toolkit_version",
    "tracked_files",
]

_PACKAGES = ("numpy", "scipy", "pydantic", "torch", "gymnasium", "minigrid", "mujoco", "dm_control", "ray")


def toolkit_version() -> str:
    return __version__


def tracked_files(folder: Path) -> set[str] | None:
    """Paths relative to `folder` that git's index tracks under it; None where `folder` is missing, outside git, or
    git cannot answer."""
    if not folder.is_dir():
        return None
    try:
        done = subprocess.run(["git", "ls-files", "-z"], cwd=folder, capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return {p for p in done.stdout.decode("utf-8", "replace").split("\0") if p}


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


def hostname() -> str:
    import socket

    return socket.gethostname()


def platform_text() -> str:
    return f"{platform.system()} {platform.release()} {platform.machine()}"


def cpu_text(cpuinfo: str, fallback: str) -> str:
    """The processor as `/proc/cpuinfo`'s first block names it: its model name and, on x86, its family and model
    numbers (a virtual machine may name only "AMD EPYC"; the numbers tell its generations apart, and with them the
    kernels BLAS libraries pick at run time, which decide the last digits of their results)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the first processor's block
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or fallback
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


@functools.cache
def hardware_text() -> str:
    """CPU model (family and model numbers on x86) and logical core count, from /proc/cpuinfo where present."""
    import os

    model = platform.processor() or platform.machine()
    try:
        model = cpu_text(Path("/proc/cpuinfo").read_text(), model)
    except OSError:
        pass
    return f"{model} x{os.cpu_count() or 1}"


def python_version() -> str:
    return sys.version.split()[0]


@functools.cache
def _distribution_of(module: str) -> tuple[str | None, str | None]:
    top = module.split(".")[0]
    if top == "cltoolkit":  # an editable install maps no files to its distribution, whose name is not the package's
        from cltoolkit import DISTRIBUTION

        names = [DISTRIBUTION]
    else:
        names = metadata.packages_distributions().get(top, []) or [top]
    name = sorted(names)[0]
    try:
        return name, metadata.version(name)
    except metadata.PackageNotFoundError:
        return None, None


@functools.cache
def _source_digest(root: str, single_file: bool, data: bool = False) -> str:
    """SHA-256 over (relative path, bytes) of the `.py` files under `root` (with `data`, every file but caches and
    hidden ones: a plugin's package data is its code too), or of the one file, in path order."""
    base = Path(root)
    if single_file:
        return _files_digest(base.parent, [base])
    pattern = "*" if data else "*.py"
    files = sorted(
        p
        for p in base.rglob(pattern)
        if p.is_file()
        and "__pycache__" not in p.parts
        and not any(part.startswith(".") for part in p.relative_to(base).parts)
        and p.suffix != ".pyc"
    )
    return _files_digest(base, files)


def _files_digest(base: Path, files: list[Path]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in files:
        rel = path.relative_to(base).as_posix()
        data = path.read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return "sha256:" + digest.hexdigest()


def _project_modules(module: str, origin: str) -> list[Path]:
    """The file of a top-level module outside any package (a project's `mymethods.py`) and of every module it imports
    from its own folder, read from its `import` statements, recursively: the project code a run of it loads.
    Installed packages are never followed."""
    import ast
    import importlib.util

    folder = Path(origin).resolve().parent
    files, stack = {Path(origin).resolve()}, [Path(origin).resolve()]
    while stack:
        try:
            tree = ast.parse(stack.pop().read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        for name in sorted(names):
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError, AttributeError):
                continue
            found = spec.origin if spec is not None else None
            if not found or not found.endswith(".py"):
                continue
            path = Path(found).resolve()
            inside = folder in path.parents and not {"site-packages", "dist-packages"} & set(path.parts)
            if inside and path not in files:
                files.add(path)
                stack.append(path)
    return sorted(files)


EVALUATOR = {
    "evaluator:gatekeeper": "cltoolkit.gatekeeper.gates:decide_gates",
    "evaluator:stats": "cltoolkit.stats.paired:__name__",
}
"""The toolkit's own code that decides results, pinned in every lock beside the protocol's components: the
gatekeeper (refusal rules, gate decisions, the results block) and the statistics (tests, intervals, corrections).
Each digest covers its whole package folder, as a component's does."""

NO_SOURCE = "sha256:" + "0" * 64
"""The digest of a component with no source files to read (built-in or compiled; never written by `amend-code`)."""


def toolkit_digest() -> str:
    """The digest of the toolkit's own `.py` files (the whole `cltoolkit` package, as installed or checked out)."""
    import cltoolkit

    return _source_digest(str(Path(cltoolkit.__file__).parent), False)


def component_digest(target: str) -> str:
    """The digest of a registered component's (`module:attr`) source files: the package folder of its module (for a
    plugin's package, every file in it, data included), or, for a top-level module (a project's own), its file and
    the project modules it uses (`_project_modules`)."""
    import importlib.util

    module = target.split(":", 1)[0]
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py"):
        return NO_SOURCE  # built-in, compiled, or not importable from here: no source files to digest
    toolkit = module == "cltoolkit" or module.startswith("cltoolkit.")
    if "." in module or Path(origin).name == "__init__.py":  # a package: its folder, data included for a plugin
        return _source_digest(str(Path(origin).parent), False, not toolkit)
    files = _project_modules(module, origin)
    if len(files) == 1:
        return _source_digest(origin, True)
    return _files_digest(Path(origin).resolve().parent, files)


def evaluator_sources() -> dict[str, dict[str, str | None]]:
    """`evaluator:<part>` -> the source of the toolkit's gatekeeper and statistics code (`EVALUATOR`)."""
    return {name: component_source(target) for name, target in EVALUATOR.items()}


def component_source(target: str) -> dict[str, str | None]:
    """Where the code of a registered component (`module:attr`) comes from: its distribution and version (finding
    those reads every installed distribution's file list: a run pays it once, `clt report` never) and the digest of
    its source files (`component_digest`)."""
    distribution, version = _distribution_of(target.split(":", 1)[0])
    return {
        "target": target,
        "distribution": distribution,
        "version": version,
        "sourceSha256": component_digest(target),
    }
