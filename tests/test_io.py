"""The writers every clt file goes through: a protocol written with its results block spliced in is the same text
as the protocol written whole."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cltoolkit._io import dump_protocol, dump_results

_SCALARS = st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(-1e6, 1e6) | st.text(max_size=8)
_ROWS = st.lists(st.dictionaries(st.sampled_from(["runId", "state", "seed"]), _SCALARS, min_size=1), max_size=4)
_BLOCKS = st.fixed_dictionaries(
    {"stage": st.text(max_size=6), "perRun": _ROWS, "gates": st.lists(st.dictionaries(st.text(max_size=4), _SCALARS))}
)


@settings(max_examples=200, deadline=None)
@given(_BLOCKS, st.dictionaries(st.sampled_from(["id", "goal", "seeds"]), _SCALARS))
def test_a_spliced_results_block_reads_as_the_whole_document(results: dict[str, Any], head: dict[str, Any]) -> None:
    document = {**head, "results": results, "status": {"stage": "reported", "note": 'a\nb "c"'}}
    assert dump_protocol(document, dump_results(results)) == dump_protocol(document)
