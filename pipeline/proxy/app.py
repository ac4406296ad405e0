"""``streamfold proxy``: an OpenAI-compatible proxy that rewrites delimiter tool calls into ``tool_calls``.

Put it in front of a model server whose tool calls arrive as delimiter tokens in the text (Kimi-K2,
DeepSeek, Qwen3-Coder, ...) and stock OpenAI clients see standard ``tool_calls``::

    app = create_app("http://127.0.0.1:8001", tool_format="kimi_k2")   # a Starlette app
    serve(upstream="http://127.0.0.1:8001", tool_format="kimi_k2", port=8000)  # or run it with uvicorn

``POST /v1/chat/completions`` is forwarded as the client sent it (headers such as ``Authorization``
included). A streamed answer runs through one sans-IO core per request, `ChatStreamRewriter` (SSE
decoder, OpenAI converter, delimiter rewriter, OpenAI encoder, chained), and every upstream read is
answered at once with what it completed: arguments stream as the model writes them. A whole answer is
rewritten by `fold_openai_completion`. Every other route passes through unchanged.

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

from operators.registry import check_choice
from pipeline._jsonenc import JSON_ERRORS, encode_json, json_problem
from pipeline.errors import ConfigurationError
from pipeline.fanout.access import declares_over
from pipeline.proxy._front import completion_of, reasoning_splitter, split_completion_reasoning
from pipeline.proxy._reads import relay_upstream
from pipeline.proxy._requests import RequestError, decode_object, too_large
from pipeline.proxy._shared import (
    HOP_BY_HOP,
    REQUEST_DROPPED,
    BodyTooLarge,
    error_body,
    exchange_while_connected,
    forwarded_headers,
    log_failure,
    read_capped,
    shown_url,
    transport_error,
)
from pipeline.proxy.autodetect import detect_tool_format
from pipeline.proxy.messages import messages_endpoint
from pipeline.proxy.ops import ACCESS_LOG, Metrics, RequestLog
from pipeline.proxy.policy import UNKNOWN_TOOLS, ToolChoiceError, ToolPolicy, UnknownTools
from pipeline.proxy.responses import responses_endpoint
from pipeline.proxy.rewriter import (
    AUTO,
    DEFAULT_MAX_EVENT_SIZE,
    DEFAULT_MAX_RESPONSE_BYTES,
    ChatStreamRewriter,
    fold_openai_completion,
)
from pipeline.proxy.rewriter import proxy_tool_format as resolve_tool_format

__all__ = [
    "ACCESS_LOGS",
    "DEFAULT_GRACEFUL_SHUTDOWN",
    "DEFAULT_KEEPALIVE_EXPIRY",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_EVENT_SIZE",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_SERVER_KEEP_ALIVE",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOOL_FORMAT",
    "app_from_environment",
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
"""Seconds `serve` keeps an idle client connection open: longer than clients keep theirs (httpx and
the openai SDK 5 s, aiohttp 15 s), so that a pooled client never sends on a connection the proxy closes."""
DEFAULT_TOOL_FORMAT: Final = "kimi_k2"
"""The delimiter format the proxy rewrites when none is given."""
DEFAULT_TIMEOUT: Final = httpx.Timeout(600.0, connect=10.0, pool=60.0)
"""Upstream timeouts: 10 s to connect, 600 s between two reads (the openai SDK's own default: a whole
non-streamed generation comes in one read), 60 s to get a pooled connection."""

_log = logging.getLogger(__name__)
_REWRITTEN_HEADERS: Final = HOP_BY_HOP | {"content-encoding", "content-type", "accept-encoding"}
"""Response headers the proxy sets itself when it rewrites the body."""


def _error_response(status: int, message: str, *, type: str = "upstream_error", code: str) -> Response:
    return Response(
        msgspec.json.encode(error_body(message, type=type, code=code)),
        status_code=status,
        media_type="application/json",
    )


class _Refused(Exception):
    """A whole answer the proxy does not pass on (it breaks the request's tool rules, or it is not JSON);
    ``error`` is the body to answer with."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["error"]["message"])
        self.error = error


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
        policy: ToolPolicy | None = None,
        route: str = "other",
        model: str | None = None,
        strip_usage: bool = False,
    ) -> None:
        self._proxy = proxy
        self._strip_usage = strip_usage
        self._request = request
        self._mode = mode
        self._log = RequestLog(route, request.method, model, mode == "stream")
        """The request's status, error code and calls, for its metrics and access record."""
        self._tool_format = tool_format
        self._tool_schemas = tool_schemas
        self._policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        log = self._log
        try:
            await exchange_while_connected(self._exchange, receive, send, log)
        finally:
            # Also when the client went away: status 499.
            log.done(self._proxy.metrics, scope)

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
                "upstream closed the connection of %s before answering (%r): retrying",
                shown_url(self._request.url),
                exc,
            )
        return await self._proxy.client.send(self._request, stream=True)

    async def _exchange(self, send: Send) -> None:
        try:
            upstream = await self._send_upstream()
        except httpx.HTTPError as exc:
            log_failure(_log, self._request, exc)
            status, body = transport_error(exc)
            self._log.error = body["error"]["code"]
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
        headers = forwarded_headers(upstream.headers.raw, HOP_BY_HOP)
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
            body = await read_capped(upstream, self._proxy.max_response_bytes)
        except BodyTooLarge:
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
            status, error = transport_error(exc)
            await _send_whole(
                send, status, [("content-type", "application/json")], msgspec.json.encode(error)
            )
            return
        if upstream.status_code != 200:
            self._log.error = f"upstream_status_{upstream.status_code}"
        headers = forwarded_headers(upstream.headers.raw, _REWRITTEN_HEADERS)
        content_type = upstream.headers.get("content-type", "application/json")
        if upstream.status_code == 200 and self._mode == "complete":
            try:
                body = self._rewrite_completion(body)
            except _Refused as failure:
                _log.warning("answer of %s refused: %s", shown_url(self._request.url), failure.error)
                self._log.error = failure.error["error"]["code"]
                await _send_whole(
                    send, 502, [("content-type", "application/json")], msgspec.json.encode(failure.error)
                )
                return
            content_type = "application/json"
        headers.append(("content-type", content_type))
        await _send_whole(send, upstream.status_code, headers, body)

    def _rewrite_completion(self, body: bytes) -> bytes:
        tags = self._proxy.reasoning_tags
        if self._tool_format is None and tags is None:
            return body
        try:
            payload = msgspec.json.decode(body)
        except JSON_ERRORS as exc:  # (an HTML page, a broken body: what a stream that does not decode gets)
            message = f"the upstream answered 200 with a body that is {json_problem(exc, body, None)}"
            raise _Refused(error_body(message, code="invalid_upstream_response")) from None
        completion = completion_of(payload)
        if completion is None:
            return body  # JSON, not a chat.completion: the client gets what the upstream said
        if tags is not None:
            completion = split_completion_reasoning(completion, tags)
        folded = self._fold_calls(completion)
        if folded is None:
            # no calls to rewrite: the answer as the upstream gave it (with its reasoning split, if asked)
            return body if tags is None else encode_json(completion)
        return encode_json(self._apply_policy(folded))

    def _fold_calls(self, completion: dict[str, Any]) -> dict[str, Any] | None:
        """The completion with the calls in its text folded; None when there is nothing to rewrite."""
        tool_format = self._tool_format
        if tool_format == AUTO:
            tool_format = detect_tool_format(_message_text(completion)) or ""
        if tool_format:
            offered = self._policy.offered_names if self._policy is not None else None
            return fold_openai_completion(
                completion, tool_format, tool_schemas=self._tool_schemas, offered_tools=offered
            )
        if self._policy is None or self._policy.is_trivial:
            return None
        return completion

    def _apply_policy(self, folded: dict[str, Any]) -> dict[str, Any]:
        """The completion with the request's tool rules applied; `_Refused` when it breaks them."""
        if self._policy is None or self._policy.is_trivial:
            return folded
        try:
            return self._policy.apply_to_completion(folded)
        except ToolChoiceError as exc:
            error = error_body(str(exc), type="invalid_response_error", code=exc.code)
            error["error"]["completion"] = folded  # what the model answered is not lost
            raise _Refused(error) from None

    async def _stream(self, upstream: httpx.Response, send: Send) -> None:
        """A streamed answer: what each upstream read brought goes through the core and out at once, in
        one ``send`` (`forward_reads`)."""
        core = ChatStreamRewriter(
            self._tool_format,
            max_event_size=self._proxy.max_event_size,
            max_response_bytes=self._proxy.max_response_bytes,
            tool_schemas=self._tool_schemas,
            policy=self._policy,
            reasoning_tags=self._proxy.reasoning_tags,
            strip_usage=self._strip_usage,
        )
        headers = forwarded_headers(upstream.headers.raw, _REWRITTEN_HEADERS)
        headers += [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
            ("x-accel-buffering", "no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": _raw(headers)})
        metrics = self._proxy.metrics
        metrics.streams_open += 1
        try:
            try:
                piece = await relay_upstream(upstream, core, send, metrics)
            except Exception:  # a defect of the proxy: the client still gets a proper end, not a cut one
                _log.exception("rewriting the upstream stream of %s failed", shown_url(self._request.url))
                error = error_body(
                    "the proxy failed while rewriting the stream", type="server_error", code="proxy_error"
                )
                piece = core.fail(error)
            if core.error is not None:
                _log.warning("stream of %s ended with an error: %s", shown_url(self._request.url), core.error)
                self._log.error = str(core.error.get("code") or "upstream_error")
            await send({"type": "http.response.body", "body": piece, "more_body": False})
        finally:
            metrics.streams_open -= 1
            metrics.chunks += core.chunks
            self._log.tool_calls = core.calls
            usage = core.usage
            if usage is not None:
                self._log.input_tokens = _count(usage.get("prompt_tokens"))
                self._log.output_tokens = _count(usage.get("completion_tokens"))
            metrics.calls_rewritten += core.calls
            if core.policy_filter is not None:
                metrics.calls_dropped += core.policy_filter.dropped


