"""Anthropic content blocks kept apart through the whole pipeline: repeated call ids, adjacent reasoning
blocks, server-tool results and citations, on hand-written streams and on every recording."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.convert.anthropic import AnthropicConverter
from pipeline import process
from pipeline.errors import ConverterError
from pipeline.models import (
    ChunkResponse,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolCallDelta,
    ToolInvocation,
)
from pipeline.testing import collect, counter_segment_ids, replay, sequential_call_ids
from tests.converter_cases import load_events, run_converter, sequential_ids
from tests.operators.convert.test_anthropic import (
    RECORDINGS,
    block_delta,
    block_start,
    block_stop,
    json_delta,
    text,
    tool,
)

pytestmark = pytest.mark.anyio


async def events_of(events: list[dict[str, Any]]) -> list[Any]:
    async def source() -> AsyncIterator[dict[str, Any]]:
        for event in events:
            yield event

    return await collect(
        process(
            source(),
            provider="anthropic",
            id_factory=sequential_call_ids,
            segment_ids=counter_segment_ids(),
        )
    )


def segments(items: list[Any], event_type: SegmentEventType) -> list[SegmentEvent]:
    return [item for item in items if isinstance(item, SegmentEvent) and item.event_type is event_type]


def invocations(items: list[Any]) -> list[ToolInvocation]:
    return [item for item in items if isinstance(item, ToolInvocation)]


# --------------------------------------------------------------------------------------------------
# Two calls with one provider id


def test_a_block_index_used_again_after_its_stop_is_a_new_call() -> None:
    chunks = run_converter(
        AnthropicConverter(id_factory=sequential_ids),
        [
            tool(0, "toolu_1", "a"),
            json_delta(0, '{"x": 1}'),
            block_stop(0),
            tool(0, "toolu_1", "b"),
            json_delta(0, '{"y": 2}'),
            block_stop(0),
        ],
    )
    assert chunks == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "toolu_1", "a")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"x": 1}')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "toolu_1", "b")]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, arguments_delta='{"y": 2}')]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, finished=True)]),
    ]


@pytest.mark.parametrize("second_block", [0, 1], ids=["same-block-index", "next-block-index"])
async def test_two_calls_with_the_same_id_give_two_invocations_through_process(second_block: int) -> None:
    items = await events_of(
        [
            tool(0, "toolu_1", "a"),
            json_delta(0, '{"x": 1}'),
            block_stop(0),
            tool(second_block, "toolu_1", "b"),
            json_delta(second_block, '{"y": 2}'),
            block_stop(second_block),
        ]
    )
    assert [(call.id, call.name, call.arguments, call.error) for call in invocations(items)] == [
        ("toolu_1", "a", {"x": 1}, None),
        ("toolu_1_2", "b", {"y": 2}, None),
    ]
    assert segments(items, SegmentEventType.END)[1].metadata == {
        "tool_name": "b",
        "call_id": "toolu_1_2",
        "provider_call_id": "toolu_1",
        "arguments": {"y": 2},
    }


# --------------------------------------------------------------------------------------------------
# Adjacent reasoning blocks


async def test_adjacent_reasoning_blocks_are_separate_segments_each_with_its_own_signature() -> None:
    items = await events_of(
        [
            block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            block_delta(0, {"type": "thinking_delta", "thinking": "first"}),
            block_delta(0, {"type": "signature_delta", "signature": "sig-1"}),
            block_stop(0),
            block_start(1, {"type": "redacted_thinking", "data": "opaque"}),
            block_stop(1),
            # a re-serialising client that left the signature out: the block still ends at its stop
            block_start(2, {"type": "thinking", "thinking": ""}),
            block_delta(2, {"type": "thinking_delta", "thinking": "third"}),
            block_stop(2),
            block_start(3, {"type": "thinking", "thinking": ""}),
            block_delta(3, {"type": "thinking_delta", "thinking": "fourth"}),
            block_delta(3, {"type": "signature_delta", "signature": "sig-4"}),
            block_stop(3),
            block_start(4, {"type": "text", "text": ""}),
            text(4, "answer"),
            block_stop(4),
        ]
    )
    assert [event.to_dict() for event in items if isinstance(event, SegmentEvent)] == [
        SegmentEvent.start("reasoning_0", SegmentType.REASONING).to_dict(),
        SegmentEvent.content("reasoning_0", "first").to_dict(),
        SegmentEvent.end("reasoning_0", {"signature": "sig-1"}).to_dict(),
        SegmentEvent.start("reasoning_1", SegmentType.REASONING).to_dict(),
        SegmentEvent.end("reasoning_1", {"encrypted_content": "opaque"}).to_dict(),
        SegmentEvent.start("reasoning_2", SegmentType.REASONING).to_dict(),
        SegmentEvent.content("reasoning_2", "third").to_dict(),
        SegmentEvent.end("reasoning_2").to_dict(),
        SegmentEvent.start("reasoning_3", SegmentType.REASONING).to_dict(),
        SegmentEvent.content("reasoning_3", "fourth").to_dict(),
        SegmentEvent.end("reasoning_3", {"signature": "sig-4"}).to_dict(),
        SegmentEvent.start("text_4", SegmentType.TEXT).to_dict(),
        SegmentEvent.content("text_4", "answer").to_dict(),
        SegmentEvent.end("text_4").to_dict(),
    ]


# --------------------------------------------------------------------------------------------------
# Every recording through the whole pipeline against a naive reading of its blocks


RESULT_SUFFIX = "_tool_result"
CALL_BLOCKS = {"tool_use", "server_tool_use", "mcp_tool_use"}


def block_reference(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Per content block, read off the whole event list: reasoning blocks, calls, results, citations."""
    blocks: dict[int, dict[str, Any]] = {}
    order: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "content_block_start":
            block = {**event["content_block"], "pieces": [], "sig": [], "cites": []}
            block["cites"] += block.get("citations") or []
            blocks[event["index"]] = block
            order.append(block)
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            if delta["type"] == "thinking_delta":
                block["pieces"].append(delta["thinking"])
            elif delta["type"] == "signature_delta":
                block["sig"].append(delta["signature"])
            elif delta["type"] == "text_delta":
                block["pieces"].append(delta["text"])
            elif delta["type"] == "citations_delta":
                block["cites"].append(delta["citation"])
    reasoning = []
    for block in order:
        if block["type"] == "thinking":
            body = block.get("thinking", "") + "".join(block["pieces"])
            signature = "".join(block["sig"]) or block.get("signature") or None
            if body or signature:
                reasoning.append({"text": body, "signature": signature})
        elif block["type"] == "redacted_thinking":
            reasoning.append({"text": "", "encrypted_content": block["data"]})
    names = {block["id"]: block["name"] for block in order if block["type"] in CALL_BLOCKS}
    results = [
        {
            "call_id": block["tool_use_id"],
            "tool_name": names.get(block["tool_use_id"]),
            "result_type": block["type"],
            "result": block.get("content"),
        }
        for block in order
        if block["type"].endswith(RESULT_SUFFIX)
    ]
    text_length = 0
    citations = []
    for block in order:
        if block["type"] == "text":
            citations += [(text_length, cite) for cite in block["cites"]]
            text_length += len(block.get("text", "") + "".join(block["pieces"]))
    return {
        "reasoning": reasoning,
        "calls": [block["id"] for block in order if block["type"] in CALL_BLOCKS],
        "results": results,
        "citations": citations,
    }


