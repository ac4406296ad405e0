"""AWS Bedrock ``InvokeModelWithResponseStream``: binary event-stream frames -> the model's events.

Bedrock does not use SSE. Its body is a sequence of AWS event-stream frames::

    total length (u32) | headers length (u32) | prelude CRC32 (u32) | headers | payload | message CRC32 (u32)

A header is ``name length (u8) | name | type (u8) | value``. Two APIs use these frames:

- ``InvokeModelWithResponseStream``: each event frame (``:event-type`` ``chunk``) carries
  ``{"bytes": base64(model event JSON), "p": padding}``; for Anthropic models the inner events are the
  Messages stream events, to be fed to `operators.convert.anthropic.AnthropicConverter`. The framer
  yields the inner event (the wrapper unwrapped).
- ``ConverseStream``: the ``:event-type`` header names the event (``messageStart``,
  ``contentBlockDelta``, ...) and the payload is that event's body (``{"contentBlockIndex": 0, "delta":
  {...}, "p": padding}``). The framer yields ``{"<event-type>": <payload>}``: the shape of boto3's
  ``converse_stream`` events, so that `operators.convert.bedrock_converse.BedrockConverseConverter`
  reads bytes and boto3's dicts through one schema.

`EventStreamFramer` yields each event's JSON bytes as a `Payload`;
`EventStreamDecoder` chains it with the generic JSON decode. A frame of type ``exception``
(``throttlingException``, ``modelStreamErrorException``, ...) or ``error`` raises `ProviderError`
after every event before it was returned.

Bytes may be split anywhere; CRCs are checked, so a corrupted or cut-off body is reported with the byte
offset of its frame rather than decoded into garbage.
"""

from __future__ import annotations

import binascii
import builtins
import struct
from binascii import a2b_base64
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import msgspec
from aiostream import pipable_operator

from operators.adapter._lines import as_bytes, keep_partial
from operators.adapter.payloads import Framed, PayloadParser
from pipeline._jsonenc import JSON_ERRORS, json_problem
from pipeline.errors import ProviderError, StreamDecodeError, StreamfoldError
from pipeline.models import Payload
from pipeline.stage import operator_stream

try:  # the ``bedrock`` extra: zlib's CRC-32, computed with the CPU's carry-less multiply where it has one
    from zlib_ng.zlib_ng import crc32
except ImportError:
    from zlib import crc32

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "EventStreamDecoder", "EventStreamFramer", "decode_eventstream"]

DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024
"""The largest frame accepted (AWS caps event-stream messages at 16 MiB); also the buffer's cap."""

_PRELUDE: Final = struct.Struct(">III")
_CRC: Final = struct.Struct(">I")
_PRELUDE_SIZE: Final = 12
_MINIMUM_FRAME: Final = _PRELUDE_SIZE + 4
_CHUNK: Final = "chunk"
"""The event type of a frame that wraps a model event (``InvokeModelWithResponseStream``)."""

HeaderValue = bool | int | bytes | str


