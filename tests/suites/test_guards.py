"""The guards hold against methods clt did not write (#51): a NaN fails the run by name, every sample that reaches the
model is counted whoever drew it, the declared budget fields bind, and the step hooks fire in their documented order.
Each method here is a user's method, written on the public interfaces only, and run in process through the suites'
drivers at a tiny budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cltoolkit.errors import BudgetViolation, NonFiniteValue
from cltoolkit.plugin import nav4, wmf
from cltoolkit.registry import registries
from cltoolkit.suites.nav4.methods import Sequential, UniformReplay
from cltoolkit.suites.wmf.methods import Finetuning

ROOT = Path(__file__).resolve().parents[2]

torch = pytest.importorskip("torch")


# -- nav4 ------------------------------------------------------------------------------------------------------------


def _nav4_doc(**budget: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "protocols" / "nav4-v1.json").read_text())
    doc["budget"]["interactionsPerTask"] = 128
    doc["budget"].update(budget)
    for comp in doc["comparisons"]:
        comp["hyperparameters"].update({"envs": 4, "rolloutSteps": 16, "epochs": 1, "minibatches": 2})
    doc["evaluation"].update({"episodesPerTask": 2, "curvePoints": 1, "curveEpisodes": 1})
    doc["seeds"]["splits"] = {
        "train": {"start": 0, "stop": 50},
        "validation": {"start": 1_000_000, "stop": 1_000_010},
        "test": {"start": 2_000_000, "stop": 2_000_020},
    }
    doc["results"] = None
    return doc


def _nav4_run(tmp_path: Path, method: nav4.Nav4Method[Any], **budget: Any) -> dict[str, Any]:
    from cltoolkit.suites.nav4.driver import run
    from cltoolkit.suites.nav4.models import Nav4Protocol

    protocol = Nav4Protocol.model_validate_json(json.dumps(_nav4_doc(**budget)), strict=True)
    workdir = tmp_path / "runs" / "r"
    workdir.mkdir(parents=True, exist_ok=True)
    return run(protocol, method, 0, protocol.seeds.taskOrders[0].id, workdir)


def _params(cls: type[nav4.Nav4Method[Any]], **extra: Any) -> dict[str, Any]:
    doc = _nav4_doc()
    hyper = dict(doc["comparisons"][1 if issubclass(cls, UniformReplay) else 0]["hyperparameters"])
    hyper.update(extra)
    return hyper


def _make(cls: type[nav4.Nav4Method[Any]], **extra: Any) -> nav4.Nav4Method[Any]:
    hyper = _params(cls, **extra)
    assert cls.Params is not None
    return cls(params=cls.Params.model_validate(hyper), hyperparameters=hyper, name="user.method")


class NanInSecondTask(Sequential):
    """A user's penalty whose value turns NaN once the second task starts."""

    def begin_task(self, learner: Any, task: nav4.TaskStart) -> None:
        self.index = task.index

    def extra_loss(self, learner: Any, minibatch: nav4.Minibatch) -> Any:
        if self.index == 1:
            return torch.tensor(float("nan"))
        return None


class PrivateReplay(Sequential):
    """Keeps copies of earlier rollouts in its own buffer and replays them through `extra_loss` (what a user wrote
    instead of asking the suite for a memory)."""

    def __post_init__(self) -> None:
        self.kept: list[dict[str, np.ndarray]] = []

    def observe(self, learner: Any, rollout: nav4.Rollout) -> None:
        self.kept.append({k: np.array(v[:16]) for k, v in rollout.batch.items()})

    def extra_loss(self, learner: Any, minibatch: nav4.Minibatch) -> Any:
        if len(self.kept) < 2:
            return None
        old = {k: torch.from_numpy(v) for k, v in self.kept[0].items()}
        return learner.policy_loss(old)


