"""`clt run` and `clt status`."""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from cltoolkit.cli._common import command, print_json, project

__all__ = ["register"]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v for item in values or [] for v in item.split(",") if v)


def register(app: typer.Typer) -> None:
    @command(app, "run")
    def run(
        protocol: Annotated[str, typer.Option("--protocol", "-p", help="Protocol id or path.")],
        pilot: Annotated[bool, typer.Option("--pilot", help="Pilot run (draft protocols; never reported).")] = False,
        stage: Annotated[str | None, typer.Option("--stage", help="Stage id (default: the first).")] = None,
        sets: Annotated[list[str] | None, typer.Option("--set", help="key.path=JSON override (makes a pilot).")] = None,
        methods: Annotated[
            list[str] | None, typer.Option("--methods", help="Comparison ids (comma-separated).")
        ] = None,
        seeds: Annotated[list[str] | None, typer.Option("--seeds", help="Seeds (comma-separated).")] = None,
        orders: Annotated[list[str] | None, typer.Option("--orders", help="Task order ids (comma-separated).")] = None,
        cells: Annotated[list[str] | None, typer.Option("--cells", help="Grid cells (comma-separated).")] = None,
        workers: Annotated[
            int | None, typer.Option("--workers", min=1, help="Parallel runs, at least 1 (default: cores).")
        ] = None,
        timeout: Annotated[float | None, typer.Option("--timeout", help="Per-run limit in seconds.")] = None,
        threads: Annotated[int, typer.Option("--threads", min=1, help="Torch threads per run.")] = 1,
        executor: Annotated[
            str, typer.Option("--executor", help="local (default) or ray (extra clt-prereg[ray]).")
        ] = "local",
        address: Annotated[
            str | None, typer.Option("--address", help="Ray: auto or host:port to join a cluster (default: start one).")
        ] = None,
        connect_timeout: Annotated[
            float, typer.Option("--connect-timeout", help="Ray: seconds to wait for the cluster at --address.")
        ] = 15.0,
        cpus: Annotated[float, typer.Option("--cpus-per-run", help="CPUs each run needs.")] = 1.0,
        gpus: Annotated[float, typer.Option("--gpus-per-run", help="GPUs each run needs.")] = 0.0,
        memory: Annotated[int | None, typer.Option("--memory-per-run", help="Memory each run needs (MB).")] = None,
        device: Annotated[
            str | None,
            typer.Option(
                "--device",
                help="Torch device of the runs' models: auto, cpu, cuda or cuda:N (default: cuda with "
                "--gpus-per-run, else cpu).",
            ),
        ] = None,
        attempts: Annotated[int, typer.Option("--max-attempts", help="Attempts for a run whose process dies.")] = 2,
        wait: Annotated[
            bool, typer.Option("--wait", help="If another driver holds the store, wait for it instead of exiting.")
        ] = False,
        redo: Annotated[
            list[str] | None,
            typer.Option("--redo", help="Completed run ids to run again (comma-separated; only those run)."),
        ] = None,
        reason: Annotated[
            str | None, typer.Option("--reason", help="Why --redo replaces them (kept in each new record).")
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Run a protocol's grid (skipping finished runs) and write one record per run."""
        from cltoolkit.cli.progress import RunProgress
        from cltoolkit.errors import InputError
        from cltoolkit.run.runner import (
            Callbacks,
            ExecutorChoice,
            GridSummary,
            Redo,
            RunOptions,
            Selection,
            run_protocol,
        )
        from cltoolkit.run.spec import Resources

        try:
            seed_list = tuple(int(s) for s in _split(seeds))
        except ValueError:
            raise InputError("--seeds takes integers, e.g. --seeds 0,1,2") from None
        selection = Selection(_split(methods), seed_list, _split(orders), _split(cells))
        if attempts < 1:
            raise InputError("--max-attempts must be at least 1")
        if reason is not None and not redo:
            raise InputError("--reason goes with --redo (the completed runs to replace)")
        redone = Redo(_split(redo), reason or "") if redo else None
        device = device or ("cuda" if gpus > 0 else "cpu")
        if not re.match(r"^(auto|cpu|cuda(:[0-9]+)?)$", device):
            raise InputError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N")

        progress = RunProgress(quiet=json_out)

        def planned(summary: GridSummary) -> None:
            todo = summary.planned - summary.skipped
            if todo and not json_out:  # with nothing to run, the closing line says it all
                sys.stderr.write(
                    f"{'PILOT ' if summary.pilot else ''}{summary.protocol} stage {summary.stage} "
                    f"({summary.sha256[:19]}...): {summary.planned} planned, {summary.skipped} already completed, "
                    f"{todo} to run on {min(summary.workers, todo)} worker(s)\n"
                )
                if summary.estimate is not None:
                    sys.stderr.write(summary.estimate.line(min(summary.workers, todo)) + "\n")
                else:
                    sys.stderr.write(
                        f"estimate: none yet (no run of {summary.protocol} has been measured; the finished runs "
                        "give one, and `clt status` shows them)\n"
                    )
            for warning in summary.warnings:
                sys.stderr.write(f"warning: {warning}\n")
            for where, why in summary.redone:
                run_dir = Path(where).parent if Path(where).name == "record.json" else Path(where)
                sys.stderr.write(f"redoing {run_dir.name}: {why}\n")
            progress.begin(summary.planned - summary.skipped)

        run_options = RunOptions(
            pilot=pilot,
            stage=stage,
            sets=tuple(sets or ()),
            selection=selection,
            workers=workers,
            resources=Resources(
                threads=threads,
                timeout_s=timeout,
                max_attempts=attempts,
                cpus=cpus,
                gpus=gpus,
                memory_mb=memory,
                device=device,
            ),
            executor=ExecutorChoice(
                executor, {"address": address, "connect_timeout_s": connect_timeout} if address else {}
            ),
            wait=wait,
            redo=redone,
        )
        # SIGTERM (schedulers, `kill`) stops a grid like Ctrl-C: running runs are recorded as interrupted; and
        # Ctrl-C works even when the shell started `clt run` in the background with SIGINT ignored
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            summary = run_protocol(
                project(), protocol, run_options, Callbacks(planned, progress.started, progress.finished)
            )
        except KeyboardInterrupt:
            progress.close()
            sys.stderr.write(
                f"interrupted: clt run --protocol {protocol} stopped by the user. Finished runs keep their records; "
                "runs that were running are recorded as 'interrupted' (a --redo keeps its completed record and "
                "stays pending, `clt status` shows it). Run `clt run` again to resume: completed runs are skipped, "
                "pending redos and the rest are run.\n"
            )
            raise typer.Exit(130) from None
        finally:
            progress.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        counts = summary.counts()
        if json_out:
            print_json(
                {
                    "protocol": summary.protocol,
                    "sha256": summary.sha256,
                    "pilot": summary.pilot,
                    "store": str(summary.store),
                    "planned": summary.planned,
                    "skipped": summary.skipped,
                    "ran": counts,
                }
            )
        else:
            label = "PILOT " if summary.pilot else ""
            typer.echo(
                f"{label}{summary.protocol} ({summary.sha256[:19]}...): {summary.planned} planned, {summary.skipped} "
                f"already completed, ran {sum(counts.values())} {counts or ''} -> {summary.store}"
            )
        if any(state != "completed" for state in counts):
            raise typer.Exit(1)

    @command(app, "seal")
    def seal(
        protocol: Annotated[str, typer.Option("--protocol", "-p", help="Protocol id or path.")],
        pilot: Annotated[bool, typer.Option("--pilot", help="The pilot store of the current content.")] = False,
    ) -> None:
        """Seal the records written before records were sealed (once; values unchanged, a seal added)."""
        from cltoolkit.run.status import seal_store

        sealed, already = seal_store(project(), protocol, pilot=pilot)
        typer.echo(f"{protocol}: sealed {sealed} record(s); {already} were sealed already")

    @command(app, "status")
    def status(
        protocol: Annotated[str, typer.Option("--protocol", "-p", help="Protocol id or path.")],
        stage: Annotated[str | None, typer.Option("--stage", help="Stage id (default: the first).")] = None,
        pilot: Annotated[bool, typer.Option("--pilot", help="The pilot store of the current content.")] = False,
        scores: Annotated[
            bool, typer.Option("--scores", help="Also each completed run's raw declared scores.")
        ] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """The grid (comparison x cell x order x seed) with each run's state (and raw scores: never results)."""
        from cltoolkit.report.format import fmt
        from cltoolkit.run.status import STATE_LETTERS, grid_status

        grid = grid_status(project(), protocol, stage=stage, pilot=pilot)
        if json_out:
            print_json(grid.as_dict())
            return
        if grid.note:
            typer.echo(f"note: {grid.note}", err=True)
        typer.echo(
            f"{grid.protocol} ({grid.sha256[:19]}...), stage {grid.stage}{' (pilot store)' if pilot else ''}: "
            + ", ".join(f"{k} {v}" for k, v in grid.counts.items() if v)
        )
        seeds = grid.seeds
        rows: dict[str, dict[int, str]] = {}
        for run in grid.runs:
            rows.setdefault(run.row, {})[run.seed] = STATE_LETTERS[run.state]
        width = max(len(r) for r in rows) if rows else 10
        typer.echo(" " * width + "  " + " ".join(f"{s:>3}" for s in seeds))
        for label, states in rows.items():
            typer.echo(f"{label:<{width}}  " + " ".join(f"{states.get(s, ' '):>3}" for s in seeds))
        typer.echo("legend: " + ", ".join(f"{v} {k}" for k, v in STATE_LETTERS.items()))
        if scores:
            label = (
                "PILOT runs: raw per-run scores for planning, never results"
                if pilot
                else ("raw per-run scores (results come only from `clt report`)")
            )
            typer.echo(f"\n{label}")
            for run in grid.runs:
                if run.scores:
                    parts = []
                    for key, value in run.scores.items():
                        if isinstance(value, dict):  # the report's number format (4.252e-04, never 0.000)
                            value = "{" + ", ".join(f"{k} {fmt(v)}" for k, v in value.items()) + "}"
                        elif isinstance(value, float):
                            value = fmt(value)
                        parts.append(f"{key.split('.', 1)[-1]} {value}")
                    typer.echo(f"  {run.runId}: " + "; ".join(parts))
