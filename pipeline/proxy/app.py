"""``streamfold proxy``: an OpenAI-compatible proxy that rewrites delimiter tool calls into ``tool_calls``.

Put it in front of a model server whose tool calls arrive as delimiter tokens in the text (Kimi-K2,
DeepSeek, Qwen3-Coder, ...) and stock OpenAI clients see standard ``tool_calls``::

    app = create_app("http://127.0.0.1:8001", tool_format="kimi_k2")   # a Starlette app
    serve(upstream="http://127.0.0.1:8001", tool_format="kimi_k2", port=8000)  # or run it with uvicorn

``POST /v1/chat/completions`` is forwarded as the client sent it (headers such as ``Authorization``
included). A streamed answer runs through one sans-IO core per request,
:class:`~pipeline.proxy.rewriter.ChatStreamRewriter` (SSE decoder, OpenAI converter, delimiter rewriter,
OpenAI encoder, chained), and every upstream read is answered
at once with what it completed: arguments stream as the model writes them. A whole answer is rewritten by
:func:`~operators.encode.openai_chat.fold_openai_completion`. Every other route passes through unchanged.

As a model server runs its tool parser, the text is rewritten only when the request has ``tools`` and its
``tool_choice`` is not ``"none"``; otherwise it passes through unchanged. With ``stream: true``, ``n`` must
be 1 (a lax server reads ``"2"`` and ``2.0`` as 2, so those are refused too). Headers named in a
``Connection`` header are not forwarded, either way (RFC 9110, section 7.6.1).

Failures reach the client as OpenAI-style errors ``{"error": {"message", "type", "code"}}``, never a hang:
connection refused and other transport errors before the answer 502 (``upstream_unreachable``,
``upstream_error``), a timeout 504 (``upstream_timeout``), a non-200 answer passes through with its status
and body. Once a stream has started, a failure (an in-band error event, a cut connection, a read timeout,
bytes that do not decode, a stream that ends without a ``finish_reason``) ends it with one
``data: {"error": {...}}`` event and no ``[DONE]``, which the ``openai`` SDK raises as ``APIError``. A
client that disconnects closes the upstream request at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, Final, Literal

import anyio
import msgspec

from pipeline._extras import needs_extra

with needs_extra("server", "streamfold proxy"):
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

from operators.encode.openai_chat import fold_openai_completion
from operators.registry import resolve_tool_format
from pipeline._jsonenc import encode_json
from pipeline.proxy._front import reasoning_splitter, split_completion_reasoning
from pipeline.proxy.messages import messages_endpoint
from pipeline.proxy.responses import responses_endpoint
from pipeline.proxy.rewriter import (
    DEFAULT_MAX_EVENT_SIZE,
    DEFAULT_MAX_RESPONSE_BYTES,
    ChatStreamRewriter,
    error_body,
)

__all__ = [
    "DEFAULT_KEEPALIVE_EXPIRY",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_EVENT_SIZE",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_SERVER_KEEP_ALIVE",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOOL_FORMAT",
    "create_app",
    "serve",
]

DEFAULT_MAX_REQUEST_BYTES: Final = 32 * 1024 * 1024
"""Cap on a client's request body (413 beyond): long histories and inline images fit."""
DEFAULT_MAX_CONNECTIONS: Final = 512
"""Cap on the proxy's open connections to the upstream (requests beyond wait for a free one)."""
DEFAULT_KEEPALIVE_EXPIRY: Final = 2.0
"""Seconds an idle upstream connection is kept for reuse: below the 5 s after which uvicorn (vLLM, SGLang)
closes an idle connection, so that the proxy does not send a request on a connection being closed."""
DEFAULT_SERVER_KEEP_ALIVE: Final = 75
"""Seconds :func:`serve` keeps an idle client connection open: longer than clients keep theirs (httpx and
the openai SDK 5 s, aiohttp 15 s), so that a pooled client never sends on a connection the proxy closes."""
DEFAULT_TOOL_FORMAT: Final = "kimi_k2"
"""The delimiter format the proxy rewrites when none is given."""
DEFAULT_TIMEOUT: Final = httpx.Timeout(600.0, connect=10.0, pool=60.0)
"""Upstream timeouts: 10 s to connect, 600 s between two reads (the openai SDK's own default: a whole
non-streamed generation comes in one read), 60 s to get a pooled connection."""

