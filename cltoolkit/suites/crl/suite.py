"""The `crl` suite: a continual-RL stream declared in the protocol (issue #55; docs/cw10.md)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cltoolkit import components
from cltoolkit.components import NUMBER, NUMBER_MAP, Analysis, Suite, ValueKind
from cltoolkit.errors import Problem, UnknownNameError
from cltoolkit.suites.crl.api import CrlMethod
from cltoolkit.suites.crl.metrics import Performance
from cltoolkit.suites.crl.models import CrlProtocol

if TYPE_CHECKING:
    from cltoolkit.registry import Registries
    from cltoolkit.run.record import RunRecord
    from cltoolkit.run.spec import RunOutput, RunSpec

__all__ = ["CrlAnalysis", "CrlSuite", "make_method"]


def make_method(name: str, hyperparameters: Mapping[str, Any], regs: Registries) -> CrlMethod[Any]:
    """The method object of one run (`components.make_method` with this suite's interface)."""
    return components.make_method(CrlMethod, name, hyperparameters, regs)


class CrlSuite(Suite[CrlProtocol]):
    """A declared stream of Gymnasium tasks learnt by Continual World's SAC (or PPO for discrete actions); CW's
    metrics."""

    name = "crl"
    method_base = CrlMethod
    protocol_model = CrlProtocol
    analysis = "crl"
    budget_fields = frozenset({"unaccountedSamples"})
    counts_samples = True
    summary = "continual RL on a declared stream of Gymnasium tasks (Continual World's SAC and metrics; PPO)"

    def check(self, protocol: CrlProtocol) -> Iterator[Problem]:
        regs = self.project_regs()
        for i, comp in enumerate(protocol.comparisons):
            try:
                method: object = regs.method.get(comp.method)
            except UnknownNameError:  # named by the registered-component checks, not twice here
                method = None
            regime = getattr(method, "regime", None)
            reference = regime in ("single-task", "multi-task")
            if method is not None and reference != (comp.role == "reference"):
                does = {"single-task": "learns each task from scratch", "multi-task": "learns every task at once"}
                yield Problem(
                    f"/comparisons/{i}/role",
                    f"{comp.method!r} {does.get(str(regime), 'learns the stream')}: its role must "
                    f"{'' if reference else 'not '}be 'reference' (forward transfer's baseline is the single-task "
                    "reference; the multi-task reference has no stream to forget)",
                )
            if regime == "multi-task":
                yield from _multitask_problems(protocol, i, comp.hyperparameters)
            if protocol.learner.algorithm == "ppo" and getattr(method, "keep_buffer", False):
                yield Problem(
                    f"/comparisons/{i}/method",
                    f"{comp.method!r} keeps an off-policy replay buffer across tasks; learner.algorithm 'ppo' learns "
                    "from its own rollouts (use 'sac-discrete' for replay of the buffer)",
                )
            if protocol.learner.algorithm == "ppo":
                for field in ("batchSize", "clipNorm"):
                    if comp.hyperparameters.get(field) is not None:
                        yield Problem(
                            f"/comparisons/{i}/hyperparameters/{field}",
                            f"SAC's {field}, not read by learner.algorithm 'ppo' (its fields are in learner.ppo)",
                        )
            size = comp.hyperparameters.get("batchSize")
            if isinstance(size, int) and size > protocol.learner.bufferSize:
                yield Problem(f"/comparisons/{i}/hyperparameters/batchSize", "exceeds learner.bufferSize")

    def tasks(self, protocol: CrlProtocol) -> list[str]:
        return [t.id for t in protocol.stream.tasks]

    def device_problem(self, device: str) -> str | None:
        if device in ("cpu", "auto"):
            return None
        return f"suite 'crl' runs on the CPU only for now (--device {device})"

    def execute(self, protocol: CrlProtocol, spec: RunSpec, workdir: Path) -> RunOutput:
        from cltoolkit.run.spec import RunOutput
        from cltoolkit.suites.crl.driver import run_stream

        comp = protocol.comparison(spec.comparison)
        method = make_method(comp.method, comp.hyperparameters, self.project_regs())
        ids = [t.id for t in protocol.stream.tasks]

        def progress(steps: int, rates: list[float]) -> None:  # the run's log.txt: a long run shows where it is
            shown = ", ".join(f"{t} {r:.2f}" for t, r in zip(ids, rates, strict=True))
            print(f"{steps} environment steps: success {shown}", flush=True)

        unaccounted = protocol.budget.unaccountedSamples
        if method.regime == "multi-task":
            from cltoolkit.suites.crl.multitask import run_multitask

            out = run_multitask(protocol, method, spec.seed, unaccounted, on_evaluation=progress)
        else:
            out = run_stream(protocol, method, spec.seed, unaccounted, on_evaluation=progress, workdir=workdir)
        return RunOutput(metrics=out["metrics"], budget=out["budget"], device="cpu", precision="float32")


def _multitask_problems(protocol: CrlProtocol, i: int, hyperparameters: Mapping[str, Any]) -> Iterator[Problem]:
    """What CW's multi-task reference needs of the protocol: SAC on continuous actions, and one critic head per task
    for PopArt (CW asserts it: "PopArt works only in the multi-head setup")."""
    if protocol.learner.algorithm != "sac":
        yield Problem(
            f"/comparisons/{i}/method",
            f"the multi-task reference runs SAC on continuous actions (CW's), not {protocol.learner.algorithm!r}",
        )
    elif hyperparameters.get("popart", True) and protocol.learner.criticHeads != "per-task":
        yield Problem(
            f"/comparisons/{i}/hyperparameters/popart",
            "PopArt normalises each task's values in its own critic head: set learner.criticHeads \"per-task\" (CW's) "
            "or popart false",
        )


def _method_regime(regs: Registries, method: str) -> str:
    """A registered method's regime ("sequential" where it is not registered)."""
    try:
        return str(getattr(regs.method.get(method), "regime", "sequential"))
    except UnknownNameError:
        return "sequential"


def _multitask_ids(suite: CrlAnalysis, protocol: CrlProtocol) -> set[str]:
    """The protocol's comparisons whose method is a multi-task reference."""
    regs = suite.project_regs()
    return {c.id for c in protocol.comparisons if _method_regime(regs, c.method) == "multi-task"}


def _regime(protocol: CrlProtocol, record: RunRecord, regs: Registries) -> str:
    """The regime of the method a record's comparison runs."""
    comp = next((c for c in protocol.comparisons if c.id == record.spec.comparison), None)
    return _method_regime(regs, comp.method) if comp is not None else "sequential"


class CrlAnalysis(Analysis[CrlProtocol]):
    """Per-replicate values of the registered metrics (`Metric.compute`), and each comparison's mean success per
    task at the end of the run."""

    def replicates(
        self, protocol: CrlProtocol, records: Sequence[RunRecord], metric: str, comparison: str, scope: str
    ) -> dict[str, dict[str, float]]:
        from cltoolkit.run.spec import replicate_key

        measure = self.project_regs().metric.get(metric)
        out = {}
        for rec in records:
            if rec.spec.comparison == comparison and (value := measure.compute(rec, scope)) is not None:
                out[replicate_key(rec.spec.seed, rec.spec.order, rec.spec.cell)] = value
        return {scope: out}

    def expected_values(self, protocol: CrlProtocol, record: RunRecord) -> dict[str, ValueKind]:
        """Every run measures CW's metrics over the whole stream (the registered metrics read them); a multi-task
        reference, average performance alone (it has no training phase per task to forget or transfer from)."""
        if _regime(protocol, record, self.project_regs()) == "multi-task":
            return {"crl.performance-v1": NUMBER, "finalSuccess": NUMBER_MAP}
        return {
            "crl.performance-v1": NUMBER,
            "crl.forgetting-v1": NUMBER,
            "finalSuccess": NUMBER_MAP,
            "endOfOwnTraining": NUMBER_MAP,
        }

    def summaries(self, protocol: CrlProtocol, records: Sequence[RunRecord]) -> dict[str, Any]:
        tasks = [t.id for t in protocol.stream.tasks]
        final: dict[str, dict[str, float]] = {}
        for comp in protocol.comparisons:
            runs = [r for r in records if r.spec.comparison == comp.id]
            values = {t: [v for r in runs if (v := Performance.compute(r, t)) is not None] for t in tasks}
            if runs:
                final[comp.id] = {t: sum(v) / len(v) for t, v in values.items() if v}
        sequential = [r for r in records if _role(protocol, r) != "reference"]
        own = [v for r in sequential for t in tasks if (v := _own(r, t)) is not None]
        finals = [v for r in sequential for t in tasks if (v := Performance.compute(r, t)) is not None]
        level = "floor" if own and max(own) == 0 else "ceiling" if finals and min(finals) == 1 else "informative"
        return {
            "finalSuccess": final,
            "ownTrainingLevel": level,
            "forwardTransfer": _forward_transfer(
                protocol, [r for r in records if _regime(protocol, r, self.project_regs()) != "multi-task"]
            ),
        }

    def headline(self, protocol: CrlProtocol, summaries: dict[str, Any]) -> list[str]:
        """A stage whose runs never leave the success floor (or never leave the ceiling) measures nothing about
        forgetting: the report says so before any number."""
        level = summaries.get("ownTrainingLevel")
        if level == "floor":
            return [
                "**Smoke test, not a result:** no run reached any success on any task by the end of its own training "
                "(every task at the success floor), so performance and forgetting cannot separate the methods here."
            ]
        if level == "ceiling":
            return ["**At the ceiling:** every run ends every task at full success; nothing was forgotten to measure."]
        return []

    def standard_entries(self, protocol: CrlProtocol, record: RunRecord) -> dict[str, Any]:
        """The run's per-task success matrix and learning curves, from its `evaluations` (every task's success at
        every evaluation, and the task in training then). Matrix: after each task's training, each task's success as
        CW reads it, the mean of the phase's last `evaluation.last` evaluations (its diagonal is `endOfOwnTraining`,
        its last row `finalSuccess`). A single-task reference learns each task with a fresh network, so its matrix
        holds the diagonal only: its other entries measured a network that never trained on that task. Curves: each
        task's success, and the mean over tasks (CW's average performance as training goes on), against environment
        steps. Nothing where the evaluations are missing or malformed."""
        joint = _multitask_evaluations(record)
        if joint is not None:  # one phase: curves against the phase's steps, no matrix (no task has a phase)
            tasks, at, rates = joint
            curves = {f"success of {t}": [r[j] for r in rates] for j, t in enumerate(tasks)}
            curves["mean success over the stream's tasks"] = [sum(r) / len(r) for r in rates]
            return {
                "curves": {
                    name: {"x": at, "y": y, "xLabel": "environment steps (all tasks at once)", "yLabel": "success rate"}
                    for name, y in curves.items()
                }
            }
        parsed = _evaluations(record)
        if parsed is None:
            return {}
        tasks, active, rates = parsed
        phases = [t for t in tasks if t in active]
        reference = _role(protocol, record) == "reference"
        last, every, per_task = protocol.evaluation.last, protocol.evaluation.every, protocol.stream.stepsPerTask
        values: list[list[float | None]] = []
        for phase in phases:
            rows = [row for a, row in zip(active, rates, strict=True) if a == phase][-last:]
            own = tasks.index(phase)
            values.append(
                [None if reference and j != own else sum(r[j] for r in rows) / len(rows) for j in range(len(tasks))]
            )
        steps, seen = [], dict.fromkeys(tasks, 0)
        for a in active:
            seen[a] += 1
            steps.append(tasks.index(a) * per_task + min(seen[a] * every, per_task))
        curves = {f"success of {t}": [r[j] for r in rates] for j, t in enumerate(tasks)}
        curves["mean success over the stream's tasks"] = [sum(r) / len(r) for r in rates]
        return {
            "successMatrix": {"tasks": tasks, "phases": phases, "values": values},
            "curves": {
                name: {"x": steps, "y": y, "xLabel": "environment steps", "yLabel": "success rate"}
                for name, y in curves.items()
            },
        }

    def report_markdown(self, protocol: CrlProtocol, records: Sequence[RunRecord], summaries: dict[str, Any]) -> str:
        """Each comparison's mean over its runs: CW's performance and forgetting, and each task's success at the end
        of the stream and at the end of its own training."""
        from cltoolkit.suites.crl.metrics import CrlForgetting

        tasks = [t.id for t in protocol.stream.tasks]
        lines = [
            "## The stream",
            "",
            f"{len(tasks)} tasks in order ({', '.join(f'`{t.id}` {t.env}' for t in protocol.stream.tasks)}), "
            f"{protocol.stream.stepsPerTask} environment steps each; every task evaluated every "
            f"{protocol.evaluation.every} steps on {protocol.evaluation.episodes} episode(s). Means over runs; per "
            "task: success at the end of the stream / at the end of its own training.",
            "",
            "| comparison | runs | performance | forgetting | " + " | ".join(tasks) + " |",
            "|---|---|---|---|" + "---|" * len(tasks),
        ]

        def mean(values: list[float | None]) -> str:
            kept = [v for v in values if v is not None]
            return f"{sum(kept) / len(kept):.3f}" if kept else "-"

        for comp in protocol.comparisons:
            runs = [r for r in records if r.spec.comparison == comp.id]
            if not runs:
                continue
            cells = []
            for t in tasks:
                end = mean([Performance.compute(r, t) for r in runs])
                at_own = mean([_own(r, t) for r in runs])
                cells.append(f"{end} / {at_own}")
            lines.append(
                f"| {comp.id} | {len(runs)} | {mean([Performance.compute(r) for r in runs])} | "
                f"{mean([CrlForgetting.compute(r) for r in runs])} | " + " | ".join(cells) + " |"
            )
        joint = [c.id for c in protocol.comparisons if c.role == "reference" and c.id in _multitask_ids(self, protocol)]
        if joint:
            lines += [
                "",
                f"{', '.join(f'`{c}`' for c in joint)}: the multi-task reference (every task at once for the stream's "
                "whole budget, one buffer; CW's `run_mt.py`): it measures what one network holds of all the tasks "
                "together, not continual learning; only its performance and final success per task are defined.",
            ]
        ft = summaries.get("forwardTransfer")
        if isinstance(ft, dict):
            shown = [
                f"{comp} {v['mean']:.3f}" if v.get("mean") is not None else f"{comp} undefined"
                for comp, v in ft.items()
                if isinstance(v, dict) and "mean" in v
            ]
            lines += [
                "",
                "Forward transfer (CW's normalized form: per task (AUC - reference AUC) / (1 - reference AUC), AUC the "
                "mean success over the task's own training, the reference's mean over its "
                f"{ft['referenceRuns']} single-task run(s)): " + ", ".join(shown) + ".",
            ]
        else:
            # the multi-task references measure no per-task training, so they are never forward transfer's
            # reference; and a stage may leave the single-task one out, so say only what this report holds
            multitask = _multitask_ids(self, protocol)
            references = [c.id for c in protocol.comparisons if c.role == "reference" and c.id not in multitask]
            why = (
                f"no completed run of the single-task reference ({', '.join(f'`{r}`' for r in references)}) "
                "is among this report's runs"
                if references
                else "the protocol has no single-task reference comparison"
            )
            lines += ["", f"Forward transfer: not measured ({why})."]
        return "\n".join(lines)


def _rates(success: list[Any], width: int) -> list[list[float]] | None:
    """Success rows of `width` finite numbers each, as floats; None where one is not."""
    rates: list[list[float]] = []
    for row in success:
        if not isinstance(row, list) or len(row) != width:
            return None
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in row):
            return None
        rates.append([float(v) for v in row])
    return rates


