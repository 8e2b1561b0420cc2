"""`clt env`: a protocol's own package stack (`packages` in the protocol, resolved at freezing)."""

from __future__ import annotations

from typing import Annotated

import typer

from cltoolkit.cli._common import command, project

app = typer.Typer(help="Build a protocol's own package environment.", no_args_is_help=True)


@command(app, "build")
def build(
    protocol_id: Annotated[str, typer.Argument(help="A frozen protocol whose lock pins a package stack.")],
) -> None:
    """Build (or find) the environment of the protocol's package file: exactly its distributions, each checked
    against its SHA-256 (`CLT_ENV_CACHE` sets where environments live; `CLT_PIP_ARGS` adds pip options)."""
    from pathlib import Path

    import cltoolkit
    from cltoolkit.errors import InputError, Refusal
    from cltoolkit.packages import build as build_env
    from cltoolkit.packages import interpreter, pip_options
    from cltoolkit.protocol.lock import package_problems, read_lock

    proj = project()
    lock = read_lock(proj, protocol_id)
    if lock is None:
        raise Refusal(f"{protocol_id} is not frozen: its package stack is resolved when it is frozen")
    if lock.packages is None:
        raise InputError(f"{protocol_id}: its lock pins no package stack: its runs use the toolkit's environment")
    problems = package_problems(proj, lock.packages)  # the package file is the one the lock names, unedited
    if problems:
        raise Refusal("\n".join(problems))
    toolkit = Path(cltoolkit.__file__).resolve().parent.parent
    env = build_env(proj.locks_dir / lock.packages.file, toolkit, pip_options())
    typer.echo(f"{protocol_id}: environment {lock.packages.sha256[:19]}... at {env} ({interpreter(env)})")
