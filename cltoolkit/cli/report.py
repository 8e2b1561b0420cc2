"""`clt report`: the gatekeeper fills the protocol's results block and writes the human reports."""

from __future__ import annotations

from typing import Annotated

import typer

from cltoolkit.cli._common import command, print_json, project

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @command(app, "report")
    def report(
        protocol: Annotated[str, typer.Option("--protocol", "-p", help="Frozen protocol id.")],
        stage: Annotated[str | None, typer.Option("--stage", help="Stage to report (default: the first).")] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Compute without writing anything.")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Print the results block.")] = False,
        aggregate: Annotated[
            str | None,
            typer.Option("--aggregate", help="Must equal the protocol's declared aggregate (refused otherwise)."),
        ] = None,
        check: Annotated[
            bool,
            typer.Option(
                "--check",
                help="Recompute every committed results block from the records in place, render its reports again, and "
                "fail on any difference or on a reported stage whose block or report is gone (writes nothing).",
            ),
        ] = False,
        render: Annotated[
            bool,
            typer.Option(
                "--render",
                help="Write the reports of every committed results block again from the block and its records (after "
                "a change of the report's layout); the blocks must reproduce first.",
            ),
        ] = False,
        allow_mixed_code: Annotated[
            bool,
            typer.Option(
                "--allow-mixed-code",
                help="Report records of one comparison made by different component code (flagged in the report).",
            ),
        ] = False,
    ) -> None:
        """Refuse unearned results; otherwise write `results` and `status` and reports/<id>/report.{md,html}."""
        from cltoolkit.run.store import collection_paused

        with collection_paused():  # for the whole command, ended once its records are freed (see `_report`)
            _report(protocol, stage, dry_run, json_out, aggregate, check, render, allow_mixed_code)


def _report(
    protocol: str,
    stage: str | None,
    dry_run: bool,
    json_out: bool,
    aggregate: str | None,
    check: bool,
    render: bool,
    allow_mixed_code: bool,
) -> None:
    """`clt report`'s work. Its caller pauses Python's cyclic garbage collector around it, and this function's
    frame holds every record it reads, so the collector resumes only after they are freed: the report's 10,000
    records are acyclic objects that a collection pass would walk and not free (measured on `bench/report.py`'s
    project: 0.15-0.2 CPU-s of a 2.5 s report, in passes during the command and one when the gatekeeper resumed
    the collector)."""
    from cltoolkit.gatekeeper.committed import check_results, render_committed
    from cltoolkit.gatekeeper.gatekeeper import report_protocol

    if render:
        for path in render_committed(project(), protocol):
            typer.echo(f"{protocol}: rendered {path}")
        return
    if check:
        for outcome in check_results(project(), protocol):
            typer.echo(
                f"{protocol}: {outcome.source} (stage {outcome.stage}) reproduces from {outcome.records} records"
            )
        return
    out = report_protocol(
        project(), protocol, stage=stage, dry_run=dry_run, aggregate=aggregate, allow_mixed_code=allow_mixed_code
    )
    if json_out:
        print_json(out.results.model_dump(mode="json"))
        return
    r = out.results
    typer.echo(
        f"{out.protocol.id}: {r.runs.completed}/{r.runs.planned} runs completed "
        f"({r.runs.failed} failed, {r.runs.crashed} crashed, {r.runs.timeout} timeout, {r.runs.missing} missing)"
    )
    for g in r.gates:
        typer.echo(f"  gate {g.id}: {g.decision} - {g.wording}")
    if out.written:
        typer.echo(f"results written into {out.protocol.id}; reports: {', '.join(str(p) for p in out.reports)}")
    else:
        typer.echo("dry run: nothing written")
