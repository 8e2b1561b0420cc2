"""Base classes of registered components (kinds: suite, method, metric, analysis, executor).

Light on purpose: importing this module imports no heavy library. A suite's heavy code (torch, gymnasium)
is imported inside the functions that use it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from cltoolkit.errors import Problem

if TYPE_CHECKING:
    from cltoolkit.protocol._base import Strict
    from cltoolkit.protocol.models import ClusterPlan, ProtocolBase
    from cltoolkit.registry import Registries
    from cltoolkit.run.record import RunRecord
    from cltoolkit.run.spec import ExecutionResult, GridPoint, Job, RunOutput, RunSpec

__all__ = [
    "NUMBER",
    "NUMBER_MAP",
    "NUMBER_OR_MAP",
    "NUMBER_OR_NULL",
    "Analysis",
    "Executor",
    "Method",
    "Metric",
    "Suite",
    "ValueKind",
    "make_method",
    "method_problems",
    "value_problems",
]

#: Kinds of a recorded metric value: a finite number; a finite number or null ("not measured", where the suite's
#: records say so); an object mapping names (tasks) to finite numbers or null.
ValueKind = str
NUMBER: ValueKind = "number"
NUMBER_OR_NULL: ValueKind = "number-or-null"
NUMBER_MAP: ValueKind = "number-map"
NUMBER_OR_MAP: ValueKind = "number-or-map"


def _is_number(value: object) -> bool:
    import math

    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def method_problems(suite: type[Suite[Any]], name: str, method: object) -> list[str]:
    """Why `suite`'s driver cannot run the registered method `name` (empty when it can): it must subclass the
    suite's method interface and ask only for data the suite gives methods."""
    base = suite.method_base
    if not (isinstance(method, type) and issubclass(method, base)):
        where = "cltoolkit.plugin" if base.__module__.startswith("cltoolkit.") else base.__module__
        return [
            f"method {name!r} does not implement the {suite.name} method interface: subclass {where}.{base.__name__} "
            f"(the {suite.name} driver calls only that interface)"
        ]
    extra = sorted(set(method.data_access) - set(suite.data_given))
    if extra:
        return [
            f"method {name!r} asks for {', '.join(extra)} data (data_access); the {suite.name} suite gives methods "
            f"{', '.join(sorted(suite.data_given))} only"
        ]
    return [f"method {name!r}: {line}" for line in method.contract_problems()]


M = TypeVar("M", bound="Method")


def make_method(base: type[M], name: str, hyperparameters: Mapping[str, Any], regs: Registries) -> M:
    """The method object of one run of a suite whose interface is `base` (a dataclass with `params`,
    `hyperparameters` and `name`): the registered class `name`, its hyperparameters validated by its `Params`."""
    cls = regs.method.get(name)
    if not issubclass(cls, base):
        raise TypeError(f"method {name!r} is not a {base.__name__}: its suite's driver cannot run it")
    params = cls.Params.model_validate(dict(hyperparameters), strict=False) if cls.Params is not None else None
    return cls(params=params, hyperparameters=dict(hyperparameters), name=name)  # type: ignore[call-arg]


def value_problems(metrics: dict[str, Any], expected: dict[str, ValueKind]) -> list[str]:
    """One line per expected metrics field that is missing, not finite, or not of its kind."""
    out = []
    for key, kind in expected.items():
        pointer = f"/metrics/{key.replace('~', '~0').replace('/', '~1')}"
        if key not in metrics:
            out.append(f"{pointer}: missing (the analysis needs it)")
            continue
        value = metrics[key]
        if kind == NUMBER_OR_MAP:
            kind = NUMBER_MAP if isinstance(value, dict) else NUMBER
        if kind == NUMBER_MAP:
            if not isinstance(value, dict) or not value:
                out.append(f"{pointer}: expected an object of numbers, got {type(value).__name__}")
            else:
                bad = sorted(k for k, v in value.items() if v is not None and not _is_number(v))
                if bad:
                    out.append(f"{pointer}: not a finite number at {', '.join(bad)}")
        elif not (_is_number(value) or (kind == NUMBER_OR_NULL and value is None)):
            shown = "null" if value is None else type(value).__name__
            out.append(
                f"{pointer}: expected a finite number{' or null' if kind == NUMBER_OR_NULL else ''}, got {shown}"
            )
    return out


def _made_with(component: object, regs: Registries | None) -> Registries:
    if regs is None:
        kind = type(component).__name__
        raise TypeError(f"{kind} was made without registries: make it with Registries.new_suite / new_analysis")
    return regs


ProtocolT = TypeVar("ProtocolT", bound="ProtocolBase")
"""The protocol model a suite and its analysis take (a suite's `protocol_model`): the loader validates a protocol
with its suite's model before any suite method sees it, so the methods are typed with it, not re-checked."""


