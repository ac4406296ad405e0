"""The sans-IO framers of streamfold's own JSON wire: a hub's items, and a log's entries with their ids.

Each is a `pipeline.fanout._asgi.Framer`: bytes for an item, for the end, for an error; the
connection runner sends them over SSE or WebSocket. The browsers' protocols (Vercel, AG-UI) have
their framer in `pipeline.fanout.protocols`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import msgspec

from pipeline._jsonenc import encode_json
from pipeline.errors import ResponseGone, StreamfoldError
from pipeline.fanout.serving._log import Entry

__all__ = [
    "WS_INTERNAL_ERROR",
    "WS_NORMAL_CLOSURE",
    "JSONFramer",
    "JSONWebSocketFramer",
    "ServedFramer",
    "ServedWebSocketFramer",
    "error_to_wire",
    "to_wire",
]

_logger = logging.getLogger("streamfold")

SSE_END: Final = b'event: end\ndata: {"type":"END"}\n\n'
WS_NORMAL_CLOSURE: Final = 1000
WS_INTERNAL_ERROR: Final = 1011


def to_wire(item: Any) -> Any:
    """An item as JSON-ready data: its ``to_dict()`` if it has one, else msgspec's builtins form."""
    to_dict = getattr(item, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    return msgspec.to_builtins(item)


def error_to_wire(error: BaseException) -> dict[str, str]:
    """The ``ERROR`` message for a failed stream (messages of non-streamfold exceptions withheld)."""
    message = str(error) if isinstance(error, StreamfoldError) else "the response stream failed"
    return {"type": "ERROR", "error": type(error).__name__, "message": message}


def _sse_event(name: bytes, data: bytes) -> bytes:
    return b"event: " + name + b"\ndata: " + data + b"\n\n"


def _encoding_failed(error: Exception) -> dict[str, str]:
    _logger.error("an item could not be encoded for the web", exc_info=error)
    return {"type": "ERROR", "error": "EncodeError", "message": f"an item could not be encoded: {error}"}


class JSONFramer:
    """A hub's items over SSE: ``data: <json>`` each, ``event: end`` or ``event: error`` last."""

    __slots__ = ("close_code", "close_reason", "encode", "finished")

    def __init__(self, encode: Callable[[Any], Any]) -> None:
        self.encode = encode
        self.finished = False
        self.close_code = WS_NORMAL_CLOSURE
        self.close_reason = ""

    def frame(self, item: Any) -> bytes:
        try:
            data = encode_json(self.encode(item))
        except Exception as exc:
            return self._failed(_encoding_failed(exc))
        return b"data: " + data + b"\n\n"

    def end(self) -> bytes:
        return SSE_END

    def error(self, error: BaseException) -> bytes:
        return self._failed(error_to_wire(error))

    def _failed(self, message: dict[str, str]) -> bytes:
        self.finished = True
        return _sse_event(b"error", encode_json(message))


class JSONWebSocketFramer(JSONFramer):
    """A hub's items over WebSocket: one JSON text each; close 1000, or an ``ERROR`` and 1011."""

    __slots__ = ()

    def frame(self, item: Any) -> bytes:
        try:
            return encode_json(self.encode(item))
        except Exception as exc:
            return self._failed(_encoding_failed(exc))

    def end(self) -> bytes:
        return b""

    def _failed(self, message: dict[str, str]) -> bytes:
        self.finished = True
        self.close_code = WS_INTERNAL_ERROR
        self.close_reason = message["message"]
        return encode_json(message)


def terminal_message(entry: Entry) -> dict[str, Any]:
    """The last message of a response: ``END``, or ``ERROR`` with the entry's error."""
    if entry.error is None:
        return {"id": entry.id, "type": "END"}
    message: dict[str, Any] = {
        "id": entry.id,
        "type": "ERROR",
        "error": entry.error.get("type"),
        "message": entry.error.get("message"),
    }
    if entry.error.get("kind") is not None:
        message["kind"] = entry.error["kind"]
    return message


def connection_error(error: BaseException) -> dict[str, Any]:
    """An error that ends a connection (not the response): overflow, producer lost, gone."""
    body: dict[str, Any] = dict(error_to_wire(error))
    if isinstance(error, ResponseGone):
        body["first_id"] = error.first_id
    return body


class ServedFramer:
    """A log's entries over SSE: ``id: N`` on every frame, the terminal entry's ``end`` / ``error`` too.

    A connection that ends without the terminal entry (its cursor was past it) gets ``event: end``; one
    cut off by an error, ``event: error`` without ``id:``, so a reconnect resumes after the last entry.
    """

    __slots__ = ("close_code", "close_reason", "finished")

    def __init__(self) -> None:
        self.finished = False
        self.close_code = WS_NORMAL_CLOSURE
        self.close_reason = ""

    def frame(self, entry: Entry) -> bytes:
        if not entry.end:
            return b"id: %d\ndata: %s\n\n" % (entry.id, entry.data or b"null")
        self.finished = True
        name = b"end" if entry.error is None else b"error"
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (entry.id, name, encode_json(terminal_message(entry)))

    def end(self) -> bytes:
        return SSE_END

    def error(self, error: BaseException) -> bytes:
        return _sse_event(b"error", encode_json(connection_error(error)))


class ServedWebSocketFramer(ServedFramer):
    """A log's entries over WebSocket: ``{"id": N, "item": ...}`` each, then ``END`` or ``ERROR``."""

    __slots__ = ()

    def frame(self, entry: Entry) -> bytes:
        if not entry.end:
            return b'{"id":%d,"item":%s}' % (entry.id, entry.data or b"null")
        self.finished = True
        message = terminal_message(entry)
        if entry.error is not None:
            self._close(WS_INTERNAL_ERROR, str(message.get("message", "")))
        return encode_json(message)

    def end(self) -> bytes:
        return b'{"type":"END"}'

    def error(self, error: BaseException) -> bytes:
        message = connection_error(error)
        self._close(WS_INTERNAL_ERROR, message["message"])
        return encode_json(message)

    def _close(self, code: int, reason: str) -> None:
        self.close_code = code
        self.close_reason = reason
