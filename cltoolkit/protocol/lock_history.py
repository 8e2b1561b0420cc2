"""Locks that cannot be rewritten quietly: checks `clt protocol verify` adds to the hash comparison.

- every lock's hash equals the hash of its `.frozen.json` snapshot (read always, not only when hashes differ);
- a protocol that carries a filled results block, or a frozen / reported status, has a lock;
- in a git checkout: a lock file is not modified after the commit that added it, unless that later commit is
  declared in `registry/locks/refrozen.json` (protocol -> [{commit, sha256, reason}]: a freeze withdrawn before
  any run, for one), and it has no uncommitted change;
- in a git checkout: no erratum (`status.errata`, outside the hash) that any commit of the protocol recorded is
  missing from the protocol now: errata are added, never withdrawn;
- in a git checkout: a lock's `frozenOn` does not precede the commit that added it, nor an erratum's or a code
  amendment's date the freeze, by more than a day (clock skew); a lock committed after locks began to pin code
  pins it (`CODE_PINNED_SINCE`).
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from cltoolkit.errors import InputError, ValidationFailed
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.protocol.load import load_json_file

__all__ = [
    "CODE_PINNED_SINCE",
    "REFROZEN_FILE",
    "dating_problems",
    "errata_problems",
    "gone_lock_problems",
    "history_problems",
    "in_git_checkout",
    "lock_commit",
    "refrozen_problems",
    "snapshot_problems",
    "unlocked_problems",
]

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


def in_git_checkout(folder: Path) -> bool:
    """Whether `folder` is inside a git checkout (the history checks of `verify` can run there)."""
    return _git(folder, "rev-parse", "--is-inside-work-tree") is not None


def lock_commit(project: Project, protocol_id: str) -> str | None:
    """The short id of the last commit that wrote `protocol_id`'s lock, None outside a git checkout or for a lock
    never committed: a checkout of it holds the code the lock pinned (where the freeze was committed with its
    code; `clt run` there checks it)."""
    path = _repo_path(project, project.lock_path(protocol_id))
    if path is None:
        return None
    out = (_git(project.root, "log", "-1", "--format=%h", "--", path) or "").strip()
    return out or None


def _repo_path(project: Project, path: Path) -> str | None:
    """`path` relative to the top of the git checkout holding the project, None outside a checkout."""
    root = project.root
    if _git(root, "rev-parse", "--is-inside-work-tree") is None:
        return None
    top = (_git(root, "rev-parse", "--show-toplevel") or str(root)).strip()
    try:  # the folder resolved, the file itself not followed (a link is named by the caller, never read through)
        return (path.parent.resolve() / path.name).relative_to(Path(top).resolve()).as_posix()
    except ValueError:
        return None


_ZERO = "0" * 40


def _refrozen(project: Project) -> tuple[dict[str, list[dict[str, str]]], list[str]]:
    """The declared re-freezes (protocol -> [{commit, sha256, reason}]) and one line per malformed part."""
    path = project.locks_dir / REFROZEN_FILE
    if not path.is_file():
        return {}, []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {}, [f"{path}: not readable JSON ({exc})"]
    if not isinstance(data, dict):
        return {}, [f"{path}: must be an object of protocol id -> list of {{commit, sha256, reason}}"]
    out: dict[str, list[dict[str, str]]] = {}
    problems = []
    for pid, entries in data.items():
        for i, entry in enumerate(entries if isinstance(entries, list) else [None]):
            ok = isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("commit", "sha256", "reason"))
            if not ok:
                problems.append(f"{path}: /{pid}/{i} must be {{commit, sha256, reason}}, each a string")
                continue
            if not re.fullmatch(r"[0-9a-f]{40}", entry["commit"]):
                problems.append(f"{path}: /{pid}/{i}/commit {entry['commit']!r} must name a full 40-hex commit")
                continue
            out.setdefault(pid, []).append(entry)
    return out, problems


def _changes(root: Path, where: str) -> list[tuple[str, str, str]]:
    """(commit, blob, path) for every file under `where` that any commit set, merges included (each diffed against
    every parent), oldest first; a blob of zeros is a deletion."""
    text = _git(root, "log", "--full-history", "-m", "--reverse", "--raw", "--no-abbrev", "--format=@%H", "--", where)
    out = []
    commit = ""
    for line in (text or "").splitlines():
        if line.startswith("@"):
            commit = line[1:].strip()
        elif line.startswith(":") and "\t" in line:
            meta, path = line.split("\t", 1)
            out.append((commit, meta.split()[3], path))
    return out


def _versions(root: Path, rel: str) -> list[tuple[str, str]]:
    """(commit, blob) for every commit that set the file to a content, merges included (each diffed against every
    parent), oldest first; a blob of zeros is a deletion."""
    text = _git(root, "log", "--full-history", "-m", "--reverse", "--raw", "--no-abbrev", "--format=@%H", "--", rel)
    out: list[tuple[str, str]] = []
    commit = ""
    for line in (text or "").splitlines():
        if line.startswith("@"):
            commit = line[1:].strip()
        elif line.startswith(":"):
            blob = line.split()[3]
            if not out or out[-1] != (commit, blob):
                out.append((commit, blob))
    return out


def refrozen_problems(project: Project) -> list[str]:
    """`refrozen.json` is committed and only grows (every entry any commit held is still there)."""
    root = project.root
    path = project.locks_dir / REFROZEN_FILE
    rel = _repo_path(project, path)
    if rel is None:
        return []
    problems = []
    if path.exists() and (_git(root, "status", "--porcelain", "--untracked-files=all", "--", rel) or "").strip():
        problems.append(f"{rel} has uncommitted changes: a declared re-freeze counts only once it is committed")
    now, _ = _refrozen(project)
    held = {(pid, e["sha256"], e["commit"]) for pid, entries in now.items() for e in entries}
    for commit, blob in _versions(root, rel):
        if blob == _ZERO:
            continue
        try:
            old = json.loads(_git(root, "cat-file", "-p", blob) or "{}")
        except json.JSONDecodeError:
            continue
        for pid, entries in old.items() if isinstance(old, dict) else []:
            for e in entries if isinstance(entries, list) else []:
                if not isinstance(e, dict):
                    continue
                prefix = str(e.get("commit", ""))
                if not any(p == pid and sha == e.get("sha256") and c.startswith(prefix) for p, sha, c in held):
                    problems.append(
                        f"{rel}: the entry {pid} {prefix[:12]} recorded in commit {commit[:12]} is gone: "
                        "re-freezes are declared, never withdrawn"
                    )
    return sorted(set(problems))


def _withdrawn_hash_in_use(project: Project, protocol_id: str, sha: str) -> list[str]:
    """Records and results blocks that carry a hash a re-freeze withdrew."""
    out = []
    runs = project.runs_dir / protocol_id
    for record in sorted(runs.glob("*/record.json")) if runs.is_dir() else []:
        try:
            carried = json.loads(record.read_text(encoding="utf-8")).get("protocol", {}).get("sha256")
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        if carried == sha:
            out.append(f"{record.relative_to(project.root)}")
    blocks = [project.protocol_path(protocol_id)]
    folder = project.reports_dir / protocol_id
    blocks += sorted(folder.glob("*/results.json")) if folder.is_dir() else []
    for path in blocks:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        block = data.get("results") if path.name != "results.json" else data
        if isinstance(block, dict) and block.get("protocolSha256") == sha:
            out.append(f"{path.relative_to(project.root)}")
    return out + _historic_uses(project, protocol_id, sha)


def _historic_uses(project: Project, protocol_id: str, sha: str) -> list[str]:
    """Records and results blocks of the withdrawn hash that any commit held (a declaration of "withdrawn before any
    run" is checked against history, not only against the working tree)."""
    out = []
    for folder, kind in ((project.runs_dir / protocol_id, "record"), (project.protocols_dir, "results")):
        rel = _repo_path(project, folder / "x")
        if rel is None:
            return []
        seen: dict[str, tuple[str, str]] = {}
        for commit, blob, path in _changes(project.root, rel.rsplit("/", 1)[0]):
            wanted = path.endswith("/record.json") if kind == "record" else path.endswith(f"/{protocol_id}.json")
            if wanted and blob != _ZERO:
                seen.setdefault(blob, (commit, path))
        for blob, text_ in _blobs(project.root, sorted(seen)).items():
            try:
                data = json.loads(text_)
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            carried = (data.get("protocol") or {}).get("sha256") if kind == "record" else None
            block = data.get("results") if kind == "results" else None
            if carried == sha or (isinstance(block, dict) and block.get("protocolSha256") == sha):
                commit, path = seen[blob]
                out.append(f"{path} in commit {commit[:12]}")
    return sorted(set(out))


def history_problems(project: Project, protocol_id: str, accept_shallow: bool = False) -> tuple[list[str], list[str]]:
    """(problems, notes) from git: a lock whose content changed in any commit after the one that added it (merges
    included) unless the change is a declared re-freeze, a deleted lock, or one with uncommitted changes.

    Outside a git checkout there is nothing to check (a note says so); a shallow clone cannot show the history and
    fails unless `accept_shallow`."""
    root = project.root
    rel = _repo_path(project, project.lock_path(protocol_id))
    if rel is None:
        return [], ["not a git checkout: lock history not checked"]
    problems: list[str] = []
    notes: list[str] = []
    state = (_git(root, "status", "--porcelain", "--", rel) or "").strip()
    if state.startswith("??"):
        problems.append(
            f"{rel} is not committed yet: commit it with its protocol (`git add {rel} protocols/{protocol_id}.json "
            "&& git commit`); its history is checked from that commit on"
        )
    elif state:
        problems.append(f"{rel} has uncommitted changes: a lock is written once, by `clt protocol freeze`")
    if (_git(root, "rev-parse", "--is-shallow-repository") or "").strip() == "true":
        if accept_shallow:
            return problems, ["shallow clone: lock history NOT checked (accepted with --accept-shallow)"]
        shallow = (
            "this is a shallow clone: the lock's history cannot be read, so a rewritten lock could pass; fetch the "
            "whole history (git fetch --unshallow) or accept it in words with --accept-shallow"
        )
        return [*problems, shallow], notes
    versions = _versions(root, rel)
    if not versions:
        return problems, notes
    declared, _ = _refrozen(project)
    first_commit, current = versions[0]
    for commit, blob in versions[1:]:
        if blob == current:
            continue
        if blob == _ZERO:
            problems.append(f"{rel} was deleted in commit {commit[:12]}: a lock, once committed, stays")
            continue
        entry = next((e for e in declared.get(protocol_id, []) if e["commit"] == commit), None)
        if entry is None:
            problems.append(
                f"{rel} was modified in commit {commit[:12]} after the commit that added it ({first_commit[:12]}); "
                f"a frozen lock is never rewritten (a withdrawn freeze is declared in {REFROZEN_FILE})"
            )
            current = blob
            continue
        text = _git(root, "cat-file", "-p", blob)
        old = _git(root, "cat-file", "-p", current)
        sha = json.loads(text).get("sha256") if text else None
        withdrawn = json.loads(old).get("sha256") if old else None
        if sha != entry["sha256"]:
            problems.append(f"{rel} at commit {commit[:12]} has {sha}, not the {entry['sha256']} declared")
        elif withdrawn and (users := _withdrawn_hash_in_use(project, protocol_id, withdrawn)):
            problems.append(
                f"{rel}: the re-freeze in {commit[:12]} withdrew {withdrawn}, but {', '.join(users[:3])} carry it: "
                "a freeze is withdrawn only before any run"
            )
        else:
            notes.append(f"re-frozen in {commit[:12]} (declared: {entry['reason']})")
        current = blob
    return problems, notes


def gone_lock_problems(project: Project) -> list[tuple[str, str]]:
    """(protocol id, problem) for every lock some commit added that is not in the checkout now."""
    rel = _repo_path(project, project.locks_dir / "x")
    if rel is None:
        return []
    folder = rel.rsplit("/", 1)[0] if "/" in rel else "."
    text = _git(
        project.root, "log", "--full-history", "-m", "--diff-filter=A", "--name-only", "--format=", "--", folder
    )
    out = []
    for name in sorted(set((text or "").split())):
        if name.endswith(".lock.json"):
            pid = Path(name).name.removesuffix(".lock.json")
            if not project.lock_path(pid).exists():
                out.append((pid, f"{name} was committed and is gone: a frozen protocol cannot be unfrozen"))
    return out


APPEND_ONLY = ("errata", "codeAmendments", "reportedStages")
"""The lists of a protocol's `status` that only grow: every version ever committed is a prefix of the list now."""


def _appended(document: Any) -> dict[str, list[str]]:
    status = document.get("status") if isinstance(document, dict) else None
    status = status if isinstance(status, dict) else {}
    return {
        key: [json.dumps(v, sort_keys=True) for v in status.get(key) or []] if isinstance(status.get(key), list) else []
        for key in APPEND_ONLY
    }


def _blobs(root: Path, blobs: list[str]) -> dict[str, str]:
    """The text of many blobs, read by one `git cat-file --batch`."""
    if not blobs:
        return {}
    try:
        done = subprocess.run(
            ["git", "cat-file", "--batch"],
            cwd=root,
            input=("\n".join(blobs) + "\n").encode(),
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    out, data, pos = {}, done.stdout, 0
    while pos < len(data):
        header_end = data.index(b"\n", pos)
        parts = data[pos:header_end].decode().split()
        pos = header_end + 1
        if len(parts) < 3 or parts[1] == "missing":
            continue
        size = int(parts[2])
        out[parts[0]] = data[pos : pos + size].decode("utf-8", "replace")
        pos += size + 1
    return out


def errata_problems(project: Project, protocol_id: str, document: dict[str, Any]) -> list[str]:
    """Errata, code amendments and reported stages are append-only, field by field: every list any commit of the
    protocol file held (merges included) must be a prefix of the list now. An erratum found, or an amendment made,
    before the protocol was frozen is refused (a backdated entry)."""
    problems = []
    lock_text = project.lock_path(protocol_id)
    try:
        frozen_on = str(json.loads(lock_text.read_text(encoding="utf-8")).get("frozenOn", ""))[:10]
    except (OSError, json.JSONDecodeError, AttributeError):
        frozen_on = ""
    status = document.get("status") if isinstance(document, dict) else None
    status = status if isinstance(status, dict) else {}
    for key, field in (("errata", "found"), ("codeAmendments", "on")):
        for i, entry in enumerate(status.get(key) or []):
            when = str(entry.get(field, "")) if isinstance(entry, dict) else ""
            if frozen_on and when and when < frozen_on:
                problems.append(
                    f"status/{key}/{i}: dated {when}, before the freeze ({frozen_on}): a difference found after "
                    "freezing cannot be dated before it"
                )
    root = project.root
    rel = _repo_path(project, project.protocol_path(protocol_id))
    if rel is None:
        return problems
    now = _appended(document)
    versions = [(c, b) for c, b in _versions(root, rel) if b != _ZERO]
    texts = _blobs(root, sorted({b for _, b in versions}))
    reported: set[tuple[str, int]] = set()
    for commit, blob in versions:
        try:
            then = _appended(json.loads(texts.get(blob, "{}")))
        except json.JSONDecodeError:
            continue
        for key in APPEND_ONLY:
            past, current = then[key], now[key]
            bad = next((i for i, v in enumerate(past) if i >= len(current) or current[i] != v), None)
            if bad is not None and (key, bad) not in reported:
                reported.add((key, bad))
                problems.append(
                    f"{rel}: status.{key}[{bad}] as recorded in commit {commit[:12]} ({past[bad][:70]}...) is "
                    f"{'gone' if bad >= len(current) else 'changed'}: {key} are only added (never edited, "
                    "never withdrawn)"
                )
    return problems


CODE_PINNED_SINCE = datetime.datetime(2026, 12, 1, 22, 37, 48, tzinfo=datetime.UTC)
"""When the toolkit began to pin component code in locks (commit e22d29e): a lock committed later without `components`
had them removed."""
_SKEW = datetime.timedelta(days=1)


def dating_problems(project: Project, lock: Any, document: dict[str, Any]) -> list[str]:
    """A backdated freeze, a lock stripped of its code pins, and errata or amendments dated before the freeze.
    Nothing for a lock not yet committed (its first commit is checked then)."""
    rel = _repo_path(project, project.lock_path(lock.protocol))
    if rel is None:
        return []
    lines = (_git(project.root, "log", "--full-history", "--diff-filter=A", "--format=%H %cI", "--", rel) or "").split(
        "\n"
    )
    added = [line.split() for line in lines if line.strip()]
    if not added:
        return []
    commit, when = added[-1][0], datetime.datetime.fromisoformat(added[-1][1])
    frozen = lock.frozenOn if lock.frozenOn.tzinfo else lock.frozenOn.replace(tzinfo=datetime.UTC)
    out = []
    if frozen < when - _SKEW:
        out.append(
            f"frozenOn {frozen:%Y-%m-%d %H:%M} precedes the commit that added the lock ({commit[:12]}, "
            f"{when:%Y-%m-%d %H:%M}) by more than a day: a backdated freeze"
        )
    if when >= CODE_PINNED_SINCE and lock.components is None:
        out.append(
            f"its lock pins no code, but was committed ({commit[:12]}, {when:%Y-%m-%d}) after locks began to pin it: "
            "its `components` were removed"
        )
    status = document.get("status")
    if not isinstance(status, dict):
        status = {}
    for key, field, label in (("errata", "found", "erratum"), ("codeAmendments", "on", "code amendment")):
        for i, entry in enumerate(status.get(key) or []):
            on = entry.get(field) if isinstance(entry, dict) else None
            try:
                day = datetime.date.fromisoformat(str(on))
            except ValueError:
                continue  # a malformed date is the protocol validation's to name
            if day < (frozen - _SKEW).date():
                out.append(f"/status/{key}/{i}: the {label} is dated {day}, before the freeze ({frozen:%Y-%m-%d})")
    return out
