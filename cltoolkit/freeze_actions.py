"""Freeze actions on a project (`clt protocol freeze`, `bump`, `amend-code`, `restore`): each validates against the
registered components, then writes the freeze ledger (its format and reading: `cltoolkit.protocol.lock`)."""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cltoolkit import __version__
from cltoolkit._io import atomic_write_bytes, dump_protocol, write_json
from cltoolkit.component_validation import load_protocol
from cltoolkit.errors import InputError, Problem, Refusal
from cltoolkit.ids import parse_id
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import CANONICALIZATION, canonical_bytes, protocol_hash
from cltoolkit.protocol.load import load_json_file
from cltoolkit.protocol.lock import ComponentPin, Lock, PackagePin, read_lock, snapshot_path
from cltoolkit.protocol.models import SCHEMA_VERSION, CodeAmendment
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import registries
from cltoolkit.run import provenance
from cltoolkit.run.runner import protocol_components

__all__ = ["add_erratum", "amend_code", "bump", "freeze", "frozen_snapshot", "restore"]


def freeze(
    project: Project,
    protocol_id: str,
    *,
    now: datetime.datetime | None = None,
    warn: Callable[[str], None] | None = None,
) -> tuple[Lock, list[str]]:
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
    regs = registries(project.components_file)
    suite = regs.new_suite(loaded.model.suite)
    problems = [Problem(f"{path}: {p.where}", p.message) for p in _envelope_checks(loaded)]
    problems += [Problem(f"{path}: {p.where}", p.message) for p in _format_problems(loaded, suite.cells(loaded.model))]
    problems += [Problem(f"{path}: {p.where}", p.message) for p in declared_change_problems(project, loaded.document)]
    problems += [
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
        schemaVersion=loaded.model.schemaVersion,
        toolkitVersion=__version__,
        components={
            k: ComponentPin.model_validate(v)
            for k, v in {**protocol_components(regs, loaded.model), **provenance.evaluator_sources()}.items()
        },
    )
    stack = loaded.model.packages
    package_text = None
    if stack is not None:  # resolved before anything is written: a failed resolution leaves no lock
        from cltoolkit.packages import lock_text, pip_options, resolve

        package_text = lock_text(resolve(stack.requirements, stack.python, pip_options()))
        digest = "sha256:" + hashlib.sha256(package_text.encode()).hexdigest()
        lock = lock.model_copy(update={"packages": PackagePin(file=f"{loaded.id}.packages.txt", sha256=digest)})
    from cltoolkit.planning import freeze_power_warnings

    warnings = [*loaded.warnings, *freeze_power_warnings(project, loaded)]  # said before anything is written
    if warn is not None:
        for warning in warnings:
            warn(warning)
    manifest = suite.split_manifest(loaded.model)
    if manifest is not None:
        write_json(project.locks_dir / f"{loaded.id}.splits.json", manifest)
    if package_text is not None and lock.packages is not None:
        atomic_write_bytes(project.locks_dir / lock.packages.file, package_text.encode())
    atomic_write_bytes(snapshot_path(project, loaded.id), canonical_bytes(loaded.document) + b"\n")
    write_json(project.lock_path(loaded.id), lock.model_dump(mode="json", exclude_none=True))
    return lock, warnings


def _envelope_checks(loaded: LoadedProtocol) -> list[Problem]:
    """Freeze-time checks every protocol must pass."""
    model = loaded.model
    problems = []
    if not model.comparisons:
        problems.append(Problem("/comparisons", "nothing to run: a protocol needs comparisons before freezing"))
    if not model.metrics:
        problems.append(Problem("/metrics", "no metrics declared"))
    from cltoolkit.planning import declared_replicates, reported_stage

    stage = reported_stage(model)
    n = declared_replicates(model, 1, stage)
    for i, gate in enumerate(model.gates):
        if gate.test != "report-only" and n < 2:
            problems.append(
                Problem(
                    f"/gates/{i}",
                    f"gate {gate.id!r} cannot be tested: stage {stage!r} gives {n} replicate(s) per hypothesis and a "
                    "test needs at least 2 (declare more seeds or task orders)",
                )
            )
    return problems


