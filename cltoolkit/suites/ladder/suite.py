"""The `ladder` suite: five rungs of world-model evaluation on a scalar linear system (seed 001)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cltoolkit.components import Suite, make_method
from cltoolkit.errors import Problem
from cltoolkit.suites.ladder.methods import DynamicsModel, LadderTaskEnd, LadderTaskStart
from cltoolkit.suites.ladder.models import LadderProtocol

if TYPE_CHECKING:
    from cltoolkit.run.spec import RunOutput, RunSpec

__all__ = ["LadderSuite"]

_MODEL_RUNGS = ("oneStep", "rollout", "intervention")
"""The rungs that evaluate a method's model (a controller without one takes part in the control rungs only)."""


class LadderSuite(Suite[LadderProtocol]):
    """The world-model evaluation ladder."""

    name = "ladder"
    method_base = DynamicsModel
    protocol_model = LadderProtocol
    analysis = "ladder"
    summary = "world-model evaluation ladder on a scalar linear system"

    def check(self, protocol: LadderProtocol) -> Iterator[Problem]:
        declared = {m.id for m in protocol.metrics}
        rungs = protocol.rungs
        for pointer, metric in (
            ("/rungs/oneStep/metric", rungs.oneStep.metric),
            ("/rungs/rollout/metric", rungs.rollout.metric),
            ("/rungs/intervention/metric", rungs.intervention.metric),
            ("/rungs/control/metric", rungs.control.metric),
            ("/rungs/control/transferMetric", rungs.control.transferMetric),
        ):
            if metric not in declared:
                yield Problem(pointer, f"metric {metric!r} is not among the protocol's metrics")

    def execute(self, protocol: LadderProtocol, spec: RunSpec, workdir: Path) -> RunOutput:
        """Evaluate one comparison on every rung it takes part in."""
        import numpy as np

        from cltoolkit.run.spec import RunOutput
        from cltoolkit.suites.ladder import rungs

        comp = protocol.comparison(spec.comparison)
        method = make_method(DynamicsModel, comp.method, comp.hyperparameters, self.project_regs())
        taking = ("control", "transfer") if method.controls_only else (*_MODEL_RUNGS, "control", "transfer")
        method.begin_task(LadderTaskStart("true", 0, taking))
        model = method.build(method.params, protocol, np.random.default_rng(spec.seed))
        if model is not None and not all(np.isfinite(v) for v in model.coefficients.values()):
            raise ValueError(
                f"method {comp.method!r} built a model with non-finite coefficients {model.coefficients}: its fit "
                "failed or diverged (the method's output, not the protocol)"
            )
        method.end_task(LadderTaskEnd("true", 0, True, model))
        control = protocol.rungs.control
        metrics: dict[str, object] = {}
        queries = 0
        if not method.controls_only:
            assert model is not None
            one = rungs.one_step(model, protocol)
            roll = rungs.rollout(model, protocol)
            inter = rungs.intervention(model, protocol)
            metrics.update(
                {
                    "coefficients": model.coefficients,
                    protocol.rungs.oneStep.metric: one["mse"],
                    protocol.rungs.rollout.metric: roll["rmse"],
                    protocol.rungs.intervention.metric: inter["error"],
                    "oneStep": one,
                    "rollout": roll,
                    "intervention": inter,
                }
            )
            queries += (
                protocol.rungs.oneStep.transitions
                + sum(2 * [protocol.rungs.rollout.constantSteps, *protocol.rungs.rollout.alternatingHorizons])
                + 2 * protocol.rungs.intervention.steps
            )
        zero = method.zero_action
        for key, metric, env in (
            ("control", control.metric, protocol.systems.true),
            ("transfer", control.transferMetric, protocol.systems.transfer),
        ):
            loop = rungs.closed_loop(model, env, control, zero=zero)
            loop["equilibrium"] = rungs.continuous_equilibrium(model, env, control.target) if model else None
            queries += loop["modelQueries"]
            metrics[metric] = loop["mae"]
            metrics[key] = loop
        diagnostics = method.diagnostics()
        if diagnostics:  # the method's own numbers, for the record and the report's table
            metrics["methodDiagnostics"] = diagnostics
        return RunOutput(metrics=metrics, budget={"modelQueries": queries, "environmentSteps": 2 * control.steps})
