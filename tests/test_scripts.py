"""The maintainers' scripts (`scripts/`) and benchmarks (`bench/`): each starts (an import broken by a module rename
fails here), and `collect_runs.py` copies a stage's records from a run worktree only when every one checks out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cltoolkit.project import Project
from cltoolkit.run.record import RunRecord, read_record, write_record
from tests.conftest import REPO, write
from tests.toy_suite import toy_protocol

SCRIPTS = sorted((REPO / "scripts").glob("*.py")) + sorted((REPO / "bench").glob("*.py"))


def _script(name: str, *args: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLT_ROOT": str(root), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, str(REPO / "scripts" / name), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=False)


@pytest.mark.parametrize("script", SCRIPTS, ids=[f"{p.parent.name}/{p.name}" for p in SCRIPTS])
def test_every_script_starts(script: Path) -> None:
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: "), out.stdout


def _as_if_committed(path: Path, commit: str, dirty: bool = False) -> RunRecord:
    """Rewrite a toy record's provenance as a run from a clean worktree at `commit` would have written it (the toy
    project is not a git repository), sealed again."""
    record = read_record(path)
    prov = record.provenance.model_copy(update={"gitCommit": commit, "gitDirty": dirty})
    new = record.model_copy(update={"provenance": prov})
    write_record(path, new)
    return new


@pytest.mark.e2e
def test_collect_runs_copies_a_checked_stage_and_refuses_a_bad_one(toy: Project, cli) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    assert cli("protocol", "freeze", "toy-v1").exit_code == 0
    worktree = toy.root.parent / "worktree"
    shutil.copytree(toy.root, worktree)
    assert cli("--root", str(worktree), "run", "-p", "toy-v1", "--workers", "1").exit_code == 0
    commit = "ab" * 20
    for path in (worktree / "runs" / "toy-v1").glob("*/record.json"):
        _as_if_committed(path, commit)
    dest = toy.runs_dir / "toy-v1"

    incomplete = worktree / "runs" / "toy-v1" / "base-s1" / "record.json"
    kept = incomplete.read_bytes()
    incomplete.unlink()
    _as_if_committed(worktree / "runs" / "toy-v1" / "cand-s1" / "record.json", commit, dirty=True)

    def collect(*args: str) -> subprocess.CompletedProcess[str]:
        return _script("collect_runs.py", "toy-v1", "--from", str(worktree), *args, root=toy.root)

    out = collect("--commit", "abab")
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert any(line.endswith("base-s1/record.json: no record (not run yet, or still running)") for line in lines)
    assert any("cand-s1/record.json: gitDirty True" in line for line in lines), lines
    assert lines[-1] == "nothing copied (2 problem(s))"
    assert not dest.exists()  # nothing half-copied

    out = collect("--commit", "ff", "--seeds", "0")
    assert out.returncode == 1 and "written at commit abab" in out.stderr  # another commit's runs
    log = worktree / "runs" / "toy-v1" / "cand-s0" / "log.txt"
    log.write_text("resumed from the checkpoint after phase 2 (of 4)\n")  # as a resuming driver writes it
    out = collect("--commit", "abab", "--seeds", "0")
    assert out.returncode == 0, out.stderr
    assert "cand-s0: " in out.stdout and out.stdout.count("(resumed from a checkpoint: its last attempt only)") == 1
    assert "(1 resumed run(s): their earlier attempts not counted)" in out.stdout
    assert (dest / "cand-s0" / "log.txt").read_bytes() == log.read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == ["base-s0", "cand-s0"]
    for run in ("base-s0", "cand-s0"):
        mine, theirs = dest / run / "record.json", worktree / "runs" / "toy-v1" / run / "record.json"
        assert mine.read_bytes() == theirs.read_bytes()
    assert "2 run(s) checked, 2 copied" in out.stdout

    incomplete.write_bytes(kept)
    _as_if_committed(worktree / "runs" / "toy-v1" / "cand-s1" / "record.json", commit)
    changed = json.loads((dest / "cand-s0" / "record.json").read_text())
    (dest / "cand-s0" / "record.json").write_text(json.dumps(changed, indent=1))  # other bytes, committed
    out = collect("--commit", "abab")
    assert out.returncode == 1
    assert "cand-s0/record.json: already committed with other content (never overwritten)" in out.stderr
    assert not (dest / "cand-s1").exists()


def test_gpu_numerics_merge_measures_each_numerics_against_the_cpu_run_of_its_initialisation() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("wmf_gpu_numerics", REPO / "bench" / "wmf_gpu_numerics.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def part(config: str, values: dict[int, tuple[float, float]], device: str) -> dict[str, object]:
        runs = [
            {"config": config, "init": i, "curve": [[1, 600.0], [500, last]], "heldOutReconstruction": held}
            for i, (last, held) in values.items()
        ]
        return {"torch": "x", "device": device, "cpuThreads": 3, "updates": 500, "trainEpisodes": 20, "runs": runs}

    merged = bench.merge(
        [
            part("cpu", {0: (20.0, 21.0), 1: (19.0, 20.0)}, "cpu only"),
            part("cuda-default", {0: (20.5, 21.25), 1: (19.0, 19.5)}, "GPU"),
            part("cuda-default-again", {0: (20.0, 21.0), 1: (19.0, 19.5)}, "GPU"),
        ]
    )
    assert merged["device"] == "GPU"
    assert merged["againstCpu"]["cuda-default"] == {"maxAbsHeldOutDifference": 0.5, "maxAbsCurveDifference": 0.5}
    assert merged["gpuRunToRun"] == {"maxAbsHeldOutDifference": 0.25, "maxAbsCurveDifference": 0.5}
    assert [r["config"] for r in merged["runs"]] == [
        "cpu",
        "cpu",
        "cuda-default",
        "cuda-default",
        *["cuda-default-again"] * 2,
    ]


def _collect_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("collect_runs", REPO / "scripts" / "collect_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_collect_runs_names_a_shared_stage_rebuilt_with_other_values() -> None:
    """wmf-v4's dmc-max seed-1 UG-MTM run rebuilt its family's shared UG-MTM task-A model and the cell's task-B
    reference on another CPU (committed records): both differ from the runs naming the same stage keys, and are named;
    a group whose runs agree (seed 0, all on one machine) gives no line."""
    collect = _collect_module()
    runs = REPO / "runs" / "wmf-v4"
    rec = {name: read_record(runs / name / "record.json") for name in (
        "ug-mtm-dmc-max-s1", "ug-mtm-dmc-med-s1", "finetuning-dmc-max-s1", "ewc-dmc-max-s1",
        "ug-mtm-dmc-max-s0", "finetuning-dmc-max-s0", "ewc-dmc-max-s0",
    )}  # fmt: skip
    late = rec["ug-mtm-dmc-max-s1"]
    lines = collect.stage_divergences([late], [rec["ug-mtm-dmc-med-s1"], rec["finetuning-dmc-max-s1"]])
    assert len(lines) == 2, lines
    task_a = next(line for line in lines if "reconAAfterA" in line)
    assert "stage phase-A-ug_mtm 00677200b1f4" in task_a and "reconAAfterA 6.70687 here (AMD EPYC" in task_a
    assert "ug-mtm-dmc-med-s1 13.1792 (Intel" in task_a
    reference = next(line for line in lines if "reconBFromScratch" in line)
    assert "finetuning-dmc-max-s1 44.1328" in reference and "ug-mtm-dmc-med-s1" not in reference
    # collected the other way round, the earlier run is named against the later one
    assert len(collect.stage_divergences([rec["finetuning-dmc-max-s1"]], [late])) == 1
    assert collect.stage_divergences([rec["ewc-dmc-max-s1"]], [rec["finetuning-dmc-max-s1"]]) == []
    seed0 = [rec["ug-mtm-dmc-max-s0"], rec["finetuning-dmc-max-s0"], rec["ewc-dmc-max-s0"]]
    assert collect.stage_divergences(seed0, []) == []


def test_collect_runs_takes_a_failed_run_only_when_asked() -> None:
    """A run a frozen gate refused (the wmf fingerprint) is evidence: `--failed` collects it, the default does not;
    a crashed run is refused either way."""
    collect = _collect_module()
    done = read_record(REPO / "runs" / "wmf-v4" / "finetuning-minigrid-min-s0" / "record.json")
    prov = done.provenance

    def problems(state: str, failed: bool) -> list[str]:
        status = done.status.model_copy(update={"state": state, "reason": "fingerprint: 766.9 outside [406.7, 724.7]"})
        out: list[str] = []
        collect._check(done.model_copy(update={"status": status}), "r", done.protocol.sha256, prov.gitCommit or "",
                       out, [], failed)  # fmt: skip
        return out

    assert problems("completed", False) == [] and problems("completed", True) == []
    assert problems("failed", False) == ["r: state failed, not completed (a failed run is collected with --failed)"]
    assert problems("failed", True) == []
    assert problems("crashed", True) == ["r: state crashed, not completed or failed"]
