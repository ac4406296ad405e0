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

**Served responses** (:func:`serving_routes`): responses kept in an event log
(:mod:`pipeline.fanout.serving`) rather than a live hub. They outlive their producer's block, can be
started by ``POST`` and stopped, and every frame carries the entry's id: SSE ``id: N`` (the end and error
frames too), WebSocket ``{"id": N, "item": ...}``. A client resumes with ``Last-Event-ID`` (SSE; wins
over the query) or ``?after=N`` and gets exactly the entries after ``N``. A cursor older than what is
retained gets 410 Gone with ``first_id`` in the JSON body (WebSocket: an ``ERROR`` message, close 4410),
never a partial replay; an unknown response (or an id no backend can hold) 404 (4404), a cursor that
is not ASCII digits 400 (4400). An error that ends one connection but not the response (the producer
lost, the log trimmed past a slow client) is an ``event: error`` without ``id:``, so a reconnect resumes
after the last entry received.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterable, Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio
import msgspec

from pipeline._jsonenc import encode_json
from pipeline.errors import (
    ConfigurationError,
    EventLogFull,
    ResponseExists,
    ResponseGone,
    ResponseNotFound,
    ServingError,
    StreamfoldError,
    SubscriberError,
)
from pipeline.fanout._buffer import POLICIES
from pipeline.fanout.access import (
    DEFAULT_MAX_BODY_BYTES,
    Access,
    AccessDenied,
    Authorize,
    BodyRefused,
    Principal,
    json_content_type,
    read_body,
    read_json_body,
)
from pipeline.fanout.hub import Hub, Policy, ReplayUnavailableError, Subscription
from pipeline.fanout.serving._edge import DEFAULT_EDGE_MAX_BYTES, Edge
from pipeline.fanout.serving._log import Entry, EventLog, check_lookup_id
from pipeline.fanout.serving.manager import ResponseManager

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection
    from starlette.responses import JSONResponse
    from starlette.routing import BaseRoute

__all__ = [
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_WEB_MAX_BUFFER",
    "DEFAULT_WEB_POLICY",
    "MAX_SEND_BYTES",
    "HubResolver",
    "ResponseRegistry",
    "ResponseStarter",
    "SSEEndpoint",
    "ServedSSEEndpoint",
    "ServedWebSocketEndpoint",
    "WebSocketEndpoint",
    "check_readable",
    "error_to_wire",
    "read_cursor",
    "serving_routes",
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
        return _bounded_send(send, self.send_timeout)

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


def _bounded_send(send: Send, timeout: float | None) -> Send:
    """``send``, raising ``TimeoutError`` when one send takes longer than ``timeout`` seconds."""
    if timeout is None:
        return send

    async def bounded_send(message: Message) -> None:
        with anyio.fail_after(timeout):
            await send(message)

    return bounded_send


async def _cancel_on_disconnect(receive: Receive, disconnect: str, scope: anyio.CancelScope) -> None:
    """Read the client's messages until it disconnects, then cancel the connection's work."""
    while (await receive())["type"] != disconnect:
        pass
    scope.cancel()


# -- serving: responses kept in an event log, resumable from any id -------------------------------------

ResponseStarter: TypeAlias = Callable[[Any], Awaitable[AsyncIterable[Any]]]
"""``async (request_json) -> source``: what ``POST /responses`` runs to make a response's source."""

_JSON_HEADERS: Final = [(b"content-type", b"application/json")]
_WS_BAD_REQUEST: Final = 4400
_WS_FORBIDDEN: Final = 4403
_WS_UNAVAILABLE: Final = 4503
_CURSOR: Final = re.compile(r"[0-9]{1,18}")


def _problem(error: StreamfoldError) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "ERROR", "error": type(error).__name__, "message": str(error)}
    if isinstance(error, ResponseGone):
        body["first_id"] = error.first_id
    return body


def _error_response(error: StreamfoldError | BodyRefused, status: int | None = None) -> JSONResponse:
    """``error`` as the routes' JSON answer, by default with :func:`_status_code`'s status; a full log
    (503) says when to retry (``Retry-After``)."""
    from starlette.responses import JSONResponse

    if isinstance(error, BodyRefused):
        return JSONResponse(error.error, status_code=error.status)
    retry = {"Retry-After": str(error.retry_after)} if isinstance(error, EventLogFull) else None
    return JSONResponse(_problem(error), status_code=status or _status_code(error), headers=retry)


