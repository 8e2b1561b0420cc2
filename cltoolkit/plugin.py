"""The public API for plugin authors: one module to import.

A plugin is a Python distribution with an entry point in the `cltoolkit.plugins` group, pointing at a function
that receives the `Registries` and registers its components (`regs.method.register("me.method", "pkg:Cls")`).
Components subclass the base classes below; hyperparameters are a `Params` model (subclass `Params` here: strict,
closed, frozen, with a docstring under each field). `check_component` / `check_registered` are the contract test a
plugin runs against its own components (as Gymnasium's environment checker does for environments):

    from cltoolkit.plugin import check_registered
    def test_my_components():
        assert check_registered(origin="plugin my-plugin") == []

Every method subclasses its suite's method interface (`clt protocol validate` refuses one that does not): the
ladder's `DynamicsModel`, the sessions suite's `SessionModel`; continual-learning methods `Nav4Method` (hooks of
the nav4 suite's PPO learner; `Params` subclass `Nav4AgentParams`) or `WorldModelMethod` (hooks of the wmf
suite's world-model training). The suite owns the data, the budget and the evaluation; the method owns the
learning. The types their hooks receive are in the modules `cltoolkit.plugin.nav4` and `cltoolkit.plugin.wmf` (the
suites' `api` modules), `cltoolkit.plugin.ladder` and `cltoolkit.plugin.sessions`.

One lifecycle in every suite, under the same names: the driver makes the method from its validated `Params`
(`method.params`), calls `begin_task(..., task)`, lets it learn (the ladder: `build`; sessions: `fit`; nav4, wmf
and crl: the suite's optimiser steps, with `extra_loss`, `after_backward` and `after_step` around each), calls
`end_task(..., task)`, evaluates with no hook firing, and records `diagnostics()` (`metrics.methodDiagnostics`).
The ladder and sessions have one fit per model and no optimiser, so they have no step hooks.
"""

from __future__ import annotations

import re
from typing import Any

from cltoolkit.components import (
    NUMBER,
    NUMBER_MAP,
    NUMBER_OR_MAP,
    NUMBER_OR_NULL,
    Analysis,
    Executor,
    Method,
    Metric,
    Suite,
    method_problems,
    value_problems,
)
from cltoolkit.errors import CltError, InputError
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.registry import Registries, registries
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import GridPoint, RunOutput, RunSpec
from cltoolkit.suites.ladder import methods as ladder
from cltoolkit.suites.ladder.methods import DynamicsModel
from cltoolkit.suites.nav4 import api as nav4
from cltoolkit.suites.nav4.api import Nav4Method
from cltoolkit.suites.nav4.methods import AgentParams as Nav4AgentParams
from cltoolkit.suites.nav4.methods import Nav4ReplayParams
from cltoolkit.suites.sessions import methods as sessions
from cltoolkit.suites.sessions.methods import SessionModel
from cltoolkit.suites.wmf import api as wmf
from cltoolkit.suites.wmf.api import WorldModelMethod

__all__ = [
    "NUMBER",
    "NUMBER_MAP",
    "NUMBER_OR_MAP",
    "NUMBER_OR_NULL",
    "Analysis",
    "DynamicsModel",
    "Executor",
    "GridPoint",
    "Method",
    "Metric",
    "Nav4AgentParams",
    "Nav4Method",
    "Nav4ReplayParams",
    "Params",
    "ProtocolBase",
    "Registries",
    "RunOutput",
    "RunRecord",
    "RunSpec",
    "SessionModel",
    "Suite",
    "WorldModelMethod",
    "check_component",
    "check_registered",
    "ladder",
    "nav4",
    "registries",
    "sessions",
    "value_problems",
    "wmf",
]

Params = Strict
"""Base of a method's hyperparameter model: strict (no coercion), closed (unknown fields are errors), frozen; the
docstring under each field is its description in `clt list method <name>` and in the JSON Schema."""

