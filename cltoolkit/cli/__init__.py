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
    from typing import Annotated

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


@command(app, "schema")
def schema(name: Annotated[str, typer.Argument(help="protocol | lock | run-record | results")]) -> None:
    """Print a JSON Schema."""
    from cltoolkit.schemas import generate

    print_json(generate(name))


@command(app, "list")
def list_(
    kind: Annotated[
        str | None, typer.Argument(help="suite | environment | method | metric | analysis | executor")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show registered components."""
    from cltoolkit.registry import KINDS, registries

    regs = registries(project().components_file if _has_project() else None)
    kinds = [kind] if kind else list(KINDS)
    rows = []
    for k in kinds:
        reg = regs[k]
        for name in reg.names():
            rows.append({"kind": k, "name": name, "target": reg.target(name), "origin": reg.origin(name)})
    if json_out:
        print_json(rows)
        return
    from rich.table import Table

    from cltoolkit.cli._common import console

    table = Table("kind", "name", "target", "origin")
    for row in rows:
        table.add_row(row["kind"], row["name"], row["target"], row["origin"])
    console().print(table)


def _has_project() -> bool:
    from cltoolkit.errors import InputError

    try:
        project()
    except InputError:
        return False
    return True


def _register_optional() -> None:
    """Sub-apps of the run, report and plan layers."""
    from cltoolkit.cli import plan as plan_cli
    from cltoolkit.cli import report as report_cli
    from cltoolkit.cli import run as run_cli

    app.add_typer(plan_cli.app, name="plan")
    run_cli.register(app)
    report_cli.register(app)


with _quiet_ctrl_c():
    _register_optional()


def main() -> None:
    with _quiet_ctrl_c():
        app()
