"""The crl suite's multi-task reference (CW's `run_mt.py`: `cltoolkit.suites.crl.multitask`), PopArt (CW's
`PopArtMlpCritic`) and one critic head per task (CW's critics), against their definitions (docs/cw10.md)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from cltoolkit.errors import CheckFailed
from cltoolkit.suites.crl.api import CrlTask
from cltoolkit.suites.crl.driver import run_stream
from cltoolkit.suites.crl.methods import L2, CrlFinetuning, MultiTask
from cltoolkit.suites.crl.models import CrlLearner, CrlProtocol
from cltoolkit.suites.crl.multitask import run_multitask
from cltoolkit.suites.crl.sac import Sac, SacConfig, TwinCritic
from tests.suites.test_crl import _batch, _method, _protocol


def _popart_sac(heads: int = 3) -> Sac:
    torch.manual_seed(0)
    return Sac(SacConfig(obs_dim=4, act_dim=2, heads=heads, critic_heads=heads, hidden=(8, 8), popart_beta=0.3))


def test_popart_rescales_the_first_critics_output_layer_so_its_unnormalised_values_stay() -> None:
    sac = _popart_sac()
    popart = sac.popart
    assert popart is not None
    obs, act = torch.randn(12, 4), torch.rand(12, 2) * 2 - 1
    head = torch.tensor([0, 1] * 6)  # task 2 absent from the batch
    before = popart.unnormalize(sac.critic(obs, act, head)[0], head)
    second_before = sac.critic(obs, act, head)[1]
    targets = torch.randn(12) * 5 + 3
    popart.update(targets, head, sac.critic)
    after = popart.unnormalize(sac.critic(obs, act, head)[0], head)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sac.critic(obs, act, head)[1], second_before)  # CW rescales critic1 alone
    for k in (0, 1):  # beta of the way towards the batch's moments of the task's rows
        rows = targets[head == k]
        assert float(popart.moment1[k]) == pytest.approx(0.3 * float(rows.mean()), rel=1e-5)
        second = 0.7 * 1.0 + 0.3 * float(rows.square().mean())
        assert float(popart.sigma[k]) == pytest.approx((second - float(popart.moment1[k]) ** 2) ** 0.5, rel=1e-5)
    assert (float(popart.moment1[2]), float(popart.sigma[2])) == (0.0, 1.0)  # an absent task keeps its statistics


def test_popart_normalises_the_backup_of_the_unnormalised_target_and_feeds_it_to_its_statistics() -> None:
    """CW's `get_gradients`: q_backup = normalize(r + gamma (1 - d) (unnormalize(min target Q) - alpha log pi'));
    then `update_stats(q_backup)`, the normalised backup."""
    sac = _popart_sac()
    popart = sac.popart
    assert popart is not None
    popart.moment1, popart.sigma = torch.tensor([2.0, -1.0, 0.5]), torch.tensor([3.0, 0.5, 1.0])
    popart.moment2 = popart.sigma.square() + popart.moment1.square()
    batch = _batch(9, 4, 2, heads=3)
    head = batch["head"]
    torch.manual_seed(5)
    sac.losses(batch)
    assert sac._targets is not None
    normalised, seen = sac._targets
    torch.manual_seed(5)  # the same next actions
    with torch.no_grad():
        next_action, next_logp = sac.actor(batch["next_obs"], head)
        target = sac.target(batch["next_obs"], next_action, head).min(0).values
        target = target * popart.sigma[head] + popart.moment1[head]
        alpha = sac.log_alpha[head].exp()
        backup = batch["rewards"] + sac.config.gamma * (1 - batch["done"]) * (target - alpha * next_logp)
    torch.testing.assert_close(normalised, (backup - popart.moment1[head]) / popart.sigma[head])
    assert torch.equal(seen, head)
    moment1 = popart.moment1.clone()
    sac.update_statistics()
    assert not torch.equal(popart.moment1, moment1) and sac._targets is None


def test_a_critic_head_per_task_learns_only_from_its_tasks_rows() -> None:
    torch.manual_seed(0)
    critic = TwinCritic(SacConfig(obs_dim=4, act_dim=2, heads=2, critic_heads=2, hidden=(8, 8)))
    obs, act = torch.randn(6, 4), torch.rand(6, 2)
    critic(obs, act, torch.zeros(6, dtype=torch.long)).sum().backward()
    last = len(critic.weights) - 1
    grad = critic.weights[last].grad
    assert grad is not None
    assert float(grad[..., 0].abs().sum()) > 0 and float(grad[..., 1].abs().sum()) == 0.0


def _cw(comparisons: Any = (), **stream: Any) -> CrlProtocol:
    """The test stream with CW's critics: one head per task."""
    doc = _protocol(comparisons, **stream).model_dump(mode="json", exclude_none=True)
    doc["learner"]["criticHeads"] = "per-task"
    return CrlProtocol.model_validate(doc)


