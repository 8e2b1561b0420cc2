"""Split tools: the embargo rule, grouped splits never crossing a key, preprocessing fitted on test rows caught."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cltoolkit.errors import CheckFailed
from cltoolkit.splits import (
    Standardizer,
    check_fit_rows,
    check_grouped,
    chronological_split,
    embargo_width,
    grouped_split,
    random_row_split,
    shares_observation,
)


def test_embargo_rule_w3_l1() -> None:
    # seed 003: for W = 3, L = 1 centres three steps apart still share one observation; four apart do not
    assert shares_observation(10, 13, window=3, horizon=1)
    assert not shares_observation(10, 14, window=3, horizon=1)
    assert embargo_width(3, 1) == 3


@given(st.integers(1, 6), st.integers(0, 4), st.integers(0, 30), st.integers(0, 30))
def test_shares_observation_matches_supports(w: int, h: int, a: int, b: int) -> None:
    support = lambda t: set(range(t - w + 1, t + h + 1))  # noqa: E731
    assert shares_observation(a, b, w, h) == bool(support(a) & support(b))


@given(st.integers(1, 5), st.integers(0, 3), st.integers(12, 40))
def test_chronological_split_leaves_disjoint_supports(w: int, h: int, start: int) -> None:
    centres = list(range(w - 1, 60))
    train, test, manifest = chronological_split(centres, start, w, h)
    assert train.size
    assert test.size
    last_train, first_test = centres[train.max()], centres[test.min()]
    assert not shares_observation(last_train, first_test, w, h)
    assert shares_observation(last_train + 1, first_test, w, h)  # the embargo is no wider than needed
    assert manifest.embargoed_rows == embargo_width(w, h) == first_test - last_train - 1
    assert manifest.train_rows + manifest.test_rows + manifest.embargoed_rows == len(centres)


@settings(max_examples=50)
@given(st.lists(st.integers(0, 9), min_size=4, max_size=200), st.integers(0, 2**32 - 1))
def test_grouped_split_never_crosses_a_key(keys: list[int], seed: int) -> None:
    groups = len(set(keys))
    if groups < 2:
        with pytest.raises(ValueError):
            grouped_split(keys, 1, np.random.default_rng(seed))
        return
    n_test = 1 + seed % (groups - 1)
    train, test, manifest = grouped_split(keys, n_test, np.random.default_rng(seed))
    assert check_grouped(keys, train, test) == []
    assert sorted([*train, *test]) == list(range(len(keys)))
    assert manifest.test_units == n_test
    assert manifest.train_units == groups - n_test
    assert set(manifest.test) == {keys[i] for i in test}
    assert manifest.train_rows == train.size
    assert manifest.test_rows == test.size


def test_random_rows_cross_keys_and_are_reported() -> None:
    keys = [j for j in range(10) for _ in range(20)]
    train, test, manifest = random_row_split(len(keys), 0.3, np.random.default_rng(0), keys=keys)
    assert check_grouped(keys, train, test)  # sessions on both sides: the point of reporting it
    assert manifest.unit == "row"
    assert manifest.test_rows == 60
    assert manifest.test_units == 10


def test_manifest_hash_names_the_realized_split() -> None:
    keys = [j for j in range(8) for _ in range(5)]
    a = grouped_split(keys, 3, np.random.default_rng(1))[2]
    b = grouped_split(keys, 3, np.random.default_rng(1))[2]
    c = grouped_split(keys, 3, np.random.default_rng(2))[2]
    assert a.sha256 == b.sha256 != c.sha256
    assert a.as_dict()["independentUnits"] == {"train": 5, "test": 3}


def test_preprocessing_fitted_on_test_rows_is_caught() -> None:
    x = np.random.default_rng(0).normal(size=(50, 2))
    train = np.arange(35)
    Standardizer().fit(x, train).check(train)
    leaky = Standardizer("scaler").fit(x, np.arange(50))  # fitted on every row, test rows included
    with pytest.raises(CheckFailed, match=r"'scaler' was fitted on 15 row\(s\) outside the training rows \(35, 36"):
        leaky.check(train)
    with pytest.raises(CheckFailed):
        check_fit_rows("pca", [0, 1, 49], train)