_METRIC_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*-v[1-9][0-9]*$")
_BASES: dict[str, type] = {
    "suite": Suite,
    "method": Method,
    "metric": Metric,
    "analysis": Analysis,
    "executor": Executor,
}


def check_component(kind: str, name: str, component: Any, regs: Registries | None = None) -> list[str]:
    """Problems with one component as clt will use it (empty when it passes): its base class, the class attributes
    its kind needs, a strict and documented `Params` model that yields a JSON Schema, a versioned metric id."""
    regs = regs or registries()
    where = f"{kind} {name!r}"
    base = _BASES.get(kind)
    if base is not None and not (isinstance(component, type) and issubclass(component, base)):
        return [f"{where}: must subclass cltoolkit.plugin.{base.__name__}, got {component!r}"]
    problems = []
    if kind in ("method", "metric"):
        suite = getattr(component, "suite", None)
        if not isinstance(suite, str) or suite not in regs.suite:
            problems.append(f"{where}: `suite` must name a registered suite, got {suite!r}")
        elif kind == "method":
            problems.extend(f"{where}: {line}" for line in method_problems(regs.suite.get(suite), name, component))
    if kind == "method":
        if not getattr(component, "summary", ""):
            problems.append(f"{where}: give a one-line `summary` (shown by `clt list`)")
        params = getattr(component, "Params", None)
        if params is not None:
            if not (isinstance(params, type) and issubclass(params, Strict)):
                problems.append(f"{where}: `Params` must subclass cltoolkit.plugin.Params (strict, closed, frozen)")
            else:
                for field, info in params.model_fields.items():
                    if not info.description:
                        problems.append(f"{where}: Params.{field} has no docstring (its description)")
                try:
                    params.model_json_schema()
                except Exception as exc:  # a schema that cannot be generated: a real problem to report
                    problems.append(f"{where}: Params has no JSON Schema ({exc})")
    if kind == "metric":
        mid = getattr(component, "id", None)
        if not isinstance(mid, str) or not _METRIC_ID.match(mid):
            problems.append(f"{where}: `id` must be a versioned id like 'suite.name-v1', got {mid!r}")
        elif mid != name:
            problems.append(f"{where}: registered as {name!r} but its `id` is {mid!r}")
        if not isinstance(getattr(component, "unit", None), str):
            problems.append(f"{where}: `unit` must be a string")
        if not isinstance(getattr(component, "higher_is_better", None), bool):
            problems.append(f"{where}: `higher_is_better` must be True or False")
    if kind == "suite":
        model = getattr(component, "protocol_model", None)
        if not (isinstance(model, type) and issubclass(model, ProtocolBase)):
            problems.append(f"{where}: `protocol_model` must subclass cltoolkit.plugin.ProtocolBase")
        analysis = getattr(component, "analysis", None)
        if analysis is not None and analysis not in regs.analysis:
            problems.append(f"{where}: its analysis {analysis!r} is not registered")
    return problems


def check_registered(*, origin: str | None = None, regs: Registries | None = None) -> list[str]:
    """`check_component` over every registered component (of one `origin`, e.g. "plugin my-plugin" or a project's
    components file, if given); a component that cannot be imported is a problem too, and so is an `origin` that
    registered nothing (a misspelt plugin name would otherwise pass with nothing checked). Without `regs` the
    built-in and plugin components are loaded; a project's own components need `regs=registries(components_file)`."""
    regs = regs or registries()
    problems = []
    checked = 0
    for kind, reg in regs.by_kind.items():
        for name in reg.names():
            if origin is not None and reg.origin(name) != origin:
                continue
            checked += 1
            try:
                component = reg.get(name)
            except (CltError, InputError) as exc:
                problems.append(f"{kind} {name!r}: {exc}")
                continue
            problems.extend(check_component(kind, name, component, regs))
    if origin is not None and not checked:
        known = sorted({reg.origin(n) for reg in regs.by_kind.values() for n in reg.names()})
        problems.append(f"no component is registered from {origin!r} (origins: {', '.join(known)})")
    return problems