class Recorder(Sequential):
    """Records the step hooks' order and what they see; zeroes every gradient after backward (so no step moves)."""

    def __post_init__(self) -> None:
        self.calls: list[str] = []
        self.seen: list[tuple[int, bool, set[str]]] = []

    def extra_loss(self, learner: Any, minibatch: nav4.Minibatch) -> Any:
        self.calls.append("extra_loss")
        return 0.0 * learner.policy_loss(minibatch.batch)

    def after_backward(self, learner: Any, step: nav4.Step) -> None:
        self.calls.append("after_backward")
        grads = [p.grad for p in learner.net.parameters()]
        self.seen.append((step.update, all(g is not None for g in grads), set(step.losses)))
        for g in grads:
            g.zero_()

    def after_step(self, learner: Any, step: nav4.Step) -> None:
        self.calls.append("after_step")


class NanGradients(Sequential):
    """Writes NaN into the gradients after backward: the suite's step would make the weights NaN."""

    def after_backward(self, learner: Any, step: nav4.Step) -> None:
        if step.update == 1:
            next(learner.net.parameters()).grad.fill_(float("nan"))


def test_nav4_a_nan_extra_loss_in_the_second_task_fails_as_non_finite_naming_task_and_hook(tmp_path: Path) -> None:
    with pytest.raises(NonFiniteValue, match=r"^non-finite: the method's extra_loss term in task \w+, update 0 "):
        _nav4_run(tmp_path, _make(NanInSecondTask))
    try:
        _nav4_run(tmp_path, _make(NanInSecondTask))
    except NonFiniteValue as exc:
        order = json.loads((ROOT / "protocols" / "nav4-v1.json").read_text())["seeds"]["taskOrders"][0]["tasks"]
        assert exc.task == order[1] and exc.hook == "extra_loss"


def test_nav4_nan_gradients_are_non_finite_not_a_budget_violation(tmp_path: Path) -> None:
    with pytest.raises(
        NonFiniteValue, match=r"a gradient \(norm nan\) in task \w+, update 1 \(after hook after_backward"
    ):
        _nav4_run(tmp_path, _make(NanGradients))


def test_nav4_replay_from_a_private_buffer_is_a_violation_or_charged_as_replay(tmp_path: Path) -> None:
    with pytest.raises(BudgetViolation, match=r"^budget.unaccountedSamples: in phase \w+, update \d+, \d+ sample"):
        _nav4_run(tmp_path, _make(PrivateReplay))
    out = _nav4_run(tmp_path, _make(PrivateReplay), unaccountedSamples="replay")
    samples = out["budget"]["samples"]
    assert samples["other"] > 0 and samples["otherPolicy"] == "replay"
    assert out["budget"]["replaySamples"] == samples["other"]  # charged as replay, nothing uncounted
    assert out["budget"]["replayUpdates"] > 0


def test_nav4_suite_memory_replay_is_memory_not_other(tmp_path: Path) -> None:
    out = _nav4_run(tmp_path, _make(UniformReplay, capacity=500))
    samples = out["budget"]["samples"]
    assert samples["memory"] == out["budget"]["replaySamples"] > 0
    assert samples["other"] == 0 and samples["bookkeeping"] == 0
    assert samples["task"] == out["budget"]["samplesProcessed"] - samples["memory"]


def test_nav4_declared_memory_capacity_and_update_budget_bind(tmp_path: Path) -> None:
    with pytest.raises(BudgetViolation, match=r"^budget.memoryCapacity: .* 500 transitions; .* at most 100"):
        _nav4_run(tmp_path, _make(UniformReplay, capacity=500), memoryCapacity=100)
    # 128 interactions per task in rollouts of 4 x 16 = 2 rollouts x 1 epoch x 2 minibatches = 4 steps per phase
    with pytest.raises(BudgetViolation, match=r"^budget.gradientUpdatesPerTask: phase \w+ takes 4 optimiser steps"):
        _nav4_run(tmp_path, _make(Sequential), gradientUpdatesPerTask=3)
    assert _nav4_run(tmp_path, _make(Sequential), gradientUpdatesPerTask=4)["budget"]["gradientUpdates"] == 16


