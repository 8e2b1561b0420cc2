"""Protocols: strict loading, models, the canonical hash, and the freeze ledger."""

from cltoolkit.protocol.hashing import CANONICALIZATION, canonical_bytes, hashed_content, protocol_hash
from cltoolkit.protocol.load import json_pointer, load_json_file, loads_strict
from cltoolkit.protocol.models import SCHEMA_VERSION, Comparison, Gate, ProtocolBase
from cltoolkit.protocol.results import Results
from cltoolkit.protocol.validate import LoadedProtocol, id_problems, validate_structure

__all__ = [
    "CANONICALIZATION",
    "SCHEMA_VERSION",
    "Comparison",
    "Gate",
    "LoadedProtocol",
    "ProtocolBase",
    "Results",
    "canonical_bytes",
    "hashed_content",
    "id_problems",
    "json_pointer",
    "load_json_file",
    "loads_strict",
    "protocol_hash",
    "validate_structure",
]
