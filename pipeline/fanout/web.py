"""Web endpoints for a response's hub: Server-Sent Events and WebSocket, as plain ASGI apps.

Each connection is one hub subscriber, replays the response from its start, and unsubscribes when the
client goes away. A `ResponseRegistry` binds response ids to live hubs, so one pair of routes
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
- ``send_timeout`` (default `DEFAULT_SEND_TIMEOUT` seconds) bounds every single send to the client:
  a client that stays connected but takes nothing for that long is dropped (its subscription ends as
  ``disconnected``, the connection is closed without a final message, and a warning is logged). SSE
  bodies are sent in pieces of at most `MAX_SEND_BYTES`, so a long replay is not one huge send.

Wire format: each item as the JSON of its ``to_dict()`` (``encode`` to change it).

- SSE (``text/event-stream``): ``data: <json>`` per item; at the end ``event: end``; on an error
  ``event: error`` with ``{"type": "ERROR", "error": <exception class>, "message": ...}``. Browsers'
  ``EventSource`` reconnects when a stream closes, so a client should ``close()`` on ``end`` and ``error``.
- WebSocket: one text message per item; the connection closes with 1000 at the end, and on an error
  sends an ``ERROR`` message as above and closes with 1011. An unknown response closes with 4404, a
  response whose start is no longer kept with 4410 (SSE: HTTP 404 and 410).

Error messages of streamfold's own exceptions (a provider's error, an overflow) are sent as they are;
any other exception is reported by class name only, so internals do not leak to browsers.

Starlette is needed only for `stream_routes` and for resolvers that take a connection; the
endpoints themselves are dependency-free ASGI apps. This module holds the routes: the connection code
is `pipeline.fanout._asgi.serve_connection`'s, and each wire's bytes a framer's
(`pipeline.fanout._framers`).

**Served responses** (`serving_routes`): responses kept in an event log (`pipeline.fanout.serving`)
rather than a live hub. They outlive their producer's block, can be started by ``POST`` and stopped, and
every frame carries the entry's id, so a client resumes with ``Last-Event-ID`` or ``?after=N`` and gets
exactly the entries after ``N``; `serving_routes` lists the answers to a cursor it cannot serve.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import msgspec

from pipeline._jsonenc import encode_json
from pipeline.errors import (
    ConfigurationError,
    ResponseNotFound,
    ServingError,
    StreamfoldError,
    SubscriberError,
)
from pipeline.fanout._answers import (
    answering,
    check_readable,
    error_response,
    problem,
    read_cursor,
    send_problem,
    status_code,
)
from pipeline.fanout._asgi import (
    MAX_SEND_BYTES,
    SSE_HEADERS,
    Framer,
    Receive,
    Scope,
    Send,
    accept_websocket,
    require_http,
    send_close,
    send_plain_response,
    serve_connection,
)
from pipeline.fanout._buffer import POLICIES
from pipeline.fanout._framers import (
    JSONFramer,
    JSONWebSocketFramer,
    ServedFramer,
    ServedWebSocketFramer,
    error_to_wire,
    to_wire,
)
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
from pipeline.fanout.protocols import ProtocolStream, query_protocol
from pipeline.fanout.serving._edge import DEFAULT_EDGE_MAX_BYTES, Edge
from pipeline.fanout.serving._log import EventLog
from pipeline.fanout.serving.manager import ResponseManager

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

HubResolver: TypeAlias = Callable[["HTTPConnection"], "Hub[Any] | None"]
"""Finds the hub a connection asks for (from its path parameters, query, ...), or None: 404 / 4404."""

DEFAULT_WEB_MAX_BUFFER: Final = 64
DEFAULT_WEB_POLICY: Final[Policy] = "coalesce_or_disconnect"
DEFAULT_SEND_TIMEOUT: Final = 10.0
"""Seconds one send to a client may take before the client is dropped (a client that stopped reading)."""

_WS_NOT_FOUND: Final = 4404
_WS_GONE: Final = 4410
_WS_BAD_REQUEST: Final = 4400
_WS_CLOSE_CODES: Final = {404: _WS_NOT_FOUND, 410: _WS_GONE, 403: 4403, 503: 4503}


class ResponseRegistry:
    """Response ids mapped to live hubs; as a `HubResolver` it reads the id from the route's path.

    Register a hub for as long as it should be reachable (``with registry.register(id, hub):``).
    """

    def __init__(self, *, path_param: str = "response_id") -> None:
        self.path_param = path_param
        self._hubs: dict[str, Hub[Any]] = {}

    @contextmanager
    def register(self, response_id: str, hub: Hub[Any]) -> Iterator[Hub[Any]]:
        """Make a hub reachable by a response id until the block ends.

        Args:
            response_id: the id the route's path names it by.
            hub: the hub.

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
        """The hub of ``response_id``, or None."""
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

    async def _serve(
        self,
        subscription: Subscription[Any],
        scope: Scope,
        receive: Receive,
        send: Send,
        framer: Framer,
        heartbeat: float | None = None,
    ) -> None:
        """Stream ``subscription`` to the client; drop it when a send takes longer than ``send_timeout``."""

        async def batches() -> list[Any] | None:
            return await subscription.receive_batch() or None

        async with subscription:
            start = {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS}
            stalled = await serve_connection(
                scope,
                receive,
                send,
                batches,
                framer,
                heartbeat=heartbeat,
                send_timeout=self.send_timeout,
                start=start if scope["type"] == "http" else None,
            )
            if stalled:
                self._drop_stalled(subscription)

    def _drop_stalled(self, subscription: Subscription[Any]) -> None:
        """The client took nothing for ``send_timeout`` seconds: end its subscription as disconnected."""
        message = (
            f"subscriber {subscription.name!r} took nothing for {self.send_timeout} s (send_timeout) and"
            " was disconnected"
        )
        _logger.warning("%s", message)
        subscription.disconnect(SubscriberError(message))


