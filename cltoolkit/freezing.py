"""Freezing and bumping protocols: the steps that validate against the registered components and then write
the freeze ledger (`cltoolkit.protocol.lock`)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from cltoolkit import __version__
from cltoolkit._io import atomic_write_bytes, dump_json, write_json
from cltoolkit.errors import InputError, Problem, Refusal
from cltoolkit.ids import parse_id
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import CANONICALIZATION, canonical_bytes, protocol_hash
from cltoolkit.protocol.load import load_json_file
from cltoolkit.protocol.lock import Lock, read_lock, require_frozen, snapshot_path
from cltoolkit.protocol.models import SCHEMA_VERSION
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import registries
from cltoolkit.validation import load_protocol

__all__ = ["bump", "freeze"]


def freeze(project: Project, protocol_id: str, *, now: datetime.datetime | None = None) -> tuple[Lock, list[str]]:
    """Validate, run the suite's safeguard checks, hash, and write the lock. Returns the lock and warnings."""
    path = project.resolve_protocol(protocol_id)
    if path.resolve().parent != project.protocols_dir.resolve():
        raise InputError(f"{path}: only protocols in {project.protocols_dir} can be frozen")
    existing = read_lock(project, path.stem)
    if existing is not None:
        raise Refusal(
            f"{path.stem} is already frozen ({existing.sha256}, {existing.frozenOn:%Y-%m-%d}). A frozen protocol "
            f"is never edited or re-frozen: make a new version with `clt protocol bump {path.stem}`"
        )
    loaded = load_protocol(path, registries(project.components_file))
    suite = registries(project.components_file).suite.get(loaded.model.suite)()
    problems = [Problem(f"{path}: {p.where}", p.message) for p in _envelope_checks(loaded)] + [
        Problem(f"{path}: {p.where}" if p.where.startswith("/") else p.where, p.message)
        for p in suite.freeze_checks(loaded.model, path)
    ]
    if problems:
        raise Refusal(
            f"refusing to freeze {path.stem}: its safeguard checks fail\n" + "\n".join(str(p) for p in problems),
            problems,
        )
    lock = Lock(
        protocol=loaded.id,
        sha256=protocol_hash(loaded.document),
        canonicalization=CANONICALIZATION,
        frozenOn=now or datetime.datetime.now(datetime.UTC).replace(microsecond=0),
        schemaVersion=SCHEMA_VERSION,
        toolkitVersion=__version__,
    )
    manifest = suite.split_manifest(loaded.model)
    if manifest is not None:
        write_json(project.locks_dir / f"{loaded.id}.splits.json", manifest)
    atomic_write_bytes(snapshot_path(project, loaded.id), canonical_bytes(loaded.document) + b"\n")
    write_json(project.lock_path(loaded.id), lock.model_dump(mode="json"))
    from cltoolkit.planning import freeze_power_warnings

    return lock, [*loaded.warnings, *freeze_power_warnings(project, loaded)]


def _envelope_checks(loaded: LoadedProtocol) -> list[Problem]:
    """Freeze-time checks every protocol must pass."""
    model = loaded.model
    problems = []
    if not model.comparisons:
        problems.append(Problem("/comparisons", "nothing to run: a protocol needs comparisons before freezing"))
    if not model.metrics:
        problems.append(Problem("/metrics", "no metrics declared"))
    return problems


def bump(project: Project, protocol_id: str, *, today: datetime.date | None = None) -> Path:
    """Copy a frozen protocol to `-v<N+1>`, unfrozen, with `supersedes`, a fresh status and no results."""
    source = project.resolve_protocol(protocol_id)
    lock = read_lock(project, source.stem)
    if lock is None:
        raise Refusal(f"{source.stem} is not frozen; edit the draft in place instead of bumping it")
    require_frozen(project, load_protocol(source, registries(project.components_file)))
    new_id = str(parse_id(source.stem).bumped())
    target = project.protocol_path(new_id)
    if target.exists():
        raise Refusal(f"{target} already exists; edit that draft instead")
    document = load_json_file(source)
    copy: dict[str, Any] = {}
    for key, value in document.items():
        copy[key] = value
        if key == "id":
            copy["id"] = new_id
    copy["supersedes"] = f"{source.stem}@{lock.sha256}"
    day = (today or datetime.date.today()).isoformat()
    copy["status"] = {"stage": "draft", "updatedOn": day, "note": f"New version of {source.stem}; not frozen."}
    copy["results"] = None
    atomic_write_bytes(target, dump_json(copy, sort_keys=False).encode())
    return target
