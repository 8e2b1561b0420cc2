"""The multi-task reference's loop (`regime` "multi-task"): Continual World's `run_mt.py` (awarelab/continual_world
@73f63bb: `MultiTaskEnv` with `cycle_mode="episode"` in `continualworld/envs.py`, driven by `SAC.run`).

One phase of the stream's whole budget (`stepsPerTask` x tasks environment steps) in which every episode's start moves
to the next task's environment (CW's `MultiTaskEnv.reset` advances before it resets, so the first episode is the
second task's; each environment's first reset is seeded from (seed, task) as in `run_stream`, later ones continue its
stream). Because `MultiTaskEnv` has no `cur_seq_idx`, CW's loop never sees a task change: `startSteps` random actions
and `updateAfter` count from the phase's start, the buffer (capacity the whole phase, up to `bufferSize`) is never
cleared and the optimiser never reset. Each transition trains its own task's actor head (and critic head, PopArt's
statistics included, where the critics have one per task); every `evaluation.every` steps and at the last step, every
task is evaluated as in `run_stream`. The method's hooks see one task, `all tasks`, index -1; nothing in a batch is
replay (the tasks are learnt together, none earlier than another).

Recorded: average performance and each task's final success (the last `evaluation.last` evaluations), the
evaluations with the phase's step at each, each task's steps and episodes, PopArt's final statistics; not forgetting
or forward transfer (no task has a training phase of its own; CW's tables leave them empty for this reference). No
checkpoints: an interrupted multi-task run starts again from its beginning.

Imports torch and gymnasium: only a worker loads this module.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch

from cltoolkit.errors import CheckFailed, NonFiniteValue
from cltoolkit.suites.crl.api import CrlMethod, CrlTask
from cltoolkit.suites.crl.driver import (
    _book,
    _evaluate,
    _make,
    _OffPolicy,
    _spaces,
    _to_env,
    _update,
    budget,
    sac_config,
)
from cltoolkit.suites.crl.memory import Buffer, CrlLedger
from cltoolkit.suites.crl.metrics import final_success
from cltoolkit.suites.crl.models import CrlProtocol
from cltoolkit.suites.crl.sac import Sac
from cltoolkit.suites.guards import SampleCounter, overrides, unchanged

__all__ = ["run_multitask"]

ALL = "all tasks"
"""The one task a multi-task phase shows the method's hooks (and names in a guard's message)."""


def run_multitask(
    protocol: CrlProtocol,
    method: CrlMethod[Any],
    seed: int,
    unaccounted: str = "violation",
    on_evaluation: Callable[[int, list[float]], None] | None = None,
) -> dict[str, Any]:
    """Train `method` on every task of the stream at once from `seed`; the metrics and the budget ledger."""
    stream, learner, ev = protocol.stream, protocol.learner, protocol.evaluation
    specs = stream.tasks
    if learner.algorithm != "sac":
        raise CheckFailed(f"the multi-task reference runs SAC on continuous actions (CW's), not {learner.algorithm!r}")
    torch.manual_seed(seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    train_envs = [_make(t, stream.maxEpisodeSteps) for t in specs]
    eval_envs = [_make(t, stream.maxEpisodeSteps) for t in specs]
    try:
        obs_dim, act_dim = _spaces(train_envs, specs, learner.algorithm)
        config = sac_config(learner, method, obs_dim, act_dim, len(specs))
        sac = Sac(config)
        total = stream.stepsPerTask * len(specs)
        buffer = Buffer(min(learner.bufferSize, total), obs_dim, config.action_width, method.selection, rng)
        collector = _OffPolicy(learner, buffer, getattr(method.params, "batchSize", None) or learner.batchSize,
                               act_dim, rng)  # fmt: skip
        ledger = CrlLedger()
        counter = SampleCounter(sac.actor, also=[sac.critic], on_bookkeeping=lambda n: _book(ledger, n))

        def named() -> list[tuple[str, torch.nn.Parameter]]:
            return [*sac.actor.named_parameters(), *sac.critic.named_parameters()]

        after_backward = overrides(method, CrlMethod, "after_backward")
        after_step = overrides(method, CrlMethod, "after_step")
        task = CrlTask(ALL, -1, total, None, total=len(specs))
        with counter.armed():
            unchanged(named, "begin_task", partial(method.begin_task, sac, task), "the networks' weights")
        for env in train_envs:
            env.action_space.seed(int(rng.integers(2**31)))  # unused by the suite's own sampling, as in run_stream
        started: set[int] = set()
        steps, episodes = [0] * len(specs), [0] * len(specs)

        def reset(k: int) -> Any:
            first = k not in started
            started.add(k)
            seeded = int(np.random.SeedSequence([seed, k]).generate_state(1)[0] >> 1) if first else None
            return train_envs[k].reset(seed=seeded)[0]

        current = 1 % len(specs)  # CW's MultiTaskEnv advances before its first reset
        obs = reset(current)
        success: list[list[float]] = []
        at: list[int] = []
        updates = 0
        for t in range(total):
            last = t + 1 == total
            env = train_envs[current]
            action = collector.act(sac, obs, t, current)
            next_obs, reward, terminated, truncated, _ = env.step(_to_env(action, env.action_space))
            ends = (bool(terminated), bool(truncated))
            collector.observe(sac, obs, action, float(reward), next_obs, ends, current, last)
            ledger.environmentSteps += 1
            steps[current] += 1
            obs = next_obs
            if terminated or truncated:
                episodes[current] += 1
                if not last:
                    current = (current + 1) % len(specs)
                    obs = reset(current)
            for batch in collector.batches(t, last):
                _update(sac, method, batch, task, updates, counter, ledger, unaccounted, after_backward, after_step,
                        named)  # fmt: skip
                updates += 1
            if (t + 1) % ev.every == 0 or last:
                rates = _evaluate(sac, eval_envs, protocol, seed, len(success), ledger)
                success.append(rates)
                at.append(t + 1)
                if on_evaluation is not None:
                    on_evaluation(ledger.environmentSteps, rates)
        with counter.armed():
            unchanged(named, "end_task", partial(method.end_task, sac, task), "the networks' weights")
        for name, value in named():
            if not bool(torch.isfinite(value.detach()).all()):
                raise NonFiniteValue(ALL, updates, f"parameter {name}", "end of task")
        counter.close()
    finally:
        for env in (*train_envs, *eval_envs):
            env.close()
    ids = [t.id for t in specs]
    final = final_success(success, ev.last)
    popart = sac.popart
    return {
        "metrics": {
            "crl.performance-v1": sum(final) / len(final),
            "finalSuccess": dict(zip(ids, final, strict=True)),
            "evaluations": {"tasks": ids, "regime": "multi-task", "steps": at, "success": success},
            "multiTask": {
                "environmentSteps": dict(zip(ids, steps, strict=True)),
                "episodes": dict(zip(ids, episodes, strict=True)),
                "gradientUpdates": updates,
                **(
                    {
                        "popart": {
                            "mean": dict(zip(ids, popart.moment1.tolist(), strict=True)),
                            "std": dict(zip(ids, popart.sigma.tolist(), strict=True)),
                        }
                    }
                    if popart is not None
                    else {}
                ),
            },
            "methodDiagnostics": method.diagnostics(),
        },
        "budget": budget(ledger, sac, unaccounted),
    }
