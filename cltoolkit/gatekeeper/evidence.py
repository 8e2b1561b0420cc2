"""The evidence a results block rests on: one version of component code per comparison, and the manifest of
the records used (run id -> seal). Which records can be used at all is `cltoolkit.run.trust`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cltoolkit.errors import Refusal
from cltoolkit.protocol.lock import Lock, accepted_code, code_state
from cltoolkit.protocol.models import Status
from cltoolkit.protocol.results import CodeState
from cltoolkit.run.record import RunRecord

__all__ = ["check_component_code", "check_pinned_code", "evidence_manifest"]


def check_component_code(records: Sequence[RunRecord], allow_mixed: bool, where: str) -> list[str]:
    """Records of one comparison must come from the same component code (distribution, version, source digest).

    Refused unless `allow_mixed`; then each difference is returned to be shown (in red) in the report. Records
    written before component provenance was recorded say nothing and are not compared."""
    by_comp: dict[str, dict[str, list[str]]] = {}
    for rec in records:
        if rec.provenance.components is None:
            continue
        key = json.dumps({k: v.model_dump() for k, v in sorted(rec.provenance.components.items())}, sort_keys=True)
        by_comp.setdefault(rec.spec.comparison, {}).setdefault(key, []).append(rec.runId)
    lines = []
    for comp, variants in sorted(by_comp.items()):
        if len(variants) > 1:
            parts = [json.loads(k) for k in variants]
            differ = sorted({n for p in parts for n in p if any(q.get(n) != p.get(n) for q in parts)})
            runs = "; ".join(", ".join(sorted(ids)[:3]) + ("..." if len(ids) > 3 else "") for ids in variants.values())
            lines.append(
                f"comparison {comp!r}: records come from {len(variants)} versions of component code "
                f"({', '.join(differ)} differ; runs {runs})"
            )
    if lines and not allow_mixed:
        raise Refusal(
            f"{where}: records of one comparison were made by different code:\n"
            + "\n".join(lines)
            + "\nRerun them under one version of the code, or report with --allow-mixed-code (the report flags it)"
        )
    return lines


NOW = "(this report)"
"""Stands for the code that runs while the report is computed (the suite's analysis) among the records' run ids."""


def check_pinned_code(
    records: Sequence[RunRecord],
    lock: Lock,
    status: Status | None,
    allow_mixed: bool,
    where: str,
    reporting: Mapping[str, str] | None = None,
) -> tuple[dict[str, CodeState], list[str]]:
    """Each component's code in the records, and the code computing this report (`reporting`: `<kind>:<name>` ->
    source digest, the suite's analysis), against the code the lock pinned: `<kind>:<name>` -> as frozen |
    amended | differs (empty for a lock that pins no code). Code that is neither pinned nor amended is refused
    unless `allow_mixed`; then each is returned as a line to be shown in red."""
    if lock.components is None:
        return {}, []
    amendments = status.codeAmendments if status else []
    digests: dict[str, dict[str, list[str]]] = {}
    for rec in records:
        for name, source in (rec.provenance.components or {}).items():
            digests.setdefault(name, {}).setdefault(source.sourceSha256, []).append(rec.runId)
    for name, digest in (reporting or {}).items():
        if name in lock.components:
            digests.setdefault(name, {}).setdefault(digest, []).append(NOW)
    states: dict[str, CodeState] = {}
    lines = []
    for name, by_digest in sorted(digests.items()):
        states[name] = code_state(lock.components, amendments, name, set(by_digest))
        pin = lock.components.get(name)
        accepted = accepted_code(lock.components, amendments, name)
        for digest, ids in sorted(by_digest.items()):
            if digest not in accepted:
                pinned = pin.sourceSha256 if pin else "nothing for it"
                runs = [i for i in sorted(ids) if i != NOW]
                if NOW in ids:
                    lines.append(
                        f"{name}: the code computing this report is {digest}; the lock pinned {pinned}, no amendment "
                        "covers it"
                    )
                if runs:
                    shown = ", ".join(runs[:3]) + ("..." if len(runs) > 3 else "")
                    lines.append(
                        f"{name}: runs {shown} carry code {digest}; the lock pinned {pinned}, no amendment covers it"
                    )
    if lines and not allow_mixed:
        raise Refusal(
            f"{where}: code that differs from the code pinned at freezing:\n"
            + "\n".join(lines)
            + "\nRun (or report) with the frozen code, record a dated code amendment (`clt protocol amend-code`), or "
            "report with --allow-mixed-code (the report flags it)"
        )
    return states, lines


def evidence_manifest(records: Sequence[RunRecord]) -> dict[str, Any]:
    """run id -> seal of every record the results used (sorted by run id)."""
    return {r.runId: r.seal for r in sorted(records, key=lambda r: r.runId)}
