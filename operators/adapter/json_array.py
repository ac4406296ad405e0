"""A streamed JSON array of objects (Gemini's ``streamGenerateContent`` without ``alt=sse``), or JSON objects
one after another, pretty-printed or not (an HTTP error body): one payload an object.

`JSONArrayFramer` yields each object's bytes as a `Payload` as soon as its
last byte arrives; `JSONSequenceDecoder` chains it with the generic JSON decode.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Final

from aiostream import pipable_operator

from operators.adapter._lines import BOM, as_bytes, keep_partial
from operators.adapter.payloads import Framed, PayloadParser
from pipeline.errors import StreamDecodeError, StreamfoldError
from pipeline.models import Payload
from pipeline.stage import operator_stream

__all__ = ["DEFAULT_MAX_VALUE_SIZE", "JSONArrayFramer", "JSONSequenceDecoder", "decode_json_sequence"]

DEFAULT_MAX_VALUE_SIZE: Final = 16 * 1024 * 1024
"""Default cap, in bytes, of one object: 16 MiB."""

_SPACE = re.compile(rb"[ \t\r\n]*")
_STRING_SPECIAL = re.compile(rb'["\\]')
_STRUCTURAL = re.compile(rb'[{}\[\]"]')

_EXPECTED: Final = {
    None: "a JSON object or array",
    "values": "a JSON object",
    "open": "a JSON object or ']'",
    "value": "',' or ']'",
    "comma": "a JSON object",
    "closed": "nothing after the array",
}
"""What may come next at the top, outside any object, in each state of `JSONArrayFramer._array`."""


class JSONArrayFramer:
    """Sans-IO framer: the bytes of one JSON array of objects, or of objects one after another, -> each
    object's bytes as a `Payload`.

    The bytes are scanned once, by a small state machine (depth, in a string, after a backslash) that
    jumps between structural characters with a regex, and each object's pieces are joined once, when it
    closes: linear in the stream. An object over ``max_value_size`` bytes raises
    `StreamDecodeError`, and so does anything but objects at the top (or in the array), an array
    not closed or an object cut off at the end.
    """

    __slots__ = (
        "_array",
        "_depth",
        "_escape",
        "_in_string",
        "_max",
        "_number",
        "_offset",
        "_pieces",
        "_size",
        "_started",
        "_value_start",
    )

    def __init__(self, *, max_value_size: int = DEFAULT_MAX_VALUE_SIZE) -> None:
        self._max = max_value_size
        self._array: str | None = None
        """None before the first value; ``values`` for objects one after another; in an array: ``open``
        (a value or ``]`` next), ``value`` (an element was read: ``,`` or ``]`` next), ``comma`` (an
        element next), ``closed``."""
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._pieces: list[bytes] = []
        self._size = 0
        self._offset = 0
        """Byte offset of the start of the chunk being scanned."""
        self._value_start = 0
        """Byte offset of the object being read."""
        self._number = 0
        self._started = False

    def feed(self, chunk: bytes) -> list[Payload]:
        """The payloads of the array elements this read completes."""
        if type(chunk) is not bytes:
            chunk = as_bytes(self, chunk)
        out: list[Payload] = []
        try:
            self._scan(chunk, out)
        except StreamfoldError as error:
            keep_partial(error, out)
            raise
        return out

    def finish(self) -> list[Payload]:
        """The body has ended: an array left open is an error naming where.

        Raises:
            StreamDecodeError: the body ends inside an object, or before the array's closing ``]``.
        """
        if self._depth:
            raise StreamDecodeError(
                f"the JSON stream ends inside object {self._number} (started at byte {self._value_start}, "
                f"{self._size} bytes read)",
                offset=self._value_start,
            )
        if self._array in ("open", "value", "comma"):
            raise StreamDecodeError(
                f"the JSON array ends without its closing ']' at byte {self._offset}", offset=self._offset
            )
        return []

    def _scan(self, data: bytes, out: list[Payload]) -> None:
        if not self._started and data:
            self._started = True
            if data.startswith(BOM):  # (a BOM split across the first chunks is not recognised)
                data = data[len(BOM) :]
                self._offset += len(BOM)
        position, end = 0, len(data)
        start = 0 if self._depth else -1  # where the current object starts in ``data``
        if self._escape and end:
            self._escape = False
            position = 1
        while position < end:
            if not self._depth:
                position = _SPACE.match(data, position).end()  # type: ignore[union-attr]
                if position < end:
                    position, start = self._between(data, position)
            elif self._in_string:
                position = self._in_string_scan(data, position)
            else:
                position = self._structural(data, position)
                if not self._depth:
                    self._value(data[start:position], out)
                    start = -1
        if self._depth and start >= 0:
            self._hold(data[start:])
        self._offset += end

    def _in_string_scan(self, data: bytes, position: int) -> int:
        """Inside a string: the position after its closing quote, or ``len(data)`` if it goes on."""
        end = len(data)
        match = _STRING_SPECIAL.search(data, position)
        if match is None:
            return end
        position = match.end()
        if match.group() != b"\\":
            self._in_string = False
            return position
        if position >= end:
            self._escape = True
            return end
        return position + 1

    def _structural(self, data: bytes, position: int) -> int:
        """In an object, outside strings: the position after the next structural character, or
        ``len(data)`` if there is none."""
        match = _STRUCTURAL.search(data, position)
        if match is None:
            return len(data)
        char = match.group()
        if char == b'"':
            self._in_string = True
        elif char in b"{[":
            self._depth += 1
        else:
            self._depth -= 1
        return match.end()

    def _hold(self, piece: bytes) -> None:
        """Keep the piece of an object that goes on past this chunk; raise past the cap."""
        self._pieces.append(piece)
        self._size += len(piece)
        if self._size > self._max:
            raise StreamDecodeError(
                f"JSON object {self._number} starting at byte {self._value_start} is larger than "
                f"max_value_size={self._max} bytes",
                offset=self._value_start,
            )

    def _between(self, data: bytes, position: int) -> tuple[int, int]:
        """At the top, outside any object, at a byte that is not whitespace: the next position, and that
        of the object it starts (-1 if none)."""
        char = data[position]
        state = self._array
        if char == 0x7B and state in (None, "values", "open", "comma"):  # {
            self._array = "values" if state in (None, "values") else "value"
            self._depth = 1
            self._in_string = False
            self._value_start = self._offset + position
            return position + 1, position
        following = _AFTER.get((char, state))
        if following is not None:
            self._array = following
            return position + 1, -1
        offset = self._offset + position
        raise StreamDecodeError(
            f"expected {_EXPECTED[state]} at byte {offset} of the JSON stream, "
            f"got {data[position : position + 20]!r}",
            offset=offset,
        )

    def _value(self, tail: bytes, out: list[Payload]) -> None:
        if self._pieces:
            self._pieces.append(tail)
            tail = b"".join(self._pieces)
            self._pieces.clear()
        self._size = 0
        number = self._number
        self._number += 1
        start = self._value_start
        if len(tail) > self._max:
            raise StreamDecodeError(
                f"JSON object {number} starting at byte {start} is larger than "
                f"max_value_size={self._max} bytes",
                offset=start,
            )
        out.append(Payload(tail, start))


_AFTER: Final[dict[tuple[int, str | None], str]] = {
    (0x5B, None): "open",  # [
    (0x2C, "value"): "comma",  # ,
    (0x5D, "open"): "closed",  # ]
    (0x5D, "value"): "closed",
}
"""The state after a structural byte at the top (other than ``{``), in the state before it."""


class JSONSequenceDecoder(Framed):
    """Sans-IO core: bytes of one JSON array of objects, or of JSON objects one after another, -> one dict
    per object, each as soon as its last byte arrives (`JSONArrayFramer` chained with the generic
    JSON decode). In-band provider error objects raise `ProviderError` after every object before
    them."""

    __slots__ = ()

    def __init__(self, *, max_value_size: int = DEFAULT_MAX_VALUE_SIZE) -> None:
        super().__init__(JSONArrayFramer(max_value_size=max_value_size), PayloadParser("JSON object"))


@pipable_operator
def decode_json_sequence(
    source: AsyncIterable[bytes], *, max_value_size: int = DEFAULT_MAX_VALUE_SIZE
) -> AsyncIterator[dict[str, Any]]:
    """Decode a JSON array of objects (or objects one after another) into one dict per object, as each
    object's bytes arrive (Gemini's ``streamGenerateContent`` without ``alt=sse``).

    Args:
        source: the response body's bytes.
        max_value_size: cap, in bytes, of one object.

    Raises:
        StreamDecodeError: the bytes are not such a sequence, or an object is over ``max_value_size``.
        ProviderError: an object is an in-band provider error.
    """
    return operator_stream(source, JSONSequenceDecoder(max_value_size=max_value_size))
