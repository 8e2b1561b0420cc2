"""Progress of `clt run`: a live rich display on a terminal, plain lines otherwise (logs, CI, pipes)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from cltoolkit.run.spec import ExecutionResult, RunSpec

__all__ = ["RunProgress"]


class RunProgress:
    """Counts runs done / running / failed, elapsed and estimated remaining time."""

    def __init__(self, *, quiet: bool = False, live: bool | None = None) -> None:
        self.quiet = quiet
        self.live = sys.stderr.isatty() if live is None else live
        self.start = time.monotonic()
        self.total = 0
        self.done = 0
        self.running = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._progress: Any = None
        self._task: Any = None

    def begin(self, total: int) -> None:
        self.total = total
        if self.quiet or not self.live or total == 0:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task("runs", total=total, counts=self._counts())

    def _counts(self) -> str:
        return f"running {self.running}, failed {self.failed}"

    def started(self, spec: RunSpec) -> None:
        with self._lock:
            self.running += 1
            if self._progress is not None:
                self._progress.update(self._task, counts=self._counts())

    def finished(self, result: ExecutionResult, done: int, total: int) -> None:
        with self._lock:
            self.running = max(0, self.running - 1)
            self.done = done
            if result.state != "completed":
                self.failed += 1
            if self._progress is not None:
                self._progress.update(self._task, completed=done, counts=self._counts())
                if result.state != "completed":
                    self._progress.console.print(f"{result.spec.run_id}: {result.state} ({result.reason})")
            elif not self.quiet:
                elapsed = time.monotonic() - self.start
                eta = elapsed / done * (total - done) if done else 0.0
                sys.stderr.write(
                    f"[{done}/{total}] {result.spec.run_id}: {result.state}"
                    f"{' (' + result.reason + ')' if result.reason else ''} - running {self.running}, failed "
                    f"{self.failed}, elapsed {elapsed:.0f} s, ~{eta:.0f} s left\n"
                )

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
