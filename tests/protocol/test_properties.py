"""Property tests: arbitrary input never raises anything but CltError."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cltoolkit.component_validation import validate_document
from cltoolkit.errors import CltError
from cltoolkit.protocol.load import loads_strict
from cltoolkit.registry import registries

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
KEYS = ["id", "suite", "title", "goal", "schemaVersion", "seeds", "comparisons", "gates", "metrics", "environment"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_loader_on_arbitrary_text(text: str) -> None:
    try:
        loads_strict(text, "x.json")
    except CltError:
        pass


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_loader_on_arbitrary_json(value: object) -> None:
    try:
        loads_strict(json.dumps(value), "x.json")
    except CltError:
        pass


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8),
    st.sampled_from(["nav4", "ladder", "wmf", "sessions", "x"]),
)
def test_validator_on_arbitrary_documents(doc: dict[str, object], suite: str) -> None:
    doc = {**doc, "suite": suite}
    try:
        validate_document(doc, "x.json", regs=registries())
    except CltError:
        pass
