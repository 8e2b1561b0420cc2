"""Benchmark: nav4 environment steps/s against MiniGrid's own MiniGrid-DoorKey-8x8-v0 through the same
(egocentric full-grid) observation wrapper with random actions (target: at least as fast), and PPO training
throughput in environment steps/s with 1 torch thread (target: at least half the raw nav4 stepping rate).
Prints one JSON object. Usage: python bench/nav4.py [--seconds 3] [--train-steps 8192]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _rate(env, seconds: float, reset_seed) -> float:  # type: ignore[no-untyped-def]
    import numpy as np

    rng = np.random.default_rng(0)
    env.reset(seed=reset_seed(rng))
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
        n += 1
        if term or trunc:
            env.reset(seed=reset_seed(rng))
    return n / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--train-steps", type=int, default=8192)
    args = parser.parse_args()
    import gymnasium as gym
    import numpy as np
    import torch

    from cltoolkit.run.memory import keep_freed_memory
    from cltoolkit.suites.nav4.agent import Agent, Ledger, VecTasks
    from cltoolkit.suites.nav4.env import EgocentricWrapper, Nav4Env
    from cltoolkit.suites.nav4.suite import AgentParams
    from cltoolkit.validation import load_protocol

    torch.set_num_threads(1)
    keep_freed_memory()  # as every worker does
    seed = lambda rng: int(rng.integers(20_000))  # noqa: E731
    nav = {task: round(_rate(Nav4Env(task), args.seconds, seed)) for task in ("goal", "key", "hazards", "combined")}
    doorkey = round(_rate(EgocentricWrapper(gym.make("MiniGrid-DoorKey-8x8-v0"), "key"), args.seconds, seed))
    protocol = load_protocol(REPO / "protocols" / "nav4-v1.json").model
    params = AgentParams.model_validate(protocol.comparisons[0].hyperparameters, strict=False)
    agent = Agent(params, 15, 0)
    vec = VecTasks(["key"], params.envs, list(range(20_000)), np.random.default_rng(0), 9, 100, 4, (0.2, 0.2))
    ledger = Ledger()
    start = time.perf_counter()
    agent.train(vec, args.train_steps, ledger, lambda _k: 0)
    train_rate = ledger.environmentSteps / (time.perf_counter() - start)
    raw = nav["key"]
    print(json.dumps({
        "benchmark": "nav4",
        "cpus": os.cpu_count(),
        "envStepsPerSecond": {"nav4": nav, "MiniGrid-DoorKey-8x8-v0": doorkey},
        "envAtLeastAsFast": min(nav.values()) >= doorkey,
        "trainingStepsPerSecond": round(train_rate),
        "trainingTarget": round(raw / 2),
        "trainingMeetsTarget": train_rate >= raw / 2,
        "trainingConfig": {"envs": params.envs, "rolloutSteps": params.rolloutSteps, "epochs": params.epochs,
                           "minibatches": params.minibatches, "torchThreads": 1, "parameters": agent.parameters_count()},
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
