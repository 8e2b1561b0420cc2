"""Work done in a forked child process beside the parent's: `clt report` draws its figures there (importing
matplotlib and drawing take about 0.7 s of a 3 s report over 10,000 records) while the parent builds the page,
validates the results block and writes; on a machine with two cores the two overlap.

The child sees the parent's memory as it is at the fork (the records and results are not pickled on the way in);
its value comes back pickled through a pipe. Where the platform does not fork safely (Windows has no fork; macOS
frameworks are not fork-safe), or the child fails in any way (an exception, a crash, a kill), the same function
runs in this process when its value is asked for, so the value is the same either way and an error surfaces here
with its traceback.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["Forked"]

T = TypeVar("T")


class Forked(Generic[T]):
    """`fn()` computed in a forked child: `with Forked(fn) as job: ...; value = job.value()`. Leaving the block
    reaps the child (killed if its value was never asked for, e.g. when the parent's own work failed)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._pid = 0
        self._read = -1
        if hasattr(os, "fork") and sys.platform.startswith("linux"):
            self._start()

    def _start(self) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the parent's code (no atexit, no test teardown, no flush)
            code = 1
            try:
                os.close(read)
                payload = pickle.dumps(self._fn(), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write, "wb") as out:
                    out.write(payload)
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self._pid, self._read = pid, read

    def value(self) -> T:
        """The child's value; `fn()` computed here instead where no child ran or it failed."""
        if self._pid:
            with os.fdopen(self._read, "rb") as source:
                self._read = -1
                payload = source.read()
            _, status = os.waitpid(self._pid, 0)
            self._pid = 0
            if os.waitstatus_to_exitcode(status) == 0 and payload:
                return pickle.loads(payload)  # type: ignore[no-any-return]
        return self._fn()

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
        if self._pid:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = 0
