"""The fast RFC 8785 path writes exactly the reference package's bytes, or hands the value to it."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from cltoolkit.jcs import CanonicalizationError, canonical_json
from cltoolkit.protocol.load import loads_plain, loads_strict

_FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e16,
        1e21,
        1e-7,
        1e-6,
        9007199254740991.0,
        9007199254740992.0,
        9007199254740994.0,
        1e300,
        5e-324,
        0.1,
        1 / 3,
        123456789012345680000.0,
        1.5e-5,
        0.0001,
        2.5e15,
    ]
)
_INTS = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["", "\x00", "\x1f\x7f", '"\\', "\b\f\n\r\t", "\u2028\u2029", "é", "\ue000", "\U0001f600", "a\U00010000b"]
)
_JSON = st.recursive(
    st.none() | st.booleans() | _INTS | _FLOATS | _TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=600, deadline=None)
@given(_JSON)
def test_same_bytes_as_the_reference(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_every_float_bit_pattern_as_the_reference(bits: int) -> None:
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if not math.isfinite(value):
        with pytest.raises(CanonicalizationError):
            canonical_json({"x": value})
        return
    assert canonical_json({"x": [value, -value]}) == rfc8785.dumps({"x": [value, -value]})


def test_keys_beyond_the_basic_plane_sort_by_utf16() -> None:
    # code point order puts U+E000 first; UTF-16 order puts the surrogate pair of U+1F600 (D83D DE00) first
    value = {"\ue000": 1, "\U0001f600": 2}
    assert canonical_json(value) == rfc8785.dumps(value)
    assert canonical_json(value).index("\U0001f600".encode()) < canonical_json(value).index("\ue000".encode())


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), 2**53, -(2**53), {"k": "\ud800"}, {"\udfff": 1}, {1: 2}, object()]
)
def test_what_the_reference_refuses_is_refused(bad: Any) -> None:
    with pytest.raises((CanonicalizationError, UnicodeEncodeError)):  # the reference: a lone surrogate key
        rfc8785.dumps(bad)
    with pytest.raises(CanonicalizationError):
        canonical_json(bad)


def test_integral_floats_are_integers() -> None:
    expected = b"[1,0,0,100,10000000000000000,100000000000000000000,0.5,1e-7]"
    assert canonical_json([1.0, -0.0, 0.0, 100.0, 1e16, 1e20, 0.5, 1e-7]) == expected


def test_a_record_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    value: Any = {"metrics": {"loss": 0.25, "steps": 120.0, "ok": True}, "spec": {"seed": 3, "name": "é"}, "seal": None}
    expected = rfc8785.dumps(value)

    def refused(_: object) -> bytes:
        raise AssertionError("the reference was called")

    monkeypatch.setattr(rfc8785, "dumps", refused)
    assert canonical_json(value) == expected


def _plain_or_none(text: str) -> bytes | None:
    parsed = loads_plain(text)
    return None if parsed is None else canonical_json(parsed, plain=True)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(_TEXT, _JSON, max_size=6), st.booleans())
def test_a_plain_parse_writes_the_reference_bytes(value: dict[str, Any], ascii_only: bool) -> None:
    """Parsed by `loads_plain` (the seal of a record read from disk), a document is written as the reference writes
    the strict parse of the same text, or refused to the full path (None); never different bytes."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    fast = _plain_or_none(text)
    if fast is not None:
        assert fast == rfc8785.dumps(loads_strict(text))


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_every_float_bit_pattern_parsed_plain(bits: int) -> None:
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if not math.isfinite(value):
        return
    text = json.dumps({"x": [value, -value]})
    fast = _plain_or_none(text)
    if fast is not None:
        assert fast == rfc8785.dumps(json.loads(text))
    if 1e-3 <= abs(value) < 1e15 or (value.is_integer() and abs(value) < 2**53):
        assert fast is not None  # the common numbers take the fast path


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',  # a repeated key: loads_strict reports it
        '{"a": NaN}',
        '{"a": 1e400}',
        '{"a": 9007199254740992}',  # 2^53: the reference refuses it
        '{"a": 9007199254740992.0}',
        '{"a": 1e-05}',  # Python writes an exponent where ECMAScript does not
        '{"a": 1e16}',
        '{"\\ud83d\\ude00": 1, "\\ue000": 2}',  # escapes: keys beyond the plane sort by UTF-16
        '{"\U0001f600": 1}',
        "[1, 2]",
        '{"a": 1} x',
    ],
)
def test_what_a_plain_parse_leaves_to_the_full_path(text: str) -> None:
    assert loads_plain(text) is None


def test_integral_floats_parse_plain_as_integers() -> None:
    assert _plain_or_none('{"b": [1.0, -0.0, 120.0, 0.25, 0.001], "a": "\\n\\u00e9"}') is None  # an escape
    assert (
        _plain_or_none('{"b": [1.0, -0.0, 120.0, 0.25, 0.001], "a": "\\né"}')
        == '{"a":"\\né","b":[1,0,120,0.25,0.001]}'.encode()
    )
