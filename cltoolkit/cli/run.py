"""`clt run` and `clt status`."""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from cltoolkit.cli._common import command, print_json, project

__all__ = ["register"]


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v for item in values or [] for v in item.split(",") if v)


def register(app: typer.Typer) -> None:
    @command(app, "run")
    def run(
        protocol: Annotated[str, typer.Option("--protocol", "-p", help="Protocol id or path.")],
        pilot: Annotated[bool, typer.Option("--pilot", help="Pilot run (draft protocols; never reported).")] = False,
        stage: Annotated[str | None, typer.Option("--stage", help="Stage id (default: the first).")] = None,
        sets: Annotated[list[str] | None, typer.Option("--set", help="key.path=JSON override (makes a pilot).")] = None,
        methods: Annotated[list[str] | None, typer.Option("--methods", help="Comparison ids (comma-separated).")] = None,
        seeds: Annotated[list[str] | None, typer.Option("--seeds", help="Seeds (comma-separated).")] = None,
        orders: Annotated[list[str] | None, typer.Option("--orders")] = None,
        cells: Annotated[list[str] | None, typer.Option("--cells")] = None,
        workers: Annotated[int | None, typer.Option("--workers", help="Parallel runs (default: cores).")] = None,
        timeout: Annotated[float | None, typer.Option("--timeout", help="Per-run limit in seconds.")] = None,
        threads: Annotated[int, typer.Option("--threads", help="Torch threads per run.")] = 1,
        executor: Annotated[str, typer.Option("--executor")] = "local",
        json_out: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Run a protocol's grid (skipping finished runs) and write one record per run."""
        from cltoolkit.errors import InputError
        from cltoolkit.run.runner import Selection, run_protocol

        try:
            seed_list = tuple(int(s) for s in _split(seeds))
        except ValueError:
            raise InputError("--seeds takes integers, e.g. --seeds 0,1,2") from None
        selection = Selection(_split(methods), seed_list, _split(orders), _split(cells))
        start = time.monotonic()

        def progress(result, done, total):  # type: ignore[no-untyped-def]
            if not json_out:
                elapsed = time.monotonic() - start
                eta = elapsed / done * (total - done)
                sys.stderr.write(
                    f"[{done}/{total}] {result.spec.run_id}: {result.state}"
                    f"{' (' + result.reason + ')' if result.reason else ''} - elapsed {elapsed:.0f} s, ~{eta:.0f} s left\n"
                )

        summary = run_protocol(
            project(), protocol, pilot=pilot, stage=stage, sets=sets or (), selection=selection, workers=workers,
            timeout_s=timeout, threads=threads, executor=executor, on_result=progress,
        )
        counts = summary.counts()
        if json_out:
            print_json({"protocol": summary.protocol, "sha256": summary.sha256, "pilot": summary.pilot,
                        "store": str(summary.store), "planned": summary.planned, "skipped": summary.skipped, "ran": counts})
        else:
            label = "PILOT " if summary.pilot else ""
            typer.echo(
                f"{label}{summary.protocol} ({summary.sha256[:19]}...): {summary.planned} planned, {summary.skipped} already "
                f"completed, ran {sum(counts.values())} {counts or ''} -> {summary.store}"
            )
        if any(state != "completed" for state in counts):
            raise typer.Exit(1)
