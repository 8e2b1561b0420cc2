"""Strict loading: each bad input gives one located line, exit code 2, no traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cltoolkit.errors import CltError, ValidationFailed
from cltoolkit.protocol.load import loads_strict
from tests.conftest import read, write

BAD_TEXT = [
    ('{"a": 1, "a": 2}', r"/a: duplicate key 'a'"),
    ('{"x": {"k": 1, "k": 1}}', r"/x/k: duplicate key 'k'"),
    ('{"a": NaN}', r"NaN is not valid JSON"),
    ('{"a": -Infinity}', r"-Infinity is not valid JSON"),
    ('{"a": 1e400}', r"overflows a 64-bit float"),
    ('{"a": 1} trailing', r":1:10: invalid JSON: Extra data"),
    ("[1, 2]", r"must be a JSON object, got list"),
    ('"text"', r"must be a JSON object, got str"),
    ('{"a": 1', r"invalid JSON"),
]


@pytest.mark.parametrize(("text", "message"), BAD_TEXT)
def test_loads_strict_rejects(text: str, message: str) -> None:
    with pytest.raises(ValidationFailed, match=message):
        loads_strict(text, "x.json")


def _cli_error(cli, project, mutate, name: str = "nav4-v1"):
    path = project.protocol_path(name)
    doc = read(path)
    mutate(doc)
    write(path, doc)
    result = cli("protocol", "validate", name)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


def test_duplicate_key_cli(cli, project) -> None:
    path = project.protocol_path("nav4-v1")
    path.write_text(path.read_text().replace('"suite": "nav4",', '"suite": "nav4", "suite": "nav4",', 1))
    result = cli("protocol", "validate", "nav4-v1")
    assert result.exit_code == 2
    assert "protocols/nav4-v1.json: /suite: duplicate key 'suite'" in result.output


def test_nan_cli(cli, project) -> None:
    path = project.protocol_path("nav4-v1")
    path.write_text(path.read_text().replace('"threshold": 0.7', '"threshold": NaN', 1))
    result = cli("protocol", "validate", "nav4-v1")
    assert result.exit_code == 2
    assert "NaN is not valid JSON" in result.output


def test_trailing_garbage_cli(cli, project) -> None:
    path = project.protocol_path("nav4-v1")
    path.write_text(path.read_text() + "}\n")
    result = cli("protocol", "validate", "nav4-v1")
    assert result.exit_code == 2
    assert "Extra data" in result.output


def test_non_object_root_cli(cli, project) -> None:
    project.protocol_path("nav4-v1").write_text("[]\n")
    result = cli("protocol", "validate", "nav4-v1")
    assert result.exit_code == 2
    assert "must be a JSON object" in result.output


def test_unknown_field(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["gates"][2].update(thresold=0.1))
    assert "protocols/nav4-v1.json: /gates/2/thresold: unknown field" in out


def test_wrong_type_no_coercion(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["gates"][0].update(threshold="70"))
    assert "protocols/nav4-v1.json: /gates/0/threshold: Input should be a valid number" in out


def test_string_integer_not_coerced(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["environment"].update(gridSize="9"))
    assert "/environment/gridSize: Input should be a valid integer" in out


def test_id_must_match_file_name(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d.update(id="nav4-v2"))
    assert "/id: id 'nav4-v2' does not match the file name (expected 'nav4-v1')" in out


def test_unknown_method_suggests(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["comparisons"][0].update(method="nav4.sequentail"))
    assert "/comparisons/0/method: unknown method 'nav4.sequentail'. Did you mean 'nav4.sequential'" in out


def test_unknown_suite_suggests(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d.update(suite="nav5"))
    assert "/suite: unknown suite 'nav5'. Did you mean 'nav4'?" in out


def test_unknown_metric(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["metrics"][4].update(id="nav4.bwt-v2"))
    assert "/metrics/4/id: unknown metric 'nav4.bwt-v2'. Did you mean 'nav4.bwt-v1'" in out


def test_hyperparameters_validated_by_method(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["comparisons"][1]["hyperparameters"].update(capacity=-1))
    assert "/comparisons/1/hyperparameters/capacity: Input should be greater than or equal to 1" in out


def test_every_problem_on_its_own_line(cli, project) -> None:
    def two(d):
        d["gates"][0]["threshold"] = "x"
        d["environment"]["gridSize"] = 2

    out = _cli_error(cli, project, two)
    lines = [line for line in out.splitlines() if "protocols/nav4-v1.json: /" in line]
    assert len(lines) == 2


def test_gate_consistency(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["gates"][2].pop("reference"))
    assert "/gates/2: a superiority gate needs a reference and a margin" in out


def test_unknown_protocol_lists_versions(cli, project) -> None:
    result = cli("protocol", "validate", "nav4-v7")
    assert result.exit_code == 2
    assert "Versions of nav4 that exist: nav4-v1, nav4-v2." in result.output


def test_bad_id_form(cli, project) -> None:
    result = cli("protocol", "validate", "nav4")
    assert result.exit_code == 2
    assert "not a versioned id" in result.output


def test_every_shipped_protocol_valid(cli, project) -> None:
    for pid in project.protocol_ids():
        result = cli("protocol", "validate", pid)
        assert result.exit_code == 0, result.output


def test_loads_returns_plain_dicts() -> None:
    value = loads_strict('{"a": {"b": [1, {"c": 2}]}}')
    assert type(value) is dict
    assert type(value["a"]) is dict
    assert json.dumps(value) == '{"a": {"b": [1, {"c": 2}]}}'
    assert issubclass(ValidationFailed, CltError)


def test_every_problem_at_once(cli, project) -> None:
    """A structural problem (a gate without its unit) does not hide the method's own (a missing hyperparameter)."""

    def both(doc: dict[str, Any]) -> None:
        del doc["gates"][0]["unit"]
        del doc["comparisons"][1]["hyperparameters"]["capacity"]
        doc["comparisons"][2]["method"] = "nav4.sequentail"

    out = _cli_error(cli, project, both)
    assert "/gates/0/unit: required field missing" in out
    assert "/comparisons/1/hyperparameters/capacity: required field missing" in out
    assert "/comparisons/2/method: unknown method 'nav4.sequentail'" in out


