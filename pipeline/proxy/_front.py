"""What the proxy's other front doors (``/v1/responses``, ``/v1/messages``) share.

Each translates the client's request into a streamed Chat Completions request to the upstream (asked
for a stream whether the client streams or not, with ``stream_options.include_usage``), runs the answer
through `ChunkPipeline` (upstream body, OpenAI converter, the reasoning-tag splitter when
``reasoning_tags`` is set, the delimiter rewriter, the request's tool rules) and a wire encoder, and
answers with the wire's SSE, or with the encoder's whole object when the client did not stream.

The translated request decides the rewriting and the tool rules exactly as on the Chat route
(`chat_pipeline`): rewritten only with ``tools`` and a ``tool_choice`` other than ``"none"``, the
rules read by `from_request` from the Chat fields each front door
translated its own ``tool_choice`` and parallel-call switch into.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Protocol

import anyio
import httpx
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from operators.convert.openai_chat import OpenAIChatConverter
from pipeline._jsonenc import encode_json
from pipeline.errors import StreamfoldError
from pipeline.models import ChunkResponse, TokenUsage
from pipeline.proxy._reads import feed_sliced, relay_upstream
from pipeline.proxy._requests import RequestError, decode_object
from pipeline.proxy._shared import (
    REQUEST_DROPPED,
    BodyTooLarge,
    ProxyConfig,
    Releasing,
    UpstreamBody,
    cut_stream_error,
    error_body,
    exchange_while_connected,
    forwarded_headers,
    log_failure,
    read_capped,
    stream_error,
    transport_error,
)
from pipeline.proxy.ops import RequestLog
from pipeline.proxy.policy import ToolPolicy, ToolPolicyFilter
from pipeline.proxy.rewriter import proxy_tool_format
from pipeline.stage import Core, chain

_log = logging.getLogger("pipeline.proxy.app")
"""The proxy's log (one logger for all its routes)."""

__all__ = [
    "ChunkPipeline",
    "FrontDoor",
    "RequestError",
    "Wire",
    "completion_of",
    "reasoning_splitter",
    "split_completion_reasoning",
]


def reasoning_splitter(style: str | None) -> Core[ChunkResponse, ChunkResponse] | None:
    """The reasoning-tag core for ``style`` (``None``/``"none"``: no splitting)."""
    if style is None or style == "none":
        return None
    from operators.delimiters.reasoning_tags import ReasoningTagSplitter

    return ReasoningTagSplitter(style)


def completion_of(payload: object) -> dict[str, Any] | None:
    """The ``chat.completion`` of a decoded upstream body; None when it is not an object with choices."""
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
        return None
    return payload


def split_completion_reasoning(completion: dict[str, Any], style: str) -> dict[str, Any]:
    """A whole ``chat.completion`` with each message's tagged reasoning moved to ``reasoning_content``."""
    choices = completion.get("choices")
    if not isinstance(choices, list):
        return completion
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            _split_message_reasoning(message, style)
    return completion


def _split_message_reasoning(message: dict[str, Any], style: str) -> None:
    """Move the tagged reasoning of one message's text content to its ``reasoning_content``."""
    splitter = reasoning_splitter(style)
    assert splitter is not None
    chunks = [*splitter.feed(ChunkResponse(content=message["content"])), *splitter.finish()]
    reasoning = "".join(chunk.reasoning or "" for chunk in chunks)
    if reasoning:
        previous = message.get("reasoning_content")
        message["reasoning_content"] = (previous if isinstance(previous, str) else "") + reasoning
        message["content"] = "".join(chunk.content for chunk in chunks) or None


