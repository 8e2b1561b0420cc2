"""A protocol's own package stack (`packages` in the protocol; issue #55, docs/cw10.md's plan).

At freezing, `resolve` asks pip's resolver, in dry-run mode with a JSON report, for the protocol's requirements and
everything they depend on (as if nothing were installed), and `lock_text` writes what it chose as one line per
distribution, `name==version --hash=sha256:<hex>`, sorted: `registry/locks/<id>.packages.txt`, whose SHA-256 the lock
records. A distribution pip cannot name a SHA-256 for (a local folder, a VCS checkout) is refused: the file must say
which bytes run. `build` makes a virtual environment from that file alone (`pip install --no-deps --require-hashes`),
under the user's cache keyed by the file's digest and the toolkit checkout, layered on the toolkit's environment: a
`.pth` file puts the toolkit's source (the code the lock pins is the code that runs) and then the toolkit environment's
site folders on its path, after its own, so the stack's distributions (mujoco 3.3.0, say) shadow the toolkit's versions
of the same names and everything else (pydantic, scipy) is the toolkit's. A marker file names the digest, which
`current` reads back in a worker.

pip reads its indexes from the user's configuration; `pip_args` adds options (the tests pass `--no-index
--find-links <a local wheel store>`, so they stay on this machine). Light: subprocess and json only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cltoolkit.errors import CheckFailed

__all__ = [
    "MARKER",
    "Pinned",
    "build",
    "current",
    "environment_dir",
    "file_digest",
    "interpreter",
    "lock_text",
    "pip_options",
    "resolve",
]

MARKER = "clt-environment"
"""The file at an environment's root that names the digest of the package file it was built from."""


@dataclass(frozen=True, order=True)
class Pinned:
    """One distribution of a resolved stack."""

    name: str
    version: str
    sha256: str

    def line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


def _hash(item: dict[str, object]) -> str | None:
    info = item.get("download_info")
    archive = info.get("archive_info") if isinstance(info, dict) else None
    if not isinstance(archive, dict):
        return None
    hashes = archive.get("hashes")
    if isinstance(hashes, dict) and isinstance(hashes.get("sha256"), str):
        return str(hashes["sha256"])
    legacy = archive.get("hash")
    if isinstance(legacy, str) and legacy.startswith("sha256="):
        return legacy.split("=", 1)[1]
    return None


def resolve(requirements: Sequence[str], python: str | None = None, pip_args: Sequence[str] = ()) -> list[Pinned]:
    """pip's resolution of `requirements` and their dependencies, as pinned distributions (sorted by name)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        cmd += ["--report", str(report), "--only-binary=:all:"]
        if python is not None:
            cmd += ["--python-version", python]
        cmd += [*pip_args, *requirements]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise CheckFailed(f"packages: pip could not resolve {', '.join(requirements)}: {tail}")
        data = json.loads(report.read_text())
    pins, unhashed = [], []
    for item in data.get("install", []):
        meta = item.get("metadata", {})
        name, version, digest = str(meta.get("name", "?")), str(meta.get("version", "?")), _hash(item)
        if digest is None:
            unhashed.append(f"{name} {version}")
            continue
        pins.append(Pinned(name.lower().replace("_", "-"), version, digest))
    if unhashed:
        raise CheckFailed(
            f"packages: pip names no SHA-256 for {', '.join(unhashed)} (a local folder or a VCS checkout?): the "
            "package file must say which bytes run"
        )
    return sorted(pins)


def pip_options() -> list[str]:
    """Options for every pip call of this module, from `CLT_PIP_ARGS` (shell words: `--no-index --find-links
    /srv/wheels` for a machine with a local wheel store and no index; the tests use it to stay on this machine)."""
    import shlex

    return shlex.split(os.environ.get("CLT_PIP_ARGS", ""))


def lock_text(pins: Sequence[Pinned]) -> str:
    """The package file: a header and one hash-pinned line per distribution."""
    header = "# clt package stack: resolved at freezing; `clt env build` installs exactly this (pip --require-hashes)\n"
    return header + "".join(p.line() + "\n" for p in sorted(pins))


def file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def environment_dir(digest: str, layer: Sequence[str] = ()) -> Path:
    """Where the environment of a package file lives: `$CLT_ENV_CACHE` or `~/.cache/clt/envs`, then the digest and,
    when it is layered on a toolkit, a digest of that layer (the toolkit's source folder and site folders): two
    checkouts of the toolkit (a worktree that runs a frozen protocol beside the one being edited) never share an
    environment whose `.pth` file points at the other's code."""
    root = Path(os.environ.get("CLT_ENV_CACHE") or Path.home() / ".cache" / "clt" / "envs")
    name = digest.removeprefix("sha256:")[:32]
    if layer:
        name += "-" + hashlib.sha256("".join(f"{p}\n" for p in layer).encode()).hexdigest()[:12]
    return root / name


def interpreter(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def build(package_file: Path, toolkit_root: Path, pip_args: Sequence[str] = ()) -> Path:
    """The environment of `package_file` (built once, then reused): a virtual environment holding exactly the file's
    distributions, checked against their hashes, then `toolkit_root` (the folder holding `cltoolkit/`) and this
    interpreter's site folders on its path. Built in a temporary folder and moved into place, so a failed build leaves
    nothing behind."""
    import sysconfig

    digest = file_digest(package_file)
    toolkit_site = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    below = [str(toolkit_root.resolve()), *toolkit_site]
    target = environment_dir(digest, below)
    if (target / MARKER).is_file() and (target / MARKER).read_text().strip() == digest:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(staging)], check=True, capture_output=True)
        python = interpreter(staging)
        install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--require-hashes"]
        install += ["--only-binary=:all:", "--no-compile", "--quiet", *pip_args, "-r", str(package_file)]
        done = subprocess.run(install, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise CheckFailed(f"{package_file}: the environment could not be built: {tail}")
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(site, "clt-toolkit.pth").write_text("".join(f"{p}\n" for p in below))
        (staging / MARKER).write_text(digest + "\n")
        if (target / MARKER).is_file() and (target / MARKER).read_text().strip() == digest:
            return target  # another process (a second run on this node) finished the same build first
        if target.exists():  # a broken earlier build
            shutil.rmtree(target)
        try:
            staging.rename(target)
        except OSError:
            if not ((target / MARKER).is_file() and (target / MARKER).read_text().strip() == digest):
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def current() -> str | None:
    """The digest of the package file this interpreter's environment was built from (None: not a clt
    environment)."""
    marker = Path(sys.prefix) / MARKER
    return marker.read_text().strip() if marker.is_file() else None
