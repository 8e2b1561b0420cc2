"""RFC 8785 (JSON Canonicalization Scheme) bytes: the input of every protocol hash and record seal.

The reference is the `rfc8785` package (pure Python; every hash and seal clt ever wrote came from it). Canonicalizing
10,000 records with it is most of a fresh checkout's `clt report` (about 100 us a record), so `canonical_json`
takes a fast path where the standard library's C encoder writes exactly the same bytes, and hands anything else
to the reference, whole:

- keys: `str`, none holding a character beyond the Basic Multilingual Plane (RFC 8785 sorts keys by UTF-16 code
  units, Python by code points; the two orders agree inside the BMP);
- strings: `str` (the C encoder's escapes with `ensure_ascii=False` are RFC 8785's: the two-character forms, other
  controls as lowercase `\\u00xx`, nothing else escaped; a lone surrogate fails the UTF-8 encoding at the end and
  the reference then raises its error);
- integers: `int` within +-(2^53 - 1) (the reference raises beyond);
- floats: integral values below 2^53 are written as the integer they equal (RFC 8785: `1.0` is `1`, `-0.0` is
  `0`); others only where Python's shortest round-trip text is already ECMAScript's (no exponent, no `.0`);
  NaN, infinities, exponents and anything else take the reference path.

A document parsed only to be canonicalized (a record's seal, checked for each of 10,000 records in a fresh clone's
report) can skip the walk that prepares its values: `plain_float` and `plain_int`, as `json.loads`'s number hooks,
give every number in the form the encoder writes as RFC 8785 does, or raise `NotPlain`, and `canonical_json(value,
plain=True)` then encodes at once (`cltoolkit.protocol.load.loads_plain` parses so).

`tests/test_jcs.py` compares the two on generated values, edge cases included.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

CanonicalizationError = rfc8785.CanonicalizationError

_INT_LIMIT = 2**53 - 1
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class _Reference(Exception):
    """The value holds something the fast path does not write exactly as RFC 8785 does."""


class NotPlain(ValueError):
    """A number that the standard encoder would not write as RFC 8785 does (raised by `plain_float`, `plain_int`)."""


def plain_float(text: str) -> float | int:
    """`json.loads`'s `parse_float` for a document about to be canonicalized: the value, an integral one within
    +-(2^53 - 1) as the integer it equals (RFC 8785 writes `1.0` as `1`); `NotPlain` where Python's shortest text
    is not ECMAScript's (an exponent), and for NaN, infinities and integral values beyond 2^53."""
    value = float(text)
    if value.is_integer():
        if -_INT_LIMIT <= value <= _INT_LIMIT:
            return int(value)
    elif 1e-3 <= abs(value) < 1e15:  # non-integral, far from both exponent thresholds (1e-4, 1e16): positional
        return value
    shown = repr(value)
    if "e" in shown or "n" in shown or shown.endswith(".0"):
        raise NotPlain(text)
    return value


def plain_int(text: str) -> int:
    """`json.loads`'s `parse_int` for a document about to be canonicalized: `NotPlain` beyond +-(2^53 - 1)."""
    value = int(text)
    if len(text) < 16 or -_INT_LIMIT <= value <= _INT_LIMIT:
        return value
    raise NotPlain(text)


def canonical_json(value: Any, *, plain: bool = False) -> bytes:
    """RFC 8785 bytes of a JSON value (raises `CanonicalizationError` as the reference does). `plain`: the caller
    vouches that every number came through `plain_float` / `plain_int` and every key lies in the Basic Multilingual
    Plane (`cltoolkit.protocol.load.loads_plain`), so the values are encoded as they are."""
    try:
        text = _ENCODER.encode(value if plain else _prepared(value))
        return text.encode("utf-8")
    except (_Reference, UnicodeEncodeError, ValueError, RecursionError):
        pass
    try:
        return rfc8785.dumps(value)
    except UnicodeEncodeError as exc:  # the reference sorts keys by their UTF-16 bytes: a lone surrogate key
        raise CanonicalizationError("input contains non-UTF-8 codepoints") from exc


def _prepared(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is float:
        if value.is_integer() and -_INT_LIMIT <= value <= _INT_LIMIT:
            return int(value)
        text = repr(value)
        if "e" in text or "n" in text or text.endswith(".0"):  # exponent, nan / inf, integral beyond 2^53
            raise _Reference
        return value
    if kind is int:
        if -_INT_LIMIT <= value <= _INT_LIMIT:
            return value
        raise _Reference
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                raise _Reference
            out[key] = _prepared(item)
        return out
    if kind is list or kind is tuple:
        return [_prepared(item) for item in value]
    raise _Reference