class Method(ABC):
    """A method a suite can run. `Params` validates the comparison's `hyperparameters`."""

    suite: ClassVar[str]
    """Suite the method belongs to."""
    Params: ClassVar[type[Strict] | None] = None
    """Strict model of the method's hyperparameters (None: takes none)."""
    summary: ClassVar[str] = ""
    """One line for `clt list`."""
    data_access: ClassVar[frozenset[str]] = frozenset({"training"})
    """What the method asks to be given (a suite refuses, at validation, a method that asks for more than its
    `data_given`: test and validation data are never given)."""

    @classmethod
    def contract_problems(cls) -> list[str]:
        """Hooks and class settings that cannot work together in the suite's driver (one line each; refused at
        validation, before any run). A suite's method base says which."""
        return []


class Metric(ABC):
    """A registered, versioned metric; its docstring gives the formula and inputs, `compute` its value for one run."""

    id: ClassVar[str]
    suite: ClassVar[str]
    unit: ClassVar[str]
    higher_is_better: ClassVar[bool]
    summary: ClassVar[str] = ""
    key: ClassVar[str | None] = None
    """The run record's `metrics` field that holds the value, where it is not the metric's id (wmf: `pf`, `rd`...)."""

    @classmethod
    def compute(cls, record: RunRecord, scope: str = "aggregate") -> float | None:
        """This metric's value for one run, from what its driver measured (`record.metrics`): a finite number, or
        None where the run did not measure it (never 0 in its place). `scope`: the task of an `each-task` metric,
        `aggregate` otherwise. By default the record's field `key`, else the one named by its id (of a per-task
        object, the `scope` entry); a metric computed from other measurements overrides it (nav4's come from the
        run's success matrix)."""
        value = record.metrics.get(cls.key or cls.id)
        if isinstance(value, dict):
            value = value.get(scope)
        return float(value) if isinstance(value, int | float) and _is_number(value) else None


class Analysis(ABC, Generic[ProtocolT]):
    """Turns run records into per-replicate values (for gates) and the suite's summaries."""

    regs: Registries | None = None
    """The registries the analysis was made from (`Registries.new_analysis`)."""

    def project_regs(self) -> Registries:
        """The registries the analysis was made from: its project's components. An analysis made without them knows
        no project, and this says so rather than guess one."""
        return _made_with(self, self.regs)

    @abstractmethod
    def replicates(
        self, protocol: ProtocolT, records: Sequence[RunRecord], metric: str, comparison: str, scope: str
    ) -> dict[str, dict[str, float]]:
        """Per hypothesis scope (task id or `aggregate`): replicate key -> one number."""

    @abstractmethod
    def summaries(self, protocol: ProtocolT, records: Sequence[RunRecord]) -> dict[str, Any]:
        """The suite's own summaries for the results block (JSON values)."""

    def expected_values(self, protocol: ProtocolT, record: RunRecord) -> dict[str, ValueKind]:
        """The metrics fields a completed record of this run must hold, with their kinds. By default every declared
        metric, as a finite number or an object of them (per task); suites whose records hold other fields, or whose
        metrics apply to some comparisons only, say so here."""
        return {m.id: NUMBER_OR_MAP for m in protocol.metrics}

    def record_problems(self, protocol: ProtocolT, record: RunRecord) -> list[str]:
        """Why a completed record cannot be analysed (one line each, JSON pointers); empty when it can."""
        return value_problems(record.metrics, self.expected_values(protocol, record))

    def report_markdown(self, protocol: ProtocolT, records: Sequence[RunRecord], summaries: dict[str, Any]) -> str:
        """Suite-specific Markdown for the human report."""
        return ""

    def headline(self, protocol: ProtocolT, summaries: dict[str, Any]) -> list[str]:
        """Markdown lines for the top of the report, right after the verdict (what a reader must know before any
        number: e.g. which results rest on an under-trained model)."""
        return []

    def figures(self, protocol: ProtocolT, records: Sequence[RunRecord], summaries: dict[str, Any]) -> list[Any]:
        """Suite-specific matplotlib figures (title, figure) for the human report."""
        return []

    def standard_entries(self, protocol: ProtocolT, record: RunRecord) -> dict[str, Any]:
        """The report's conventional per-run entries (`successMatrix`, `curves`: `cltoolkit.report.standard`) for a
        completed record that keeps the same measurements in a form of its own, so that its report shows the per-task
        matrix and the learning curves every suite's report has. Derived for display only: an entry the record holds
        itself is used as it is, and nothing here enters the results block. None by default."""
        return {}


