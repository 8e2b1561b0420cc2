"""The public plugin API: its contract check passes on every built-in component and names what is wrong with a
broken one; `clt list <kind> <name>` shows a component's summary, parameters, types and defaults."""

from __future__ import annotations

import json
from typing import ClassVar

from pydantic import Field

from cltoolkit.plugin import DynamicsModel, Method, Metric, Params, check_component, check_registered


def test_every_builtin_component_passes_the_contract() -> None:
    assert check_registered(origin="builtin") == []


def test_a_contract_check_of_an_origin_that_registered_nothing_fails() -> None:
    # a misspelt plugin name (or a project's file without its registries) must not pass with nothing checked
    (problem,) = check_registered(origin="plugin my-plugn")
    assert problem.startswith("no component is registered from 'plugin my-plugn' (origins: builtin")


class GoodParams(Params):
    rate: float = Field(default=0.1, gt=0)
    """Learning rate."""


class BadParams(Params):
    rate: float = 0.1  # no docstring: no description


class Good(DynamicsModel[GoodParams]):
    suite: ClassVar[str] = "ladder"
    summary: ClassVar[str] = "a good method"
    Params = GoodParams


class Bad(Method):
    suite: ClassVar[str] = "nowhere"
    Params = BadParams


class BadMetric(Metric):
    id: ClassVar[str] = "no version"
    suite: ClassVar[str] = "ladder"
    unit: ClassVar[str] = "x"
    higher_is_better: ClassVar[bool] = True


def test_the_contract_names_each_problem() -> None:
    assert check_component("method", "me.good", Good) == []
    problems = check_component("method", "me.bad", Bad)
    assert any("must name a registered suite" in p for p in problems)
    assert any("summary" in p for p in problems)
    assert any("Params.rate has no docstring" in p for p in problems)
    assert any("versioned id" in p for p in check_component("metric", "no version", BadMetric))
    assert "must subclass" in check_component("method", "x", object)[0]
    # a ladder method that is not a DynamicsModel: the ladder driver could not run it
    plain = type("Plain", (Method,), {"suite": "ladder", "summary": "no build", "__doc__": "no interface"})
    assert check_component("method", "me.plain", plain) == [
        "method 'me.plain': method 'me.plain' does not implement the ladder method interface: subclass "
        "cltoolkit.plugin.DynamicsModel (the ladder driver calls only that interface)"
    ]


def test_list_shows_one_component_in_full(cli) -> None:
    out = cli("list", "method", "ladder.least-squares", "--json")
    assert out.exit_code == 0, out.output
    info = json.loads(out.output)
    fields = {f["name"]: f for f in info["parameters"]}
    assert set(fields) == {"transitions", "seed", "usePrevAction"}
    assert fields["usePrevAction"]["default"] is True
    assert fields["transitions"]["required"]
    assert info["summary"]
    assert info["suite"] == "ladder"
    text = cli("list", "method", "ladder.least-squares").output
    assert "hyperparameter usePrevAction (bool, default true)" in text
    assert cli("list", "environment").exit_code != 0  # no such kind: each suite builds its environments itself
    rows = json.loads(cli("list", "--json").output)
    assert all(r["summary"] for r in rows if r["kind"] in ("method", "suite", "metric"))
