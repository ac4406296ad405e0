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

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, cast

import msgspec
from aiostream import pipable_operator

from pipeline._driver import Chain, drive, partial_outputs
from pipeline.errors import ProviderError, StreamDecodeError

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "EventParser",
    "JSONLinesDecoder",
    "SSEDecoder",
    "ServerSentEvent",
    "decode_jsonl",
    "decode_sse",
    "parse_events",
    "provider_error",
    "raise_for_provider_error",
    "sse_events",
]

DEFAULT_MAX_EVENT_SIZE = 16 * 1024 * 1024
"""Default cap, in bytes, of one SSE event (all its lines) or one JSON line: 16 MiB."""

_BOM = b"\xef\xbb\xbf"
_DONE = "[DONE]"
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


def _keep_partial(error: Exception, outputs: list[Any]) -> None:
    """Attach what a feed produced before ``error`` to it, so that :func:`drive` yields it first."""
    error.streamfold_partial_outputs = outputs + partial_outputs(error)  # type: ignore[attr-defined]


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

    __slots__ = ("_data", "_event", "_event_size", "_event_start", "_last_id", "_lines", "_max", "_retry")

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self._max = max_event_size
        self._lines = _LineSplitter()
        self._data: list[str] = []
        self._event: str | None = None
        self._retry: int | None = None
        self._last_id: str | None = None
        self._event_size = 0
        self._event_start: int | None = None

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
        except (StreamDecodeError, ProviderError) as error:
            _keep_partial(error, values)
            raise
        return values

    def finish(self) -> list[Any]:
        values: list[Any] = []
        try:
            for line, offset in self._lines.finish():
                self._line(line, offset, values)
        except (StreamDecodeError, ProviderError) as error:
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
        except msgspec.DecodeError as error:
            excerpt = _excerpt(stripped.decode("utf-8", "replace"))
            raise StreamDecodeError(
                f"line {number} (byte {offset}) is not valid JSON: {error}: {excerpt}", offset=offset
            ) from None
        if isinstance(value, dict):
            if self._check_errors and _may_be_error(value):
                raise_for_provider_error(value, where=f"line {number}")
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
        number = self._number
        self._number += 1
        data = event.data
        if len(data) <= len(_DONE) + 4 and data.strip() == _DONE:
            return []
        if event.event == "error":
            raise _error_event(event, number, self._decoder)
        try:
            payload = self._decoder.decode(data)
        except msgspec.DecodeError as error:
            raise StreamDecodeError(
                f"event {number} has data that is not valid JSON: {error}: {_excerpt(data)}", offset=number
            ) from None
        if not isinstance(payload, dict):
            raise StreamDecodeError(
                f"event {number} has data that is not a JSON object ({type(payload).__name__}): "
                f"{_excerpt(data)}",
                offset=number,
            )
        if _may_be_error(payload):
            raise_for_provider_error(payload, where=f"event {number}")
        return [payload]

    def finish(self) -> list[dict[str, Any]]:
        return []


def _may_be_error(payload: dict[str, Any]) -> bool:
    """Whether :func:`raise_for_provider_error` could raise for ``payload`` (a cheap test, so that the
    location of the error is formatted only for those)."""
    return payload.get("error") is not None or payload.get("type") == "error"


def raise_for_provider_error(payload: Mapping[str, Any], *, where: str = "event") -> None:
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
    raise provider_error(details, payload, where)


def provider_error(details: Mapping[str, Any], payload: Mapping[str, Any], where: str) -> ProviderError:
    """The :class:`ProviderError` for an error object ``details`` found in ``payload`` at ``where``.

    ``kind``: the most specific word the provider gave (a string ``code``, else ``type``, else ``status``);
    ``status``: the HTTP-like number (``status_code``, or Gemini's numeric ``code``)."""
    message = details.get("message") or details.get("error") or "the provider reported an error"
    code = details.get("code")
    kind = next(
        (
            word
            for word in (code, details.get("type"), details.get("status"))
            if isinstance(word, str) and word
        ),
        None,
    )
    status = details.get("status_code", code)
    return ProviderError(
        f"{where}: provider error{f' ({kind})' if kind else ''}: {message}",
        kind=kind,
        status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        payload=payload,
    )


def _error_event(event: ServerSentEvent, number: int, decoder: msgspec.json.Decoder[Any]) -> ProviderError:
    """The exception for an SSE ``event: error``, whatever its data holds (JSON or plain text)."""
    where = f"event {number}"
    try:
        payload = decoder.decode(event.data)
    except msgspec.DecodeError:
        return ProviderError(f"{where}: provider error: {event.data}", payload={"data": event.data})
    if not isinstance(payload, Mapping):
        return ProviderError(f"{where}: provider error: {event.data}", payload={"data": payload})
    error = payload.get("error")
    details = error if isinstance(error, Mapping) else payload
    return provider_error(details, payload, where)


def _excerpt(text: str) -> str:
    return repr(text if len(text) <= _EXCERPT_LENGTH else text[:_EXCERPT_LENGTH] + "...")


@pipable_operator
def decode_sse(
    source: AsyncIterable[bytes], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
) -> AsyncIterator[ServerSentEvent]:
    """Decode an SSE byte stream into :class:`ServerSentEvent`\\ s."""
    return drive(source, SSEDecoder(max_event_size=max_event_size))


@pipable_operator
def decode_jsonl(
    source: AsyncIterable[bytes], *, max_line_size: int = DEFAULT_MAX_EVENT_SIZE, check_errors: bool = True
) -> AsyncIterator[Any]:
    """Decode a JSON Lines byte stream into one value per non-blank line."""
    return drive(source, JSONLinesDecoder(max_line_size=max_line_size, check_errors=check_errors))


@pipable_operator
def parse_events(source: AsyncIterable[ServerSentEvent]) -> AsyncIterator[dict[str, Any]]:
    """Decode each event's JSON data into the provider's event dict; raise on in-band errors."""
    return drive(source, EventParser())


@pipable_operator
def sse_events(
    source: AsyncIterable[bytes], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
) -> AsyncIterator[dict[str, Any]]:
    """SSE bytes to provider event dicts: :func:`decode_sse` and :func:`parse_events` in one step."""
    events = drive(source, Chain(SSEDecoder(max_event_size=max_event_size), EventParser()))
    return cast(AsyncIterator[dict[str, Any]], events)
