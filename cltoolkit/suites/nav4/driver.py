"""The nav4 driver: one run = one comparison x training seed x task order, trained phase by phase at the
protocol's budget, evaluated on the final-test layouts of every task after every phase (the success matrix), with
learning curves on validation layouts. Runs in the worker process (imports torch)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cltoolkit.suites.nav4.api import Nav4Method, Nav4TaskEnd, Nav4TaskStart
from cltoolkit.suites.nav4.layouts import cached_held_out, layout_pool
from cltoolkit.suites.nav4.models import Nav4Protocol

__all__ = ["run"]


def _log(line: str) -> None:
    print(line, flush=True)  # the run's log.txt


def _constant(value: int) -> Callable[[int], int]:
    """The task index of every environment in a one-task phase."""
    return lambda _k: value


def _memory_summary(memory: Any, tasks: list[str]) -> dict[str, Any] | None:
    """What the record says of a learner's memory (disclosed): capacity, held, offered, per task index."""
    if memory is None:
        return None
    return {
        "capacity": memory.capacity,
        "held": len(memory),
        "offered": memory.seen,
        "perTaskIndex": memory.contents(),
        "tasks": list(tasks),
    }


def run(
    protocol: Nav4Protocol, method: Nav4Method[Any], seed: int, order: str | None, workdir: Path, device: str = "cpu"
) -> dict[str, Any]:
    """One run of `method` (its hooks only: `api.py`) under its declared regime."""
    import torch

    from cltoolkit.suites.nav4.agent import AgentLedger, Learner, Limits, VecTasks, evaluate

    params = method.params
    torch.set_num_threads(params.torchThreads)
    env = protocol.environment
    tasks = protocol.task_order(order)
    size, limit, min_path = env.gridSize, env.episodeActionLimit, env.minPathLength
    canvas = 2 * size - 3
    greedy = protocol.evaluation.policy == "greedy"
    budget = protocol.budget.interactionsPerTask or 0
    pool = layout_pool(protocol, "train")
    held = cached_held_out(protocol, workdir.parent)
    tests = {t: list(held[t]["test"]) for t in tasks}
    vals = {t: list(held[t]["validation"]) for t in tasks}
    bonus = (params.subgoalBonus.keyPickup, params.subgoalBonus.doorOpen)
    ledger = AgentLedger()
    declared = protocol.budget
    limits = Limits(declared.memoryCapacity, declared.gradientUpdatesPerTask, declared.unaccountedSamples)
    seed = protocol.stream_seed(seed, order)  # nav4-v1: the seed itself; later versions may add the task order
    rng = np.random.default_rng([seed, 1])
    kw = {"size": size, "max_steps": limit, "min_path": min_path}
    curves: dict[str, Any] = {}
    start = time.monotonic()

    def curve_hook(agent: Learner, task: str, vec: VecTasks, label: str, iterations: int) -> Any:
        points = max(1, protocol.evaluation.curvePoints)
        every = max(1, iterations // points)
        xs: list[int] = []
        ys: list[float] = []

        def hook(it: int) -> None:
            if (it + 1) % every == 0 or it + 1 == iterations:
                xs.append((it + 1) * len(vec.envs) * agent.params.rolloutSteps)
                ys.append(evaluate(agent, task, vals[task], greedy, ledger, **kw))

        curves[label] = {"x": xs, "y": ys, "xLabel": "environment steps in the phase", "yLabel": "validation success"}
        return hook

    def phase(
        learner: Learner, index: int, phase_tasks: list[str], steps: int, label: str, task_of: Callable[[int], int]
    ) -> None:
        """One training phase on `learner`: the method's boundary hooks around the suite's PPO loop."""
        vec = VecTasks(phase_tasks, params.envs, pool, rng, size, limit, min_path, bonus)
        iterations = math.ceil(steps / (params.envs * params.rolloutSteps))
        hook = curve_hook(learner, phase_tasks[0], vec, label, iterations)
        name = phase_tasks[0] if len(phase_tasks) == 1 else "joint"
        total = len(tasks) if method.regime == "sequential" else 1
        start_ = Nav4TaskStart(name, index, tuple(phase_tasks), steps, total)
        learner.phase = name
        learner.hook("begin_task", lambda: method.begin_task(learner, start_))
        learner.train(vec, steps, task_of, on_iteration=hook, phase_tasks=len(phase_tasks))
        learner.check_parameters()
        last = method.regime != "sequential" or index == len(tasks) - 1
        end = Nav4TaskEnd(name, index, last)
        learner.hook("end_task", lambda: method.end_task(learner, end))
        if not last and learner.masks_or_retrains:  # PackNet: release, retrain (the suite's), then the evaluations
            learner.release(end, len(tasks))

    if method.regime == "sequential":
        from cltoolkit.suites import checkpoint

        learner = Learner(params, canvas, seed, ledger, method, device, limits)
        learner.positions = {t: i for i, t in enumerate(tasks)}
        matrix: list[list[float]] = []
        identity = checkpoint.identity(protocol, method.name, dict(method.hyperparameters), seed, order)
        saved = checkpoint.load(workdir, identity)
        if saved is None and (why := checkpoint.not_resumed(workdir)) is not None:
            _log(why)
        if saved is not None:  # an interrupted run: resume after its last finished phase
            learner.load_state_dict(saved["learner"])
            method.load_state_dict(saved["method"])
            rng.bit_generator.state = saved["rng"]
            for key, value in saved["ledger"].items():
                setattr(ledger, key, value)
            matrix, curves = saved["matrix"], saved["curves"]
            _log(f"resumed from the checkpoint after phase {len(matrix)} (of {len(tasks)})")
        for i, task in enumerate(tasks):
            if i < len(matrix):
                continue
            phase(learner, i, [task], budget, f"{task} (phase {i + 1})", _constant(i))
            matrix.append([evaluate(learner, t, tests[t], greedy, ledger, **kw) for t in tasks])
            _log(
                f"phase {i + 1} ({task}) done after {time.monotonic() - start:.0f} s: test success "
                + ", ".join(f"{t} {v:.2f}" for t, v in zip(tasks, matrix[-1], strict=True))
            )
            if i + 1 < len(tasks):
                state = {
                    "learner": learner.state_dict(),
                    "method": method.state_dict(),
                    "rng": rng.bit_generator.state,
                    "ledger": dict(vars(ledger)),
                    "matrix": matrix,
                    "curves": curves,
                }
                checkpoint.save(workdir, identity, state)
        checkpoint.clear(workdir)
        phases = list(tasks)
        models = [learner]
    elif method.regime == "joint":
        learner = Learner(params, canvas, seed, ledger, method, device, limits)
        phase(learner, 0, list(tasks), budget * len(tasks), f"joint ({tasks[0]} validation)", lambda k: k % len(tasks))
        row = [evaluate(learner, t, tests[t], greedy, ledger, **kw) for t in tasks]
        matrix, phases, models = [row], ["joint"], [learner]
    else:  # specialists: a fresh learner per task, each evaluated on its own task
        from cltoolkit.suites import checkpoint

        row = []
        models = []
        identity = checkpoint.identity(protocol, method.name, dict(method.hyperparameters), seed, order)
        saved = checkpoint.load(workdir, identity)
        if saved is None and (why := checkpoint.not_resumed(workdir)) is not None:
            _log(why)
        if saved is not None:  # an interrupted run: the finished specialists' rows and counts, not their networks
            method.load_state_dict(saved["method"])
            rng.bit_generator.state = saved["rng"]
            for key, value in saved["ledger"].items():
                setattr(ledger, key, value)
            row, curves, done = saved["row"], saved["curves"], saved["done"]
            _log(f"resumed from the checkpoint after specialist {len(row)} (of {len(tasks)})")
        else:
            done = {"parameters": 0, "networks": 0, "memory": None}
        for i, task in enumerate(tasks):
            if i < len(row):
                continue
            learner = Learner(params, canvas, seed * 1000 + i, ledger, method, device, limits)
            phase(learner, i, [task], budget, f"{task} specialist", _constant(i))
            row.append(evaluate(learner, task, tests[task], greedy, ledger, **kw))
            models.append(learner)
            _log(f"{task} specialist done after {time.monotonic() - start:.0f} s: test success {row[-1]:.2f}")
            done = {
                "parameters": done["parameters"] + learner.parameters_count(),
                "networks": done["networks"] + 1,
                "memory": done["memory"] if i else _memory_summary(learner.memory, tasks),
            }
            if i + 1 < len(tasks):
                checkpoint.save(
                    workdir,
                    identity,
                    {
                        "method": method.state_dict(),
                        "rng": rng.bit_generator.state,
                        "ledger": dict(vars(ledger)),
                        "row": row,
                        "curves": curves,
                        "done": done,
                    },
                )
        checkpoint.clear(workdir)
        matrix, phases = [row], ["specialists"]
    if method.regime != "specialists":
        done = {
            "parameters": sum(m.parameters_count() for m in models),
            "networks": len(models),
            "memory": _memory_summary(models[0].memory, tasks),
        }
    diagnostics = method.diagnostics()
    from cltoolkit.suites.nav4.metrics import METRICS, matrix_value

    r = np.asarray(matrix, dtype=float)
    scores: dict[str, Any] = {METRICS[0]: {t: matrix_value(tasks, phases, r, METRICS[0], t) for t in tasks}}
    for mid in METRICS[1:]:
        value = matrix_value(tasks, phases, r, mid, "aggregate")
        if value is not None:  # undefined for references: left out, never zero-filled
            scores[mid] = value
    return {
        "metrics": {
            **scores,
            "successMatrix": {"tasks": list(tasks), "phases": phases, "values": matrix},
            "curves": curves,
            "evaluation": {
                "policy": protocol.evaluation.policy,
                "episodesPerTask": {t: len(v) for t, v in tests.items()},
            },
            "model": {"parameters": done["parameters"], "networks": done["networks"]},
            "memory": done["memory"],
            "trainingSeconds": round(time.monotonic() - start, 2),
            **({"methodDiagnostics": diagnostics} if diagnostics else {}),
            **(
                {"masking": {"retrainUpdates": ledger.retrainUpdates, "releasedWeights": ledger.releasedWeights}}
                if method.regime == "sequential" and models[0].masks_or_retrains
                else {}
            ),
        },
        "budget": ledger.as_dict() | {"parameters": done["parameters"], "samples": ledger.samples(limits.unaccounted)},
    }
