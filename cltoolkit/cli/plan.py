"""`clt plan power`: replicates needed for a comparison, from a stated sigma_D or from a protocol's pilot runs."""

from __future__ import annotations

from typing import Annotated

import typer

from cltoolkit.cli._common import command, print_json, project

app = typer.Typer(help="Plan evaluations (power).", no_args_is_help=True)


@command(app, "power")
def power(
    sigma: Annotated[float | None, typer.Option("--sigma", help="SD of paired differences (sigma_D).")] = None,
    delta: Annotated[float | None, typer.Option("--delta", help="Smallest difference worth detecting.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level of each test.")] = 0.05,
    target: Annotated[float, typer.Option("--power", help="Target power.")] = 0.8,
    test: Annotated[str, typer.Option("--test", help="two-sided | one-sided | tost")] = "two-sided",
    median: Annotated[
        bool, typer.Option("--median", help="Plan the exact sign test (a median aggregate) instead of the t test.")
    ] = False,
    protocol: Annotated[str | None, typer.Option("--protocol", help="Protocol id (with --from-pilot).")] = None,
    from_pilot: Annotated[
        bool, typer.Option("--from-pilot", help="sigma_D per declared gate from pilot runs.")
    ] = False,
    pilot_hash: Annotated[str | None, typer.Option("--pilot-hash", help="Pilot store (hash prefix) to use.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Replicates needed: the normal approximation and the exact answer (noncentral t / TOST; with --median the
    sign test / two one-sided sign tests, as a median-aggregate gate is decided)."""
    from cltoolkit import stats
    from cltoolkit.errors import InputError

    if protocol is not None or from_pilot:
        if not (protocol and from_pilot):
            raise InputError("use --protocol <id> together with --from-pilot")
        from cltoolkit.planning import pilot_plan

        out = pilot_plan(project(), protocol, pilot_hash=pilot_hash)
        if json_out:
            print_json(out.as_dict())
            return
        typer.echo(
            f"{out.protocol}: pilot store {out.pilotStore} (stages {', '.join(out.pilotStages)}, "
            f"{out.pilotReplicates} replicates); declared {out.declaredReplicates} replicates, target power "
            f"{out.targetPower}"
        )
        for g in out.gates:
            sd = "n/a" if g.sd is None else f"{g.sd:.4g}"
            line = f"  {g.gate} [{g.scope}] {g.test}: sigma_D = {sd} from {g.pilotReplicates} pilot replicates"
            if g.delta is None:
                line += "; no delta declared, so no replicate count"
            elif g.neededExact is not None:
                line += (
                    f"; delta {g.delta}, alpha {g.alpha:.4g} ({g.sides}-sided): need {g.neededExact} "
                    f"(exact {g.decidedBy})"
                    + ("" if g.neededNormal is None else f", {g.neededNormal} (normal)")
                    + f"; power at declared {g.declaredReplicates}: {g.powerAtDeclared:.3f}"
                )
            typer.echo(line)
        typer.echo(out.note)
        return
    if sigma is None or delta is None:
        raise InputError("give --sigma and --delta, or --protocol <id> --from-pilot")
    if sigma <= 0 or delta <= 0 or not (0 < alpha < 0.5) or not (0 < target < 1):
        raise InputError("need --sigma > 0, --delta > 0, 0 < --alpha < 0.5, 0 < --power < 1")
    if test not in ("two-sided", "one-sided", "tost"):
        raise InputError(f"unknown --test {test!r}: two-sided | one-sided | tost")
    sides = 2 if test == "two-sided" else 1
    if test == "tost":
        exact = (stats.n_sign_tost if median else stats.n_tost)(sigma, delta, alpha, target)
        normal = None if median else stats.n_normal_tost(sigma, delta, alpha, target)
    else:
        exact = (stats.n_sign_test if median else stats.n_exact_t)(sigma, delta, alpha, target, sides)
        normal = (stats.n_sign_noether if median else stats.n_normal)(sigma, delta, alpha, target, sides)
    result = {"test": test, "decidedBy": "sign test" if median else "t test", "exact": exact, "normal": normal}
    if json_out:
        print_json(result)
    else:
        approx = "" if normal is None else f", {normal} (normal approximation)"
        typer.echo(f"{test}: n = {exact} replicates (exact {result['decidedBy']}){approx}")