class SSEEndpoint(_Endpoint):
    """An ASGI app streaming one hub's items as Server-Sent Events; see the module docstring.

    `sse_endpoint` makes one with defaults.

    Args:
        hubs: one hub, or a resolver such as a `ResponseRegistry`.
        policy: each connection's subscription policy (see `Hub.subscribe`).
        max_buffer: each connection's subscription buffer, in items.
        replay: whether a connection first gets what the hub kept from the response's start.
        encode: an item to JSON-ready data.
        send_timeout: drop a client when one send to it takes longer than this many seconds; None:
            never.
        heartbeat: send an SSE comment after this many idle seconds; None: never.
    """

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
        require_http(scope)
        hub = self._resolve(scope)
        if hub is None:
            await send_plain_response(send, 404, "no such response")
            return
        try:
            subscription = self._subscribe(hub, scope)
        except ReplayUnavailableError as exc:
            await send_plain_response(send, 410, str(exc))
            return
        await self._serve(subscription, scope, receive, send, JSONFramer(self.encode), self.heartbeat)


class WebSocketEndpoint(_Endpoint):
    """An ASGI app sending one hub's items as WebSocket text messages; see the module docstring.

    `websocket_endpoint` makes one with defaults.

    Args:
        hubs: one hub, or a resolver such as a `ResponseRegistry`.
        policy: each connection's subscription policy (see `Hub.subscribe`).
        max_buffer: each connection's subscription buffer, in items.
        replay: whether a connection first gets what the hub kept from the response's start.
        encode: an item to JSON-ready data.
        send_timeout: drop a client when one send to it takes longer than this many seconds; None:
            never.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await accept_websocket(scope, receive, send):
            return
        hub = self._resolve(scope)
        if hub is None:
            await send_close(send, _WS_NOT_FOUND, "no such response")
            return
        try:
            subscription = self._subscribe(hub, scope)
        except ReplayUnavailableError as exc:
            await send_close(send, _WS_GONE, str(exc))
            return
        await self._serve(subscription, scope, receive, send, JSONWebSocketFramer(self.encode))


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
        hubs: one hub, or a resolver such as a `ResponseRegistry`.
        policy: each connection's subscription policy (see `Hub.subscribe`). The default never
            lets a slow client hold up the source; see the module docstring.
        max_buffer: each connection's subscription buffer, in items.
        replay: whether a connection first gets what the hub kept from the response's start.
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

    Args:
        hubs: as `sse_endpoint` takes it.
        policy: as `sse_endpoint` takes it.
        max_buffer: as `sse_endpoint` takes it.
        replay: as `sse_endpoint` takes it.
        encode: as `sse_endpoint` takes it.
        send_timeout: as `sse_endpoint` takes it.

    Raises:
        ConfigurationError: a ``send_timeout`` that is not positive.
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

    Args:
        hubs: one hub, or a resolver such as a `ResponseRegistry`.
        path: where the routes are; ``{response_id}`` in it is what a resolver reads.
        policy: as `sse_endpoint` takes it.
        max_buffer: as `sse_endpoint` takes it.
        replay: as `sse_endpoint` takes it.
        send_timeout: as `sse_endpoint` takes it.
        heartbeat: as `sse_endpoint` takes it (the SSE route only).

    Returns:
        The routes, for a Starlette app.

    Raises:
        MissingExtraError: Starlette is not installed (the ``server`` extra).
        ConfigurationError: a ``send_timeout`` that is not positive.
    """
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