def test_nav4_step_hooks_fire_in_the_documented_order_and_can_change_gradients(tmp_path: Path) -> None:
    method = _make(Recorder)
    assert isinstance(method, Recorder)
    out = _nav4_run(tmp_path, method)
    assert method.calls == ["extra_loss", "after_backward", "after_step"] * 16
    assert [s[0] for s in method.seen] == [0, 1, 2, 3] * 4  # the phase's step count, from 0, in each of 4 phases
    assert all(has_grads and losses == {"suite", "extra"} for _, has_grads, losses in method.seen)
    assert out["budget"]["gradientUpdates"] == 16


def test_nav4_gradients_changed_after_backward_are_what_the_step_applies() -> None:
    from cltoolkit.suites.nav4.agent import AgentLedger, Learner

    method = _make(Recorder)
    assert isinstance(method, Recorder)
    learner = Learner(method.params, 15, 0, AgentLedger(), method)
    before = {k: v.clone() for k, v in learner.net.state_dict().items()}
    n = 8
    batch: dict[str, np.ndarray] = {
        "obs": np.random.default_rng(0).integers(0, 3, (n, 12, 15, 15)).astype(np.uint8),
        "actions": np.zeros(n, dtype=np.int64),
        "logp": np.full(n, -1.6, dtype=np.float32),
        "adv": np.linspace(-1, 1, n).astype(np.float32),
        "ret": np.ones(n, dtype=np.float32),
        "value": np.zeros(n, dtype=np.float32),
        "logits": np.zeros((n, 5), dtype=np.float32),
    }
    learner._update(batch)
    assert method.calls[:3] == ["extra_loss", "after_backward", "after_step"]
    # every gradient zeroed after backward: Adam's steps moved nothing (the suite stepped on what the hook left)
    assert all(torch.equal(before[k], v) for k, v in learner.net.state_dict().items())


def test_nav4_diagnostics_reach_the_record(tmp_path: Path) -> None:
    class WithDiagnostics(Sequential):
        def diagnostics(self) -> dict[str, float | None]:
            return {"penaltyScale": 2.5}

    out = _nav4_run(tmp_path, _make(WithDiagnostics))
    assert out["metrics"]["methodDiagnostics"] == {"penaltyScale": 2.5}


# -- wmf -------------------------------------------------------------------------------------------------------------


def _wmf_protocol(**changes: Any) -> Any:
    from cltoolkit.suites.wmf.models import WmfProtocol

    data = json.loads((ROOT / "protocols" / "wmf-lite-v1.json").read_text())
    data["data"].update(trainEpisodes=1, heldOutEpisodes=1, maxEpisodeSteps=30)
    data["model"].update(hidden=16, channels=[4, 8, 8, 16])
    data["training"].update(updatesPerTask=6, curvePoints=3)
    data["evaluation"].update(transitions=20, fisherTransitions=5, reconstructionFrames=10, rdStarts=5, rdHorizon=3)
    for section, values in changes.items():
        data[section].update(values)
    data["results"] = None
    data["status"]["stage"] = "draft"
    return WmfProtocol.model_validate_json(json.dumps(data), strict=True)


def _wmf_run(tmp_path: Path, method: wmf.WorldModelMethod[Any], **changes: Any) -> dict[str, Any]:
    from cltoolkit.suites.wmf.driver import run_cell

    return run_cell(_wmf_protocol(**changes), "minigrid-min", method, 0, tmp_path / "store")


class WmfNanB(Finetuning):
    """A user's term that is NaN in task B (the case that read as perfect retention)."""

    def extra_loss(self, model: Any, batch: wmf.Minibatch) -> Any:
        return torch.tensor(float("nan")) if batch.task == "B" else None


class WmfPrivateReplay(Finetuning):
    """Keeps task-A windows it saw and replays them through `extra_loss` in task B."""

    def __post_init__(self) -> None:
        self.kept: Any = None

    def end_task(self, model: Any, task: wmf.TaskEnd) -> None:
        pass

    def extra_loss(self, model: Any, batch: wmf.Minibatch) -> Any:
        if batch.task == "A" or self.kept is None:
            self.kept = batch.obs[:1].clone() if self.kept is None else self.kept
            return None
        eps = torch.zeros(1, self.kept.shape[1], model.latent)
        return model.loss(self.kept, batch.actions[:1], eps)[0]


