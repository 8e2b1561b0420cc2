"""nav4: environments (solvable, non-trivial, fingerprinted, egocentric and fully observed), evaluation that
cannot change the agent, the duplicate-layout freeze check, and a smoke test of the whole path."""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np
import pytest

pytest.importorskip("minigrid")
pytest.importorskip("torch")

import gymnasium as gym

from cltoolkit.registry import registries
from cltoolkit.suites.nav4.api import Nav4TaskStart
from cltoolkit.suites.nav4.env import ACTIONS, CHANNELS, TASKS, Nav4Env, fingerprint, grid_planes, solution
from cltoolkit.suites.nav4.methods import UniformReplay
from cltoolkit.suites.nav4.models import Nav4Protocol
from tests.conftest import REPO, read, write


@pytest.mark.parametrize("task", TASKS)
def test_layouts_are_solvable_and_the_planner_matches_minigrid(task: str) -> None:
    env = Nav4Env(task)
    for seed in range(25):
        env.reset(seed=seed)
        plan = solution(env.grid, tuple(env.agent_pos), env.agent_dir)
        assert plan is not None
        assert len(plan) == env.solution_length >= env.min_path
        for action in plan:  # the breadth-first plan, replayed in MiniGrid itself, reaches the goal
            _, reward, terminated, _, info = env.step(action)
        assert terminated
        assert info["success"]
        assert reward > 0


def test_layout_is_a_function_of_task_and_seed() -> None:
    a, b = Nav4Env("combined"), Nav4Env("combined")
    a.reset(seed=123)
    b.reset(seed=123)
    assert a.fingerprint == b.fingerprint
    b.reset(seed=124)
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == fingerprint("combined", a.grid.encode(), a.agent_pos, a.agent_dir)
    assert Nav4Env("goal").reset(seed=5)[1]["layoutSeed"] == 5


def test_observation_is_egocentric_full_grid_with_task_cue() -> None:
    env = Nav4Env("key")
    obs, _ = env.reset(seed=3)
    assert obs.shape == (len(CHANNELS), 15, 15)
    assert obs.dtype == np.uint8
    assert obs[CHANNELS.index("task-key")].all()
    assert not obs[CHANNELS.index("task-goal")].any()
    for _ in range(12):  # whatever the heading, the cell ahead of the agent is the one above the centre
        front = env.grid.get(*env.front_pos)
        ahead = {c: obs[i, 6, 7] for i, c in enumerate(CHANNELS[:7])}
        expected = "wall" if front is not None and front.type == "wall" else None
        if expected:
            assert ahead["wall"] == 1
        elif front is None:
            assert not any(ahead.values())
        obs, *_ = env.step(int(np.random.default_rng(_).integers(2)))  # turn
    assert obs[CHANNELS.index("key")].sum() == 1
    assert obs[CHANNELS.index("goal")].sum() == 1


@pytest.mark.parametrize("env_id", [*(f"clt/Nav4-{t}-v0" for t in TASKS), "MiniGrid-DoorKey-8x8-v0"])
def test_grid_planes_equal_minigrid_encoding(env_id: str) -> None:
    """The observation reads the grid without MiniGrid's encode: same object types and door states, cell by cell,
    through random episodes (keys picked up, doors opened, lava entered)."""
    import minigrid  # noqa: F401 - registers MiniGrid's environments
    from minigrid.minigrid_env import MiniGridEnv

    env = cast(MiniGridEnv, gym.make(env_id).unwrapped)
    actions = int(cast(gym.spaces.Discrete, env.action_space).n)
    rng = np.random.default_rng(0)
    for episode in range(15):
        env.reset(seed=episode)
        for _ in range(40):
            enc = env.grid.encode()
            types, states = grid_planes(env.grid)
            assert np.array_equal(types, enc[:, :, 0].T)
            assert np.array_equal(states, enc[:, :, 2].T)
            _, _, terminated, truncated, _ = env.step(int(rng.integers(actions)))
            if terminated or truncated:
                break


def test_registered_with_gymnasium() -> None:
    env = gym.make("clt/Nav4-hazards-v0")
    _, info = env.reset(seed=0)
    assert info["task"] == "hazards"
    assert env.action_space == gym.spaces.Discrete(len(ACTIONS))
    env.close()


