"""Each validation problem points at the field that holds it (#19 item 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import REPO


def _write(project, doc: dict[str, Any]) -> None:
    (Path(project.root) / "protocols" / "sessions-v1.json").write_text(json.dumps(doc, indent=1))


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((REPO / "protocols" / "sessions-v1.json").read_text())
    doc["results"], doc["status"] = None, {"stage": "draft", "updatedOn": "2026-12-01"}
    return doc


def test_reference_problems_point_at_their_field(project, cli) -> None:
    doc = _doc()
    doc["gates"][0]["metric"] = "sessions.nope-v1"
    doc["comparisons"].append(dict(doc["comparisons"][0]))
    _write(project, doc)
    out = cli("protocol", "validate", "sessions-v1")
    assert out.exit_code == 2
    assert "sessions-v1.json: /gates/0/metric: metric 'sessions.nope-v1' is not among" in out.output
    assert f"/comparisons/{len(doc['comparisons']) - 1}/id: comparison id" in out.output


def test_gate_wording_and_version_listing(project, cli) -> None:
    doc = _doc()
    doc["gates"].append({**doc["gates"][0], "id": "eq", "test": "equivalence-tost", "comparator": ">="})
    _write(project, doc)
    out = cli("protocol", "validate", "sessions-v1")
    assert "an equivalence-tost gate needs comparator within" in out.output
    out = cli("protocol", "validate", "sessions-v9")
    assert "Versions of sessions that exist: sessions-v1." in out.output
    assert "Available" not in out.output


def test_a_lone_surrogate_is_located(project, cli) -> None:
    text = json.dumps(_doc()).replace('"title": "', '"title": "\\ud800', 1)
    (Path(project.root) / "protocols" / "sessions-v1.json").write_text(text)
    out = cli("protocol", "validate", "sessions-v1")
    assert out.exit_code == 2 and "/title: a lone surrogate" in out.output, out.output
