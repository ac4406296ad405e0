"""JSON helpers shared by the stages: encoding that never fails on a lone surrogate, and the one
wording of why some bytes are not JSON streamfold accepts.

Encoding: never fails on a string that holds a lone surrogate.

streamfold's parsers reject lone surrogates (I-JSON, RFC 7493), but a dict or SDK source can hand over a
Python string that holds one, and ``msgspec.json.encode`` refuses to encode it. Such strings are written
with a ``\\uXXXX`` escape instead: valid JSON that a JavaScript or Python reader decodes back to the
same string. The rest is written as msgspec writes it (structs as objects, a non-finite float as
``null``), so the two paths agree on everything but the escape.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from pipeline.errors import StreamDecodeError

__all__ = ["JSON_ERRORS", "arguments_complete", "encode_json", "invalid_utf8", "json_problem"]

_encode = msgspec.json.encode

JSON_ERRORS = (msgspec.DecodeError, RecursionError, UnicodeDecodeError)
"""What msgspec's JSON decoding raises for bytes that are not JSON it accepts (a ``ValidationError``,
a subclass of ``DecodeError``, is a schema's refusal: catch it first where that differs)."""

_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?[0-9]+")


def arguments_complete(text: str) -> bool:
    """Whether a call's arguments text is one whole JSON value, checked without building it; blank text
    (a call without arguments) counts. An encoder tells a client to run its calls only when each is."""
    if not text or text.isspace():
        return True
    try:
        try:
            msgspec.json.decode(text, type=msgspec.Raw)
        except UnicodeEncodeError:  # a lone surrogate from a dict or SDK source: its string can still close
            msgspec.json.decode(text.encode("utf-8", "surrogatepass"), type=msgspec.Raw)
    except JSON_ERRORS:
        return False
    return True


def invalid_utf8(data: bytes, offset: int) -> StreamDecodeError:
    """The error for ``data`` (at byte ``offset`` of the stream) that is not UTF-8, naming the stream's
    byte where it stops being UTF-8: the same words whichever stage finds it."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        position = offset + error.start
        return StreamDecodeError(
            f"invalid UTF-8 at byte {position} of the stream: {error.reason}", offset=position
        )
    return StreamDecodeError(f"invalid UTF-8 at byte {offset} of the stream", offset=offset)


def json_problem(error: Exception, data: bytes | str, start: int | None) -> str:
    """What is wrong with the JSON ``data`` that msgspec refused with ``error``, to follow "is" in a message.

    JSON that is not I-JSON (RFC 7493) is refused by design: a lone surrogate escape, a number beyond the
    range of a double. ``start``: the byte offset of ``data`` in the stream, when it is known."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data

    def at(position: int) -> str:
        return (
            f"byte {start + position} of the stream" if start is not None else f"byte {position} of the JSON"
        )

    if isinstance(error, RecursionError):
        return "JSON nested too deeply to decode (beyond the recursion limit of Python's C code)"
    surrogate = _LONE_SURROGATE.search(raw)
    if surrogate is not None:
        escape = surrogate.group().decode()
        return (
            f"not I-JSON (RFC 7493): a lone surrogate escape {escape!r} at {at(surrogate.start())} "
            "(streamfold refuses it)"
        )
    if "out of range" in str(error):
        for number in _NUMBER.finditer(raw):
            if math.isinf(float(number.group())):
                return (
                    f"not I-JSON (RFC 7493): the number {number.group().decode()} at {at(number.start())} "
                    "is beyond the range of a double (streamfold refuses it)"
                )
        return "not I-JSON (RFC 7493): a number beyond the range of a double (streamfold refuses it)"
    return f"not valid JSON: {error}"


def encode_json(value: Any, *, sort_keys: bool = False) -> bytes:
    """``value`` as compact JSON bytes; lone surrogates are escaped rather than raising."""
    try:
        return _encode(value, order="sorted") if sort_keys else _encode(value)
    except UnicodeEncodeError:
        plain = _finite(msgspec.to_builtins(value))
        return json.dumps(
            plain, ensure_ascii=True, allow_nan=False, separators=(",", ":"), sort_keys=sort_keys
        ).encode()


def _finite(value: Any) -> Any:
    """``value`` (builtins only) with each infinite or NaN float as None, as msgspec writes it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
