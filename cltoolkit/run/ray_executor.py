"""The `ray` executor (extra `clt[ray]`): one Ray task per run, for grids that outgrow one machine.

- `--address auto|host:port` joins an existing cluster; no address starts a local one sized to `--workers`
  (dashboard and usage statistics off).
- Tasks request `num_cpus` / `num_gpus` / `memory` from the run spec; a GPU request on a cluster without GPUs is
  refused before anything runs (Ray would wait forever).
- Worker death (SIGKILL, OOM kill) is retried by Ray up to `max_attempts - 1` times (`max_retries`, never
  unbounded); Python exceptions are results (`failed`), never retried; runs past `--timeout` are cancelled.
  Every attempt appends a line to `attempts.log` in the run folder, so attempts are counted across retries.
- A preflight task on every node checks the toolkit version and that the run folders are visible (a shared
  filesystem): records are written by the driver alone, but runs write logs and artefacts where they run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from cltoolkit._io import open_append_nofollow
from cltoolkit.components import Executor
from cltoolkit.errors import InputError, Refusal
from cltoolkit.run.executors import job_payload, output_from
from cltoolkit.run.spec import ExecutionResult, RunSpec

__all__ = ["RayExecutor"]

ATTEMPTS = "attempts.log"


def _ray_task(job: dict[str, Any]) -> dict[str, Any]:
    """Runs inside a Ray worker: count the attempt, send output to the run's log, run the job in process."""
    import sys

    from cltoolkit.run.worker import execute_job

    run_dir = Path(job["runDir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    with open_append_nofollow(run_dir / ATTEMPTS) as marks:
        marks.write(f"{os.getpid()} {time.time():.3f}\n".encode())
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open_append_nofollow(run_dir / "log.txt") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            return execute_job(job)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _preflight(folder: str) -> dict[str, Any]:
    import platform

    from cltoolkit import __version__

    return {"node": platform.node(), "version": __version__, "sees": os.path.isdir(folder)}


class RayExecutor(Executor):
    """Ray tasks, `workers` in flight at a time."""

    name: ClassVar[str] = "ray"

    def __init__(self, components: Path | None = None, **options: Any) -> None:
        super().__init__(components, **options)
        self.address: str | None = options.get("address")
        self._started = False

    def _ray(self, workers: int) -> Any:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            import ray
        except ImportError:
            raise InputError("the ray executor needs Ray: pip install 'clt[ray]'") from None
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
                self._started = True
        return ray

    def _check(self, ray: Any, jobs: Sequence[RunSpec]) -> None:
        from cltoolkit import __version__

        gpus = max((s.gpus for s in jobs), default=0.0)
        have = ray.cluster_resources().get("GPU", 0.0)
        if gpus > have:
            raise Refusal(
                f"runs request {gpus:g} GPU(s) each but the Ray cluster has {have:g}; nothing was started "
                "(use --gpus-per-run 0, or join a cluster with GPUs via --address)"
            )
        assert jobs[0].run_dir is not None
        jobs[0].run_dir.parent.mkdir(parents=True, exist_ok=True)
        folder = str(jobs[0].run_dir.parent)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        probe = ray.remote(_preflight).options(num_cpus=0, scheduling_strategy="SPREAD")
        answers = ray.get([probe.remote(folder) for _ in nodes or [None]], timeout=120)
        wrong = [a for a in answers if a["version"] != __version__]
        blind = [a for a in answers if not a["sees"]]
        if wrong:
            raise Refusal(
                "Ray workers run another clt version: "
                + ", ".join(f"{a['node']} {a['version']}" for a in wrong)
                + f" (driver {__version__}); install the same version everywhere"
            )
        if blind:
            raise Refusal(
                f"Ray workers on {', '.join(sorted({a['node'] for a in blind}))} cannot see {folder}; the runs "
                "folder must be on a filesystem shared by every node"
            )

    def execute(
        self,
        jobs: Sequence[RunSpec],
        *,
        workers: int,
        timeout_s: float | None,
        on_start: Callable[[RunSpec], None] | None = None,
    ) -> Iterator[ExecutionResult]:
        if not jobs:
            return
        ray = self._ray(workers)
        self._check(ray, jobs)
        for spec in jobs:
            assert spec.run_dir is not None
            spec.run_dir.mkdir(parents=True, exist_ok=True)
            (spec.run_dir / ATTEMPTS).unlink(missing_ok=True)
        from ray.exceptions import GetTimeoutError, RayError, TaskCancelledError

        task = ray.remote(_ray_task)
        queue = list(jobs)
        pending: dict[Any, tuple[RunSpec, float]] = {}
        try:
            while queue or pending:
                while queue and len(pending) < max(1, workers):
                    spec = queue.pop(0)
                    options: dict[str, Any] = {
                        "num_cpus": spec.cpus,
                        "num_gpus": spec.gpus,
                        "max_retries": max(0, spec.max_attempts - 1),
                        "retry_exceptions": False,
                    }
                    if spec.memory_mb:
                        options["memory"] = spec.memory_mb * 2**20
                    ref = task.options(**options).remote(job_payload(spec, self.components))
                    pending[ref] = (spec, time.monotonic())
                    if on_start is not None:
                        on_start(spec)
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                now = time.monotonic()
                for ref in ready:
                    spec, began = pending.pop(ref)
                    try:
                        data = ray.get(ref)
                    except TaskCancelledError:
                        yield self._result(
                            spec, "timeout", f"exceeded the {self._limit(spec, timeout_s):g} s limit", began
                        )
                        continue
                    except (RayError, GetTimeoutError) as exc:
                        last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
                        yield self._result(spec, "crashed", f"process died ({type(exc).__name__}): {last[:200]}", began)
                        continue
                    if data.pop("state") == "completed":
                        yield self._result(spec, "completed", "", began, output_from(data), data.get("torchThreads"))
                    else:
                        yield self._result(spec, "failed", data["reason"], began)
                for ref, (spec, began) in list(pending.items()):
                    limit = self._limit(spec, timeout_s)
                    if limit and now - began > limit:
                        ray.cancel(ref, force=True)  # the task is not retried after a cancel
        except BaseException:  # Ctrl-C / SIGTERM in the driver: cancel what is still running on the cluster
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

    @staticmethod
    def _limit(spec: RunSpec, timeout_s: float | None) -> float | None:
        return timeout_s or spec.timeout_s

    @staticmethod
    def _result(
        spec: RunSpec, state: str, reason: str, began: float, output: Any = None, threads: int | None = None
    ) -> ExecutionResult:
        assert spec.run_dir is not None
        marks = spec.run_dir / ATTEMPTS
        attempts = len(marks.read_text().splitlines()) if marks.exists() else 1
        return ExecutionResult(spec, state, reason, max(1, attempts), time.monotonic() - began, output, threads)

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False
