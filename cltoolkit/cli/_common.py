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


def console(*, stderr: bool = False) -> Any:
    """Rich output for people. When the stream is not a terminal (a pipe, a log, a script), lines are never folded:
    rich would otherwise wrap at 80 columns and split paths and commands that logs and scripts read."""
    from rich.console import Console

    out = Console(stderr=stderr)
    if not out.is_terminal:
        out.soft_wrap = True
    return out


def err_console() -> Any:
    return console(stderr=True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def fail(exc: CltError) -> typer.Exit:
    """Print a user error (one line per problem, no traceback) and return the exit to raise."""
    sys.stderr.write(f"error: {exc.message}\n" if "\n" not in exc.message else f"error:\n{exc.message}\n")
    return typer.Exit(exc.exit_code)


def environment_fault(exc: OSError) -> str | None:
    """A one-line cause for faults of the machine rather than the program (read-only, full, not permitted)."""
    import errno

    return {
        errno.EROFS: "the file system is read-only",
        errno.ENOSPC: "no space left on the device (free some and run again: finished runs are kept)",
        errno.EDQUOT: "disk quota exceeded",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
    }.get(exc.errno or 0)


def _readable_metavars() -> None:
    """Help that shows what an option takes: nothing for a flag, its name for a value. Typer 0.29 prints the Python
    type instead (`<bool>`, `<str>`, `<list[str]>`), which makes flags look as if they took a value; this changes
    that display for clt's own commands only (the one place Typer decides it)."""
    from typer.core import TyperArgument, TyperOption

    if not hasattr(TyperOption, "display_type_rich") or getattr(TyperOption, "_clt_metavars", False):
        return

    def display(self: Any, ctx: Any) -> str | None:
        if self.metavar is not None:
            return str(self.metavar)
        if self.is_flag or self.is_bool_flag:
            return None
        long = next((o for o in self.opts if o.startswith("--")), self.opts[0] if self.opts else "value")
        name = long.lstrip("-").upper().replace("-", "_")
        return name + ("..." if self.multiple else "")

    TyperOption.display_type_rich = display  # type: ignore[method-assign]
    if hasattr(TyperArgument, "display_type_rich"):  # an argument's name column already says what it takes
        TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]
    setattr(TyperOption, "_clt_metavars", True)  # noqa: B010


_readable_metavars()


def command(app: typer.Typer, *args: Any, **kwargs: Any) -> Callable[[F], F]:
    """`@app.command()` that turns `CltError` into a message and an exit code."""

    def decorator(func: F) -> F:

        @functools.wraps(func)
        def wrapper(*a: Any, **kw: Any) -> Any:
            try:
                return func(*a, **kw)
            except CltError as exc:
                raise fail(exc) from None
            except OSError as exc:
                why = environment_fault(exc)
                if why is None:
                    raise  # not the environment: a bug keeps its traceback
                raise fail(CltError(f"{exc.filename or 'a file'}: {why}; nothing half-written was kept")) from None

        app.command(*args, **kwargs)(wrapper)
        return func

    return decorator
