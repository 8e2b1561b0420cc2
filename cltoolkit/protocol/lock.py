"""The freeze ledger: `registry/locks/<id>.lock.json`, plus a canonical snapshot of what was frozen.

The lock holds `{protocol, sha256, canonicalization, frozenOn, schemaVersion, toolkitVersion}` (docs/design.md
section 2). Beside it, `<id>.frozen.json` keeps the canonical hashed content, so `verify` can name the JSON
pointers that changed (its own hash must equal the lock's, so it cannot be edited unnoticed either).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from cltoolkit.errors import CheckFailed, InputError, Refusal, ValidationFailed, json_pointer, pydantic_problems
from cltoolkit.ids import ID_PATTERN
from cltoolkit.project import Project
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.hashing import hashed_content, protocol_hash
from cltoolkit.protocol.load import load_json_file
from cltoolkit.protocol.models import CodeAmendment
from cltoolkit.protocol.results import CodeState
from cltoolkit.protocol.validate import LoadedProtocol

__all__ = [
    "Change",
    "ComponentPin",
    "Lock",
    "PackagePin",
    "VerifyOutcome",
    "accepted_code",
    "code_state",
    "diff_documents",
    "is_frozen",
    "package_problems",
    "pinned_code_problems",
    "read_lock",
    "require_frozen",
    "snapshot_path",
    "verify",
]


class ComponentPin(Strict):
    """The code of one component as it was when the protocol was frozen (the same fields a run record's
    `provenance.components` carries)."""

    target: str
    """`module:attr` the component name resolved to."""
    distribution: str | None = None
    """Distribution that provided the module (None when unknown)."""
    version: str | None = None
    """Its version."""
    sourceSha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """Digest of the component's source files (`cltoolkit.run.provenance.component_source`)."""


class PackagePin(Strict):
    """The resolved package stack of a protocol (`cltoolkit.packages`)."""

    file: str = Field(pattern=r"^[a-z0-9.-]+-v[1-9][0-9]*\.packages\.txt$")
    """The package file's name, in `registry/locks/`."""
    sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """Its SHA-256 (the environment is keyed by it; records name it in `provenance.environment`)."""


class Lock(Strict):
    """One entry of the freeze ledger."""

    protocol: str = Field(pattern=ID_PATTERN)
    """Protocol id."""
    sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """Canonical hash at freezing."""
    canonicalization: Literal["jcs-sha256/v1"]
    """Canonicalization id of the hash."""
    frozenOn: datetime.datetime
    """When it was frozen (UTC)."""
    schemaVersion: int
    """Protocol document format version."""
    toolkitVersion: str
    """Toolkit version that froze it."""
    components: dict[str, ComponentPin] | None = None
    """`<kind>:<name>` -> the code of every component the protocol uses (suite, each method, metrics, analysis),
    pinned at freezing. Locks written before the evaluator was pinned have none: their code is "not pinned"."""
    packages: PackagePin | None = None
    """The protocol's own package stack, resolved at freezing (`packages` in the protocol): the package file beside
    the lock and its digest. None: the runs use the toolkit's environment."""