_STATUSES: Final = ((ResponseNotFound, 404), (ResponseGone, 410), (ResponseExists, 409), (AccessDenied, 403))


def _status_code(error: StreamfoldError) -> int:
    """The HTTP status for an error answered at once: a log that cannot serve now (its server
    unreachable past its retries, the log closed, full) is the server's trouble, 503, not the client's."""
    for kind, status in _STATUSES:
        if isinstance(error, kind):
            return status
    return 503 if isinstance(error, ServingError) else 400


def read_cursor(scope: Scope) -> int:
    """The id a reader has seen up to: the ``Last-Event-ID`` header (an ``EventSource`` reconnecting),
    else the ``after`` query parameter, else 0. Raises ``ConfigurationError`` unless it is 1 to 18 ASCII
    digits (``str.isdigit`` and ``int`` take superscripts and other scripts' digits: not here)."""
    raw: str | None = None
    for name, value in scope.get("headers", ()):
        if name == b"last-event-id":
            raw = value.decode("latin-1").strip()
    if raw is None:
        from urllib.parse import parse_qs

        values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
        raw = values[-1] if values else None
    if raw is None or raw == "":
        return 0
    if _CURSOR.fullmatch(raw) is None:
        raise ConfigurationError(f"a cursor (Last-Event-ID or ?after=) is an entry id >= 0, got {raw!r}")
    return int(raw)


async def check_readable(log: EventLog, response_id: str, after: int) -> None:
    """Raise what a reader of ``response_id`` from ``after`` would get at once: ``ResponseNotFound``,
    ``ResponseGone`` (expired, or ``after`` older than retained), ``ConfigurationError`` (a cursor past
    the last id). Lets the endpoints answer 404 / 410 / 400 before the stream starts."""
    check_lookup_id(response_id)
    status = await log.status(response_id)
    if status is None:
        entries = log.read(response_id)
        try:
            with anyio.move_on_after(1.0):  # raises at once unless the response was created meanwhile
                await entries.__anext__()
        except StopAsyncIteration:
            pass
        finally:
            aclose = getattr(entries, "aclose", None)
            if aclose is not None:
                await aclose()
        status = await log.status(response_id)
        if status is None:
            raise ResponseNotFound(f"no response {response_id!r}", response_id=response_id)
    if after > status.last_id:
        raise ConfigurationError(
            f"cursor {after} is past the last entry ({status.last_id}) of response {response_id!r}"
        )
    if after < status.first_id - 1:
        raise ResponseGone(
            f"entries {after + 1} to {status.first_id - 1} of response {response_id!r} are no longer"
            f" retained; the oldest retained is {status.first_id}",
            response_id=response_id,
            first_id=status.first_id,
        )


class _ServedEndpoint:
    """What both served endpoints share: the log, the edge's policy, the send bound."""

    def __init__(
        self,
        log: EventLog,
        *,
        policy: Policy,
        max_buffer: int,
        max_buffer_bytes: int,
        send_timeout: float | None,
        path_param: str = "response_id",
        access: Access | None = None,
    ) -> None:
        if send_timeout is not None and not send_timeout > 0:
            raise ConfigurationError(
                f"send_timeout must be a positive number of seconds or None, got {send_timeout}"
            )
        if policy not in POLICIES:
            raise ConfigurationError(f"unknown policy {policy!r}; one of {sorted(POLICIES)}")
        self.log = log
        self.policy = policy
        self.max_buffer = max_buffer
        self.max_buffer_bytes = max_buffer_bytes
        self.send_timeout = send_timeout
        self.path_param = path_param
        self.access = access if access is not None else Access(None, None, DEFAULT_MAX_BODY_BYTES)

    def _bounded(self, send: Send) -> Send:
        return _bounded_send(send, self.send_timeout)

    def _edge(self) -> Edge:
        return Edge(policy=self.policy, max_buffer=self.max_buffer, max_bytes=self.max_buffer_bytes)

    def _stalled(self, scope: Scope) -> None:
        client = scope.get("client")
        _logger.warning(
            "client %s of %s took nothing for %s s (send_timeout) and was disconnected",
            f"{client[0]}:{client[1]}" if client else "?",
            scope.get("path", ""),
            self.send_timeout,
        )