ResponseStarter: TypeAlias = Callable[[Any], Awaitable[AsyncIterable[Any]]]
"""``async (request_json) -> source``: what ``POST /responses`` runs to make a response's source."""


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

    async def _check(self, scope: Scope) -> tuple[str, int]:
        """The response id and cursor a reader asks for; raises what it is refused with."""
        from starlette.requests import HTTPConnection

        response_id = str(scope.get("path_params", {}).get(self.path_param, ""))
        await self.access.check_response(HTTPConnection(scope), "read", self.log, response_id)
        after = read_cursor(scope)  # (after the access check: a client refused learns nothing more)
        await check_readable(self.log, response_id, after)
        return response_id, after

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        response_id: str,
        after: int,
        framer: Framer,
        heartbeat: float | None = None,
    ) -> None:
        """Stream the response's entries after ``after`` through an edge; log a client that stalled."""
        edge = Edge(policy=self.policy, max_buffer=self.max_buffer, max_bytes=self.max_buffer_bytes)
        start = {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS}
        stalled = await serve_connection(
            scope,
            receive,
            send,
            edge.take_or_raise,
            framer,
            heartbeat=heartbeat,
            send_timeout=self.send_timeout,
            start=start if scope["type"] == "http" else None,
            fill=partial(edge.fill, self.log.read(response_id, after=after)),
        )
        if stalled:
            client = scope.get("client")
            _logger.warning(
                "client %s of %s took nothing for %s s (send_timeout) and was disconnected",
                f"{client[0]}:{client[1]}" if client else "?",
                scope.get("path", ""),
                self.send_timeout,
            )


class ServedSSEEndpoint(_ServedEndpoint):
    """SSE over an event log: ``id:`` on every frame, resume by ``Last-Event-ID`` or ``?after=``.

    Args:
        log: the event log the responses are in.
        heartbeat: seconds between keep-alive comments on an idle stream; None: none.
        **options: those of `ServedWebSocketEndpoint`.
    """

    def __init__(self, log: EventLog, *, heartbeat: float | None, **options: Any) -> None:
        super().__init__(log, **options)
        self.heartbeat = heartbeat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        require_http(scope)
        try:
            response_id, after = await self._check(scope)
        except (ConfigurationError, ServingError, AccessDenied) as exc:
            await send_problem(send, exc)
            return
        await self._serve(scope, receive, send, response_id, after, ServedFramer(), self.heartbeat)


