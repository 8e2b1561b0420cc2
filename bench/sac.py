"""Benchmark: one SAC update of Continual World's size (`cltoolkit.suites.crl.sac`: observation 39, action 4, ten
actor heads, 4 x 256 actor and twin critics, batch 128, Adam, Polyak targets) on one torch thread, against its FLOP
count (torch's FlopCounterMode over one update: the matrix products forward and backward) and one thread's
matrix-multiply peak measured in the same run (the best of fp32 products of the update's own shapes and a large
square one). Target (#55): at least 40% of that peak. Prints one JSON object.
Usage: python bench/sac.py [--updates 200] [--batch 128]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _batch(batch: int, obs_dim: int, act_dim: int, heads: int) -> dict[str, Any]:
    import torch

    return {
        "obs": torch.randn(batch, obs_dim),
        "next_obs": torch.randn(batch, obs_dim),
        "actions": torch.rand(batch, act_dim) * 2 - 1,
        "rewards": torch.randn(batch),
        "done": torch.zeros(batch),
        "head": torch.randint(0, heads, (batch,)),
    }


def update_ms(updates: int, batch: int) -> tuple[list[float], float]:
    """Milliseconds per update (after warm-up) and the FLOPs of one update."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from cltoolkit.suites.crl.sac import Sac, SacConfig

    torch.manual_seed(0)
    sac = Sac(SacConfig(obs_dim=39, act_dim=4, heads=10))
    data = _batch(batch, 39, 4, 10)
    with FlopCounterMode(display=False) as counter:
        sac.update(data)
    times = []
    for i in range(updates + 10):
        start = time.perf_counter()
        sac.update(data)
        if i >= 10:
            times.append((time.perf_counter() - start) * 1000)
    return times, float(counter.get_total_flops())


def matmul_peak(seconds: float = 0.5) -> dict[str, float]:
    """GFLOP/s of fp32 matrix products on this thread: the update's typical shape and a large square one."""
    import torch

    out = {}
    for name, (m, k, n) in {
        "128x256x256": (128, 256, 256),
        "256x256x1024": (256, 256, 1024),
        "1024x1024x1024": (1024, 1024, 1024),
    }.items():
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            a @ b
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            a @ b
            count += 1
        out[name] = round(2 * m * k * n * count / (time.perf_counter() - start) / 1e9, 1)
    return out


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(1)
    peaks_before = matmul_peak()
    times, flops = update_ms(args.updates, args.batch)
    peaks_after = matmul_peak()
    peak = max(max(peaks_before.values()), max(peaks_after.values()))
    median = statistics.median(times)
    achieved = flops / (median / 1000) / 1e9
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "threads": 1,
                "batch": args.batch,
                "updateMsMedian": round(median, 2),
                "updateMsP10P90": [round(v, 2) for v in statistics.quantiles(times, n=10)[::8]],
                "updateMflop": round(flops / 1e6, 1),
                "achievedGflops": round(achieved, 1),
                "matmulGflops": {"before": peaks_before, "after": peaks_after},
                "fractionOfPeak": round(achieved / peak, 3),
                "target": 0.4,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
