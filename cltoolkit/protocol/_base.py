"""The base model every hashed or user-authored document uses: strict, closed, frozen, documented."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict"]


class Strict(BaseModel):
    """Strict (no coercion), closed (`extra="forbid"`), frozen; field docstrings become schema descriptions."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        populate_by_name=False,
    )
