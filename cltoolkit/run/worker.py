"""The worker: runs one RunSpec through its suite's driver.

`python -m cltoolkit.run.worker <job.json> [<output name>]` (the local executor): exit 0 with the output file
written atomically, exit 3 with error.json on a Python exception (traceback in the log); anything else is a crash.
`execute_job` does the same in process (the Ray executor's tasks). Only the driver process writes records.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from cltoolkit._io import write_json
from cltoolkit.run.malloc import keep_freed_memory

__all__ = ["execute_job", "main"]


def _torch_threads() -> int | None:
    """The intra-op threads torch used, read from torch after the run (a suite sets its protocol's count; nothing
    is set here, so the record says what the computation had), or None where the run never imported torch."""
    if "torch" not in sys.modules:
        return None
    import torch

    return int(torch.get_num_threads())


def execute_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job; returns {"state": "completed", ...output} or {"state": "failed", "reason": last line}."""
    threads = int(job["threads"])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    keep_freed_memory()
    from cltoolkit import packages

    here = packages.current()
    if job.get("environment") is not None and here != job["environment"]:
        return {
            "state": "failed",
            "reason": f"environment: this run needs the protocol's package environment ({job['environment']}) and "
            f"ran in {here or 'the toolkit environment'}; `clt env build <protocol>` builds it",
        }
    try:
        from cltoolkit.component_validation import load_protocol
        from cltoolkit.registry import registries
        from cltoolkit.run.spec import spec_from_payload

        regs = registries(Path(job["components"]) if job.get("components") else None)
        protocol = load_protocol(Path(job["protocolPath"]), regs).model
        spec = spec_from_payload(job["spec"])
        suite = regs.new_suite(protocol.suite)
        output = suite.execute(protocol, spec, Path(job["runDir"]))
        bad = _non_finite(output.metrics, "/metrics")
        if bad is not None:
            return {
                "state": "failed",
                "reason": f"non-finite: {bad}: the run produced a NaN or an infinity, which a record cannot "
                f"hold; method {spec.method!r} diverged or returned an invalid score",
            }
        output.torch_threads = _torch_threads()
        if here is not None:  # a protocol's own environment: its versions, not the driver's
            from cltoolkit.run.provenance import package_versions

            output.environment, output.packages = here, package_versions()
        return {"state": "completed", **output.to_json()}
    except Exception as exc:  # a failed run: recorded, never retried
        traceback.print_exc()
        from cltoolkit.errors import FingerprintMiss, NonFiniteValue

        if isinstance(exc, NonFiniteValue | FingerprintMiss):  # its own kind of failure, named by its first word
            return {"state": "failed", "reason": str(exc)}
        return {"state": "failed", "reason": traceback.format_exception_only(type(exc), exc)[-1].strip()}


def _non_finite(value: Any, pointer: str) -> str | None:
    """The JSON pointer of the first NaN or infinity in a run's output, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{pointer} = {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list | tuple) else ()
    for key, item in items:
        found = _non_finite(item, f"{pointer}/{key}")
        if found is not None:
            return found
    return None


def _exit_when_orphaned(parent: int) -> None:
    """A worker whose driver died (kill -9) stops within a second instead of finishing unseen."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(70)


def main(job_path: str, output_name: str = "output.json") -> int:
    job = json.loads(Path(job_path).read_text())
    run_dir = Path(job["runDir"])
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    result = execute_job(job)
    if result.pop("state") == "completed":
        write_json(run_dir / output_name, result)
        return 0
    write_json(run_dir / "error.json", result)
    return 3


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
