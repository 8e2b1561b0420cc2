"""What the report page says: the tested bound on the right side, ladder rungs averaged over seeds, a verdict first,
numbers in one format, and no Python leaking into text."""

from __future__ import annotations

import json
import re

import pytest

from cltoolkit.freeze_actions import freeze
from cltoolkit.protocol.models import Gate
from cltoolkit.report import figures, format
from cltoolkit.run.runner import RunOptions, Selection, run_protocol
from tests.conftest import REPO, write
from tests.toy_suite import toy_protocol


def _gate(test: str, comparator: str, **extra: object) -> Gate:
    base = {"id": "g", "label": "g", "metric": "m", "method": "a", "unit": "u", "test": test, "comparator": comparator}
    return Gate.model_validate({**base, **extra})


@pytest.mark.parametrize(
    ("test", "comparator", "expected"),
    [
        ("superiority", ">=", 0.05),  # higher is better: D > +margin
        ("non-inferiority", ">=", -0.05),  # D > -margin (nav4 replay-adaptation: drawn at -0.05, as tested)
        ("superiority", "<=", -0.05),  # lower is better: D < -margin
        ("non-inferiority", "<=", 0.05),  # D < +margin
    ],
)
def test_the_tested_bound_is_drawn_where_it_is_tested(test: str, comparator: str, expected: float) -> None:
    assert figures.tested_bound(_gate(test, comparator, reference="b", margin=0.05)) == expected


@pytest.mark.committed
def test_ladder_rungs_are_means_over_seeds() -> None:
    from cltoolkit.component_validation import load_protocol
    from cltoolkit.registry import registries
    from cltoolkit.run.record import read_record
    from cltoolkit.suites.ladder.models import LadderProtocol

    protocol = load_protocol(REPO / "protocols" / "ladder-v1.json", regs=registries()).model
    assert isinstance(protocol, LadderProtocol)
    records = [read_record(p) for p in sorted((REPO / "runs" / "ladder-v1").glob("*/record.json"))]
    metric = "ladder.tracking-mae-v1"
    more = []
    for seed in (1, 2):  # two more seeds of every comparison, with other values
        for rec in records:
            metrics = {**rec.metrics, metric: float(rec.metrics[metric]) * (1 + seed)}  # type: ignore[arg-type]
            spec = rec.spec.model_copy(update={"seed": seed})
            more.append(rec.model_copy(update={"metrics": metrics, "spec": spec}))
    control = registries().new_analysis("ladder").summaries(protocol, records + more)["rungs"]["control"]
    for rec in records:
        if rec.spec.comparison in control["values"]:
            base = float(rec.metrics[metric])  # type: ignore[arg-type]
            assert control["values"][rec.spec.comparison] == pytest.approx(base * (1 + 2 + 3) / 3)


def test_numbers_and_p_values_have_one_format() -> None:
    assert format.fmt(1.9999999999999984) == "2"
    assert format.fmt(0.0656) == "0.0656"
    assert format.fmt(None) == "-"
    assert format.fmt({"combined": 0.95, "goal": 1.0}) == "combined 0.95, goal 1"
    assert format.p_text(1.86e-7) == "1.9e-07"
    assert format.p_text(0.0058) == "0.0058"
    assert format.p_text(None) == "-"


@pytest.mark.committed
@pytest.mark.parametrize("report", sorted(REPO.glob("reports/*/report.md")), ids=lambda p: p.parent.name)
def test_committed_reports_answer_first_and_leak_no_python(report) -> None:
    text = report.read_text()
    first = [line for line in text.splitlines() if line.strip()][2]
    assert first.startswith("**Verdict:**"), first
    for leak in ("None", "[None]", "{'", "['", "nan"):
        assert not re.search(rf"(?<![\w-]){re.escape(leak)}(?![\w-])", text), f"{leak!r} in {report}"
    results = json.loads((REPO / "protocols" / f"{report.parent.name}.json").read_text())["results"]
    assert results["resultsVersion"] == 2


@pytest.mark.committed
def test_the_nav4_report_explains_the_new_task_failure_and_names_reused_records() -> None:
    text = (REPO / "reports" / "nav4-v1" / "report.md").read_text()
    assert "## Immediate success by task position" in text
    reading = next(line for line in text.splitlines() if line.startswith("- Gate `new-task` on key"))
    assert "(its first task)" in reading
    assert "sequential" in reading
    assert "replay" in reading
    assert "**Reused records:** 15 of the 150 records" in text
    assert "stage `preliminary`" in text
    assert "Split manifests: none recorded by the runs" not in text
    assert "nav4-v1.splits.json" in text


