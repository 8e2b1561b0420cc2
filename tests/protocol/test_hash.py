"""The canonical hash: golden values (never edited), independence from formatting, an independent JCS."""

from __future__ import annotations

import decimal
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from cltoolkit.protocol.hashing import CANONICALIZATION, protocol_hash

REPO = Path(__file__).resolve().parents[2]

# Golden values for jcs-sha256/v1. NEVER EDIT: a changed value means the algorithm changed, which needs a new
# canonicalization id instead.
GOLDEN: list[tuple[dict[str, Any], str]] = [
    ({}, "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
    ({"b": 2, "a": 1}, "sha256:43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777"),
    (
        {"id": "x-v1", "status": {"stage": "draft"}, "results": {"n": 1}, "v": [1.0, 0.1, 1e21, -0.0, "é"]},
        "sha256:82f4e51b042547f8f13012c7b82b47f2eb81aae6c71fcf5a382e2b45eb19659c",
    ),
]


def test_canonicalization_id() -> None:
    assert CANONICALIZATION == "jcs-sha256/v1"


@pytest.mark.parametrize(("doc", "expected"), GOLDEN)
def test_golden(doc: dict[str, Any], expected: str) -> None:
    assert protocol_hash(doc) == expected


def test_results_and_status_are_not_hashed() -> None:
    base = {"id": "x-v1", "a": [1, 2]}
    assert protocol_hash(base) == protocol_hash({**base, "status": {"x": 1}, "results": None})
    assert protocol_hash(base) != protocol_hash({**base, "a": [2, 1]})
    assert protocol_hash(base) != protocol_hash({**base, "nested": {"results": 1}})


def _es6_number(x: float | int) -> str:
    """ECMAScript Number::toString (ECMA-262 section 6.1.6.1.20): the shortest round-tripping digits (Python's repr
    finds the same), written out in full for exponents -6 < n <= 21 and in exponent form beyond."""
    if isinstance(x, int):
        return str(x)
    assert math.isfinite(x)
    if x == 0:
        return "0"
    if x < 0:
        return "-" + _es6_number(-x)
    digits_tuple, exponent = decimal.Decimal(repr(x)).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_tuple))
    k = len(digits)
    n = k + int(exponent)  # x = 0.digits x 10^n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


def test_the_independent_number_form_is_ecmascripts() -> None:
    cases = {2e-05: "0.00002", 1e-07: "1e-7", 0.0001: "0.0001", 1e21: "1e+21", 1.23e-18: "1.23e-18", 123.5: "123.5",
             1e20: "100000000000000000000", 0.089: "0.089", -2.5e-06: "-0.0000025", 5e-324: "5e-324"}  # fmt: skip
    assert {x: _es6_number(x) for x in cases} == cases


def _jcs(value: Any) -> str:
    """An independent RFC 8785 serializer (enough for protocol documents)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return _es6_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(_jcs(v) for v in value) + "]"
    keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _jcs(value[k]) for k in keys) + "}"


@pytest.mark.parametrize("path", sorted((REPO / "protocols").glob("*.json")), ids=lambda p: p.name)
def test_independent_jcs_sha256(path: Path) -> None:
    doc = json.loads(path.read_text())
    body = {k: v for k, v in doc.items() if k not in ("results", "status")}
    expected = "sha256:" + hashlib.sha256(_jcs(body).encode("utf-8")).hexdigest()
    assert protocol_hash(doc) == expected


def test_independent_on_golden() -> None:
    for doc, expected in GOLDEN:
        body = {k: v for k, v in doc.items() if k not in ("results", "status")}
        assert "sha256:" + hashlib.sha256(_jcs(body).encode()).hexdigest() == expected