class Suite(ABC, Generic[ProtocolT]):
    """A family of protocols: its section model, its grid, its driver and its analysis."""

    name: ClassVar[str]
    protocol_model: ClassVar[type[ProtocolBase]]
    analysis: ClassVar[str | None] = None
    """Registered analysis name."""
    summary: ClassVar[str] = ""
    method_base: ClassVar[type[Method]] = Method
    """The interface the suite's driver calls: every method of the suite subclasses it (refused at validation
    otherwise, so no run fails minutes in for a reason knowable before it starts)."""
    data_given: ClassVar[frozenset[str]] = frozenset({"training"})
    """The data a method of this suite may ask for (`Method.data_access`)."""
    budget_fields: ClassVar[frozenset[str]] = frozenset()
    """The fields of a protocol's `budget` the suite's driver enforces; `clt protocol validate` refuses any other a
    protocol sets (besides the clauses and texts every suite checks or prints: `match`, `fairness`, `references`), so
    that no budget field promises what nothing binds."""
    counts_samples: ClassVar[bool] = False
    """The driver counts what reaches the model by origin (`budget.samples`); the report's budget section then says
    so for every comparison, and names records that lack the count."""

    regs: Registries | None = None
    """The registries the suite was made from (`Registries.new_suite`): its driver resolves methods there, not from
    the current folder."""

    def project_regs(self) -> Registries:
        """The registries the suite was made from: its project's components. A suite made without them knows no
        project, and this says so rather than guess one."""
        return _made_with(self, self.regs)

    def check(self, protocol: ProtocolT) -> Iterator[Problem]:
        """Validation beyond the model (registered names, hyperparameters); problems carry JSON pointers."""
        yield from ()

    def freeze_checks(self, protocol: ProtocolT, document_path: Path) -> Iterable[Problem]:
        """Safeguard checks run by `clt protocol freeze` (e.g. duplicate layouts across splits)."""
        return ()

    def plan(self, protocol: ProtocolT, stage: str | None) -> list[GridPoint]:
        """The stage's grid: comparisons (the stage's, or all) x stage seeds x stage task orders x cells (the stage's,
        or all; deterministic run ids)."""
        from cltoolkit.run.spec import GridPoint

        st = protocol.stage(stage)
        orders: list[str | None] = [*st.orders] if st.orders else [None]
        return [
            GridPoint(comp.id, comp.method, seed, order, cell)
            for comp in protocol.comparisons
            if not st.comparisons or comp.id in st.comparisons
            for cell in self.cells(protocol)
            if not st.cells or cell in st.cells
            for order in orders
            for seed in st.seeds
        ]

    def device_problem(self, device: str) -> str | None:
        """Why this machine cannot run the suite on `device` (checked by the driver before any local run starts, so
        a missing GPU fails once instead of in every run's record); None when it can. Suites without torch models
        run on the CPU whatever is asked, so they refuse anything else."""
        if device in ("cpu", "auto"):
            return None
        return f"suite {self.name!r} has no torch models: --device {device} would change nothing (use cpu or auto)"

    def split_manifest(self, protocol: ProtocolT) -> dict[str, Any] | None:
        """The realized split manifest written beside the lock at freeze (`registry/locks/<id>.splits.json`)."""
        return None

    def cells(self, protocol: ProtocolT) -> list[str | None]:
        """Grid cells (e.g. family x distance); [None] where the suite has none."""
        return [None]

    def derived_clusters(self, protocol: ProtocolT) -> ClusterPlan | None:
        """For a protocol that declares no unit of analysis (schema 1), the clusters its design makes: replicates
        that share data, models or random streams. The report tests the gates at that level too, labelled as not
        pre-registered. None: the suite's replicates share nothing."""
        return None

    def execute(self, protocol: ProtocolT, spec: RunSpec, workdir: Path) -> RunOutput:
        """Run one spec (in the worker process) and return its metrics and budget ledger."""
        raise NotImplementedError(f"suite {self.name!r} cannot run yet")

    def tasks(self, protocol: ProtocolT) -> list[str]:
        """Task ids, for `each-task` gates."""
        return []


class Executor(ABC):
    """Runs prepared run specs and yields their results as they finish.

    Contract (tests/run/test_executors.py runs it against every executor): the driver alone decides what runs and
    writes records; an executor never retries a Python exception (`failed`), retries a dead process (`crashed`)
    up to `job.resources.max_attempts` in all, stops a run past `job.resources.timeout_s` (`timeout`), counts every
    attempt, and yields exactly one result per job.
    """

    name: ClassVar[str]

    def __init__(self, components: Path | None = None, **options: Any) -> None:
        self.components = components
        self.options = options

    @abstractmethod
    def execute(
        self,
        jobs: Sequence[Job],
        *,
        workers: int,
        on_start: Callable[[Job], None] | None = None,
    ) -> Iterator[ExecutionResult]:
        """Run every job; call `on_start` as each begins; yield one result per job as it finishes."""

    def prepare(self, workers: int) -> None:  # noqa: B027 - optional hook, nothing to reach by default
        """Reach what the runs need (a cluster) before the driver announces its plan, so a cluster that cannot be
        reached is the one line the user sees; `execute` must still work without it."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release what the executor holds (clusters it started); called by the driver at the end."""
