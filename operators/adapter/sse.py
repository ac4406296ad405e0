"""Server-sent events, read as the WHATWG HTML standard's event stream interpretation says:
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation

One parser of the event stream and two views of the events it dispatches:

- `SSEFramer`: each event's data as a `Payload` (its bytes and where they
  start), for a converter to decode. ``data: [DONE]`` ends the data; ``event: error`` raises
  `ProviderError` (SSE-level error signalling).
- `SSEDecoder`: each event as a `ServerSentEvent` (text fields, ``id``, ``retry``).

Then their decodes into provider event dicts: `EventParser` (a `ServerSentEvent` at a time),
`SSEPayloadDecoder` (the framer chained with `PayloadParser`).

Bytes may be split anywhere: inside a UTF-8 sequence, inside ``\\r\\n``, inside a field name. Lines are cut
on the raw bytes and every error names its byte offset in the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Final

import msgspec
from aiostream import pipable_operator

from operators.adapter._lines import BOM, LineSplitter, as_bytes, decode_text, keep_partial
from operators.adapter.payloads import Framed, PayloadParser, excerpt, raise_for_provider_error
from pipeline._jsonenc import JSON_ERRORS, json_problem
from pipeline.errors import ProviderError, StreamDecodeError, StreamfoldError
from pipeline.models import Payload
from pipeline.stage import operator_stream

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "EventParser",
    "SSEDecoder",
    "SSEFramer",
    "SSEPayloadDecoder",
    "ServerSentEvent",
    "decode_sse",
    "parse_events",
    "sse_events",
]

DEFAULT_MAX_EVENT_SIZE: Final = 16 * 1024 * 1024
"""Default cap, in bytes, of one SSE event (all its lines) or one JSON line: 16 MiB."""

_DONE: Final = b"[DONE]"
_DONE_SIZE: Final = len(_DONE) + 4
"""Data longer than this is never ``[DONE]`` with spaces around it."""
_EXCERPT_LENGTH: Final = 80


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


def _one_event(chunk: bytes) -> tuple[bytes | None, int, int] | None:
    """``chunk`` as one whole event (an optional ``event`` line, one ``data`` line, a blank line; all LF or
    all CRLF endings): its event name, and where its data starts and ends in ``chunk``. ``None`` for any
    other shape, which the line-by-line path reads."""
    if chunk[-2:] == b"\n\n":
        newline, end = b"\n", len(chunk) - 2
    elif chunk[-4:] == b"\r\n\r\n":
        newline, end = b"\r\n", len(chunk) - 4
    else:
        return None
    name = None
    start = 0
    if chunk[:6] == b"event:":
        start = chunk.find(newline) + len(newline)
        name = chunk[6 : start - len(newline)]
        if name[:1] == b" ":
            name = name[1:]
        if not name.isascii() or 0x0A in name or 0x0D in name:
            return None
    if chunk[start : start + 5] != b"data:":
        return None
    start += 6 if chunk[start + 5 : start + 6] == b" " else 5
    if start > end or chunk.find(0x0A, start, end) >= 0 or chunk.find(0x0D, start, end) >= 0:
        return None
    return name, start, end


class _EventStreamParser:
    """The WHATWG event stream parser, on bytes: lines, fields, and the dispatch of each event.

    Lines end with CR, LF or CRLF; lines starting with ``:`` are comments; a line without a colon is a
    field with an empty value; one space after the colon is dropped; ``data`` lines are joined with
    ``\\n``; a blank line dispatches the event (an event without data is not dispatched); a UTF-8 BOM at
    the start is skipped; unknown fields are ignored. One deliberate difference from the spec: an event
    still pending when the stream ends (no final blank line) is dispatched by ``finish``, because real
    servers end streams that way. Invalid UTF-8 in a line raises instead of being replaced. The cap
    bounds an event's ``data`` lines, and any one line with the data before it in its event.

    The views override `_dispatch`.
    """

    __slots__ = (
        "_data",
        "_data_offset",
        "_event",
        "_event_size",
        "_event_start",
        "_id",
        "_lines",
        "_max",
        "_retry",
        "_stopped",
    )

    def __init__(self, max_event_size: int) -> None:
        self._max = max_event_size
        self._lines = LineSplitter()
        self._data: list[bytes] = []
        self._data_offset = 0
        """Byte offset of the value of the event's first ``data`` line."""
        self._event_start = 0
        """Byte offset of the event's first ``data`` line."""
        self._event_size = 0
        self._event: bytes | None = None
        self._id: bytes | None = None
        self._retry: int | None = None
        self._stopped = False
        """Set by a view that reads nothing more (``[DONE]``)."""

    def at_event_start(self) -> bool:
        """Whether the bytes read so far end where an event may start (nothing of a line or event held)."""
        return not self._data and self._event is None and self._retry is None and self._lines.at_line_start()

    def _dispatch(self, name: bytes | None, data: bytes, offset: int, out: list[Any]) -> None:
        raise NotImplementedError

    def _take_whole(self, chunk: bytes, out: list[Any]) -> tuple[bytes | None, int, int] | None:
        """At an event start, take ``chunk`` if it is one whole event of one ``data`` line: its name, and
        where its data starts and ends in ``chunk``; ``None`` if it is not."""
        event = _one_event(chunk)
        if event is None or len(chunk) > self._max:
            return None
        name, start, end = event
        offset = self._lines.offset
        self._lines.offset = offset + len(chunk)
        self._dispatch(name, chunk[start:end], offset + start, out)
        return event

    def _feed_lines(self, chunk: bytes, out: list[Any]) -> None:
        for line, offset in self._lines.split(chunk):
            self._line(line, offset, out)
            if self._stopped:
                return
        pending = self._lines.pending_size
        if pending and self._event_size + pending > self._max:
            self._too_large(self._lines.offset)

    def _finish_lines(self, out: list[Any]) -> None:
        for line, offset in self._lines.finish():
            self._line(line, offset, out)
        if not self._stopped:
            self._end_event(out)

    def _line(self, line: bytes, offset: int, out: list[Any]) -> None:
        if not line:
            self._end_event(out)
            return
        if self._event_size + len(line) > self._max:  # as when it was held, a partial line
            self._too_large(offset)
        if not line.isascii():
            decode_text(line, offset)  # invalid UTF-8 raises, naming its byte
        if line[0] == 0x3A:  # a comment
            return
        name, colon, value = line.partition(b":")
        skip = 1 if colon and value[:1] == b" " else 0
        if skip:
            value = value[1:]
        if name == b"data":
            if not self._data:
                self._event_start = offset
                self._data_offset = offset + len(name) + len(colon) + skip
            self._event_size += len(line) + 1
            if self._event_size > self._max:
                self._too_large(offset)
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id":
            if 0 not in value:
                self._id = value
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)

    def _end_event(self, out: list[Any]) -> None:
        data = self._data
        if data:
            self._data = []
            joined = data[0] if len(data) == 1 else b"\n".join(data)
            self._dispatch(self._event, joined, self._data_offset, out)
        self._event = None
        self._retry = None
        self._event_size = 0

    def _too_large(self, offset: int) -> None:
        start = self._event_start if self._data else offset
        raise StreamDecodeError(
            f"server-sent event starting at byte {start} is larger than max_event_size={self._max} bytes "
            f"(still growing at byte {offset})",
            offset=start,
        )


