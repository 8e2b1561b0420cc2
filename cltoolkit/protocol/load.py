"""Strict JSON: duplicate keys, NaN/Infinity, overflowing numbers, trailing garbage and non-object roots are
errors, each reported on one line with its location."""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cltoolkit.errors import Problem, ValidationFailed, json_pointer
from cltoolkit.jcs import NotPlain, plain_float, plain_int

__all__ = [
    "decode_json_bytes",
    "display_path",
    "json_pointer",
    "load_json_file",
    "loads_plain",
    "loads_strict",
    "read_json_text",
]


@functools.lru_cache(maxsize=4)
def _resolved(folder: str) -> str:
    return str(Path(folder).resolve())


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it (as error messages show it). Called for every
    record read, so plain string prefixes are tried before resolving links (a resolve costs a system call per path
    component)."""
    here = os.getcwd()
    text = os.fspath(path)
    plain = text if os.path.isabs(text) else os.path.join(here, text)
    if "/../" not in plain and "/./" not in plain and "//" not in plain:
        for root in (here, _resolved(here)):
            prefix = root.rstrip(os.sep) + os.sep
            if plain.startswith(prefix) and len(plain) > len(prefix):
                return plain[len(prefix) :].rstrip(os.sep)
    try:
        return str(path.resolve().relative_to(_resolved(here)))
    except ValueError:
        return str(path)


class _Pairs(dict[str, Any]):
    """An object while parsing; remembers keys that appeared more than once."""

    duplicates: list[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _Pairs:
    obj = _Pairs()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj and key not in obj.duplicates:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


class _BadNumber(ValueError):
    pass


def _reject_constant(name: str) -> float:
    raise _BadNumber(f"{name} is not valid JSON (NaN and Infinity are not numbers in JSON)")


MAX_EXACT_INT = 2**53  # I-JSON (RFC 7493): integers beyond it are not exact in other readers, nor hashable by JCS


def _bounded_int(text: str) -> int:
    if len(text) < 16:  # at most 15 digits: below 2^53 (every parsed integer passes here; most are short)
        return int(text)
    digits = text.lstrip("-")
    if len(digits) > 16 or abs(int(text)) > MAX_EXACT_INT:
        shown = text if len(text) <= 24 else f"{text[:12]}...({len(digits)} digits)"
        raise _BadNumber(f"integer {shown} is out of range (JSON integers must lie within +-2^53)")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(f"number {text} overflows a 64-bit float")
    return value


def _plain(value: Any, path: list[str], problems: list[Problem], source: str) -> Any:
    """Convert parse objects to plain dicts, collecting duplicate-key problems with their pointers."""
    if isinstance(value, _Pairs):
        for key in value.duplicates:
            where = f"{source}: {json_pointer([*path, key])}" if source else json_pointer([*path, key])
            problems.append(Problem(where, f"duplicate key {key!r} (JSON objects must not repeat a key)"))
        return {k: _plain(v, [*path, k], problems, source) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, [*path, str(i)], problems, source) for i, v in enumerate(value)]
    return value


def _surrogates(value: Any, path: list[str], problems: list[Problem], where: str) -> None:
    """Strings (keys or values) holding a lone UTF-16 surrogate (`\\ud800`): not text, and no hash can encode them."""

    def bad(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    if isinstance(value, dict):
        for key, item in value.items():
            if bad(key):
                problems.append(
                    Problem(f"{where}: {json_pointer(path)}", "a key holds a lone surrogate (\\ud800-\\udfff)")
                )
            _surrogates(item, [*path, key], problems, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _surrogates(item, [*path, str(i)], problems, where)
    elif isinstance(value, str) and bad(value):
        problems.append(
            Problem(f"{where}: {json_pointer(path) or '/'}", "a lone surrogate (\\ud800-\\udfff) is not text")
        )


class _Duplicate(Exception):
    pass


def _fast_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Duplicate
    return obj


@functools.cache
def _fast_decoder(parse_float: Callable[[str], Any], parse_int: Callable[[str], int]) -> json.JSONDecoder:
    """One decoder per pair of number hooks, built once: `json.loads` with hooks builds a decoder and its scanner on
    every call (about 3 us, 0.03-0.04 CPU-s of reading 10,000 records for their seals)."""
    return json.JSONDecoder(
        object_pairs_hook=_fast_hook, parse_constant=_reject_constant, parse_float=parse_float, parse_int=parse_int
    )


def _parse_fast(text: str, parse_float: Callable[[str], Any], parse_int: Callable[[str], int]) -> Any:
    """One parse into plain dicts; a repeated key, NaN or a number the hooks refuse raises (the caller's slow path
    then reports it, or the caller falls back)."""
    return _fast_decoder(parse_float, parse_int).decode(text)


_ABOVE_BMP = re.compile("[\U00010000-\U0010ffff]")


def loads_plain(text: str) -> dict[str, Any] | None:
    """`loads_strict`'s value of a JSON object, parsed for `canonical_json(value, plain=True)`: each number in the
    form RFC 8785 writes (see `cltoolkit.jcs.plain_float`). None for anything else, and for anything `loads_strict`
    would refuse or report: a repeated key, NaN, a number the fast path does not write, a `\\u` escape (a lone
    surrogate, or a key beyond the Basic Multilingual Plane, whose order RFC 8785 takes from UTF-16), a character
    beyond that plane, a root that is not an object. The caller then parses with `loads_strict`, which reports."""
    if "\\u" in text or (not text.isascii() and _ABOVE_BMP.search(text)):
        return None
    try:
        value = _parse_fast(text, plain_float, plain_int)
    except (_Duplicate, json.JSONDecodeError, _BadNumber, NotPlain, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def loads_strict(text: str, source: str | Callable[[], str] = "", *, require_object: bool = True) -> Any:
    """Parse `text` as strict JSON; raise `ValidationFailed` with one problem per line otherwise. `source` names
    the input in messages: a string, or a function that computes it only when a message needs it (a record's
    display path costs system calls, and 10,000 records are read per report)."""

    def place() -> str:
        return (source() if callable(source) else source) or "<input>"

    try:  # fast path: plain dicts; a repeated key falls through to the slow path, which locates every one
        value = _parse_fast(text, _finite_float, _bounded_int)
    except (_Duplicate, json.JSONDecodeError, _BadNumber, RecursionError):
        pass
    else:
        if require_object and not isinstance(value, dict):
            raise ValidationFailed(
                problems=[Problem(place(), f"the document must be a JSON object, got {type(value).__name__}")]
            )
        if "\\u" in text:  # only an escape can make a lone surrogate: a cheap test before walking the document
            found: list[Problem] = []
            _surrogates(value, [], found, place())
            if found:
                raise ValidationFailed(problems=found)
        return value
    where = place()
    try:
        parsed = json.loads(
            text,
            object_pairs_hook=_pairs_hook,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except json.JSONDecodeError as exc:
        raise ValidationFailed(
            problems=[Problem(f"{where}:{exc.lineno}:{exc.colno}", f"invalid JSON: {exc.msg}")]
        ) from None
    except _BadNumber as exc:
        raise ValidationFailed(problems=[Problem(where, str(exc))]) from None
    except RecursionError:
        raise ValidationFailed(
            problems=[Problem(where, "JSON nested deeper than this parser follows (about 1,000 levels): flatten it")]
        ) from None
    problems: list[Problem] = []
    value = _plain(parsed, [], problems, where)
    if require_object and not isinstance(value, dict):
        problems.append(Problem(where, f"the document must be a JSON object, got {type(value).__name__}"))
    if problems:
        raise ValidationFailed(problems=problems)
    return value


def load_json_file(path: Path, *, require_object: bool = True) -> Any:
    """Read and strictly parse a JSON file (UTF-8)."""
    return loads_strict(read_json_text(path), display_path(path), require_object=require_object)


def read_json_text(path: Path) -> str:
    """Read a JSON file as UTF-8 text; missing, unreadable, non-UTF-8 and BOM-prefixed files are errors."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ValidationFailed(problems=[Problem(display_path(path), "no such file")]) from None
    except OSError as exc:
        raise ValidationFailed(problems=[Problem(display_path(path), f"cannot read: {exc.strerror}")]) from None
    return decode_json_bytes(raw, display_path(path))


def decode_json_bytes(raw: bytes, where: str) -> str:
    """UTF-8 text of a JSON file's bytes; non-UTF-8 and BOM-prefixed content are errors."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationFailed(problems=[Problem(where, f"not UTF-8 (byte {exc.start}): {exc.reason}")]) from None
    if text.startswith("\ufeff"):
        raise ValidationFailed(problems=[Problem(where, "starts with a byte-order mark; save as plain UTF-8")])
    return text