class ChunkPipeline:
    """Sans-IO: the upstream's Chat Completions body (SSE, or one JSON completion) -> rewritten chunks.

    ``reasoning_tags`` splits tagged reasoning out of the text before the delimiter rewriter of
    ``tool_format`` (``None``: no rewriting; ``"auto"``: the format told from the model's markers) sees
    it; ``policy`` then applies the request's tool rules to the calls (`pipeline.proxy.policy`, the
    same stage as on the Chat route). A failure raises a `StreamfoldError` whose
    ``partial_outputs`` hold the chunks produced before it (the rewriter's held text released); a broken
    tool rule is a `ToolChoiceError`.
    """

    __slots__ = ("_core", "policy_filter")

    def __init__(
        self,
        tool_format: str | None,
        *,
        reasoning_tags: str | None,
        tool_schemas: Mapping[str, Any] | None,
        max_event_size: int,
        max_response_bytes: int,
        policy: ToolPolicy | None = None,
    ) -> None:
        cores: list[Core[Any, Any]] = [
            UpstreamBody(max_event_size, max_response_bytes),
            OpenAIChatConverter(),
        ]
        splitter = reasoning_splitter(reasoning_tags)
        if splitter is not None:
            cores.append(splitter)
        resolved = proxy_tool_format(tool_format)
        offered = policy.offered_names if policy is not None else None  # calls to other tools stay text
        if resolved is not None:
            from operators.delimiters.auto import delimiter_rewriter

            cores.append(
                Releasing(delimiter_rewriter(resolved, tool_schemas=tool_schemas, offered_tools=offered))
            )
        self.policy_filter: ToolPolicyFilter | None = None
        """The stage applying ``policy``, if one was given and it changes anything."""
        if resolved is not None and policy is not None and not policy.is_trivial:
            self.policy_filter = ToolPolicyFilter(policy)
            cores.append(self.policy_filter)
        self._core = chain(*cores)

    def feed(self, data: bytes) -> list[ChunkResponse]:
        result: list[ChunkResponse] = self._core.feed(data)
        return result

    def finish(self) -> list[ChunkResponse]:
        result: list[ChunkResponse] = self._core.finish()
        return result

    def abort(self, exc: BaseException) -> list[ChunkResponse]:
        """What the chain still holds, after a failure outside the bytes."""
        abort = getattr(self._core, "abort", None)
        if abort is None:
            return []
        with suppress(StreamfoldError):
            result: list[ChunkResponse] = abort(exc)
            return result
        return []


class Wire(Protocol):
    """A front door's encoder with its framing: chunks in, the wire's SSE bytes out."""

    @property
    def ended(self) -> bool: ...

    def feed(self, chunk: ChunkResponse) -> bytes: ...
    def finish(self) -> bytes: ...
    def fail(self, message: str, code: str) -> bytes: ...
    def whole(self) -> tuple[int, dict[str, Any]]:
        """Status and body of the non-streamed answer."""
        ...

    def error(self, status: int, message: str, code: str) -> dict[str, Any]:
        """The wire's error body for an HTTP error answer."""
        ...