@dataclass(frozen=True)
class Change:
    """One difference between two documents."""

    pointer: str
    kind: Literal["added", "removed", "changed"]
    before: Any = None
    after: Any = None

    def __str__(self) -> str:
        if self.kind == "added":
            return f"{self.pointer}: added {_short(self.after)}"
        if self.kind == "removed":
            return f"{self.pointer}: removed (was {_short(self.before)})"
        return f"{self.pointer}: changed from {_short(self.before)} to {_short(self.after)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def diff_documents(a: Any, b: Any, path: tuple[str, ...] = ()) -> list[Change]:
    """Every added, removed or changed JSON pointer from `a` to `b`."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[Change] = []
        for key in list(a) + [k for k in b if k not in a]:
            here = (*path, key)
            if key not in b:
                out.append(Change(json_pointer(here), "removed", before=a[key]))
            elif key not in a:
                out.append(Change(json_pointer(here), "added", after=b[key]))
            else:
                out.extend(diff_documents(a[key], b[key], here))
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            here = (*path, str(i))
            if i >= len(b):
                out.append(Change(json_pointer(here), "removed", before=a[i]))
            elif i >= len(a):
                out.append(Change(json_pointer(here), "added", after=b[i]))
            else:
                out.extend(diff_documents(a[i], b[i], here))
        return out
    if type(a) is not type(b) or a != b:
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and a == b:
            return []  # 1 and 1.0 canonicalize identically
        return [Change(json_pointer(path) or "/", "changed", before=a, after=b)]
    return []


def read_lock(project: Project, protocol_id: str) -> Lock | None:
    path = project.lock_path(protocol_id)
    if not path.exists():
        return None
    data = load_json_file(path)
    try:
        return Lock.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise ValidationFailed(problems=pydantic_problems(exc, str(path))) from None


def is_frozen(project: Project, protocol_id: str) -> bool:
    return project.lock_path(protocol_id).exists()


def snapshot_path(project: Project, protocol_id: str) -> Path:
    """The canonical snapshot of what was frozen, beside the lock."""
    return project.locks_dir / f"{protocol_id}.frozen.json"


@dataclass(frozen=True)
class VerifyOutcome:
    """The result of verifying one lock."""

    protocol: str
    ok: bool
    expected: str
    actual: str | None
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()


def verify(
    project: Project, *, history: bool = True, accept_shallow: bool = False, without_git: bool = False
) -> list[VerifyOutcome]:
    """Recompute every locked protocol's hash and check each lock against its snapshot and (in git) its whole
    history, merges included; also fail for a protocol that claims to be frozen or reported without a lock, for a
    lock that was committed and is gone, for a malformed, uncommitted or shrunk `refrozen.json`, and for a run
    record that any commit held and that vanished or was replaced without naming it (`record_history`). Raise
    `CheckFailed` naming each problem if any. A shallow clone fails unless `accept_shallow`; outside a git checkout
    (or without git) it fails unless `without_git`, which checks hashes and snapshots only."""
    from cltoolkit.protocol.lock_history import (
        REFROZEN_FILE,
        _refrozen,
        gone_lock_problems,
        refrozen_problems,
        unlocked_problems,
    )

    if history:
        from cltoolkit.protocol.lock_history import _repo_path

        if _repo_path(project, project.locks_dir / "x") is None:
            if not without_git:
                import shutil

                why = "git is not installed" if shutil.which("git") is None else f"{project.root} is not a git checkout"
                raise CheckFailed(
                    f"{why}: verify reads the history of locks and records from git and fails closed without it; run "
                    "it in a clone, or pass --without-git to check hashes and snapshots only (said in its output)"
                )
    outcomes = []
    lock_files = sorted(project.locks_dir.glob("*.lock.json")) if project.locks_dir.is_dir() else []
    for lock_file in lock_files:
        protocol_id = lock_file.name.removesuffix(".lock.json")
        outcomes.append(_verify_one(project, protocol_id, history, accept_shallow))
    for protocol_id, problem in unlocked_problems(project):
        outcomes.append(VerifyOutcome(protocol_id, False, "-", None, (problem,)))
    if history:
        for protocol_id, problem in gone_lock_problems(project):
            outcomes.append(VerifyOutcome(protocol_id, False, "-", None, (problem,)))
        refrozen = project.locks_dir / REFROZEN_FILE
        ledger = (
            [f"{refrozen} is a symbolic link (to {refrozen.resolve()}): it is read only as a regular file"]
            if refrozen.is_symlink()
            else [*_refrozen(project)[1], *refrozen_problems(project)]
        )
        if ledger:
            outcomes.append(VerifyOutcome(REFROZEN_FILE, False, "-", None, tuple(ledger)))
        from cltoolkit.protocol.record_history import record_history_problems

        by_protocol: dict[str, list[str]] = {}
        for path, problem in record_history_problems(project):
            parts = path.split("/")
            pid = parts[-3] if len(parts) >= 3 else path
            by_protocol.setdefault(f"{pid} (records)", []).append(f"{path}: {problem}")
        for pid, problems in sorted(by_protocol.items()):
            outcomes.append(VerifyOutcome(pid, False, "-", None, tuple(problems)))
    failed = [o for o in outcomes if not o.ok]
    if failed:
        lines = [f"{o.protocol}: {p}" for o in failed for p in o.problems]
        raise CheckFailed(
            f"{len(failed)} of {len(outcomes)} frozen protocols changed or broke:\n"
            + "\n".join(lines)
            + "\nA frozen protocol is never edited: restore its frozen content with `clt protocol restore <id>` and "
            "make a new version with `clt protocol bump <id>`."
        )
    return outcomes


def _verify_one(
    project: Project, protocol_id: str, history: bool = True, accept_shallow: bool = False
) -> VerifyOutcome:
    from cltoolkit.protocol.lock_history import errata_problems, history_problems, snapshot_problems

    lock_file = project.lock_path(protocol_id)
    links = [
        f"{path} is a symbolic link (to {path.resolve()}): locks, snapshots and protocols are read only as regular "
        "files inside the project"
        for path in (lock_file, snapshot_path(project, protocol_id), project.protocol_path(protocol_id))
        if path.is_symlink()
    ]
    if links:
        return VerifyOutcome(protocol_id, False, "?", None, tuple(links))
    try:
        lock = read_lock(project, protocol_id)
    except ValidationFailed as exc:
        return VerifyOutcome(protocol_id, False, "?", None, tuple(str(p) for p in exc.problems))
    assert lock is not None
    if lock.protocol != protocol_id:
        return VerifyOutcome(protocol_id, False, lock.sha256, None, (f"{lock_file}: names protocol {lock.protocol!r}",))
    snapshot = snapshot_path(project, protocol_id)
    problems = snapshot_problems(snapshot, lock.sha256)
    notes: list[str] = []
    if history:
        found, notes = history_problems(project, protocol_id, accept_shallow)
        problems += found
    path = project.protocol_path(protocol_id)
    if not path.is_file():
        problems.append(f"locked, but its protocol file {path} is missing")
        return VerifyOutcome(protocol_id, False, lock.sha256, None, tuple(problems), tuple(notes))
    try:
        document = load_json_file(path)
        actual = protocol_hash(document)
    except (ValidationFailed, InputError) as exc:
        return VerifyOutcome(protocol_id, False, lock.sha256, None, (*problems, *str(exc).splitlines()), tuple(notes))
    if lock.packages is not None:
        problems += package_problems(project, lock.packages)
        problems += environment_problems(project, protocol_id, lock.packages)
    if history:
        from cltoolkit.protocol.lock_history import dating_problems

        problems += errata_problems(project, protocol_id, document)
        problems += dating_problems(project, lock, document)
    if actual != lock.sha256:
        problems.append(f"hash {actual} differs from the lock {lock.sha256}")
        if snapshot.is_file() and not snapshot_problems(snapshot, lock.sha256):
            problems.extend(str(c) for c in diff_documents(load_json_file(snapshot), hashed_content(document)))
        else:
            problems.append("its snapshot does not match the lock: cannot name the changed fields")
    return VerifyOutcome(protocol_id, not problems, lock.sha256, actual, tuple(problems), tuple(notes))


def package_problems(project: Project, pin: PackagePin) -> list[str]:
    """The package file must be the one the lock names, a regular file, with the recorded digest."""
    from cltoolkit.packages import file_digest

    path = project.locks_dir / pin.file
    if path.is_symlink() or not path.is_file():
        return [f"{path}: the package file the lock names is missing (or a link)"]
    digest = file_digest(path)
    if digest != pin.sha256:
        return [f"{path}: digest {digest} differs from the lock's {pin.sha256}: the package stack was edited"]
    return []


def environment_problems(project: Project, protocol_id: str, pin: PackagePin) -> list[str]:
    """Completed records of the protocol's store that name another environment than the lock's package file (or
    none): each ran outside the package stack the protocol froze."""
    problems = []
    for path in sorted((project.runs_dir / protocol_id).glob("*/record.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # an unreadable record is the store's and the report's to refuse, by name
        if not isinstance(record, dict) or record.get("status", {}).get("state") != "completed":
            continue
        found = record.get("provenance", {}).get("environment")
        if found != pin.sha256:
            problems.append(
                f"{path}: ran in {found or 'the toolkit environment'}, not in the environment of the lock's package "
                f"file ({pin.sha256})"
            )
    return problems


def accepted_code(pins: dict[str, ComponentPin], amendments: Sequence[CodeAmendment], name: str) -> set[str]:
    """The source digests runs of component `name` may carry: the pinned one and every amendment's."""
    pin = pins.get(name)
    return {a.sourceSha256 for a in amendments if a.component == name} | ({pin.sourceSha256} if pin else set())


