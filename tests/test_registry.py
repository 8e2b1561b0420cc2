from __future__ import annotations

from typing import ClassVar

import pytest

from cltoolkit.components import Method, Metric
from cltoolkit.errors import InputError, UnknownNameError
from cltoolkit.registry import KINDS, Registry, registries


def test_lazy_and_suggestions() -> None:
    reg: Registry[type[Method]] = Registry("method", Method)
    reg.register("ladder.linear", "cltoolkit.suites.ladder.methods:Linear")
    assert "ladder.linear" in reg
    with pytest.raises(UnknownNameError, match=r"unknown method 'ladder.linaer'. Did you mean 'ladder.linear'\?"):
        reg.get("ladder.linaer")
    assert reg.get("ladder.linear").__name__ == "Linear"


def test_duplicate_name() -> None:
    reg: Registry[object] = Registry("metric")
    reg.register("a-v1", "x:y")
    with pytest.raises(InputError, match="registered twice"):
        reg.register("a-v1", "x:z")


def test_base_class_check() -> None:
    reg: Registry[type[Metric]] = Registry("metric", Metric)
    with pytest.raises(InputError, match="must be a subclass"):

        @reg.register("bad-v1")  # type: ignore[arg-type]  # the point: a class of another base
        class NotAMetric:
            pass

    reg.register("lazy-bad-v1", "cltoolkit.suites.ladder.methods:Linear")
    with pytest.raises(InputError, match="must be a subclass"):
        reg.get("lazy-bad-v1")


def test_decorator_form() -> None:
    reg: Registry[type[Metric]] = Registry("metric", Metric)

    @reg.register("toy-v1")
    class Toy(Metric):
        id: ClassVar[str] = "toy-v1"

    assert reg.get("toy-v1") is Toy


def test_bad_target() -> None:
    with pytest.raises(InputError, match="not 'module:attr'"):
        Registry("method").register("x", "nocolon")


@pytest.mark.parametrize("kind", KINDS)
def test_every_builtin_resolves(kind: str) -> None:
    """Contract: every registered component imports and has the right base class."""
    reg = registries(plugins=False)[kind]
    for name in reg.names():
        obj = reg.get(name)
        if kind == "metric":
            assert obj.id == name
        if kind in ("method", "metric"):
            assert obj.suite in registries(plugins=False).suite


def test_cli_list(cli) -> None:
    import json

    result = cli("list", "suite", "--json")
    assert result.exit_code == 0
    names = {row["name"] for row in json.loads(result.output)}
    assert {"nav4", "ladder", "wmf", "sessions"} <= names
    assert cli("list", "gadget").exit_code == 2


def test_a_suite_or_analysis_made_without_registries_says_so() -> None:
    """Suites and analyses resolve methods and metrics only through the registries they were made with; one made
    directly knows no project, and says so instead of guessing one from the environment."""
    from cltoolkit.registry import registries
    from cltoolkit.suites.ladder.analysis import LadderAnalysis
    from cltoolkit.suites.ladder.suite import LadderSuite

    regs = registries()
    assert regs.new_suite("ladder").project_regs() is regs
    assert regs.new_analysis("ladder").project_regs() is regs
    for bare in (LadderSuite(), LadderAnalysis()):
        with pytest.raises(TypeError, match="made without registries"):
            bare.project_regs()


def test_a_run_output_travels_in_one_form() -> None:
    from cltoolkit.run.spec import RunOutput

    out = RunOutput({"m": 1.5}, {"environmentSteps": 3}, ["stage:a"], "cpu", "float32", {"s": {}}, torch_threads=2)
    assert RunOutput.from_json(out.to_json()) == out
    assert out.to_json()["torchThreads"] == 2  # read by the worker, carried to the record's provenance
