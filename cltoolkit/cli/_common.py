"""What every command shares: the project, error handling, JSON output."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from cltoolkit.errors import CltError
from cltoolkit.project import Project, find_project

__all__ = ["command", "console", "err_console", "print_json", "project"]

F = TypeVar("F", bound=Callable[..., Any])
_ROOT: dict[str, str | None] = {"root": None}


def set_root(root: str | None) -> None:
    _ROOT["root"] = root
    if root is not None:  # registries, workers and plugins find the project the same way
        os.environ["CLT_ROOT"] = str(Path(root).resolve())


def project() -> Project:
    return find_project(_ROOT["root"])


def console() -> Any:
    from rich.console import Console

    return Console()


def err_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def fail(exc: CltError) -> typer.Exit:
    """Print a user error (one line per problem, no traceback) and return the exit to raise."""
    sys.stderr.write(f"error: {exc.message}\n" if "\n" not in exc.message else f"error:\n{exc.message}\n")
    return typer.Exit(exc.exit_code)


def command(app: typer.Typer, *args: Any, **kwargs: Any) -> Callable[[F], F]:
    """`@app.command()` that turns `CltError` into a message and an exit code."""

    def decorator(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*a: Any, **kw: Any) -> Any:
            try:
                return func(*a, **kw)
            except CltError as exc:
                raise fail(exc) from None

        app.command(*args, **kwargs)(wrapper)
        return func

    return decorator
