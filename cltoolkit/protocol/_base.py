"""The base model every hashed or user-authored document uses: strict, closed, frozen, documented."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SeedValue", "Slug", "Strict"]

Slug = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=80)]
"""A lower-case identifier (a rule, a stage, a comparison)."""
SeedValue = Annotated[int, Field(ge=0, le=2**31 - 1)]
"""A training seed: non-negative and 31-bit, as every generator clt seeds (numpy, torch, gymnasium) accepts."""


class Strict(BaseModel):
    """Strict (no coercion), closed (`extra="forbid"`), frozen; field docstrings become schema descriptions."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        populate_by_name=False,
    )
