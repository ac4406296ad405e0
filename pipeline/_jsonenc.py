"""JSON encoding for the wire encoders: never fails on a string that holds a lone surrogate.

streamfold's parsers reject lone surrogates (I-JSON, RFC 7493), but a dict or SDK source can hand over a
Python string that holds one, and ``msgspec.json.encode`` refuses to encode it. Such strings are written
with a ``\\uXXXX`` escape instead: valid JSON that a JavaScript or Python reader decodes back to the
same string.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["encode_json"]

_encode = msgspec.json.encode


def encode_json(value: Any, *, sort_keys: bool = False) -> bytes:
    """``value`` as compact JSON bytes; lone surrogates are escaped rather than raising."""
    try:
        return _encode(value, order="sorted") if sort_keys else _encode(value)
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=sort_keys).encode()