class EventStreamFramer:
    """Sans-IO framer: bytes of an AWS event-stream body in, each event frame's model event out, as a
    `Payload` (its JSON bytes, at the byte offset of its frame).

    ``max_frame_size`` bounds one frame, and so the bytes held between calls.
    """

    __slots__ = (
        "_buffer",
        "_decoder",
        "_event_type",
        "_frame_number",
        "_headers",
        "_max_frame_size",
        "_offset",
    )

    def __init__(self, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buffer = bytearray()
        self._offset = 0
        """Byte offset in the body of ``_buffer[0]``."""
        self._frame_number = 0
        self._max_frame_size = max_frame_size
        self._decoder = msgspec.json.Decoder()
        self._headers: bytes | None = None
        """The header block of the last event frame: the frames of a stream mostly repeat it, so a frame
        that carries the same bytes has the same event type without parsing them again."""
        self._event_type = _CHUNK
        """The event type that ``_headers`` name."""

    def feed(self, data: bytes, /) -> list[Payload]:
        """Take the next bytes; return the events of every frame they complete.

        If a frame is bad (a CRC mismatch, an exception frame), the events of the frames before it travel on
        the exception (its ``partial_outputs``): nothing decoded is lost."""
        buffer = self._buffer
        if not buffer and isinstance(data, bytes) and len(data) >= _PRELUDE_SIZE:
            # The live case: a read that is one whole frame with a sound prelude; any other read (a
            # prelude `_frames` refuses included, which it names) takes the loop.
            total_length, headers_length, prelude_crc = _PRELUDE.unpack_from(data)
            if (
                total_length == len(data) <= self._max_frame_size
                and headers_length <= total_length - _MINIMUM_FRAME
                and crc32(data[:8]) == prelude_crc
            ):
                offset = self._offset
                event = self._frame(data, 0, total_length, headers_length, offset)
                self._offset = offset + total_length
                self._frame_number += 1
                return [] if event is None else [event]
        elif type(data) is not bytes:
            data = as_bytes(self, data)
        if buffer:
            buffer += data
        events: list[Payload] = []
        try:
            # A read that starts at a frame (the usual case) is read in place, not copied to the buffer.
            self._frames(buffer if buffer else data, events)
        except StreamfoldError as error:
            keep_partial(error, events)
            raise
        return events

    def _frames(self, data: bytes | bytearray, events: list[Payload]) -> None:
        """The events of the whole frames at the start of ``data`` (the buffer, or a read when the buffer
        is empty); what follows them is left in the buffer."""
        start, size = 0, len(data)
        in_place = isinstance(data, bytes)
        while size - start >= _PRELUDE_SIZE:
            total_length, headers_length, prelude_crc = _PRELUDE.unpack_from(data, start)
            if (
                crc32(data[start : start + 8]) != prelude_crc
                or not _MINIMUM_FRAME <= total_length <= self._max_frame_size
                or headers_length > total_length - _MINIMUM_FRAME
            ):
                raise self._bad_prelude(data, start, total_length, headers_length, prelude_crc)
            end = start + total_length
            if end > size:
                break
            offset = self._offset + start
            if in_place:  # a read's frames are read where they are, not copied
                event = self._frame(data, start, end, headers_length, offset)  # type: ignore[arg-type]
            else:
                event = self._frame(bytes(data[start:end]), 0, total_length, headers_length, offset)
            if event is not None:
                events.append(event)
            start = end
            self._frame_number += 1
        if data is self._buffer:
            del self._buffer[:start]
        elif start < size:
            self._buffer += memoryview(data)[start:]
        self._offset += start

    def finish(self) -> list[Payload]:
        """The body has ended: bytes left over are a frame cut off.

        Raises:
            StreamDecodeError: the body ends inside a frame.
        """
        if self._buffer:
            raise StreamDecodeError(
                f"event-stream body ends inside frame {self._frame_number} at byte {self._offset} "
                f"({len(self._buffer)} bytes of an incomplete frame)",
                offset=self._offset,
            )
        return []

    def _bad_prelude(
        self, data: bytes | bytearray, start: int, total_length: int, headers_length: int, prelude_crc: int
    ) -> StreamDecodeError:
        """The error for the prelude at ``start`` that `_frames` refused: its CRC, its lengths or the cap."""
        offset = self._offset + start
        if crc32(data[start : start + 8]) != prelude_crc:
            return self._error("has a bad prelude CRC", offset)
        if total_length < _MINIMUM_FRAME or headers_length > total_length - _MINIMUM_FRAME:
            return self._error(
                f"has impossible lengths (total {total_length}, headers {headers_length})", offset
            )
        return self._error(f"is {total_length} bytes, over the cap of {self._max_frame_size}", offset)

    def _frame(self, data: bytes, start: int, end: int, headers_length: int, offset: int) -> Payload | None:
        """The event of the whole frame ``data[start:end]``, at byte ``offset`` of the body (None for a
        message type this version does not know)."""
        crc_at = end - 4
        if crc32(data[start:crc_at]) != _CRC.unpack_from(data, crc_at)[0]:
            raise self._error("has a bad message CRC", offset)
        headers_at = start + _PRELUDE_SIZE
        body_at = headers_at + headers_length
        raw_headers = data[headers_at:body_at]
        body = data[body_at:crc_at]
        if raw_headers != self._headers and not self._learn(raw_headers, body, offset):
            return None
        if self._event_type != _CHUNK:
            return _named_event(self._event_type, body, offset)
        # Bedrock's wrapper: msgspec decodes the base64 ``bytes`` field and skips the padding unread
        # (ASCII only: what is skipped is not checked for UTF-8, and base64 is ASCII).
        if body.isascii():
            try:
                event = _decode_envelope(body).event
            except JSON_ERRORS:
                event = self._unwrap(body, offset)  # the general read says what is wrong
        else:
            event = self._unwrap(body, offset)
        return Payload(body if event is None else event, offset)

    def _learn(self, raw_headers: bytes, body: bytes, offset: int) -> bool:
        """Parse a header block unlike the last event frame's: remember it and its event type if it is an
        event frame's; otherwise act on the message (`_message`) and return False."""
        headers = self._parse_headers(memoryview(raw_headers), offset)
        if headers.get(":message-type", "event") != "event":
            self._message(headers, body, offset)
            return False
        named = headers.get(":event-type")
        self._event_type = named if isinstance(named, str) else _CHUNK
        self._headers = raw_headers
        return True

    def _message(self, headers: dict[str, HeaderValue], payload: bytes, offset: int) -> None:
        """A frame that is not an event: an exception or an error raises; other types are skipped."""
        message_type = headers.get(":message-type")
        if message_type == "exception":
            kind = _text(headers.get(":exception-type"))
            details = self._json(payload, offset) if payload else {}
            message = None
            if isinstance(details, Mapping):
                message = details.get("message") or details.get("Message")
            status = details.get("originalStatusCode") if isinstance(details, Mapping) else None
            raise ProviderError.from_payload(
                {
                    "type": kind,
                    "message": message or payload.decode(errors="replace"),
                    "status_code": status,
                },
                details if isinstance(details, Mapping) else {"payload": details},
                f"event-stream frame {self._frame_number}",
            )
        if message_type == "error":
            code = _text(headers.get(":error-code"))
            message = _text(headers.get(":error-message"))
            raise ProviderError.from_payload(
                {"code": code, "message": message},
                {"error_code": code, "error_message": message},
                f"event-stream frame {self._frame_number}",
            )
        # other message types (this version does not know them) are skipped

    def _unwrap(self, payload: bytes, offset: int) -> bytes | None:
        """The wrapper's ``bytes`` field, read as any JSON and base64-decoded; raises for a payload that
        is not such a wrapper."""
        encoded = self._bytes_field(payload, offset)
        if encoded is None:
            return None  # a payload that is the event itself
        if not isinstance(encoded, str):
            raise self._error("has a 'bytes' field that is not a string", offset)
        try:
            return a2b_base64(encoded, strict_mode=True)
        except binascii.Error as error:
            raise self._error(f"has a 'bytes' field that is not base64: {error}", offset) from error

    def _bytes_field(self, payload: bytes, offset: int) -> object:
        """The wrapper's ``bytes`` field, read as any JSON: raises when the payload is not a JSON object."""
        envelope = self._json(payload, offset)
        if not isinstance(envelope, Mapping):
            raise self._error("has a payload that is not a JSON object", offset)
        return envelope.get("bytes")

    def _json(self, data: bytes, offset: int) -> Any:
        try:
            return self._decoder.decode(data)
        except JSON_ERRORS as error:
            raise self._error(f"has a payload that is {json_problem(error, data, None)}", offset) from None

    def _parse_headers(self, data: memoryview, offset: int) -> dict[str, HeaderValue]:
        headers: dict[str, HeaderValue] = {}
        position, end = 0, len(data)
        try:
            while position < end:
                name_length = data[position]
                name = bytes(data[position + 1 : position + 1 + name_length]).decode()
                position += 1 + name_length
                value_type = data[position]
                position += 1
                value: HeaderValue
                if value_type in (0, 1):
                    value = value_type == 0
                elif value_type in _FIXED_SIZE_HEADERS:
                    size, code = _FIXED_SIZE_HEADERS[value_type]
                    (value,) = struct.unpack_from(code, data, position)
                    position += size
                elif value_type == 9:
                    value = bytes(data[position : position + 16])
                    position += 16
                elif value_type in (6, 7):
                    (length,) = struct.unpack_from(">H", data, position)
                    raw = bytes(data[position + 2 : position + 2 + length])
                    value = raw.decode() if value_type == 7 else raw
                    position += 2 + length
                else:
                    raise self._error(f"has a header {name!r} of unknown type {value_type}", offset)
                if position > end:
                    raise IndexError
                headers[name] = value
        except (IndexError, struct.error, UnicodeDecodeError) as error:
            raise self._error(f"has malformed headers ({error or 'cut off'})", offset) from error
        return headers

    def _error(self, problem: str, offset: int) -> StreamDecodeError:
        return StreamDecodeError(
            f"event-stream frame {self._frame_number} at byte {offset} {problem}", offset=offset
        )


def _named_event(event_type: str, body: bytes, offset: int) -> Payload:
    """A ConverseStream event frame as ``{"<event-type>": <payload>}`` (an empty payload as ``{}``)."""
    return Payload(
        b"".join((b"{", msgspec.json.encode(event_type), b":", body if body else b"{}", b"}")), offset
    )


def _text(value: HeaderValue | None) -> str | None:
    return value if isinstance(value, str) else None


_FIXED_SIZE_HEADERS: Final[Mapping[int, tuple[int, str]]] = {
    2: (1, ">b"),
    3: (2, ">h"),
    4: (4, ">i"),
    5: (8, ">q"),
    8: (8, ">q"),  # timestamp: milliseconds since the epoch
}


class _Envelope(msgspec.Struct, gc=False):
    """Bedrock's wrapper of a model event: ``{"bytes": base64 of the event, "p": padding}``."""

    event: builtins.bytes | None = msgspec.field(default=None, name="bytes")


_decode_envelope: Final = msgspec.json.Decoder(_Envelope).decode


class EventStreamDecoder(Framed):
    """Sans-IO core: bytes of an AWS event-stream body in, the model's event dicts out
    (`EventStreamFramer` chained with the generic JSON decode).

    If a frame is bad (a CRC mismatch, an exception frame), the events of the frames before it travel on
    the exception (its ``partial_outputs``): nothing decoded is lost. ``max_frame_size`` bounds one frame,
    and so the bytes held between calls.
    """

    __slots__ = ()

    def __init__(self, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__(
            EventStreamFramer(max_frame_size=max_frame_size), PayloadParser("event-stream frame")
        )


@pipable_operator
def decode_eventstream(
    source: AsyncIterable[bytes], *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
) -> AsyncIterator[dict[str, Any]]:
    """Bedrock event-stream body bytes -> event dicts: the model's own events of
    ``InvokeModelWithResponseStream`` (Anthropic's for Claude models), or ConverseStream's
    ``{"<event-type>": body}``.

    Args:
        source: the response body's bytes.
        max_frame_size: cap, in bytes, of one frame (and so of the bytes held between chunks).

    Raises:
        StreamDecodeError: a frame is malformed, fails its CRC, is over ``max_frame_size`` or is not JSON.
        ProviderError: the stream carries an exception frame or an in-band error object.
    """
    return operator_stream(source, EventStreamDecoder(max_frame_size=max_frame_size))
