"""`clt plan power`: seeds needed for a paired comparison."""

from __future__ import annotations

from typing import Annotated

import typer

from cltoolkit.cli._common import command, print_json

app = typer.Typer(help="Plan evaluations (power).", no_args_is_help=True)


@command(app, "power")
def power(
    sigma: Annotated[float, typer.Option("--sigma", help="SD of paired differences (sigma_D).")],
    delta: Annotated[float, typer.Option("--delta", help="Smallest difference worth detecting.")],
    alpha: Annotated[float, typer.Option("--alpha")] = 0.05,
    target: Annotated[float, typer.Option("--power")] = 0.8,
    test: Annotated[str, typer.Option("--test", help="two-sided | one-sided | tost")] = "two-sided",
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Replicates needed: the normal approximation and the exact (noncentral t / TOST) answer."""
    from cltoolkit import stats
    from cltoolkit.errors import InputError

    if sigma <= 0 or delta <= 0 or not (0 < alpha < 0.5) or not (0 < target < 1):
        raise InputError("need --sigma > 0, --delta > 0, 0 < --alpha < 0.5, 0 < --power < 1")
    if test == "tost":
        n = 2
        while stats.tost_power(n, sigma, delta, 0.0, alpha) < target:
            n += 1
        out = {"test": test, "exact": n, "normal": stats.n_normal(sigma, delta, 2 * alpha, target, sides=2)}
    elif test in ("two-sided", "one-sided"):
        sides = 2 if test == "two-sided" else 1
        out = {"test": test, "normal": stats.n_normal(sigma, delta, alpha, target, sides),
               "exact": stats.n_exact_t(sigma, delta, alpha, target, sides)}
    else:
        raise InputError(f"unknown --test {test!r}: two-sided | one-sided | tost")
    if json_out:
        print_json(out)
    else:
        typer.echo(f"{test}: n = {out['exact']} replicates (exact), {out['normal']} (normal approximation)")
