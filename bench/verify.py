"""Benchmark: `clt protocol verify` over this repository, history included (target: under 10 s on these machines).

Times the command in fresh processes (imports included), `--repeat` times, wall and CPU, and in process the three
history readers it runs: the locks' history, the run records' history (every version of every committed record),
and the dating of locks, errata and amendments. Prints one JSON object. Usage: python bench/verify.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="Timed `clt protocol verify` processes (median).")
    args = parser.parse_args()

    from cltoolkit.project import Project
    from cltoolkit.protocol.lock_history import history_problems
    from cltoolkit.protocol.record_history import record_history_problems

    project = Project(REPO)
    start = time.perf_counter()
    records = record_history_problems(project)
    records_s = time.perf_counter() - start
    start = time.perf_counter()
    for lock in sorted(project.locks_dir.glob("*.lock.json")):
        history_problems(project, lock.name.removesuffix(".lock.json"))
    locks_s = time.perf_counter() - start
    clt = str(Path(sys.executable).parent / "clt")
    runs = []
    for _ in range(max(1, args.repeat)):
        before = os.times()
        t0 = time.perf_counter()
        done = subprocess.run([clt, "protocol", "verify"], cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        runs.append({"wall": round(wall, 3), "cpu": round(cpu, 3), "exit": done.returncode})
    median = statistics.median(r["wall"] for r in runs)
    out = {
        "benchmark": "verify",
        "records": sum(1 for _ in (REPO / "runs").glob("*/*/record.json")),
        "recordHistorySeconds": round(records_s, 3),
        "recordHistoryProblems": len(records),
        "lockHistorySeconds": round(locks_s, 3),
        "cliSeconds": runs,
        "cliMedianSeconds": round(median, 3),
        "targetSeconds": 10.0,
        "meetsTarget": median < 10.0 and all(r["exit"] == 0 for r in runs),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
