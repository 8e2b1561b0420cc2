"""The method library (#51): each algorithm's defining property on a problem whose answer is known, and each method
run to completion in nav4 and wmf pilots through the suites' drivers (the same algorithm code in both)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from cltoolkit.registry import registries
from cltoolkit.suites.library import core
from tests.suites.test_guards import _nav4_doc, _nav4_run, _wmf_protocol, _wmf_run

torch = pytest.importorskip("torch")


def test_si_importance_is_the_path_integral_on_a_quadratic() -> None:
    """L = a/2 (theta - b)^2 under SGD: omega = -sum g dtheta = eta sum g^2, and the loss fell by
    eta sum g^2 - (a eta^2 / 2) sum g^2; with a small step the two agree to O(eta)."""
    a, b, eta = 3.0, 2.0, 1e-3
    theta = torch.nn.Parameter(torch.tensor([-1.0], dtype=torch.float64))
    named = lambda: [("theta", theta)]  # noqa: E731
    si = core.SynapticIntelligence(core.SiFields(strength=1.0, damping=0.1))
    si.begin_task(named)
    opt = torch.optim.SGD([theta], lr=eta)

    def loss() -> Any:
        return 0.5 * a * (theta - b).pow(2).sum()

    start_loss = float(loss().detach())
    squares = 0.0
    for _ in range(2000):
        opt.zero_grad()
        loss().backward()
        squares += float(theta.grad.pow(2).sum())
        si.after_backward(named)
        opt.step()
        si.after_step(named)
    drop = start_loss - float(loss().detach())
    omega = float(si.omega["theta"])
    assert omega == pytest.approx(eta * squares, rel=1e-9)  # exactly the accumulated -g . dtheta
    assert omega == pytest.approx(drop + 0.5 * a * eta**2 * squares, rel=1e-9)  # the path integral, exactly
    assert omega == pytest.approx(drop, rel=2 * a * eta)  # and the loss's fall to first order
    si.end_task(named)
    moved = float(theta.detach()) - (-1.0)
    assert float(si.big_omega["theta"]) == pytest.approx(omega / (moved**2 + 0.1), rel=1e-12)


def test_ewc_fisher_of_a_gaussian_linear_model_is_the_input_second_moment() -> None:
    """y ~ N(w x, 1): the score is (y - w x) x, so at the true w the Fisher is E[x^2] (= s^2 for x ~ N(0, s^2))."""
    gen = torch.Generator().manual_seed(0)
    s, w_true, n = 1.7, 0.8, 20_000
    x = torch.randn(n, generator=gen, dtype=torch.float64) * s
    y = w_true * x + torch.randn(n, generator=gen, dtype=torch.float64)
    w = torch.nn.Parameter(torch.tensor(w_true, dtype=torch.float64))
    ewc = core.OnlineEWC(core.EwcFields.model_validate({"lambda": 1.0}))
    batches = list(zip(x, y, strict=True))
    ewc.end_task(lambda: [("w", w)], batches, lambda b: 0.5 * (b[1] - w * b[0]) ** 2)
    assert float(ewc.fisher["w"]) == pytest.approx(s**2, rel=0.05)
    assert w.grad is None  # the importances leave no gradient behind
    with torch.no_grad():
        w += 0.5
    penalty = ewc.penalty(lambda: [("w", w)])
    assert penalty is not None
    assert float(penalty.detach()) == pytest.approx(0.5 * float(ewc.fisher["w"]) * 0.25)
    ewc.params = core.EwcFields.model_validate({"lambda": 1.0, "decay": 0.5})
    first = ewc.fisher["w"].clone()
    ewc.end_task(lambda: [("w", w)], batches[:1000], lambda b: 0.5 * (b[1] - w * b[0]) ** 2)
    assert float(ewc.fisher["w"]) > 0.5 * float(first)  # gamma F + F_task


def test_agem_applied_gradient_never_points_against_the_reference() -> None:
    gen = torch.Generator().manual_seed(1)
    projected = 0
    for _ in range(500):
        g, ref = torch.randn(50, generator=gen), torch.randn(50, generator=gen)
        out, did = core.agem_project(g, ref)
        projected += did
        assert float(out @ ref) >= -1e-5 * float(ref.norm() * g.norm())
        if not did:
            assert torch.equal(out, g)
    assert 150 < projected < 350  # about half the random pairs point against each other
    # through the hook, on a model: the gradient left in p.grad has a non-negative dot product with the reference's
    lin = torch.nn.Linear(4, 1)
    x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 1, generator=gen)
    xr, yr = torch.randn(8, 4, generator=gen), -3 * torch.randn(8, 1, generator=gen)
    agem = core.AGEM(core.AgemFields(capacity=10, referenceSamples=8))
    for _ in range(20):
        lin.zero_grad()
        ((lin(x) - y) ** 2).mean().backward()
        agem.after_backward(lin.named_parameters, lambda: ((lin(xr) - yr) ** 2).mean())
        applied = torch.cat([p.grad.flatten() for p in lin.parameters()])
        lin.zero_grad()
        ((lin(xr) - yr) ** 2).mean().backward()
        reference = torch.cat([p.grad.flatten() for p in lin.parameters()])
        assert float(applied @ reference) >= -1e-6
        with torch.no_grad():
            for p, g in zip(lin.parameters(), applied.split([p.numel() for p in lin.parameters()]), strict=True):
                p -= 0.1 * g.view_as(p)
    assert agem.steps == 20


def test_mas_importance_of_a_linear_model_is_the_mean_absolute_output_gradient() -> None:
    """F(x) = W x: d ||W x||^2 / dW = 2 (W x) x^T, so Omega = mean over batches of |2 (W x_k) x_k^T| (one sample a
    batch), computed here in closed form."""
    gen = torch.Generator().manual_seed(2)
    lin = torch.nn.Linear(3, 2, bias=False).double()
    xs = [torch.randn(1, 3, generator=gen, dtype=torch.float64) for _ in range(50)]
    mas = core.MAS(core.MasFields.model_validate({"lambda": 1.0}))
    mas.end_task(lin.named_parameters, xs, lin)
    w = lin.weight.detach()
    expected = sum((2 * (w @ x.T) @ x).abs() for x in xs) / len(xs)
    assert torch.allclose(mas.importance["weight"], expected, rtol=1e-12)
    assert lin.weight.grad is None
    mas.end_task(lin.named_parameters, xs, lin)  # summed over tasks
    assert torch.allclose(mas.importance["weight"], 2 * expected, rtol=1e-12)


def test_lwf_distillation_is_zero_at_the_copy_and_pulls_towards_it() -> None:
    gen = torch.Generator().manual_seed(3)
    lin = torch.nn.Linear(4, 5)
    lwf = core.LwF(core.LwfFields(strength=1.0, temperature=2.0))
    lwf.end_task(lin)
    assert lwf.old is not None and not any(p.requires_grad for p in lwf.old.parameters())
    x = torch.randn(16, 4, generator=gen)
    assert float(lwf.distill_logits(lin(x), lwf.old(x)).detach()) == pytest.approx(0.0, abs=1e-7)
    with torch.no_grad():
        lin.weight += 0.5 * torch.randn(5, 4, generator=gen)
    before = float(lwf.distill_logits(lin(x), lwf.old(x)).detach())
    assert before > 0
    opt = torch.optim.SGD(lin.parameters(), lr=0.5)
    for _ in range(20):
        opt.zero_grad()
        lwf.distill_logits(lin(x), lwf.old(x)).backward()
        opt.step()
    assert float(lwf.distill_logits(lin(x), lwf.old(x)).detach()) < 0.5 * before
    assert float(lwf.distill_values(lin(x), lin(x)).detach()) == 0.0


def test_lwf_state_loaded_before_its_model_becomes_the_copy_at_the_next_task() -> None:
    """A checkpoint is loaded before any network exists (the suites call `load_state_dict(state)`); the copy is
    rebuilt in the model's shape at the next `begin_task`, with the saved weights, not the model's."""
    lin = torch.nn.Linear(4, 5)
    saved = core.LwF(core.LwfFields(strength=1.0))
    saved.end_task(lin)
    state = saved.state_dict()
    restored = core.LwF(core.LwfFields(strength=1.0))
    restored.load_state_dict(state)
    assert restored.old is None and restored.pending is not None
    other = torch.nn.Linear(4, 5)  # the resumed run's network, its weights not yet the copy's
    restored.begin_task(other)
    assert restored.old is not None and restored.pending is None
    assert torch.equal(restored.old.weight, lin.weight) and not torch.equal(restored.old.weight, other.weight)
    restored.begin_task(other)  # later tasks leave the copy alone
    assert torch.equal(restored.old.weight, lin.weight)


NAV4_FIELDS: dict[str, dict[str, Any]] = {
    "nav4.ewc-online": {"lambda": 10.0, "fisherBatches": 2},
    "nav4.si": {"strength": 0.1},
    "nav4.l2": {"strength": 0.01},
    "nav4.a-gem": {"capacity": 500, "referenceSamples": 16},
    "nav4.mas": {"lambda": 1.0, "importanceBatches": 2},
    "nav4.lwf": {"strength": 1.0},
    "nav4.packnet": {"retrainUpdates": 4},
}


@pytest.mark.parametrize("name", sorted(NAV4_FIELDS))
def test_library_methods_run_in_a_nav4_pilot(tmp_path: Path, name: str) -> None:
    from cltoolkit.suites.nav4.suite import make_method

    agent = dict(_nav4_doc()["comparisons"][0]["hyperparameters"])
    method = make_method(name, {**agent, **NAV4_FIELDS[name]}, registries())
    out = _nav4_run(tmp_path, method)
    samples = out["budget"]["samples"]
    assert samples["other"] == 0
    if name == "nav4.a-gem":
        assert out["budget"]["replaySamples"] == samples["memory"] > 0  # reference batches, counted as replay
        share = out["metrics"]["methodDiagnostics"]["projectedShare"]
        assert share is not None and 0 <= share <= 1
    if name == "nav4.ewc-online":
        assert samples["bookkeeping"] > 0  # the Fisher's passes, counted as the method's bookkeeping
        assert out["metrics"]["methodDiagnostics"]["fisherMax"] > 0
    if name == "nav4.si":
        assert out["metrics"]["methodDiagnostics"]["importanceMax"] > 0
    if name == "nav4.packnet":  # every phase but the last released weights and retrained (one pass of 2 x 2)
        masking = out["metrics"]["masking"]
        assert masking["releasedWeights"] > 0 and masking["retrainUpdates"] == 4 * (
            len(out["metrics"]["successMatrix"]["phases"]) - 1
        )
        shares = out["metrics"]["methodDiagnostics"]
        assert all(shares[f"ownedShare{k}"] > 0 for k in range(len(out["metrics"]["successMatrix"]["phases"])))


WMF_FIELDS: dict[str, dict[str, Any]] = {
    "wmf.er": {"capacity": 40, "replayShare": 0.25},
    "wmf.a-gem": {"capacity": 40, "referenceSamples": 4},
    "wmf.mas": {"lambda": 1.0, "importanceBatches": 2},
    "wmf.lwf": {"strength": 1.0},
    "wmf.ewc-online": {"lambda": 100.0, "fisherBatches": 2},
    "wmf.si": {"strength": 1.0},
    "wmf.l2": {"strength": 1.0},
    "wmf.packnet": {"retrainUpdates": 2},
}


@pytest.mark.parametrize("name", sorted(WMF_FIELDS))
def test_library_methods_run_in_a_wmf_pilot(tmp_path: Path, name: str) -> None:
    from cltoolkit.suites.wmf.suite import make_method

    method = make_method(name, WMF_FIELDS[name], registries())
    out = _wmf_run(tmp_path, method)
    metrics = out["metrics"]
    assert math.isfinite(metrics["pf"]) and math.isfinite(metrics["rd"])
    assert out["budget"]["samples"]["other"] == 0
    if name == "wmf.ewc-online":
        assert metrics["fisherMax"] > 0  # over every parameter: the encoder's too, unlike wmf.ewc's
        assert metrics["methodDiagnostics"] == {"fisherMax": metrics["fisherMax"]}  # the report's table reads it
    if name == "wmf.si":
        assert metrics["importanceMax"] > 0
    if name in ("wmf.er", "wmf.a-gem"):  # windows from the suite's memory: counted as replay and memory samples
        assert out["budget"]["replaySamples"] > 0
        length = _wmf_protocol().training.sequenceLength
        assert out["budget"]["samples"]["memory"] == out["budget"]["replaySamples"] * length
    if name == "wmf.a-gem":
        assert metrics["projectedShare"] is not None
    if name == "wmf.packnet":  # task A evaluated with task B's weights at 0: the model it left task A with
        assert metrics["pf"] == 0.0 and abs(metrics["rd"]) < 1e-5  # RD: a KL of identical models, up to rounding
        assert metrics["reconAAfterB"] == metrics["reconAAfterA"] and metrics["encoderDrift"] == 1.0
        assert metrics["masking"]["retrainUpdates"] == 2 and metrics["masking"]["releasedWeights"] > 0
        assert metrics["ownedShare0"] + metrics["ownedShare1"] == pytest.approx(1.0)
        assert len(metrics["curves"]["A"]) == 3  # the first 4 of task A's 6 updates; the 2 retraining ones after
        assert out["budget"]["gradientUpdates"] == 12  # task A's 6 (retraining included) and task B's 6


def _memory(selection: str, capacity: int) -> Any:
    import numpy as np

    from cltoolkit.suites.wmf.api import _SUITE_TOKEN, _suite_training_set
    from cltoolkit.suites.wmf.envs import Episodes
    from cltoolkit.suites.wmf.memory import WindowMemory

    def episodes(n: int) -> Episodes:
        return Episodes(np.zeros((n, 11, 64, 64, 3), np.uint8), np.zeros((n, 10, 2), np.float32), np.full(n, 10))

    drawn: list[int] = []

    def draw(sources: list[Any]) -> Any:
        drawn.append(sum(n for _, n in sources))
        return sources

    rng = np.random.default_rng(0)
    memory = WindowMemory(capacity, selection, rng, 5, draw, _token=_SUITE_TOKEN)  # type: ignore[arg-type]
    return memory, {t: _suite_training_set(episodes(k), t) for t, k in (("A", 20), ("B", 4), ("C", 30))}, drawn


def test_window_memory_reservoir_and_task_balanced_selection() -> None:
    memory, sets, drawn = _memory("reservoir", 50)
    memory.add(sets["A"])  # 20 episodes x 7 windows of 5 frames = 140 offered
    assert len(memory) == 50 and memory.contents() == {"A": 50}
    memory.add(sets["B"])  # 28 more: a uniform sample over 168 offered
    assert len(memory) == 50 and set(memory.contents()) <= {"A", "B"}
    srcs = memory.sources(8)
    assert sum(n for _, n in srcs) == 8 and all(s.held is not None for s, _ in srcs)
    assert memory.draw(3) is not None and drawn == [3]
    balanced, sets, _ = _memory("task-balanced", 50)
    balanced.add(sets["A"])
    balanced.add(sets["B"])
    assert balanced.contents() == {"A": 25, "B": 25}
    balanced.add(sets["C"])
    assert balanced.contents() == {"A": 17, "B": 17, "C": 16}
    with pytest.raises(TypeError, match="whole TrainingSet"):
        balanced.add(balanced.sources(4)[0][0])  # a memory's share is not a task's training set


def test_wmf_memory_capacity_binds(tmp_path: Path) -> None:
    from cltoolkit.errors import BudgetViolation
    from cltoolkit.suites.wmf.suite import make_method

    method = make_method("wmf.er", {"capacity": 40, "replayShare": 0.25}, registries())
    with pytest.raises(BudgetViolation, match=r"^budget.memoryCapacity: the method asked for a memory of 40 windows"):
        _wmf_run(tmp_path, method, budget={"memoryCapacity": 10})


def test_packnet_releases_each_remaining_task_an_equal_share_of_the_smallest_weights() -> None:
    """Four tasks: task 0 keeps a quarter of its weights (the largest), releases three quarters to task 1, which
    keeps a third of those, and so on; owners of finished tasks never change."""
    w = torch.nn.Parameter(torch.arange(1.0, 25.0).reshape(4, 6) * torch.tensor([1.0, -1.0] * 12).reshape(4, 6))
    b = torch.nn.Parameter(torch.zeros(4))
    named = lambda: [("w", w), ("b", b)]  # noqa: E731
    pack = core.PackNet(core.PackNetFields(), tasks=4)
    owners = pack.prune(named, 0)
    assert set(owners) == {"w"}  # weight matrices only; a bias has no owner
    released = owners["w"] == 1
    assert int(released.sum()) == 19  # CW's threshold: the share-th smallest and all below it, 18 + 1
    assert bool((w.detach().abs()[released] <= 19).all()) and bool((w.detach().abs()[~released] > 19).all())
    with torch.no_grad():  # the suite zeroes what was released; task 1 trains it
        w[released] = torch.linspace(0.5, 9.5, 19)
    owners = pack.prune(named, 1)
    assert int((owners["w"] == 0).sum()) == 5  # task 0's five weights stay task 0's
    assert int((owners["w"] == 1).sum()) == 19 - int((owners["w"] == 2).sum())
    assert int((owners["w"] == 2).sum()) == 13  # two thirds of 19 (12), and the threshold's weight


def test_packnet_passes_gradients_only_to_the_tasks_own_weights_and_freezes_biases_after_its_first_pruning() -> None:
    w = torch.nn.Parameter(torch.randn(3, 4))
    b = torch.nn.Parameter(torch.randn(3))
    named = lambda: [("w", w), ("b", b)]  # noqa: E731
    pack = core.PackNet(core.PackNetFields(), tasks=2)

    def grads(index: int) -> tuple[Any, Any]:
        w.grad, b.grad = None, None
        ((w.sum(1) + b) ** 2).sum().backward()
        pack.mask_gradients(named, index)
        return w.grad.clone(), b.grad.clone()

    gw, gb = grads(0)
    assert bool((gw != 0).all()) and bool((gb != 0).all())  # task 0 owns everything, the bias still trains
    owners = pack.prune(named, 0)
    gw, gb = grads(1)
    assert bool((gw[owners["w"] == 0] == 0).all()) and bool((gw[owners["w"] == 1] != 0).all())
    assert bool((gb == 0).all())
    state = pack.state_dict()
    again = core.PackNet(core.PackNetFields(), tasks=2)
    again.load_state_dict(state)
    assert again.frozen and torch.equal(again.owner["w"], owners["w"])


def test_a_wmf_masking_method_is_held_to_its_task_budget_and_its_owners_are_checked(tmp_path: Path) -> None:
    from cltoolkit.suites.library.wmf import WmfPackNet
    from cltoolkit.suites.wmf.suite import make_method

    too_many = make_method("wmf.packnet", {"retrainUpdates": 6}, registries())
    with pytest.raises(ValueError, match=r"below training\.updatesPerTask, 6"):
        _wmf_run(tmp_path / "a", too_many)

    class Reassigns(WmfPackNet):
        """Gives task A's weights to a task that does not exist."""

        def ownership(self, model: Any, task: Any) -> dict[str, Any]:
            return {n: o + 1 for n, o in super().ownership(model, task).items()}

    bad = Reassigns(params=WmfPackNet.Params.model_validate({"retrainUpdates": 2}), name="wmf.packnet")
    with pytest.raises(ValueError, match=r"names a task outside 0\.\.1"):
        _wmf_run(tmp_path / "b", bad)