def pipeline_summary(items: list[Any]) -> dict[str, Any]:
    """The same facts gathered from the pipeline's segment events."""
    kinds: dict[str, str] = {}
    content: dict[str, list[str]] = {}
    reasoning, results, citations = [], [], []
    text_length = 0
    for item in items:
        if not isinstance(item, SegmentEvent):
            continue
        if item.event_type is SegmentEventType.START:
            kinds[item.segment_id] = str(item.segment_type)
            content[item.segment_id] = []
        elif item.event_type is SegmentEventType.CONTENT:
            content[item.segment_id].append(item.payload["delta"])
        elif item.event_type is SegmentEventType.END:
            kind, meta = kinds[item.segment_id], item.metadata
            if kind == "reasoning":
                entry: dict[str, Any] = {"text": "".join(content[item.segment_id])}
                entry.update({key: meta[key] for key in ("signature", "encrypted_content") if key in meta})
                if "encrypted_content" not in entry:
                    entry.setdefault("signature", None)
                reasoning.append(entry)
            elif kind == "tool_result":
                assert meta["provider_executed"] is True
                assert json.loads("".join(content[item.segment_id]) or "null") == meta["result"]
                results.append(
                    {key: meta.get(key) for key in ("call_id", "tool_name", "result_type", "result")}
                )
            elif kind == "text":
                citations += [
                    (text_length + cite["offset"], cite["citation"]) for cite in meta.get("citations", [])
                ]
                text_length += len("".join(content[item.segment_id]))
    return {
        "reasoning": reasoning,
        "calls": [call.id for call in invocations(items)],
        "results": results,
        "citations": citations,
    }


