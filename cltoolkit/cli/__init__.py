"""The `clt` command line: one Typer sub-app per noun, each command calling one library function."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def _quiet_ctrl_c() -> Iterator[None]:
    """A Ctrl-C while the command line loads (imports, sub-app registration, Typer building the command) exits 130
    without a traceback, as one during a command does."""
    try:
        yield
    except KeyboardInterrupt:
        raise SystemExit(130) from None


with _quiet_ctrl_c():
    import json
    from typing import Annotated, Any

    import typer

    from cltoolkit import __version__
    from cltoolkit.cli import protocol as protocol_cli
    from cltoolkit.cli._common import command, print_json, project, set_root

__all__ = ["app", "main"]

app = typer.Typer(
    name="clt",
    help="clt: pre-registered, frozen, un-cherry-pickable continual-learning evaluations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)
app.add_typer(protocol_cli.app, name="protocol")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"clt {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    root: Annotated[
        str | None, typer.Option("--root", help="Project folder (default: CLT_ROOT, else found upward).")
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    set_root(root)


@command(app, "init")
def init(
    folder: Annotated[str, typer.Argument(help="Folder of the new evaluation repository (created if needed).")] = ".",
) -> None:
    """Start an evaluation repository: folders, README, .gitignore, a CI workflow, the protocol schema."""
    from pathlib import Path

    from cltoolkit.scaffold import init_project

    written = init_project(Path(folder))
    typer.echo(f"initialised {folder}: " + ", ".join(str(p.relative_to(folder)) for p in written))
    if Path(folder) / ".git" in written:
        typer.echo(
            "git: a new repository (commit each lock with its protocol; `clt protocol verify` checks its history)"
        )
    typer.echo("next: clt protocol new --suite <suite> <name>-v1 (inside the folder)")


@command(app, "schema")
def schema(name: Annotated[str, typer.Argument(help="protocol | lock | run-record | results")]) -> None:
    """Print a JSON Schema."""
    from cltoolkit.schemas import generate

    print_json(generate(name))


@command(app, "list")
def list_(
    kind: Annotated[str | None, typer.Argument(help="suite | method | metric | analysis | executor")] = None,
    name: Annotated[
        str | None, typer.Argument(help="One component: its summary, parameters, types and defaults.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show registered components (with a name: one component in full)."""
    from cltoolkit.registry import KINDS, registries

    regs = registries(project().components_file if _has_project() else None)
    if name is not None:
        if kind is None:
            raise typer.BadParameter("give the kind before the name, e.g. `clt list method ladder.least-squares`")
        _describe(regs, kind, name, json_out)
        return
    kinds = [kind] if kind else list(KINDS)
    rows = []
    for k in kinds:
        reg = regs[k]
        for n in reg.names():
            summary = _summary(reg.get(n))
            rows.append({"kind": k, "name": n, "summary": summary, "target": reg.target(n), "origin": reg.origin(n)})
    if json_out:
        print_json(rows)
        return
    from rich.table import Table

    from cltoolkit.cli._common import console

    table = Table("kind", "name", "summary", "target", "origin")
    for row in rows:
        table.add_row(*(row[c] for c in ("kind", "name", "summary", "target", "origin")))
    for column in table.columns:
        column.overflow = "fold"  # names and targets are shown whole, never cut
    console().print(table)


def _summary(component: Any) -> str:
    """A component's one-line summary, else the first line of its docstring."""
    doc = (getattr(component, "__doc__", None) or "").strip()
    return str(getattr(component, "summary", "") or (doc.splitlines()[0] if doc else ""))


def _describe(regs: Any, kind: str, name: str, json_out: bool) -> None:
    """One component: what it is, where it comes from and every hyperparameter with type, default and meaning."""
    reg = regs[kind]
    component = reg.get(name)
    params = getattr(component, "Params", None)
    fields = []
    for field, info in params.model_fields.items() if params is not None else []:
        required = info.is_required()
        fields.append(
            {
                "name": field,
                "type": getattr(info.annotation, "__name__", str(info.annotation)),
                "default": None if required else info.get_default(call_default_factory=True),
                "required": required,
                "description": info.description or "",
            }
        )
    doc = (component.__doc__ or "").strip()
    out = {
        "kind": kind,
        "name": name,
        "summary": _summary(component),
        "description": doc,
        "target": reg.target(name),
        "origin": reg.origin(name),
        "suite": getattr(component, "suite", None),
        "parameters": fields,
    }
    if json_out:
        print_json(out)
        return
    typer.echo(f"{kind} {name}: {out['summary']}")
    typer.echo(f"  from {out['target']} ({out['origin']})" + (f"; suite {out['suite']}" if out["suite"] else ""))
    if doc:
        typer.echo("  " + " ".join(doc.split()))
    if kind == "method":
        if not fields:
            typer.echo("  takes no hyperparameters")
        for f in fields:
            default = "required" if f["required"] else f"default {json.dumps(f['default'])}"
            typer.echo(f"  hyperparameter {f['name']} ({f['type']}, {default}): {f['description']}")
    for attr in ("unit", "higher_is_better"):
        if hasattr(component, attr):
            typer.echo(f"  {attr}: {getattr(component, attr)}")


def _has_project() -> bool:
    from cltoolkit.errors import InputError

    try:
        project()
    except InputError:
        return False
    return True


def _register_optional() -> None:
    """Sub-apps of the run, report and plan layers."""
    from cltoolkit.cli import env as env_cli
    from cltoolkit.cli import plan as plan_cli
    from cltoolkit.cli import report as report_cli
    from cltoolkit.cli import run as run_cli

    app.add_typer(plan_cli.app, name="plan")
    app.add_typer(env_cli.app, name="env")
    run_cli.register(app)
    report_cli.register(app)


with _quiet_ctrl_c():
    _register_optional()


def main() -> None:
    with _quiet_ctrl_c():
        app()
