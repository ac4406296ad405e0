"""Every recording both ways: the SDK's own stream objects and the raw bytes give the same events.

For each recording whose provider has an SDK in the test extra, the SDK parses the recorded bytes itself
(``openai.AsyncStream`` / ``anthropic.AsyncStream`` over an ``httpx2.Response`` holding the body, no
network; JSON Lines recordings are framed as the SSE the provider sends), or, for Gemini, builds its
``GenerateContentResponse`` from each recorded event as google-genai does (``_from_response``). Both go
through ``process()`` and must give the same events and the same error.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import msgspec
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from google.genai import types as genai_types
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from operators.adapter import JSONLinesDecoder, SSEPayloadDecoder
from operators.adapter.sources import from_sdk
from pipeline.compose import process
from pipeline.errors import ProviderError
from pipeline.models import PipelineEvent
from pipeline.testing import collect, counter_segment_ids, sequential_call_ids
from tests.conftest import FIXTURES

try:  # the HTTP client the SDKs are built on: httpx2 in their newer releases, httpx in the older ones
    import httpx2
except ImportError:
    import httpx as httpx2  # type: ignore[no-redef]

SDK_FOLDERS = ("openai_chat", "openai_compatible", "openai_responses", "anthropic", "gemini")
INTERACTIONS_API = "vercel_gemini-2.5-flash_interactions_api_tool_call.jsonl"
RECORDINGS = sorted(
    path
    for folder in SDK_FOLDERS
    for path in (FIXTURES / folder).iterdir()
    if path.suffix in (".sse", ".jsonl") and path.name != INTERACTIONS_API
)
KNOWN_DIFFERENCES: dict[str, str] = {}
"""Folder or file name -> why the SDK's objects give other events than the bytes (each an xfail)."""


def _request() -> httpx2.Request:
    return httpx2.Request("POST", "http://127.0.0.1/v1/stream")


def _body(path: Path) -> bytes:
    """The recording as the SSE body the provider sends (JSON Lines recordings hold the payloads only)."""
    data = path.read_bytes()
    if path.suffix == ".sse":
        return data
    events = []
    for line in data.splitlines():
        if not line.strip() or line.strip() == b"[DONE]":
            continue
        name = json.loads(line).get("type") if path.parent.name == "anthropic" else None
        events.append(
            (b"event: " + name.encode() + b"\n" if isinstance(name, str) else b"") + b"data: " + line
        )
    return b"\n\n".join(events) + b"\n\n"


def _recorded_events(path: Path) -> list[dict[str, Any]]:
    decoder = SSEPayloadDecoder() if path.suffix == ".sse" else JSONLinesDecoder()
    try:
        events: list[dict[str, Any]] = decoder.feed(path.read_bytes()) + decoder.finish()
    except ProviderError as error:
        return list(error.partial_outputs)
    return events


async def _gemini_stream(path: Path) -> AsyncIterator[genai_types.GenerateContentResponse]:
    for event in _recorded_events(path):
        yield genai_types.GenerateContentResponse._from_response(response=event, kwargs={})


def sdk_stream(path: Path) -> Any:
    """The SDK's own async stream of the recording."""
    folder = path.parent.name
    response = httpx2.Response(
        200, content=_body(path), headers={"content-type": "text/event-stream"}, request=_request()
    )
    if folder == "anthropic":
        client = anthropic.AsyncAnthropic(api_key="test", base_url="http://127.0.0.1:9")
        event_type: Any = RawMessageStreamEvent
        return anthropic.AsyncStream(cast_to=event_type, response=response, client=client)
    if folder == "gemini":
        return _gemini_stream(path)
    openai_client = openai.AsyncOpenAI(api_key="test", base_url="http://127.0.0.1:9")
    cast_to: Any = ResponseStreamEvent if folder == "openai_responses" else ChatCompletionChunk
    return openai.AsyncStream(cast_to=cast_to, response=response, client=openai_client)


async def outcome(source: Any) -> tuple[list[PipelineEvent], str | None]:
    received: list[PipelineEvent] = []
    options: dict[str, Any] = {"id_factory": sequential_call_ids, "segment_ids": counter_segment_ids()}
    try:
        async with process(source, **options).stream() as events:
            async for event in events:
                received.append(event)
    except Exception as error:
        kind = getattr(error, "kind", None)
        message = str(error).split(": ", 1)[1] if isinstance(error, ProviderError) else str(error)
        return received, f"{type(error).__name__}({kind}): {message}"
    return received, None


def _read(path: Path) -> bytes:
    return path.read_bytes()


async def raw_bytes(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _case(path: Path) -> Any:
    reason = KNOWN_DIFFERENCES.get(path.name) or KNOWN_DIFFERENCES.get(path.parent.name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=f"{path.parent.name}/{path.name}", marks=marks)


@pytest.mark.anyio
@pytest.mark.parametrize("path", [_case(path) for path in RECORDINGS])
async def test_every_recording_both_ways(path: Path) -> None:
    reference = await outcome(raw_bytes(_read(path)))
    assert reference[0]
    assert typed(await outcome(sdk_stream(path))) == typed(reference)


def typed(value: Any) -> Any:
    """``value`` with the exact type of every leaf beside it, so that equal values of other types
    (1700000000.0 for 1700000000, an enum member for its string) differ; mappings compare as mappings,
    whatever the order of their keys (an SDK dumps its model's field order, the wire has its own)."""
    if isinstance(value, msgspec.Struct):
        return (type(value).__name__, typed(msgspec.structs.asdict(value)))
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [typed(item) for item in value]
    return (type(value).__name__, value)


@pytest.mark.anyio
async def test_an_in_band_error_from_the_openai_sdk_is_a_provider_error() -> None:
    """openai's stream raises ``openai.APIError`` for the error event: it comes out as ``ProviderError``,
    after the events before it, through ``process()`` and through ``from_sdk``."""
    path = (
        FIXTURES
        / "openai_compatible"
        / "pydantic-ai_groq_gpt-oss-120b_reasoning_then_midstream_error_event.sse"
    )
    events, error = await outcome(sdk_stream(path))
    assert error is not None
    assert error.startswith(
        "ProviderError(tool_use_failed): provider error (tool_use_failed): Tool call validation"
    )
    assert events
    with pytest.raises(ProviderError, match="the SDK stream: provider error") as caught:
        await collect(from_sdk(sdk_stream(path)))
    assert isinstance(caught.value.__cause__, openai.APIError)
    assert caught.value.status == 400


@pytest.mark.anyio
async def test_an_in_band_error_from_the_anthropic_sdk_is_a_provider_error() -> None:
    body = (
        b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "type": "message", '
        b'"role": "assistant", "model": "claude", "content": [], "stop_reason": null, "stop_sequence": null, '
        b'"usage": {"input_tokens": 1, "output_tokens": 1}}}\n\n'
        b'event: error\ndata: {"type": "error", '
        b'"error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
    )
    response = httpx2.Response(200, content=body, request=_request())
    client = anthropic.AsyncAnthropic(api_key="test", base_url="http://127.0.0.1:9")
    cast_to: Any = RawMessageStreamEvent
    stream = anthropic.AsyncStream(cast_to=cast_to, response=response, client=client)
    assert await outcome(stream) == await outcome(raw_bytes(body))
    _, error = await outcome(raw_bytes(body))
    assert error == "ProviderError(overloaded_error): provider error (overloaded_error): Overloaded"
