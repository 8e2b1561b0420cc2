"""Canonical protocol hash, canonicalization `jcs-sha256/v1` (docs/design.md section 2).

`sha256:` + hex SHA-256 of the RFC 8785 (JCS) serialization of the document with the top-level keys
`results` and `status` removed. The id is stored with every hash; a new algorithm gets a new id, never new
values for this one (pinned by tests/protocol/test_hash.py (`test_golden`)).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from cltoolkit.errors import InputError
from cltoolkit.jcs import CanonicalizationError, canonical_json

__all__ = ["CANONICALIZATION", "UNHASHED_KEYS", "canonical_bytes", "hashed_content", "protocol_hash"]

CANONICALIZATION: Final = "jcs-sha256/v1"
UNHASHED_KEYS = frozenset({"results", "status"})


def hashed_content(document: dict[str, Any]) -> dict[str, Any]:
    """The part of a protocol document that the hash covers."""
    return {k: v for k, v in document.items() if k not in UNHASHED_KEYS}


def canonical_bytes(document: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of the hashed content."""
    try:
        return canonical_json(hashed_content(document))
    except CanonicalizationError as exc:
        raise InputError(f"cannot canonicalize the document (RFC 8785): {exc}") from None


def protocol_hash(document: dict[str, Any]) -> str:
    """`sha256:<hex>` of the canonical hashed content."""
    return "sha256:" + hashlib.sha256(canonical_bytes(document)).hexdigest()
