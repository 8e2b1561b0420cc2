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
    "check_no_foreign_hash",
    "check_no_pilot",
    "check_toolkit_versions",
]


def check_no_foreign_hash(records: Sequence[RunRecord], sha256: str, where: str) -> None:
    foreign = [r for r in records if r.protocol.sha256 != sha256]
    if foreign:
        hashes = sorted({r.protocol.sha256 for r in foreign})
        raise Refusal(
            f"{where}: {len(foreign)} record(s) were produced by another version of the protocol content "
            f"({', '.join(hashes)}; frozen is {sha256}), e.g. run {foreign[0].runId}. Results of different "
            "protocols are never mixed: move those records out, or bump the protocol and rerun"
        )


def check_no_pilot(records: Sequence[RunRecord], where: str) -> None:
    pilots = [r.runId for r in records if r.protocol.pilot]
    if pilots:
        raise Refusal(
            f"{where}: {len(pilots)} pilot record(s) in the official store (e.g. {pilots[0]}). Pilot runs never "
            "report results: remove them and run the frozen protocol without --pilot"
        )


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
            "before "
            f"results; to report another aggregate, bump the protocol (`clt protocol bump {protocol_id}`) and declare "
            "it"
        )
