"""JSON encoding for the wire encoders: never fails on a string that holds a lone surrogate.

streamfold's parsers reject lone surrogates (I-JSON, RFC 7493), but a dict or SDK source can hand over a
Python string that holds one, and ``msgspec.json.encode`` refuses to encode it. Such strings are written
with a ``\\uXXXX`` escape instead: valid JSON that a JavaScript or Python reader decodes back to the
same string. The rest is written as msgspec writes it (structs as objects, a non-finite float as
``null``), so the two paths agree on everything but the escape.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec

__all__ = ["encode_json"]

_encode = msgspec.json.encode


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
