"""Versioned ids: `<name>-v<N>` for protocols and metrics (one regex for the id, one for its parts)."""

from __future__ import annotations

import re
from typing import NamedTuple

from cltoolkit.errors import InputError

__all__ = ["ID_PATTERN", "VersionedId", "parse_id"]

#: The whole id: lower-case words joined by '-' or '.', then '-v' and a positive version without leading zeros.
ID_PATTERN = r"^[a-z][a-z0-9]*(?:[.-][a-z0-9]+)*-v[1-9][0-9]*$"
_PARTS = re.compile(r"^(?P<name>[a-z][a-z0-9]*(?:[.-][a-z0-9]+)*?)-v(?P<version>[1-9][0-9]*)$")


class VersionedId(NamedTuple):
    name: str
    version: int

    def __str__(self) -> str:
        return f"{self.name}-v{self.version}"

    def bumped(self) -> VersionedId:
        return VersionedId(self.name, self.version + 1)


def parse_id(text: str) -> VersionedId:
    """Split `wmf-lite-v1` into ('wmf-lite', 1); raise `InputError` explaining the form otherwise."""
    match = _PARTS.match(text)
    if match is None:
        raise InputError(
            f"{text!r} is not a versioned id: expected '<name>-v<N>' such as 'nav4-v1' "
            "(lower-case name, positive version without leading zeros)"
        )
    return VersionedId(match["name"], int(match["version"]))
