"""The suite's record of weights owned by tasks (`cltoolkit.suites.masks`, PackNet): what it refuses, what it zeroes,
and the evaluation view it puts back bit for bit."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from cltoolkit.suites.masks import Ownership  # noqa: E402


def _named() -> tuple[Any, Any]:
    w = torch.nn.Parameter(torch.arange(1.0, 7.0).reshape(2, 3))
    return w, lambda: [("w", w)]


def test_released_weights_are_zeroed_once_and_counted() -> None:
    w, named = _named()
    owners = Ownership(tasks=3)
    assert owners.assign(named, {"w": torch.tensor([[0, 1, 1], [0, 1, 0]])}, 0) == 3
    assert w.detach().tolist() == [[1.0, 0.0, 0.0], [4.0, 0.0, 6.0]]
    with torch.no_grad():
        w.add_(1.0)  # task 1 trains its weights (and here, wrongly, the others)
    assert owners.assign(named, {"w": torch.tensor([[0, 1, 2], [0, 2, 0]])}, 1) == 2  # task 1 released two
    assert w.detach().tolist() == [[2.0, 1.0, 0.0], [5.0, 0.0, 7.0]]


def test_an_evaluation_view_zeroes_later_tasks_weights_and_restores_every_bit() -> None:
    w, named = _named()
    owners = Ownership(tasks=3)
    owners.assign(named, {"w": torch.tensor([[0, 1, 1], [0, 1, 0]])}, 0)
    with torch.no_grad():
        w.copy_(torch.tensor([[1.0, float("nan"), -0.0], [4.0, 5.0, 6.0]]))  # task 1's training
    before = w.detach().clone()
    with owners.view(named, 0):
        assert w.detach().tolist() == [[1.0, 0.0, 0.0], [4.0, 0.0, 6.0]]
    with owners.view(named, 1):
        assert torch.equal(w.detach()[:, 0], before[:, 0])
    after = w.detach()
    assert torch.equal(after.view(torch.int32), before.view(torch.int32))  # NaN and -0.0 included


@pytest.mark.parametrize(
    ("owner", "index", "message"),
    [
        (torch.zeros(2, 3), 0, "integer tensor of shape"),
        (torch.zeros(3, 2, dtype=torch.long), 0, "integer tensor of shape"),
        (torch.full((2, 3), 3), 0, "outside 0..2"),
        (torch.tensor([[1, 1, 1], [1, 1, 1]]), 1, "reassigns weights of a finished task"),
        (torch.tensor([[0, 0, 1], [0, 1, 0]]), 1, "gives weights of task 1 or later to a finished task"),
    ],
)
def test_a_methods_ownership_that_breaks_the_rules_is_refused(owner: Any, index: int, message: str) -> None:
    _, named = _named()
    owners = Ownership(tasks=3)
    owners.assign(named, {"w": torch.tensor([[0, 1, 1], [0, 1, 0]])}, 0)
    with pytest.raises(ValueError, match=message):
        owners.assign(named, {"w": owner}, index)
    with pytest.raises(ValueError, match="not a parameter"):
        owners.assign(named, {"v": owner}, index)
