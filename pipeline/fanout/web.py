"""Web endpoints for a response's hub: Server-Sent Events and WebSocket, as plain ASGI apps.

Each connection is one hub subscriber, replays the response from its start, and unsubscribes when the
client goes away. A :class:`ResponseRegistry` binds response ids to live hubs, so one pair of routes
serves them all::

    registry = ResponseRegistry()
    app = Starlette(routes=stream_routes(registry))        # /responses/{response_id}/events and /ws

    async with fan_out(pipeline) as hub:
        with registry.register(response_id, hub):
            async for event in hub.subscribe():             # the agent consumes as one more subscriber
                ...

A slow or dead client never stalls the producer or the other subscribers:

- The default policy is ``coalesce_or_disconnect``: a client that lags gets the text in fewer, bigger
  deltas; one that falls ``max_buffer`` unmergeable items behind is disconnected (it receives what it
  holds, then an ``ERROR`` naming the overflow, and can reconnect to replay the response). ``block`` or
  ``coalesce`` can be asked for instead; then a client that stops reading holds up the source, for at
  most ``send_timeout``.
- ``send_timeout`` (default :data:`DEFAULT_SEND_TIMEOUT` seconds) bounds every single send to the client:
  a client that stays connected but takes nothing for that long is dropped (its subscription ends as
  ``disconnected``, the connection is closed without a final message, and a warning is logged). SSE
  bodies are sent in pieces of at most :data:`MAX_SEND_BYTES`, so a long replay is not one huge send.

Wire format: each item as the JSON of its ``to_dict()`` (``encode`` to change it).

- SSE (``text/event-stream``): ``data: <json>`` per item; at the end ``event: end``; on an error
  ``event: error`` with ``{"type": "ERROR", "error": <exception class>, "message": ...}``. Browsers'
  ``EventSource`` reconnects when a stream closes, so a client should ``close()`` on ``end`` and ``error``.
- WebSocket: one text message per item; the connection closes with 1000 at the end, and on an error
  sends an ``ERROR`` message as above and closes with 1011. An unknown response closes with 4404, a
  response whose start is no longer kept with 4410 (SSE: HTTP 404 and 410).

Error messages of streamfold's own exceptions (a provider's error, an overflow) are sent as they are;
any other exception is reported by class name only, so internals do not leak to browsers.

Starlette is needed only for :func:`stream_routes` and for resolvers that take a connection; the
endpoints themselves are dependency-free ASGI apps.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio
import msgspec

from pipeline._jsonenc import encode_json
from pipeline.errors import ConfigurationError, StreamfoldError, SubscriberError
from pipeline.fanout.hub import Hub, Policy, ReplayUnavailableError, Subscription

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection
    from starlette.routing import BaseRoute

__all__ = [
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_WEB_MAX_BUFFER",
    "DEFAULT_WEB_POLICY",
    "MAX_SEND_BYTES",
    "HubResolver",
    "ResponseRegistry",
    "SSEEndpoint",
    "WebSocketEndpoint",
    "error_to_wire",
    "sse_endpoint",
    "stream_routes",
    "to_wire",
    "websocket_endpoint",
]

_logger = logging.getLogger("streamfold")

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

HubResolver: TypeAlias = Callable[["HTTPConnection"], "Hub[Any] | None"]
"""Finds the hub a connection asks for (from its path parameters, query, ...), or None: 404 / 4404."""

DEFAULT_WEB_MAX_BUFFER: Final = 64
DEFAULT_WEB_POLICY: Final[Policy] = "coalesce_or_disconnect"
DEFAULT_SEND_TIMEOUT: Final = 10.0
"""Seconds one send to a client may take before the client is dropped (a client that stopped reading)."""
MAX_SEND_BYTES: Final = 64 * 1024
"""SSE: items of one batch are sent in bodies of about this size at most (an item is never split)."""

_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each event on at once
]
_SSE_END: Final = b'event: end\ndata: {"type":"END"}\n\n'
_SSE_KEEP_ALIVE: Final = b": keep-alive\n\n"
_WS_NORMAL_CLOSURE: Final = 1000
_WS_INTERNAL_ERROR: Final = 1011
_WS_NOT_FOUND: Final = 4404
_WS_GONE: Final = 4410
_WS_MAX_REASON_BYTES: Final = 123


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


class ResponseRegistry:
    """Response ids mapped to live hubs; as a :data:`HubResolver` it reads the id from the route's path.

    Register a hub for as long as it should be reachable (``with registry.register(id, hub):``).
    """

    def __init__(self, *, path_param: str = "response_id") -> None:
        self.path_param = path_param
        self._hubs: dict[str, Hub[Any]] = {}

    @contextmanager
    def register(self, response_id: str, hub: Hub[Any]) -> Iterator[Hub[Any]]:
        """Make ``hub`` reachable as ``response_id`` until the block ends.

        Raises:
            ValueError: ``response_id`` is already registered.
        """
        if response_id in self._hubs:
            raise ValueError(f"response id {response_id!r} is already registered")
        self._hubs[response_id] = hub
        try:
            yield hub
        finally:
            if self._hubs.get(response_id) is hub:
                del self._hubs[response_id]

    def get(self, response_id: str) -> Hub[Any] | None:
        return self._hubs.get(response_id)

    def __contains__(self, response_id: object) -> bool:
        return response_id in self._hubs

    def __len__(self) -> int:
        return len(self._hubs)

    def __call__(self, connection: HTTPConnection) -> Hub[Any] | None:
        response_id = connection.path_params.get(self.path_param)
        return self._hubs.get(response_id) if isinstance(response_id, str) else None


class _Endpoint:
    """What both endpoints share: finding the hub and subscribing one connection to it."""

    def __init__(
        self,
        hubs: Hub[Any] | HubResolver,
        *,
        policy: Policy,
        max_buffer: int,
        replay: bool,
        encode: Callable[[Any], Any],
        send_timeout: float | None,
    ) -> None:
        if send_timeout is not None and not send_timeout > 0:
            raise ConfigurationError(
                f"send_timeout must be a positive number of seconds or None, got {send_timeout}"
            )
        self.hubs = hubs
        self.policy = policy
        self.max_buffer = max_buffer
        self.replay = replay
        self.encode = encode
        self.send_timeout = send_timeout

    def _resolve(self, scope: Scope) -> Hub[Any] | None:
        if isinstance(self.hubs, Hub):
            return self.hubs
        from starlette.requests import HTTPConnection

        return self.hubs(HTTPConnection(scope))

    def _subscribe(self, hub: Hub[Any], scope: Scope) -> Subscription[Any]:
        client = scope.get("client")
        where = f"{client[0]}:{client[1]}" if client else "client"
        return hub.subscribe(
            policy=self.policy,
            max_buffer=self.max_buffer,
            replay=self.replay,
            name=f"{scope['type']} {where} {scope.get('path', '')}",
        )

    def _encode(self, item: Any) -> bytes:
        return encode_json(self.encode(item))

    def _bounded(self, send: Send) -> Send:
        """``send``, raising ``TimeoutError`` when one send takes longer than ``send_timeout``."""
        timeout = self.send_timeout
        if timeout is None:
            return send

        async def bounded_send(message: Message) -> None:
            with anyio.fail_after(timeout):
                await send(message)

        return bounded_send

    def _drop_stalled(self, subscription: Subscription[Any]) -> None:
        """The client took nothing for ``send_timeout`` seconds: end its subscription as disconnected."""
        message = (
            f"subscriber {subscription.name!r} took nothing for {self.send_timeout} s (send_timeout) and"
            " was disconnected"
        )
        _logger.warning("%s", message)
        subscription.disconnect(SubscriberError(message))


class SSEEndpoint(_Endpoint):
    """An ASGI app streaming one hub's items as Server-Sent Events; see the module docstring."""

    def __init__(
        self,
        hubs: Hub[Any] | HubResolver,
        *,
        policy: Policy,
        max_buffer: int,
        replay: bool,
        encode: Callable[[Any], Any],
        send_timeout: float | None,
        heartbeat: float | None,
    ) -> None:
        super().__init__(
            hubs,
            policy=policy,
            max_buffer=max_buffer,
            replay=replay,
            encode=encode,
            send_timeout=send_timeout,
        )
        self.heartbeat = heartbeat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ConfigurationError(f"an SSE endpoint serves HTTP requests, not {scope['type']!r}")
        hub = self._resolve(scope)
        if hub is None:
            await _send_plain_response(send, 404, "no such response")
            return
        try:
            subscription = self._subscribe(hub, scope)
        except ReplayUnavailableError as exc:
            await _send_plain_response(send, 410, str(exc))
            return
        async with subscription, anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_on_disconnect, receive, "http.disconnect", tasks.cancel_scope)
            send = self._bounded(send)
            try:
                await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
                await self._stream(subscription, send)
            except TimeoutError:
                self._drop_stalled(subscription)
            except OSError:
                pass  # the client went away while we were sending
            tasks.cancel_scope.cancel()

    async def _stream(self, subscription: Subscription[Any], send: Send) -> None:
        while True:
            try:
                batch = await self._next_batch(subscription)
            except Exception as exc:
                await _send_body(send, _sse_event(b"error", encode_json(error_to_wire(exc))), last=True)
                return
            if batch is None:
                await _send_body(send, _SSE_KEEP_ALIVE)
                continue
            if not batch:
                await _send_body(send, _SSE_END, last=True)
                return
            frames: list[bytes] = []
            size = 0
            for item in batch:
                try:
                    frame = b"data: " + self._encode(item) + b"\n\n"
                except Exception as exc:
                    frames.append(_sse_event(b"error", encode_json(_encoding_failed(exc))))
                    await _send_body(send, b"".join(frames), last=True)
                    return
                frames.append(frame)
                size += len(frame)
                if size >= MAX_SEND_BYTES:  # keep each send small enough for send_timeout to mean something
                    await _send_body(send, b"".join(frames))
                    frames.clear()
                    size = 0
            if frames:
                await _send_body(send, b"".join(frames))

    async def _next_batch(self, subscription: Subscription[Any]) -> list[Any] | None:
        """The next items, ``[]`` at the end, or None when ``heartbeat`` seconds passed without any."""
        if self.heartbeat is None:
            return await subscription.receive_batch()
        with anyio.move_on_after(self.heartbeat):
            return await subscription.receive_batch()
        return None


