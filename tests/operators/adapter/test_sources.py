"""Sources: exact items, closing what they opened when the consumer stops, SDK objects as wire dicts."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiostream import streamcontext

from operators.adapter import EventParser, JSONLinesDecoder, SSEDecoder
from operators.adapter.sources import (
    from_bytes,
    from_dicts,
    from_file,
    from_httpx,
    from_sdk,
    provider_events,
    sdk_object_to_dict,
)
from operators.registry import Framing
from pipeline.errors import ConfigurationError, ProviderError, StreamDecodeError
from tests.conftest import FIXTURES

pytestmark = pytest.mark.anyio


async def collect(source: AsyncIterable[Any]) -> list[Any]:
    async with streamcontext(source) as iterator:
        items = [item async for item in iterator]
    return items


async def first(source: AsyncIterable[Any]) -> Any:
    """Take one item, then stop consuming (closing the source)."""
    async with streamcontext(source) as iterator:
        async for item in iterator:
            return item
    raise AssertionError("empty source")


def payloads(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        decoder = JSONLinesDecoder(check_errors=False)
        values: list[dict[str, Any]] = decoder.feed(data) + decoder.finish()
        return values
    parser = EventParser()
    return [payload for event in SSEDecoder().feed(data) for payload in parser.feed(event)]


class TestBytesAndFiles:
    async def test_from_bytes_rechunks(self) -> None:
        assert await collect(from_bytes(b"abcdefg", chunk_size=3)) == [b"abc", b"def", b"g"]
        assert await collect(from_bytes(b"abc")) == [b"abc"]
        assert await collect(from_bytes(b"")) == []
        assert await collect(from_bytes(b"", chunk_size=2)) == []

    async def test_from_bytes_rejects_a_bad_chunk_size(self) -> None:
        with pytest.raises(ConfigurationError, match="chunk_size must be positive, got 0"):
            await collect(from_bytes(b"abc", chunk_size=0))

    async def test_from_file(self, tmp_path: Path) -> None:
        path = tmp_path / "stream.sse"
        path.write_bytes(b"x" * 10)
        assert await collect(from_file(path, chunk_size=4)) == [b"xxxx", b"xxxx", b"xx"]
        assert await collect(from_file(str(path))) == [b"x" * 10]

    async def test_from_file_then_events(self) -> None:
        path = FIXTURES / "openai_chat" / "openai-python_refusal_gpt4o.sse"
        assert await collect(from_file(path, chunk_size=50) | provider_events.pipe()) == payloads(path)


class TestProviderEvents:
    @pytest.mark.parametrize(
        "path",
        [
            FIXTURES / "anthropic" / "vercel_claude-sonnet-4-5_text_only.jsonl",
            FIXTURES / "openai_compatible" / "pydantic-ai_openrouter_reasoning_details_text.sse",
        ],
        ids=lambda path: path.name,
    )
    async def test_sse_and_jsonl(self, path: Path) -> None:
        framing: Framing = "jsonl" if path.suffix == ".jsonl" else "sse"
        data = path.read_bytes()  # noqa: ASYNC240 (a small fixture, read once)
        events = await collect(from_bytes(data, chunk_size=13) | provider_events.pipe(framing=framing))
        assert events == payloads(path)
        assert events

    async def test_jsonl_lines_must_be_objects(self) -> None:
        with pytest.raises(StreamDecodeError, match=r"line 1 .*not an object"):
            await collect(from_bytes(b'{"a": 1}\n[2]\n') | provider_events.pipe(framing="jsonl"))

    async def test_unknown_framing(self) -> None:
        with pytest.raises(ConfigurationError, match="unknown framing 'xml'"):
            provider_events.raw(from_bytes(b""), framing="xml")  # type: ignore[arg-type]


class ClosingStream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


async def open_response(status: int, stream: httpx.AsyncByteStream) -> httpx.Response:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, stream=stream))
    client = httpx.AsyncClient(transport=transport)
    request = client.build_request("POST", "http://127.0.0.1/v1/chat/completions")
    return await client.send(request, stream=True)


class TestHttpx:
    async def test_body_bytes_then_closed(self) -> None:
        stream = ClosingStream([b"data: {", b'"a": 1}\n\n'])
        response = await open_response(200, stream)
        assert await collect(from_httpx(response) | provider_events.pipe()) == [{"a": 1}]
        assert stream.closed
        assert response.is_closed

    async def test_closed_when_the_consumer_stops_early(self) -> None:
        stream = ClosingStream([b"one", b"two", b"three"])
        response = await open_response(200, stream)
        assert await first(from_httpx(response)) == b"one"
        assert stream.closed

    async def test_error_status_raises_provider_error(self) -> None:
        body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
        stream = ClosingStream([json.dumps(body).encode()])
        response = await open_response(429, stream)
        with pytest.raises(
            ProviderError,
            match=re.escape(
                "HTTP 429 from http://127.0.0.1/v1/chat/completions:"
                " provider error (rate_limit_exceeded): Rate limit"
            ),
        ):
            await collect(from_httpx(response))
        assert stream.closed

    async def test_error_status_with_a_text_body(self) -> None:
        response = await open_response(502, ClosingStream([b"Bad gateway"]))
        with pytest.raises(ProviderError, match=r"HTTP 502 .*: Bad gateway") as caught:
            await collect(from_httpx(response))
        assert (caught.value.status, caught.value.payload) == (502, {"body": "Bad gateway"})


class FakeSDKStream:
    def __init__(self, items: list[Any], *, async_close: bool = True) -> None:
        self.items = items
        self.closed = False
        self.async_close = async_close

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        for item in self.items:
            yield item

    def close(self) -> Any:
        if self.async_close:
            return self._close()
        self.closed = True
        return None

    async def _close(self) -> None:
        self.closed = True


def openai_chunks(path: Path) -> list[Any]:
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    return [construct_type(type_=ChatCompletionChunk, value=payload) for payload in payloads(path)]


class TestSDK:
    @pytest.mark.parametrize(
        "path",
        [
            path
            for folder in ("openai_chat", "openai_compatible")
            for path in sorted((FIXTURES / folder).glob("*.sse"))
            if "error_event" not in path.name  # these end with an in-band error
        ],
        ids=lambda path: path.name,
    )
    def test_openai_chunks_are_the_wire_dicts(self, path: Path) -> None:
        """openai builds objects without validation, as in a real stream; extra fields are kept."""
        assert [sdk_object_to_dict(chunk) for chunk in openai_chunks(path)] == payloads(path)

    @pytest.mark.parametrize(
        "path", sorted((FIXTURES / "openai_responses").glob("*.sse")), ids=lambda p: p.name
    )
    def test_openai_responses_events_are_the_wire_dicts(self, path: Path) -> None:
        from openai._models import construct_type
        from openai.types.responses import ResponseStreamEvent

        events = [construct_type(type_=ResponseStreamEvent, value=payload) for payload in payloads(path)]
        assert [sdk_object_to_dict(event) for event in events] == payloads(path)

    @pytest.mark.parametrize(
        "path", sorted((FIXTURES / "anthropic").glob("*.sse")), ids=lambda path: path.name
    )
    def test_anthropic_events_are_the_wire_dicts(self, path: Path) -> None:
        from anthropic._models import construct_type
        from anthropic.types import RawMessageStreamEvent

        events = [construct_type(type_=RawMessageStreamEvent, value=payload) for payload in payloads(path)]
        assert [sdk_object_to_dict(event) for event in events] == payloads(path)

    @pytest.mark.parametrize(
        "path",
        [path for path in sorted((FIXTURES / "gemini").iterdir()) if "interactions" not in path.name],
        ids=lambda path: path.name,
    )
    def test_google_genai_responses_are_the_wire_dicts(self, path: Path) -> None:
        """Built as google-genai builds stream chunks; bytes (thoughtSignature) come back as standard base64.

        Fields this google-genai version drops while parsing (``finishMessage``, ``createTime`` on the
        Gemini API path) cannot come back; everything it kept must equal the wire.
        """
        from google.genai import models, types

        for payload in payloads(path):
            converted = models._GenerateContentResponse_from_mldev(payload)
            response = types.GenerateContentResponse._from_response(response=converted, kwargs={})
            response.sdk_http_response = types.HttpResponse(headers={"x": "y"})
            assert_subset(sdk_object_to_dict(response), payload)

    async def test_from_sdk_converts_and_closes(self) -> None:
        path = FIXTURES / "openai_chat" / "openai-python_text_only_gpt4o.sse"
        stream = FakeSDKStream(openai_chunks(path))
        assert await collect(from_sdk(stream)) == payloads(path)
        assert stream.closed

    @pytest.mark.parametrize("async_close", [True, False])
    async def test_from_sdk_closes_when_the_consumer_stops_early(self, async_close: bool) -> None:
        stream = FakeSDKStream([{"a": 1}, {"b": 2}], async_close=async_close)
        assert await first(from_sdk(stream)) == {"a": 1}
        assert stream.closed

    async def test_from_sdk_rejects_other_objects(self) -> None:
        with pytest.raises(StreamDecodeError, match=r"a source item is a int: expected bytes"):
            await collect(from_sdk(FakeSDKStream([1])))


def assert_subset(dumped: Any, wire: Any, path: str = "") -> None:
    if isinstance(dumped, dict):
        assert isinstance(wire, dict), path
        for key, value in dumped.items():
            assert key in wire, f"{path}/{key} is not in the wire payload"
            assert_subset(value, wire[key], f"{path}/{key}")
        missing = set(wire) - set(dumped) - {"finishMessage", "createTime"}
        assert not missing, f"{path}: lost {missing}"
    elif isinstance(dumped, list):
        assert isinstance(wire, list)
        assert len(dumped) == len(wire), path
        for index, (left, right) in enumerate(zip(dumped, wire, strict=True)):
            assert_subset(left, right, f"{path}[{index}]")
    else:
        assert dumped == wire, path


class TestDicts:
    async def test_from_a_list_and_from_an_async_iterable(self) -> None:
        items = [{"a": 1}, {"b": 2}]
        assert await collect(from_dicts(items)) == items
        stream = FakeSDKStream(items)
        assert await collect(from_dicts(stream)) == items
        assert stream.closed


class TestIteration:
    """Inside its stream's context each source is its generator itself (no per-item wrapper), and outside
    it aiostream's streamer, which warns."""

    @pytest.mark.parametrize(
        "make",
        [
            lambda tmp_path: from_bytes(b"abcd", chunk_size=2),
            lambda tmp_path: from_file(tmp_path / "body", chunk_size=2),
            lambda tmp_path: from_dicts([{"a": 1}, {"b": 2}]),
            lambda tmp_path: from_sdk(FakeSDKStream([{"a": 1}, {"b": 2}])),
        ],
        ids=["from_bytes", "from_file", "from_dicts", "from_sdk"],
    )
    async def test_in_its_context_the_generator_itself(self, make: Any, tmp_path: Path) -> None:
        (tmp_path / "body").write_bytes(b"abcd")
        async with make(tmp_path).stream() as streamer:
            iterator = aiter(streamer)
            assert inspect.isasyncgen(iterator)
            assert len([item async for item in iterator]) == 2

    async def test_from_httpx_in_its_context_the_generator_itself(self) -> None:
        response = await open_response(200, ClosingStream([b"one", b"two"]))
        async with from_httpx(response).stream() as streamer:
            iterator = aiter(streamer)
            assert inspect.isasyncgen(iterator)
            assert [chunk async for chunk in iterator] == [b"one", b"two"]

    async def test_outside_its_context_aiostreams_streamer_warns(self) -> None:
        streamer = streamcontext(from_dicts([{"a": 1}]))
        with pytest.warns(UserWarning, match="iterated outside of its context"):
            assert [item async for item in streamer] == [{"a": 1}]
