"""Failed runs in the report (#51): a run whose training turned NaN is named first, as non-finite, above every other
failure, and its comparison's gates are never passed on the runs that remain."""

from __future__ import annotations

import json

import pytest

from cltoolkit.freeze_actions import freeze
from cltoolkit.project import Project
from tests.conftest import read, write
from tests.toy_suite import toy_protocol

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_non_finite_run_is_listed_first_and_no_gate_passes_on_it(toy: Project, cli) -> None:
    doc = toy_protocol(seeds=2)
    doc["comparisons"][0]["hyperparameters"]["behavior"] = "nan"  # the candidate's loss turns NaN in every run
    write(toy.protocol_path("toy-v1"), doc)
    freeze(toy, "toy-v1")
    out = cli("run", "-p", "toy-v1", "--workers", "2")
    assert out.exit_code == 1
    records = {p.parent.name: read(p) for p in (toy.runs_dir / "toy-v1").glob("*/record.json")}
    cand = [r for r in records.values() if r["spec"]["comparison"] == "cand"]
    assert cand and all(r["status"]["state"] == "failed" for r in cand)
    assert all(
        r["status"]["reason"] == "non-finite: the method's extra_loss term in task t1, update 3 (after hook extra_loss)"
        for r in cand
    )
    assert cli("report", "-p", "toy-v1").exit_code == 0
    results = read(toy.protocol_path("toy-v1"))["results"]
    assert results["runs"]["failed"] == len(cand)
    gates = {g["id"]: g["decision"] for g in results["gates"]}
    assert gates["sup"] == "not-evaluable"  # never a pass on the runs that remain
    md = (toy.reports_dir / "toy-v1" / "report.md").read_text()
    failed = md.split("**Failed runs** (never counted in a gate):", 1)[1].split("\n\n", 2)[1].splitlines()
    assert len(failed) == len(cand)
    assert all(line.startswith("- non-finite (a NaN or infinity in training): cand-") for line in failed)
    assert md.index("**Failed runs**") < md.index("## Gates")


def test_method_diagnostics_are_exported_beside_the_summaries(toy: Project, cli) -> None:
    """#51: a method's `diagnostics()` reach the results (summaries.methodDiagnostics, per comparison: runs and mean)
    and the report (a table); records without them change nothing."""
    from cltoolkit.gatekeeper.gatekeeper import _method_diagnostics
    from cltoolkit.report.runs import diagnostic_lines
    from cltoolkit.run.store import RunStore

    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=2))
    freeze(toy, "toy-v1")
    assert cli("run", "-p", "toy-v1", "--workers", "2").exit_code == 0
    records = sorted(RunStore(toy.runs_dir, "toy-v1").scan().records.values(), key=lambda r: r.runId)
    assert _method_diagnostics(records) == {}
    with_diag = [
        r.model_copy(update={"metrics": {**r.metrics, "methodDiagnostics": {"penalty": float(i)}}})
        for i, r in enumerate(records)
    ]
    exported = _method_diagnostics(with_diag)
    assert exported == {"base": {"penalty": {"runs": 2, "mean": 0.5}}, "cand": {"penalty": {"runs": 2, "mean": 2.5}}}
    table = diagnostic_lines(with_diag)
    assert table[0] == "## Method diagnostics" and "| cand | penalty | 2 | 2.5 |" in table


def test_many_code_amendments_open_the_report_one_line_each_and_close_it_in_full() -> None:
    import datetime

    from cltoolkit.protocol.models import CodeAmendment, Status
    from cltoolkit.report.notes import COMPACT_AFTER, amendment_lines, amendments_in_full
    from tests.toy_suite import ToyProtocol, toy_protocol

    def protocol_with(amendments: list[CodeAmendment]) -> ToyProtocol:
        status = Status(stage="reported", updatedOn=datetime.date(2026, 12, 4), codeAmendments=amendments)
        doc = {**toy_protocol(), "status": status.model_dump(mode="json")}
        return ToyProtocol.model_validate_json(json.dumps(doc))

    reason = "First sentence of a long reason. " + "More detail. " * 30
    amendments = [
        CodeAmendment(
            on=datetime.date(2026, 12, 4), component="analysis:toy", sourceSha256="sha256:" + "1" * 64, reason=reason
        )
    ] * (COMPACT_AFTER + 1)
    protocol = protocol_with(amendments)
    top = "\n".join(amendment_lines(protocol))
    assert f"Code amendments: {COMPACT_AFTER + 1} change(s)" in top
    assert top.count("First sentence of a long reason. [...]") == COMPACT_AFTER + 1
    assert "More detail" not in top
    end = "\n".join(amendments_in_full(protocol))
    assert end.startswith("## Code amendments in full") and end.count(reason) == COMPACT_AFTER + 1
    assert top.startswith("<!-- fold: Code amendments in full -->")  # folded: HTML <details>, Markdown a count
    protocol = protocol_with(amendments[:COMPACT_AFTER])  # few, but long: folded too
    assert amendments_in_full(protocol) and "More detail" not in "\n".join(amendment_lines(protocol))
    short = [a.model_copy(update={"reason": "A short reason."}) for a in amendments[:COMPACT_AFTER]]
    protocol = protocol_with(short)
    assert amendments_in_full(protocol) == [] and "A short reason." in "\n".join(amendment_lines(protocol))
