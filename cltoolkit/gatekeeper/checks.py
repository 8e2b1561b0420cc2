"""Refusal rules: each a small check whose message says what failed, why, and what to do."""

from __future__ import annotations

from collections.abc import Sequence

from cltoolkit.errors import Refusal
from cltoolkit.protocol.models import ProtocolBase
from cltoolkit.run.record import RunRecord
from cltoolkit.run.store import StoreScan

__all__ = [
    "check_declared_aggregate",
    "check_no_duplicates",
    "check_toolkit_versions",
]


def check_no_duplicates(scan: StoreScan, where: str) -> None:
    if scan.duplicates:
        raise Refusal(
            f"{where}: run id(s) {', '.join(sorted(set(scan.duplicates)))} appear in more than one record (or in a "
            "folder of another name); each planned run has exactly one record. Remove the copies"
        )


def check_toolkit_versions(records: Sequence[RunRecord], allow_mixed: bool, where: str) -> list[str]:
    versions = sorted({r.provenance.toolkitVersion for r in records})
    if len(versions) > 1 and not allow_mixed:
        raise Refusal(
            f"{where}: records come from toolkit versions {', '.join(versions)}; mixing them could mix "
            "implementations. Rerun under one version, or declare analysis.allowMixedToolkitVersions in a new "
            "protocol version"
        )
    return versions


def check_declared_aggregate(protocol: ProtocolBase, requested: str | None, protocol_id: str) -> None:
    """An aggregate is chosen before results: a report asking for another one is refused."""
    declared = protocol.analysis.aggregate
    if requested is not None and requested != declared:
        raise Refusal(
            f"{protocol_id}: aggregate {requested!r} is not the declared one ({declared!r}). Aggregation is chosen "
            "before results; to report another aggregate, bump the protocol "
            f"(`clt protocol bump {protocol_id}`) and declare it"
        )
