"""A tiny synthetic suite for gatekeeper tests: each run draws one score per task from N(mean, sd)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from cltoolkit.components import Analysis, Method, Metric, Suite
from cltoolkit.protocol._base import Strict
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.run.record import RunRecord
from cltoolkit.run.spec import RunOutput, RunSpec, replicate_key


class ToyProtocol(ProtocolBase):
    suite: Literal["toy"]
    tasks: list[str]


class ToyParams(Strict):
    mean: float
    sd: float
    updates: int = 100
    behavior: Literal["ok", "raise", "nan", "kill", "kill-once", "sleep"] = "ok"
    """Executor contract tests: raise an exception, a loss that turns NaN (as a suite's guard reports it), SIGKILL the
    process (always / on the first attempt), sleep."""
    sleepSeconds: float = 0.0
    busySeconds: float = 0.0
    """CPU-bound busy loop (executor benchmarks)."""


class ToyMethod(Method):
    suite: ClassVar[str] = "toy"
    Params = ToyParams
    shift: ClassVar[float] = 0.0
    """Added to every score: a subclass in a project folder shows that the worker resolved that project's method."""


class ToyScore(Metric):
    """Per-task score drawn by the toy driver."""

    id: ClassVar[str] = "toy.score-v1"
    suite: ClassVar[str] = "toy"
    unit: ClassVar[str] = "score"
    higher_is_better: ClassVar[bool] = True


class ToyAnalysis(Analysis[ToyProtocol]):
    def replicates(
        self, protocol: ProtocolBase, records: Sequence[RunRecord], metric: str, comparison: str, scope: str
    ) -> dict[str, dict[str, float]]:
        out: dict[str, float] = {}
        for r in records:
            if r.spec.comparison == comparison:
                scores = r.metrics[metric]
                assert isinstance(scores, dict)
                value = np.mean(list(scores.values())) if scope == "aggregate" else scores[scope]
                out[replicate_key(r.spec.seed, r.spec.order, r.spec.cell)] = float(value)  # type: ignore[arg-type]
        return {scope: out}

    def summaries(self, protocol: ProtocolBase, records: Sequence[RunRecord]) -> dict[str, Any]:
        return {"runs": len(records)}


class DrawingToyAnalysis(ToyAnalysis):
    """The toy analysis with a figure of its own (matplotlib, as the wmf, ladder and sessions suites draw theirs)."""

    def figures(self, protocol: ProtocolBase, records: Sequence[RunRecord], summaries: dict[str, Any]) -> list[Any]:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(3, 2))
        fig.subplots().plot([r.spec.seed for r in records], marker="o")
        return [("Toy seeds", fig)]


class ToySuite(Suite[ToyProtocol]):
    name = "toy"
    protocol_model = ToyProtocol
    analysis = "toy"

    def tasks(self, protocol: ProtocolBase) -> list[str]:
        assert isinstance(protocol, ToyProtocol)
        return protocol.tasks

    def execute(self, protocol: ProtocolBase, spec: RunSpec, workdir: Path) -> RunOutput:
        assert isinstance(protocol, ToyProtocol)
        params = ToyParams.model_validate(protocol.comparison(spec.comparison).hyperparameters, strict=False)
        if params.mean < -100 or params.behavior == "raise":
            raise RuntimeError("toy failure requested")
        if params.behavior == "nan":
            from cltoolkit.errors import NonFiniteValue

            raise NonFiniteValue("t1", 3, "the method's extra_loss term", "extra_loss")
        if params.behavior == "kill" or (params.behavior == "kill-once" and not (workdir / "killed-once").exists()):
            (workdir / "killed-once").write_text("")
            os.kill(os.getpid(), signal.SIGKILL)
        if params.sleepSeconds:
            time.sleep(params.sleepSeconds)
        end = time.process_time() + params.busySeconds
        while time.process_time() < end:
            sum(i * i for i in range(1000))
        from cltoolkit.registry import registries

        method = (self.regs or registries()).method.get(protocol.comparison(spec.comparison).method)
        rng = np.random.default_rng([spec.seed, sum(map(ord, spec.comparison))])
        shift = float(getattr(method, "shift", 0.0))  # a class attribute of the toy methods (tests/toy_suite.py)
        scores = {t: float(rng.normal(params.mean, params.sd)) + shift for t in protocol.tasks}
        tasks = protocol.tasks
        matrix = {
            "tasks": tasks,
            "phases": tasks,
            "values": [[scores[t] if j <= i else None for j, t in enumerate(tasks)] for i in range(len(tasks))],
        }
        curve = {"x": [0, 50, 100], "y": [0.0, params.mean / 2, params.mean], "xLabel": "updates", "yLabel": "score"}
        metrics = {"toy.score-v1": scores, "successMatrix": matrix, "curves": {"training score": curve}}
        return RunOutput(metrics, {"environmentSteps": 1000, "gradientUpdates": params.updates})


COMPONENTS = {
    "suite": {"toy": "tests.toy_suite:ToySuite"},
    "method": {"toy.method": "tests.toy_suite:ToyMethod"},
    "metric": {"toy.score-v1": "tests.toy_suite:ToyScore"},
    "analysis": {"toy": "tests.toy_suite:ToyAnalysis"},
}


def toy_protocol(seeds: int = 5, **analysis: Any) -> dict[str, Any]:
    hp = {"mean": 0.9, "sd": 0.02, "updates": 100}
    return {
        "id": "toy-v1",
        "suite": "toy",
        "title": "Toy",
        "goal": "Test the gatekeeper.",
        "schemaVersion": 1,
        "tasks": ["t1", "t2"],
        "comparisons": [
            {"id": "cand", "method": "toy.method", "role": "candidate", "label": "Candidate", "hyperparameters": hp},
            {
                "id": "base",
                "method": "toy.method",
                "role": "baseline",
                "label": "Baseline",
                "hyperparameters": {"mean": 0.5, "sd": 0.05, "updates": 100},
            },
        ],
        "budget": {"match": [{"quantity": "totalUpdates", "across": ["cand", "base"]}]},
        "metrics": [{"id": "toy.score-v1", "label": "Score", "kind": "gate"}],
        "gates": [
            {
                "id": "each",
                "label": "cand >= 0.7 on each task",
                "metric": "toy.score-v1",
                "method": "cand",
                "scope": "each-task",
                "test": "lower-bound",
                "comparator": ">=",
                "threshold": 0.7,
                "unit": "score",
            },
            {
                "id": "sup",
                "label": "cand beats base by 0.1",
                "metric": "toy.score-v1",
                "method": "cand",
                "reference": "base",
                "test": "superiority",
                "comparator": ">=",
                "margin": 0.1,
                "unit": "score",
            },
            {
                "id": "info",
                "label": "cand vs base (report only)",
                "metric": "toy.score-v1",
                "method": "cand",
                "reference": "base",
                "test": "report-only",
                "comparator": ">=",
                "margin": 0.0,
                "unit": "score",
                "confirmatory": False,
            },
        ],
        "analysis": {"alpha": 0.05, **analysis},
        "seeds": {"stages": [{"id": "main", "seeds": list(range(seeds))}]},
        "results": None,
    }
