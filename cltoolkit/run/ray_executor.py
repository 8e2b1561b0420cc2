"""The `ray` executor (extra `clt-prereg[ray]`): one Ray task per run, for grids that outgrow one machine.

- `--address auto|host:port` joins an existing cluster; no address starts a local one sized to `--workers`
  (dashboard and usage statistics off).
- Tasks request `num_cpus` / `num_gpus` / `memory` from the run's resources; a GPU request on a cluster without GPUs is
  refused before anything runs (Ray would wait forever).
- Worker death (SIGKILL, OOM kill) is retried by Ray up to `max_attempts - 1` times (`max_retries`, never
  unbounded); Python exceptions are results (`failed`), never retried; runs past `--timeout` are cancelled.
  Every attempt appends a line to `attempts.log` in the run folder, so attempts are counted across retries.
- A preflight task on every node checks the toolkit version and that the run folders are visible (a shared
  filesystem): records are written by the driver alone, but runs write logs and artefacts where they run.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from cltoolkit._io import open_append_nofollow
from cltoolkit.components import Executor
from cltoolkit.errors import InputError, Refusal
from cltoolkit.run.spec import ExecutionResult, Job, RunOutput, job_payload

__all__ = ["CONNECT_TIMEOUT_S", "RayExecutor", "use_token_if_available"]

ATTEMPTS = "attempts.log"
CONNECT_TIMEOUT_S = 15.0
"""How long `--address` waits for the cluster's head to answer before giving up with one line."""


def use_token_if_available() -> bool:
    """Ray's token authentication for this driver when `RAY_AUTH_MODE` is unset and a token is where Ray looks
    for one (`RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH`, `~/.ray/auth_token`), by Ray's own rule for local clusters
    (it also refreshes Ray's configuration if Ray was imported already); a token sent to a cluster without
    authentication is ignored. Returns whether token mode is on."""
    import logging

    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None:
        return mode.lower() == "token"
    try:
        from ray._private.authentication import authentication_token_setup as setup
    except ImportError:  # a Ray without token authentication
        return False
    log = logging.getLogger(setup.__name__)
    level = log.level
    log.setLevel(logging.ERROR)  # its "enabled" warning is Ray's, not a problem of the run
    try:
        return bool(setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False))
    finally:
        log.setLevel(level)


