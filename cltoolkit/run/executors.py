"""Executors. `local` (default): one subprocess per run, `workers` at a time (one thread each), so a crashed or killed
run never takes others down; per-run timeout; per-run log file; crashes retried up to the spec's attempts."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from cltoolkit._io import open_append_nofollow, write_json
from cltoolkit.components import Executor
from cltoolkit.run.spec import ExecutionResult, Job, RunOutput, job_payload

__all__ = ["LocalExecutor", "worker_command"]

POLL_S = 0.25  # how often the driver wakes while waiting for runs (signals are handled then at the latest)


class _Stopped(Exception):
    """The driver is stopping: no new worker process is started."""


class _Children:
    """The worker processes alive now. Stopping the driver (Ctrl-C, SIGTERM, `kill -INT`) kills them at once:
    otherwise the driver would wait for every running run to finish before it could exit, and the finished work
    would still be recorded as interrupted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._stopping = False

    def start(self, args: list[str], log: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._stopping:
                raise _Stopped
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            self._procs.add(proc)
            return proc

    @property
    def stopping(self) -> bool:
        return self._stopping

    def finished(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            self._stopping = True
            for proc in self._procs:
                proc.kill()


def worker_command(interpreter: Path | None = None) -> list[str]:
    """The worker's command line (`interpreter`: a protocol's own package environment, else the driver's Python).
    `-P`: the working directory is not on the module path (a module planted there, named like a dependency, must not
    run); `-s`: no user site-packages unless the driver itself uses them."""
    import site

    user_site = site.ENABLE_USER_SITE and any(p == site.getusersitepackages() for p in sys.path)
    python = str(interpreter) if interpreter is not None else sys.executable
    return [python, "-P", *([] if user_site else ["-s"]), "-m", "cltoolkit.run.worker"]


def _attempt(job: Job, job_file: Path, children: _Children) -> tuple[str, str, RunOutput | None]:
    timeout_s = job.resources.timeout_s
    out = job.run_dir / f"output-{uuid.uuid4().hex[:12]}.json"  # this attempt's own file: no stale output is read
    (job.run_dir / "error.json").unlink(missing_ok=True)
    with open_append_nofollow(job.run_dir / "log.txt") as log:
        proc = children.start([*worker_command(job.interpreter), str(job_file), out.name], log)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return "timeout", f"exceeded the {timeout_s:g} s limit", None
        except BaseException:  # Ctrl-C: stop the child, let the driver mark the run interrupted
            proc.kill()
            proc.wait()
            raise
        finally:
            children.finished(proc)
    if code == 0 and out.exists():
        data = json.loads(out.read_text())
        out.unlink()
        return "completed", "", RunOutput.from_json(data)
    err = job.run_dir / "error.json"
    if code == 3 and err.exists():
        return "failed", json.loads(err.read_text())["reason"], None
    reason = f"process died with signal {-code}" if code < 0 else f"process exited with code {code}"
    return "crashed", reason, None


class LocalExecutor(Executor):
    """One subprocess per run, `workers` at a time."""

    name: ClassVar[str] = "local"

    def _run(self, job: Job, on_start: Callable[[Job], None] | None, children: _Children) -> ExecutionResult:
        if on_start is not None:
            on_start(job)
        job.run_dir.mkdir(parents=True, exist_ok=True)
        job_file = job.run_dir / "job.json"
        write_json(job_file, job_payload(job, self.components))
        start = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            state, reason, output = _attempt(job, job_file, children)
            if state != "crashed" or attempts >= job.resources.max_attempts:
                break
        return ExecutionResult(job.spec, state, reason, attempts, time.monotonic() - start, output)

    def execute(
        self, jobs: Sequence[Job], *, workers: int, on_start: Callable[[Job], None] | None = None
    ) -> Iterator[ExecutionResult]:
        # Plain daemon threads and C-level queues rather than a ThreadPoolExecutor: a Ctrl-C / SIGTERM reaches the
        # driver as a KeyboardInterrupt at any bytecode, and one landing inside concurrent.futures' lock handling
        # (submit, as_completed) can leave a lock held that its exit hook may then wait on. The driver polls
        # for results with a timeout, so a signal is acted on within POLL_S wherever the kernel delivered it.
        children = _Children()
        todo: queue.SimpleQueue[Job] = queue.SimpleQueue()
        for job in jobs:
            todo.put(job)
        results: queue.SimpleQueue[ExecutionResult | BaseException] = queue.SimpleQueue()

        def work() -> None:
            while not children.stopping:  # a run not yet begun is left alone once the grid stops
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    results.put(self._run(job, on_start, children))
                except _Stopped:
                    return
                except BaseException as exc:  # handed to the driver, which stops the grid and raises it
                    results.put(exc)
                    return

        threads = [
            threading.Thread(target=work, name=f"clt-run-{i}", daemon=True)
            for i in range(min(max(1, workers), len(jobs)))
        ]
        try:
            for thread in threads:
                thread.start()
            done = 0
            while done < len(jobs):
                try:
                    item = results.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if isinstance(item, BaseException):
                    raise item
                done += 1
                yield item
        except BaseException:  # Ctrl-C / SIGTERM in the driver, a failing run set-up, or the consumer stopped
            children.stop_all()
            for thread in threads:
                if thread.is_alive():
                    thread.join(timeout=5.0)  # reap the killed workers; daemon threads never block exit
            raise