@pytest.mark.parametrize("path", RECORDINGS, ids=[path.name for path in RECORDINGS])
async def test_recording_blocks_through_the_pipeline(path: Path) -> None:
    expected = block_reference(load_events(path))
    assert pipeline_summary(await replay(path, provider="anthropic", chunk_sizes=[7, 1, 64])) == expected


async def test_the_web_search_recording_surfaces_the_call_its_result_and_every_citation() -> None:
    path = RECORDINGS[0].parent / "vercel_claude-sonnet-4_web_search_citations.jsonl"
    summary = pipeline_summary(await replay(path, provider="anthropic"))
    (result,) = summary["results"]
    assert result["call_id"] == "srvtoolu_01Bj5uzzLcYG5hfueSLcDH8k"
    assert result["tool_name"] == "web_search"
    assert [entry["type"] for entry in result["result"]] == ["web_search_result"] * len(result["result"])
    assert len(summary["citations"]) == sum(
        line.count('"citations_delta"') for line in path.read_text().splitlines()
    )
    assert all(cite["type"] == "web_search_result_location" for _, cite in summary["citations"])


async def test_a_non_string_delta_type_fails_naming_the_field_after_what_came_before() -> None:
    received: list[Any] = []

    async def source() -> AsyncIterator[dict[str, Any]]:
        yield block_start(0, {"type": "text", "text": ""})
        yield text(0, "kept")
        yield block_delta(0, {"type": ["text_delta"], "text": "lost?"})

    async def consume() -> None:
        options: dict[str, Any] = {"provider": "anthropic", "segment_ids": counter_segment_ids()}
        async with process(source(), **options).stream() as items:
            async for item in items:
                received.append(item)

    with pytest.raises(
        ConverterError,
        match=r"event 2 \(content_block_delta\): field 'delta.type': Expected `str`, got `array`",
    ):
        await consume()
    assert [item.to_dict() for item in received if isinstance(item, SegmentEvent)][:2] == [
        SegmentEvent.start("text_0", SegmentType.TEXT).to_dict(),
        SegmentEvent.content("text_0", "kept").to_dict(),
    ]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(min_value=1, max_value=97), min_size=1, max_size=6))
def test_any_byte_chunking_of_the_citations_recording_gives_the_same_blocks(sizes: list[int]) -> None:
    path = RECORDINGS[0].parent / "vercel_claude-sonnet-4_web_search_citations.jsonl"
    items = anyio.run(lambda: replay(path, provider="anthropic", chunk_sizes=sizes))
    assert pipeline_summary(items) == block_reference(load_events(path))
