"""What the proxy's routes share (Chat Completions, ``/v1/responses``, ``/v1/messages``).

The sans-IO pieces of an upstream answer (`UpstreamBody`, `Releasing`, `stream_error`,
`error_body`) and the HTTP helpers (headers forwarded, transport errors, capped reads, the client
watch), plus `ProxyConfig`, what a route reads of the proxy. ``httpx`` and ``starlette`` are
imported only where used, so that the sans-IO rewriter stays importable without the ``server`` extra.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
import msgspec

from operators.adapter.sse import EventParser, SSEDecoder
from pipeline.errors import ProviderError, StreamDecodeError, StreamfoldError
from pipeline.models import ChunkResponse
from pipeline.proxy.policy import ToolChoiceError, UnknownTools
from pipeline.stage import Core, chain

if TYPE_CHECKING:
    import httpx
    from starlette.requests import Request
    from starlette.types import Message, Receive, Send

    from pipeline.proxy._requests import RequestError
    from pipeline.proxy.ops import Metrics, RequestLog

__all__ = [
    "HOP_BY_HOP",
    "REQUEST_DROPPED",
    "BodyTooLarge",
    "ProxyConfig",
    "Releasing",
    "ResponseTooLarge",
    "UpstreamBody",
    "cancel_on_disconnect",
    "cut_stream_error",
    "error_body",
    "exchange_while_connected",
    "forwarded_headers",
    "log_failure",
    "read_capped",
    "shown_url",
    "stream_error",
    "transport_error",
]


class ProxyConfig(Protocol):
    """What a route reads of the proxy: its configuration, its upstream client, its request reader."""

    base: httpx.URL
    client: httpx.AsyncClient
    metrics: Metrics
    tool_format: str | None
    unknown_tools: UnknownTools
    reasoning_tags: str | None
    max_request_bytes: int
    max_response_bytes: int
    max_event_size: int

    async def read_body(self, request: Request) -> bytes | RequestError: ...


def error_body(message: str, *, type: str = "upstream_error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error object ``{"error": {"message", "type", "param", "code"}}``.

    Args:
        message: what went wrong.
        type: the error's ``type``.
        code: the error's ``code``; None: null.
    """
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