def _ray_task(job: dict[str, Any]) -> dict[str, Any]:
    """Runs inside a Ray worker: count the attempt, send output to the run's log, run the job in process."""
    import platform
    import sys

    import ray

    from cltoolkit.run.worker import execute_job

    run_dir = Path(job["runDir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    context = ray.get_runtime_context()
    assigned = context.get_assigned_resources()  # type: ignore[no-untyped-call]
    node = {
        "hostname": platform.node(),
        "rayNodeId": context.get_node_id(),
        "resources": {k: float(v) for k, v in sorted(assigned.items())},
    }
    with open_append_nofollow(run_dir / ATTEMPTS) as marks:
        marks.write(f"{os.getpid()} {time.time():.3f}\n".encode())
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open_append_nofollow(run_dir / "log.txt") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            if job.get("environment") is not None:  # the protocol's own package stack: built here, run there
                return {**_in_environment(job, run_dir), "node": node}
            return {**execute_job(job), "node": node}
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _in_environment(job: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Build (or find) the job's package environment on this node from its package file, then run the worker with
    that environment's interpreter, as the local executor does."""
    import json
    import subprocess
    import uuid

    import cltoolkit
    from cltoolkit import packages
    from cltoolkit._io import write_json
    from cltoolkit.run.executors import worker_command

    toolkit = Path(cltoolkit.__file__).resolve().parent.parent
    env = packages.build(Path(job["packageFile"]), toolkit, job.get("pipArgs") or [])
    job_file = run_dir / "job.json"
    write_json(job_file, job)
    out = f"output-{uuid.uuid4().hex[:12]}.json"
    code = subprocess.run([*worker_command(packages.interpreter(env)), str(job_file), out], check=False).returncode
    if code == 0 and (run_dir / out).exists():
        data: dict[str, Any] = json.loads((run_dir / out).read_text())
        (run_dir / out).unlink()
        return {"state": "completed", **data}
    if code == 3 and (run_dir / "error.json").exists():
        return {"state": "failed", "reason": json.loads((run_dir / "error.json").read_text())["reason"]}
    return {"state": "failed", "reason": f"the worker in the protocol's environment exited with code {code}"}


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
        self.connect_timeout_s = float(options.get("connect_timeout_s") or CONNECT_TIMEOUT_S)
        self._started = False

    def prepare(self, workers: int) -> None:
        self._ray(workers)

    def _ray(self, workers: int) -> Any:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if not self.address:  # a private one-machine cluster: its nodes stay on the loopback address
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        try:
            import ray
        except ImportError:
            raise InputError(
                "the ray executor needs Ray: pip install 'clt-prereg[ray]' (or, in a clone: pip install -e '.[ray]')"
            ) from None
        auth = use_token_if_available() if self.address else False
        if not ray.is_initialized():
            if self.address:
                self._connect(ray, self.address, auth)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
                self._started = True
        return ray

    def _connect(self, ray: Any, address: str, auth: bool) -> None:
        """Join an existing cluster: reach its head within the wait, use its token where Ray keeps one, and turn
        every failure into one line that says what to check."""
        if address != "auto":
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise InputError(f"--address {address!r}: expected host:port (e.g. 127.0.0.1:6379) or auto")
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=self.connect_timeout_s).close()
            except OSError as exc:
                why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__).lower()
                raise Refusal(
                    f"cannot reach a Ray cluster at {address} ({why}; waited at most {self.connect_timeout_s:g} s): "
                    "check that its head runs (`ray start --head --port=<port>`), the host and port, and firewalls"
                ) from None
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            hint = (
                "the token did not match the cluster's (`ray get-auth-token` on the head prints it)"
                if auth
                else "if the cluster uses token authentication (the default for clusters started by Ray 2.59 or "
                "later), set RAY_AUTH_MODE=token and give its token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
                "~/.ray/auth_token; `ray get-auth-token` on the head prints it)"
            )
            raise Refusal(
                f"Ray refused the connection to {address} ({first}): {hint}; the Ray version must also match "
                f"the cluster's (here {ray.__version__})"
            ) from None

    def _check(self, ray: Any, jobs: Sequence[Job]) -> None:
        from cltoolkit import __version__

        gpus = max((j.resources.gpus for j in jobs), default=0.0)
        have = ray.cluster_resources().get("GPU", 0.0)
        if gpus > have:
            raise Refusal(
                f"runs request {gpus:g} GPU(s) each but the Ray cluster has {have:g}; nothing was started "
                "(use --gpus-per-run 0, or join a cluster with GPUs via --address)"
            )
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
        self, jobs: Sequence[Job], *, workers: int, on_start: Callable[[Job], None] | None = None
    ) -> Iterator[ExecutionResult]:
        if not jobs:
            return
        ray = self._ray(workers)
        self._check(ray, jobs)
        for job in jobs:
            job.run_dir.mkdir(parents=True, exist_ok=True)
            (job.run_dir / ATTEMPTS).unlink(missing_ok=True)
        from ray.exceptions import GetTimeoutError, RayError, TaskCancelledError

        task = ray.remote(_ray_task)
        queue = list(jobs)
        pending: dict[Any, tuple[Job, float]] = {}
        try:
            while queue or pending:
                while queue and len(pending) < max(1, workers):
                    job = queue.pop(0)
                    wants = job.resources
                    options: dict[str, Any] = {
                        "num_cpus": wants.cpus,
                        "num_gpus": wants.gpus,
                        "max_retries": max(0, wants.max_attempts - 1),
                        "retry_exceptions": False,
                    }
                    if wants.memory_mb:
                        options["memory"] = wants.memory_mb * 2**20
                    ref = task.options(**options).remote(job_payload(job, self.components))
                    pending[ref] = (job, time.monotonic())
                    if on_start is not None:
                        on_start(job)
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                now = time.monotonic()
                for ref in ready:
                    job, began = pending.pop(ref)
                    try:
                        data = ray.get(ref)
                    except TaskCancelledError:
                        yield self._result(job, "timeout", f"exceeded the {job.resources.timeout_s:g} s limit", began)
                        continue
                    except (RayError, GetTimeoutError) as exc:
                        last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
                        yield self._result(job, "crashed", f"process died ({type(exc).__name__}): {last[:200]}", began)
                        continue
                    node = data.pop("node", None)
                    if data.pop("state") == "completed":
                        result = self._result(job, "completed", "", began, RunOutput.from_json(data))
                    else:
                        result = self._result(job, "failed", data["reason"], began)
                    result.node = node
                    yield result
                for ref, (job, began) in list(pending.items()):
                    limit = job.resources.timeout_s
                    if limit and now - began > limit:
                        ray.cancel(ref, force=True)  # the task is not retried after a cancel
        except BaseException:  # Ctrl-C / SIGTERM in the driver: cancel what is still running on the cluster
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

    @staticmethod
    def _result(job: Job, state: str, reason: str, began: float, output: RunOutput | None = None) -> ExecutionResult:
        marks = job.run_dir / ATTEMPTS
        attempts = len(marks.read_text().splitlines()) if marks.exists() else 1
        return ExecutionResult(job.spec, state, reason, max(1, attempts), time.monotonic() - began, output)

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False
