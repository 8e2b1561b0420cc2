"""The writers and the reader every clt file goes through: a protocol written with its results block spliced in is
the same text as the protocol written whole; evidence is read only from regular files, byte for byte."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cltoolkit._io import NotRegularFile, dump_protocol, dump_results, read_regular_bytes

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


@pytest.mark.parametrize("size", [0, 1, 4096, (1 << 20) + 3, 3 * (1 << 20)])
def test_a_regular_file_reads_byte_for_byte(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert read_regular_bytes(tmp_path / "f") == data


def test_a_link_a_fifo_and_a_folder_are_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"{}")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "fifo")  # nobody writes to it: a read would block forever
    for name, why in (("link", "symbolic link"), ("fifo", "not a regular file")):
        with pytest.raises(NotRegularFile, match=why):
            read_regular_bytes(tmp_path / name)
    with pytest.raises(NotRegularFile, match="not a regular file"):
        read_regular_bytes(tmp_path)  # a folder opens for reading on Linux; its type refuses it
