"""Copy complete groups of run records from a run worktree into this checkout, after checking them.

    python scripts/collect_runs.py wmf-v3 --from ../wt-v3 --commit bc117f7 --cells minigrid-min,dmc-min --seeds 2

A long stage runs in a clean worktree at one commit (README, wmf-v3) while work goes on in the main checkout; its
records are committed here as groups complete. `--cells`, `--seeds` and `--methods` select runs of the stage as
`clt run` does; this copies their `record.json` and `log.txt` (atomic writes) only when every selected run is there
and every record

- verifies against its seal and is `completed` (with `--failed`, also `failed`: a run a gate of the frozen protocol
  refused, the wmf fingerprint for one, is evidence the report lists under its failed runs);
- is a run of this checkout's frozen protocol (its hash is the lock's);
- was written by `--commit` from a clean tree (`gitDirty` false);
- carries component code the lock pinned (or a code amendment covers).

Otherwise it copies nothing and prints one line per problem (exit 1). A record already here with the same bytes is
left alone; one with other bytes is a problem (a committed record is never overwritten). It prints each run's
wall-clock and the total, the numbers a stage's status note keeps; a run its log says was resumed from a checkpoint
(the crl and nav4 drivers resume after a finished task) is marked: its record's wall-clock is its last attempt's
only. A wmf run whose shared stage (task-A model, task-B reference) gives other values than the committed runs that
name the same stage key, a stage rebuilt on another machine, is copied and named in a `note:` line, to be declared.
The project is CLT_ROOT's, else this checkout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cltoolkit._io import atomic_write_bytes  # noqa: E402
from cltoolkit.component_validation import load_protocol  # noqa: E402
from cltoolkit.errors import CltError  # noqa: E402
from cltoolkit.project import find_project  # noqa: E402
from cltoolkit.protocol.lock import pinned_code_problems, read_lock  # noqa: E402
from cltoolkit.registry import registries  # noqa: E402
from cltoolkit.run.record import RunRecord, read_record  # noqa: E402
from cltoolkit.run.runner import Selection, plan_runs  # noqa: E402

FILES = ("record.json", "log.txt")
RESUMED = "resumed from the checkpoint"  # the line a resuming driver writes to the run's log
PLAIN_TASK_A = "phase-A-rssm"  # the wmf stage of the plain task-A model; a method with its own names another
REFERENCE_B = "reference-B-scratch"


def _shared(record: RunRecord) -> dict[tuple[str, str, str], float]:
    """What a wmf record's shared stages determine, by (stage, key, quantity): the task-A model (the method's own
    where it has one) its held-out A reconstruction after A, the from-scratch B reference its held-out B one. Runs
    that name one stage key share that stage by design."""
    stages = record.metrics.get("stages")
    if not isinstance(stages, dict):
        return {}
    own = sorted(n for n in stages if n.startswith("phase-A-") and n != PLAIN_TASK_A)
    task_a = own[0] if own else PLAIN_TASK_A
    out: dict[tuple[str, str, str], float] = {}
    for name, quantity in ((task_a, "reconAAfterA"), (REFERENCE_B, "reconBFromScratch")):
        key, value = stages.get(name), record.metrics.get(quantity)
        if isinstance(key, str) and isinstance(value, (int, float)):
            out[(name, key, quantity)] = float(value)
    return out


def stage_divergences(new: list[RunRecord], committed: list[RunRecord]) -> list[str]:
    """One line per new record whose shared stage gives other values than in the runs that name the same stage key.

    A stage cache does not outlive its machine; rebuilt from the same key on another CPU it can train to other values
    (float32 kernels round differently across CPUs, and a bimodal fit can end in the other mode). Such a run is still a
    valid run of the frozen code and is committed, but it does not share the stage with those runs: the lines say so,
    to be declared in the stage's status note."""
    seen: dict[tuple[str, str, str], list[tuple[float, RunRecord]]] = {}
    for record in [*committed, *new]:
        for k, value in _shared(record).items():
            seen.setdefault(k, []).append((value, record))
    lines = []
    for record in new:
        for (name, key, quantity), value in _shared(record).items():
            other = [(v, r) for v, r in seen[(name, key, quantity)] if v != value and r.runId != record.runId]
            if other:
                where = ", ".join(f"{r.runId} {v:.6g} ({r.provenance.hardware})" for v, r in other)
                lines.append(
                    f"{record.runId}: stage {name} {key[:12]} gives {quantity} {value:.6g} here "
                    f"({record.provenance.hardware}), but {where}: the same key rebuilt with other values, so this run "
                    "does not share that stage with them (declare it)"
                )
    return lines