def test_evaluation_cannot_change_the_agent() -> None:
    from cltoolkit.suites.nav4.agent import AgentLedger, Learner, evaluate, state_checksum
    from cltoolkit.suites.nav4.api import TaskStart
    from cltoolkit.suites.nav4.suite import make_method

    doc = read(REPO / "protocols" / "nav4-v1.json")
    method = make_method("nav4.replay-cloning", doc["comparisons"][2]["hyperparameters"], registries())
    agent = Learner(method.params, 15, 0, AgentLedger(), method)
    method.begin_task(agent, TaskStart("goal", 0, ("goal",), 0))
    assert agent.memory is not None
    before = state_checksum(agent.net, agent.memory)
    ledger = AgentLedger()
    evaluate(agent, "goal", [2_000_000, 2_000_001], False, ledger, size=9, max_steps=100, min_path=4)
    assert state_checksum(agent.net, agent.memory) == before
    assert ledger.environmentSteps == 0
    assert ledger.evaluationSteps > 0
    with np.errstate(all="ignore"):
        next(agent.net.parameters()).data.add_(1.0)  # the checksum sees a parameter change
    assert state_checksum(agent.net, agent.memory) != before


def _tiny(doc: dict, budget: int = 256) -> dict:  # type: ignore[type-arg]
    doc["budget"]["interactionsPerTask"] = budget
    for comp in doc["comparisons"]:
        comp["hyperparameters"].update({"envs": 4, "rolloutSteps": 32, "epochs": 1, "minibatches": 2})
        if "capacity" in comp["hyperparameters"]:
            comp["hyperparameters"]["capacity"] = 500
    doc["evaluation"].update({"episodesPerTask": 4, "curvePoints": 1, "curveEpisodes": 2})
    doc["seeds"]["splits"] = {
        "train": {"start": 0, "stop": 50},
        "validation": {"start": 1_000_000, "stop": 1_000_010},
        "test": {"start": 2_000_000, "stop": 2_000_020},
    }
    return doc


def _goal_only(project, train_stop: int) -> None:
    path = project.protocol_path("nav4-v1")
    doc = _tiny(read(path))
    doc["environment"]["tasks"] = [t for t in doc["environment"]["tasks"] if t["id"] == "goal"]
    doc["seeds"]["taskOrders"] = [{"id": "o1", "tasks": ["goal"]}]
    for stage in doc["seeds"]["stages"]:
        stage["orders"] = ["o1"]
    doc["seeds"]["splits"]["train"] = {"start": 0, "stop": train_stop}  # goal layouts repeat across seeds
    doc["seeds"]["splits"]["test"] = {"start": 2_000_000, "stop": 2_000_400}
    doc["evaluation"]["episodesPerTask"] = 100
    write(path, doc)


def test_held_out_layouts_skip_layouts_seen_in_training(project, cli) -> None:
    _goal_only(project, 3000)
    assert cli("protocol", "freeze", "nav4-v1").exit_code == 0
    manifest = json.loads((project.root / "registry" / "locks" / "nav4-v1.splits.json").read_text())
    goal = manifest["tasks"]["goal"]
    assert goal["testInTrain"] == []
    assert goal["testInValidation"] == []
    assert goal["validationInTrain"] == []
    assert goal["test"]["skippedAsSeen"] > 0
    assert len(set(goal["test"]["fingerprints"])) == 100


def test_freeze_refuses_test_layouts_seen_in_training(project, cli, monkeypatch) -> None:
    from cltoolkit.suites.nav4 import layouts

    _goal_only(project, 50)
    real = layouts.held_out_layouts

    def leaky(protocol, task, *args):
        held = real(protocol, task, *args)
        return {**held, "test": [0, *held["test"][1:]]}  # seed 0 is a training layout

    monkeypatch.setattr(layouts, "held_out_layouts", leaky)
    out = cli("protocol", "freeze", "nav4-v1")
    assert out.exit_code == 1
    assert "goal: final-test layouts of seeds [0] duplicate training layouts" in out.output
    assert not project.lock_path("nav4-v1").exists()


