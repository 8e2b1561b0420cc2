"""The crl suite's PPO (`learner.algorithm: "ppo"`, `cltoolkit.suites.crl.ppo`): GAE, the clipped objective and the
rollout loop against their definitions, and the method library on it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from cltoolkit.errors import CheckFailed
from cltoolkit.suites.crl.api import CrlMethod, CrlTask
from cltoolkit.suites.crl.driver import run_stream
from cltoolkit.suites.crl.memory import TaskSample
from cltoolkit.suites.crl.methods import (
    L2,
    CrlAGEM,
    CrlEWC,
    CrlFinetuning,
    CrlLwF,
    CrlMAS,
    CrlPackNet,
    CrlReplayCloning,
    CrlSI,
    PerfectMemory,
    SingleTask,
    shared,
)
from cltoolkit.suites.crl.models import CrlLearner, CrlProtocol, PpoSettings
from cltoolkit.suites.crl.ppo import Ppo, PpoRollout, gae
from cltoolkit.suites.crl.sac import SacConfig
from tests.suites.test_crl import _method, _protocol, _Stopped


def _ppo_protocol(**ppo: Any) -> CrlProtocol:
    """Two CartPole tasks, 200 steps each, rollouts of 64 steps (a last one of 8), 2 epochs of 4 minibatches."""
    doc = _protocol().model_dump(mode="json", exclude_none=True)
    success = {"returnAtLeast": 30.0}
    doc["stream"]["tasks"] = [
        {"id": "left", "env": "CartPole-v1", "success": success},
        {"id": "right", "env": "CartPole-v1", "success": success},
    ]
    doc["learner"] = {"algorithm": "ppo", "hidden": [16], "ppo": {"rolloutSteps": 64, "epochs": 2, "minibatches": 4,
                                                                   **ppo}}  # fmt: skip
    return CrlProtocol.model_validate(doc)


UPDATES_PER_TASK = 4 * 2 * 4
"""Rollouts of 64, 64, 64 and 8 steps, each 2 epochs of 4 minibatches."""


def test_gae_by_hand_cuts_at_episode_ends_and_bootstraps_a_truncation() -> None:
    gamma, lam = 0.9, 0.5
    rewards = np.array([1.0, 0.0, 2.0, 1.0])
    values = np.array([0.5, 0.2, 0.1, 0.4])
    # step 1 terminates (nothing after it), step 3 is the rollout's last (bootstrapped with 0.7)
    next_values = np.array([0.2, 0.0, 0.4, 0.7])
    ends = np.array([False, True, False, False])
    adv = gae(rewards, values, next_values, ends, gamma, lam)
    d = rewards + gamma * next_values - values
    a3 = d[3]
    a2 = d[2] + gamma * lam * a3
    a1 = d[1]  # the episode ended: nothing from step 2 on reaches it
    a0 = d[0] + gamma * lam * a1
    assert adv == pytest.approx(np.array([a0, a1, a2, a3], np.float32), rel=1e-6)


def test_a_rollout_takes_the_next_steps_value_within_an_episode_and_the_bootstrap_at_a_truncation() -> None:
    rollout = PpoRollout(4, obs_dim=2, rng=np.random.default_rng(0))
    steps = [
        (1.0, (False, False), None),
        (2.0, (False, True), 5.0),
        (3.0, (True, False), None),
        (4.0, (False, False), 6.0),
    ]
    for value, ends, bootstrap in steps:
        rollout.add(np.zeros(2), np.zeros(1), 0.0, value, 1.0, task=0)
        rollout.end_step(*ends, bootstrap)
    assert rollout.full
    rollout.finish(gamma=1.0, lam=1.0)
    assert rollout.next_values.tolist() == [2.0, 5.0, 0.0, 6.0]
    # returns with gamma = lambda = 1 are the rewards to each episode's end plus the bootstrapped value
    assert rollout.ret.tolist() == pytest.approx([1 + 1 + 5, 1 + 5, 1.0, 1 + 6])


def test_the_clipped_objective_value_loss_and_entropy_by_hand() -> None:
    torch.manual_seed(0)
    settings = PpoSettings(clipRatio=0.2, valueCoef=0.5, entropyCoef=0.01, normalizeAdvantages=False)
    ppo = Ppo(SacConfig(obs_dim=3, act_dim=3, heads=2, hidden=(8,), discrete=True), settings)
    obs, head = torch.randn(6, 3), torch.tensor([0, 1, 0, 1, 0, 1])
    actions = torch.tensor([[0.0], [1.0], [2.0], [0.0], [1.0], [2.0]])
    with torch.no_grad():
        logp_all = ppo.actor.distribution(obs, head)
        logp = logp_all.gather(1, actions.long()).squeeze(1)
    old = logp + torch.tensor([0.0, 0.5, -0.5, 0.1, -0.1, 0.0])  # ratios exp(0), exp(-0.5), exp(0.5), ...
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, 2.0])
    ret = torch.randn(6)
    batch = {"obs": obs, "actions": actions, "logp": old, "adv": adv, "ret": ret, "head": head}
    losses = ppo.losses(batch)
    ratio = (logp - old).exp()
    surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    value = ((ppo.critic(obs)[0].detach() - ret) ** 2).mean()
    entropy = -(logp_all.exp() * logp_all).sum(1).mean()
    parts = {k: float(v.detach()) for k, v in losses.items()}
    assert parts["policy"] == pytest.approx(float(-surrogate.mean()), rel=1e-5)
    assert parts["value"] == pytest.approx(float(value), rel=1e-5)
    assert parts["entropy"] == pytest.approx(float(entropy), rel=1e-5)
    assert parts["total"] == pytest.approx(float(-surrogate.mean() + 0.5 * value - 0.01 * entropy), rel=1e-5)
    # the clipped row (ratio exp(0.5) > 1.2 with a positive advantage) carries no policy gradient: the others do
    weight = ppo.actor.logits.weight
    (got,) = torch.autograd.grad(losses["policy"], weight)
    logp = ppo.actor.distribution(obs, head).gather(1, actions.long()).squeeze(1)
    kept = torch.tensor([True, True, False, True, True, True])
    (expected,) = torch.autograd.grad(-((logp - old).exp() * adv)[kept].sum() / 6, weight)
    assert torch.allclose(got, expected, atol=1e-7) and bool(got.abs().sum() > 0)


def test_a_task_sample_is_uniform_over_everything_offered() -> None:
    counts = np.zeros(100)
    for seed in range(400):
        sample = TaskSample(10, np.random.default_rng(seed))
        for start in range(0, 100, 25):  # four rollouts of 25 rows
            sample.offer({"obs": np.arange(start, start + 25, dtype=np.float32)[:, None]})
        rows = sample.rows()["obs"][:, 0].astype(int)
        assert len(set(rows.tolist())) == 10
        counts[rows] += 1
    assert counts.sum() == 4000
    assert counts[:50].sum() == pytest.approx(counts[50:].sum(), rel=0.1)  # the first rollouts are not favoured


def test_the_learners_fields_belong_to_their_algorithm() -> None:
    assert CrlLearner.model_validate({"algorithm": "ppo"}).ppo_settings == PpoSettings()
    with pytest.raises(ValidationError, match=r"batchSize, startSteps: SAC's field\(s\), not read by algorithm 'ppo'"):
        CrlLearner.model_validate({"algorithm": "ppo", "batchSize": 32, "startSteps": 10})
    with pytest.raises(ValidationError, match=r"`ppo` is read by algorithm 'ppo' only, not 'sac-discrete'"):
        CrlLearner.model_validate({"algorithm": "sac-discrete", "ppo": {}})


def test_a_buffer_keeping_method_is_refused_under_ppo_at_validation_and_at_run() -> None:
    from cltoolkit.registry import registries

    suite = registries().new_suite("crl")
    doc = _ppo_protocol().model_dump(mode="json", exclude_none=True)
    doc["comparisons"] = [{"id": i, "method": m, "role": "baseline", "label": i}
                          for i, m in (("tune", "crl.finetuning"), ("memory", "crl.perfect-memory"))]  # fmt: skip
    problems = [(p.where, p.message) for p in suite.check(CrlProtocol.model_validate(doc))]
    assert problems == [
        (
            "/comparisons/1/method",
            "'crl.perfect-memory' keeps an off-policy replay buffer across tasks; learner.algorithm 'ppo' learns from "
            "its own rollouts (use 'sac-discrete' for replay of the buffer)",
        )
    ]
    with pytest.raises(CheckFailed, match="keeps an off-policy replay buffer across tasks"):
        run_stream(_ppo_protocol(), _method(PerfectMemory), seed=0)
    with pytest.raises(CheckFailed, match=r"'ppo' needs Discrete actions 0..n-1 \(n >= 2\), Pendulum-v1"):
        run_stream(_protocol().model_copy(update={"learner": _ppo_protocol().learner}), _method(CrlFinetuning), 0)


@pytest.mark.parametrize(
    ("cls", "params"),
    [(CrlFinetuning, {}), (L2, {"strength": 1.0}), (CrlEWC, {"lambda": 1.0, "fisherBatches": 2}),
     (CrlSI, {"strength": 1.0}), (CrlMAS, {"lambda": 1.0, "importanceBatches": 2}),
     (CrlReplayCloning, {"memoryPerTask": 60, "cloningSamples": 16, "cloningCoef": 1.0}),
     (CrlAGEM, {"memoryPerTask": 60, "referenceSamples": 16}), (CrlLwF, {"strength": 1.0}), (SingleTask, {})],
)  # fmt: skip
def test_the_same_methods_run_a_ppo_stream_with_their_samples_counted(
    cls: type[CrlMethod[Any]], params: dict[str, Any]
) -> None:
    out = run_stream(_ppo_protocol(), _method(cls, **params), seed=0)
    budget, metrics = out["budget"], out["metrics"]
    assert budget["environmentSteps"] == 400
    assert metrics["updatesPerTask"] == {"left": UPDATES_PER_TASK, "right": UPDATES_PER_TASK}
    rows = 2 * 2 * (3 * 64 + 8)  # each task's rows, once per epoch
    assert budget["samples"]["task"] == rows and budget["samples"]["other"] == 0
    if cls in (CrlReplayCloning, CrlAGEM):
        assert metrics["episodicMemory"] == 2 * 60  # each task's rollouts, sampled uniformly at its end
        assert budget["replaySamples"] == UPDATES_PER_TASK * 16  # drawn in every update of the second task
    else:
        assert budget["replaySamples"] == 0
    if cls is CrlEWC:
        assert budget["samples"]["bookkeeping"] > 0  # the Fisher's passes over kept minibatches
    assert len(metrics["evaluations"]["success"]) == 4


def test_ewc_under_ppo_anchors_the_actors_trunk_and_the_whole_value_network() -> None:
    ppo = Ppo(SacConfig(obs_dim=4, act_dim=2, heads=2, hidden=(8,), discrete=True), PpoSettings())
    names = [n for n, _ in shared(ppo)]
    assert all(not n.startswith("actor.logits") for n in names)  # the heads are each task's own
    assert {n for n in names if n.startswith("critic.")} == {f"critic.{n}" for n, _ in ppo.critic.named_parameters()}


def test_packnet_under_ppo_retrains_on_the_tasks_last_rollout_counted_as_its_updates() -> None:
    out = run_stream(_ppo_protocol(), _method(CrlPackNet, retrainUpdates=10), seed=0)
    metrics = out["metrics"]
    assert metrics["updatesPerTask"] == {"left": UPDATES_PER_TASK + 10, "right": UPDATES_PER_TASK}
    assert metrics["masking"]["retrainUpdates"] == 10 and metrics["masking"]["releasedWeights"] > 0


@pytest.mark.e2e
def test_an_interrupted_ppo_stream_resumes_from_its_last_task_boundary_with_the_same_record(tmp_path: Any) -> None:
    params = {"memoryPerTask": 50, "cloningSamples": 8, "cloningCoef": 1.0}
    whole = run_stream(_ppo_protocol(), _method(CrlReplayCloning, **params), seed=0, workdir=tmp_path / "whole")
    marker = tmp_path / "stopped"

    class Once(CrlReplayCloning):
        def end_task(self, sac: Any, task: CrlTask) -> None:
            super().end_task(sac, task)
            if task.index == 1 and not marker.exists():
                marker.write_text("")
                raise _Stopped("stopped")

    cut = tmp_path / "cut"
    cut.mkdir()
    with pytest.raises(_Stopped):
        run_stream(_ppo_protocol(), _method(Once, **params), seed=0, workdir=cut)
    assert run_stream(_ppo_protocol(), _method(Once, **params), seed=0, workdir=cut) == whole


@pytest.mark.slow
def test_ppo_learns_cartpole() -> None:
    """About 25 s: PPO at SB3's defaults (lr 3e-4) on CW's trunk (64 x 64) holds CartPole's pole to a return of 195
    in every evaluation episode within 30,000 steps (a uniform policy returns about 20: success 0). Measured
    2026-12-05 (evaluations every 2,048 steps): seed 0 at 0.4 after 10,240 steps and 1.0 from 14,336 on; seed 1 at 0.8
    after 12,288 and 1.0 from 16,384 on but for one 0.8."""
    doc = _protocol().model_dump(mode="json", exclude_none=True)
    doc["stream"] = {
        "tasks": [{"id": "cartpole", "env": "CartPole-v1", "success": {"returnAtLeast": 195.0}}],
        "stepsPerTask": 30_000,
        "maxEpisodeSteps": 500,
    }
    doc["learner"] = {"algorithm": "ppo", "hidden": [64, 64], "lr": 3e-4}
    doc["evaluation"] = {"every": 2048, "episodes": 5, "last": 2}
    out = run_stream(CrlProtocol.model_validate(doc), _method(CrlFinetuning), seed=0)
    success = [row[0] for row in out["metrics"]["evaluations"]["success"]]
    assert success[0] == 0.0 and success[-1] == 1.0, success


def test_a_comparisons_sac_fields_are_refused_under_ppo() -> None:
    from cltoolkit.registry import registries

    doc = _ppo_protocol().model_dump(mode="json", exclude_none=True)
    doc["comparisons"] = [{"id": "packnet", "method": "crl.packnet", "role": "baseline", "label": "p",
                           "hyperparameters": {"clipNorm": 2e-5}}]  # fmt: skip
    problems = [(p.where, p.message) for p in registries().new_suite("crl").check(CrlProtocol.model_validate(doc))]
    message = "SAC's clipNorm, not read by learner.algorithm 'ppo' (its fields are in learner.ppo)"
    assert problems == [("/comparisons/0/hyperparameters/clipNorm", message)]


def test_the_guards_hold_under_ppo() -> None:
    """A non-finite term ends the run by name, and samples from a private buffer are a violation or counted as
    replay as the protocol declares: the same guards as under SAC."""
    from cltoolkit.errors import BudgetViolation, NonFiniteValue
    from tests.suites.test_crl import _NanLoss, _PrivateReplay

    with pytest.raises(NonFiniteValue, match="the method's extra_loss term in task left, update 0"):
        run_stream(_ppo_protocol(), _method(_NanLoss), seed=0)
    # the method keeps 4 rows of each minibatch; the first task's last two minibatches (of its last, 8-row rollout)
    # have 2 rows each: 4 private rows in every update of the second task
    with pytest.raises(BudgetViolation, match="unaccountedSamples: in task right, update 0, 4 sample"):
        run_stream(_ppo_protocol(), _method(_PrivateReplay), seed=0)
    counted = run_stream(_ppo_protocol(), _method(_PrivateReplay), seed=0, unaccounted="replay")
    assert counted["budget"]["samples"]["other"] == UPDATES_PER_TASK * 4
