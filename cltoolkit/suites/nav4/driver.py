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

from cltoolkit.suites.nav4.layouts import cached_held_out, layout_pool
from cltoolkit.suites.nav4.models import Nav4Protocol

__all__ = ["run"]

SEQUENTIAL = {"nav4.sequential": (False, 0.0), "nav4.uniform-replay": (True, 0.0), "nav4.replay-cloning": (True, None)}


def _log(line: str) -> None:
    print(line, flush=True)  # the run's log.txt


def _constant(value: int) -> Callable[[int], int]:
    """The task index of every environment in a one-task phase."""
    return lambda _k: value


def run(
    protocol: Nav4Protocol, comparison: str, seed: int, order: str | None, workdir: Path, device: str = "cpu"
) -> dict[str, Any]:
    import torch

    from cltoolkit.registry import registries
    from cltoolkit.suites.nav4.agent import Agent, Ledger, VecTasks, evaluate

    comp = protocol.comparison(comparison)
    method = registries().method.get(comp.method)
    assert method.Params is not None
    params = method.Params.model_validate(comp.hyperparameters, strict=False)
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
    ledger = Ledger()
    seed = protocol.stream_seed(seed, order)  # nav4-v1: the seed itself; later versions may add the task order
    rng = np.random.default_rng([seed, 1])
    kw = {"size": size, "max_steps": limit, "min_path": min_path}
    curves: dict[str, Any] = {}
    start = time.monotonic()

    def curve_hook(agent: Agent, task: str, vec: VecTasks, label: str, iterations: int) -> Any:
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

    if comp.method in SEQUENTIAL:
        replay, cloning = SEQUENTIAL[comp.method]
        coef = params.behaviourCloningCoef if cloning is None else cloning
        clone_completed = getattr(params, "cloneFrom", "all-memory") == "completed-phases"
        agent = Agent(
            params, canvas, seed, replay=replay, cloning=coef, clone_completed_only=clone_completed, device=device
        )
        matrix = []
        for i, task in enumerate(tasks):
            vec = VecTasks([task], params.envs, pool, rng, size, limit, min_path, bonus)
            iterations = math.ceil(budget / (params.envs * params.rolloutSteps))
            hook = curve_hook(agent, task, vec, f"{task} (phase {i + 1})", iterations)
            agent.train(vec, budget, ledger, _constant(i), on_iteration=hook)
            matrix.append([evaluate(agent, t, tests[t], greedy, ledger, **kw) for t in tasks])
            _log(
                f"phase {i + 1} ({task}) done after {time.monotonic() - start:.0f} s: test success "
                + ", ".join(f"{t} {v:.2f}" for t, v in zip(tasks, matrix[-1], strict=True))
            )
        phases = list(tasks)
        models = [agent]
    elif comp.method == "nav4.joint":
        agent = Agent(params, canvas, seed, device=device)
        vec = VecTasks(tasks, params.envs, pool, rng, size, limit, min_path, bonus)
        total = budget * len(tasks)
        iterations = math.ceil(total / (params.envs * params.rolloutSteps))
        hook = curve_hook(agent, tasks[0], vec, f"joint ({tasks[0]} validation)", iterations)
        agent.train(vec, total, ledger, lambda k: k % len(tasks), on_iteration=hook)
        row = [evaluate(agent, t, tests[t], greedy, ledger, **kw) for t in tasks]
        matrix, phases, models = [row], ["joint"], [agent]
    elif comp.method == "nav4.specialist":
        row, models = [], []
        for i, task in enumerate(tasks):
            agent = Agent(params, canvas, seed * 1000 + i, device=device)
            vec = VecTasks([task], params.envs, pool, rng, size, limit, min_path, bonus)
            iterations = math.ceil(budget / (params.envs * params.rolloutSteps))
            hook = curve_hook(agent, task, vec, f"{task} specialist", iterations)
            agent.train(vec, budget, ledger, _constant(i), on_iteration=hook)
            row.append(evaluate(agent, task, tests[task], greedy, ledger, **kw))
            models.append(agent)
            _log(f"{task} specialist done after {time.monotonic() - start:.0f} s: test success {row[-1]:.2f}")
        matrix, phases = [row], ["specialists"]
    else:
        raise ValueError(f"nav4 cannot run method {comp.method!r}")
    memory = models[0].memory
    from cltoolkit.suites.nav4.analysis import METRICS, matrix_value

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
            "model": {"parameters": sum(m.parameters_count() for m in models), "networks": len(models)},
            "memory": None
            if memory is None
            else {
                "capacity": memory.capacity,
                "held": len(memory),
                "offered": memory.seen,
                "perTaskIndex": memory.contents(),
                "tasks": list(tasks),
            },
            "trainingSeconds": round(time.monotonic() - start, 2),
        },
        "budget": ledger.as_dict() | {"parameters": sum(m.parameters_count() for m in models)},
    }