_log = logging.getLogger(__name__)
# Headers that belong to one connection, or that the proxy recomputes, and are not forwarded.
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_REWRITTEN_HEADERS: Final = _HOP_BY_HOP | {"content-encoding", "content-type", "accept-encoding"}
"""Response headers the proxy sets itself when it rewrites the body."""
_REQUEST_DROPPED: Final = _HOP_BY_HOP | {"accept-encoding"}
"""Request headers not forwarded as they are (the accept-encoding is chosen per route)."""


def _error_response(status: int, message: str, *, type: str = "upstream_error", code: str) -> Response:
    return Response(
        msgspec.json.encode(error_body(message, type=type, code=code)),
        status_code=status,
        media_type="application/json",
    )


def _transport_error(exc: httpx.HTTPError) -> tuple[int, dict[str, Any]]:
    """Status and error body for an upstream request that failed in transport."""
    where = f"{exc.request.method} {exc.request.url}" if _has_request(exc) else "the upstream"
    if isinstance(exc, httpx.TimeoutException):
        return 504, error_body(
            f"the upstream timed out ({type(exc).__name__}) on {where}", code="upstream_timeout"
        )
    if isinstance(exc, httpx.ConnectError):
        return 502, error_body(f"cannot connect to the upstream {where}: {exc}", code="upstream_unreachable")
    return 502, error_body(
        f"the upstream connection failed ({type(exc).__name__}) on {where}: {exc}", code="upstream_error"
    )


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 (raises RuntimeError when the error has no request)
    except RuntimeError:
        return False
    return True


def _forwarded_headers(headers: Iterable[tuple[bytes, bytes]], drop: frozenset[str]) -> list[tuple[str, str]]:
    """``headers`` as text pairs, without those named in ``drop`` (lower-case names) and those that a
    ``Connection`` header names: they belong to that one connection (RFC 9110, section 7.6.1)."""
    pairs = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]
    named = {
        option.strip().lower()
        for name, value in pairs
        if name.lower() == "connection"
        for option in value.split(",")
    }
    if named:
        drop = drop | named
    return [(name, value) for name, value in pairs if name.lower() not in drop]


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


class _ResponseTooLarge(Exception):
    pass


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for data in response.aiter_bytes():
        size += len(data)
        if size > limit:
            raise _ResponseTooLarge
        parts.append(data)
    return b"".join(parts)


_Mode = Literal["stream", "complete", "relay"]
"""``stream``: a streamed chat completion; ``complete``: a whole one; ``relay``: any other route."""


