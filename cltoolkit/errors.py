"""The one user-facing error hierarchy.

A `CltError` is a problem with the user's input or a refusal, never a bug. The CLI prints its message
(one line per problem) and exits without a traceback; any other exception keeps its traceback.

Exit codes: 2 for bad input (`InputError` and subclasses), 1 for a failed check or a refusal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "BudgetViolation",
    "CheckFailed",
    "CltError",
    "DataAccessViolation",
    "InputError",
    "NonFiniteValue",
    "Problem",
    "Refusal",
    "UnknownNameError",
    "ValidationFailed",
    "json_pointer",
    "pydantic_problems",
]


@dataclass(frozen=True)
class Problem:
    """One problem in one place: `where` is a file, a file plus JSON pointer, or a run id."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class CltError(Exception):
    """Base of every error the user can cause; printed without a traceback."""

    exit_code = 1

    def __init__(self, message: str | None = None, problems: Iterable[Problem] = ()) -> None:
        self.problems = tuple(problems)
        if message is None:
            message = "\n".join(str(p) for p in self.problems)
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InputError(CltError):
    """Bad input: a malformed file, a wrong type, an unknown name. Exit code 2."""

    exit_code = 2


class ValidationFailed(InputError):
    """A document failed parsing or validation; `problems` holds one entry per problem."""


class UnknownNameError(InputError, KeyError):
    """A name that is not registered, with suggestions."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class Refusal(CltError):
    """The toolkit refuses to do something that would give an unearned or unsafe result. Exit code 1."""


class CheckFailed(CltError):
    """A check ran and failed (e.g. `clt protocol verify` found a changed protocol). Exit code 1."""


class BudgetViolation(RuntimeError):
    """A method spent what the suite did not give it (updates outside the suite's loop, more replay than declared):
    the run fails with this reason, which the report lists among the failed runs."""


class NonFiniteValue(RuntimeError):
    """A loss term, a gradient or a parameter became NaN or infinite during training: the run ends as failed with a
    reason that starts with `non-finite:` and names the task, the update, the term and the hook that produced it.
    Never a silently dropped update, never a budget violation (the report lists such runs first)."""

    PREFIX = "non-finite:"

    def __init__(self, task: str, update: int, term: str, hook: str) -> None:
        self.task, self.update, self.term, self.hook = task, update, term, hook
        super().__init__(f"{self.PREFIX} {term} in task {task}, update {update} (after hook {hook})")


class FingerprintMiss(RuntimeError):
    """A run's first task-A update loss lies outside the range the protocol's `fingerprint` declares: its frames or its
    model are not the reference's (a wrong camera, a wrong resize), so nothing it would measure is comparable. The run
    ends as failed, its reason starting with `fingerprint:`, right after its task-A phase."""

    PREFIX = "fingerprint:"


class DataAccessViolation(RuntimeError):
    """A method asked for data the suite does not give methods (test, validation or held-out data)."""


def json_pointer(loc: tuple[Any, ...] | list[Any]) -> str:
    """RFC 6901 pointer of a location path ('' is the whole document)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in loc)


def pydantic_problems(exc: ValidationError, source: str, prefix: str = "") -> list[Problem]:
    """One problem per pydantic error, located as `source: <JSON pointer>` (under `prefix`).

    Shared by every layer that validates a document with pydantic (protocols, locks, run records)."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-after"))]
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field (not allowed here)"
        elif err["type"] == "missing":
            msg = "required field missing"
        elif "input" in err and err["type"].endswith("_type"):
            msg = f"{msg}, got {type(err['input']).__name__} {json.dumps(err['input'])[:40]}"
        msg = msg.removeprefix("Value error, ")
        problems.append(Problem(f"{source}: {prefix + json_pointer(loc) or '/'}", msg))
    return problems
