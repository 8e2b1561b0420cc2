"""`clt run`: expand the grid, skip finished runs, refuse foreign hashes, execute the rest, write records.

The driver process alone decides what to run and alone writes records (atomically). One module of about 450 lines
on purpose: planning, the store's refusals, the hand-off to an executor and the writing of records are one sequence a
reader follows top to bottom; what branches off it lives beside it (`redo.py`, `estimate.py`, `executors.py`).
"""

from __future__ import annotations

import copy
import datetime
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cltoolkit._io import write_json
from cltoolkit.component_validation import load_protocol, validate_document
from cltoolkit.errors import CltError, InputError, Refusal
from cltoolkit.project import Project
from cltoolkit.protocol.hashing import protocol_hash
from cltoolkit.protocol.load import display_path
from cltoolkit.protocol.lock import Lock, pinned_code_problems, read_lock, require_frozen
from cltoolkit.protocol.lock_history import lock_commit
from cltoolkit.protocol.models import CodeAmendment, ProtocolBase
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import Registries, registries
from cltoolkit.run import provenance
from cltoolkit.run.estimate import Estimate, estimate, measured_times
from cltoolkit.run.record import RECORD_VERSION, RunRecord, read_record
from cltoolkit.run.redo import Redo, redo_points, replaced_history, replacing
from cltoolkit.run.spec import ExecutionResult, GridPoint, Job, Resources, RunSpec
from cltoolkit.run.store import RECORD, RunStore

__all__ = [
    "Callbacks",
    "ExecutorChoice",
    "GridSummary",
    "Redo",
    "RunOptions",
    "Selection",
    "apply_sets",
    "components_used",
    "plan_runs",
    "protocol_components",
    "refuse_unpinned_code",
    "run_protocol",
]


@dataclass(frozen=True)
class Selection:
    """Narrowing of the grid; a narrowed run is still a run of the same protocol (same hash)."""

    methods: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    orders: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()

    def unmatched(self, points: Sequence[GridPoint]) -> list[str]:
        """Each selected value that no grid point of the stage has (a typo, or a seed outside the stage)."""
        out = []
        for flag, wanted, have in (
            ("--methods", self.methods, {p.comparison for p in points}),
            ("--seeds", self.seeds, {p.seed for p in points}),
            ("--orders", self.orders, {p.order for p in points}),
            ("--cells", self.cells, {p.cell for p in points}),
        ):
            missing = [str(v) for v in wanted if v not in have]
            if missing:
                known = ", ".join(sorted(str(v) for v in have if v is not None)) or "none"
                out.append(f"{flag} {', '.join(missing)}: not in this stage's grid (it has: {known})")
        return out

    def keep(self, point: GridPoint) -> bool:
        return (
            (not self.methods or point.comparison in self.methods)
            and (not self.seeds or point.seed in self.seeds)
            and (not self.orders or point.order in self.orders)
            and (not self.cells or point.cell in self.cells)
        )


@dataclass
class GridSummary:
    """What one `clt run` planned, skipped, redid and ran (the driver's account; not `results.RunSummary`)."""

    protocol: str
    sha256: str
    pilot: bool
    store: Path
    planned: int
    skipped: int
    results: list[ExecutionResult] = field(default_factory=list)
    redone: list[tuple[str, str]] = field(default_factory=list)
    """Run folders found without a readable record (interrupted or partially written) that this run redoes."""
    warnings: list[str] = field(default_factory=list)
    """What the user should know before the runs start (e.g. a pilot reusing confirmatory seeds)."""
    stage: str = ""
    workers: int = 1
    estimate: Estimate | None = None
    """CPU-hours and wall time of the runs to do, from measured run times (None where none were measured)."""

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.state] = out.get(r.state, 0) + 1
        return out


