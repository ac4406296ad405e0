"""OpenAI Responses items through the whole pipeline: reasoning items with their ids, server-side calls with
their results, citations, duplicated item announcements, and SDK objects giving the same events as bytes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import process
from pipeline.models import ResponseEnd, SegmentEvent, SegmentEventType, SegmentType, ToolInvocation
from pipeline.testing import collect, counter_segment_ids, replay, sequential_call_ids
from tests.converter_cases import load_events
from tests.operators.convert.test_openai_responses import (
    FIXTURES,
    added,
    completed,
    created,
    done,
    function_call,
    text_delta,
)

pytestmark = pytest.mark.anyio

WEB_SEARCH = FIXTURES / "vercel_gpt-5-mini_web_search_calls_url_citations.jsonl"
CODE_INTERPRETER = FIXTURES / "vercel_gpt-5-nano_code_interpreter_calls_file_citation.jsonl"
FILE_SEARCH = FIXTURES / "vercel_gpt-5-mini_file_search_call_file_citation.jsonl"


async def run(events: list[Any]) -> list[Any]:
    async def source() -> AsyncIterator[Any]:
        for event in events:
            yield event

    options: dict[str, Any] = {"id_factory": sequential_call_ids, "segment_ids": counter_segment_ids()}
    return await collect(process(source(), provider="openai-responses", **options))


def of_type(items: list[Any], event_type: SegmentEventType) -> list[SegmentEvent]:
    return [item for item in items if isinstance(item, SegmentEvent) and item.event_type is event_type]


def ended(items: list[Any], segment_type: SegmentType) -> list[SegmentEvent]:
    """The END events of the segments of one type."""
    kinds = {event.segment_id: event.segment_type for event in of_type(items, SegmentEventType.START)}
    return [
        event for event in of_type(items, SegmentEventType.END) if kinds[event.segment_id] is segment_type
    ]


@pytest.mark.parametrize("path", [WEB_SEARCH, CODE_INTERPRETER, FILE_SEARCH], ids=lambda path: path.name)
async def test_server_calls_results_reasoning_items_and_citations_of_a_recording(path: Path) -> None:
    events = load_events(path)
    finished = [event["item"] for event in events if event["type"] == "response.output_item.done"]
    server_items = [item for item in finished if item["type"].endswith("_call")]
    reasoning_ids = [item["id"] for item in finished if item["type"] == "reasoning"]
    annotations = [event["annotation"] for event in events if event["type"].endswith("annotation.added")]
    assert server_items  # the recording has what this test is about
    assert annotations

    items = await replay(path, provider="openai-responses", chunk_sizes=[5, 1, 200])

    reasoning = ended(items, SegmentType.REASONING)
    assert [event.metadata["reasoning_id"] for event in reasoning] == reasoning_ids
    starts = of_type(items, SegmentEventType.START)
    assert [
        event.metadata["reasoning_id"] for event in starts if event.segment_type is SegmentType.REASONING
    ] == reasoning_ids

    invocations = [item for item in items if isinstance(item, ToolInvocation)]
    assert [(call.id, call.provider_executed, call.error) for call in invocations] == [
        (item["id"], True, None) for item in server_items
    ]
    for call, item in zip(invocations, server_items, strict=True):
        if item["type"] == "code_interpreter_call":
            assert call.arguments == {"code": item["code"], "container_id": item["container_id"]}
        elif item["type"] == "file_search_call":
            assert call.arguments == {"queries": item["queries"]}
        else:
            assert call.arguments == {k: v for k, v in item["action"].items() if k != "sources"}

    results = ended(items, SegmentType.TOOL_RESULT)
    expected_results = [
        item.get("outputs", item.get("results", item.get("action", {}).get("sources")))
        for item in server_items
    ]
    assert [event.metadata["call_id"] for event in results] == [item["id"] for item in server_items]
    assert [event.metadata["result"] for event in results] == expected_results
    assert all(event.metadata["provider_executed"] is True for event in results)

    (text,) = ended(items, SegmentType.TEXT)
    assert [cite["citation"] for cite in text.metadata["citations"]] == annotations
    end = items[-1]
    assert isinstance(end, ResponseEnd)
    assert end.finish_reason == "stop"


async def test_a_duplicated_output_item_added_gives_one_segment_per_item() -> None:
    call = function_call("fc_1", "call_a", "add")
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    items = await run(
        [
            created(),
            added(0, reasoning),
            added(0, reasoning),
            done(0, reasoning | {"encrypted_content": "enc"}),
            added(1, call),
            added(1, call),
            done(1, call | {"arguments": '{"a": 1}'}),
            added(2, {"type": "message", "id": "msg_1", "content": []}),
            added(2, {"type": "message", "id": "msg_1", "content": []}),
            text_delta("ok", output_index=2),
            completed(),
        ]
    )
    starts = [event.segment_id for event in of_type(items, SegmentEventType.START)]
    assert starts == ["reasoning_0", "call_a", "text_1"]
    assert [call.id for call in items if isinstance(call, ToolInvocation)] == ["call_a"]
    assert of_type(items, SegmentEventType.END)[0].metadata == {
        "reasoning_id": "rs_1",
        "encrypted_content": "enc",
    }


async def test_sdk_objects_and_raw_events_give_the_same_created() -> None:
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    events = load_events(WEB_SEARCH)
    # what the SDK's stream yields: objects built without validation, as its own streaming does
    objects: list[Any] = [construct_type(type_=ResponseStreamEvent, value=event) for event in events]
    assert isinstance(objects[0].response.created_at, float)
    from_dicts, from_objects = await run(events), await run(objects)
    assert (
        from_objects[-1].metadata["created"]
        == from_dicts[-1].metadata["created"]
        == events[0]["response"]["created_at"]
    )
    assert type(from_objects[-1].metadata["created"]) is int
    # equal as data (an SDK object lists an annotation's keys in its model's order, not the wire's)
    assert [item.to_dict() for item in from_objects] == [item.to_dict() for item in from_dicts]
