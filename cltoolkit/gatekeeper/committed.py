"""`clt report --check` and `--render`: every committed results block recomputed from the records in place, the
reported-stage manifest checked, and every report rendered again and compared byte for byte."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cltoolkit._io import atomic_write_text
from cltoolkit.component_validation import load_protocol
from cltoolkit.gatekeeper.gatekeeper import gatekeep
from cltoolkit.project import Project
from cltoolkit.protocol.results import Results
from cltoolkit.protocol.validate import LoadedProtocol
from cltoolkit.registry import registries
from cltoolkit.run.record import RunRecord

__all__ = ["CheckOutcome", "check_results", "render_committed"]


@dataclass
class CheckOutcome:
    """One committed results block recomputed from the records in place."""

    source: str
    stage: str
    records: int
    differences: list[str]


def _committed_blocks(project: Project, loaded: LoadedProtocol) -> list[tuple[str, dict[str, Any]]]:
    """The protocol's own results block and every per-stage `reports/<id>/<stage>/results.json`."""
    from cltoolkit.protocol.load import load_json_file

    blocks: list[tuple[str, dict[str, Any]]] = []
    own = loaded.document.get("results")
    if isinstance(own, dict):
        blocks.append((f"{loaded.path.name}: /results", own))
    folder = project.reports_dir / loaded.id
    for path in sorted(folder.glob("*/results.json")) if folder.is_dir() else []:
        blocks.append((str(path.relative_to(project.root)), load_json_file(path)))
    return blocks


def _manifest_problems(project: Project, loaded: LoadedProtocol, manifest: list[str]) -> list[tuple[str, str, str]]:
    """(where, stage, problem) for each reported stage (`status.reportedStages`) whose results block or report is
    gone, and for a manifest that lists nothing though results were reported."""
    out = []
    if manifest and not isinstance(loaded.document.get("results"), dict):
        out.append(
            (f"{loaded.path.name}: /results", manifest[-1], "the results block of a reported protocol is missing")
        )
    for stage in manifest:
        folder = project.stage_reports_dir(loaded.id, stage)
        for name in ("results.json", "report.md", "report.html"):
            if not (folder / name).is_file():
                where = str((folder / name).relative_to(project.root))
                out.append(
                    (where, stage, f"stage {stage!r} was reported (status.reportedStages) but {where} is missing")
                )
    return out


def _report_pair(project: Project, protocol_id: str, source: str, stage: str) -> tuple[Path, Path]:
    """report.md and report.html beside a committed block: the protocol's own block has the top-level pair
    (`reports/<id>/`), a stage's `results.json` the pair in its folder."""
    from cltoolkit.report.render import report_paths

    paths = report_paths(project, protocol_id, stage)
    md, html = paths[:2] if source.endswith(": /results") else paths[2:]
    return md, html


def _rendering_problems(
    project: Project,
    loaded: LoadedProtocol,
    source: str,
    committed: dict[str, Any],
    records: Sequence[RunRecord],
    rendered: dict[str, tuple[str, str]],
) -> list[str]:
    """The reports beside a committed results block, rendered again from that block and its records: any
    difference (an edited PASS, a deleted file) is named with its first differing line. `rendered`: the reports
    already rendered in this check, by block (the protocol's own block and its stage's `results.json` are equal
    blocks of the same records, and a report is a function of its block and records only)."""
    from cltoolkit.report.render import render_report, without_environment_lines

    try:
        block = Results.model_validate_json(json.dumps(committed))
    except ValueError:
        return []  # the block itself differs from the recomputed one: named by the comparison
    md_path, html_path = _report_pair(project, loaded.id, source, block.stage)
    key = json.dumps(committed, sort_keys=True)
    if key not in rendered:
        rendered[key] = render_report(project, loaded, block, records)
    md, page = rendered[key]
    problems = []
    for path, text in ((md_path, md), (html_path, page)):
        where = path.relative_to(project.root)
        if not path.is_file():
            problems.append(f"{where}: missing (its results block is committed)")
            continue
        on_disk = without_environment_lines(path.read_text(encoding="utf-8"))
        text = without_environment_lines(text)
        if on_disk != text:
            line = next(
                (i for i, (a, b) in enumerate(zip(on_disk.splitlines(), text.splitlines(), strict=False), 1) if a != b),
                min(len(on_disk.splitlines()), len(text.splitlines())) + 1,
            )
            problems.append(f"{where}: differs from the report rendered from its results block (first at line {line})")
    return problems


