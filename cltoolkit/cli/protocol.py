"""`clt protocol`: validate, hash, freeze, verify, diff, bump, errata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from cltoolkit.cli._common import command, console, print_json, project

if TYPE_CHECKING:
    from cltoolkit.protocol.models import DeclaredChange

app = typer.Typer(help="Author, validate, freeze and verify protocols.", no_args_is_help=True)
Ref = Annotated[str, typer.Argument(help="Protocol id (e.g. nav4-v1) or path to a protocol file.")]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@command(app, "validate")
def validate(ref: Ref, json_out: Json = False) -> None:
    """Validate a protocol strictly (one line per problem, with its JSON pointer)."""
    from cltoolkit.component_validation import load_protocol
    from cltoolkit.errors import CheckFailed
    from cltoolkit.planning import freeze_power_warnings
    from cltoolkit.protocol import protocol_hash
    from cltoolkit.protocol.lock import read_lock
    from cltoolkit.registry import registries

    proj = project()
    loaded = load_protocol(proj.resolve_protocol(ref), registries(proj.components_file))
    digest = protocol_hash(loaded.document)
    lock = read_lock(proj, loaded.id) if loaded.path.parent.resolve() == proj.protocols_dir.resolve() else None
    warnings = list(loaded.warnings)
    if lock is None:  # a draft: the power it will have, before it is frozen
        warnings += freeze_power_warnings(proj, loaded)
    changed = lock is not None and lock.sha256 != digest
    if json_out:
        print_json(
            {
                "protocol": loaded.id,
                "valid": not changed,
                "sha256": digest,
                "frozen": None if lock is None else lock.sha256,
                "warnings": warnings,
            }
        )
    else:
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
    if changed and lock is not None:
        raise CheckFailed(
            f"{loaded.path}: well-formed, but {loaded.id} is frozen ({proj.lock_path(loaded.id)}: {lock.sha256}) and "
            f"its content changed since (now {digest}); `clt protocol verify` names the changes. Undo them with "
            f"`clt protocol restore {loaded.id}`, or move them to a new version with `clt protocol bump {loaded.id}`"
        )
    if not json_out:
        typer.echo(f"{loaded.path}: valid ({loaded.model.suite} protocol {loaded.id}, {digest})")


@command(app, "hash")
def hash_(ref: Ref) -> None:
    """Print the canonical hash (jcs-sha256/v1) of a protocol document."""
    from cltoolkit.protocol import load_json_file, protocol_hash

    typer.echo(protocol_hash(load_json_file(project().resolve_protocol(ref))))


@command(app, "freeze")
def freeze(
    protocol_id: Annotated[str, typer.Argument(help="Protocol id in protocols/.")], json_out: Json = False
) -> None:
    """Validate, run safeguard checks, hash and write registry/locks/<id>.lock.json."""
    from cltoolkit.freeze_actions import freeze as do_freeze

    proj = project()
    lock, _ = do_freeze(proj, protocol_id, warn=lambda w: typer.echo(f"warning: {w}", err=True))  # before the lock
    if json_out:
        print_json(lock.model_dump(mode="json"))
        return
    typer.echo(f"froze {lock.protocol} at {lock.sha256} -> {proj.lock_path(lock.protocol)}")
    if (proj.root / ".git").exists():
        lock_rel = proj.lock_path(lock.protocol).relative_to(proj.root)
        typer.echo(
            f"next: commit the lock with its protocol: git add {lock_rel} protocols/{lock.protocol}.json && git commit"
        )


@command(app, "new")
def new(
    protocol_id: Annotated[str, typer.Argument(help="Id of the new protocol, <name>-v<N> (its file name).")],
    suite: Annotated[str, typer.Option("--suite", help="The suite (ladder, sessions, nav4, wmf, crl).")],
) -> None:
    """Write a complete, valid draft for a suite into protocols/ (with `$schema` for editors)."""
    from cltoolkit.scaffold import new_protocol

    path = new_protocol(project(), suite, protocol_id)
    typer.echo(f"wrote {path}: a valid {suite} draft; edit it, validate, pilot, then freeze")


@command(app, "restore")
def restore(protocol_id: Annotated[str, typer.Argument(help="Frozen protocol id in protocols/.")]) -> None:
    """Put a frozen protocol back to its frozen content (from registry/locks/<id>.frozen.json), status kept."""
    from cltoolkit.freeze_actions import restore as do_restore

    path, changed = do_restore(project(), protocol_id)
    typer.echo(f"restored {path} to its frozen content" if changed else f"{path} already has its frozen content")


@command(app, "verify")
def verify(
    json_out: Json = False,
    accept_shallow: Annotated[
        bool,
        typer.Option(
            "--accept-shallow",
            help="In a shallow clone, pass without reading the locks' history (a rewritten lock could pass); said in "
            "the output.",
        ),
    ] = False,
    without_git: Annotated[
        bool,
        typer.Option(
            "--without-git",
            envvar="CLT_WITHOUT_GIT",
            help="In a project outside git, check hashes and snapshots only (no history); said in the output. Without "
            "it, verify fails where it cannot read git history.",
        ),
    ] = False,
) -> None:
    """Recompute every locked protocol's hash and read the whole git history of locks and run records; fail naming
    each changed JSON pointer, rewritten or deleted lock or record, withdrawn erratum, backdated date and malformed
    re-freeze declaration."""
    from cltoolkit.protocol.lock import verify as do_verify
    from cltoolkit.protocol.lock_history import _repo_path

    proj = project()
    outcomes = do_verify(proj, accept_shallow=accept_shallow, without_git=without_git)
    unchecked = without_git and _repo_path(proj, proj.locks_dir / "x") is None
    if json_out:
        print_json([{"protocol": o.protocol, "ok": o.ok, "sha256": o.expected} for o in outcomes])
        return
    for o in outcomes:
        typer.echo(f"{o.protocol}: ok ({o.expected})" + "".join(f"; {n}" for n in o.notes))
    typer.echo(
        f"{len(outcomes)} frozen protocol(s) verified"
        + (" (hashes and snapshots only: no git, history NOT checked, --without-git)" if unchecked else "")
    )


@command(app, "diff")
def diff(a: Ref, b: Ref, json_out: Json = False) -> None:
    """List the JSON pointers that differ between two protocol documents (and whether the hash differs)."""
    from cltoolkit.protocol import load_json_file, protocol_hash
    from cltoolkit.protocol.lock import diff_documents
    from cltoolkit.protocol.models import covering_change

    proj = project()
    doc_a, doc_b = (load_json_file(proj.resolve_protocol(r)) for r in (a, b))
    changes = diff_documents(doc_a, doc_b)
    hashed = [c for c in changes if c.pointer.split("/")[1] not in ("status", "results")]
    if json_out:
        print_json(
            {
                "hashA": protocol_hash(doc_a),
                "hashB": protocol_hash(doc_b),
                "changes": [
                    {"pointer": c.pointer, "kind": c.kind, "before": c.before, "after": c.after} for c in changes
                ],
            }
        )
        return
    new_version = isinstance(doc_a, dict) and isinstance(doc_b, dict) and doc_a.get("id") != doc_b.get("id")
    declared = _declared(doc_b) if new_version else None
    if declared is None:
        for change in changes:
            typer.echo(str(change))
        if new_version:
            typer.echo(f"{b}: its `changes` do not parse (validate it), so no change is marked declared or not")
    else:
        marks = [covering_change(c.pointer, declared) for c in changes]
        for change, mark in zip(changes, marks, strict=True):
            note = "" if mark == -1 else "  [UNDECLARED]" if mark is None else f"  [declared: change {mark + 1}]"
            typer.echo(f"{change}{note}")
        for i, d in enumerate(declared):
            typer.echo(f"change {i + 1} ({', '.join(d.pointers)}): {d.reason}")
        undeclared = sum(m is None for m in marks)
        typer.echo(f"{undeclared} undeclared change(s)")
        if undeclared and not declared:
            typer.echo(
                f"{b} declares no `changes` yet: freeze refuses a new version until each change is declared "
                '(`"changes": [{"pointers": [...], "reason": "..."}]`)'
            )
    same = protocol_hash(doc_a) == protocol_hash(doc_b)
    typer.echo(f"{len(changes)} change(s), {len(hashed)} in hashed content; hashes {'equal' if same else 'differ'}")


def _declared(document: Any) -> list[DeclaredChange] | None:
    """The document's declared changes ([] where it declares none; None where they do not parse)."""
    from pydantic import ValidationError

    from cltoolkit.protocol.models import DeclaredChange

    raw = document.get("changes") if isinstance(document, dict) else None
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        return None
    try:
        return [DeclaredChange.model_validate(c) for c in raw]
    except ValidationError:
        return None