def _check(
    record: RunRecord, where: str, digest: str, commit: str, problems: list[str], code: list[str], failed: bool = False
) -> None:
    prov = record.provenance
    if record.status.state != "completed" and not (failed and record.status.state == "failed"):
        wanted = "completed or failed" if failed else "completed (a failed run is collected with --failed)"
        problems.append(f"{where}: state {record.status.state}, not {wanted}")
    if record.protocol.sha256 != digest:
        problems.append(f"{where}: a run of {record.protocol.sha256}, not of the frozen protocol {digest}")
    if not (prov.gitCommit or "").startswith(commit):
        problems.append(f"{where}: written at commit {prov.gitCommit}, not {commit}")
    if prov.gitDirty is not False:
        problems.append(f"{where}: gitDirty {prov.gitDirty} (runs to commit come from a clean tree)")
    problems.extend(f"{where}: {line}" for line in code)


def _split(text: str) -> tuple[str, ...]:
    return tuple(v for v in text.split(",") if v)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol")
    parser.add_argument("--from", dest="source", required=True, type=Path, help="the run worktree (its root)")
    parser.add_argument("--commit", required=True, help="the commit every record must come from (a prefix)")
    parser.add_argument("--stage", default=None, help="the stage (default: the protocol's first)")
    parser.add_argument("--cells", default="", help="cells, comma-separated (default: all)")
    parser.add_argument("--seeds", default="", help="seeds, comma-separated (default: all)")
    parser.add_argument("--methods", default="", help="comparisons, comma-separated (default: all)")
    parser.add_argument("--failed", action="store_true", help="also collect failed runs (a gate refused them)")
    args = parser.parse_args()
    try:
        seeds = tuple(int(s) for s in _split(args.seeds))
        selection = Selection(_split(args.methods), seeds, (), _split(args.cells))
    except ValueError:
        print("--seeds takes integers, e.g. --seeds 0,1,2", file=sys.stderr)
        return 2
    try:
        project = find_project(None, start=ROOT)
        regs = registries(project.components_file)
        loaded = load_protocol(project.protocol_path(args.protocol), regs)
        lock = read_lock(project, args.protocol)
        if lock is None:
            print(f"{args.protocol}: not frozen (no lock): nothing of it is collected", file=sys.stderr)
            return 1
        amendments = loaded.model.status.codeAmendments if loaded.model.status else []
        stage = loaded.model.stage(args.stage).id
        points = plan_runs(loaded, stage, selection, regs)
        problems = selection.unmatched(plan_runs(loaded, stage, Selection(), regs))
        if not points and not problems:
            problems.append(f"the selection matches no run of stage {stage!r}")
        src, dst = args.source / "runs" / args.protocol, project.runs_dir / args.protocol
        copies: list[tuple[Path, Path, RunRecord]] = []
        for point in points:
            folder = src / point.run_id
            where = str(folder / "record.json")
            if not (folder / "record.json").exists():
                problems.append(f"{where}: no record (not run yet, or still running)")
                continue
            record = read_record(folder / "record.json")
            used = {k: v.model_dump() for k, v in (record.provenance.components or {}).items()}
            code = pinned_code_problems(lock, amendments, used)
            _check(record, where, lock.sha256, args.commit, problems, code, args.failed)
            mine = dst / point.run_id / "record.json"
            if mine.exists() and mine.read_bytes() != (folder / "record.json").read_bytes():
                problems.append(f"{mine}: already committed with other content (never overwritten)")
            copies.append((folder, dst / point.run_id, record))
    except CltError as exc:  # one line per problem, as the command line prints it
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(f"nothing copied ({len(problems)} problem(s))", file=sys.stderr)
        return 1
    total, written, resumed = 0.0, 0, 0
    for folder, target, record in copies:
        target.mkdir(parents=True, exist_ok=True)
        read = {name: (folder / name).read_bytes() for name in FILES if (folder / name).exists()}
        for name, data in read.items():
            if not ((target / name).exists() and (target / name).read_bytes() == data):
                atomic_write_bytes(target / name, data)
                written += name == "record.json"
        seconds = record.provenance.wallClockSeconds or 0.0
        total += seconds
        again = RESUMED.encode() in read.get("log.txt", b"")
        resumed += again
        note = " (resumed from a checkpoint: its last attempt only)" if again else ""
        if record.status.state == "failed":
            note += f" (failed: {record.status.reason})"
        print(f"{target.name}: {seconds:,.0f} s{note}")
    same = f" ({len(copies) - written} here already, the same bytes)" if written < len(copies) else ""
    print(f"{len(copies)} run(s) checked, {written} copied into {dst}{same}")
    note = f" ({resumed} resumed run(s): their earlier attempts not counted)" if resumed else ""
    print(f"{total:,.0f} s of run wall-clock{note}")
    mine = {r.runId for _, _, r in copies}
    here = [read_record(p) for p in sorted(dst.glob("*/record.json")) if p.parent.name not in mine]
    for line in stage_divergences([r for _, _, r in copies], here):
        print(f"note: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
