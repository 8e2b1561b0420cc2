"""History is the reference for run records (`clt protocol verify`): a record that any commit held may later be
replaced only by a record that names it (`replaces` holds its seal); it never vanishes, and it is never rewritten
in place (an edit resealed, `replaces` scrubbed, a deleted record run again).

Read from git: every version of every `runs/**/record.json` that any commit set, merges included (each diffed
against every parent), oldest first, plus the working tree against the last commit. From a sealed version, the next
must be the same content or a record that lists its seal in `replaces`; anything else is named with the commit.
Versions from before records were sealed (version 1, no seal) vouched for nothing and are not compared. One
`git log` and one `git cat-file --batch` over the whole history.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cltoolkit.project import Project
from cltoolkit.protocol.lock_history import _ZERO, _blobs, _changes, _git, _repo_path

__all__ = ["record_history_problems"]

RECORD = "record.json"
_WORKTREE = "working tree"


def _parse(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _replaces(new: dict[str, Any]) -> set[str]:
    entries = new.get("replaces")
    return (
        {e["seal"] for e in entries if isinstance(e, dict) and isinstance(e.get("seal"), str)}
        if isinstance(entries, list)
        else set()
    )


def _transition(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str | None:
    """Why `old` -> `new` is not allowed, or None."""
    if old is None or new is None:
        return None  # unreadable in history: a problem of its own commit, named by `clt report --check` there
    seal = old.get("seal")
    if old == new or not isinstance(seal, str):
        return None  # the same record; or one from before records were sealed, which nothing could vouch for
    if seal in _replaces(new):
        return None
    if new.get("seal") != seal and new.get("replaces") is None and old.get("replaces"):
        return f"replaced without naming {seal[:19]}... in `replaces` (the earlier record's `replaces` was dropped)"
    return (
        f"changed in place: the record sealed {seal[:19]}... became one sealed {str(new.get('seal'))[:19]}... "
        "that does not name it in `replaces` (an edited and resealed record, or a re-roll)"
    )


def record_history_problems(project: Project) -> list[tuple[str, str]]:
    """(record path, problem) for every committed run record that vanished or was replaced without naming the
    record it replaced, in git history or in the working tree against the last commit. Empty outside git."""
    rel = _repo_path(project, project.runs_dir / "x")
    if rel is None:
        return []
    folder = rel.rsplit("/", 1)[0] if "/" in rel else "."
    out: list[tuple[str, str]] = [
        (path, "a committed `.seals` is ignored (each machine keeps its own, keyed by its secret): remove it from git")
        for path in (_git(project.root, "ls-files", "--full-name", "--", folder) or "").splitlines()
        if path.rsplit("/", 1)[-1] == ".seals"
    ]
    versions: dict[str, list[tuple[str, str]]] = {}
    for commit, blob, path in _changes(project.root, folder):
        if path.endswith("/" + RECORD):
            chain = versions.setdefault(path, [])
            if not chain or chain[-1][1] != blob:
                chain.append((commit, blob))
    if not versions:
        return out
    texts = _blobs(project.root, sorted({b for chain in versions.values() for _, b in chain if b != _ZERO}))
    top = Path((_git(project.root, "rev-parse", "--show-toplevel") or str(project.root)).strip())
    for path, chain in sorted(versions.items()):
        last: dict[str, Any] | None = None
        gone_in = ""
        for commit, blob in chain:
            if blob == _ZERO:
                gone_in = commit
                continue
            new = _parse(texts.get(blob))
            why = _transition(last, new)
            if why is not None:
                out.append((path, f"{why} (commit {commit[:12]})"))
            last, gone_in = new if new is not None else last, ""
        current = top / path
        if not current.is_file():
            where = f"commit {gone_in[:12]}" if gone_in else "the working tree (not committed)"
            out.append((path, f"a committed record is gone ({where}): records are replaced, never removed"))
            continue
        if gone_in:
            out.append((path, f"was deleted in commit {gone_in[:12]} and is back in the working tree"))
        try:
            now = _parse(current.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            now = None
        why = _transition(last, now)
        if why is not None:
            out.append((path, f"{why} ({_WORKTREE}, not committed)"))
    return out