def _evaluations(record: RunRecord) -> tuple[list[str], list[str], list[list[float]]] | None:
    """A record's `evaluations` (tasks, the task in training at each evaluation, every task's success then), or None
    where they are missing or malformed."""
    ev = record.metrics.get("evaluations")
    if not isinstance(ev, dict):
        return None
    tasks, active, success = ev.get("tasks"), ev.get("active"), ev.get("success")
    if not (isinstance(tasks, list) and isinstance(active, list) and isinstance(success, list)) or not tasks:
        return None
    if not all(isinstance(t, str) for t in tasks) or not all(isinstance(a, str) and a in tasks for a in active):
        return None
    rates = _rates(success, len(tasks))
    if rates is None:
        return None
    if len(active) != len(rates):
        return None
    return [str(t) for t in tasks], [str(a) for a in active], rates


def _multitask_evaluations(record: RunRecord) -> tuple[list[str], list[int], list[list[float]]] | None:
    """A multi-task reference's `evaluations` (tasks, the phase's step at each evaluation, every task's success then),
    or None where the record is not one or they are malformed."""
    ev = record.metrics.get("evaluations")
    if not isinstance(ev, dict) or ev.get("regime") != "multi-task":
        return None
    tasks, at, success = ev.get("tasks"), ev.get("steps"), ev.get("success")
    if not (isinstance(tasks, list) and isinstance(at, list) and isinstance(success, list)) or len(at) != len(success):
        return None
    steps = [x for x in at if isinstance(x, int) and not isinstance(x, bool)]
    if not all(isinstance(t, str) for t in tasks) or len(steps) != len(at):
        return None
    rates = _rates(success, len(tasks))
    if rates is None:
        return None
    return [str(t) for t in tasks], steps, rates


