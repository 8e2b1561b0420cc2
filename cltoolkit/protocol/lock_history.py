"""Locks that cannot be rewritten quietly: checks `clt protocol verify` adds to the hash comparison.

- every lock's hash equals the hash of its `.frozen.json` snapshot (read always, not only when hashes differ);
- a protocol that carries a filled results block, or a frozen / reported status, has a lock;
- in a git checkout: a lock file is not modified after the commit that added it, unless that later commit is
  declared in `registry/locks/refrozen.json` (protocol -> [{commit, sha256, reason}]: a freeze withdrawn before
  any run, for one), and it has no uncommitted change;
- in a git checkout: no erratum (`status.errata`, outside the hash) that any commit of the protocol recorded is
  missing from the protocol now: errata are added, never withdrawn.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cltoolkit.errors import InputError, ValidationFailed
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.protocol.load import load_json_file

__all__ = ["REFROZEN_FILE", "errata_problems", "history_problems", "snapshot_problems", "unlocked_problems"]

REFROZEN_FILE = "refrozen.json"
FROZEN_STAGES = ("frozen", "reported")


def snapshot_problems(snapshot: Path, lock_sha: str) -> list[str]:
    """The snapshot must exist and hash to the lock's value."""
    if not snapshot.is_file():
        return [f"{snapshot} is missing: the frozen content cannot be compared"]
    try:
        actual = protocol_hash(load_json_file(snapshot))
    except (ValidationFailed, InputError) as exc:
        return [f"{snapshot}: {line}" for line in str(exc).splitlines()]
    if actual != lock_sha:
        return [f"{snapshot} hashes to {actual}, not the lock's {lock_sha}: the lock or its snapshot was rewritten"]
    return []


def unlocked_problems(project: Project) -> list[tuple[str, str]]:
    """(protocol id, problem) for protocols that claim to be frozen or reported but have no lock."""
    out = []
    for protocol_id in project.protocol_ids():
        if project.lock_path(protocol_id).exists():
            continue
        try:
            doc = load_json_file(project.protocol_path(protocol_id))
        except (ValidationFailed, InputError):
            continue  # `clt protocol validate` names what is wrong with it
        status = doc.get("status")
        stage = status.get("stage") if isinstance(status, dict) else None
        if doc.get("results") not in (None, {}):
            out.append((protocol_id, "carries a results block but has no lock (was its lock deleted?)"))
        elif stage in FROZEN_STAGES:
            out.append((protocol_id, f"status says {stage!r} but it has no lock (was its lock deleted?)"))
    return out


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _repo_path(project: Project, path: Path) -> str | None:
    """`path` relative to the top of the git checkout holding the project, None outside a checkout."""
    root = project.root
    if _git(root, "rev-parse", "--is-inside-work-tree") is None:
        return None
    top = (_git(root, "rev-parse", "--show-toplevel") or str(root)).strip()
    return path.resolve().relative_to(Path(top).resolve()).as_posix()


def _refrozen(project: Project) -> dict[str, Any]:
    path = project.locks_dir / REFROZEN_FILE
    if not path.is_file():
        return {}
    data = load_json_file(path)
    return data if isinstance(data, dict) else {}


def history_problems(project: Project, protocol_id: str) -> tuple[list[str], list[str]]:
    """(problems, notes) from git: a lock modified after the commit that added it, or changed and not committed.

    Outside a git checkout there is nothing to check (a note says so); a shallow clone cannot show the history."""
    root = project.root
    rel = _repo_path(project, project.lock_path(protocol_id))
    if rel is None:
        return [], ["not a git checkout: lock history not checked"]
    problems, notes = [], []
    if (_git(root, "status", "--porcelain", "--", rel) or "").strip():
        problems.append(f"{rel} has uncommitted changes: a lock is written once, by `clt protocol freeze`")
    if (_git(root, "rev-parse", "--is-shallow-repository") or "").strip() == "true":
        return problems, ["shallow clone: lock history not checked"]
    commits = (_git(root, "log", "--format=%H", "--reverse", "--", rel) or "").split()
    declared = {str(e.get("commit", "")): e for e in _refrozen(project).get(protocol_id, []) if isinstance(e, dict)}
    for commit in commits[1:]:
        entry = next((e for c, e in declared.items() if c and commit.startswith(c)), None)
        if entry is None:
            problems.append(
                f"{rel} was modified in commit {commit[:12]} after the commit that added it ({commits[0][:12]}); "
                f"a frozen lock is never rewritten (a withdrawn freeze is declared in {REFROZEN_FILE})"
            )
            continue
        text = _git(root, "show", f"{commit}:{rel}")
        sha = json.loads(text).get("sha256") if text else None
        if sha != entry.get("sha256"):
            problems.append(f"{rel} at commit {commit[:12]} has {sha}, not the {entry.get('sha256')} declared")
        else:
            notes.append(f"re-frozen in {commit[:12]} (declared: {entry.get('reason', '')})")
    return problems, notes


def _errata(document: Any) -> list[tuple[str, str]]:
    status = document.get("status") if isinstance(document, dict) else None
    errata = status.get("errata") if isinstance(status, dict) else None
    return [(str(e.get("found")), str(e.get("text"))) for e in errata or [] if isinstance(e, dict)]


def errata_problems(project: Project, protocol_id: str, document: dict[str, Any]) -> list[str]:
    """Errata recorded in any commit of the protocol file but missing from `document` (the file now). Only the
    commits whose diff adds or removes an erratum's `found` line are read."""
    root = project.root
    rel = _repo_path(project, project.protocol_path(protocol_id))
    if rel is None:
        return []
    now = set(_errata(document))
    problems = []
    seen: set[tuple[str, str]] = set()
    for commit in (_git(root, "log", "-G", '"found" *:', "--format=%H", "--", rel) or "").split():
        text = _git(root, "show", f"{commit}:{rel}")
        try:
            recorded = _errata(json.loads(text)) if text else []
        except json.JSONDecodeError:
            continue
        for found, said in recorded:
            if (found, said) not in now and (found, said) not in seen:
                seen.add((found, said))
                problems.append(
                    f"{rel}: the erratum found {found} ({said[:60]}...) recorded in commit {commit[:12]} is no "
                    "longer in status.errata: errata are added, never withdrawn"
                )
    return problems
