"""The provider adapter's decoders: bytes -> server-sent events -> provider event dicts.

Three sans-IO cores, each with ``feed(item) -> list`` and ``finish() -> list``, and their operators::

    bytes ─▶ SSEDecoder ─▶ ServerSentEvent ─▶ EventParser ─▶ dict        (decode_sse | parse_events)
    bytes ─▶ JSONLinesDecoder ─▶ dict                                    (decode_jsonl)

Bytes may be split anywhere: inside a UTF-8 sequence, inside ``\\r\\n``, inside a field name. Lines are cut
on the raw bytes (a CR or LF byte never occurs inside a UTF-8 multi-byte sequence), and each complete line
is decoded as a whole, so a character split across chunks needs no decoder state and every error can name
its exact byte offset. A partial line is kept as a list of pieces and joined once, when its end arrives.

In-band errors (an SSE ``event: error``, Anthropic's ``{"type": "error"}``, OpenAI-compatible servers' and
Gemini's ``{"error": {...}}``, OpenAI Responses' ``{"type": "error", "code": ...}``) raise
:class:`~pipeline.errors.ProviderError` after every event before them was returned.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any

import msgspec
from aiostream import pipable_operator

from pipeline._jsonenc import JSON_ERRORS, json_problem
from pipeline.errors import ProviderError, StreamDecodeError, StreamfoldError
from pipeline.stage import chain, operator_stream

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "EventParser",
    "FusedSSE",
    "JSONLinesDecoder",
    "JSONSequenceDecoder",
    "SSEDecoder",
    "SSEPayloadDecoder",
    "ServerSentEvent",
    "decode_json_sequence",
    "decode_jsonl",
    "decode_sse",
    "parse_events",
    "sse_events",
]

DEFAULT_MAX_EVENT_SIZE = 16 * 1024 * 1024
"""Default cap, in bytes, of one SSE event (all its lines) or one JSON line: 16 MiB."""

_BOM = b"\xef\xbb\xbf"
_DONE = "[DONE]"
_LIVE_MIN = len(_DONE) + 4
"""Data of at most this many bytes is never taken live (``[DONE]``, spaces: the general path reads it)."""
_EXCERPT_LENGTH = 80


class ServerSentEvent(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One dispatched server-sent event.

    ``event`` is the ``event:`` field (``None`` when absent, which the WHATWG spec calls ``message``);
    ``data`` is the ``data:`` lines joined with ``\\n``; ``id`` is the last event id seen in the stream so
    far (it persists across events, as the spec says); ``retry`` is this event's reconnection time in ms.
    """

    event: str | None = None
    data: str = ""
    id: str | None = None
    retry: int | None = None


class _LineSplitter:
    """Cuts a byte stream into complete lines (without their CR, LF or CRLF ending), linearly.

    ``split`` returns ``(line, byte offset of the line)`` pairs; a partial last line is held as pieces.
    ``pending_size`` is the size of the held partial line, for callers' size caps.
    """

    __slots__ = ("_offset", "_pending", "_pending_size", "_skip_lf", "_started")

    def __init__(self) -> None:
        self._offset = 0
        """Byte offset of the first byte not yet part of a returned line (the held partial line's start)."""
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._skip_lf = False
        self._started = False

    @property
    def pending_size(self) -> int:
        return self._pending_size

    @property
    def pending_offset(self) -> int:
        return self._offset

    def split(self, data: bytes) -> list[tuple[bytes, int]]:
        if self._skip_lf and data:
            self._skip_lf = False
            if data[0] == 0x0A:  # the LF of a CRLF whose CR ended the previous chunk
                data = data[1:]
                self._offset += 1
        if not self._started:
            data = self._strip_bom(data)
            if not data:
                return []
        pieces = data.splitlines(keepends=True)  # bytes.splitlines cuts on \r, \n and \r\n only
        lines: list[tuple[bytes, int]] = []
        if not pieces:
            return lines
        last = pieces[-1]
        complete = last.endswith((b"\n", b"\r"))
        if not complete:
            pieces.pop()
        for piece in pieces:
            if self._pending:
                self._pending.append(piece)
                piece = b"".join(self._pending)
                self._pending.clear()
                self._pending_size = 0
            size = len(piece)
            ending = 2 if piece.endswith(b"\r\n") else 1
            lines.append((piece[:-ending], self._offset))
            self._offset += size
        if complete:
            self._skip_lf = last.endswith(b"\r")
        else:
            self._pending.append(last)
            self._pending_size += len(last)
        return lines

    def split_events(self, data: bytes) -> tuple[list[bytes], int, bytes]:
        """For SSE's fast path: ``(blocks, offset, rest)``, where ``blocks`` are the held partial line and
        ``data`` up to its last blank line, split at each ``\\n\\n`` (each block was followed by one),
        ``offset`` is the byte offset of the first block, and ``rest`` is what follows, still to be
        :meth:`split`. Only LF-only data is cut so (no blocks otherwise: all of ``data`` is the rest)."""
        if self._skip_lf or 0x0D in data:
            return [], self._offset, data
        if not self._started:
            data = self._strip_bom(data)
        end = data.rfind(b"\n\n")  # a held partial line has no LF: a blank line can only be in ``data``
        if end < 0:
            return [], self._offset, data
        head = data[:end]
        if self._pending:
            self._pending.append(head)
            head = b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
        offset = self._offset
        self._offset = offset + len(head) + 2
        return head.split(b"\n\n"), offset, data[end + 2 :]

    def finish(self) -> list[tuple[bytes, int]]:
        """The partial last line, if any: a stream may end without a final line ending."""
        if not self._pending:
            return []
        line = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        offset = self._offset
        self._offset += len(line)
        return [(line, offset)]

    def _strip_bom(self, data: bytes) -> bytes:
        """Drop a UTF-8 byte order mark at the very start of the stream, even when split across chunks."""
        head = b"".join(self._pending) + data if self._pending else data
        if len(head) < len(_BOM) and _BOM.startswith(head):
            self._pending = [head]  # too short to tell yet
            self._pending_size = len(head)
            return b""
        self._started = True
        self._pending.clear()
        self._pending_size = 0
        if head.startswith(_BOM):
            self._offset += len(_BOM)
            return head[len(_BOM) :]
        return head


