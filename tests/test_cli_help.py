"""`clt --help` and every sub-command's help: flags without type placeholders, a line for every option, shell
completion offered."""

from __future__ import annotations

import re
from typing import Any

import typer.main

from cltoolkit.cli import app


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _commands(sub, (*path, name))
    return out


def test_every_option_has_help_and_no_type_placeholder(cli) -> None:  # type: ignore[no-untyped-def]
    root = typer.main.get_command(app)
    commands = _commands(root)
    assert len(commands) > 10
    for path, cmd in commands:
        for param in cmd.params:
            if getattr(param, "param_type_name", "") == "option" and not getattr(param, "hidden", False):
                assert param.help, f"clt {' '.join(path)} {param.opts[0]} has no help line"
        out = cli(*path, "--help")
        assert out.exit_code == 0, out.output
        for placeholder in ("<bool>", "<str>", "<int>", "<float>", "<list["):
            assert placeholder not in out.output, f"clt {' '.join(path)} --help shows {placeholder}"
    top = cli("--help").output
    assert "--install-completion" in top


def test_flags_show_no_value_and_values_show_a_name(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli("run", "--help").output
    pilot = next(line for line in out.splitlines() if "--pilot" in line)
    workers = next(line for line in out.splitlines() if "--workers" in line)
    assert re.search(r"--pilot\s+Pilot run", pilot), pilot  # a flag: nothing between the flag and its help
    assert re.search(r"--workers\s+WORKERS\s+Parallel", workers), workers