def test_suggestions_come_from_the_protocols_suite(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: d["comparisons"][0].update(method="linear"))
    line = next(x for x in out.splitlines() if "/comparisons/0/method" in x)
    assert "Available for suite 'nav4': nav4.a-gem, " in line and "nav4.joint, " in line
    assert "ladder." not in line
    assert "wmf." not in line


def _gates_stage(doc: dict[str, Any], comparisons: list[str]) -> None:
    stage = next(s for s in doc["seeds"]["stages"] if s["id"] == "gates")
    stage["comparisons"] = comparisons


def test_a_stage_that_names_its_comparisons_plans_those_alone(project) -> None:
    """cw10-cpu-v2 as shipped: the gates stage runs three comparisons at 24 seeds, the table stage all at five."""
    from cltoolkit.component_validation import load_protocol
    from cltoolkit.registry import registries

    path = project.protocol_path("cw10-cpu-v2")
    regs = registries(project.components_file)
    loaded = load_protocol(path, regs)
    suite = regs.new_suite("crl")
    gates = suite.plan(loaded.model, "gates")
    assert {p.comparison for p in gates} == {"cloning", "finetuning", "memory"}
    assert len(gates) == 3 * 24
    table = suite.plan(loaded.model, "cpu")
    assert len(table) == len(read(path)["comparisons"]) * 5
    shared = {p.run_id for p in gates} & {p.run_id for p in table}
    assert len(shared) == 3 * 5  # the stages share their common (comparison, seed) runs


def test_a_stage_that_leaves_out_what_a_gate_compares_or_names_no_comparison_is_refused(cli, project) -> None:
    out = _cli_error(cli, project, lambda d: _gates_stage(d, ["cloning", "memory", "finetunig"]), "cw10-cpu-v2")
    assert "/seeds/stages/1/comparisons/2: unknown comparison 'finetunig'" in out
    assert "stage 'gates' leaves out comparison 'finetuning', which gate 'finetuning-comparison' needs" in out


def test_a_suite_that_plans_its_own_grid_refuses_stage_comparisons(cli, project) -> None:
    def restrict(doc: dict[str, Any]) -> None:
        doc["seeds"]["stages"][0]["comparisons"] = [doc["comparisons"][0]["id"]]

    out = _cli_error(cli, project, restrict, "wmf-v4")
    assert "/seeds/stages/0/comparisons: the wmf suite plans its own grid" in out