def _keep_partial(error: StreamfoldError, outputs: list[Any]) -> None:
    """Put what a feed produced before ``error`` first in its ``partial_outputs`` (:func:`drive` yields
    them before raising)."""
    error.partial_outputs = outputs + error.partial_outputs


def _decode_line(line: bytes, offset: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        position = offset + error.start
        raise StreamDecodeError(
            f"invalid UTF-8 at byte {position} of the stream: {error.reason}", offset=position
        ) from None


class SSEDecoder:
    """Bytes -> :class:`ServerSentEvent`, following the WHATWG event-stream parsing rules.

    Lines end with CR, LF or CRLF (a CR ending one chunk and an LF starting the next are one ending);
    lines starting with ``:`` are comments; a line without a colon is a field with an empty value; one
    space after the colon is dropped; ``data`` lines are joined with ``\\n``; a blank line dispatches the
    event (an event without data is not dispatched); a UTF-8 BOM at the start is skipped; unknown fields
    are ignored. One deliberate difference from the spec: an event still pending when the stream ends
    (no final blank line) is dispatched by :meth:`finish`, because real servers end streams that way.

    Invalid UTF-8 raises :class:`StreamDecodeError` naming the byte offset. An event whose lines add up to
    more than ``max_event_size`` bytes raises too (the cap also bounds a line that never ends).
    """

    __slots__ = (
        "_data",
        "_event",
        "_event_size",
        "_event_start",
        "_last_id",
        "_lines",
        "_max",
        "_retry",
        "_starts",
    )

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self._max = max_event_size
        self._lines = _LineSplitter()
        self._data: list[str] = []
        self._event: str | None = None
        self._retry: int | None = None
        self._last_id: str | None = None
        self._event_size = 0
        self._event_start: int | None = None
        self._starts: list[int] | None = None
        """When set (by :class:`SSEPayloadDecoder`), the byte offset of each event returned is appended."""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        try:
            blocks, offset, chunk = self._lines.split_events(chunk)
            if blocks:
                self._blocks(blocks, offset, events)
            for line, offset in self._lines.split(chunk):
                self._line(line, offset, events)
            if self._lines.pending_size and self._event_size + self._lines.pending_size > self._max:
                self._too_large(self._lines.pending_offset)
        except StreamDecodeError as error:
            _keep_partial(error, events)
            raise
        return events

    def finish(self) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        try:
            for line, offset in self._lines.finish():
                self._line(line, offset, events)
        except StreamDecodeError as error:
            _keep_partial(error, events)
            raise
        self._dispatch(events)
        return events

    def _blocks(self, blocks: list[bytes], offset: int, events: list[ServerSentEvent]) -> None:
        """The lines of ``blocks``, each block followed by a blank line (see ``_LineSplitter.split_events``).

        The fast path: a block that is a whole event of one ``data`` line becomes its event straight from
        its bytes; any other block (and any block seen while an event is in progress) goes line by line.
        """
        last_id = self._last_id
        fast = not self._data and self._event is None and self._retry is None
        for block in blocks:
            # (``0x0A in block`` looks for an LF with memchr: ``b"\n" in block`` is ten times slower.)
            if fast and block.startswith(b"data:") and 0x0A not in block and len(block) < self._max:
                try:
                    data = (block[6:] if block[5:6] == b" " else block[5:]).decode("utf-8")
                except UnicodeDecodeError:
                    pass  # the line-by-line path reports where
                else:
                    events.append(ServerSentEvent(data=data, id=last_id))
                    if self._starts is not None:
                        self._starts.append(offset)
                    offset += len(block) + 2
                    continue
            for line in block.split(b"\n"):
                self._line(line, offset, events)
                offset += len(line) + 1
            self._dispatch(events)
            offset += 1
            last_id = self._last_id
            fast = True

    def _line(self, line: bytes, offset: int, events: list[ServerSentEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        text = _decode_line(line, offset)
        if text[0] == ":":
            return
        name, colon, value = text.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            if self._event_start is None:
                self._event_start = offset
            self._event_size += len(line) + 1
            if self._event_size > self._max:
                self._too_large(offset)
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if self._data:
            data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
            events.append(ServerSentEvent(event=self._event, data=data, id=self._last_id, retry=self._retry))
            if self._starts is not None:
                self._starts.append(self._event_start or 0)
            self._data = []
        self._event = None
        self._retry = None
        self._event_size = 0
        self._event_start = None

    def _too_large(self, offset: int) -> None:
        start = self._event_start if self._event_start is not None else offset
        raise StreamDecodeError(
            f"server-sent event starting at byte {start} is larger than max_event_size={self._max} bytes "
            f"(still growing at byte {offset})",
            offset=start,
        )


class JSONLinesDecoder:
    """Bytes -> one decoded JSON value per non-blank line (``.jsonl`` recordings: one payload a line).

    Same splitting guarantees as :class:`SSEDecoder`. A line ``[DONE]`` is skipped, so that recorded SSE
    payloads can be replayed as they were. A line that is not JSON raises :class:`StreamDecodeError` naming
    its line number and byte offset; a line longer than ``max_line_size`` bytes raises too. With
    ``check_errors`` (the default), an in-band provider error object raises :class:`ProviderError`; with
    ``objects_only``, a line holding anything but a JSON object raises :class:`StreamDecodeError`.
    """

    __slots__ = ("_check_errors", "_decoder", "_line_number", "_lines", "_max", "_objects_only")

    def __init__(
        self,
        *,
        max_line_size: int = DEFAULT_MAX_EVENT_SIZE,
        check_errors: bool = True,
        objects_only: bool = False,
    ) -> None:
        self._max = max_line_size
        self._check_errors = check_errors
        self._objects_only = objects_only
        self._lines = _LineSplitter()
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
        self._line_number = 0

    def feed(self, chunk: bytes) -> list[Any]:
        values: list[Any] = []
        try:
            for line, offset in self._lines.split(chunk):
                self._line(line, offset, values)
            if self._lines.pending_size > self._max:
                self._too_large(self._lines.pending_offset)
        except StreamfoldError as error:
            _keep_partial(error, values)
            raise
        return values

    def finish(self) -> list[Any]:
        values: list[Any] = []
        try:
            for line, offset in self._lines.finish():
                self._line(line, offset, values)
        except StreamfoldError as error:
            _keep_partial(error, values)
            raise
        return values

    def _line(self, line: bytes, offset: int, values: list[Any]) -> None:
        number = self._line_number
        self._line_number += 1
        if len(line) > self._max:
            self._too_large(offset)
        stripped = line.strip()
        if not stripped or stripped == b"[DONE]":
            return
        try:
            value = self._decoder.decode(stripped)
        except JSON_ERRORS as error:
            start = offset + len(line) - len(line.lstrip())
            if isinstance(error, UnicodeDecodeError):
                _decode_line(stripped, start)  # raises, naming the byte of the stream
            excerpt = _excerpt(stripped.decode("utf-8", "replace"))
            raise StreamDecodeError(
                f"line {number} (byte {offset}) is {json_problem(error, stripped, start)}: {excerpt}",
                offset=offset,
            ) from None
        if isinstance(value, dict):
            if self._check_errors and _may_be_error(value):
                _raise_for_provider_error(value, where=f"line {number}")
        elif self._objects_only:
            raise StreamDecodeError(
                f"line {number} (byte {offset}) holds a JSON {type(value).__name__}, not an object: "
                f"{_excerpt(stripped.decode('utf-8', 'replace'))}",
                offset=offset,
            )
        values.append(value)

    def _too_large(self, offset: int) -> None:
        raise StreamDecodeError(
            f"JSON line starting at byte {offset} is larger than max_line_size={self._max} bytes",
            offset=offset,
        )


class EventParser:
    """:class:`ServerSentEvent` -> the provider's event dict (its ``data`` decoded as a JSON object).

    ``data: [DONE]`` yields nothing (the end of the byte stream is what ends the response). In-band errors
    raise :class:`ProviderError`. Data that is not a JSON object raises :class:`StreamDecodeError` naming
    the event number (from 0) and an excerpt.
    """

    __slots__ = ("_decoder", "_number")

    def __init__(self) -> None:
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
        self._number = 0

    def feed(self, event: ServerSentEvent) -> list[dict[str, Any]]:
        return self.parse(event, None)

    def parse(self, event: ServerSentEvent, start: int | None) -> list[dict[str, Any]]:
        """:meth:`feed`, knowing the byte offset ``start`` of the event in the stream (errors name it, and
        it is their ``offset``; without it, the ``offset`` of an error is the event number)."""
        number = self._number
        self._number += 1
        data = event.data
        if len(data) <= len(_DONE) + 4 and data.strip() == _DONE:
            return []
        if event.event == "error":
            raise _error_event(event, number, self._decoder)
        try:
            payload = self._decoder.decode(data)
        except JSON_ERRORS as error:
            where = f"event {number}" if start is None else f"event {number} (byte {start})"
            raise StreamDecodeError(
                f"{where} has data that is {json_problem(error, data, None)}: {_excerpt(data)}",
                offset=number if start is None else start,
            ) from None
        if not isinstance(payload, dict):
            where = f"event {number}" if start is None else f"event {number} (byte {start})"
            raise StreamDecodeError(
                f"{where} has data that is not a JSON object ({type(payload).__name__}): {_excerpt(data)}",
                offset=number if start is None else start,
            )
        if _may_be_error(payload):
            _raise_for_provider_error(payload, where=f"event {number}")
        return [payload]

    def finish(self) -> list[dict[str, Any]]:
        return []


class SSEPayloadDecoder:
    """SSE bytes -> provider event dicts: :class:`SSEDecoder` and :class:`EventParser` as one core, so that
    a decode error names the event's byte offset in the stream.

    A stream that ends without a single event although it held something other than comments and blank
    lines (an HTML or plain-text error page fed as the body) raises :class:`StreamDecodeError` quoting its
    start, instead of giving an empty response.
    """

    __slots__ = ("_events", "_parser", "_seen_event", "_start", "_starts")

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self._events = SSEDecoder(max_event_size=max_event_size)
        self._starts: list[int] = []
        self._events._starts = self._starts
        self._parser = EventParser()
        self._seen_event = False
        self._start: list[bytes] | None = []
        """The first bytes of the stream (up to an excerpt's length), until the first event."""

    def at_event_boundary(self) -> bool:
        """Whether the bytes read so far end at an event boundary (nothing of a line or event is held)."""
        events = self._events
        lines = events._lines
        return (
            not events._data
            and events._event is None
            and events._retry is None
            and lines._started
            and not lines._pending
            and not lines._skip_lf
        )

    def live_data(self, chunk: bytes) -> bytes | None:
        """The ``data`` of ``chunk`` if it is the live case, one whole event of one ``data`` line that may
        hold a JSON object; else ``None``. Valid only :meth:`at_event_boundary`. Nothing is consumed: after
        using the data, call :meth:`took_live`; else :meth:`feed` the chunk.

        For a converter fused with this decoder, which decodes the data into its own types
        (:meth:`operators.convert.openai_chat.OpenAIChatConverter.feed_json`)."""
        end = len(chunk) - 2
        # (Ints, not b"\n": ``find`` and ``in`` then look with memchr.)
        if (
            chunk.find(0x0A) == end
            and chunk[-1] == 0x0A
            and 0x0D not in chunk
            and chunk.startswith(b"data:")
            and end < self._events._max
        ):
            data = chunk[6:-2] if chunk[5] == 0x20 else chunk[5:-2]
            if len(data) > _LIVE_MIN:
                return data
        return None

    def took_live(self, size: int) -> None:
        """The ``size`` bytes of the event whose data :meth:`live_data` gave
        were consumed (the blank line included)."""
        self._events._lines._offset += size
        self._parser._number += 1
        self._start = None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        if self._start is not None and sum(map(len, self._start)) < _EXCERPT_LENGTH:
            self._start.append(chunk[:_EXCERPT_LENGTH])
        data = self.live_data(chunk) if self.at_event_boundary() else None
        if data is not None:
            try:
                payload = self._parser._decoder.decode(data)
            except JSON_ERRORS:
                payload = None
            if type(payload) is dict and payload.get("error") is None and payload.get("type") != "error":
                self.took_live(len(chunk))
                return [payload]
        events = self._events
        lines = events._lines
        clean = not events._data and events._event is None and events._retry is None
        payloads: list[dict[str, Any]] = []
        if clean:
            blocks, offset, chunk = lines.split_events(chunk)
            if blocks:
                try:
                    self._blocks(blocks, offset, payloads)
                except StreamfoldError as error:
                    _keep_partial(error, payloads)
                    raise
            if not chunk:
                return payloads
        self._starts.clear()
        try:
            dispatched = events.feed(chunk)
        except StreamDecodeError as error:
            error.partial_outputs = payloads + self._parse(error.partial_outputs)
            raise
        if dispatched:
            payloads.extend(self._parse(dispatched))
        return payloads

    def _blocks(self, blocks: list[bytes], offset: int, payloads: list[dict[str, Any]]) -> None:
        """The fast path for whole events (``blocks`` as ``_LineSplitter.split_events`` cuts them).

        A block of one ``data`` line holding a JSON object that is no error is decoded straight from its
        bytes, without a :class:`ServerSentEvent` or a ``str`` in between (msgspec checks the UTF-8 as it
        decodes). Any other block (``[DONE]``, other fields, bad UTF-8 or JSON, an error, too large) goes
        through :class:`SSEDecoder` and :class:`EventParser`, which say what is wrong and where."""
        parser = self._parser
        decode = parser._decoder.decode
        limit = self._events._max
        for block in blocks:
            # (``0x0A in block`` looks for an LF with memchr: ``b"\n" in block`` is ten times slower.)
            if block.startswith(b"data:") and 0x0A not in block and len(block) < limit:
                data = block[6:] if block[5:6] == b" " else block[5:]
                if len(data) > _LIVE_MIN:
                    try:
                        payload = decode(data)
                    except JSON_ERRORS:
                        payload = None
                    if type(payload) is dict and not _may_be_error(payload):
                        parser._number += 1
                        payloads.append(payload)
                        self._start = None
                        offset += len(block) + 2
                        continue
            self._starts.clear()
            events: list[ServerSentEvent] = []
            self._events._blocks([block], offset, events)
            if events:
                payloads.extend(self._parse(events))
            offset += len(block) + 2

    def finish(self) -> list[dict[str, Any]]:
        self._starts.clear()
        try:
            events = self._events.finish()
        except StreamDecodeError as error:
            error.partial_outputs = self._parse(error.partial_outputs)
            raise
        payloads = self._parse(events) if events else []
        if self._start is not None:
            start = b"".join(self._start)[:_EXCERPT_LENGTH]
            stripped = start.removeprefix(_BOM).lstrip()
            if stripped and not stripped.startswith(b":"):
                raise StreamDecodeError(
                    f"the SSE stream ended without any event; it starts with {start!r}", offset=0
                )
        return payloads

    def _parse(self, events: list[ServerSentEvent]) -> list[dict[str, Any]]:
        if events:
            self._start = None
        payloads: list[dict[str, Any]] = []
        parse = self._parser.parse
        try:
            for event, start in zip(events, self._starts, strict=True):
                payloads.extend(parse(event, start))
        except StreamfoldError as error:
            _keep_partial(error, payloads)
            raise
        return payloads


class FusedSSE:
    """SSE bytes through :class:`SSEPayloadDecoder` into a converter that decodes live events itself
    (``feed_json(data) -> outputs | None``: the OpenAI Chat converter's ``feed_json``).

    The two chained, except that a read holding one live event (the next text, the next arguments) goes
    straight from its bytes into the converter's own types, without the event's dicts. Every other read
    goes through the chain, so the outputs and errors are the chain's (a property test compares them).
    The live test is made here, in the one call per read, rather than in the decoder's methods
    (:meth:`~SSEPayloadDecoder.live_data`, :meth:`~SSEPayloadDecoder.took_live`): measured, a call is
    about a tenth of a live event's cost.
    """

    __slots__ = (
        "_at_boundary",
        "_chain",
        "_decoder",
        "_feed_json",
        "_lines",
        "_max",
        "_parser",
        "abort",
        "finish",
    )

    def __init__(self, decoder: SSEPayloadDecoder, converter: Any) -> None:
        self._decoder = decoder
        self._feed_json: Callable[[bytes], list[Any] | None] = converter.feed_json
        self._chain = chain(decoder, converter)
        self.finish = self._chain.finish
        self.abort: Callable[[BaseException], list[Any]] = getattr(self._chain, "abort")  # noqa: B009  # a _Chain has one
        self._at_boundary = decoder._start is None and decoder.at_event_boundary()
        """Whether the decoder is at an event boundary, after its first event: set after each read the
        chain takes (and here, for a decoder that has read the stream's first events already)."""
        self._lines = decoder._events._lines
        self._max = decoder._events._max
        self._parser = decoder._parser

    def feed(self, item: bytes) -> list[Any]:
        if self._at_boundary and type(item) is bytes:
            # SSEPayloadDecoder.live_data, feed_json and took_live, inline, for one whole event of one
            # ``data: `` line. (Slices compared, not ``startswith``, which parses its argument: measured,
            # 25 ns less than cutting the line off with ``partition``; ``data:`` without the space is read
            # live by _events.)
            if item[:6] == b"data: " and item[-2:] == b"\n\n":
                data = item[6:-2]
                if 0x0A not in data and 0x0D not in data and _LIVE_MIN < len(data) < self._max - 6:
                    outputs = self._feed_json(data)
                    if outputs is not None:
                        self._lines._offset += len(item)
                        self._parser._number += 1
                        return outputs
            if 0x0D not in item:
                # Several events (or one the converter declined, which _events then reads as read).
                return self._events(item)
        return self._slow(item)

    def _slow(self, item: bytes) -> list[Any]:
        try:
            return self._chain.feed(item)
        finally:
            decoder = self._decoder
            # Live reads wait for the first event too (it clears the excerpt of the stream's start that
            # an eventless stream is reported with), so that they need not clear it themselves.
            self._at_boundary = decoder._start is None and decoder.at_event_boundary()

    def _events(self, item: bytes) -> list[Any]:
        """A read of several events (a replay, a burst): each whole one as a live read of its own (the
        bytes are the same, cut at the blank lines; the decoder's offsets run on), the rest as read.

        The read is cut where a blank line is followed by a ``data`` field, so that each piece is the
        data of a live event when it is one line: measured, half the cost of cutting at blank lines and
        looking at each event's field name."""
        end = item.rfind(b"\n\n")
        if end < 0:
            return self._slow(item)
        outputs: list[Any] = []
        try:
            prefix = b"data: " if item.startswith(b"data: ") else b"data:"
            if not item.startswith(prefix):
                # Something else first (a comment, an ``event`` field): as read, up to the first data event.
                first = item.find(b"\n\n" + prefix, 0, end)
                if first < 0:
                    return self._slow(item)
                outputs += self._slow(item[: first + 2])
                item, end = item[first + 2 :], end - first - 2
            outputs += self._data_events(item[len(prefix) : end].split(b"\n\n" + prefix), prefix)
            rest = item[end + 2 :]
            if rest:
                outputs += self._slow(rest)
        except StreamfoldError as error:
            error.partial_outputs = outputs + error.partial_outputs
            raise
        return outputs

    def _data_events(self, pieces: list[bytes], prefix: bytes) -> list[Any]:
        """Whole events that each began with ``prefix`` (a ``data`` field), without it and their blank line:
        one whose data is one line is a live read (SSEPayloadDecoder.live_data and took_live, inline);
        another goes through the chain as it was read. (The chain reads whole events, so the decoder stays
        at an event boundary from one to the next, as live reads need.)"""
        feed_json, lines, parser = self._feed_json, self._lines, self._parser
        largest = self._max - len(prefix)
        framing = len(prefix) + 2
        outputs: list[Any] = []
        taken = count = 0  # the bytes and events of live reads, added to the decoder's counts in one go
        try:
            for data in pieces:
                if 0x0A not in data and _LIVE_MIN < len(data) < largest:
                    chunks = feed_json(data)
                    if chunks is not None:
                        taken += len(data)
                        count += 1
                        outputs += chunks
                        continue
                lines._offset += taken + framing * count
                parser._number += count
                taken = count = 0
                outputs += self._slow(prefix + data + b"\n\n")
        except StreamfoldError as error:
            error.partial_outputs = outputs + error.partial_outputs
            raise
        finally:
            lines._offset += taken + framing * count
            parser._number += count
        return outputs


class JSONSequenceDecoder:
    """Bytes of one JSON array of objects, or of JSON objects one after another (pretty-printed or not),
    -> one dict per object, each as soon as its last byte arrives.

    Gemini's ``streamGenerateContent`` without ``alt=sse`` streams one array (``[{...},\r\n{...}]``); an
    HTTP error body is often one pretty-printed object. The bytes are scanned once, by a small state machine
    (depth, in a string, after a backslash) that jumps between structural characters with a regex, and
    each object's bytes are joined and decoded once, when it closes: linear in the stream. An object over
    ``max_value_size`` bytes raises :class:`StreamDecodeError`, and so does anything but objects at the top
    (or in the array), an array not closed or an object cut off at the end. In-band provider error
    objects raise :class:`ProviderError` after every object before them.
    """

    __slots__ = (
        "_array",
        "_decoder",
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

    def __init__(self, *, max_value_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self._max = max_value_size
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
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

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        values: list[dict[str, Any]] = []
        try:
            self._scan(chunk, values)
        except StreamfoldError as error:
            _keep_partial(error, values)
            raise
        return values

    def finish(self) -> list[dict[str, Any]]:
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

    def _scan(self, data: bytes, values: list[dict[str, Any]]) -> None:
        if not self._started and data:
            self._started = True
            if data.startswith(_BOM):  # (a BOM split across the first chunks is not recognised)
                data = data[len(_BOM) :]
                self._offset += len(_BOM)
        position, end = 0, len(data)
        start = 0 if self._depth else -1  # where the current object starts in ``data``
        if self._escape and end:
            self._escape = False
            position = 1
        string_special, structural = _STRING_SPECIAL.search, _STRUCTURAL.search
        while position < end:
            if not self._depth:
                position = _SPACE.match(data, position).end()  # type: ignore[union-attr]
                if position >= end:
                    break
                position, start = self._between(data, position)
                continue
            if self._in_string:
                match = string_special(data, position)
                if match is None:
                    break
                position = match.end()
                if match.group() == b"\\":
                    if position >= end:
                        self._escape = True
                        break
                    position += 1
                else:
                    self._in_string = False
                continue
            match = structural(data, position)
            if match is None:
                break
            position = match.end()
            char = match.group()
            if char == b'"':
                self._in_string = True
            elif char in b"{[":
                self._depth += 1
            else:
                self._depth -= 1
                if not self._depth:
                    self._value(data[start:position], values)
                    start = -1
        if self._depth and start >= 0:
            piece = data[start:]
            self._pieces.append(piece)
            self._size += len(piece)
            if self._size > self._max:
                raise StreamDecodeError(
                    f"JSON object {self._number} starting at byte {self._value_start} is larger than "
                    f"max_value_size={self._max} bytes",
                    offset=self._value_start,
                )
        self._offset += end

    def _between(self, data: bytes, position: int) -> tuple[int, int]:
        """At the top, outside any object, at a byte that is not whitespace: the next position, and that
        of the object it starts (-1 if none)."""
        char = data[position]
        state = self._array
        if char == 0x7B and state in (None, "values", "open", "comma"):  # {
            if state is None:
                self._array = "values"
            elif state != "values":
                self._array = "value"
            self._depth = 1
            self._in_string = False
            self._value_start = self._offset + position
            return position + 1, position
        if char == 0x5B and state is None:  # [
            self._array = "open"
            return position + 1, -1
        if char == 0x2C and state == "value":  # ,
            self._array = "comma"
            return position + 1, -1
        if char == 0x5D and state in ("open", "value"):  # ]
            self._array = "closed"
            return position + 1, -1
        offset = self._offset + position
        expected = {
            None: "a JSON object or array",
            "values": "a JSON object",
            "open": "a JSON object or ']'",
            "value": "',' or ']'",
            "comma": "a JSON object",
            "closed": "nothing after the array",
        }[state]
        raise StreamDecodeError(
            f"expected {expected} at byte {offset} of the JSON stream, "
            f"got {data[position : position + 20]!r}",
            offset=offset,
        )

    def _value(self, tail: bytes, values: list[dict[str, Any]]) -> None:
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
        try:
            value = self._decoder.decode(tail)
        except JSON_ERRORS as error:
            if isinstance(error, UnicodeDecodeError):
                _decode_line(tail, start)  # raises, naming the byte of the stream
            raise StreamDecodeError(
                f"JSON object {number} (byte {start}) is {json_problem(error, tail, start)}: "
                f"{_excerpt(tail.decode('utf-8', 'replace'))}",
                offset=start,
            ) from None
        if _may_be_error(value):
            _raise_for_provider_error(value, where=f"JSON object {number}")
        values.append(value)


_SPACE = re.compile(rb"[ \t\r\n]*")
_STRING_SPECIAL = re.compile(rb'["\\]')
_STRUCTURAL = re.compile(rb'[{}\[\]"]')


def _may_be_error(payload: dict[str, Any]) -> bool:
    """Whether :func:`raise_for_provider_error` could raise for ``payload`` (a cheap test, so that the
    location of the error is formatted only for those)."""
    return payload.get("error") is not None or payload.get("type") == "error"


def _raise_for_provider_error(payload: Mapping[str, Any], *, where: str = "event") -> None:
    """Raise :class:`ProviderError` if ``payload`` is an in-band error object of any known wire format.

    Recognised: ``{"type": "error", "error": {...}}`` (Anthropic), ``{"type": "error", "code": ...,
    "message": ...}`` (OpenAI Responses), ``{"error": {...}}`` without ``choices`` (OpenAI-compatible
    servers, Gemini). A payload with ``"error": null`` is not an error.
    """
    kind = payload.get("type")
    error = payload.get("error")
    if kind == "error":
        details = error if isinstance(error, Mapping) else payload
    elif error is not None and "choices" not in payload and "type" not in payload:
        details = error if isinstance(error, Mapping) else {"message": str(error)}
    else:
        return
    raise ProviderError.from_payload(details, payload, where)


def _error_event(event: ServerSentEvent, number: int, decoder: msgspec.json.Decoder[Any]) -> ProviderError:
    """The exception for an SSE ``event: error``, whatever its data holds (JSON or plain text)."""
    where = f"event {number}"
    try:
        payload = decoder.decode(event.data)
    except msgspec.DecodeError:
        return ProviderError.from_payload({"message": event.data}, {"data": event.data}, where)
    if not isinstance(payload, Mapping):
        return ProviderError.from_payload({"message": event.data}, {"data": payload}, where)
    error = payload.get("error")
    details = error if isinstance(error, Mapping) else payload
    return ProviderError.from_payload(details, payload, where)


def _excerpt(text: str) -> str:
    return repr(text if len(text) <= _EXCERPT_LENGTH else text[:_EXCERPT_LENGTH] + "...")


@pipable_operator
def decode_sse(
    source: AsyncIterable[bytes], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
) -> AsyncIterator[ServerSentEvent]:
    """Decode an SSE byte stream into :class:`ServerSentEvent`\\ s."""
    return operator_stream(source, SSEDecoder(max_event_size=max_event_size))


@pipable_operator
def decode_jsonl(
    source: AsyncIterable[bytes], *, max_line_size: int = DEFAULT_MAX_EVENT_SIZE, check_errors: bool = True
) -> AsyncIterator[Any]:
    """Decode a JSON Lines byte stream into one value per non-blank line."""
    return operator_stream(source, JSONLinesDecoder(max_line_size=max_line_size, check_errors=check_errors))


@pipable_operator
def decode_json_sequence(
    source: AsyncIterable[bytes], *, max_value_size: int = DEFAULT_MAX_EVENT_SIZE
) -> AsyncIterator[dict[str, Any]]:
    """Decode a JSON array of objects (or objects one after another) into one dict per object, as each
    object's bytes arrive (Gemini's ``streamGenerateContent`` without ``alt=sse``)."""
    return operator_stream(source, JSONSequenceDecoder(max_value_size=max_value_size))


@pipable_operator
def parse_events(source: AsyncIterable[ServerSentEvent]) -> AsyncIterator[dict[str, Any]]:
    """Decode each event's JSON data into the provider's event dict; raise on in-band errors."""
    return operator_stream(source, EventParser())


@pipable_operator
def sse_events(
    source: AsyncIterable[bytes], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
) -> AsyncIterator[dict[str, Any]]:
    """SSE bytes to provider event dicts: :func:`decode_sse` and :func:`parse_events` in one step."""
    return operator_stream(source, SSEPayloadDecoder(max_event_size=max_event_size))