class SSEFramer(_EventStreamParser):
    """Sans-IO framer: SSE bytes -> each event's data as a `Payload`.

    ``data: [DONE]`` ends the data: nothing after it is read. An ``event: error`` raises
    `ProviderError` (its data, JSON or plain text, is the error). A stream that ends without a
    single event although it held something other than comments and blank lines (an HTML or plain-text
    error page fed as the body) raises `StreamDecodeError` quoting its start. An event whose lines
    add up to more than ``max_event_size`` bytes raises too (the cap also bounds a line that never ends).
    """

    __slots__ = ("_data_max", "_ending", "_frame_size", "_head", "_number", "_offset", "_prefix")

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        super().__init__(max_event_size)
        self._number = 0
        """Events dispatched so far."""
        self._head: list[bytes] | None = []
        """The first bytes of the stream (up to an excerpt's length), until the first event."""
        self._prefix = b"data: "
        """What comes before the data in the last event taken whole (its ``event:`` line, if any, and
        ``data: ``): at most one event's bytes."""
        self._ending = b"\n\n"
        """The line ending twice of the last read's last event: what ends the events taken whole."""
        self._frame_size = len(self._prefix) + len(self._ending)
        self._data_max = -1
        """The longest data `feed` may take straight from a read shaped as that one: while at an event
        start after the first event (the live path), what ``max_event_size`` leaves of the read; negative
        otherwise."""
        self._offset = 0
        """Byte offset of the data of the next read if it takes the live path (the line splitter keeps
        the stream offset otherwise)."""

    def feed(self, chunk: bytes) -> list[Payload]:
        """The payloads (data fields) of the events this read completes."""
        # The live case first: a read of one whole event of one data line shaped as the last read taken
        # whole, the same ``event:`` line (never ``error``) and line endings, as streams come: OpenAI Chat,
        # Gemini (CRLF), Anthropic and OpenAI Responses (an ``event:`` line first). Any other read (several
        # events, ``[DONE]``, short data) is cut at its events' ends by `_feed`, which remembers a new
        # shape. Lengths,
        # not identities, tell whether the prefix and ending were there (a bytearray's removeprefix copies
        # even when it removes nothing).
        try:
            data = chunk.removeprefix(self._prefix).removesuffix(self._ending)
        except (AttributeError, TypeError):  # (not bytes: nothing is changed yet)
            return self.feed(as_bytes(self, chunk))
        length = len(data)
        size = len(chunk)
        if (
            _DONE_SIZE < length <= self._data_max
            and size - length == self._frame_size
            and 0x0A not in data
            and 0x0D not in data
        ):
            offset = self._offset
            self._offset = offset + size
            self._number += 1
            return [Payload(data, offset)]
        return self._feed(chunk)

    def finish(self) -> list[Payload]:
        """The body has ended: the payload of an event cut before its blank line."""
        if self._stopped:
            return []
        self._leave_live()
        out: list[Payload] = []
        try:
            self._finish_lines(out)
        except StreamfoldError as error:
            keep_partial(error, out)
            raise
        if self._head is not None:
            start = b"".join(self._head)[:_EXCERPT_LENGTH]
            content = start.removeprefix(BOM).lstrip()
            if content and not content.startswith(b":"):
                raise StreamDecodeError(
                    f"the SSE stream ended without any event; it starts with {start!r}", offset=0
                )
        return out

    def _feed(self, chunk: bytes) -> list[Payload]:
        if self._stopped:
            return []
        self._leave_live()
        head = self._head
        if head is not None and sum(map(len, head)) < _EXCERPT_LENGTH:
            head.append(chunk[:_EXCERPT_LENGTH])
        out: list[Payload] = []
        try:
            if head is None:
                self._feed_events(chunk, out)
            else:
                self._feed_lines(chunk, out)
                if self._head is None:
                    self._learn_ending(chunk)
        except StreamfoldError as error:
            keep_partial(error, out)
            raise
        if self._head is None and not self._stopped and self.at_event_start():
            self._go_live(chunk)
        return out

    def _feed_events(self, chunk: bytes, out: list[Payload]) -> None:
        """A read after the first event, cut where an event shaped as the last one taken whole starts (a
        line ending twice, then that event's prefix): the data between two cuts is such an event's, which
        goes out at once; the bytes before the first cut, after the last, and any between two cuts that
        are not one such event, go through `_feed_ends`. (Cutting at the prefix too is what makes the
        cut cheap: a search for a longer separator skips ahead further.)"""
        ending, prefix = self._ending, self._prefix
        parts = chunk.split(ending + prefix)
        if len(parts) == 1:
            self._feed_ends(chunk, out)
            return
        last = parts.pop()
        self._feed_ends(parts[0] + ending, out)  # (it ends with a blank line: then an event starts)
        if self._stopped:
            return
        lines = self._lines
        frame_size = len(prefix) + len(ending)  # (the shape cut at, even if the first part taught another)
        data_max = self._max - frame_size
        offset, number = lines.offset + len(prefix), self._number  # (offset: of the next data)
        for index in range(1, len(parts)):
            data = parts[index]
            size = len(data)
            if _DONE_SIZE < size <= data_max and 0x0A not in data and 0x0D not in data:
                out.append(Payload(data, offset))
                offset += size + frame_size
                number += 1
                continue
            lines.offset, self._number = offset - len(prefix), number
            self._feed_ends(prefix + data + ending, out)
            if self._stopped:
                return
            offset, number = lines.offset + len(prefix), self._number
        lines.offset, self._number = offset - len(prefix), number
        self._feed_ends(prefix + last, out)

    def _feed_ends(self, chunk: bytes, out: list[Payload]) -> None:
        """Bytes of a read after the first event, cut where its events end: an event shaped as the last
        one taken whole goes out at once, any other part through `_feed_part`; bytes cut inside an event
        leave its end to the next read."""
        ending = self._ending
        parts = chunk.split(ending)
        rest = parts.pop()
        lines = self._lines
        at_start = self.at_event_start()
        prefix, data_max = self._prefix, self._max - self._frame_size
        offset, number = lines.offset, self._number
        for part in parts:
            data = part.removeprefix(prefix)
            size = len(part)
            if (
                at_start
                and _DONE_SIZE < len(data) <= data_max
                and size - len(data) == len(prefix)
                and 0x0A not in data
                and 0x0D not in data
            ):
                out.append(Payload(data, offset + len(prefix)))
                offset += size + len(ending)
                number += 1
                continue
            lines.offset, self._number = offset, number
            if self._feed_part(part + ending, out, at_start):
                return
            at_start = True  # the ending is a blank line
            prefix, data_max = self._prefix, self._max - self._frame_size
            offset, number = lines.offset, self._number
        lines.offset, self._number = offset, number
        if rest:
            self._feed_lines(rest, out)

    def _feed_part(self, event_bytes: bytes, out: list[Payload], at_start: bool) -> bool:
        """Bytes of a read up to and with an ending: one whole event of another shape (at an event start),
        or what the lines make of them. Whether the data has ended (``[DONE]``)."""
        if not (at_start and self._take_other(event_bytes, out)):
            self._feed_lines(event_bytes, out)
        return self._stopped

    def _take_other(self, event_bytes: bytes, out: list[Payload]) -> bool:
        """At an event start, take ``event_bytes`` if it is one whole event of one ``data`` line, and read
        the next events as shaped as it when its data follows ``data: `` (a prefix ending ``data:`` would
        take a space of the data with it)."""
        event = self._take_whole(event_bytes, out)
        if event is None:
            return False
        start = event[1]
        if event_bytes[start - 1] == 0x20:
            self._prefix = event_bytes[:start]
            self._frame_size = start + len(self._ending)
        return True

    def _go_live(self, chunk: bytes) -> None:
        """Take the next reads on the live path, with the line ending of ``chunk``'s last event."""
        self._end_events_with(b"\r\n\r\n" if chunk.endswith(b"\r\n\r\n") else b"\n\n")
        self._data_max = self._max - self._frame_size
        self._offset = self._lines.offset + len(self._prefix)

    def _end_events_with(self, ending: bytes) -> None:
        """Take ``ending`` (a line ending twice) for the end of the events read whole from now on."""
        if ending != self._ending:
            self._ending = ending
            self._frame_size = len(self._prefix) + len(ending)

    def _learn_ending(self, chunk: bytes) -> None:
        """The first events came in ``chunk``: their line ending twice ends the events read whole (a body
        read in large pieces rarely has a read that ends where an event does, for `_go_live` to see)."""
        for ending in (b"\n\n", b"\r\n\r\n"):
            if ending in chunk:
                self._end_events_with(ending)
                return

    def _leave_live(self) -> None:
        """Hand the stream offset back to the line splitter, for the line-by-line path."""
        if self._data_max >= 0:
            self._data_max = -1
            self._lines.offset = self._offset - len(self._prefix)

    def _dispatch(self, name: bytes | None, data: bytes, offset: int, out: list[Any]) -> None:
        number = self._number
        self._number = number + 1
        self._head = None
        if name == b"error":
            raise _error_event(data, number)
        if len(data) <= _DONE_SIZE and data.strip() == _DONE:
            self._stop()
            return
        out.append(Payload(data, offset))

    def _stop(self) -> None:
        self._stopped = True