class StreamCore:
    """Sans-IO: upstream bytes -> the wire's bytes; never raises (a failure ends the output)."""

    __slots__ = ("_chunks", "calls", "chunks", "error", "usage", "wire")

    def __init__(self, chunks: ChunkPipeline, wire: Wire) -> None:
        self._chunks = chunks
        self.wire = wire
        self.chunks = 0
        """Chunks encoded to the wire (metrics)."""
        self.calls = 0
        """Tool calls encoded to the wire (metrics, access log)."""
        self.error: str | None = None
        """The error code the output ended with, if any (metrics, access log)."""
        self.usage: TokenUsage | None = None
        """The upstream's usage, once it sent one (access log)."""

    @property
    def ended(self) -> bool:
        """The wire has written its end (an error event ended the answer, or the answer is complete)."""
        return self.wire.ended

    def feed(self, data: bytes) -> bytes:
        if self.wire.ended:
            return b""
        try:
            chunks = self._chunks.feed(data)
        except StreamfoldError as exc:
            return self._failed(exc.partial_outputs, stream_error(exc))
        self._count(chunks)
        return b"".join(map(self.wire.feed, chunks))

    @property
    def calls_dropped(self) -> int:
        """Calls the request's tool rules dropped (metrics)."""
        policy_filter = self._chunks.policy_filter
        return 0 if policy_filter is None else policy_filter.dropped

    def _count(self, chunks: list[ChunkResponse]) -> None:
        self.chunks += len(chunks)
        for chunk in chunks:
            if chunk.usage is not None:
                self.usage = chunk.usage
            if chunk.tool_calls:
                self.calls += sum(1 for delta in chunk.tool_calls if delta.name is not None)

    def finish(self) -> bytes:
        if self.wire.ended:
            return b""
        try:
            chunks = self._chunks.finish()
        except StreamfoldError as exc:
            return self._failed(exc.partial_outputs, stream_error(exc))
        self._count(chunks)
        return b"".join(map(self.wire.feed, chunks)) + self.wire.finish()

    def fail(self, error: Mapping[str, Any]) -> bytes:
        if self.wire.ended:
            return b""
        return self._failed(self._chunks.abort(StreamfoldError("the upstream failed")), error)

    def _failed(self, chunks: list[Any], error: Mapping[str, Any]) -> bytes:
        details = error["error"]
        self.error = str(details.get("code") or "upstream_error")
        out = b"".join(self.wire.feed(chunk) for chunk in chunks if isinstance(chunk, ChunkResponse))
        return out + self.wire.fail(str(details.get("message")), str(details.get("code") or "upstream_error"))


