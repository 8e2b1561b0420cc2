"""Split tools (seed 003, "leakage and shift"): grouped splits by key, random row splits named as such,
chronological splits with an embargo derived from the rows' observation supports, and a guard that learned
preprocessing is fitted on training rows only.

Every split returns a `SplitManifest`: the realized lists, their hash (recorded in run records), and row counts
kept apart from independent-unit counts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cltoolkit.errors import CheckFailed

__all__ = [
    "SplitManifest",
    "Standardizer",
    "check_fit_rows",
    "check_grouped",
    "chronological_split",
    "embargo_width",
    "grouped_split",
    "random_row_split",
    "shares_observation",
]


@dataclass(frozen=True)
class SplitManifest:
    """A realized split: which units and rows went where, and how many independent units each side holds."""

    kind: str
    """`grouped`, `random-rows` or `chronological`."""
    unit: str
    """What one independent unit is (session, layout seed, ...); `row` when rows are split directly."""
    train: tuple[Any, ...]
    """Training units (group keys, or row indices for row splits)."""
    test: tuple[Any, ...]
    """Held-out units."""
    train_rows: int
    test_rows: int
    train_units: int
    test_units: int
    embargoed_rows: int = 0

    @property
    def sha256(self) -> str:
        """Hash of the realized lists (kind, unit, train, test): equal manifests mean identical held-out rows."""
        body = json.dumps(
            {"kind": self.kind, "unit": self.unit, "train": list(self.train), "test": list(self.test)},
            sort_keys=True,
            separators=(",", ":"),
            default=str,
        )
        return "sha256:" + hashlib.sha256(body.encode()).hexdigest()

    def as_dict(self, lists: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "unit": self.unit,
            "sha256": self.sha256,
            "rows": {"train": self.train_rows, "test": self.test_rows, "embargoed": self.embargoed_rows},
            "independentUnits": {"train": self.train_units, "test": self.test_units},
        }
        if lists:
            out["train"] = list(self.train)
            out["test"] = list(self.test)
        return out


def _sorted(keys: Iterable[Hashable]) -> list[Any]:
    items = list(keys)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=str)


def grouped_split(
    keys: Sequence[Hashable], n_test_groups: int, rng: np.random.Generator, *, unit: str = "group"
) -> tuple[np.ndarray, np.ndarray, SplitManifest]:
    """Partition rows by group key: `n_test_groups` whole groups held out. Returns train / test row indices."""
    groups = list(dict.fromkeys(keys))
    if not 0 < n_test_groups < len(groups):
        raise ValueError(f"need 0 < test groups < {len(groups)} groups, got {n_test_groups}")
    order = rng.permutation(len(groups))
    test_groups = _sorted(groups[i] for i in order[:n_test_groups])
    train_groups = _sorted(groups[i] for i in order[n_test_groups:])
    held = set(test_groups)
    is_test = np.array([k in held for k in keys])
    train_idx, test_idx = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    manifest = SplitManifest(
        "grouped",
        unit,
        tuple(train_groups),
        tuple(test_groups),
        int(train_idx.size),
        int(test_idx.size),
        len(train_groups),
        len(test_groups),
    )
    return train_idx, test_idx, manifest


def random_row_split(
    n_rows: int, test_fraction: float, rng: np.random.Generator, *, keys: Sequence[Hashable] | None = None
) -> tuple[np.ndarray, np.ndarray, SplitManifest]:
    """Rows assigned at random (a within-unit interpolation estimand, not transfer). With `keys`, the manifest
    counts the distinct units each side touches: they overlap, which is the point to report."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test fraction must be in (0, 1), got {test_fraction}")
    n_test = round(n_rows * test_fraction)
    perm = rng.permutation(n_rows)
    test_idx, train_idx = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    if keys is None:
        tr_units, te_units = int(train_idx.size), int(test_idx.size)
    else:
        tr_units, te_units = len({keys[i] for i in train_idx}), len({keys[i] for i in test_idx})
    manifest = SplitManifest(
        "random-rows",
        "row",
        tuple(int(i) for i in train_idx),
        tuple(int(i) for i in test_idx),
        int(train_idx.size),
        int(test_idx.size),
        tr_units,
        te_units,
    )
    return train_idx, test_idx, manifest