@pytest.mark.walkthrough
def test_smoke_pilot_freeze_run_report(project, cli) -> None:
    path = project.protocol_path("nav4-v1")
    doc = _tiny(read(path))
    doc["seeds"]["stages"][0]["seeds"] = [0, 1]
    doc["schemaVersion"] = 2  # a new freeze of gates pooled over task orders declares its unit of analysis
    doc["analysis"]["clusters"] = {"by": ["seed"], "shares": "a seed's task orders share its streams"}
    write(path, doc)
    out = cli("run", "-p", "nav4-v1", "--pilot", "--methods", "sequential", "--seeds", "0")
    assert out.exit_code == 0 and "PILOT nav4-v1" in out.output, out.output
    assert cli("protocol", "freeze", "nav4-v1").exit_code == 0
    manifest = json.loads((project.root / "registry" / "locks" / "nav4-v1.splits.json").read_text())
    assert manifest["tasks"]["key"]["testInTrain"] == []
    assert len(manifest["tasks"]["key"]["test"]["fingerprints"]) == 4
    out = cli("run", "-p", "nav4-v1", "--workers", "2")
    assert out.exit_code == 0, out.output
    res = json.loads(cli("report", "-p", "nav4-v1", "--json").output)
    assert res["runs"]["completed"] == res["runs"]["planned"] == 10
    checks = {c["quantity"]: c["ok"] for c in res["budgetChecks"]}
    assert checks == {"environmentSteps": True, "totalUpdates": True}  # replay updates counted, totals matched
    per = res["resourceCosts"]["analytical"]["perComparison"]
    steps = {c: row["gradientUpdates"] + row["replayUpdates"] for c, row in per.items()}
    per_step = {c: row["samplesProcessed"] / steps[c] for c, row in per.items() if steps[c]}
    assert per_step["replay"] > per_step["sequential"] > 0  # replay processes more samples per optimiser step
    gates = {g["id"]: g for g in res["gates"]}
    assert {h["scope"] for h in gates["new-task"]["hypotheses"]} == {"goal", "key", "hazards", "combined"}
    assert all(g["decision"] in ("pass", "fail", "reported") for g in gates.values())
    md = (project.root / "reports" / "nav4-v1" / "report.md").read_text()
    table = md.split("**sequential / o3** (baseline; 2 runs, seeds 0, 1; sampled policy)")[1].split("\n\n")[1]
    assert [row.split(" | ")[0] for row in table.splitlines()[2:]] == ["| key", "| goal", "| combined", "| hazards"]
    assert "| goal | " in md
    assert "forgetting max(0, immediate - final)" in md
    by_order = md.split("## Aggregate metrics by task order")[1].split("\n\n")[1].splitlines()
    assert by_order[0].startswith("| comparison / order | runs | immediate average success | final average success |")
    assert [row.split(" | ")[:2] for row in by_order[2:4]] == [["| sequential / o3", "2"], ["| replay / o3", "2"]]
    html = (project.root / "reports" / "nav4-v1" / "report.html").read_text()
    assert "Per-task matrix: sequential / o" in html
    assert "Curves:" in html


def test_seed_level_sensitivity_pairs_by_seed_and_order_and_averages_orders_per_seed() -> None:
    from cltoolkit.suites.nav4 import metrics as m
    from cltoolkit.suites.nav4.analysis import _seed_sensitivity

    ids = (m.ImmediateAverageSuccess.id, m.FinalAverageSuccess.id, m.RetentionLoss.id)

    def comp(role: str, final: list[float], orders: list[str]) -> dict:  # type: ignore[type-arg]
        n = len(final)
        return {
            "role": role,
            "runs": [f"r{i}" for i in range(n)],
            "seeds": [0, 0, 1, 1][:n],
            "orders": orders,
            "metrics": {mid: (final if mid == m.FinalAverageSuccess.id else [0.5] * n) for mid in ids},
        }

    orders = ["o1", "o2", "o1", "o2"]
    comps = {
        "candidate": comp("candidate", [0.6, 0.8, 0.7, 0.9], orders),
        "sequential": comp("baseline", [0.5, 0.5, 0.5, 0.5], orders),
    }
    rows = {r.split(" | ")[1]: r for r in _seed_sensitivity(comps)[4:]}
    final = rows["final average success"].split(" | ")
    assert final[2].startswith("+0.250 [") and final[2].endswith("(n = 4)")  # differences 0.1, 0.3, 0.2, 0.4
    assert final[3].startswith("+0.250 [") and final[3].endswith("(n = 2) |")  # seed means 0.2, 0.3
    assert rows["immediate average success"].split(" | ")[2].startswith("+0.000 [+0.000, +0.000]")
    one_order = {k: {**c, "orders": ["o1"] * 4} for k, c in comps.items()}
    assert _seed_sensitivity(one_order) == []  # a single order has nothing to average over


def _shipped(protocol_id: str) -> Nav4Protocol:
    """A shipped nav4 protocol, validated with the built-in components."""
    from cltoolkit.component_validation import load_protocol

    return cast(Nav4Protocol, load_protocol(REPO / "protocols" / f"{protocol_id}.json", regs=registries()).model)


def test_two_orders_of_one_seed_share_streams_in_v1_and_not_in_v2() -> None:
    v1 = _shipped("nav4-v1")
    v2 = _shipped("nav4-v2")
    assert v1.stream_seed(3, "o1") == v1.stream_seed(3, "o2") == 3  # nav4-v1 as frozen and run
    assert len({v2.stream_seed(3, o) for o in ("o1", "o2", "o3")}) == 3
    assert v2.stream_seed(3, "o1") == v2.stream_seed(3, "o1")  # deterministic


def test_the_shared_seed_note_says_what_the_protocols_random_streams_share() -> None:
    from cltoolkit.suites.nav4.analysis import _shared_seed_note

    v1 = _shipped("nav4-v1")
    v2 = _shipped("nav4-v2")
    two_orders = {"candidate": {"runs": ["a", "b", "c", "d"], "seeds": [0, 0, 1, 1], "orders": ["o1", "o2"] * 2}}
    assert "share that seed's network initialisation" in " ".join(_shared_seed_note(v1, two_orders))
    v2_note = " ".join(_shared_seed_note(v2, two_orders))
    assert "share only the seed's number" in v2_note and "share that seed's" not in v2_note
    one_order = {"candidate": {**two_orders["candidate"], "orders": ["o1"] * 4}}
    assert _shared_seed_note(v1, one_order) == _shared_seed_note(v2, one_order) == []


