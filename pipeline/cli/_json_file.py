"""A ``.json`` recording for ``streamfold replay``: a list of text deltas or of provider events, or one
error body; read as I-JSON (RFC 7493), with errors that name the item."""

from __future__ import annotations

import json
import math
from typing import Any

from pipeline.errors import StreamDecodeError

__all__ = ["json_items"]


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text} is beyond a double (not I-JSON, RFC 7493)")
    return number


def _json_type(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


_EXPECTED_LIST = "expected a JSON list of text deltas (strings) or of provider events (objects)"


def json_items(data: bytes, provider: str) -> tuple[list[Any], str]:
    """A ``.json`` file: a list of text deltas (replayed as text) or of provider events (dicts); or one
    object (an error body, ``{"error": ...}``), whose bytes are read as the provider sent them, as the
    same body saved as ``.sse`` is."""
    value = _i_json(data)
    if isinstance(value, dict):
        return [data], provider
    if not isinstance(value, list):
        raise StreamDecodeError(f"{_EXPECTED_LIST}, got {_json_type(value)}")
    kind = str if value and isinstance(value[0], str) else dict
    for number, item in enumerate(value):
        _check_item(number, item, kind)
    if kind is str:
        if provider not in ("auto", "text"):
            raise StreamDecodeError(f"a list of text deltas is replayed as --provider text, not {provider}")
        return value, "text"
    if provider == "text":
        raise StreamDecodeError("a list of provider events cannot be replayed as --provider text")
    return value, provider


def _i_json(data: bytes) -> Any:
    """The file's JSON value; UTF-8 and I-JSON (RFC 7493) only."""
    try:
        return json.loads(data.decode(), parse_constant=_not_a_number, parse_float=_finite)
    except UnicodeDecodeError as exc:
        message = f"the file is not valid UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start}"
        raise StreamDecodeError(message, offset=exc.start) from None
    except json.JSONDecodeError as exc:
        raise StreamDecodeError(f"the file is not JSON: {exc}", offset=exc.pos) from None
    except ValueError as exc:
        raise StreamDecodeError(f"the file is not I-JSON: {exc}") from None


def _check_item(number: int, item: Any, kind: type) -> None:
    """Raises `StreamDecodeError` when an item of the list is not of the first one's kind or is not I-JSON."""
    if not isinstance(item, kind):
        raise StreamDecodeError(f"{_EXPECTED_LIST}: item {number} is {_json_type(item)}", offset=number)
    try:
        json.dumps(item, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        message = f"item {number} holds a lone surrogate escape, which is not I-JSON (RFC 7493)"
        raise StreamDecodeError(message, offset=number) from None