def _own(record: RunRecord, task: str) -> float | None:
    """A task's success at the end of its own training, as the run recorded it."""
    values = record.metrics.get("endOfOwnTraining")
    value = values.get(task) if isinstance(values, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _role(protocol: CrlProtocol, record: RunRecord) -> str:
    return next((c.role for c in protocol.comparisons if c.id == record.spec.comparison), "")


def _auc(record: RunRecord, tasks: list[str]) -> list[float] | None:
    values = record.metrics.get("ownAuc")
    if not isinstance(values, dict) or not all(isinstance(values.get(t), int | float) for t in tasks):
        return None
    return [float(values[t]) for t in tasks]  # type: ignore[arg-type]


def _forward_transfer(protocol: CrlProtocol, records: Sequence[RunRecord]) -> dict[str, Any] | None:
    """CW's normalized forward transfer of each sequential comparison against the single-task reference: per task
    (AUC - mean reference AUC) / (1 - mean reference AUC), the mean over runs and over the defined tasks (None where
    the reference's mean AUC is 1). None without a reference comparison or its runs."""
    from cltoolkit.suites.crl.metrics import forward_transfer

    tasks = [t.id for t in protocol.stream.tasks]
    reference = [a for r in records if _role(protocol, r) == "reference" and (a := _auc(r, tasks)) is not None]
    if not reference:
        return None
    ref = [sum(a[i] for a in reference) / len(reference) for i in range(len(tasks))]
    out: dict[str, Any] = {"referenceAuc": dict(zip(tasks, ref, strict=True)), "referenceRuns": len(reference)}
    for comp in protocol.comparisons:
        if comp.role == "reference":
            continue
        runs = [a for r in records if r.spec.comparison == comp.id and (a := _auc(r, tasks)) is not None]
        if not runs:
            continue
        per_run = [forward_transfer(a, ref) for a in runs]
        totals = [t for t, _ in per_run if t is not None]
        per_task: dict[str, float | None] = {}
        for i, task in enumerate(tasks):
            defined = [v for _, p in per_run if (v := p[i]) is not None]
            per_task[task] = sum(defined) / len(defined) if defined else None
        out[comp.id] = {"mean": sum(totals) / len(totals) if totals else None, "perTask": per_task, "runs": len(runs)}
    return out
