"""The `nav4` suite: protocol model, method declarations, the freeze-time duplicate-layout check and the driver
(environments in `env.py`, agents in `agent.py`, the run in `driver.py`, analysis in `analysis.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cltoolkit import components
from cltoolkit.components import Suite
from cltoolkit.errors import Problem
from cltoolkit.suites.nav4.api import Nav4Method
from cltoolkit.suites.nav4.models import Nav4Protocol

if TYPE_CHECKING:
    from cltoolkit.protocol.models import ClusterPlan
    from cltoolkit.registry import Registries
    from cltoolkit.run.spec import RunOutput, RunSpec

__all__ = ["Nav4Suite", "make_method"]


def make_method(name: str, hyperparameters: Mapping[str, Any], regs: Registries) -> Nav4Method[Any]:
    """The method object of one run (`components.make_method` with this suite's interface)."""
    return components.make_method(Nav4Method, name, hyperparameters, regs)


MEMORY_BYTES = 16 * 2**30
"""The most a run's replay memory may take (the documented machines have 24 GiB)."""
DEFAULT_NETWORK = "small-cnn"
"""The name `AgentParams.network` gives the suite's default network (`cltoolkit.suites.nav4.net.Net`)."""


class Nav4Suite(Suite[Nav4Protocol]):
    """Four-task MiniGrid navigation diagnostic."""

    name = "nav4"
    protocol_model = Nav4Protocol
    method_base = Nav4Method
    analysis = "nav4"
    counts_samples = True
    budget_fields = frozenset({"interactionsPerTask", "gradientUpdatesPerTask", "memoryCapacity", "unaccountedSamples"})
    summary = "four-task 9x9 MiniGrid navigation diagnostic (PPO agents, replay, references)"

    def check(self, protocol: Nav4Protocol) -> Iterator[Problem]:
        """Beyond the registry and method-interface checks: every method's `Params` carries the PPO learner's fields
        (subclasses `AgentParams`), task orders permute the tasks, every split has a seed range."""
        from cltoolkit.suites.nav4.methods import AgentParams

        regs = self.project_regs()
        for i, comp in enumerate(protocol.comparisons):
            name = comp.method  # resolved through the registries; no name is special
            cls = regs.method.get(name) if name in regs.method else None
            params = getattr(cls, "Params", None)
            if (
                isinstance(cls, type)
                and issubclass(cls, Nav4Method)
                and not (isinstance(params, type) and issubclass(params, AgentParams))
            ):
                yield Problem(
                    f"/comparisons/{i}/method",
                    f"method {comp.method!r}: its Params must subclass cltoolkit.plugin.Nav4AgentParams (the suite's "
                    "PPO learner reads those fields)",
                )
            network = comp.hyperparameters.get("network")
            if (
                isinstance(cls, type)
                and issubclass(cls, Nav4Method)
                and cls.network is Nav4Method.network
                and network is not None
                and network != DEFAULT_NETWORK
            ):
                yield Problem(
                    f"/comparisons/{i}/hyperparameters/network",
                    f"{network!r} names no network: method {comp.method!r} uses the suite's default network, "
                    f"{DEFAULT_NETWORK!r} (a method brings its own by defining `network(canvas)`)",
                )
        canvas = 2 * protocol.environment.gridSize - 3
        per_sample = 16 * canvas * canvas + 64  # a memory slot, bounded above: observation planes, logits, scalars
        sized = [("/budget/memoryCapacity", protocol.budget.memoryCapacity)] + [
            (f"/comparisons/{i}/hyperparameters/capacity", c.hyperparameters.get("capacity"))
            for i, c in enumerate(protocol.comparisons)
        ]
        for pointer, capacity in sized:
            if isinstance(capacity, int) and capacity * per_sample > MEMORY_BYTES:
                yield Problem(
                    pointer,
                    f"{capacity} transitions take about {capacity * per_sample / 2**30:.0f} GiB in a replay memory; "
                    f"at most {MEMORY_BYTES // per_sample} fit in {MEMORY_BYTES // 2**30} GiB",
                )
        tasks = {t.id for t in protocol.environment.tasks}
        for i, order in enumerate(protocol.seeds.taskOrders):
            if sorted(order.tasks) != sorted(tasks):
                yield Problem(f"/seeds/taskOrders/{i}/tasks", f"must be a permutation of {sorted(tasks)}")
        for split in ("train", "validation", "test"):
            if split not in protocol.seeds.splits:
                yield Problem("/seeds/splits", f"missing generator seed range for split {split!r}")

    def freeze_checks(self, protocol: Nav4Protocol, document_path: Path) -> Iterable[Problem]:
        """Refuse when a final-test layout duplicates a training or validation layout (fingerprints)."""
        from cltoolkit.suites.nav4.layouts import split_manifest

        try:
            self._manifest = split_manifest(protocol)
        except ValueError as exc:  # too few distinct layouts in a seed range
            return [Problem("/seeds/splits", str(exc))]
        problems = []
        for task, entry in self._manifest["tasks"].items():
            for key, other in (("testInTrain", "training"), ("testInValidation", "validation")):
                if entry[key]:
                    problems.append(
                        Problem(
                            "/seeds/splits",
                            f"{task}: final-test layouts of seeds {entry[key][:5]} duplicate {other} layouts "
                            f"({len(entry[key])} in all); change the seed ranges",
                        )
                    )
        return problems

    def split_manifest(self, protocol: Nav4Protocol) -> dict[str, object] | None:
        manifest = getattr(self, "_manifest", None)
        if manifest is None:
            from cltoolkit.suites.nav4.layouts import split_manifest

            manifest = split_manifest(protocol)
        return manifest

    def tasks(self, protocol: Nav4Protocol) -> list[str]:
        return [t.id for t in protocol.environment.tasks]

    def derived_clusters(self, protocol: Nav4Protocol) -> ClusterPlan | None:
        """With `randomStreams` "seed" a seed's task orders share its initialisation and random streams: one
        cluster per seed. With "seed-and-order" every replicate has its own."""
        from cltoolkit.protocol.models import ClusterPlan

        if protocol.randomStreams != "seed" or not any(len(st.orders) > 1 for st in protocol.seeds.stages):
            return None
        shares = (
            "a seed's task orders share its network initialisation and random streams (randomStreams 'seed'), so "
            "they are one unit; the report's n = seeds x orders counts each seed once per order"
        )
        return ClusterPlan(by=["seed"], shares=shares)

    def device_problem(self, device: str) -> str | None:
        """A torch suite: `device` must resolve on this machine (cuda needs a CUDA device torch can see)."""
        from cltoolkit.suites.devices import device_problem

        return device_problem(device)

    def execute(self, protocol: Nav4Protocol, spec: RunSpec, workdir: Path) -> RunOutput:
        from cltoolkit.run.spec import RunOutput
        from cltoolkit.suites.devices import describe_device, resolve_device
        from cltoolkit.suites.nav4.driver import run

        device = resolve_device(spec.device)
        comp = protocol.comparison(spec.comparison)
        method = make_method(comp.method, comp.hyperparameters, self.project_regs())
        out = run(protocol, method, spec.seed, spec.order, workdir, device)
        return RunOutput(
            metrics=out["metrics"], budget=out["budget"], device=describe_device(device), precision="float32"
        )
