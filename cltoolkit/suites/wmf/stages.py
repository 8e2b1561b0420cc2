"""Shared stages: work that is identical across runs (collected data, the task-A phase of the plain-RSSM methods, the
from-scratch reference models) is computed once and reused, keyed by a content hash of everything that determines
it: the stage's inputs (protocol values, seed, the hashes of the stages it consumes) and the code that computes it
(the wmf source files and the torch version). A run records the hash of every stage it used and which of them it
loaded instead of computing.

The cache lives in the run store (`<store>/.wmf-stages/<hash>.pt`), written atomically; a file lock per hash keeps
two workers from computing one stage twice (the second waits and loads; `busy` lets it do other work first).
Deleting the folder loses nothing but time: the same inputs recompute bit-identical stages.

A stage file holds data only (tensors, lists, numbers: `encode` turns other values into those) and is loaded with
`torch.load(weights_only=True)`, so a planted file cannot run code; beside it `<hash>.sha256` holds the MAC of its
bytes under this machine's secret (`cltoolkit._io.local_mac`), written by the process that computed it: a file whose
bytes do not match is refused, and a stage without this machine's MAC (planted with a matching plain digest, copied
from another machine, or written before stages were keyed) is never loaded but computed again."""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from cltoolkit._io import atomic_write_text, local_mac, read_regular_bytes

__all__ = ["StageCache", "code_fingerprint"]

FOLDER = ".wmf-stages"
STAGE_SOURCES = (
    "api.py",
    "driver.py",
    "envs.py",
    "evaluate.py",
    "method_models.py",
    "methods.py",
    "models.py",
    "stages.py",
    "train.py",
    "world.py",
)


@cache
def code_fingerprint() -> str:
    """sha256 of the wmf source files that compute stages and the torch version (a change to either makes new stages;
    the analysis, metric declarations and suite wiring do not enter, so editing them keeps the cache)."""
    import torch

    digest = hashlib.sha256(torch.__version__.encode())
    for path in sorted(Path(__file__).parent / name for name in STAGE_SOURCES):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class StageCache:
    """get(name, key, compute) -> (value, sha256, reused)."""

    def __init__(self, store: Path) -> None:
        self.folder = store / FOLDER
        self.used: dict[str, str] = {}
        """stage name -> hash (every stage this run used)."""
        self.reused: list[str] = []
        """`<name>:<hash>` of stages loaded rather than computed."""

    def key_hash(self, key: dict[str, Any]) -> str:
        text = json.dumps({**key, "code": code_fingerprint()}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def busy(self, key: dict[str, Any]) -> bool:
        """Whether another process is computing the stage of `key` now: it holds the stage's lock and has not
        written the stage yet (`get` would wait for it)."""
        sha = self.key_hash(key)
        lock_path = self.folder / f"{sha}.lock"
        if (self.folder / f"{sha}.pt").exists() or not lock_path.is_file() or lock_path.is_symlink():
            return False
        fd = os.open(lock_path, os.O_RDWR | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when fd closes
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def get(
        self,
        name: str,
        key: dict[str, Any],
        compute: Callable[[], Any],
        encode: Callable[[Any], Any] = lambda v: v,
        decode: Callable[[Any], Any] = lambda v: v,
    ) -> tuple[Any, str]:
        """The stage's value: loaded when cached (checked against its digest, as data only), else computed and
        saved. `encode` / `decode` turn the value into tensors, lists and numbers and back."""
        import torch

        sha = self.key_hash(key)
        self.used[name] = sha
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.folder.is_symlink() or not self.folder.resolve().is_relative_to(self.folder.parent.resolve()):
            raise RuntimeError(
                f"{self.folder} is a link out of its store: stage files are written inside the store only"
            )
        path, digest_path = self.folder / f"{sha}.pt", self.folder / f"{sha}.sha256"
        fd = os.open(self.folder / f"{sha}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)  # never through a link
        with os.fdopen(fd, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            want = read_regular_bytes(digest_path).decode().strip() if digest_path.exists() else None
            if path.exists() and want is not None and want.startswith("hmac-sha256:"):
                data = read_regular_bytes(path)
                got = local_mac(data)
                if want != got:
                    raise RuntimeError(
                        f"stage cache {path} does not match its MAC under this machine's key: it was changed, "
                        f"planted, or copied from another machine. Delete {self.folder} (it only costs time)"
                    )
                self.reused.append(f"{name}:{sha}")
                return decode(torch.load(io.BytesIO(data), weights_only=True)), sha
            # no stage, or one without this machine's MAC (an older unkeyed digest, or none): never loaded; computed
            value = compute()
            buffer = io.BytesIO()
            torch.save(encode(value), buffer)
            data = buffer.getvalue()
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{sha}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            mac = local_mac(data)
            if mac is not None:  # without a local key nothing is written that could vouch for the stage
                atomic_write_text(digest_path, mac + "\n")
        return value, sha