class ServedSSEEndpoint(_ServedEndpoint):
    """SSE over an event log: ``id:`` on every frame, resume by ``Last-Event-ID`` or ``?after=``."""

    def __init__(self, log: EventLog, *, heartbeat: float | None, **options: Any) -> None:
        super().__init__(log, **options)
        self.heartbeat = heartbeat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import HTTPConnection

        if scope["type"] != "http":
            raise ConfigurationError(f"an SSE endpoint serves HTTP requests, not {scope['type']!r}")
        response_id = str(scope.get("path_params", {}).get(self.path_param, ""))
        try:
            after = read_cursor(scope)
            await self.access.check_response(HTTPConnection(scope), "read", self.log, response_id)
            await check_readable(self.log, response_id, after)
        except (ConfigurationError, ServingError, AccessDenied) as exc:
            await _send_json_response(send, _status_code(exc), _problem(exc))
            return
        edge = self._edge()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_on_disconnect, receive, "http.disconnect", tasks.cancel_scope)
            tasks.start_soon(edge.fill, self.log.read(response_id, after=after))
            send = self._bounded(send)
            try:
                await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
                await self._stream(edge, send)
            except TimeoutError:
                self._stalled(scope)
            except OSError:
                pass  # the client went away while we were sending
            tasks.cancel_scope.cancel()

    async def _stream(self, edge: Edge, send: Send) -> None:
        while True:
            if self.heartbeat is None:
                batch = await edge.take()
            else:
                batch = []
                with anyio.move_on_after(self.heartbeat):
                    batch = await edge.take()
                if batch == []:
                    await _send_body(send, _SSE_KEEP_ALIVE)
                    continue
            if batch is None:  # ended without a terminal entry: the cursor was past it, or an error
                if edge.error is None:
                    await _send_body(send, _SSE_END, last=True)
                else:
                    error = _edge_error(edge.error)
                    await _send_body(send, _sse_event(b"error", encode_json(error)), last=True)
                return
            frames: list[bytes] = []
            size = 0
            for entry in batch:
                frame = _sse_frame(entry)
                frames.append(frame)
                size += len(frame)
                if entry.end:
                    await _send_body(send, b"".join(frames), last=True)
                    return
                if size >= MAX_SEND_BYTES:
                    await _send_body(send, b"".join(frames))
                    frames.clear()
                    size = 0
            if frames:
                await _send_body(send, b"".join(frames))