def _replay_batch(obs: Any) -> dict[str, Any]:
    """Replayed samples of phase 0 with stored targets: action 0 favoured (logits 9 against 3), value 5."""
    import torch

    n = len(obs)
    return {
        "obs": obs,
        "actions": torch.zeros(n, dtype=torch.int64),
        "logp": torch.zeros(n),
        "adv": torch.linspace(-1, 1, n),
        "ret": torch.zeros(n),
        "value": torch.full((n,), 5.0),
        "logits": torch.full((n, len(ACTIONS)), 3.0).scatter(1, torch.zeros((n, 1), dtype=torch.int64), 9.0),
        "task": torch.zeros(n, dtype=torch.int64),
    }


def test_cloning_of_completed_phases_only_ignores_the_phase_in_progress() -> None:
    import numpy as np
    import torch

    from cltoolkit.suites.nav4.agent import AgentLedger, Learner
    from cltoolkit.suites.nav4.suite import make_method

    v2 = _shipped("nav4-v2")
    comp = v2.comparison("candidate")
    stored = {**comp.hyperparameters, "cloneTargets": "stored"}  # nav4-v2's draft before the pilot (CLEAR)
    method = cast(UniformReplay, make_method(comp.method, stored, registries()))
    assert method.params.cloneFrom == "completed-phases"
    canvas = 2 * v2.environment.gridSize - 3
    agent = Learner(method.params, canvas, 0, AgentLedger(), method)
    v1_method = cast(UniformReplay, make_method(comp.method, {**stored, "cloneFrom": "all-memory"}, registries()))
    batch = _replay_batch(torch.zeros((6, len(CHANNELS), canvas, canvas)))
    method.task = 0  # every sample is of the phase in progress: no cloning term at all
    plain = agent.policy_loss(batch)
    assert torch.isclose(method._replay_loss(agent, batch), plain)
    method.task = 1  # the same samples now belong to a completed phase: the cloning terms apply
    assert method._replay_loss(agent, batch) > plain + 1.0
    v1_method.task = 0
    assert v1_method._replay_loss(agent, batch) > plain + 1.0  # nav4-v1: every sample in memory is cloned
    assert np.isfinite(float(plain.detach()))


def test_cloning_towards_the_phase_end_copy_reads_the_copy_not_the_stored_targets() -> None:
    import torch

    from cltoolkit.suites.nav4.agent import AgentLedger, Learner
    from cltoolkit.suites.nav4.api import Nav4TaskEnd
    from cltoolkit.suites.nav4.suite import make_method

    v2 = _shipped("nav4-v2")
    comp = v2.comparison("candidate")
    hyper = comp.hyperparameters
    assert hyper["cloneTargets"] == "phase-end-copy"  # nav4-v2's candidate as chosen after the pilot
    method = cast(UniformReplay, make_method(comp.method, hyper, registries()))
    canvas = 2 * v2.environment.gridSize - 3
    agent = Learner(method.params, canvas, 0, AgentLedger(), method)
    batch = _replay_batch(torch.randint(0, 3, (6, len(CHANNELS), canvas, canvas)).float())
    plain = agent.policy_loss(batch)
    method.task = 1
    assert torch.isclose(method._replay_loss(agent, batch), plain)  # no phase completed yet: nothing to clone
    rng = torch.get_rng_state()
    method.end_task(agent, Nav4TaskEnd(task="key", index=0, last=False))
    assert torch.equal(torch.get_rng_state(), rng)  # the copy's construction draws nothing from the run's stream
    assert torch.isclose(method._replay_loss(agent, batch), plain)  # the copy is the network: KL 0, value term 0
    other = {**batch, "logits": -batch["logits"], "value": -batch["value"]}
    assert torch.isclose(method._replay_loss(agent, other), agent.policy_loss(other))  # stored targets unread
    with torch.no_grad():
        for p in agent.net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    moved = agent.policy_loss(batch)
    assert method._replay_loss(agent, batch) > moved + 1e-6  # the network left its copy: the terms pull it back
    state = method.state_dict()
    again = cast(UniformReplay, make_method(comp.method, hyper, registries()))
    again.load_state_dict(state)
    again.begin_task(agent, Nav4TaskStart(task="goal", index=1, tasks=("goal",), steps=1, total=4))
    assert again.old is not None and method.old is not None
    assert torch.equal(again.old(batch["obs"])[0], method.old(batch["obs"])[0])  # restored from a checkpoint