@pytest.mark.parametrize("report", sorted(REPO.glob("reports/*/report.md")), ids=lambda p: p.parent.name)
def test_committed_reports_print_every_erratum_of_their_protocol(report) -> None:
    status = json.loads((REPO / "protocols" / f"{report.parent.name}.json").read_text()).get("status") or {}
    errata = status.get("errata") or []
    text = report.read_text()
    assert f"- Errata found after freezing (not pre-registered): {len(errata)}" in text  # re-reported since
    for erratum in errata:
        assert f"- Found {erratum['found']}: {erratum['text']}" in text


@pytest.mark.committed
def test_the_readme_and_status_note_state_the_committed_reproduction_numbers() -> None:
    # prose written by hand beside a results block drifts when the block is re-reported: pin it to the block
    protocol = json.loads((REPO / "protocols" / "wmf-v2.json").read_text())
    summary = protocol["results"]["summaries"]["reproduction"]
    inside = summary["insideSeedRange"]
    runs = sum(1 for r in protocol["results"]["perRun"] if r["status"] == "completed")
    readme = (REPO / "README.md").read_text() + (REPO / "docs" / "wmf-studies.md").read_text()
    note = protocol["status"]["note"]
    assert runs == 45
    assert "COMPLETE, reported" in note
    assert "with 45 of 45 records" in note
    assert f"{inside['count']} of {inside['of']} quantity-cells have clt's mean inside" in note
    assert f"{inside['count']} of {inside['of']} quantity-cells inside the seed's stored range" in readme
    assert f"in {inside['count']} of the {inside['of']} (cell, method, quantity) comparisons" in readme
    for cell, ranking in summary["rdRankings"].items():
        assert f"{cell} {ranking['kendallTau']:.2g} (" in note


@pytest.mark.e2e
def test_design_warnings_floor_and_declared_unit_reach_the_report(project, cli) -> None:
    """A validation warning is printed in the report; the gate's declared unit is the one printed."""
    from tests.conftest import read, write

    path = project.protocol_path("sessions-v1")
    doc = read(path)
    doc["claims"].append({"id": "new-robot", "text": "Transfers to a new arm.", "heldOutUnit": "robot"})
    doc["gates"][0]["unit"] = "state units"
    write(path, doc)
    validated = cli("protocol", "validate", "sessions-v1")
    assert validated.exit_code == 0
    assert "/gates/0/unit: gate 'affine-below-knn-new-sessions' declares unit" in validated.output
    assert cli("protocol", "freeze", "sessions-v1").exit_code == 0
    assert cli("run", "--protocol", "sessions-v1", "--workers", "2").exit_code == 0
    assert cli("report", "--protocol", "sessions-v1").exit_code == 0, "report"
    text = (project.root / "reports" / "sessions-v1" / "report.md").read_text()
    assert "**WARNING: the protocol's design warnings (from validation; they did not block it):**" in text
    warned = [line for line in text.splitlines() if line.startswith("- **WARNING: /claims/")]
    assert len(warned) == 1
    assert "'robot', which no evaluation set holds out" in warned[0]
    claim = next(line for line in text.splitlines() if line.startswith("| affine-below-knn-new-sessions"))
    assert "| state units |" in claim, claim


def test_nav4_floor_warning() -> None:
    from cltoolkit.suites.nav4.analysis import floor_lines

    def comparison(key: list[float], goal: list[float]) -> dict[str, object]:
        return {"perTask": {t: {"immediate": v, "final": v} for t, v in (("key", key), ("goal", goal))}}

    floored = floor_lines({"a": comparison([0.0, 0.0], [0.5, 0.0]), "b": comparison([0.0, 0.0], [0.0, 0.0])})
    assert floored[0].startswith("**WARNING: floor: key at 0.00 success in every run of every comparison")
    assert floor_lines({"a": comparison([0.0, 0.1], [0.5, 0.0])}) == []


def test_a_stage_reported_before_its_runs_are_in_says_so_first(toy, cli) -> None:
    write(toy.protocol_path("toy-v1"), toy_protocol(seeds=3))
    freeze(toy, "toy-v1")
    run_protocol(toy, "toy-v1", RunOptions(selection=Selection(seeds=(0, 1))))
    assert cli("report", "-p", "toy-v1").exit_code == 0
    text = (toy.reports_dir / "toy-v1" / "report.md").read_text()
    verdict = next(line for line in text.splitlines() if "Verdict" in line)
    assert verdict.startswith("**Verdict:** incomplete stage (") and "not yet run" in verdict, verdict
