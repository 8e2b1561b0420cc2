"""A computation deferred until its value is asked for: `clt report` asks for its figures once the page is built.

Until the 41st session the figures were drawn in a forked child beside the parent's work (importing matplotlib and
drawing took about 0.45 of a fresh clone's 3.4 CPU-seconds over 10,000 records). The toolkit's own figures are now SVG
text (`report.svg`, milliseconds), and the fork itself cost about 0.1 CPU-second (the copy-on-write faults of a
parent holding 10,000 records), more than it saved; a suite's own matplotlib figures are drawn in this process too,
and kept between reports of the same inputs (`figure_cache`). The name stays: the pinned gatekeeper imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["Forked"]

T = TypeVar("T")

_UNSET = object()


class Forked(Generic[T]):
    """`fn()` computed when its value is first asked for, once: `with Forked(fn) as job: ...; value = job.value()`.
    An error of `fn` surfaces at `value()` with its traceback; a value never asked for is never computed."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._value: object = _UNSET

    def value(self) -> T:
        if self._value is _UNSET:
            self._value = self._fn()
        return self._value  # type: ignore[return-value]

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None
