"""The `wmf` suite: world-model forgetting benchmark (WorldModelsBenchmark) across three families x three labelled
distances, five continual-learning methods, from-scratch references shared per (cell, seed)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cltoolkit import components
from cltoolkit.components import Suite
from cltoolkit.errors import Problem
from cltoolkit.suites.wmf.api import WorldModelMethod
from cltoolkit.suites.wmf.models import WmfProtocol

if TYPE_CHECKING:
    from cltoolkit.protocol.models import ClusterPlan
    from cltoolkit.registry import Registries
    from cltoolkit.run.spec import GridPoint, RunOutput, RunSpec

__all__ = ["WmfSuite", "make_method"]


def make_method(name: str, hyperparameters: Mapping[str, Any], regs: Registries) -> WorldModelMethod[Any]:
    """The method object of one run (`components.make_method` with this suite's interface)."""

    return components.make_method(WorldModelMethod, name, hyperparameters, regs)


class WmfSuite(Suite[WmfProtocol]):
    """World-model forgetting benchmark."""

    name = "wmf"
    protocol_model = WmfProtocol
    method_base = WorldModelMethod
    data_given = frozenset({"training", "importance-set"})
    analysis = "wmf"
    counts_samples = True
    budget_fields = frozenset({"gradientUpdatesPerTask", "memoryCapacity", "unaccountedSamples"})
    summary = "world-model forgetting: 3 families x 3 distances, 5 methods, PF / RD / FT beside encoder drift"

    def check(self, protocol: WmfProtocol) -> Iterator[Problem]:
        """Beyond `clt protocol validate`'s registry, method-interface and hyperparameter checks: method pairs name
        declared comparisons, MiniGrid tasks carry no physics."""
        ids = {c.id for c in protocol.comparisons}
        for i, pair in enumerate(protocol.methodPairs):
            for field in ("method", "reference"):
                if getattr(pair, field) not in ids:
                    yield Problem(f"/methodPairs/{i}/{field}", f"unknown comparison {getattr(pair, field)!r}")
        if protocol.seedAnalyses is not None:
            for i, comp_id in enumerate(protocol.seedAnalyses.axisMethods):
                if comp_id not in ids:
                    yield Problem(f"/seedAnalyses/axisMethods/{i}", f"unknown comparison {comp_id!r}")
        for fi, family in enumerate(protocol.families):
            for li, level in enumerate(family.levels):
                if family.renderer == "minigrid" and (level.taskA.physics.gravity or level.taskB.physics.gravity):
                    yield Problem(f"/families/{fi}/levels/{li}", "MiniGrid tasks have no physics")
        yield from _feasibility(protocol)

    def cells(self, protocol: WmfProtocol) -> list[str | None]:
        return list(protocol.cell_ids())

    def derived_clusters(self, protocol: WmfProtocol) -> ClusterPlan | None:
        """The cells of one seed that share a data set (and so the models trained on it) are one cluster: which ones
        follows from `data.collectionSeeds` (`by-task`: a task's episodes are the same whatever its role, so a task
        that is B in one cell and A in the next links them; `by-role` and `seed-stream`: cells with the same task A,
        or the same task B, share it)."""
        from cltoolkit.protocol.models import ClusterPlan

        by_task = protocol.data.collectionSeeds == "by-task"
        parent = {cell: cell for cell in protocol.cell_ids()}

        def root(cell: str) -> str:
            while parent[cell] != cell:
                cell = parent[cell]
            return cell

        owner: dict[str, str] = {}
        for family in protocol.families:
            for level in family.levels:
                cell = f"{family.id}-{level.id}"
                for role, task in (("A", level.taskA), ("B", level.taskB)):
                    key = f"{family.id}|{'' if by_task else role}|{task.model_dump_json()}"
                    if key in owner:
                        parent[root(cell)] = root(owner[key])
                    owner.setdefault(key, cell)
        groups: dict[str, list[str]] = {}
        for cell in protocol.cell_ids():
            groups.setdefault(root(cell), []).append(cell)
        shared = [g for g in groups.values() if len(g) > 1]
        if not shared:
            return None
        how = "a task's episodes, whatever its role" if by_task else "task A's episodes and model, or task B's episodes"
        shares = (
            f"within a seed, cells that share a data set ({how}; collectionSeeds {protocol.data.collectionSeeds!r}) "
            "and the models trained on it"
            + (
                "; not captured: a MiniGrid task that is B at seed s is A at seed s + 1 (the same stream)"
                if protocol.data.collectionSeeds == "seed-stream"
                else ""
            )
        )
        return ClusterPlan(by=["seed", "cellGroup"], cellGroups=shared, shares=shares)

    def plan(self, protocol: WmfProtocol, stage: str | None) -> list[GridPoint]:
        """comparisons x cells (the stage's, or all) x (stage seeds that the cell declares): control cells run fewer
        seeds."""
        from cltoolkit.run.spec import GridPoint

        st = protocol.stage(stage)
        points = []
        cells = [c for c in protocol.cell_ids() if not st.cells or c in st.cells]
        for comp in protocol.comparisons:
            for cell in cells:
                level = protocol.cell(cell)[1]
                for seed in st.seeds:
                    if st.purpose == "pilot" or seed in level.seeds:
                        points.append(GridPoint(comp.id, comp.method, seed, None, cell))
        return points

    def device_problem(self, device: str) -> str | None:
        """A torch suite: `device` must resolve on this machine (cuda needs a CUDA device torch can see)."""
        from cltoolkit.suites.devices import device_problem

        return device_problem(device)

    def execute(self, protocol: WmfProtocol, spec: RunSpec, workdir: Path) -> RunOutput:
        from cltoolkit.run.spec import RunOutput
        from cltoolkit.suites.devices import describe_device, resolve_device
        from cltoolkit.suites.wmf.driver import run_cell

        assert spec.cell is not None  # the wmf grid gives every run a cell
        comp = protocol.comparison(spec.comparison)
        device = resolve_device(spec.device)
        method = make_method(comp.method, comp.hyperparameters, self.project_regs())
        out = run_cell(protocol, spec.cell, method, spec.seed, workdir.parent, device)
        return RunOutput(
            metrics=out["metrics"],
            budget=out["budget"],
            reused=out["reused"],
            device=describe_device(device),
            precision="float32",
        )


FRAME_BYTES = 64 * 64 * 3
CELL_DATA_MAX_BYTES = 16 * 2**30
"""The most frame data one cell may hold (four episode sets of 64 x 64 x 3 uint8 frames), so that a run fits the
machines it is meant for (MACHINE.md: 23 GiB here, 128 GiB on the device machine)."""
UPDATES_MAX = 10**7
WINDOW_FRAMES_MAX = 2**16


def _feasibility(protocol: WmfProtocol) -> Iterator[Problem]:
    """The sizes this suite can run, one problem each: a protocol beyond them would freeze and then fail every run."""
    d, t = protocol.data, protocol.training
    cell = 2 * (d.trainEpisodes + d.heldOutEpisodes) * (d.maxEpisodeSteps + 1) * FRAME_BYTES
    if cell > CELL_DATA_MAX_BYTES:
        yield Problem(
            "/data",
            f"one cell's episodes would take {cell / 2**30:.1f} GiB of frames (2 tasks x (trainEpisodes + "
            f"heldOutEpisodes) x (maxEpisodeSteps + 1) x 64 x 64 x 3 bytes); the wmf suite runs at most "
            f"{CELL_DATA_MAX_BYTES // 2**30} GiB",
        )
    if t.updatesPerTask > UPDATES_MAX:
        yield Problem("/training/updatesPerTask", f"{t.updatesPerTask} exceeds the suite's bound, {UPDATES_MAX}")
    if t.batch * t.sequenceLength > WINDOW_FRAMES_MAX:
        frames = t.batch * t.sequenceLength
        yield Problem(
            "/training/batch", f"batch x sequenceLength = {frames} frames per update exceeds {WINDOW_FRAMES_MAX}"
        )