class FrontDoor(Response):
    """One front-door exchange: the translated Chat request, streamed from the upstream, encoded."""

    def __init__(
        self,
        proxy: ProxyConfig,
        request: httpx.Request,
        core: StreamCore,
        *,
        streaming: bool,
        route: str,
        model: str | None = None,
    ) -> None:
        self._proxy = proxy
        self._request = request
        self._core = core
        self._streaming = streaming
        self._log = RequestLog(route, request.method, model, streaming)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        log = self._log
        try:
            await exchange_while_connected(self._exchange, receive, send, log)
        finally:
            core, metrics = self._core, self._proxy.metrics
            log.error = log.error or core.error
            log.tool_calls = core.calls
            if core.usage is not None:
                log.input_tokens = core.usage.prompt_tokens
                log.output_tokens = core.usage.completion_tokens
            if self._streaming:
                metrics.chunks += core.chunks
                metrics.calls_rewritten += core.calls
                metrics.calls_dropped += core.calls_dropped
            log.done(metrics, scope)

    async def _send_upstream(self) -> httpx.Response:
        """The upstream's response; sent again once if a pooled connection closed before any answer
        (the keep-alive race the Chat route also retries; the body is in memory)."""
        client = self._proxy.client
        with suppress(httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            return await client.send(self._request, stream=True)
        return await client.send(self._request, stream=True)

    async def _exchange(self, send: Send) -> None:
        wire = self._core.wire
        try:
            upstream = await self._send_upstream()
        except httpx.HTTPError as exc:
            log_failure(_log, self._request, exc)
            status, body = transport_error(exc)
            self._log.error = body["error"]["code"]
            await _json(send, status, wire.error(status, body["error"]["message"], body["error"]["code"]))
            return
        try:
            if upstream.status_code != 200:
                try:
                    raw = await read_capped(upstream, self._proxy.max_response_bytes)
                except (BodyTooLarge, httpx.HTTPError):
                    raw = b""
                message = _upstream_message(raw) or f"the upstream answered {upstream.status_code}"
                status = upstream.status_code
                self._log.error = "upstream_error"
                await _json(send, status, wire.error(status, message, "upstream_error"))
                return
            if self._streaming:
                await self._stream(upstream, send)
            else:
                await self._collect(upstream)
                status, whole = wire.whole()
                await _json(send, status, whole)
        except httpx.HTTPError as exc:  # the non-streamed answer broke off
            error = cut_stream_error(exc)
            self._log.error = error["error"]["code"]
            await _json(send, 502, wire.error(502, error["error"]["message"], error["error"]["code"]))
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()

    async def _collect(self, upstream: httpx.Response) -> None:
        """Read the whole answer into the wire's, up to ``max_response_bytes`` of the upstream's stream
        (beyond: the answer fails, ``upstream_response_too_large``)."""
        core = self._core
        cap = self._proxy.max_response_bytes
        received = 0

        async def going(_: bytes) -> bool:
            return not core.wire.ended

        async for data in upstream.aiter_bytes():
            received += len(data)
            if received > cap:
                message = f"the upstream answer is larger than max_response_bytes={cap}"
                core.fail(error_body(message, code="upstream_response_too_large"))
                return
            if not await feed_sliced(core.feed, data, going):
                return
        core.finish()

    async def _stream(self, upstream: httpx.Response, send: Send) -> None:
        core = self._core
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        metrics = self._proxy.metrics
        metrics.streams_open += 1
        try:
            piece = await relay_upstream(upstream, core, send, metrics)
        finally:
            metrics.streams_open -= 1
        await send({"type": "http.response.body", "body": piece, "more_body": False})


def _upstream_message(body: bytes) -> str | None:
    """The message of an upstream error body (OpenAI-style or plain text)."""
    try:
        payload = msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        text = body.decode("utf-8", "replace").strip()
        return text[:1000] or None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(payload, dict) and isinstance(payload.get("message"), str):
        return str(payload["message"])
    return None


async def _json(send: Send, status: int, body: Mapping[str, Any]) -> None:
    data = encode_json(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def read_json(proxy: ProxyConfig, request: Request) -> dict[str, Any]:
    """The request's JSON object body.

    Raises:
        RequestError: too large (413), not UTF-8 or not JSON, nested too deeply, not an object (400).
    """
    body = await proxy.read_body(request)
    if isinstance(body, RequestError):
        raise body
    return decode_object(body)


def upstream_request(proxy: ProxyConfig, request: Request, chat: Mapping[str, Any]) -> httpx.Request:
    """The Chat Completions request to the upstream: the client's headers (an Anthropic ``x-api-key``
    also as ``Authorization: Bearer``), the translated body."""
    drop = REQUEST_DROPPED | {"content-type"}
    headers = forwarded_headers(request.headers.raw, drop)
    if "authorization" not in request.headers and "x-api-key" in request.headers:
        headers.append(("authorization", "Bearer " + request.headers["x-api-key"]))
    headers += [("accept-encoding", "identity"), ("content-type", "application/json")]
    base_path = proxy.base.path.rstrip("/")
    path = base_path + ("/chat/completions" if base_path.endswith("/v1") else "/v1/chat/completions")
    url = proxy.base.copy_with(path=path, query=None)
    return proxy.client.build_request("POST", url, headers=headers, content=encode_json(chat))


def chat_tool_schemas(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool name -> parameters schema of translated Chat ``tools``."""
    return {tool["function"]["name"]: tool["function"].get("parameters") or {} for tool in tools}


def chat_pipeline(proxy: ProxyConfig, chat: Mapping[str, Any]) -> ChunkPipeline:
    """The chunk pipeline for the translated Chat request ``chat``, with the Chat route's rules: the text
    is rewritten only when ``chat`` has ``tools`` and its ``tool_choice`` is not ``"none"``, and then the
    request's tool rules (``--unknown-tools``, ``tool_choice``, ``parallel_tool_calls``) apply."""
    tools = chat.get("tools") or []
    rewrites = bool(tools) and chat.get("tool_choice") != "none" and proxy.tool_format is not None
    return ChunkPipeline(
        proxy.tool_format if rewrites else None,
        reasoning_tags=proxy.reasoning_tags,
        tool_schemas=chat_tool_schemas(tools),
        max_event_size=proxy.max_event_size,
        max_response_bytes=proxy.max_response_bytes,
        policy=ToolPolicy.from_request(chat, proxy.unknown_tools) if rewrites else None,
    )