def check_grouped(keys: Sequence[Hashable], train_idx: Iterable[int], test_idx: Iterable[int]) -> list[str]:
    """Group keys found on both sides of a split (empty when the split never crosses a key)."""
    crossing = {keys[i] for i in train_idx} & {keys[i] for i in test_idx}
    return [str(k) for k in _sorted(crossing)]


def shares_observation(a: int, b: int, window: int, horizon: int) -> bool:
    """Rows centred at `a` and `b` share an observation iff |a - b| <= W - 1 + L.

    A row centred at t uses the W states t-W+1..t and predicts t+1..t+L: its support is [t-W+1, t+L].
    """
    if window < 1 or horizon < 0:
        raise ValueError("need window >= 1 and horizon >= 0")
    return abs(a - b) <= window - 1 + horizon


def embargo_width(window: int, horizon: int) -> int:
    """Centres to drop between the last training centre a and the first test centre b so that supports are
    disjoint (a + L < b - W + 1, i.e. b - a >= W + L): W + L - 1."""
    return window + horizon - 1


def chronological_split(
    centres: Sequence[int], test_start: int, window: int, horizon: int
) -> tuple[np.ndarray, np.ndarray, SplitManifest]:
    """Past-to-future split: test rows are centres >= `test_start`; training rows are earlier centres whose
    support ends before the first test row's support begins (the embargo removes the rest, on the training side)."""
    c = np.asarray(centres)
    test = np.flatnonzero(c >= test_start)
    first_test = int(c[test].min()) if test.size else test_start
    train = np.flatnonzero(c + horizon < first_test - window + 1)
    embargoed = int(c.size - test.size - train.size)
    manifest = SplitManifest(
        "chronological",
        "row",
        tuple(int(i) for i in train),
        tuple(int(i) for i in test),
        int(train.size),
        int(test.size),
        int(train.size),
        int(test.size),
        embargoed,
    )
    return train, test, manifest


def check_fit_rows(name: str, fitted_rows: Sequence[int] | np.ndarray, train_rows: Sequence[int] | np.ndarray) -> None:
    """Refuse a learned preprocessing step that saw rows outside the training rows (a leak across the boundary)."""
    outside = sorted(set(int(i) for i in fitted_rows) - set(int(i) for i in train_rows))
    if outside:
        shown = ", ".join(str(i) for i in outside[:5]) + (", ..." if len(outside) > 5 else "")
        raise CheckFailed(
            f"preprocessing {name!r} was fitted on {len(outside)} row(s) outside the training rows ({shown}); "
            "fit learned transforms on training rows only"
        )


class Standardizer:
    """Per-feature standardization that remembers which rows it was fitted on (see `check_fit_rows`)."""

    def __init__(self, name: str = "standardizer") -> None:
        self.name = name
        self.fitted_rows: np.ndarray | None = None
        self.mean: np.ndarray | None = None
        self.scale: np.ndarray | None = None

    def fit(self, features: np.ndarray, rows: np.ndarray) -> Standardizer:
        x = np.asarray(features, dtype=float)[rows]
        self.fitted_rows = np.asarray(rows)
        self.mean = x.mean(axis=0)
        sd = x.std(axis=0)
        self.scale = np.where(sd > 0, sd, 1.0)
        return self

    def transform(self, features: np.ndarray) -> np.ndarray:
        if self.mean is None or self.scale is None:
            raise RuntimeError(f"{self.name} is not fitted")
        out: np.ndarray = (np.asarray(features, dtype=float) - self.mean) / self.scale
        return out

    def check(self, train_rows: Sequence[int] | np.ndarray) -> None:
        """Raise `CheckFailed` unless every fitted row is a training row."""
        if self.fitted_rows is None:
            raise RuntimeError(f"{self.name} is not fitted")
        check_fit_rows(self.name, self.fitted_rows, train_rows)
