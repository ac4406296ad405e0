"""One web connection, written once: the ASGI side of every streaming endpoint.

`serve_connection` runs a connection whose refusals (404, 403, ...) were already answered: it
cancels everything at once when the client disconnects, bounds every send by ``send_timeout``, sends a
heartbeat when the items pause, and asks a sans-IO `Framer` for the bytes of each item, of the
end and of an error. The framer knows the wire (streamfold JSON, served ids, a browser protocol); the
runner knows SSE and WebSocket, told apart by the scope's type.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, MutableMapping, Sequence
from typing import Any, Final, Protocol, TypeAlias

import anyio

from pipeline.errors import ConfigurationError

__all__ = [
    "MAX_SEND_BYTES",
    "SSE_HEADERS",
    "SSE_KEEP_ALIVE",
    "Framer",
    "Message",
    "NextBatch",
    "Receive",
    "Scope",
    "Send",
    "accept_websocket",
    "bounded_send",
    "require_http",
    "send_close",
    "send_json_response",
    "send_plain_response",
    "serve_connection",
]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

NextBatch: TypeAlias = Callable[[], Awaitable[Sequence[Any] | None]]
"""The connection's items: the next non-empty batch (waits for one), None at the clean end; raises
the error that ends the stream."""

MAX_SEND_BYTES: Final = 64 * 1024
"""SSE: items of one batch are sent in bodies of about this size at most (an item is never split)."""
SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each event on at once
]
SSE_KEEP_ALIVE: Final = b": keep-alive\n\n"
_JSON_HEADERS: Final = [(b"content-type", b"application/json")]
_WS_MAX_REASON_BYTES: Final = 123


class Framer(Protocol):
    """One wire's bytes for one connection, sans IO; `serve_connection` sends them.

    Over WebSocket each non-empty frame is one text message, and the connection closes with
    `close_code` and `close_reason` once the stream is over.
    """

    finished: bool
    """The last frame ended the stream (a terminal entry, an item that could not be encoded)."""
    close_code: int
    close_reason: str

    def frame(self, item: Any) -> bytes:
        """The bytes of one item (may set `finished`)."""
        ...

    def end(self) -> bytes:
        """The bytes of a clean end."""
        ...

    def error(self, error: BaseException) -> bytes:
        """The bytes of a stream that failed with ``error``."""
        ...


def require_http(scope: Scope) -> None:
    """Raise ``ConfigurationError`` unless ``scope`` is an HTTP request (an SSE endpoint's)."""
    if scope["type"] != "http":
        raise ConfigurationError(f"an SSE endpoint serves HTTP requests, not {scope['type']!r}")


async def accept_websocket(scope: Scope, receive: Receive, send: Send) -> bool:
    """Accept a WebSocket connection; False when the client left before connecting.

    Raises:
        ConfigurationError: ``scope`` is not a WebSocket connection.
    """
    if scope["type"] != "websocket":
        raise ConfigurationError(f"a WebSocket endpoint serves WebSocket connections, not {scope['type']!r}")
    if (await receive())["type"] != "websocket.connect":
        return False
    await send({"type": "websocket.accept"})
    return True


async def serve_connection(
    scope: Scope,
    receive: Receive,
    send: Send,
    items: NextBatch,
    framer: Framer,
    *,
    heartbeat: float | None,
    send_timeout: float | None,
    start: Message | None = None,
    fill: Callable[[], Coroutine[Any, Any, object]] | None = None,
) -> bool:
    """Stream ``items`` through ``framer`` until the end, an error, or the client goes away.

    Args:
        items: the batches to send; see `NextBatch`.
        heartbeat: SSE: send a comment after this many idle seconds (None: never).
        send_timeout: one send taking longer ends the connection (None: no bound).
        start: HTTP: the ``http.response.start`` message sent first.
        fill: a task feeding ``items`` (a log reader), cancelled with the connection.

    Returns:
        True when the client stalled: one send took longer than ``send_timeout``.
    """
    if scope.get("method") == "HEAD":  # (its headers only: a body would go nowhere, and the stream on)
        if start is not None:
            await send(start)
            await send({"type": "http.response.body", "body": b""})
        return False
    disconnect = "http.disconnect" if scope["type"] == "http" else "websocket.disconnect"
    wire: _Wire = _SSEWire() if scope["type"] == "http" else _WebSocketWire()
    stalled = False
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_cancel_on_disconnect, receive, disconnect, tasks.cancel_scope)
        if fill is not None:
            tasks.start_soon(fill)
        wire.send = bounded_send(send, send_timeout)
        try:
            if start is not None:
                await wire.send(start)
            await _stream(items, framer, wire, heartbeat)
        except TimeoutError:
            stalled = True
        except OSError:
            pass  # the client went away while we were sending
        tasks.cancel_scope.cancel()
    return stalled