class _Exchange(Response):
    """One proxied request, carried out when Starlette sends the response.

    The upstream request starts only here, inside a task group that watches the client: a disconnect
    cancels the exchange wherever it waits, and the upstream response is closed in every case.
    """

    def __init__(
        self,
        proxy: _Proxy,
        request: httpx.Request,
        mode: _Mode,
        *,
        tool_format: str | None = None,
        tool_schemas: Mapping[str, Any] | None = None,
    ) -> None:
        self._proxy = proxy
        self._request = request
        self._mode = mode
        self._tool_format = tool_format
        self._tool_schemas = tool_schemas

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_on_disconnect, receive, tasks.cancel_scope)
            await self._exchange(send)
            tasks.cancel_scope.cancel()

    async def _send_upstream(self) -> httpx.Response:
        """The upstream's response; sent again once if the connection closed before any answer.

        A pooled connection that the upstream closes as idle just as the request goes out (a race every
        HTTP/1.1 keep-alive has) fails this way without the upstream having read the request; the body is
        in memory, so sending it again on a new connection is safe.
        """
        try:
            return await self._proxy.client.send(self._request, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            _log.info(
                "upstream closed the connection of %s before answering (%r): retrying", self._request.url, exc
            )
        return await self._proxy.client.send(self._request, stream=True)

    async def _exchange(self, send: Send) -> None:
        try:
            upstream = await self._send_upstream()
        except httpx.HTTPError as exc:
            _log.warning("upstream request %s failed: %r", self._request.url, exc)
            status, body = _transport_error(exc)
            await _send_whole(send, status, [("content-type", "application/json")], msgspec.json.encode(body))
            return
        try:
            if self._mode == "relay":
                await self._relay(upstream, send)
            elif upstream.status_code == 200 and (self._mode == "stream" or _is_event_stream(upstream)):
                await self._stream(upstream, send)  # (a stream also when a lax server read "stream": "true")
            else:
                await self._whole(upstream, send)
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()

    async def _relay(self, upstream: httpx.Response, send: Send) -> None:
        """Any other route: status, headers and body as the upstream sends them (body not decoded)."""
        headers = _forwarded_headers(upstream.headers.raw, _HOP_BY_HOP)
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": _raw(headers)})
        try:
            async for data in upstream.aiter_raw():
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except httpx.HTTPError:
            pass  # the status is sent: ending the body early is all that can be said
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _whole(self, upstream: httpx.Response, send: Send) -> None:
        """A non-streamed answer, or an error answer: read it (capped), rewrite a completion, send it."""
        try:
            body = await _read_capped(upstream, self._proxy.max_response_bytes)
        except _ResponseTooLarge:
            status, error = (
                502,
                error_body(
                    f"the upstream answer is larger than max_response_bytes={self._proxy.max_response_bytes}",
                    code="upstream_response_too_large",
                ),
            )
            await _send_whole(
                send, status, [("content-type", "application/json")], msgspec.json.encode(error)
            )
            return
        except httpx.HTTPError as exc:
            status, error = _transport_error(exc)
            await _send_whole(
                send, status, [("content-type", "application/json")], msgspec.json.encode(error)
            )
            return
        headers = _forwarded_headers(upstream.headers.raw, _REWRITTEN_HEADERS)
        content_type = upstream.headers.get("content-type", "application/json")
        if upstream.status_code == 200 and self._mode == "complete":
            body = self._rewrite_completion(body)
            content_type = "application/json"
        headers.append(("content-type", content_type))
        await _send_whole(send, upstream.status_code, headers, body)

    def _rewrite_completion(self, body: bytes) -> bytes:
        tool_format = self._tool_format
        tags = self._proxy.reasoning_tags
        if tool_format is None and tags is None:
            return body
        try:
            completion = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return body  # not JSON: the client gets what the upstream said
        if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
            return body
        if tags is not None:
            completion = split_completion_reasoning(completion, tags)
        if tool_format is None:
            return encode_json(completion)
        folded = fold_openai_completion(completion, tool_format, tool_schemas=self._tool_schemas)
        return encode_json(folded)

    async def _stream(self, upstream: httpx.Response, send: Send) -> None:
        """A streamed answer: each upstream read goes through the core and out at once."""
        core = ChatStreamRewriter(
            self._tool_format,
            max_event_size=self._proxy.max_event_size,
            max_response_bytes=self._proxy.max_response_bytes,
            tool_schemas=self._tool_schemas,
            reasoning_tags=self._proxy.reasoning_tags,
        )
        headers = _forwarded_headers(upstream.headers.raw, _REWRITTEN_HEADERS)
        headers += [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
            ("x-accel-buffering", "no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": _raw(headers)})
        encoding = upstream.headers.get("content-encoding", "identity").lower()
        body = upstream.aiter_raw() if encoding in ("", "identity") else upstream.aiter_bytes()
        try:
            async for data in body:
                piece = core.feed(data)
                if core.ended:
                    break  # an error event ended the answer: piece is its last part
                if piece:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            else:
                piece = core.finish()
        except httpx.HTTPError as exc:
            piece = core.fail(_cut_stream_error(exc))
        except Exception:  # a defect of the proxy: the client still gets a proper end, not a cut connection
            _log.exception("rewriting the upstream stream of %s failed", self._request.url)
            error = error_body(
                "the proxy failed while rewriting the stream", type="server_error", code="proxy_error"
            )
            piece = core.fail(error)
        if core.error is not None:
            _log.warning("stream of %s ended with an error: %s", self._request.url, core.error)
        await send({"type": "http.response.body", "body": piece, "more_body": False})


def _is_event_stream(response: httpx.Response) -> bool:
    media_type: str = response.headers.get("content-type", "").partition(";")[0]
    return media_type.strip().lower() == "text/event-stream"


def _cut_stream_error(exc: httpx.HTTPError) -> dict[str, Any]:
    """The error event for an upstream stream that broke off after it started."""
    _, error = _transport_error(exc)
    details = error["error"]
    if isinstance(exc, httpx.TimeoutException):
        details["message"] = f"the upstream stream stalled: {details['message']}"
    else:
        details["message"] = f"the upstream stream was cut off: {details['message']}"
        details["code"] = "upstream_disconnected"
    return error


def _raw(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def _send_whole(send: Send, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    headers = [*headers, ("content-length", str(len(body)))]
    await send({"type": "http.response.start", "status": status, "headers": _raw(headers)})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Proxy:
    """The proxy's configuration and its upstream client; its endpoints build :class:`_Exchange`\\ s."""

    def __init__(
        self,
        upstream: str,
        *,
        tool_format: str | None,
        client: httpx.AsyncClient,
        max_request_bytes: int,
        max_response_bytes: int,
        max_event_size: int,
        reasoning_tags: str | None = None,
    ) -> None:
        self.base = httpx.URL(upstream)
        self.reasoning_tags = None if reasoning_tags == "none" else reasoning_tags
        self.tool_format = resolve_tool_format(tool_format)
        self.client = client
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self.max_event_size = max_event_size

    def upstream_url(self, request: Request) -> httpx.URL:
        """The upstream URL of ``request``: its path appended to the base URL's (one ``/v1`` shared)."""
        base_path = self.base.path.rstrip("/")
        path = request.url.path
        if base_path.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
            path = path[3:]
        query = request.url.query
        return self.base.copy_with(path=base_path + path, query=query.encode("latin-1") if query else None)

    async def read_body(self, request: Request) -> bytes | Response:
        """The request body, or the error response when it is too large or the client went away."""
        limit = self.max_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return _too_large(limit)
        parts: list[bytes] = []
        size = 0
        try:
            async for data in request.stream():
                size += len(data)
                if size > limit:
                    return _too_large(limit)
                parts.append(data)
        except ClientDisconnect:
            return Response(status_code=499)
        return b"".join(parts)

    def upstream_request(self, request: Request, body: bytes, *, identity: bool) -> httpx.Request:
        """The upstream request for ``request``: same method, path, query, headers and body; with
        ``identity`` the upstream is asked not to compress (the proxy reads the body)."""
        headers = _forwarded_headers(request.headers.raw, _REQUEST_DROPPED)
        if identity:
            headers.append(("accept-encoding", "identity"))
        elif "accept-encoding" in request.headers:
            headers.append(("accept-encoding", request.headers["accept-encoding"]))
        return self.client.build_request(
            request.method, self.upstream_url(request), headers=headers, content=body
        )

    async def chat_completions(self, request: Request) -> Response:
        """``POST /v1/chat/completions``: checked here, forwarded and rewritten by the exchange."""
        body = await self.read_body(request)
        if isinstance(body, Response):
            return body
        try:
            payload = msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            return _error_response(
                400,
                f"the request body is not valid JSON: {exc}",
                type="invalid_request_error",
                code="invalid_json",
            )
        if not isinstance(payload, dict):
            return _error_response(
                400,
                "the request body must be a JSON object",
                type="invalid_request_error",
                code="invalid_json",
            )
        streaming = _truthy(payload.get("stream"))
        choices = payload.get("n")
        if streaming and not _one_choice(choices):
            return _error_response(
                400,
                "the rewriting proxy streams one choice: n must be 1 (or absent) with stream=true, "
                f"got {encode_json(choices).decode()}",
                type="invalid_request_error",
                code="unsupported_parameter",
            )
        mode: _Mode = "stream" if streaming else "complete"
        upstream = self.upstream_request(request, body, identity=True)
        tools = payload.get("tools")
        rewrites = bool(tools) and payload.get("tool_choice") != "none"
        return _Exchange(
            self,
            upstream,
            mode,
            tool_format=self.tool_format if rewrites else None,
            tool_schemas=_tool_schemas(tools),
        )

    async def relay(self, request: Request) -> Response:
        """Any other route: forwarded and answered as it is."""
        body = await self.read_body(request)
        if isinstance(body, Response):
            return body
        return _Exchange(self, self.upstream_request(request, body, identity=False), "relay")


_TRUE_WORDS: Final = frozenset({"true", "1", "yes", "on", "t", "y"})


def _truthy(value: object) -> bool:
    """``value`` read as a lax model server reads a boolean (pydantic: ``true``, ``1``, ``"true"``, ...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in _TRUE_WORDS


def _one_choice(n: object) -> bool:
    """Whether ``n`` asks for one choice: absent or null, or a number (or numeric string) equal to 1.

    Anything else is refused rather than guessed: a lax server reads ``"2"`` or ``2.0`` as 2.
    """
    if n is None:
        return True
    if isinstance(n, bool):
        return False
    if isinstance(n, int | float):
        return n == 1
    if isinstance(n, str):
        try:
            return float(n.strip()) == 1
        except ValueError:
            return False
    return False


def _too_large(limit: int) -> Response:
    return _error_response(
        413,
        f"the request body is larger than max_request_bytes={limit}",
        type="invalid_request_error",
        code="request_too_large",
    )


def _tool_schemas(tools: object) -> dict[str, Any]:
    """Tool name -> parameters schema, from a request's ``tools`` (anything malformed is skipped)."""
    schemas: dict[str, Any] = {}
    if isinstance(tools, list):
        for tool in tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                parameters = function.get("parameters")
                schemas[function["name"]] = parameters if isinstance(parameters, Mapping) else {}
    return schemas


def create_app(
    upstream: str,
    *,
    tool_format: str | None = DEFAULT_TOOL_FORMAT,
    client: httpx.AsyncClient | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
    timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
    reasoning_tags: str | None = None,
) -> Starlette:
    """The proxy as a Starlette app (see the module doc).

    Args:
        upstream: base URL of the model server (``http://host:8000``; a trailing ``/v1`` is fine).
        tool_format: the delimiter format of the model's tool calls (``kimi_k2``, ...); ``None`` or
            ``"none"`` (alias ``"api_tool_call"``) re-encodes without rewriting. A request is rewritten
            only when it has ``tools`` and its ``tool_choice`` is not ``"none"``.
        client: the upstream client (its timeouts and limits then apply, and it is not closed by the app);
            by default one is made with ``timeout`` and ``max_connections`` and closed at shutdown.
        max_request_bytes: cap on a request body (413 beyond).
        max_response_bytes: cap on a whole upstream answer read before answering (502 beyond).
        max_event_size: cap on one upstream SSE event (the stream ends with an error beyond).
        max_connections: cap on the connections to the upstream.
        keepalive_expiry: seconds an idle upstream connection is reused; keep it below the upstream's own
            idle timeout (uvicorn's is 5 s).
        timeout: seconds, or an ``httpx.Timeout``; the read timeout bounds the gap between two upstream
            reads, not the whole stream.
        reasoning_tags: ``think``, ``kimi`` (or ``None``): reasoning the model writes between these tags
            in its text becomes ``reasoning_content`` (Chat), reasoning items (Responses) and thinking
            blocks (Messages), before the tool rewriter reads the text.

    Raises:
        ConfigurationError: ``tool_format`` is not a known delimiter format.
    """
    resolve_tool_format(tool_format)  # a ConfigurationError listing the formats, before anything starts
    reasoning_splitter(reasoning_tags)  # a ConfigurationError naming the styles
    owned = client is None
    if client is None:
        client = httpx.AsyncClient(
            timeout=timeout,
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=keepalive_expiry,
            ),
            follow_redirects=False,
        )
    proxy = _Proxy(
        upstream,
        tool_format=tool_format,
        client=client,
        max_request_bytes=max_request_bytes,
        max_response_bytes=max_response_bytes,
        max_event_size=max_event_size,
        reasoning_tags=reasoning_tags,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if owned:
                await proxy.client.aclose()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    handlers: list[tuple[str, Callable[[Request], Awaitable[Response]], list[str]]] = [
        ("/v1/chat/completions", proxy.chat_completions, ["POST"]),
        ("/v1/responses", partial(responses_endpoint, proxy), ["POST"]),
        ("/v1/messages", partial(messages_endpoint, proxy), ["POST"]),
        ("/{path:path}", proxy.relay, methods),
    ]
    routes = [Route(path, endpoint, methods=allowed) for path, endpoint, allowed in handlers]
    return Starlette(routes=routes, lifespan=lifespan)


def serve(
    *,
    upstream: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    tool_format: str | None = DEFAULT_TOOL_FORMAT,
    log_level: str = "info",
    access_log: bool = True,
    timeout_keep_alive: int = DEFAULT_SERVER_KEEP_ALIVE,
    **options: Any,
) -> None:
    """Run the proxy with uvicorn until interrupted; ``options`` go to :func:`create_app`.

    ``timeout_keep_alive`` (seconds) is how long an idle client connection stays open; uvicorn's own 5 s
    equals the keep-alive expiry of httpx and the openai SDK, and then a pooled client now and then sends
    its request on a connection the server is closing, which fails with no response.

    The server owns its process, so once everything is loaded, every object alive is moved out of the
    garbage collector's sight (``gc.freeze``): an occasional full collection then walks only what requests
    allocate, not the some 50 000 objects of the loaded modules (about 35 ms of pause otherwise).
    """
    import gc

    import uvicorn

    app = create_app(upstream, tool_format=tool_format, **options)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        lifespan="on",
        timeout_keep_alive=timeout_keep_alive,
    )
    config.load()  # imports the protocol and lifespan modules now, so that they are frozen too
    rewrites = resolve_tool_format(tool_format) is not None
    logging.getLogger("uvicorn.error").info(
        "streamfold proxy in front of %s: %s",
        upstream,
        f"rewriting {tool_format} tool calls (--tool-format)"
        if rewrites
        else "tool-format none: no rewriting",
    )
    gc.collect()
    gc.freeze()
    with suppress(KeyboardInterrupt):  # Ctrl+C: uvicorn has shut down gracefully, as uvicorn.run does
        uvicorn.Server(config).run()
