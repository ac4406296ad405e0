"""Sources: where a pipeline's items come from (files, bytes, HTTP responses, SDK streams, dicts).

Each source is an aiostream operator, so it pipes into the stages (``from_file(path) | sse_events.pipe()``),
and each closes what it opened as soon as the consumer stops, early or not: the file, the HTTP response,
the SDK stream. Each is a `source_operator`: the stage reading it, inside the
stream's context, iterates its generator itself, without aiostream's own streamer around each item.

`provider_events` is the whole provider adapter: bytes in, provider event dicts out.
"""

from __future__ import annotations

import base64
import inspect
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from aiostream import pipable_operator
from pydantic_core import to_jsonable_python

from operators.adapter.json_array import JSONSequenceDecoder
from operators.adapter.jsonl import JSONLinesDecoder
from operators.adapter.sse import DEFAULT_MAX_EVENT_SIZE, sse_events
from pipeline.errors import ConfigurationError, ProviderError, StreamDecodeError
from pipeline.stage import operator_stream, source_operator

if TYPE_CHECKING:
    import httpx

    from operators.registry import Framing

__all__ = [
    "from_bytes",
    "from_dicts",
    "from_file",
    "from_httpx",
    "from_sdk",
    "is_sdk_stream",
    "provider_events",
    "sdk_error",
    "sdk_object_to_dict",
]

_SDK_ONLY_FIELDS = frozenset({"sdk_http_response", "automatic_function_calling_history", "parsed"})
"""Fields google-genai adds to its response objects that are not part of the wire payload."""


@source_operator
async def from_file(path: str | os.PathLike[str], chunk_size: int = 65536) -> AsyncIterator[bytes]:
    """The bytes of a file, read in a worker thread (the loop never blocks).

    Args:
        path: the file.
        chunk_size: bytes read at a time.

    Raises:
        ConfigurationError: ``chunk_size`` is not positive.
    """
    if chunk_size <= 0:
        raise ConfigurationError(f"chunk_size must be positive, got {chunk_size}")
    async with await anyio.open_file(path, "rb") as file:
        while chunk := await file.read(chunk_size):
            yield chunk


@source_operator
async def from_bytes(data: bytes, chunk_size: int | None = None) -> AsyncIterator[bytes]:
    """Bytes in pieces, for tests and replays.

    Args:
        data: the bytes.
        chunk_size: bytes per piece; ``None`` yields them all at once.

    Raises:
        ConfigurationError: ``chunk_size`` is not positive.
    """
    if chunk_size is None:
        if data:
            yield data
        return
    if chunk_size <= 0:
        raise ConfigurationError(f"chunk_size must be positive, got {chunk_size}")
    view = memoryview(data)
    for start in range(0, len(data), chunk_size):
        yield bytes(view[start : start + chunk_size])