class WebSocketEndpoint(_Endpoint):
    """An ASGI app sending one hub's items as WebSocket text messages; see the module docstring."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            raise ConfigurationError(
                f"a WebSocket endpoint serves WebSocket connections, not {scope['type']!r}"
            )
        if (await receive())["type"] != "websocket.connect":
            return
        hub = self._resolve(scope)
        await send({"type": "websocket.accept"})
        if hub is None:
            await _send_close(send, _WS_NOT_FOUND, "no such response")
            return
        try:
            subscription = self._subscribe(hub, scope)
        except ReplayUnavailableError as exc:
            await _send_close(send, _WS_GONE, str(exc))
            return
        async with subscription, anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_on_disconnect, receive, "websocket.disconnect", tasks.cancel_scope)
            send = self._bounded(send)
            try:
                code, reason = await self._stream(subscription, send)
                await _send_close(send, code, reason)
            except TimeoutError:
                self._drop_stalled(subscription)
            except OSError:
                pass  # the client went away while we were sending
            tasks.cancel_scope.cancel()

    async def _stream(self, subscription: Subscription[Any], send: Send) -> tuple[int, str]:
        """Send every item; return the close code and reason."""
        while True:
            try:
                batch = await subscription.receive_batch()
            except Exception as exc:
                error = error_to_wire(exc)
                await send({"type": "websocket.send", "text": encode_json(error).decode()})
                return _WS_INTERNAL_ERROR, error["message"]
            if not batch:
                return _WS_NORMAL_CLOSURE, ""
            for item in batch:
                try:
                    text = self._encode(item).decode()
                except Exception as exc:
                    error = _encoding_failed(exc)
                    await send({"type": "websocket.send", "text": encode_json(error).decode()})
                    return _WS_INTERNAL_ERROR, error["message"]
                await send({"type": "websocket.send", "text": text})


def sse_endpoint(
    hubs: Hub[Any] | HubResolver,
    *,
    policy: Policy = DEFAULT_WEB_POLICY,
    max_buffer: int = DEFAULT_WEB_MAX_BUFFER,
    replay: bool = True,
    encode: Callable[[Any], Any] = to_wire,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
    heartbeat: float | None = None,
) -> SSEEndpoint:
    """An ASGI app (a Starlette route endpoint) streaming a hub's items as Server-Sent Events.

    Args:
        hubs: one hub, or a resolver such as a :class:`ResponseRegistry`.
        policy, max_buffer, replay: each connection's subscription (see :meth:`Hub.subscribe`). The
            default policy never lets a slow client hold up the source; see the module docstring.
        encode: an item to JSON-ready data.
        send_timeout: drop a client when one send to it takes longer than this many seconds (``None``:
            never, which lets a client that stops reading block the connection for ever).
        heartbeat: send an SSE comment after this many idle seconds, so proxies keep the stream open.

    Raises:
        ConfigurationError: a ``send_timeout`` that is not positive.
    """
    return SSEEndpoint(
        hubs,
        policy=policy,
        max_buffer=max_buffer,
        replay=replay,
        encode=encode,
        send_timeout=send_timeout,
        heartbeat=heartbeat,
    )


def websocket_endpoint(
    hubs: Hub[Any] | HubResolver,
    *,
    policy: Policy = DEFAULT_WEB_POLICY,
    max_buffer: int = DEFAULT_WEB_MAX_BUFFER,
    replay: bool = True,
    encode: Callable[[Any], Any] = to_wire,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
) -> WebSocketEndpoint:
    """An ASGI app (a Starlette WebSocket route endpoint) sending a hub's items as JSON text messages.

    The options are those of :func:`sse_endpoint`.
    """
    return WebSocketEndpoint(
        hubs, policy=policy, max_buffer=max_buffer, replay=replay, encode=encode, send_timeout=send_timeout
    )


def stream_routes(
    hubs: Hub[Any] | HubResolver,
    *,
    path: str = "/responses/{response_id}",
    policy: Policy = DEFAULT_WEB_POLICY,
    max_buffer: int = DEFAULT_WEB_MAX_BUFFER,
    replay: bool = True,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
    heartbeat: float | None = None,
) -> list[BaseRoute]:
    """Starlette routes ``{path}/events`` (SSE, GET) and ``{path}/ws`` (WebSocket) for ``hubs``.

    Without Starlette installed, a :class:`~pipeline.errors.MissingExtraError` naming the ``server`` extra."""
    from pipeline._extras import needs_extra

    with needs_extra("server", "pipeline.fanout.web.stream_routes"):
        from starlette.routing import Route, WebSocketRoute

    options: dict[str, Any] = {
        "policy": policy,
        "max_buffer": max_buffer,
        "replay": replay,
        "send_timeout": send_timeout,
    }
    return [
        Route(f"{path}/events", sse_endpoint(hubs, heartbeat=heartbeat, **options), methods=["GET"]),
        WebSocketRoute(f"{path}/ws", websocket_endpoint(hubs, **options)),
    ]


def _sse_event(name: bytes, data: bytes) -> bytes:
    return b"event: " + name + b"\ndata: " + data + b"\n\n"


def _encoding_failed(error: Exception) -> dict[str, str]:
    _logger.error("an item could not be encoded for the web", exc_info=error)
    return {"type": "ERROR", "error": "EncodeError", "message": f"an item could not be encoded: {error}"}


async def _send_body(send: Send, body: bytes, *, last: bool = False) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": not last})


async def _send_plain_response(send: Send, status: int, text: str) -> None:
    body = text.encode() + b"\n"
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_close(send: Send, code: int, reason: str) -> None:
    reason_bytes = reason.encode(errors="replace")[:_WS_MAX_REASON_BYTES]  # a lone surrogate becomes "?"
    await send({"type": "websocket.close", "code": code, "reason": reason_bytes.decode(errors="ignore")})


async def _cancel_on_disconnect(receive: Receive, disconnect: str, scope: anyio.CancelScope) -> None:
    """Read the client's messages until it disconnects, then cancel the connection's work."""
    while (await receive())["type"] != disconnect:
        pass
    scope.cancel()
