"""Schemas are generated from the models, committed, and drift-tested; shipped documents validate."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from cltoolkit.schemas import SCHEMA_NAMES, generate, generate_all

REPO = Path(__file__).resolve().parent.parent


def test_no_drift() -> None:
    for name, text in generate_all().items():
        committed = REPO / "schemas" / name
        assert committed.exists(), f"{committed} missing: run `make schemas`"
        assert json.loads(committed.read_text()) == json.loads(text), f"{name} drifted: run `make schemas`"


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_headers_and_valid(name: str) -> None:
    schema = generate(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"urn:cltoolkit:schema:{name}:1"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", sorted((REPO / "protocols").glob("*.json")), ids=lambda p: p.name)
def test_protocols_match_schema(path: Path) -> None:
    validator = jsonschema.Draft202012Validator(
        generate("protocol"), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(json.loads(path.read_text())), key=str)
    assert not errors, errors[0].message


def test_schema_rejects_what_models_reject() -> None:
    doc = json.loads((REPO / "protocols" / "ladder-v1.json").read_text())
    doc["systems"]["true"]["a"] = "0.95"
    validator = jsonschema.Draft202012Validator(generate("protocol"))
    assert list(validator.iter_errors(doc))


def test_cli_schema(cli) -> None:
    result = cli("schema", "lock")
    assert result.exit_code == 0
    assert json.loads(result.output)["$id"].endswith("lock:1")
    assert cli("schema", "nope").exit_code == 2