def _format_problems(loaded: LoadedProtocol, cells: list[str | None]) -> list[Problem]:
    """A new freeze of gates that pool replicates over cells or task orders uses the format that declares the unit of
    analysis (schema 2); format 1 stays valid for the protocols frozen in it."""
    model = loaded.model
    orders = max((len(st.orders) for st in model.seeds.stages), default=0)
    pooled = len([c for c in cells if c is not None]) > 1 or orders > 1
    if model.schemaVersion >= SCHEMA_VERSION or not model.gates or not pooled:
        return []
    return [
        Problem(
            "/schemaVersion",
            f"format {model.schemaVersion} declares no unit of analysis, and these gates pool replicates over cells "
            f"or task orders that share seeds: a new freeze uses format {SCHEMA_VERSION} with analysis.clusters "
            "(protocols frozen in format 1 keep it)",
        )
    ]


def declared_change_problems(project: Project, document: dict[str, Any]) -> list[Problem]:
    """A new version's differences from the frozen protocol it supersedes must each be declared in `changes`, and
    each declared change must cover a difference (no stale declarations)."""
    from cltoolkit.protocol.lock import diff_documents
    from cltoolkit.protocol.models import DeclaredChange, covering_change

    supersedes = document.get("supersedes")
    if not isinstance(supersedes, str):
        return []
    old_id, _, sha = supersedes.partition("@")
    lock = read_lock(project, old_id)
    if lock is None or lock.sha256 != sha:
        found = "is not frozen" if lock is None else f"is frozen as {lock.sha256}"
        return [Problem("/supersedes", f"{supersedes}: {old_id} {found}")]
    declared = [DeclaredChange.model_validate(c) for c in document.get("changes") or []]
    differences = diff_documents(frozen_snapshot(project, old_id), document)
    problems = [
        Problem(c.pointer, f"undeclared change from {old_id} ({c}); declare it in /changes with its reason")
        for c in differences
        if covering_change(c.pointer, declared) is None
    ]
    used = {covering_change(c.pointer, declared) for c in differences}
    problems += [
        Problem(f"/changes/{i}", f"declares a change from {old_id} that is not there ({', '.join(d.pointers)})")
        for i, d in enumerate(declared)
        if i not in used
    ]
    return problems


def frozen_snapshot(project: Project, protocol_id: str) -> dict[str, Any]:
    """The hashed content a lock froze, from its `.frozen.json` snapshot (checked against the lock)."""
    lock = read_lock(project, protocol_id)
    if lock is None:
        raise Refusal(f"{protocol_id} is not frozen: there is no frozen content to go back to")
    path = snapshot_path(project, protocol_id)
    if not path.is_file():
        raise Refusal(f"{path} is missing: the frozen content of {protocol_id} cannot be restored from it")
    frozen = load_json_file(path)
    if protocol_hash(frozen) != lock.sha256:
        raise Refusal(f"{path} does not hash to the lock's {lock.sha256}; it cannot be trusted to restore from")
    return dict(frozen)


def restore(project: Project, protocol_id: str) -> tuple[Path, bool]:
    """Put a frozen protocol's file back to its frozen content (keeping its `status` and `results`). Returns the
    path and whether anything changed."""
    path = project.resolve_protocol(protocol_id)
    frozen = frozen_snapshot(project, path.stem)
    current = load_json_file(path)
    if protocol_hash(current) == protocol_hash(frozen):
        return path, False
    restored = {**frozen, **{k: current[k] for k in ("status", "results") if k in current}}
    atomic_write_bytes(path, dump_protocol(restored).encode())
    return path, True


def add_erratum(
    project: Project, protocol_id: str, text: str, *, where: str = "", today: datetime.date | None = None
) -> tuple[Path, int]:
    """Record a difference found after freezing in the protocol's `status.errata` (outside the hash, so the lock
    still holds). Refuses a draft (declare it in `disclosures` instead), an empty text and a repeated one. Returns
    the path and the number of errata now recorded."""
    from cltoolkit.protocol.models import Erratum, Status

    path = project.resolve_protocol(protocol_id)
    if read_lock(project, path.stem) is None:
        raise Refusal(f"{path.stem} is not frozen: declare the difference in its `disclosures` instead")
    text, where = " ".join(text.split()), " ".join(where.split())
    if not text:
        raise InputError("the erratum text is empty: say what differs, why, and its expected effect")
    found = today or datetime.date.today()
    document = load_json_file(path)
    status = dict(document.get("status") or {"stage": "frozen", "updatedOn": found.isoformat()})
    errata = list(status.get("errata") or [])
    if any(isinstance(e, dict) and e.get("text") == text for e in errata):
        raise Refusal(f"{path.stem} already records this erratum")
    errata.append(Erratum(found=found, text=text, where=where).model_dump(mode="json", exclude_defaults=True))
    status["errata"] = errata
    Status.model_validate_json(json.dumps(status))  # the status block stays valid
    before = protocol_hash(document)
    document["status"] = status
    if protocol_hash(document) != before:  # status is outside the hash by the hash rule; never write otherwise
        raise Refusal("internal check: an erratum would change the hashed content; nothing was written")
    atomic_write_bytes(path, dump_protocol(document).encode())
    return path, len(errata)


