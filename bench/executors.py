"""Benchmark: per-run overhead of each executor on trivial runs, and the speed-up of 2 workers over 1 on a
CPU-bound grid (targets: local overhead under 0.5 s, ray under 0.2 s once started).

Uses the tests' toy suite in a scratch project. Prints one JSON object.
Usage: python bench/executors.py [--runs 16] [--cpu-seconds 1.0] [--skip-ray]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _project(root: Path, pid: str, behaviour: dict[str, object], seeds: int) -> None:
    from cltoolkit.freeze_actions import freeze
    from cltoolkit.project import Project
    from tests.toy_suite import toy_protocol

    doc = toy_protocol(seeds=seeds)
    doc["id"] = pid
    doc["comparisons"] = [
        {
            "id": "a",
            "method": "toy.method",
            "role": "candidate",
            "label": "a",
            "hyperparameters": {"mean": 0.5, "sd": 0.01, **behaviour},
        }
    ]
    doc["budget"], doc["gates"] = {}, []
    (root / "protocols" / f"{pid}.json").write_text(json.dumps(doc))
    freeze(Project(root), pid)


def _time(root: Path, pid: str, executor: str, workers: int) -> float:
    from cltoolkit.project import Project
    from cltoolkit.run.runner import ExecutorChoice, RunOptions, run_protocol

    start = time.perf_counter()
    summary = run_protocol(Project(root), pid, RunOptions(workers=workers, executor=ExecutorChoice(executor)))
    assert all(r.state == "completed" for r in summary.results), summary.counts()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--cpu-seconds", type=float, default=1.0, help="Busy time of each CPU-bound run.")
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()

    from cltoolkit.registry import registries, reset_registries
    from tests.toy_suite import COMPONENTS

    root = Path(tempfile.mkdtemp(prefix="clt-bench-exec-"))
    (root / "protocols").mkdir()
    (root / "registry" / "locks").mkdir(parents=True)
    (root / "registry" / "components.json").write_text(json.dumps(COMPONENTS))
    os.environ["CLT_ROOT"] = str(root)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    reset_registries()
    registries(root / "registry" / "components.json")
    out: dict[str, object] = {"benchmark": "executors", "cpus": os.cpu_count(), "runs": args.runs}

    executors = ["local"] if args.skip_ray else ["local", "ray"]
    overhead = {}
    for ex in executors:
        if ex == "ray":  # started once, outside the timing ("once started")
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            out["rayStartSeconds"] = round(time.perf_counter() - t0, 2)
        _project(root, f"trivial-{ex}-v1", {}, args.runs)
        wall = _time(root, f"trivial-{ex}-v1", ex, 1)
        overhead[ex] = round(wall / args.runs, 3)
    out["perRunOverheadSeconds"] = overhead
    out["targetsSeconds"] = {"local": 0.5, "ray": 0.2}
    out["meetsTargets"] = {ex: overhead[ex] < out["targetsSeconds"][ex] for ex in overhead}  # type: ignore[index]

    speedup = {}
    busy = {"behavior": "ok", "sleepSeconds": 0.0, "updates": 100}
    for ex in executors:
        times = {}
        for workers in (1, 2):
            pid = f"cpu-{ex}-w{workers}-v1"
            _project(root, pid, {**busy, "busySeconds": args.cpu_seconds}, max(4, args.runs // 4))
            times[workers] = _time(root, pid, ex, workers)
        speedup[ex] = {
            "oneWorkerSeconds": round(times[1], 2),
            "twoWorkersSeconds": round(times[2], 2),
            "speedup": round(times[1] / times[2], 2),
        }
    out["twoWorkersOverOne"] = speedup
    if "ray" in executors:
        import ray

        ray.shutdown()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