# Headers that belong to one connection, or that the proxy recomputes, and are not forwarded.
HOP_BY_HOP: Final = frozenset(
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
REQUEST_DROPPED: Final = HOP_BY_HOP | {"accept-encoding"}
"""Request headers not forwarded as they are (the accept-encoding is chosen per route)."""


def transport_error(exc: httpx.HTTPError) -> tuple[int, dict[str, Any]]:
    """Status and error body for an upstream request that failed in transport.

    The message names the kind of failure only: the upstream's address, its credentials and the
    exception's text (which may hold them) are for the log (`shown_url`), not for clients.
    """
    import httpx

    kind = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return 504, error_body(f"the upstream timed out ({kind})", code="upstream_timeout")
    if isinstance(exc, httpx.ConnectError):
        return 502, error_body(f"cannot connect to the upstream ({kind})", code="upstream_unreachable")
    return 502, error_body(f"the upstream connection failed ({kind})", code="upstream_error")


def shown_url(url: httpx.URL | str) -> str:
    """``url`` as a log line shows it: a password in it replaced by ``***``."""
    import httpx

    url = httpx.URL(url)
    if not url.userinfo:
        return str(url)
    user = url.userinfo.partition(b":")[0]
    return str(url.copy_with(userinfo=user + b":***"))


def log_failure(logger: logging.Logger, request: httpx.Request, exc: BaseException) -> None:
    """One warning line for an upstream request that failed: where (password hidden) and what."""
    logger.warning("upstream request %s %s failed: %s", request.method, shown_url(request.url), _text(exc))


def _text(exc: BaseException) -> str:
    """``exc`` and its cause as ``Type: message``, for the operator's log (aiohttp's name the address).

    Never the cause's ``repr``: aiohttp's ``ClientResponseError`` puts the request's headers in it, the
    Basic auth made of the URL's password and the client's own token among them.
    """
    parts = [repr(exc)]
    cause = exc.__cause__
    if cause is not None:
        parts.append(f"{type(cause).__name__}: {cause}")
    return " from ".join(parts)


def forwarded_headers(headers: Iterable[tuple[bytes, bytes]], drop: frozenset[str]) -> list[tuple[str, str]]:
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


async def cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def exchange_while_connected(
    exchange: Callable[[Send], Awaitable[None]], receive: Receive, send: Send, log: RequestLog
) -> None:
    """Run ``exchange`` with a ``send`` that records the response status in ``log``, until it ends or
    the client disconnects, which cancels it wherever it waits."""
    log.start()

    async def tracked(message: Message) -> None:
        if message["type"] == "http.response.start":
            log.status = message["status"]
        await send(message)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(cancel_on_disconnect, receive, tasks.cancel_scope)
        await exchange(tracked)
        tasks.cancel_scope.cancel()


class BodyTooLarge(Exception):
    pass


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for data in response.aiter_bytes():
        size += len(data)
        if size > limit:
            raise BodyTooLarge
        parts.append(data)
    return b"".join(parts)


def cut_stream_error(exc: httpx.HTTPError) -> dict[str, Any]:
    """The error event for an upstream stream that broke off after it started."""
    import httpx

    _, error = transport_error(exc)
    details = error["error"]
    if isinstance(exc, httpx.TimeoutException):
        details["message"] = f"the upstream stream stalled: {details['message']}"
    else:
        details["message"] = f"the upstream stream was cut off: {details['message']}"
        details["code"] = "upstream_disconnected"
    return error


class ResponseTooLarge(StreamDecodeError):
    """A whole JSON answer larger than ``max_response_bytes``."""


class UpstreamBody:
    """The upstream body's bytes to payload dicts: SSE events, or, when the body starts with ``{``, one
    whole ``chat.completion`` read to its end (capped) and given as one chunk payload."""

    __slots__ = ("_json", "_json_size", "_max_response_bytes", "_sniffing", "_sse")

    def __init__(self, max_event_size: int, max_response_bytes: int) -> None:
        self._sse = chain(SSEDecoder(max_event_size=max_event_size), EventParser())
        self._sniffing = True
        self._json: list[bytes] | None = None
        self._json_size = 0
        self._max_response_bytes = max_response_bytes

    def feed(self, data: bytes) -> list[Any]:
        if self._sniffing and data.lstrip():
            self._sniffing = False
            if data.lstrip()[:1] == b"{":
                self._json = []
        if self._json is not None:
            self._json_size += len(data)
            if self._json_size > self._max_response_bytes:
                raise ResponseTooLarge(
                    "the upstream answered the streamed request with a JSON body larger than "
                    f"max_response_bytes={self._max_response_bytes}",
                    offset=self._json_size,
                )
            self._json.append(data)
            return []
        return self._sse.feed(data)

    def finish(self) -> list[Any]:
        if self._json is not None:
            return [_completion_as_chunk(b"".join(self._json))]
        return self._sse.finish()


class Releasing:
    """The delimiter rewriter, which releases what it holds when the stream fails before it."""

    __slots__ = ("_rewriter", "feed", "finish")

    def __init__(self, rewriter: Core[ChunkResponse, ChunkResponse]) -> None:
        self._rewriter = rewriter
        self.feed = rewriter.feed
        self.finish = rewriter.finish

    def abort(self, exc: BaseException) -> list[ChunkResponse]:
        return self._rewriter.finish()


def _completion_as_chunk(body: bytes) -> dict[str, Any]:
    """A whole ``chat.completion`` body as one ``chat.completion.chunk`` payload (each message as a
    delta, its calls numbered); an error body as it is (the converter raises it).

    Raises:
        StreamDecodeError: the body is not JSON, or not a completion.
    """
    try:
        completion = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise StreamDecodeError(
            f"the upstream answered with a JSON body that does not decode: {exc}"
        ) from None
    if isinstance(completion, dict) and "error" in completion and "choices" not in completion:
        return completion
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not isinstance(choices, list):
        raise StreamDecodeError(
            "the upstream answered the streamed request with JSON that is not a chat completion "
            f"(no choices list): {body[:200]!r}"
        )
    chunk = dict(completion)
    chunk["object"] = "chat.completion.chunk"
    chunk["choices"] = [_choice_as_delta(choice) for choice in choices]
    return chunk


def _choice_as_delta(choice: object) -> object:
    if not isinstance(choice, Mapping) or not isinstance(choice.get("message"), Mapping):
        return choice  # the converter names what is wrong with it
    delta = dict(choice["message"])
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        delta["tool_calls"] = [
            {"index": index, **call} if isinstance(call, Mapping) else call
            for index, call in enumerate(calls)
        ]
    result = {key: value for key, value in choice.items() if key != "message"}
    result["delta"] = delta
    return result


def stream_error(exc: StreamfoldError) -> dict[str, Any]:
    """The error event for a failure found in the upstream's stream."""
    if isinstance(exc, ToolChoiceError):
        return error_body(str(exc), type="invalid_response_error", code=exc.code)
    if isinstance(exc, ResponseTooLarge):
        return error_body(str(exc), code="upstream_response_too_large")
    if isinstance(exc, ProviderError):
        upstream_error = exc.payload.get("error")
        if isinstance(upstream_error, Mapping) and upstream_error.get("message"):
            details = dict(upstream_error)
            details.setdefault("type", "upstream_error")
            return {"error": details}
        return error_body(exc.message, code=exc.kind or "upstream_error_event")
    return error_body(f"the upstream stream could not be read: {exc}", code="invalid_upstream_response")
