"""`clt --help` and every sub-command's help: flags without type placeholders, a line for every option, shell
completion offered."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer.main

from cltoolkit.cli import app


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _commands(sub, (*path, name))
    return out


def test_every_option_has_help_and_no_type_placeholder(cli) -> None:
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


def test_flags_show_no_value_and_values_show_a_name(cli) -> None:
    out = cli("run", "--help").output
    pilot = next(line for line in out.splitlines() if "--pilot" in line)
    workers = next(line for line in out.splitlines() if "--workers" in line)
    assert re.search(r"--pilot\s+Pilot run", pilot), pilot  # a flag: nothing between the flag and its help
    assert re.search(r"--workers\s+WORKERS \[x>=1\]\s+Parallel", workers), workers  # its bound shown


def test_output_to_a_pipe_never_folds_a_path(tmp_path, monkeypatch) -> None:
    """Rich wraps at 80 columns when stdout is not a terminal; a path must come out on one line all the same (logs
    and scripts read it): `clt protocol bump` of a frozen protocol in a deeply nested project."""
    import subprocess
    import sys

    deep = tmp_path / ("a-very-long-folder-name-" * 4) / "project"
    env = {"PATH": f"{__import__('pathlib').Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    clt = [sys.executable, "-c", "from cltoolkit.cli import main; main()"]
    subprocess.run([*clt, "init", str(deep)], check=True, capture_output=True, env=env)
    for args in (["protocol", "new", "--suite", "ladder", "study-v1"], ["protocol", "freeze", "study-v1"]):
        subprocess.run([*clt, *args], check=True, capture_output=True, cwd=deep, env=env)
    done = subprocess.run([*clt, "protocol", "bump", "study-v1"], capture_output=True, text=True, cwd=deep, env=env)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"wrote {deep / 'protocols' / 'study-v2.json'} "), done.stdout


def test_init_starts_a_git_repository_unless_inside_one(tmp_path, cli) -> None:
    import subprocess

    out = cli("init", str(tmp_path / "study"))
    assert out.exit_code == 0
    assert (tmp_path / "study" / ".git").is_dir()
    assert "git: a new repository (commit each lock with its protocol" in out.output
    nested = cli("init", str(tmp_path / "study" / "inner"))  # already inside a work tree: no repository in it
    assert nested.exit_code == 0
    assert not (tmp_path / "study" / "inner" / ".git").exists()
    assert "git: a new repository" not in nested.output
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=tmp_path / "study", capture_output=True, text=True
    )
    assert Path(top.stdout.strip()).resolve() == (tmp_path / "study").resolve()