class WmfSteps(Finetuning):
    def __post_init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def after_backward(self, model: Any, step: wmf.Step) -> None:
        self.calls.append(("after_backward", step.update))
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad)

    def after_step(self, model: Any, step: wmf.Step) -> None:
        self.calls.append(("after_step", step.update))


def _wmf(cls: type[wmf.WorldModelMethod[Any]]) -> wmf.WorldModelMethod[Any]:
    return cls(params=None, hyperparameters={}, name="user.method")


def test_wmf_a_nan_term_fails_the_run_as_non_finite_never_perfect_retention(tmp_path: Path) -> None:
    match = r"^non-finite: the method's extra_loss term in task B, update 0 \(after hook extra_loss\)"
    with pytest.raises(NonFiniteValue, match=match):
        _wmf_run(tmp_path, _wmf(WmfNanB))


def test_wmf_a_declared_skip_policy_counts_skipped_updates_up_to_its_cap(tmp_path: Path) -> None:
    with pytest.raises(NonFiniteValue, match=r"more than the 2 skipped steps allowed"):
        _wmf_run(tmp_path, _wmf(WmfNanB), training={"nonFinite": "skip", "maxSkippedSteps": 2})
    out = _wmf_run(tmp_path, _wmf(WmfNanB), training={"nonFinite": "skip", "maxSkippedSteps": 6})
    assert out["metrics"]["nanStepsB"] == 6 and out["metrics"]["nanStepsA"] == 0


def test_wmf_replay_from_a_private_buffer_is_a_violation_or_charged_as_replay(tmp_path: Path) -> None:
    with pytest.raises(BudgetViolation, match=r"^budget.unaccountedSamples: in task B, update \d+, \d+ frame"):
        _wmf_run(tmp_path, _wmf(WmfPrivateReplay))


def test_wmf_private_replay_under_the_replay_policy_is_charged(tmp_path: Path) -> None:
    out = _wmf_run(tmp_path, _wmf(WmfPrivateReplay), budget={"unaccountedSamples": "replay"})
    samples = out["budget"]["samples"]
    assert samples["other"] > 0 and out["budget"]["replaySamples"] > 0


def test_wmf_step_hooks_and_the_update_budget(tmp_path: Path) -> None:
    method = _wmf(WmfSteps)
    assert isinstance(method, WmfSteps)
    out = _wmf_run(tmp_path, method)
    assert method.calls == [(hook, k) for k in range(6) for hook in ("after_backward", "after_step")]
    cfg = _wmf_protocol().training
    assert out["budget"]["samples"] == {
        "task": 6 * cfg.batch * cfg.sequenceLength, "memory": 0, "other": 0, "bookkeeping": 0,
        "otherPolicy": "violation",
    }  # fmt: skip
    with pytest.raises(BudgetViolation, match=r"^budget.gradientUpdatesPerTask: each task phase takes 6 updates"):
        _wmf_run(tmp_path, _wmf(Finetuning), budget={"gradientUpdatesPerTask": 5})


def test_wmf_declared_memory_capacity_binds_replay(tmp_path: Path) -> None:
    from cltoolkit.suites.wmf.methods import ReplayInfinite, ReplayParams

    method = ReplayInfinite(params=ReplayParams(taskAShare=0.5), hyperparameters={"taskAShare": 0.5}, name="r")
    with pytest.raises(BudgetViolation, match=r"^budget.memoryCapacity: task B's sampling\(\) replays \d+ transitions"):
        _wmf_run(tmp_path, method, budget={"memoryCapacity": 3})


def test_nav4_network_field_binds_the_default_network(project, cli) -> None:
    from tests.conftest import read, write

    path = project.protocol_path("nav4-v1")
    doc = read(path)
    doc["comparisons"][0]["hyperparameters"]["network"] = "resnet-50"
    write(path, doc)
    out = cli("protocol", "validate", "nav4-v1")
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "/comparisons/0/hyperparameters/network: 'resnet-50' names no network" in out.output