async def _stream(items: NextBatch, framer: Framer, wire: _Wire, heartbeat: float | None) -> None:
    while True:
        try:
            batch = await _next_batch(items, heartbeat)
        except Exception as exc:
            await wire.close(framer.error(exc), framer)
            return
        if batch is None:
            await wire.close(framer.end(), framer)
            return
        if not batch:
            await wire.put(SSE_KEEP_ALIVE)
            await wire.flush()
            continue
        for item in batch:
            frame = framer.frame(item)
            if framer.finished:
                await wire.close(frame, framer)
                return
            await wire.put(frame)
        await wire.flush()


async def _next_batch(items: NextBatch, heartbeat: float | None) -> Sequence[Any] | None:
    """The next batch, None at the end, or ``[]`` when ``heartbeat`` seconds passed without one."""
    if heartbeat is None:
        return await items()
    with anyio.move_on_after(heartbeat):
        return await items()
    return []


class _Wire:
    """How frames reach the client; `send` is bounded by the connection's ``send_timeout``."""

    send: Send

    async def put(self, frame: bytes) -> None:
        raise NotImplementedError

    async def flush(self) -> None:
        """Send what `put` holds back."""

    async def close(self, frame: bytes, framer: Framer) -> None:
        raise NotImplementedError


class _SSEWire(_Wire):
    """An HTTP body: a batch's frames go out in pieces of about `MAX_SEND_BYTES`."""

    def __init__(self) -> None:
        self._frames: list[bytes] = []
        self._size = 0

    async def put(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._size += len(frame)
        if self._size >= MAX_SEND_BYTES:  # keep each send small enough for send_timeout to mean something
            await self.flush()

    async def flush(self) -> None:
        if self._frames:
            body = b"".join(self._frames)
            self._frames.clear()
            self._size = 0
            await self.send({"type": "http.response.body", "body": body, "more_body": True})

    async def close(self, frame: bytes, framer: Framer) -> None:
        self._frames.append(frame)
        body = b"".join(self._frames)
        self._frames.clear()
        await self.send({"type": "http.response.body", "body": body, "more_body": False})


class _WebSocketWire(_Wire):
    """One text message per frame, then the close the framer chose."""

    async def put(self, frame: bytes) -> None:
        if frame:
            await self.send({"type": "websocket.send", "text": frame.decode()})

    async def close(self, frame: bytes, framer: Framer) -> None:
        await self.put(frame)
        await send_close(self.send, framer.close_code, framer.close_reason)


def bounded_send(send: Send, timeout: float | None) -> Send:
    """``send``, raising ``TimeoutError`` when one send takes longer than ``timeout`` seconds."""
    if timeout is None:
        return send

    async def bounded(message: Message) -> None:
        with anyio.fail_after(timeout):
            await send(message)

    return bounded


async def _cancel_on_disconnect(receive: Receive, disconnect: str, scope: anyio.CancelScope) -> None:
    """Read the client's messages until it disconnects, then cancel the connection's work."""
    while (await receive())["type"] != disconnect:
        pass
    scope.cancel()


async def send_plain_response(send: Send, status: int, text: str) -> None:
    """A whole ``text/plain`` response."""
    body = text.encode() + b"\n"
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_json_response(send: Send, status: int, body: bytes) -> None:
    """A whole ``application/json`` response of ``body``."""
    headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_close(send: Send, code: int, reason: str) -> None:
    """Close a WebSocket with ``code``; ``reason`` cut to what a close frame holds."""
    reason_bytes = reason.encode(errors="replace")[:_WS_MAX_REASON_BYTES]  # a lone surrogate becomes "?"
    await send({"type": "websocket.close", "code": code, "reason": reason_bytes.decode(errors="ignore")})