class SSEDecoder(_EventStreamParser):
    """Sans-IO core: bytes -> `ServerSentEvent`, following the WHATWG event-stream parsing rules.

    Invalid UTF-8 raises `StreamDecodeError` naming the byte offset. An event whose lines add up to
    more than ``max_event_size`` bytes raises too (the cap also bounds a line that never ends).
    """

    __slots__ = ()

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        super().__init__(max_event_size)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The decoded JSON data of the events this read completes."""
        if type(chunk) is not bytes:
            chunk = as_bytes(self, chunk)
        out: list[ServerSentEvent] = []
        try:
            if not (self.at_event_start() and self._take_whole(chunk, out)):
                self._feed_lines(chunk, out)
        except StreamDecodeError as error:
            keep_partial(error, out)
            raise
        return out

    def finish(self) -> list[ServerSentEvent]:
        """The body has ended: the data of an event cut before its blank line."""
        out: list[ServerSentEvent] = []
        try:
            self._finish_lines(out)
        except StreamDecodeError as error:
            keep_partial(error, out)
            raise
        return out

    def _dispatch(self, name: bytes | None, data: bytes, offset: int, out: list[Any]) -> None:
        text = data.decode() if data.isascii() else decode_text(data, offset)
        event = None if name is None else name.decode()
        last_id = None if self._id is None else self._id.decode()
        out.append(ServerSentEvent(event=event, data=text, id=last_id, retry=self._retry))


class EventParser:
    """Sans-IO core: `ServerSentEvent` -> the provider's event dict (its ``data`` decoded as JSON).

    ``data: [DONE]`` yields nothing. An ``event: error`` and in-band error objects raise
    `ProviderError`. Data that is not a JSON object raises `StreamDecodeError` naming the
    event number (from 0, which is also the error's ``offset``) and an excerpt.
    """

    __slots__ = ("_decoder", "_number")

    def __init__(self) -> None:
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
        self._number = 0

    def feed(self, event: ServerSentEvent) -> list[dict[str, Any]]:
        """The events this read completes.

        Raises:
            ProviderError: an ``event: error``, or data that is an in-band provider error.
            StreamDecodeError: data that is not JSON, or not a JSON object.
        """
        number = self._number
        self._number += 1
        data = event.data
        if len(data) <= _DONE_SIZE and data.strip() == "[DONE]":
            return []
        if event.event == "error":
            raise _error_event(data, number)
        try:
            payload = self._decoder.decode(data)
        except JSON_ERRORS as error:
            raise StreamDecodeError(
                f"event {number} has data that is {json_problem(error, data, None)}: {excerpt(data)}",
                offset=number,
            ) from None
        if type(payload) is not dict:
            raise StreamDecodeError(
                f"event {number} has data that is not a JSON object ({type(payload).__name__}): "
                f"{excerpt(data)}",
                offset=number,
            )
        if payload.get("error") is not None or payload.get("type") == "error":
            raise_for_provider_error(payload, where=f"event {number}")
        return [payload]

    def finish(self) -> list[dict[str, Any]]:
        """The body has ended: an event cut before its blank line is dispatched."""
        return []


class SSEPayloadDecoder(Framed):
    """Sans-IO core: SSE bytes -> provider event dicts (`SSEFramer` chained with a
    `PayloadParser`), so that a decode error names the event's byte
    offset in the stream."""

    __slots__ = ()

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        super().__init__(SSEFramer(max_event_size=max_event_size), PayloadParser("event"))


def _error_event(data: str | bytes, number: int) -> ProviderError:
    """The exception for an SSE ``event: error``, whatever its data holds (JSON or plain text)."""
    where = f"event {number}"
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    try:
        payload = msgspec.json.decode(data)
    except JSON_ERRORS:
        return ProviderError.from_payload({"message": text}, {"data": text}, where)
    if not isinstance(payload, dict):
        return ProviderError.from_payload({"message": text}, {"data": payload}, where)
    error = payload.get("error")
    details = error if isinstance(error, dict) else payload
    return ProviderError.from_payload(details, payload, where)


@pipable_operator
def decode_sse(
    source: AsyncIterable[bytes], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
) -> AsyncIterator[ServerSentEvent]:
    """Decode an SSE byte stream into `ServerSentEvent`s.

    Args:
        source: the stream's bytes.
        max_event_size: cap, in bytes, of one event.

    Raises:
        StreamDecodeError: a line is not UTF-8, or an event is over ``max_event_size``.
    """
    return operator_stream(source, SSEDecoder(max_event_size=max_event_size))


@pipable_operator
def parse_events(source: AsyncIterable[ServerSentEvent]) -> AsyncIterator[dict[str, Any]]:
    """Decode each event's JSON data into the provider's event dict; raise on in-band errors."""
    return operator_stream(source, EventParser())


@pipable_operator
def sse_events(
    source: AsyncIterable[bytes], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
) -> AsyncIterator[dict[str, Any]]:
    """SSE bytes to provider event dicts: `SSEFramer` and the generic JSON decode in one step.

    Args:
        source: the stream's bytes.
        max_event_size: cap, in bytes, of one event's data.

    Raises:
        StreamDecodeError: an event's data is not JSON or is over ``max_event_size``.
        ProviderError: an event is an in-band provider error.
    """
    return operator_stream(source, SSEPayloadDecoder(max_event_size=max_event_size))