def test_criticheads_per_task_gives_the_run_one_critic_head_per_task() -> None:
    single = run_stream(_protocol(), _method(CrlFinetuning), seed=0)
    per_task = run_stream(_cw(), _method(CrlFinetuning), seed=0)
    assert per_task["budget"]["parameters"] - single["budget"]["parameters"] == 2 * (16 + 1)  # twin x (weights + bias)
    with pytest.raises(ValueError, match='criticHeads "per-task" needs heads "per-task"'):
        CrlLearner.model_validate({"heads": "single", "criticHeads": "per-task"})


@pytest.mark.e2e
def test_the_multi_task_reference_learns_every_task_at_once_in_one_phase_of_the_whole_budget() -> None:
    out = run_multitask(_cw(), _method(MultiTask, lr=1e-4), seed=0)
    joint = out["metrics"]["multiTask"]
    # 400 steps, episodes of 50 cycling earth, moon from moon (CW's reset advances first): 4 episodes each
    assert joint["environmentSteps"] == {"earth": 200, "moon": 200}
    assert joint["episodes"] == {"earth": 4, "moon": 4}
    # one phase: updates from step 50 of the phase, every 50 steps 50 (CW's loop never sees a task change)
    assert joint["gradientUpdates"] == out["budget"]["gradientUpdates"] == 350
    assert out["budget"]["replaySamples"] == 0 and out["budget"]["samples"]["memory"] == 0
    assert out["budget"]["environmentSteps"] == 400
    ev = out["metrics"]["evaluations"]
    assert ev["regime"] == "multi-task" and ev["steps"] == [100, 200, 300, 400] and len(ev["success"]) == 4
    final = out["metrics"]["finalSuccess"]
    assert out["metrics"]["crl.performance-v1"] == pytest.approx(sum(final.values()) / 2)
    assert "crl.forgetting-v1" not in out["metrics"]  # no task has a training phase of its own
    popart = joint["popart"]
    assert set(popart["std"]) == {"earth", "moon"} and popart["std"]["earth"] != 1.0  # PopArt moved both
    again = run_multitask(_cw(), _method(MultiTask, lr=1e-4), seed=0)
    assert again["metrics"] == out["metrics"]  # one seed, one run
    plain = run_multitask(_cw(), _method(MultiTask, lr=1e-4, popart=False), seed=0)
    assert "popart" not in plain["metrics"]["multiTask"] and plain["metrics"] != out["metrics"]
    with pytest.raises(CheckFailed, match="learns every task at once: run it with"):
        run_stream(_cw(), _method(MultiTask), seed=0)  # never as a stream


