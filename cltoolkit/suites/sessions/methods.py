"""The two model families compared: an affine model of (s_t, a_t) and k-NN on a state window."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from pydantic import Field

from cltoolkit.components import Method
from cltoolkit.protocol._base import Strict
from cltoolkit.splits import Standardizer
from cltoolkit.suites.sessions.data import Rows

ParamsT = TypeVar("ParamsT", bound="Strict | None")
"""A model's hyperparameter model (`Params`), or None for a model without hyperparameters."""

__all__ = ["Affine", "KNearest", "KNearestParams", "SessionModel", "SessionsTaskEnd", "SessionsTaskStart"]


@dataclass(frozen=True)
class SessionsTaskStart:
    """A fit begins: one model per split (the grouped split's model is also scored on the shifted cohort)."""

    task: str
    """The split's set id (the protocol's `splits.groupedSet` or `splits.randomSet`)."""
    index: int
    """0: each model is fitted once."""
    trainingRows: int
    """Rows the model is fitted on."""


@dataclass(frozen=True)
class SessionsTaskEnd:
    """The fit is over; scoring follows (no hook fires during it)."""

    task: str
    index: int
    last: bool
    """No fit follows on this model (always true here)."""


@dataclass
class SessionModel(Method, Generic[ParamsT]):
    """A next-state model fitted on some rows and scored on others.

    The lifecycle has the names of every suite's (`cltoolkit.plugin`): `begin_task(task)`, `fit`, `end_task(task)`,
    then `predict` on the split's test rows and `diagnostics()` for the record; one fit per model and no optimiser,
    so no step hooks."""

    suite: ClassVar[str] = "sessions"

    params: ParamsT
    """The comparison's validated hyperparameters (an instance of `Params`, or None)."""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        """Set up the method's own state (subclasses override; called once per model)."""

    def begin_task(self, task: SessionsTaskStart) -> None:
        """A fit starts."""

    def end_task(self, task: SessionsTaskEnd) -> None:
        """The fit is over."""

    def fit(self, rows: Rows, train: np.ndarray) -> None:
        raise NotImplementedError

    def predict(self, rows: Rows, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def diagnostics(self) -> dict[str, float | None]:
        """Extra numbers of the fitted model for the record and the report (names are the method's own)."""
        return {}

    def preprocessing(self) -> list[Standardizer]:
        """Learned preprocessing steps (checked to be fitted on training rows only)."""
        return []


class Affine(SessionModel[None]):
    """s_{t+1} ~ b0 + b1 s_t + b2 a_t by least squares: the true family, without the session constant."""

    summary = "affine least squares on (s_t, a_t)"

    def fit(self, rows: Rows, train: np.ndarray) -> None:
        x = self._design(rows, train)
        self.coef, *_ = np.linalg.lstsq(x, rows.target[train], rcond=None)

    def predict(self, rows: Rows, idx: np.ndarray) -> np.ndarray:
        return np.asarray(self._design(rows, idx) @ self.coef)

    @staticmethod
    def _design(rows: Rows, idx: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(idx.size), rows.window[idx, -1], rows.action[idx]])


class KNearestParams(Strict):
    """k-NN hyperparameters."""

    k: int = Field(ge=1)
    """Neighbours averaged."""
    window: int = Field(ge=1)
    """States in the feature window (s_{t-window+1} .. s_t); the current action is always a feature."""


class KNearest(SessionModel[KNearestParams]):
    """Mean target of the k nearest training rows in standardized (state window, a_t) space (Euclidean)."""

    Params = KNearestParams
    summary = "k-NN on a state window and the current action"

    def _features(self, rows: Rows) -> np.ndarray:
        return np.column_stack([rows.window[:, -self.params.window :], rows.action])

    def fit(self, rows: Rows, train: np.ndarray) -> None:
        from scipy.spatial import cKDTree

        feats = self._features(rows)
        self.scaler = Standardizer("k-NN feature standardization").fit(feats, train)
        self.tree = cKDTree(self.scaler.transform(feats[train]))
        self.targets = rows.target[train]

    def predict(self, rows: Rows, idx: np.ndarray) -> np.ndarray:
        _, nn = self.tree.query(self.scaler.transform(self._features(rows)[idx]), k=self.params.k)
        nn = nn.reshape(idx.size, -1)
        return np.asarray(self.targets[nn].mean(axis=1))

    def preprocessing(self) -> list[Standardizer]:
        return [self.scaler]
