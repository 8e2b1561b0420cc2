"""The worker process: runs one RunSpec through its suite's driver and writes `output.json` atomically.

`python -m cltoolkit.run.worker <job.json>`; exit 0 with output.json on success, exit 3 with error.json on a
Python exception (traceback in the log), anything else is a crash. Only the driver process writes records.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from cltoolkit._io import write_json

__all__ = ["main"]


def _torch_threads(threads: int) -> int | None:
    if "torch" not in sys.modules:
        return None
    import torch

    torch.set_num_threads(threads)
    return int(torch.get_num_threads())


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    run_dir = Path(job["runDir"])
    threads = int(job["threads"])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    try:
        from cltoolkit.protocol.validate import load_protocol
        from cltoolkit.registry import registries

        regs = registries(Path(job["components"]) if job.get("components") else None)
        protocol = load_protocol(Path(job["protocolPath"]), regs).model
        from cltoolkit.run.spec import RunSpec

        spec = RunSpec(**job["spec"])
        suite = regs.suite.get(protocol.suite)()
        output = suite.execute(protocol, spec, run_dir)
        write_json(
            run_dir / "output.json",
            {
                "metrics": output.metrics,
                "budget": output.budget,
                "reused": output.reused,
                "device": output.device,
                "precision": output.precision,
                "splits": output.splits,
                "torchThreads": _torch_threads(threads),
            },
        )
        return 0
    except BaseException as exc:  # a failed run: record it, never retry
        traceback.print_exc()
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        write_json(run_dir / "error.json", {"reason": last})
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