def test_the_multi_task_reference_is_a_reference_that_needs_cws_critics_for_popart() -> None:
    from cltoolkit.registry import registries

    suite = registries().new_suite("crl")
    problems = [(p.where, p.message) for p in suite.check(_protocol([("mt", "crl.multi-task", "baseline")]))]
    assert [w for w, _ in problems] == ["/comparisons/0/role", "/comparisons/0/hyperparameters/popart"]
    assert "learns every task at once: its role must be 'reference'" in problems[0][1]
    assert 'set learner.criticHeads "per-task"' in problems[1][1]
    assert list(suite.check(_cw([("mt", "crl.multi-task", "reference")]))) == []
    doc = _protocol([("mt", "crl.multi-task", "reference")]).model_dump(mode="json", exclude_none=True)
    doc["comparisons"][0]["hyperparameters"] = {"popart": False}
    assert list(suite.check(CrlProtocol.model_validate(doc))) == []


def _record(comparison: str, metrics: dict[str, Any]) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(spec=SimpleNamespace(comparison=comparison, seed=0, order=None, cell=None), metrics=metrics)


def test_the_analysis_reads_a_multi_task_record_as_performance_alone_and_never_as_forward_transfers_baseline() -> None:
    from cltoolkit.registry import registries

    protocol = _cw(
        [("tune", "crl.finetuning", "baseline"), ("single", "crl.single-task", "reference"),
         ("mt", "crl.multi-task", "reference")]
    )  # fmt: skip
    analysis = registries().new_analysis("crl")
    joint = _record(
        "mt",
        {
            "crl.performance-v1": 0.5,
            "finalSuccess": {"earth": 0.4, "moon": 0.6},
            "evaluations": {"tasks": ["earth", "moon"], "regime": "multi-task", "steps": [200, 400],
                            "success": [[0.0, 0.5], [0.4, 0.6]]},
        },
    )  # fmt: skip
    assert set(analysis.expected_values(protocol, joint)) == {"crl.performance-v1", "finalSuccess"}
    tune = _record("tune", {"ownAuc": {"earth": 0.5, "moon": 0.5}})
    single = _record("single", {"ownAuc": {"earth": 0.2, "moon": 0.2}})
    mt_as_reference = _record("mt", {"ownAuc": {"earth": 0.9, "moon": 0.9}})
    ft = analysis.summaries(protocol, [tune, single, mt_as_reference])["forwardTransfer"]
    assert ft["referenceRuns"] == 1 and ft["referenceAuc"] == pytest.approx({"earth": 0.2, "moon": 0.2})
    curves = analysis.standard_entries(protocol, joint)["curves"]
    assert curves["success of moon"] == {
        "x": [200, 400],
        "y": [0.5, 0.6],
        "xLabel": "environment steps (all tasks at once)",
        "yLabel": "success rate",
    }
    text = analysis.report_markdown(protocol, [joint], {"forwardTransfer": None})
    assert "| mt | 1 | 0.500 | - | 0.400 / - | 0.600 / - |" in text
    assert "`mt`: the multi-task reference" in text


@pytest.mark.parametrize(("regularize", "critic_pulled"), [(True, True), (False, False)])
def test_regularizecritic_false_pulls_the_actor_alone_as_cws_regularizers_do(
    regularize: bool, critic_pulled: bool
) -> None:
    """CW's L2, EWC and MAS weight the critics' parameters by 0 unless `--regularize_critic`."""
    method = _method(L2, strength=10.0, regularizeCritic=regularize)
    sac = Sac(SacConfig(obs_dim=3, act_dim=1, heads=2, critic_heads=2, hidden=(8,)))
    task = CrlTask("earth", 0, 10)
    method.end_task(sac, task)
    with torch.no_grad():
        sac.critic.weights[0].add_(0.1)  # the critics' trunk moved
    penalty = method.extra_loss(sac, {}, task)
    assert penalty is not None
    expected = 10.0 * 0.01 * sac.critic.weights[0].numel() if critic_pulled else 0.0
    assert float(penalty.detach()) == pytest.approx(expected, rel=1e-4, abs=1e-9)
    anchored = {n for n, _ in method.anchored(sac)}
    assert any(n.startswith("actor.trunk") for n in anchored)
    assert any(n.startswith("critic.") for n in anchored) is critic_pulled
    assert "critic.weights.1" not in anchored  # a critic head per task is never shared
