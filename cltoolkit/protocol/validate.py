"""Structural validation of a protocol document: strict parsing into a given model and the id rule.

Nothing here knows what is registered. The checks that need registered components (suite, method, metric names,
method hyperparameters, the suite's own checks) run one layer up, in `cltoolkit.component_validation`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from cltoolkit.errors import Problem, ValidationFailed, pydantic_problems
from cltoolkit.protocol.models import ProtocolBase

__all__ = ["LoadedProtocol", "id_problems", "validate_structure"]

P = TypeVar("P", bound=ProtocolBase)


@dataclass(frozen=True)
class LoadedProtocol:
    """A validated protocol: the raw document (what the hash covers), the model, and where it came from."""

    path: Path
    document: dict[str, Any]
    model: ProtocolBase
    warnings: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.model.id


def validate_structure(document: dict[str, Any], source: str, model_type: type[P]) -> P:
    """Parse a document strictly into `model_type`; raises `ValidationFailed` with one problem per error."""
    try:
        return model_type.model_validate_json(json.dumps(document), strict=True)
    except ValidationError as exc:
        raise ValidationFailed(problems=pydantic_problems(exc, source)) from None


def id_problems(model: ProtocolBase, source: str, expected_id: str | None) -> list[Problem]:
    """The id must match the file name it was loaded from, and every reference inside the document must resolve
    (each problem at the JSON pointer of the field that holds it)."""
    problems = [Problem(f"{source}: {where}", message) for where, message in model.reference_problems()]
    if expected_id is None or model.id == expected_id:
        return problems
    return [
        Problem(f"{source}: /id", f"id {model.id!r} does not match the file name (expected {expected_id!r})"),
        *problems,
    ]
