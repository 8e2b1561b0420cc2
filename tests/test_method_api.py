"""The public method interfaces of nav4 and wmf: a user's method runs as the shipped ones do (the README's two
walk-throughs, verbatim, in `clt init` projects outside this repository), and what a method must not do is refused
before compute (validation) or in the run's record (budget violations, data it is not given)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_tutorial import wheel_env  # noqa: F401 - the fixture: a wheel of this checkout, installed
from tests.conftest import REPO

pytest.importorskip("torch")
pytest.importorskip("minigrid")


def _block(heading: str) -> str:
    section = (REPO / "docs" / "methods.md").read_text().split(f"## {heading}\n", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, f"docs/methods.md section {heading!r} has no command block"
    return found.group(1)


@pytest.mark.walkthrough
@pytest.mark.parametrize("heading", ["Your own nav4 method", "Your own world-model method"])
def test_a_users_method_runs_from_init_to_report_as_the_readme_says(
    heading: str,
    wheel_env: dict[str, str],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """Against a normal install of a wheel built from this checkout (the tutorial's environment), in an empty
    folder outside the repository, with no CLT_ROOT."""
    (tmp_path / "walkthrough.sh").write_text(_block(heading))
    done = subprocess.run(
        ["bash", "-e", "walkthrough.sh"], cwd=tmp_path, env=wheel_env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    project = next(p for p in tmp_path.iterdir() if p.is_dir())
    protocol_id = next(p.stem for p in (project / "protocols").glob("*.json"))
    doc = json.loads((project / "protocols" / f"{protocol_id}.json").read_text())
    assert doc["status"]["stage"] == "reported"
    user_runs = [
        json.loads(p.read_text())
        for p in (project / "runs" / protocol_id).glob("*/record.json")
        if json.loads(p.read_text())["spec"]["method"].startswith("mine.")
    ]
    assert len(user_runs) == 2
    assert all(r["status"]["state"] == "completed" for r in user_runs)


def _project(tmp_path: Path, source: str, components: dict[str, Any], suite: str) -> Path:
    """A `clt init` project with `source` as its module (named after the test: modules are cached per process)."""
    from typer.testing import CliRunner

    from cltoolkit.cli import app

    runner = CliRunner()
    project = tmp_path / "p"
    assert runner.invoke(app, ["init", str(project)]).exit_code == 0
    module = f"mine_{tmp_path.name.replace('-', '_')}"
    (project / f"{module}.py").write_text(source)
    entries = {name: target.replace("mymethods:", f"{module}:") for name, target in components.items()}
    (project / "registry" / "components.json").write_text(json.dumps({"method": entries}))
    done = runner.invoke(app, ["--root", str(project), "protocol", "new", "--suite", suite, "mine-v1"])
    assert done.exit_code == 0, done.output
    return project


def _validate(project: Path, method: str, hyperparameters: dict[str, Any]) -> tuple[int, str]:
    from typer.testing import CliRunner

    from cltoolkit.cli import app

    path = project / "protocols" / "mine-v1.json"
    doc = json.loads(path.read_text())
    doc["comparisons"][0].update(method=method, hyperparameters=hyperparameters)
    path.write_text(json.dumps(doc, indent=2))
    done = CliRunner().invoke(app, ["--root", str(project), "protocol", "validate", "mine-v1"])
    return done.exit_code, done.output


PLAIN_METHOD = '''
from cltoolkit.registry import registries
from cltoolkit.plugin import Method, Params


class Nothing(Params):
    pass


class NotAnInterface(Method):
    """Registered for wmf, but not a WorldModelMethod: its driver could not call it."""

    suite = "wmf"
    summary = "no hooks"


class Peeks(NotAnInterface):
    summary = "asks for test data"
'''


def test_a_method_the_suite_cannot_run_is_refused_at_validation_in_one_line(tmp_path: Path) -> None:
    source = (
        PLAIN_METHOD
        + '''
from cltoolkit.plugin import WorldModelMethod


class WantsTest(WorldModelMethod):
    """Asks for the held-out test data."""

    summary = "asks for test data"
    data_access = frozenset({"training", "test"})


class MasksTheSharedModel(WorldModelMethod):
    """A masking method on the suite's shared task-A model: its ownership() would never be called."""

    summary = "masks without its own task-A phase"

    def ownership(self, model, task):
        return None
'''
    )
    components = {
        "mine.plain": "mymethods:NotAnInterface",
        "mine.test": "mymethods:WantsTest",
        "mine.masks": "mymethods:MasksTheSharedModel",
    }
    project = _project(tmp_path, source, components, "wmf")
    code, out = _validate(project, "mine.plain", {})
    problems = [line for line in out.splitlines() if "/comparisons/0/method" in line]
    assert code != 0 and len(problems) == 1, out
    assert "does not implement the wmf method interface: subclass cltoolkit.plugin.WorldModelMethod" in problems[0]
    code, out = _validate(project, "mine.test", {})
    assert code != 0 and "asks for test data (data_access); the wmf suite gives methods" in out, out
    assert "Traceback" not in out
    code, out = _validate(project, "mine.masks", {})
    assert code != 0 and "overrides ownership() with own_task_a_model False" in out and "Traceback" not in out, out


def test_a_nav4_method_without_the_learners_fields_is_refused_at_validation(tmp_path: Path) -> None:
    source = '''
from cltoolkit.plugin import Nav4Method, Params


class Bare(Params):
    pass


class NoAgent(Nav4Method):
    """Its Params lack the PPO learner's fields."""

    Params = Bare
    summary = "no agent fields"
'''
    project = _project(tmp_path, source, {"mine.noagent": "mymethods:NoAgent"}, "nav4")
    code, out = _validate(project, "mine.noagent", {})
    assert code != 0 and "its Params must subclass cltoolkit.plugin.Nav4AgentParams" in out, out


def _nav4_learner(method: Any) -> tuple[Any, Any]:
    import numpy as np

    from cltoolkit.suites.nav4.agent import AgentLedger, Learner, VecTasks

    learner = Learner(method.params, 15, 0, AgentLedger(), method)
    vec = VecTasks(["goal"], method.params.envs, list(range(50)), np.random.default_rng(0), 9, 100, 4)
    return learner, vec


def _nav4_method(cls: type, **extra: Any) -> Any:
    from cltoolkit.suites.nav4.methods import AgentParams

    doc = json.loads((REPO / "protocols" / "nav4-v1.json").read_text())
    hyper = {**doc["comparisons"][0]["hyperparameters"], "envs": 2, "rolloutSteps": 8, "epochs": 1, "minibatches": 2}
    return cls(params=AgentParams.model_validate(hyper, strict=False), hyperparameters=hyper, name="mine", **extra)


def test_a_nav4_method_that_updates_the_network_itself_is_a_budget_violation() -> None:
    import torch

    from cltoolkit.errors import BudgetViolation
    from cltoolkit.suites.nav4.api import Nav4Method

    class SneakyUpdate(Nav4Method[Any]):
        """Takes its own optimiser steps on every rollout: compute the suite never counted."""

        def observe(self, learner: Any, rollout: Any) -> None:
            with torch.no_grad():
                for p in learner.net.parameters():
                    p.add_(0.01)

    learner, vec = _nav4_learner(_nav4_method(SneakyUpdate))
    with pytest.raises(BudgetViolation, match="observe changed the network's weights outside the suite's updates"):
        learner.train(vec, 16, lambda _k: 0)


def test_a_nav4_memory_takes_suite_rollouts_only_and_counts_what_is_drawn() -> None:
    import numpy as np

    from cltoolkit.errors import DataAccessViolation
    from cltoolkit.suites.nav4.api import Nav4Method, Rollout

    class Keeps(Nav4Method[Any]):
        def begin_task(self, learner: Any, task: Any) -> None:
            self.memory = learner.new_memory(100)

        def observe(self, learner: Any, rollout: Any) -> None:
            self.memory.add(rollout)

    method = _nav4_method(Keeps)
    learner, vec = _nav4_learner(method)
    from cltoolkit.suites.nav4.api import TaskStart

    method.begin_task(learner, TaskStart("goal", 0, ("goal",), 16))
    learner.train(vec, 16, lambda _k: 0)
    assert len(method.memory) == 16
    assert learner.ledger.replaySamples == 0
    method.memory.sample(5)
    assert learner.ledger.replaySamples == 5  # counted by the suite's memory, not reported by the method
    with pytest.raises(TypeError, match="made by the suite only"):
        Rollout({"obs": np.zeros((1, 1))}, np.zeros(1))
    with pytest.raises(DataAccessViolation, match="takes training rollouts the suite handed to observe"):
        method.memory.add({"obs": np.zeros((1, 1))})


def test_a_wmf_method_cannot_sample_data_it_was_not_given_nor_update_outside_the_loop(tmp_path: Path) -> None:
    import torch

    from cltoolkit.errors import BudgetViolation
    from cltoolkit.suites.wmf.api import Sampling, TrainingSet, WorldModelMethod
    from cltoolkit.suites.wmf.driver import run_cell
    from tests.suites.test_wmf import _tiny

    protocol = _tiny(tmp_path)

    class HeldOut(WorldModelMethod[None]):
        """Tries to train on episodes it built itself (e.g. held-out ones): refused."""

        def sampling(self, task: Any) -> Any:
            return Sampling([(object(), task.batch)])  # type: ignore[list-item]

    with pytest.raises(TypeError, match="a sampling source must be a TrainingSet the suite handed to the method"):
        run_cell(protocol, "minigrid-min", HeldOut(params=None, name="mine.heldout"), 0, tmp_path / "s")
    with pytest.raises(TypeError, match="made by the suite only"):
        TrainingSet(None, "A")  # type: ignore[arg-type]

    class ExtraUpdates(WorldModelMethod[None]):
        """Fine-tunes on its own at the end of task A: updates the suite did not count."""

        def end_task(self, model: Any, task: Any) -> None:
            with torch.no_grad():
                next(model.parameters()).add_(1.0)

    with pytest.raises(BudgetViolation, match="end_task changed parameter values outside the suite's updates"):
        run_cell(protocol, "minigrid-min", ExtraUpdates(params=None, name="mine.extra"), 0, tmp_path / "s")


def test_a_nav4_run_stopped_between_tasks_and_restored_continues_as_if_never_stopped() -> None:
    """Learner and method state saved after the first task, restored into fresh objects: the second task ends with
    the same weights, memory and ledger as the uninterrupted run."""
    import numpy as np

    from cltoolkit.registry import registries
    from cltoolkit.suites.nav4.agent import AgentLedger, Learner, VecTasks, state_checksum
    from cltoolkit.suites.nav4.api import TaskEnd, TaskStart
    from cltoolkit.suites.nav4.suite import make_method

    doc = json.loads((REPO / "protocols" / "nav4-v1.json").read_text())
    comp = next(c for c in doc["comparisons"] if c["method"] == "nav4.replay-cloning")
    hyper = {**comp["hyperparameters"], "envs": 2, "rolloutSteps": 16, "epochs": 1, "minibatches": 2, "capacity": 40}

    def phase(learner: Learner, method: Any, i: int, task: str) -> None:
        vec = VecTasks([task], 2, list(range(50)), np.random.default_rng(i), 9, 100, 4)
        method.begin_task(learner, TaskStart(task, i, (task,), 64))
        learner.train(vec, 64, lambda _k: i)
        method.end_task(learner, TaskEnd(task, i, i == 1))

    def fresh() -> tuple[Learner, Any]:
        method = make_method("nav4.replay-cloning", hyper, registries())
        return Learner(method.params, 15, 3, AgentLedger(), method), method

    straight, m1 = fresh()
    phase(straight, m1, 0, "goal")
    phase(straight, m1, 1, "key")

    first, m2 = fresh()
    phase(first, m2, 0, "goal")
    saved, saved_method, ledger = first.state_dict(), m2.state_dict(), first.ledger
    resumed, m3 = fresh()
    resumed.ledger = ledger
    resumed.load_state_dict(saved)
    m3.load_state_dict(saved_method)
    phase(resumed, m3, 1, "key")
    assert state_checksum(resumed.net, resumed.memory) == state_checksum(straight.net, straight.memory)
    assert resumed.ledger == straight.ledger
    assert straight.ledger.replaySamples > 0