def amend_code(
    project: Project, protocol_id: str, component: str, reason: str, *, today: datetime.date | None = None
) -> tuple[Path, CodeAmendment]:
    """Record that a pinned component's code changed after freezing (`status.codeAmendments`, outside the hash):
    runs of the code as it is now are then accepted, and every report prints the amendment first, as not
    pre-registered. Refuses an unpinned lock, an unknown component, unchanged code and an empty reason."""
    from cltoolkit.protocol.models import Status

    path = project.resolve_protocol(protocol_id)
    lock = read_lock(project, path.stem)
    if lock is None:
        raise Refusal(f"{path.stem} is not frozen: its code is not pinned, there is nothing to amend")
    if lock.components is None:
        raise Refusal(f"{path.stem} was frozen before the evaluator was pinned: its code is not pinned")
    pin = lock.components.get(component)
    if pin is None:
        raise InputError(f"--component {component!r}: the lock pins {', '.join(sorted(lock.components))}")
    reason = " ".join(reason.split())
    if not reason:
        raise InputError("--reason is empty: say why the code changed and its expected effect on the results")
    kind, _, name = component.partition(":")
    if component in provenance.EVALUATOR:  # the toolkit's gatekeeper or statistics: not a registered component
        target = provenance.EVALUATOR[component]
    else:
        regs = registries(project.components_file)
        regs[kind].get(name)  # imported as `clt run` imports it (a project's own module from the project folder)
        target = regs[kind].target(name)
    digest = provenance.component_digest(target)
    if digest == provenance.NO_SOURCE:
        raise Refusal(
            f"{component}: no source files found for {target}; an amendment must name the digest of the code the "
            "runs will load"
        )
    document = load_json_file(path)
    status = dict(
        document.get("status") or {"stage": "frozen", "updatedOn": (today or datetime.date.today()).isoformat()}
    )
    amendments = list(status.get("codeAmendments") or [])
    if digest == pin.sourceSha256 or any(
        a.get("component") == component and a.get("sourceSha256") == digest for a in amendments
    ):
        raise Refusal(f"{component}: its code ({digest}) is already accepted; nothing to amend")
    amendment = CodeAmendment(
        on=today or datetime.date.today(), component=component, sourceSha256=str(digest), reason=reason
    )
    amendments.append(amendment.model_dump(mode="json"))
    status["codeAmendments"] = amendments
    Status.model_validate_json(json.dumps(status))
    before = protocol_hash(document)
    document["status"] = status
    if protocol_hash(document) != before:
        raise Refusal("internal check: an amendment would change the hashed content; nothing was written")
    atomic_write_bytes(path, dump_protocol(document).encode())
    return path, amendment


def bump(project: Project, protocol_id: str, *, today: datetime.date | None = None) -> Path:
    """Copy a frozen protocol to `-v<N+1>`, unfrozen, with `supersedes`, a fresh status and no results.

    When the frozen file was edited in place, the edits move to the new version and the frozen file gets its frozen
    content back (its status and results kept): editing, then bumping, is the way to a new version."""
    source = project.resolve_protocol(protocol_id)
    lock = read_lock(project, source.stem)
    if lock is None:
        raise Refusal(f"{source.stem} is not frozen; edit the draft in place instead of bumping it")
    load_protocol(source, registries(project.components_file))  # the new version starts valid
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
    errata = (document.get("status") or {}).get("errata") or []
    note = f"New version of {source.stem}; not frozen." + (
        f" {source.stem} records {len(errata)} erratum(s) found after its freeze (status.errata): declare each in "
        "`disclosures` or remove the difference here."
        if errata
        else ""
    )
    copy["status"] = {"stage": "draft", "updatedOn": day, "note": note}
    copy["results"] = None
    atomic_write_bytes(target, dump_protocol(copy).encode())
    if protocol_hash(document) != lock.sha256:
        restore(project, source.stem)
    return target
