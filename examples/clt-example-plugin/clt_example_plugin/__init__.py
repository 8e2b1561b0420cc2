"""Example plugin: a ladder method that shrinks a declared linear model's state coefficient toward 1."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from cltoolkit.plugin import Params
from cltoolkit.suites.ladder.methods import DynamicsModel, LinearModel


class ShrunkParams(Params):
    """Hyperparameters, validated strictly when a protocol is validated."""

    a: float
    """State coefficient before shrinkage."""
    b: float
    """Action coefficient."""
    shrink: float = Field(ge=0.0, le=1.0)
    """Fraction of the way from `a` to 1 (a random walk prior)."""


class Shrunk(DynamicsModel[ShrunkParams]):
    """s' = (a + shrink (1 - a)) s + b u."""

    Params = ShrunkParams
    summary = "example plugin: linear model with the state coefficient shrunk toward 1"

    @classmethod
    def build(cls, params: ShrunkParams, protocol: Any, rng: np.random.Generator) -> LinearModel:
        return LinearModel(params.a + params.shrink * (1 - params.a), params.b, 0.0)


def register(regs: Any) -> None:
    """Entry point of the `cltoolkit.plugins` group: add this package's components."""
    regs.method.register("example.shrunk", "clt_example_plugin:Shrunk", origin="plugin clt-example-plugin")