class ServedWebSocketEndpoint(_ServedEndpoint):
    """WebSocket over an event log: messages ``{"id": N, "item": ...}``, resume by ``?after=``.

    Args:
        log: the event log the responses are in.
        policy: each connection's buffer policy when the client reads slower than the response.
        max_buffer: each connection's buffer, in items.
        max_buffer_bytes: each connection's buffer, in bytes.
        send_timeout: seconds one send to the client may take before the client is dropped; None: no
            bound.
        path_param: the route's path parameter that names the response.
        access: the access hooks; None: `loopback_only`.

    Raises:
        ConfigurationError: an unknown ``policy``, a ``send_timeout`` that is not positive.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await accept_websocket(scope, receive, send):
            return
        try:
            response_id, after = await self._check(scope)
        except (ConfigurationError, ServingError, AccessDenied) as exc:
            code = _WS_CLOSE_CODES.get(status_code(exc), _WS_BAD_REQUEST)
            await send({"type": "websocket.send", "text": encode_json(problem(exc)).decode()})
            await send_close(send, code, str(exc))
            return
        await self._serve(scope, receive, send, response_id, after, ServedWebSocketFramer())


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
        self.plain = plain
        self.streams = ProtocolStream(log, heartbeat=heartbeat, access=access, **options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        protocol = query_protocol(scope)
        if protocol is None or protocol == "streamfold" or scope["type"] != "http":
            await self.plain(scope, receive, send)
            return
        response_id = str(scope.get("path_params", {}).get("response_id", ""))
        await self.streams.serve(scope, receive, send, response_id=response_id, protocol=protocol)


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
      stream or AG-UI events, resumable the same way (see `pipeline.fanout.protocols`); an unknown
      protocol: 400.
    - ``GET {path}/{response_id}/ws``: WebSocket, messages ``{"id", "item"}``, from ``?after=``.
    - ``POST {path}/{response_id}/stop``: stop it (here, or in the producer's process via the log).

    Unknown, or an id no backend can hold (anything but 1 to 128 ASCII letters, digits, ``_`` and ``-``:
    a NATS subject cannot hold ``.``, ``*``, ``>``, ``$JS``), on every backend alike: 404 (WebSocket
    close 4404); expired or a cursor older than retained: 410 (4410) with ``first_id``, the oldest
    retained id, in the body, never a partial replay; a cursor that is not 1 to 18 ASCII digits, or past
    the last id: 400 (4400); a log whose server stays unreachable past its retries (``EventLogUnavailable``),
    or a closed log: 503 (4503). Every error body is ``{"type": "ERROR", "error", "message"}``.

    Access (`pipeline.fanout.access`): ``authorize(connection, action, response_id, meta)`` decides
    every ``start``, ``list``, ``read`` and ``stop`` (refused: 403, WebSocket close 4403); without it
    only clients on this machine are served, each of them allowed everything. Every POST must be
    ``application/json`` (else 415, so a page of another site cannot post a form here) and at most
    ``max_body_bytes`` (else 413).

    Args:
        source: the event log, or a `ResponseManager` over one (needed for ``start``).
        start: given the request's JSON, the response's source; None: no ``POST {path}``.
        path: where the routes are.
        policy: each connection's buffer policy when the client reads slower than the response (see
            `pipeline.fanout.serving._edge`).
        max_buffer: each connection's buffer, in items.
        max_buffer_bytes: each connection's buffer, in bytes.
        send_timeout: as `sse_endpoint` takes it.
        heartbeat: as `sse_endpoint` takes it.
        authorize: decides every action; None: only clients on this machine.
        owner: names who starts a response (kept in its meta as ``"owner"``).
        max_body_bytes: the largest request body accepted.

    Returns:
        The routes, for a Starlette app.

    Raises:
        ConfigurationError: ``start`` without a manager, an unknown ``policy``, a ``send_timeout`` that
            is not positive, a ``max_body_bytes`` below 1.
        MissingExtraError: Starlette is not installed (the ``server`` extra).
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
            return error_response(ResponseNotFound(f"no response {response_id!r}", response_id=response_id))
        return JSONResponse(msgspec.to_builtins(status))

    @answering
    async def start_response(request: Request) -> Response:
        assert manager is not None
        assert start is not None
        meta = await access.start_meta(request)
        await access.check(request, "start", None, meta)
        body = await read_json_body(request, request.receive, access.max_body_bytes)
        if isinstance(body, BodyRefused):
            return error_response(body)
        try:
            response_id = await manager.start(lambda: start(body), meta=meta)
        except (ConfigurationError, ServingError) as exc:  # 400; full (before the model call), down: 503
            return error_response(exc)
        except StreamfoldError as exc:  # the upstream refused (a ProviderError from the SDK, ...)
            return error_response(exc, 502)
        base = f"{path}/{response_id}"
        return JSONResponse(
            {"response_id": response_id, "events": f"{base}/events", "ws": f"{base}/ws"}, status_code=201
        )

    @answering
    async def stop_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        status = await access.check_response(request, "stop", log, response_id)
        if status is None:
            return error_response(ResponseNotFound(f"no response {response_id!r}", response_id=response_id))
        refusal = json_content_type(request)
        body = refusal or await read_body(request, request.receive, access.max_body_bytes)
        if isinstance(body, BodyRefused):  # the body is not used: its type and size are checked only
            return error_response(body)
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