# -- checkpoints at task boundaries (nav4): an interrupted run resumes and gives the same record --------------------


class Interrupted(RuntimeError):
    pass


def _interrupting(base: type[nav4.Nav4Method[Any]], marker: Path) -> type[nav4.Nav4Method[Any]]:
    class Once(base):  # type: ignore[valid-type,misc]
        def end_task(self, learner: Any, task: nav4.TaskEnd) -> None:
            super().end_task(learner, task)
            if task.index == 2 and not marker.exists():  # the machine stops during the third phase's end
                marker.write_text("")
                raise Interrupted("stopped")

    return Once


OWN_FIELDS: dict[str, dict[str, Any]] = {
    "nav4.si": {"strength": 0.1},
    "nav4.packnet": {"retrainUpdates": 2},
    "nav4.replay-cloning": {  # the phase-end copy travels in the checkpoint
        "capacity": 500,
        "replayFraction": 0.25,
        "behaviourCloningCoef": 1.0,
        "cloneFrom": "completed-phases",
        "cloneTargets": "phase-end-copy",
    },
}


@pytest.mark.parametrize(
    "name", ["nav4.sequential", "nav4.si", "nav4.specialist", "nav4.packnet", "nav4.replay-cloning"]
)
def test_nav4_an_interrupted_run_resumes_from_its_last_task_boundary_with_the_same_record(
    tmp_path: Path, name: str
) -> None:
    """nav4.packnet: the suite's owners travel in the checkpoint (the third phase's evaluations need them)."""
    from cltoolkit.suites.nav4.suite import make_method

    agent = dict(_nav4_doc()["comparisons"][0]["hyperparameters"])
    hyper = {**agent, **OWN_FIELDS.get(name, {})}
    whole = _nav4_run(tmp_path / "whole", make_method(name, hyper, registries()))
    base = type(make_method(name, hyper, registries()))
    cls = _interrupting(base, tmp_path / "stopped")
    assert cls.Params is not None
    params = cls.Params.model_validate(hyper)
    with pytest.raises(Interrupted):
        _nav4_run(tmp_path / "cut", cls(params=params, hyperparameters=hyper, name=name))
    assert (tmp_path / "cut" / "runs" / "r" / "checkpoint.pt").exists()
    resumed = _nav4_run(tmp_path / "cut", cls(params=params, hyperparameters=hyper, name=name))
    assert not (tmp_path / "cut" / "runs" / "r" / "checkpoint.pt").exists()  # removed once the run is done
    for out in (whole, resumed):
        out["metrics"].pop("trainingSeconds")
    assert resumed["metrics"] == whole["metrics"]
    assert resumed["budget"] == whole["budget"]


def test_nav4_a_checkpoint_of_another_run_or_without_its_mac_is_never_resumed(tmp_path: Path) -> None:
    from cltoolkit.suites import checkpoint

    checkpoint.save(tmp_path, "run-a", {"matrix": [[1.0]], "weights": np.arange(3)})
    state = checkpoint.load(tmp_path, "run-a")
    assert state is not None and state["matrix"] == [[1.0]] and list(state["weights"]) == [0, 1, 2]
    assert checkpoint.load(tmp_path, "run-b") is None  # another run's
    (tmp_path / "checkpoint.mac").write_text("hmac-sha256:" + "0" * 64)
    assert checkpoint.load(tmp_path, "run-a") is None  # planted or copied: no MAC of this machine's