def _message_text(completion: Mapping[str, Any]) -> str:
    """The reasoning and content text of a completion's messages (what ``auto`` detects from)."""
    parts: list[str] = []
    for choice in completion.get("choices") or ():
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if isinstance(message, Mapping):
            for key in ("reasoning_content", "reasoning", "content"):
                value = message.get(key)
                if isinstance(value, str):
                    parts.append(value)
    return "".join(parts)


def _upstream_transport(limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    """The upstream transport on aiohttp when it is installed (`pipeline.proxy._transport`: its C
    parser costs the proxy less CPU per chunk: ``benchmarks/bench_proxy``), else ``None``: httpx's own."""
    try:
        from pipeline.proxy._transport import AiohttpTransport
    except ImportError:
        return None
    return AiohttpTransport(limits)


def _is_event_stream(response: httpx.Response) -> bool:
    media_type: str = response.headers.get("content-type", "").partition(";")[0]
    return media_type.strip().lower() == "text/event-stream"


def _raw(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def _send_whole(send: Send, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    headers = [*headers, ("content-length", str(len(body)))]
    await send({"type": "http.response.start", "status": status, "headers": _raw(headers)})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Proxy:
    """The proxy's configuration and its upstream client; its endpoints build `_Exchange`s."""

    def __init__(
        self,
        upstream: str,
        *,
        tool_format: str | None,
        client: httpx.AsyncClient,
        max_request_bytes: int,
        max_response_bytes: int,
        max_event_size: int,
        unknown_tools: UnknownTools = "text",
        reasoning_tags: str | None = None,
    ) -> None:
        self.base = httpx.URL(upstream)
        self.metrics = Metrics()
        self.unknown_tools: UnknownTools = unknown_tools
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

    async def read_body(self, request: Request) -> bytes | RequestError:
        """The request body, or the error to answer when it is too large (413) or the client went away."""
        limit = self.max_request_bytes
        if declares_over(request.headers.get("content-length"), limit):
            return too_large(limit)
        parts: list[bytes] = []
        size = 0
        try:
            async for data in request.stream():
                size += len(data)
                if size > limit:
                    return too_large(limit)
                parts.append(data)
        except ClientDisconnect:
            return RequestError("the client went away", "client_disconnected", status=499)
        return b"".join(parts)

    def upstream_request(self, request: Request, body: bytes, *, identity: bool) -> httpx.Request:
        """The upstream request for ``request``: same method, path, query, headers and body; with
        ``identity`` the upstream is asked not to compress (the proxy reads the body)."""
        headers = forwarded_headers(request.headers.raw, REQUEST_DROPPED)
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
        if isinstance(body, RequestError):
            return body.response()
        try:
            payload = decode_object(body)
        except RequestError as exc:
            return exc.response()
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
        strip_usage = streaming and _adds_usage(payload.get("stream_options"))
        if strip_usage:  # the upstream is asked for the usage (the access log's tokens), the client is not
            payload["stream_options"] = {**(payload.get("stream_options") or {}), "include_usage": True}
            body = encode_json(payload)
        upstream = self.upstream_request(request, body, identity=True)
        tool_format, policy = self._tool_rules(payload)
        return _Exchange(
            self,
            upstream,
            mode,
            tool_format=tool_format,
            tool_schemas=_tool_schemas(payload.get("tools")),
            policy=policy,
            route="chat",
            model=model if isinstance(model := payload.get("model"), str) else None,
            strip_usage=strip_usage,
        )

    def _tool_rules(self, payload: dict[str, Any]) -> tuple[str | None, ToolPolicy | None]:
        """The tool format and tool rules of a request: none when it offers no tools or forbids calls."""
        if not payload.get("tools") or payload.get("tool_choice") == "none" or self.tool_format is None:
            return None, None
        return self.tool_format, ToolPolicy.from_request(payload, self.unknown_tools)

    async def health(self, request: Request) -> Response:
        """``GET /health``: the proxy itself is serving (the upstream is not asked)."""
        return Response(encode_json(self.metrics.health()), media_type="application/json")

    async def metrics_text(self, request: Request) -> Response:
        """``GET /metrics``: the counters in Prometheus text."""
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def relay(self, request: Request) -> Response:
        """Any other route: forwarded and answered as it is."""
        body = await self.read_body(request)
        if isinstance(body, RequestError):
            return body.response()
        return _Exchange(self, self.upstream_request(request, body, identity=False), "relay", route="relay")


_TRUE_WORDS: Final = frozenset({"true", "1", "yes", "on", "t", "y"})


def _truthy(value: object) -> bool:
    """``value`` read as a lax model server reads a boolean (pydantic: ``true``, ``1``, ``"true"``, ...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in _TRUE_WORDS


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _adds_usage(options: object) -> bool:
    """Whether the proxy asks for the usage chunk of a streamed Chat request: its ``stream_options`` is
    absent or an object whose ``include_usage`` is absent, null or false. A value of the wrong type is
    forwarded as the client sent it, for the upstream to refuse."""
    if options is None:
        return True
    if not isinstance(options, Mapping):
        return False
    asked = options.get("include_usage")
    return asked is None or asked is False  # not `in (None, False)`: 0 == False


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
    unknown_tools: UnknownTools = "text",
    reasoning_tags: str | None = None,
) -> Starlette:
    """The proxy as a Starlette app (see the module doc).

    Args:
        upstream: base URL of the model server (``http://host:8000``; a trailing ``/v1`` is fine).
        tool_format: the delimiter format of the model's tool calls (``kimi_k2``, ...), or ``auto``
            (told per answer from the model's markers, see `pipeline.proxy.autodetect`); ``None`` or
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
        unknown_tools: a call to a tool the request does not offer stays the text the model wrote
            (``text``, the default), is dropped (``drop``), ends the answer with an ``unknown_tool``
            error (``refuse``) or passes (``allow``); see `pipeline.proxy.policy` for
            ``tool_choice`` and ``parallel_tool_calls``.
        reasoning_tags: ``think``, ``kimi``, ``granite``, ``hunyuan``, ``ernie``, ``step3``, ``step3p5``,
            ``seed_oss``, ``harmony`` (or ``None``): reasoning the model writes between these markers
            in its text becomes ``reasoning_content`` (Chat), reasoning items (Responses) and thinking
            blocks (Messages), before the tool rewriter reads the text.

    Raises:
        ConfigurationError: ``tool_format`` is not a known delimiter format.
    """
    resolve_tool_format(tool_format)  # a ConfigurationError listing the formats, before anything starts
    check_choice("unknown_tools", unknown_tools, UNKNOWN_TOOLS)
    reasoning_splitter(reasoning_tags)  # a ConfigurationError naming the styles
    owned = client is None
    if client is None:
        limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
        )
        client = httpx.AsyncClient(
            timeout=timeout, limits=limits, follow_redirects=False, transport=_upstream_transport(limits)
        )
    proxy = _Proxy(
        upstream,
        tool_format=tool_format,
        client=client,
        max_request_bytes=max_request_bytes,
        max_response_bytes=max_response_bytes,
        max_event_size=max_event_size,
        unknown_tools=unknown_tools,
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
        ("/health", proxy.health, ["GET", "HEAD"]),
        ("/metrics", proxy.metrics_text, ["GET"]),
        ("/v1/responses", partial(responses_endpoint, proxy), ["POST"]),
        ("/v1/messages", partial(messages_endpoint, proxy), ["POST"]),
        ("/{path:path}", proxy.relay, methods),
    ]
    routes = [Route(path, endpoint, methods=allowed) for path, endpoint, allowed in handlers]
    return Starlette(routes=routes, lifespan=lifespan)


AccessLog = Literal["json", "plain", "off"]
ACCESS_LOGS: Final[tuple[AccessLog, ...]] = ("json", "plain", "off")
"""``json``: one JSON object a request (logger ``streamfold.proxy.access``, on stderr); ``plain``:
uvicorn's own access lines; ``off``: none."""
DEFAULT_GRACEFUL_SHUTDOWN: Final = 30.0
"""Seconds open streams may take to finish after a shutdown signal before they are cut."""
_OPTIONS_VARIABLE: Final = "STREAMFOLD_PROXY_OPTIONS"
"""Environment variable carrying `create_app`'s arguments (JSON) to the workers of ``--workers``."""


def app_from_environment() -> Starlette:
    """The app of one ``--workers`` process: `create_app` with the arguments `serve` left in
    the environment (uvicorn imports this factory in each worker)."""
    import json
    import os

    options = json.loads(os.environ[_OPTIONS_VARIABLE])
    _configure_access_log(options.pop("access_log"))
    timeout = options.pop("timeout", None)
    if isinstance(timeout, dict):
        options["timeout"] = httpx.Timeout(**timeout)
    elif timeout is not None:
        options["timeout"] = timeout
    return create_app(**options)


def serve(
    *,
    upstream: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    tool_format: str | None = DEFAULT_TOOL_FORMAT,
    log_level: str = "info",
    access_log: bool | AccessLog = "json",
    timeout_keep_alive: int = DEFAULT_SERVER_KEEP_ALIVE,
    graceful_shutdown: float = DEFAULT_GRACEFUL_SHUTDOWN,
    workers: int = 1,
    **options: Any,
) -> None:
    """Run the proxy with uvicorn until interrupted.

    Args:
        upstream: base URL of the model server, as `create_app` takes it.
        host: the address to listen on.
        port: the port to listen on.
        tool_format: as `create_app` takes it.
        log_level: uvicorn's log level.
        access_log: one of `ACCESS_LOGS` (``True`` is ``plain``, ``False`` ``off``).
        timeout_keep_alive: seconds an idle client connection stays open. uvicorn's own default equals
            the keep-alive expiry of httpx and the openai SDK, and then a pooled client now and then sends
            its request on a connection the server is closing, which fails with no response.
        graceful_shutdown: on SIGINT or SIGTERM the server stops accepting and lets open streams finish
            for up to this many seconds, then cuts what is left.
        workers: above 1, that many processes share the listening socket (uvicorn's supervisor;
            ``options`` must then be JSON-able, or an ``httpx.Timeout``); each has its own metrics.
        **options: more options of `create_app`.

    Raises:
        ConfigurationError: ``workers`` below 1, or an option `create_app` refuses.

    uvicorn serves with uvloop and httptools when they are installed (the ``server`` extra installs them
    where they build): they take a large share off the proxy's CPU time per chunk of a paced stream.
    The log line at startup says which it uses.

    The server owns its process, so once everything is loaded, every object alive is moved out of the
    garbage collector's sight (``gc.freeze``): an occasional full collection then walks only what requests
    allocate, not the objects of the loaded modules.
    """
    import gc
    import json
    import os

    import uvicorn

    from pipeline.proxy._serving import http_stack, serve_workers

    mode: AccessLog = "plain" if access_log is True else "off" if access_log is False else access_log
    check_choice("access_log", mode, ACCESS_LOGS)
    if workers < 1:
        raise ConfigurationError(f"workers must be at least 1, not {workers}")
    _configure_access_log(mode)
    common: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": mode == "plain",
        "lifespan": "on",
        "timeout_keep_alive": timeout_keep_alive,
        "timeout_graceful_shutdown": graceful_shutdown,
    }
    rewrites = resolve_tool_format(tool_format) is not None
    announce = f"streamfold proxy in front of {shown_url(upstream)}: " + (
        f"rewriting {tool_format} tool calls (--tool-format)"
        if rewrites
        else "tool-format none: no rewriting"
    )
    announce += f" (uvicorn with {http_stack()})"
    if workers > 1:
        create_app(upstream, tool_format=tool_format, **options)  # the arguments are checked once, here
        timeout = options.get("timeout")
        if isinstance(timeout, httpx.Timeout):
            options["timeout"] = timeout.as_dict()
        os.environ[_OPTIONS_VARIABLE] = json.dumps(
            {"upstream": upstream, "tool_format": tool_format, "access_log": mode, **options}
        )
        logging.getLogger("uvicorn.error").info("%s, %d workers", announce, workers)
        with suppress(KeyboardInterrupt):
            serve_workers("pipeline.proxy.app:app_from_environment", factory=True, workers=workers, **common)
        return
    app = create_app(upstream, tool_format=tool_format, **options)
    config = uvicorn.Config(app, **common)
    config.load()  # imports the protocol and lifespan modules now, so that they are frozen too
    logging.getLogger("uvicorn.error").info("%s", announce)
    gc.collect()
    gc.freeze()
    with suppress(KeyboardInterrupt):  # Ctrl+C: uvicorn has shut down gracefully, as uvicorn.run does
        uvicorn.Server(config).run()


def _configure_access_log(mode: AccessLog) -> None:
    """JSON access records to stderr as bare lines (``json``), or none."""
    ACCESS_LOG.propagate = False
    ACCESS_LOG.handlers.clear()
    if mode == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        ACCESS_LOG.addHandler(handler)
        ACCESS_LOG.setLevel(logging.INFO)
    else:
        ACCESS_LOG.setLevel(logging.CRITICAL + 1)