class ServedWebSocketEndpoint(_ServedEndpoint):
    """WebSocket over an event log: messages ``{"id": N, "item": ...}``, resume by ``?after=``."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            raise ConfigurationError(
                f"a WebSocket endpoint serves WebSocket connections, not {scope['type']!r}"
            )
        if (await receive())["type"] != "websocket.connect":
            return
        from starlette.requests import HTTPConnection

        response_id = str(scope.get("path_params", {}).get(self.path_param, ""))
        await send({"type": "websocket.accept"})
        try:
            after = read_cursor(scope)
            await self.access.check_response(HTTPConnection(scope), "read", self.log, response_id)
            await check_readable(self.log, response_id, after)
        except (ConfigurationError, ServingError, AccessDenied) as exc:
            code = {404: _WS_NOT_FOUND, 410: _WS_GONE, 403: _WS_FORBIDDEN, 503: _WS_UNAVAILABLE}.get(
                _status_code(exc), _WS_BAD_REQUEST
            )
            await send({"type": "websocket.send", "text": encode_json(_problem(exc)).decode()})
            await _send_close(send, code, str(exc))
            return
        edge = self._edge()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_on_disconnect, receive, "websocket.disconnect", tasks.cancel_scope)
            tasks.start_soon(edge.fill, self.log.read(response_id, after=after))
            send = self._bounded(send)
            try:
                code, reason = await self._stream(edge, send)
                await _send_close(send, code, reason)
            except TimeoutError:
                self._stalled(scope)
            except OSError:
                pass
            tasks.cancel_scope.cancel()

    async def _stream(self, edge: Edge, send: Send) -> tuple[int, str]:
        while True:
            batch = await edge.take()
            if batch is None:  # ended without a terminal entry: the cursor was past it, or an error
                if edge.error is None:
                    await send({"type": "websocket.send", "text": '{"type":"END"}'})
                    return _WS_NORMAL_CLOSURE, ""
                error = _edge_error(edge.error)
                await send({"type": "websocket.send", "text": encode_json(error).decode()})
                return _WS_INTERNAL_ERROR, error["message"]
            for entry in batch:
                if entry.end:
                    message = _terminal(entry)
                    await send({"type": "websocket.send", "text": encode_json(message).decode()})
                    if entry.error is None:
                        return _WS_NORMAL_CLOSURE, ""
                    return _WS_INTERNAL_ERROR, str(message.get("message", ""))
                text = b'{"id":%d,"item":%s}' % (entry.id, entry.data or b"null")
                await send({"type": "websocket.send", "text": text.decode()})


class _ProtocolDispatch:
    """The events route: streamfold's JSON frames, or ``?protocol=`` another protocol's."""

    def __init__(
        self,
        plain: ServedSSEEndpoint,
        log: EventLog,
        heartbeat: float | None,
        options: dict[str, Any],
        access: Access,
    ) -> None:
        from pipeline.fanout.protocols import ProtocolStream

        self.plain = plain
        self.streams = ProtocolStream(log, heartbeat=heartbeat, access=access, **options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from pipeline.fanout.protocols import query_protocol

        protocol = query_protocol(scope)
        if protocol is None or protocol == "streamfold" or scope["type"] != "http":
            await self.plain(scope, receive, send)
            return
        response_id = str(scope.get("path_params", {}).get("response_id", ""))
        try:
            after = read_cursor(scope)
        except ConfigurationError as exc:
            await _send_json_response(send, 400, _problem(exc))
            return
        await self.streams.serve(
            scope, receive, send, response_id=response_id, protocol=protocol, after=after
        )


def _terminal(entry: Entry) -> dict[str, Any]:
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


def _sse_frame(entry: Entry) -> bytes:
    if not entry.end:
        return b"id: %d\ndata: %s\n\n" % (entry.id, entry.data or b"null")
    message = _terminal(entry)
    name = b"end" if entry.error is None else b"error"
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (entry.id, name, encode_json(message))


def _edge_error(error: BaseException) -> dict[str, Any]:
    """An error that ends a connection (not the response): overflow, producer lost, gone."""
    body: dict[str, Any] = dict(error_to_wire(error))
    if isinstance(error, ResponseGone):
        body["first_id"] = error.first_id
    return body


async def _send_json_response(send: Send, status: int, value: Any) -> None:
    body = encode_json(value)
    headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serving_routes(
    source: EventLog | ResponseManager,
    *,
    start: ResponseStarter | None = None,
    path: str = "/responses",
    policy: Policy = DEFAULT_WEB_POLICY,
    max_buffer: int = DEFAULT_WEB_MAX_BUFFER,
    max_buffer_bytes: int = DEFAULT_EDGE_MAX_BYTES,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
    heartbeat: float | None = None,
    authorize: Authorize | None = None,
    owner: Principal | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> list[BaseRoute]:
    """Starlette routes serving responses kept in an event log, resumable from any id.

    - ``GET {path}``: ``{"responses": [status, ...]}`` (running and retained, those the caller may read).
    - ``POST {path}``: start a response: ``await start(request_json)`` gives its source, the manager
      runs it detached; ``201 {"response_id", "events", "ws"}``. Only with a manager and ``start``.
      A body that is not JSON or a ``ConfigurationError`` from ``start``: 400; another streamfold
      error (the provider refused): 502 with the error's JSON. A log with no room for another running
      response (``MemoryEventLog``'s ``max_responses``): 503 with ``Retry-After``, before ``start``
      is called.
    - ``GET {path}/{response_id}``: its status.
    - ``GET {path}/{response_id}/events``: SSE, ``id:`` on every frame, from ``Last-Event-ID`` or
      ``?after=``; ``event: end`` / ``event: error`` (with ``id:``) at the end. With
      ``?protocol=vercel`` or ``?protocol=agui``, the same response as a Vercel AI SDK UI message
      stream or AG-UI events, resumable the same way (see :mod:`pipeline.fanout.protocols`); an unknown
      protocol: 400.
    - ``GET {path}/{response_id}/ws``: WebSocket, messages ``{"id", "item"}``, from ``?after=``.
    - ``POST {path}/{response_id}/stop``: stop it (here, or in the producer's process via the log).

    Unknown, or an id no backend can hold (anything but 1 to 128 ASCII letters, digits, ``_`` and ``-``:
    a NATS subject cannot hold ``.``, ``*``, ``>``, ``$JS``), on every backend alike: 404 (WebSocket
    close 4404); expired or a cursor older than retained: 410 (4410) with ``first_id``, the oldest
    retained id, in the body, never a partial replay; a cursor that is not 1 to 18 ASCII digits, or past
    the last id: 400 (4400); a log whose server stays unreachable past its retries (``EventLogUnavailable``),
    or a closed log: 503 (4503). Every error body is ``{"type": "ERROR", "error", "message"}``.
    ``policy``, ``max_buffer``, ``max_buffer_bytes``: each connection's edge (see
    :mod:`pipeline.fanout.serving._edge`); ``send_timeout`` and ``heartbeat`` as in :func:`sse_endpoint`.

    Access (:mod:`pipeline.fanout.access`): ``authorize(connection, action, response_id, meta)`` decides
    every ``start``, ``list``, ``read`` and ``stop`` (refused: 403, WebSocket close 4403); without it
    only clients on this machine are served, each of them allowed everything. ``owner(connection)``
    names who starts a response (kept in its meta as ``"owner"``). Every POST must be
    ``application/json`` (else 415, so a page of another site cannot post a form here) and at most
    ``max_body_bytes`` (else 413).
    """
    from pipeline._extras import needs_extra

    with needs_extra("server", "pipeline.fanout.web.serving_routes"):
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route, WebSocketRoute

    manager = source if isinstance(source, ResponseManager) else None
    log = source.log if isinstance(source, ResponseManager) else source
    if start is not None and manager is None:
        raise ConfigurationError("serving_routes(start=...) needs a ResponseManager, not a bare log")
    access = Access(authorize, owner, max_body_bytes)
    options: dict[str, Any] = {
        "policy": policy,
        "max_buffer": max_buffer,
        "max_buffer_bytes": max_buffer_bytes,
        "send_timeout": send_timeout,
    }

    def answering(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` answering a refusal (403) or a log that cannot serve (503) in the error shape."""

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except (AccessDenied, ServingError) as exc:
                return _error_response(exc)

        return handle

    @answering
    async def list_responses(request: Request) -> Response:
        await access.check(request, "list", None, {})
        visible = [
            status
            for status in await log.active()
            if await access.allows(request, "read", status.response_id, status.meta)
        ]
        return JSONResponse({"responses": msgspec.to_builtins(visible)})

    @answering
    async def response_status(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        status = await access.check_response(request, "read", log, response_id)
        if status is None:
            return _error_response(ResponseNotFound(f"no response {response_id!r}", response_id=response_id))
        return JSONResponse(msgspec.to_builtins(status))

    @answering
    async def start_response(request: Request) -> Response:
        assert manager is not None
        assert start is not None
        meta = await access.start_meta(request)
        await access.check(request, "start", None, meta)
        body = await read_json_body(request, request.receive, access.max_body_bytes)
        if isinstance(body, BodyRefused):
            return _error_response(body)
        try:
            response_id = await manager.start(lambda: start(body), meta=meta)
        except (ConfigurationError, ServingError) as exc:  # 400; full (before the model call), down: 503
            return _error_response(exc)
        except StreamfoldError as exc:  # the upstream refused (a ProviderError from the SDK, ...)
            return _error_response(exc, 502)
        base = f"{path}/{response_id}"
        return JSONResponse(
            {"response_id": response_id, "events": f"{base}/events", "ws": f"{base}/ws"}, status_code=201
        )

    @answering
    async def stop_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        status = await access.check_response(request, "stop", log, response_id)
        if status is None:
            return _error_response(ResponseNotFound(f"no response {response_id!r}", response_id=response_id))
        refusal = json_content_type(request)
        body = refusal or await read_body(request, request.receive, access.max_body_bytes)
        if isinstance(body, BodyRefused):  # the body is not used: its type and size are checked only
            return _error_response(body)
        if manager is not None:
            await manager.stop(response_id)  # ResponseNotFound (ended meanwhile elsewhere): 404
        else:
            await log.request_stop(response_id)
        status = await log.status(response_id)
        return JSONResponse(msgspec.to_builtins(status) if status else {"response_id": response_id})

    routes: list[BaseRoute] = [Route(path, list_responses, methods=["GET"])]
    if start is not None:
        routes.append(Route(path, start_response, methods=["POST"]))
    plain = ServedSSEEndpoint(log, heartbeat=heartbeat, access=access, **options)
    routes += [
        Route(f"{path}/{{response_id}}", response_status, methods=["GET"]),
        Route(
            f"{path}/{{response_id}}/events",
            _ProtocolDispatch(plain, log, heartbeat, options, access),
            methods=["GET"],
        ),
        WebSocketRoute(f"{path}/{{response_id}}/ws", ServedWebSocketEndpoint(log, access=access, **options)),
        Route(f"{path}/{{response_id}}/stop", stop_response, methods=["POST"]),
    ]
    return routes