@source_operator
async def from_httpx(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body of a streaming ``httpx.Response`` (from ``client.stream(...)`` or ``send(..., stream=True)``).

    Bytes come from ``aiter_bytes`` (content-encoding such as gzip undone). The response is closed when the
    consumer stops. An error status raises `ProviderError` with the provider's message and the
    status, instead of feeding an error page to the SSE decoder.
    """
    try:
        if response.is_error:
            await response.aread()
            raise _http_error(response)
        async for chunk in response.aiter_bytes():
            yield chunk
    finally:
        await response.aclose()


def _http_error(response: httpx.Response) -> ProviderError:
    status = response.status_code
    text = response.text
    payload: Mapping[str, Any] = {"body": text}
    details: dict[str, Any] = {"message": text.strip() or response.reason_phrase}
    try:
        decoded = response.json()
    except ValueError:
        decoded = None
    if isinstance(decoded, Mapping):
        payload = decoded
        error = decoded.get("error", decoded)
        if isinstance(error, Mapping):
            details = {**details, **{k: v for k, v in error.items() if v}}
        elif isinstance(error, str):
            details["message"] = error
    details["status_code"] = status
    return ProviderError.from_payload(details, payload, f"HTTP {status} from {response.url}")


@source_operator
async def from_sdk(stream: AsyncIterable[Any]) -> AsyncIterator[dict[str, Any]]:
    """The events of an ``openai``, ``anthropic`` or ``google-genai`` async stream, as wire-format dicts.

    Each SDK object becomes the dict its JSON payload was (see `sdk_object_to_dict`), so the
    converters see the same events whether they come from an SDK or from raw bytes. An in-band error the
    SDK raises as its own exception (``openai.APIError``, ``anthropic.APIStatusError``,
    ``google.genai.errors.APIError``) is raised as `ProviderError`, as from raw bytes (see
    `sdk_error`). The SDK stream is closed (``aclose()`` or ``close()``) when the consumer stops.
    """
    iterator = aiter(stream)
    try:
        while True:
            try:
                item = await anext(iterator)
            except StopAsyncIteration:
                break
            except Exception as error:
                failure = sdk_error(error)
                if failure is None:
                    raise
                raise failure from error
            yield sdk_object_to_dict(item)
    finally:
        await _close(stream)


_SDK_PACKAGES = ("openai", "anthropic", "google")


def is_sdk_stream(source: object) -> bool:
    """Whether ``source`` is an async stream of the ``openai``, ``anthropic`` or ``google-genai`` SDK (their
    stream classes, or an async generator of theirs), which `from_sdk` should read."""
    code = getattr(source, "ag_code", None)
    if code is not None:
        path = code.co_filename.replace("\\", "/")
        return any(f"/{package}/" in path for package in _SDK_PACKAGES)
    return type(source).__module__.partition(".")[0] in _SDK_PACKAGES


def sdk_error(error: BaseException) -> ProviderError | None:
    """The `ProviderError` for an exception an SDK raised for an error the provider sent (an in-band
    error event: its body is the error object), or ``None`` for any other exception (a lost connection).

    The message, ``kind`` and ``status`` are made from the error object as from raw bytes; the original
    exception is its ``__cause__``."""
    if type(error).__module__.partition(".")[0] not in _SDK_PACKAGES:
        return None
    body = getattr(error, "body", None)
    if body is None:
        body = getattr(error, "details", None)  # google-genai
    if not isinstance(body, Mapping):
        return None
    payload: Mapping[str, Any] = body if "error" in body or body.get("type") == "error" else {"error": body}
    inner = payload.get("error")
    details = inner if isinstance(inner, Mapping) else payload
    return ProviderError.from_payload(details, payload, "the SDK stream")


async def _close(stream: object) -> None:
    closer = getattr(stream, "aclose", None) or getattr(stream, "close", None)
    if closer is not None:
        result = closer()
        if inspect.isawaitable(result):
            await result


def sdk_object_to_dict(item: Any) -> dict[str, Any]:
    """One SDK event object as the dict of its wire JSON.

    pydantic models are dumped with their wire names (``by_alias``: google-genai's camelCase, openai's
    ``schema``), only the fields the payload set (``exclude_unset``: no defaults invented, explicit
    ``null``s kept), bytes as standard base64 like the wire (pydantic's JSON mode would use the URL-safe
    alphabet), and without the SDKs' own additions (google-genai ``sdk_http_response``). Mappings pass
    through. Fields an SDK dropped while parsing cannot come back.

    Raises:
        StreamDecodeError: the item is neither a mapping nor an SDK object.
    """
    if isinstance(item, Mapping):
        return dict(item)
    if type(item).__module__.startswith("openai.lib.streaming.chat"):
        # openai's .stream() helper: a chunk event's chunk is the wire payload; its snapshot (the response
        # so far) is not, and dumping it on every event would cost quadratic time. Derived events: type only.
        chunk = getattr(item, "chunk", None)
        return {"type": item.type, "chunk": sdk_object_to_dict(chunk)} if chunk else {"type": item.type}
    dump = getattr(item, "model_dump", None)
    if dump is None:
        raise StreamDecodeError(
            f"a source item is a {type(item).__name__}: expected bytes, a provider event dict or an SDK"
            " (pydantic) object"
        )
    dumped = dump(
        mode="python", by_alias=True, exclude_unset=True, exclude=set(_SDK_ONLY_FIELDS), warnings=False
    )
    result: dict[str, Any] = _wire_json(dumped)
    return result


def _wire_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _wire_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_wire_json(item) for item in value]
    if isinstance(value, str | int | float | None):
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return to_jsonable_python(value)  # enums, datetimes: as pydantic writes them in JSON


@source_operator
async def from_dicts(
    items: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
) -> AsyncIterator[dict[str, Any]]:
    """Provider event dicts from memory (a list, a generator) or from any async iterable."""
    if isinstance(items, AsyncIterable):
        try:
            async for item in items:
                yield dict(item)
        finally:
            await _close(items)
    else:
        for item in items:
            yield dict(item)


@pipable_operator
def provider_events(
    source: AsyncIterable[bytes],
    *,
    framing: Framing = "sse",
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> AsyncIterator[dict[str, Any]]:
    """The provider adapter: bytes to provider event dicts, for SSE, JSON Lines, JSON array or AWS
    event-stream (Bedrock) framing.

    Args:
        source: the response body's bytes.
        framing: ``sse``, ``jsonl``, ``json`` (an array) or ``eventstream``.
        max_event_size: cap, in bytes, of one event.

    Raises:
        ProviderError: an in-band error, after the events before it.
        StreamDecodeError: bad bytes or JSON, or an event over ``max_event_size``.
    """
    if framing == "sse":
        return sse_events.raw(source, max_event_size=max_event_size)
    if framing == "jsonl":
        return operator_stream(source, JSONLinesDecoder(max_line_size=max_event_size, objects_only=True))
    if framing == "json":
        return operator_stream(source, JSONSequenceDecoder(max_value_size=max_event_size))
    if framing == "eventstream":
        from operators.adapter.eventstream import EventStreamDecoder

        return operator_stream(source, EventStreamDecoder(max_frame_size=max_event_size))
    raise ConfigurationError(f"unknown framing {framing!r}: expected 'sse', 'jsonl', 'json' or 'eventstream'")