def apply_sets(document: dict[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """Apply `--set a.b.0.c=<JSON value>` overrides to a copy of the document."""
    doc = copy.deepcopy(document)
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set {item!r}: expected key.path=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        parts = key.split(".")
        target: Any = doc
        for part in parts[:-1]:
            try:
                target = target[int(part)] if isinstance(target, list) else target[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise InputError(f"--set {item!r}: no field {part!r} in the protocol") from None
        last = parts[-1]
        if isinstance(target, list):
            if not last.lstrip("-").isdigit() or not -len(target) <= int(last) < len(target):
                raise InputError(
                    f"--set {item!r}: {'.'.join(parts[:-1])} is a list of {len(target)}; {last!r} is not an index in it"
                )
            target[int(last)] = value
        elif isinstance(target, dict):
            target[last] = value
        else:
            raise InputError(f"--set {item!r}: cannot set a field inside a {type(target).__name__}")
    return doc


def plan_runs(loaded: LoadedProtocol, stage: str | None, selection: Selection, regs: Registries) -> list[GridPoint]:
    """The stage's grid points that `selection` keeps; `regs` are the project's registries."""
    suite = regs.new_suite(loaded.model.suite)
    return [p for p in suite.plan(loaded.model, stage) if selection.keep(p)]


def protocol_components(regs: Registries, protocol: ProtocolBase) -> dict[str, dict[str, str | None]]:
    """The code of every component a protocol's runs use (the union of `components_used` over its comparisons'
    methods): what freezing pins in the lock."""
    out: dict[str, dict[str, str | None]] = {}
    for method in sorted({c.method for c in protocol.comparisons}):
        out.update(components_used(regs, protocol, method))
    return out


def refuse_unpinned_code(
    lock: Lock,
    amendments: Sequence[CodeAmendment],
    used: dict[str, dict[str, str | None]],
    protocol_id: str,
    project: Project | None = None,
) -> None:
    """Refuse an official run whose component code is neither the lock's nor a recorded code amendment; in a git
    checkout of `project`, the refusal names the commit that wrote the lock as the checkout of the frozen code."""
    problems = pinned_code_problems(lock, amendments, used)
    if problems:
        frozen_at = lock_commit(project, protocol_id) if project is not None else None
        checkout = (
            f"\nTo run the frozen code, run from a checkout of {frozen_at}, the commit that wrote the lock (`git "
            f"worktree add ../{protocol_id}-frozen {frozen_at}`; install and `clt run` there, which checks the code "
            "again)."
            if frozen_at
            else ""
        )
        raise Refusal(
            f"{protocol_id}: the code of {len(problems)} component(s) differs from the code pinned when it was frozen "
            f"({lock.frozenOn:%Y-%m-%d}):\n"
            + "\n".join(problems)
            + checkout
            + f"\nOr restore the frozen code, make a new version (`clt protocol bump {protocol_id}`), or record a "
            f"dated code amendment (`clt protocol amend-code {protocol_id} --component <kind:name> --reason ...`; "
            "every report prints it first, as not pre-registered)"
        )


def components_used(regs: Registries, protocol: ProtocolBase, method: str) -> dict[str, dict[str, str | None]]:
    """`<kind>:<name>` -> the code (distribution, version, source digest) of each registered component a run of
    `method` uses: the suite, the method, every declared metric and the suite's analysis."""
    suite = regs.suite.get(protocol.suite)
    used = [("suite", protocol.suite), ("method", method), *(("metric", m.id) for m in protocol.metrics)]
    if suite.analysis:
        used.append(("analysis", suite.analysis))
    return {f"{kind}:{name}": provenance.component_source(regs[kind].target(name)) for kind, name in used}


def _written_since(store: RunStore, run_id: str, started: datetime.datetime) -> bool:
    """Whether the run's folder holds a record this grid wrote (its own start time): a Ctrl-C that lands while
    `store.write` runs, or just after it, must not overwrite a finished run's record with `interrupted`."""
    try:
        return read_record(store.run_dir(run_id) / RECORD).provenance.startedAt == started
    except (CltError, OSError):
        return False


def _record(
    spec: RunSpec,
    result: ExecutionResult,
    started: datetime.datetime,
    project: Project,
    components: dict[str, dict[str, str | None]] | None = None,
) -> RunRecord:
    commit, dirty = provenance.git_state(project.root)
    output = result.output
    finished = datetime.datetime.now(datetime.UTC)
    return RunRecord.model_validate(
        {
            "recordVersion": RECORD_VERSION,
            "runId": spec.run_id,
            "protocol": {"id": spec.protocol_id, "sha256": spec.protocol_sha256, "pilot": spec.pilot},
            "spec": spec.spec_dict(),
            "status": {"state": result.state, "reason": result.reason, "attempts": max(1, result.attempts)},
            "budget": output.budget if output else {},
            "metrics": output.metrics if output else {},
            "reused": output.reused if output else [],
            "splits": output.splits if output else {},
            "provenance": {
                "toolkitVersion": provenance.toolkit_version(),
                "gitCommit": commit,
                "gitDirty": dirty,
                "packages": (output.packages if output and output.packages else provenance.package_versions()),
                "environment": output.environment if output else None,
                "python": provenance.python_version(),
                "platform": provenance.platform_text(),
                "torchThreads": output.torch_threads if output else None,
                "device": output.device if output else "cpu",
                "hardware": provenance.hardware_text(),
                "precision": output.precision if output else None,
                "wallClockSeconds": round(result.wall_clock_s, 3),
                "startedAt": started,
                "finishedAt": finished,
                "components": components,
                "node": result.node or {"hostname": provenance.hostname()},
            },
        },
        strict=False,
    )


@dataclass(frozen=True)
class ExecutorChoice:
    """Which registered executor runs the grid, and its own options (Ray: `address`, `connect_timeout_s`)."""

    name: str = "local"
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOptions:
    """Everything `clt run` is asked, folded once at the command line and passed down whole."""

    pilot: bool = False
    stage: str | None = None
    """Stage id (default: the protocol's first stage)."""
    sets: tuple[str, ...] = ()
    """`key.path=<JSON>` overrides; any makes the run a pilot of the effective document."""
    selection: Selection = Selection()
    workers: int | None = None
    """Runs at a time (default: this machine's cores)."""
    resources: Resources = field(default_factory=Resources)
    executor: ExecutorChoice = ExecutorChoice()
    wait: bool = False
    """If another driver holds the store, wait for it instead of refusing."""
    redo: Redo | None = None
    """Completed runs to run again (only those), with the reason each new record keeps."""


@dataclass(frozen=True)
class Callbacks:
    """What the caller hears while a grid runs (the CLI's plan lines and progress bar)."""

    on_plan: Callable[[GridSummary], None] | None = None
    """Once, after planning and before any run starts."""
    on_start: Callable[[RunSpec], None] | None = None
    """As each run starts (from an executor thread)."""
    on_result: Callable[[ExecutionResult, int, int], None] | None = None
    """As each run's record is written: the result, how many are done, how many were started."""


def run_protocol(
    project: Project, ref: str, options: RunOptions = RunOptions(), callbacks: Callbacks = Callbacks()
) -> GridSummary:
    """Run the (selected) grid of a protocol's stage; returns what ran.

    The driver holds the store's lock for the whole grid (a second driver on the same store is refused, or waits
    with `options.wait`), refuses a store holding corrupt records, and removes only records of runs it starts
    itself."""
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    if options.sets:
        loaded = _effective(project, regs, loaded, options.sets)
        options = replace(options, pilot=True)
    digest = protocol_hash(loaded.document)
    _refuse_before_planning(project, regs, loaded, options)
    base = project.store_base(digest, pilot=options.pilot)
    project.writable(base / loaded.id)
    store = RunStore(base, loaded.id)
    with store.driver_lock(wait=options.wait):
        return _run_locked(project, regs, loaded, digest, store, options, callbacks)


def _pending(pending: Mapping[str, Mapping[str, Any]], record: RunRecord | None) -> bool:
    """A durable `--redo` intent whose completed record is still the one it names (not yet replaced)."""
    return (
        record is not None
        and record.status.state == "completed"
        and record.runId in pending
        and pending[record.runId].get("seal") == record.seal
    )


def _refuse_rerolls(store: RunStore, points: Sequence[GridPoint], records: Mapping[str, Any]) -> None:
    """A completed record committed to git and deleted from the tree is never run again silently (a re-roll):
    refused, naming each, until it is restored (then `--redo` replaces it on purpose, keeping its seal)."""
    missing = [p.run_id for p in points if p.run_id not in records]
    if not missing:
        return
    tracked = provenance.tracked_files(store.folder)
    if tracked is None:
        return
    gone = [rid for rid in missing if f"{rid}/record.json" in tracked]
    if gone:
        raise Refusal(
            f"{len(gone)} run(s) have a record committed to git that is missing from the store (a deleted record, run "
            "again, would be a silent re-roll):\n"
            + "\n".join(f"{rid}: {display_path(store.run_dir(rid) / 'record.json')}" for rid in gone)
            + "\nRestore them (`git checkout -- <path>`); to replace one on purpose, `clt run --redo <id> --reason ...`"
        )


def _effective(project: Project, regs: Registries, loaded: LoadedProtocol, sets: Sequence[str]) -> LoadedProtocol:
    """The document with `--set` overrides applied, validated and written under `pilot-runs/effective/`."""
    document = apply_sets(loaded.document, sets)
    model, _ = validate_document(document, f"{loaded.path} (with --set)", regs, expected_id=loaded.id)
    key = protocol_hash(document).removeprefix("sha256:")[:16]
    eff_path = project.writable(project.pilot_runs_dir / "effective" / key / f"{loaded.id}.json")
    write_json(eff_path, document, sort_keys=False)
    return LoadedProtocol(eff_path, document, model)


def _refuse_before_planning(project: Project, regs: Registries, loaded: LoadedProtocol, options: RunOptions) -> None:
    """An official run of a draft, or of content other than the frozen one, or of a pilot stage; a device this
    machine does not have."""
    if not options.pilot:
        if read_lock(project, loaded.id) is None:
            raise Refusal(
                f"{loaded.id} is a draft (not frozen): official runs need a frozen protocol. Run a pilot with "
                f"`clt run --protocol {loaded.id} --pilot`, or freeze it with `clt protocol freeze {loaded.id}`"
            )
        require_frozen(project, loaded)
        stage = loaded.model.stage(options.stage)
        if stage.purpose == "pilot":
            raise Refusal(
                f"{loaded.id}: stage {stage.id!r} is a pilot stage; run it with --pilot "
                "(its runs plan the study and never report results)"
            )
    device = options.resources.device
    if options.executor.name == "local":  # on a cluster the workers' devices are not this machine's
        problem = regs.new_suite(loaded.model.suite).device_problem(device)
        if problem is not None:
            raise Refusal(f"--device {device}: {problem}")


def _package_environment(
    project: Project, loaded: LoadedProtocol, store: RunStore, options: RunOptions
) -> tuple[Path | None, str | None, Path | None]:
    """The interpreter and package-file digest of the protocol's own environment (`packages`), built on first use:
    an official run uses the package file the lock pins; a pilot run, one resolved now into its store. (None, None)
    for a protocol without `packages`. The local executor starts its workers with that interpreter; a Ray task builds
    the environment on its node from the same file and starts the worker there."""
    stack = loaded.model.packages
    if stack is None:
        return None, None, None
    import cltoolkit
    from cltoolkit import packages
    from cltoolkit.protocol.lock import package_problems

    lock = None if options.pilot else read_lock(project, loaded.id)
    if lock is not None and lock.packages is not None:
        problems = package_problems(project, lock.packages)
        if problems:
            raise Refusal("\n".join(problems))
        package_file = project.locks_dir / lock.packages.file
    else:  # a pilot: resolved now, kept beside its records
        store.folder.mkdir(parents=True, exist_ok=True)
        package_file = store.folder / "packages.txt"
        text = packages.lock_text(packages.resolve(stack.requirements, stack.python, packages.pip_options()))
        from cltoolkit._io import atomic_write_bytes

        atomic_write_bytes(package_file, text.encode())
    digest = packages.file_digest(package_file)
    if options.executor.name != "local":  # each node builds it where its workers run
        return None, digest, package_file.resolve()
    env = packages.build(package_file, Path(cltoolkit.__file__).resolve().parent.parent, packages.pip_options())
    return packages.interpreter(env), digest, package_file.resolve()


def _run_locked(
    project: Project,
    regs: Registries,
    loaded: LoadedProtocol,
    digest: str,
    store: RunStore,
    options: RunOptions,
    callbacks: Callbacks,
) -> GridSummary:
    store.clean_stale()
    scan = store.scan(remember=True)
    store.refuse_corrupt(scan)
    store.refuse_foreign(scan, digest)
    selection, stage = options.selection, loaded.model.stage(options.stage)
    points = plan_runs(loaded, stage.id, selection, regs)
    if not points and selection != Selection():
        lines = selection.unmatched(plan_runs(loaded, stage.id, Selection(), regs)) or ["no grid point has them all"]
        raise InputError(f"{loaded.id}: the selection matches no run of stage {stage.id!r}:\n" + "\n".join(lines))
    pending = store.pending_redos()
    reasons: dict[str, str] = {}
    """Run id -> why its completed record is replaced (`--redo`, or an earlier `--redo` that did not finish)."""
    if options.redo is not None:
        points = redo_points(options.redo, points, scan.records, loaded.id, stage.id)
        todo = points
        reasons = dict.fromkeys((p.run_id for p in todo), options.redo.reason)
    else:
        _refuse_rerolls(store, points, scan.records)
        todo = [
            p
            for p in points
            if not (p.run_id in scan.records and scan.records[p.run_id].status.state == "completed")
            or _pending(pending, scan.records.get(p.run_id))
        ]
        reasons = {
            p.run_id: str(pending[p.run_id]["reason"]) for p in todo if _pending(pending, scan.records.get(p.run_id))
        }
    workers = options.workers or os.cpu_count() or 1
    times = measured_times(scan.records.values(), display_path(store.folder), loaded.id, loaded.path)
    summary = GridSummary(
        loaded.id,
        digest,
        options.pilot,
        store.folder,
        len(points),
        len(points) - len(todo),
        stage=stage.id,
        workers=workers,
        estimate=estimate(todo, times, workers, options.resources.cpus),
    )
    if options.pilot and stage.purpose != "pilot" and read_lock(project, loaded.id) is not None:
        summary.warnings.append(
            f"this pilot runs stage {stage.id!r}, whose seeds {stage.seeds} are the confirmatory ones: pilot seeds "
            'should be disjoint from them (declare a stage with `"purpose": "pilot"` and other seeds in a new version)'
        )
    planned_ids = {p.run_id for p in todo}
    summary.redone = sorted(
        (problem.where, problem.message)
        for problem in scan.broken
        if Path(problem.where).name in planned_ids or Path(problem.where).parent.name in planned_ids
    )
    summary.redone += [
        (
            run_id,
            f"{'--redo' if options.redo is not None else 'pending --redo'}: {why} (the completed record stays in place "
            "until the new one is sealed; its seal stays in the new record)",
        )
        for run_id, why in sorted(reasons.items())
    ]
    if not todo:
        if callbacks.on_plan is not None:
            callbacks.on_plan(summary)
        return summary
    protocol_path = loaded.path.resolve()
    interpreter, environment, package_file = _package_environment(project, loaded, store, options)
    jobs = [
        Job(
            RunSpec(
                protocol_id=loaded.id,
                protocol_sha256=digest,
                pilot=options.pilot,
                stage=stage.id,
                comparison=p.comparison,
                method=p.method,
                seed=p.seed,
                order=p.order,
                cell=p.cell,
                resources=options.resources,
            ),
            run_dir=project.writable(store.run_dir(p.run_id)),  # a run folder linked out of the project: refused
            protocol_path=protocol_path,
            interpreter=interpreter,
            environment=environment,
            package_file=package_file,
        )
        for p in todo
    ]
    code = {m: components_used(regs, loaded.model, m) for m in sorted({j.spec.method for j in jobs})}
    lock = None if options.pilot else read_lock(project, loaded.id)
    if lock is not None:
        amendments = loaded.model.status.codeAmendments if loaded.model.status else []
        used = {k: v for c in code.values() for k, v in c.items()}
        refuse_unpinned_code(lock, amendments, used, loaded.id, project)
    requested = datetime.datetime.now(datetime.UTC).isoformat()
    for run_id in sorted(reasons):  # durable before any work starts: a crash leaves the redo visibly pending
        old_seal = scan.records[run_id].seal or ""
        try:
            store.record_redo_intent(run_id, old_seal, reasons[run_id], requested)
        except OSError as exc:
            raise Refusal(
                f"{run_id}: cannot record the intent to redo it ({exc.strerror or exc}); nothing was run and every "
                "completed record is in place"
            ) from None
    components = project.components_file if project.components_file.is_file() else None
    runner = regs.executor.get(options.executor.name)(components, **options.executor.options)
    try:
        runner.prepare(workers)  # a cluster that cannot be reached fails here, before the plan is announced
        if callbacks.on_plan is not None:
            callbacks.on_plan(summary)
    except BaseException:
        runner.close()
        raise
    grid_start = datetime.datetime.now(datetime.UTC)
    started: dict[str, datetime.datetime] = {}  # runs the executor has started (on_start), with the time
    done: set[str] = set()

    replaced: dict[str, list[dict[str, Any]]] = {}  # run id -> the records its new record replaces

    def begin(job: Job) -> None:
        # the earlier record (completed and redone, or unfinished) stays in place while the run runs: the new
        # record replaces it atomically once sealed, keeping its seal (`replaces`); a crash, a kill or a full disk
        # before then leaves it as it was
        now = datetime.datetime.now(datetime.UTC)
        old = scan.records.get(job.run_id)
        if old is not None and old.seal is not None:
            why = reasons.get(job.run_id)
            replaced[job.run_id] = replaced_history(old, Redo((job.run_id,), why) if why else None, now)
        started[job.run_id] = now
        if callbacks.on_start is not None:
            callbacks.on_start(job.spec)

    try:
        for result in runner.execute(jobs, workers=workers, on_start=begin):
            spec = result.spec
            record = _record(spec, result, started.get(spec.run_id, grid_start), project, code[spec.method])
            store.write(replacing(record, replaced.get(spec.run_id)))
            store.clear_redo_intent(spec.run_id)
            done.add(spec.run_id)
            summary.results.append(result)
            if callbacks.on_result:
                callbacks.on_result(result, len(summary.results), len(jobs))
    except KeyboardInterrupt:
        for job in jobs:  # runs that never started stay as they were (missing, or their earlier record)
            if job.run_id in started and job.run_id not in done and job.run_id not in reasons:
                if _written_since(store, job.run_id, started[job.run_id]):
                    continue  # Ctrl-C came between its record's write and `done`: the record it has is final
                # a redo keeps its completed record and its pending intent: the next `clt run` completes it
                interrupted = ExecutionResult(job.spec, "interrupted", "stopped by the user (Ctrl-C)", 1, 0.0)
                record = _record(job.spec, interrupted, started[job.run_id], project, code[job.spec.method])
                store.write(replacing(record, replaced.get(job.run_id)))
        raise
    finally:
        runner.close()
    return summary
