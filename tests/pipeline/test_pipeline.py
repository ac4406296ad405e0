"""The whole pipeline through ``process``: sources of every kind, limits, cancellation, validation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pydantic
import pytest

from pipeline import (
    ConfigurationError,
    PipelineEvent,
    ProviderError,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    ToolInvocation,
    process,
)
from pipeline.testing import collect, counter_segment_ids, sequential_call_ids, summarize
from tests.conftest import FIXTURES
from tests.guards import GUARD

PARALLEL = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"


def chat_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def call_chunks(name: str, arguments: str, size: int = 5) -> list[dict[str, Any]]:
    first = {
        "tool_calls": [
            {"index": 0, "id": "call_x", "type": "function", "function": {"name": name, "arguments": ""}}
        ]
    }
    chunks = [chat_chunk(first)]
    for start in range(0, len(arguments), size):
        piece = {"tool_calls": [{"index": 0, "function": {"arguments": arguments[start : start + size]}}]}
        chunks.append(chat_chunk(piece))
    chunks.append(chat_chunk({}, "tool_calls"))
    return chunks


async def items(values: list[Any]) -> AsyncIterator[Any]:
    for value in values:
        yield value


def invocations(events: list[PipelineEvent]) -> list[ToolInvocation]:
    return [event for event in events if isinstance(event, ToolInvocation)]


@pytest.mark.anyio
async def test_bytes_dicts_and_sdk_objects_give_the_same_events() -> None:
    from openai.types.chat import ChatCompletionChunk

    from operators.adapter.sse import EventParser, SSEDecoder

    data = PARALLEL.read_bytes()
    decoder, parser = SSEDecoder(), EventParser()
    dicts = [payload for event in [*decoder.feed(data), *decoder.finish()] for payload in parser.feed(event)]
    objects = [ChatCompletionChunk.model_validate(payload) for payload in dicts]

    from_bytes = await collect(
        process(items([data]), id_factory=sequential_call_ids, segment_ids=counter_segment_ids())
    )
    from_dicts = await collect(
        process(items(dicts), id_factory=sequential_call_ids, segment_ids=counter_segment_ids())
    )
    from_objects = await collect(
        process(items(objects), id_factory=sequential_call_ids, segment_ids=counter_segment_ids())
    )
    assert [event.to_dict() for event in from_dicts] == [event.to_dict() for event in from_bytes]
    assert [event.to_dict() for event in from_objects] == [event.to_dict() for event in from_bytes]
    assert [invocation.name for invocation in invocations(from_bytes)] == [
        "GetWeatherArgs",
        "get_stock_price",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", [bytearray, memoryview])
@pytest.mark.parametrize("options", [{}, {"provider": "openai", "framing": "sse"}, {"provider": "text"}])
async def test_bytearray_and_memoryview_reads_give_the_events_of_bytes(
    kind: type[bytearray | memoryview], options: dict[str, Any]
) -> None:
    data = PARALLEL.read_bytes()
    reads = [data[start : start + 37] for start in range(0, len(data), 37)]

    async def run(chunks: list[Any]) -> list[dict[str, Any]]:
        events = await collect(
            process(
                items(chunks), id_factory=sequential_call_ids, segment_ids=counter_segment_ids(), **options
            )
        )
        return [event.to_dict() for event in events]

    expected = await run(reads)
    assert len(expected) > 10
    assert await run([kind(read) for read in reads]) == expected


@pytest.mark.anyio
async def test_a_call_over_the_size_cap_is_too_large_and_the_stream_goes_on() -> None:
    chunks = call_chunks("write_file", json.dumps({"path": "a", "content": "x" * 200}))
    chunks.insert(-1, chat_chunk({"content": "still here"}))
    events = await collect(process(items(chunks), provider="openai", max_argument_size=64))
    [invocation] = invocations(events)
    assert invocation.error is not None
    assert invocation.error.kind == "too_large"
    assert invocation.arguments == {"path": "a"}  # what was complete before the cap
    assert summarize(events).text == "still here"
    assert isinstance(events[-1], ResponseEnd)


@pytest.mark.anyio
async def test_arguments_are_validated_against_the_tool_schema() -> None:
    class Weather(pydantic.BaseModel):
        city: str

    events = await collect(
        process(
            items(call_chunks("get_weather", '{"town": "Paris"}')),
            provider="openai",
            tools={"get_weather": Weather},
        )
    )
    [invocation] = invocations(events)
    assert invocation.error is not None
    assert invocation.error.kind == "invalid_arguments"
    assert "city" in invocation.error.message


@pytest.mark.anyio
async def test_the_invocation_comes_before_the_end_of_the_response() -> None:
    chunks = call_chunks("get_weather", '{"city": "Paris"}')
    chunks.insert(-1, chat_chunk({"content": "more text after the call"}))
    events = await collect(process(items(chunks), provider="openai"))
    kinds = [type(event).__name__ for event in events]
    assert kinds.index("ToolInvocation") < max(
        position
        for position, event in enumerate(events)
        if isinstance(event, SegmentEvent) and event.event_type is SegmentEventType.CONTENT
    )


@pytest.mark.anyio
async def test_stopping_early_closes_the_source_at_once_and_leaves_no_task() -> None:
    closed = anyio.Event()
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        try:
            yield b'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
            while True:
                pulled += 1
                yield b'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "b"}}]}\n\n'
        finally:
            closed.set()

    import asyncio

    before = asyncio.all_tasks()
    with anyio.fail_after(GUARD):
        async with process(endless()).stream() as events:
            async for event in events:
                if isinstance(event, SegmentEvent) and event.event_type is SegmentEventType.CONTENT:
                    break
        assert closed.is_set()
    assert pulled <= 1
    assert asyncio.all_tasks() == before


@pytest.mark.anyio
async def test_a_provider_error_comes_after_everything_before_it() -> None:
    chunks = [
        chat_chunk({"content": "partial answer"}),
        {"error": {"message": "overloaded", "type": "server_error"}},
    ]
    received: list[PipelineEvent] = []

    async def consume() -> None:
        async with process(items(chunks), provider="openai").stream() as events:
            async for event in events:
                received.append(event)

    with pytest.raises(ProviderError, match="overloaded"):
        await consume()
    assert summarize(received).text == "partial answer"


@pytest.mark.anyio
async def test_an_unknown_provider_is_refused_before_reading() -> None:
    with pytest.raises(ConfigurationError, match="unknown provider 'nope'"):
        await collect(process(items([b"data: {}\n\n"]), provider="nope"))  # type: ignore[arg-type]  # the typo mypy catches


@pytest.mark.anyio
@pytest.mark.parametrize("choice", [0, 1, 2])
async def test_choice_picks_one_of_n_choices(choice: int) -> None:
    path = FIXTURES / "openai_chat" / "openai-python_multiple_choices_n3_gpt4o.sse"
    expected = "".join(
        payload_choice["delta"].get("content") or ""
        for line in path.read_text().splitlines()
        if line.startswith("data: {")
        for payload_choice in json.loads(line.removeprefix("data: "))["choices"]
        if payload_choice["index"] == choice
    )
    events = await collect(process(items([path.read_bytes()]), choice=choice))
    assert expected
    assert summarize(events).text == expected