@command(app, "erratum")
def erratum(
    protocol_id: Annotated[str, typer.Argument(help="Frozen protocol id.")],
    text: Annotated[str, typer.Option("--text", help="What differs, why, and its expected effect.")],
    where: Annotated[str, typer.Option("--where", help="Where the reference shows it (file, lines, commit).")] = "",
) -> None:
    """Record a difference from the reference found after freezing (status.errata, outside the hash): every report
    prints it as not pre-registered; the next version declares or removes it. Re-report to show it."""
    from cltoolkit.freeze_actions import add_erratum

    path, n = add_erratum(project(), protocol_id, text, where=where)
    typer.echo(f"{path}: erratum {n} recorded (outside the hash; the lock still holds); re-report to print it")


@command(app, "amend-code")
def amend_code(
    protocol_id: Annotated[str, typer.Argument(help="Frozen protocol id.")],
    component: Annotated[str, typer.Option("--component", help="`<kind>:<name>` of the changed component.")],
    reason: Annotated[str, typer.Option("--reason", help="Why the code changed, and its expected effect.")],
) -> None:
    """Record that a pinned component's code changed after freezing (status.codeAmendments, outside the hash, dated,
    append-only): runs of the code as it is now are accepted and every report prints the amendment first, as not
    pre-registered. The alternatives: restore the frozen code, or bump the protocol."""
    from cltoolkit.freeze_actions import amend_code as do_amend

    path, amendment = do_amend(project(), protocol_id, component, reason)
    console().print(
        f"{path}: code amendment of {amendment.component} recorded ({amendment.sourceSha256[:19]}..., "
        f"{amendment.on}); runs of this code are accepted; re-report to print it"
    )


@command(app, "bump")
def bump(protocol_id: Annotated[str, typer.Argument(help="Frozen protocol id.")]) -> None:
    """Copy a frozen protocol to the next version (unfrozen draft with `supersedes`)."""
    from cltoolkit.freeze_actions import bump as do_bump

    target = do_bump(project(), protocol_id)
    console().print(f"wrote {target} (draft; edit it, then `clt protocol freeze {target.stem}`)")
