"""Atomic file writes and the one JSON writer (sorted or ordered keys, never NaN, never `default=str`)."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "NotRegularFile",
    "atomic_write_bytes",
    "atomic_write_text",
    "dump_json",
    "dump_protocol",
    "file_mode",
    "local_mac",
    "open_append_nofollow",
    "read_regular_bytes",
    "write_json",
]


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import (single-threaded): os.umask has no read-only form


def file_mode() -> int:
    """The mode a plain `open()` would give a new file here: 0o666 less the process umask."""
    return 0o666 & ~_UMASK


class NotRegularFile(OSError):
    """A path that should be a regular file is a symbolic link, a folder, a device or a pipe."""


def read_regular_bytes(path: Path) -> bytes:
    """Read a regular file without following a symbolic link at `path` (records, locks and caches are evidence:
    a link planted in their place is refused, not followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the last component is a symbolic link
            raise NotRegularFile(exc.errno, "is a symbolic link, not a regular file", str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(0, "not a regular file", str(path))
        parts = []  # os.read directly: a buffered file object per read cost a third of reading 10,000 records
        want = info.st_size + 1  # the whole file in one read, and the next read sees its end
        while chunk := os.read(fd, want):
            parts.append(chunk)
            want = 1 << 20  # the file grew while being read: read on to its end
        return b"".join(parts)  # one part is returned as it is, not copied
    finally:
        os.close(fd)


def open_append_nofollow(path: Path) -> Any:
    """Open a log for appending (binary), refusing to follow a symbolic link planted at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFile(0, "not a regular file", str(path))
    return os.fdopen(fd, "ab")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), file_mode())  # mkstemp makes 0600; give the usual umask mode
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


def dump_json(obj: Any, *, sort_keys: bool = True, row_lists: tuple[str, ...] = ()) -> str:
    """Indented JSON with a final newline; raises on NaN/Infinity and on non-JSON types.

    Lists of objects under a key named in `row_lists` (e.g. `perRun`) are written one compact object per line:
    readable, diff-friendly, and fast for tables of thousands of rows.
    """
    rows: list[list[Any]] = []

    def lift(value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key in row_lists and isinstance(item, list) and item and all(isinstance(r, dict) for r in item):
                    rows.append(item)
                    out[key] = f"\x00rows{len(rows) - 1}\x00"
                else:
                    out[key] = lift(item)
            return out
        if isinstance(value, list):
            return [lift(v) for v in value]
        return value

    text = json.dumps(
        lift(obj) if row_lists else obj, indent=2, sort_keys=sort_keys, allow_nan=False, ensure_ascii=False
    )
    row = json.JSONEncoder(sort_keys=sort_keys, allow_nan=False, ensure_ascii=False).encode  # one, not one a row
    for i, items in enumerate(rows):
        token = f'"\\u0000rows{i}\\u0000"'
        at = text.index(token)
        line = text[text.rindex("\n", 0, at) + 1 : at]  # e.g. '    "perRun": '
        indent = len(line) - len(line.lstrip())
        pad = " " * (indent + 2)
        body = ",\n".join(pad + row(r) for r in items)
        text = text[:at] + "[\n" + body + "\n" + " " * indent + "]" + text[at + len(token) :]
    return text + "\n"


def dump_results(results: Any) -> str:
    """A results block as `clt report` writes it on its own (`results.json`): its key order, `perRun` rows one per
    line."""
    return dump_json(results, sort_keys=False, row_lists=("perRun",))


def dump_protocol(document: Any, results_text: str | None = None) -> str:
    """A protocol document as every clt writer writes it: its own key order, `perRun` rows one per line.

    `results_text`: the document's `results` already written by `dump_results` (a report writes both files; a
    block of 10,000 rows is then serialized once): spliced in at the protocol's indentation, the same text."""
    if results_text is None or "results" not in document:
        return dump_json(document, sort_keys=False, row_lists=("perRun",))
    token = "\x00results\x00"
    text = dump_json({**document, "results": token}, sort_keys=False, row_lists=("perRun",))
    nested = results_text.rstrip("\n").replace("\n", "\n  ")
    return text.replace(json.dumps(token), nested, 1)


def write_json(path: Path, obj: Any, *, sort_keys: bool = True) -> None:
    atomic_write_text(path, dump_json(obj, sort_keys=sort_keys))


_KEY: list[bytes | None] = []


def _local_key() -> bytes | None:
    """This machine's secret for local caches (`$XDG_CACHE_HOME/clt/local.key`, else `~/.cache/clt/local.key`):
    32 random bytes made on first use, readable by the user only; None where it cannot be made or read (then
    nothing cached is trusted)."""
    if _KEY:
        return _KEY[0]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clt"
    path = base / "local.key"
    key: bytes | None = None
    try:
        base.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(os.urandom(32))
        key = read_regular_bytes(path)
        if len(key) != 32:
            key = None
    except OSError:
        key = None
    _KEY.append(key)
    return key


def local_mac(data: bytes) -> str | None:
    """`hmac-sha256:<hex>` of `data` under this machine's secret: what a local cache (the store's `.seals`, wmf's
    stage files) records so that a file committed, copied or planted from elsewhere never vouches for content; None
    where the machine has no secret."""
    import hmac

    key = _local_key()
    if key is None:
        return None
    return "hmac-sha256:" + hmac.digest(key, data, "sha256").hex()  # one call (OpenSSL's): 10,000 per report