def pinned_code_problems(
    lock: Lock, amendments: Sequence[CodeAmendment], used: dict[str, dict[str, str | None]]
) -> list[str]:
    """The components of `used` (`<kind>:<name>` -> source, as `component_source` gives it) whose code is neither
    the code the lock pinned nor a recorded code amendment. Nothing for a lock made before the evaluator was pinned
    (its code is not pinned)."""
    if lock.components is None:
        return []
    problems = []
    for name, source in sorted(used.items()):
        pin = lock.components.get(name)
        digest = source.get("sourceSha256")
        if pin is None:
            problems.append(
                f"{name}: not among the components pinned at freezing ({', '.join(sorted(lock.components))})"
            )
        elif pin.target != source.get("target"):
            problems.append(f"{name}: resolves to {source.get('target')}, but the lock pinned {pin.target}")
        elif digest not in accepted_code(lock.components, amendments, name):
            problems.append(f"{name} ({pin.target}): its code is {digest}, the lock pinned {pin.sourceSha256}")
    return problems


def code_state(
    pins: dict[str, ComponentPin], amendments: Sequence[CodeAmendment], name: str, digests: set[str]
) -> CodeState:
    """How the code of component `name` that records carry (`digests`) stands against the pinned code: `as frozen`,
    `amended` (an amendment covers some of it) or `differs`."""
    pin = pins.get(name)
    if pin is None or not digests <= accepted_code(pins, amendments, name):
        return "differs"
    return "as frozen" if digests == {pin.sourceSha256} else "amended"


def require_frozen(project: Project, loaded: LoadedProtocol) -> Lock:
    """The lock of a loaded protocol; refuse if it is not frozen or its content changed since."""
    lock = read_lock(project, loaded.id)
    if lock is None:
        raise Refusal(
            f"{loaded.id} is not frozen: results are reported only for frozen protocols. Freeze it with "
            f"`clt protocol freeze {loaded.id}` (after its pilot), or run it with --pilot"
        )
    actual = protocol_hash(loaded.document)
    if actual != lock.sha256:
        raise Refusal(
            f"{loaded.id} changed since it was frozen (lock {lock.sha256}, now {actual}); `clt protocol verify` "
            "names the changes. Restore the frozen content, or bump to a new version"
        )
    return lock