def render_committed(project: Project, ref: str) -> list[Path]:
    """Write the reports of every committed results block again, rendered from the block and its records (after the
    report's layout changed). The blocks must reproduce from the records first (`check_results`, reports aside)."""
    from cltoolkit.report.render import render_report

    check_results(project, ref, reports=False)
    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    written = []
    for source, committed in _committed_blocks(project, loaded):
        block = Results.model_validate_json(json.dumps(committed))
        _, _, records = gatekeep(project, ref, stage=block.stage, allow_mixed_code=bool(block.mixedComponentCode))
        md, page = render_report(project, loaded, block, records)
        md_path, html_path = _report_pair(project, loaded.id, source, block.stage)
        project.writable(md_path.parent)
        atomic_write_text(md_path, md)
        atomic_write_text(html_path, page)
        written += [md_path, html_path]
    return written


def check_results(project: Project, ref: str, *, reports: bool = True) -> list[CheckOutcome]:
    """`clt report --check`: recompute every committed results block of a protocol from the records in place and
    compare (everything but `measuredOn`). Raises `CheckFailed` naming each difference: an edited, added or removed
    record, or code that now computes another number."""
    from cltoolkit.errors import CheckFailed
    from cltoolkit.protocol.lock import diff_documents
    from cltoolkit.report.render import report_paths

    regs = registries(project.components_file)
    loaded = load_protocol(project.resolve_protocol(ref), regs)
    blocks = _committed_blocks(project, loaded)
    manifest = loaded.model.status.reportedStages if loaded.model.status else []
    if not blocks and not manifest:
        raise CheckFailed(f"{loaded.id} has no results to check: report it first (`clt report --protocol {loaded.id}`)")
    outcomes = [
        CheckOutcome(where, stage, 0, [problem])
        for where, stage, problem in (_manifest_problems(project, loaded, manifest) if reports else [])
    ]
    gatekept: dict[tuple[str | None, bool], tuple[Results, list[RunRecord]]] = {}  # a stage's two blocks: once
    rendered: dict[str, tuple[str, str]] = {}
    for source, committed in blocks:
        stage = committed.get("stage")
        key = (stage if isinstance(stage, str) else None, bool(committed.get("mixedComponentCode")))
        if key not in gatekept:
            _, results, records = gatekeep(project, ref, stage=key[0], allow_mixed_code=key[1])
            gatekept[key] = (results, records)
        results, records = gatekept[key]
        paths = report_paths(project, loaded.id, results.stage)
        fresh = results.model_copy(update={"reports": [str(p.relative_to(project.root)) for p in paths]})
        now = json.loads(json.dumps(fresh.model_dump(mode="json"), allow_nan=False))
        was = {k: v for k, v in committed.items() if k != "measuredOn"}
        now.pop("measuredOn", None)
        if "componentCode" not in committed and not now.get("componentCode"):
            now.pop("componentCode", None)  # a block written before locks pinned code
        changes = [str(c) for c in diff_documents(was, now)]
        if reports:
            changes += _rendering_problems(project, loaded, source, committed, records, rendered)
        # which records changed comes first: the evidence lines name them by run id
        differences = sorted(changes, key=lambda line: not line.startswith("/evidence/"))
        outcomes.append(CheckOutcome(source, results.stage, len(records), differences))
    failed = [o for o in outcomes if o.differences]
    if failed:
        lines = []
        for o in failed:
            shown = [d for d in o.differences if d.startswith("/evidence/")]
            shown += [d for d in o.differences if not d.startswith("/evidence/")][:30]
            lines += [f"{o.source}: {d}" for d in shown]
            if len(shown) < len(o.differences):
                lines.append(f"{o.source}: ... and {len(o.differences) - len(shown)} more difference(s)")
        raise CheckFailed(
            f"{loaded.id}: {len(failed)} of {len(outcomes)} committed results block(s) do not reproduce from the "
            "records in place (committed -> recomputed):\n" + "\n".join(lines)
        )
    return outcomes