def test_nav4_task_balanced_memory_keeps_an_equal_share_per_task() -> None:
    from cltoolkit.suites.nav4.agent import AgentLedger, Reservoir
    from cltoolkit.suites.nav4.api import _suite_rollout

    memory = Reservoir(30, (2, 3, 3), np.random.default_rng(0), AgentLedger(), selection="task-balanced")

    def rollout(task: int, n: int) -> nav4.Rollout:
        batch: dict[str, np.ndarray] = {
            "obs": np.full((n, 2, 3, 3), task, np.uint8),
            "actions": np.arange(n, dtype=np.int64),
            **{k: np.zeros(n, np.float32) for k in ("logp", "adv", "ret", "value")},
            "logits": np.zeros((n, 5), np.float32),
        }
        return _suite_rollout(batch, np.full(n, task, np.int8))

    memory.add(rollout(0, 100))
    assert len(memory) == 30 and memory.contents() == {"0": 30}
    memory.add(rollout(1, 7))  # fewer than its share: all kept, task 0 shrunk to its share
    assert memory.contents() == {"0": 15, "1": 7}
    memory.add(rollout(2, 100))
    assert memory.contents() == {"0": 10, "1": 7, "2": 10}
    held = memory.task[: len(memory)]
    assert all((memory.obs[: len(memory)][held == t] == t).all() for t in (0, 1, 2))  # slots stay consistent
    assert len(set(memory.actions[: len(memory)][held == 0].tolist())) == 10  # a sample of task 0, no duplicates
    plain = Reservoir(30, (2, 3, 3), np.random.default_rng(0), AgentLedger())
    plain.add(rollout(0, 100))
    plain.add(rollout(2, 100))
    assert len(plain) == 30 and sum(plain.contents().values()) == 30  # the reservoir ignores tasks


# -- diagnostics() in every suite --------------------------------------------------------------------------------

DIAG_METHODS = '''
from cltoolkit.suites.ladder.methods import Linear
from cltoolkit.suites.sessions.methods import Affine


class LinearWithDiagnostics(Linear):
    """ladder.linear, reporting its model's coefficient a and the lifecycle it saw."""

    summary = "linear, with a diagnostic"

    def __post_init__(self):
        self.calls = []

    def begin_task(self, task):
        self.calls.append(("begin", task.task, task.rungs))

    def end_task(self, task):
        self.calls.append(("end", task.task, task.last))
        self.model = task.model

    def diagnostics(self):
        assert self.calls == [
            ("begin", "true", ("oneStep", "rollout", "intervention", "control", "transfer")),
            ("end", "true", True),
        ], self.calls
        return {"coefficientA": self.model.coefficients["a"]}


class AffineWithDiagnostics(Affine):
    """sessions.affine, reporting that it was fitted, between its begin_task and end_task."""

    summary = "affine, with a diagnostic"

    def begin_task(self, task):
        assert not hasattr(self, "coef") and task.trainingRows > 0
        self.split = task.task

    def end_task(self, task):
        assert hasattr(self, "coef") and task.task == self.split and task.last
        self.ended = True

    def diagnostics(self):
        return {"fitted": float(self.ended)}
'''


@pytest.mark.parametrize(("protocol", "base", "name"), [("ladder-v1", "ladder.linear", "me.linear"),
                                                        ("sessions-v1", "sessions.affine", "me.affine")])  # fmt: skip
def test_ladder_and_sessions_methods_report_diagnostics(project, cli, protocol: str, base: str, name: str) -> None:
    from cltoolkit.registry import reset_registries
    from tests.conftest import read, write

    (project.root / "diagmethods.py").write_text(DIAG_METHODS)
    target = "diagmethods:LinearWithDiagnostics" if protocol == "ladder-v1" else "diagmethods:AffineWithDiagnostics"
    write(project.components_file, {"method": {name: target}})
    reset_registries()
    doc = read(project.protocol_path(protocol))
    comp = next(c for c in doc["comparisons"] if c["method"] == base)
    comp["method"] = name
    write(project.protocol_path(protocol), doc)
    out = cli("run", "-p", protocol, "--pilot", "--methods", comp["id"], "--seeds", "0")
    assert out.exit_code == 0, out.output
    records = list(project.pilot_runs_dir.rglob("record.json"))
    assert records
    diag = json.loads(records[0].read_text())["metrics"]["methodDiagnostics"]
    assert set(diag) == ({"coefficientA"} if protocol == "ladder-v1" else {"grouped.fitted", "random.fitted"})
