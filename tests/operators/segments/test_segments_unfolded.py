"""Segments without folding (``process(fold=False)``): the same segment stream, arguments never built, no
invocations; and the caps that keep a long call's memory flat."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.arguments._jsonstream import JSONStreamParser
from operators.arguments.splitter import ArgumentSplitter
from operators.segments import RAW_KEPT, SegmentEmitter
from pipeline import ConfigurationError
from pipeline.compose import process
from pipeline.models import (
    ArgumentDelta,
    ArgumentValue,
    ChunkResponse,
    PipelineEvent,
    SegmentEvent,
    SegmentEventType,
    TextHead,
    TextJoiner,
    ToolCallDelta,
    ToolInvocation,
)


def chat_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def call_chunks(name: str, arguments: str) -> list[dict[str, Any]]:
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}
    chunks = [chat_chunk({"role": "assistant", "content": "Writing."}), chat_chunk({"tool_calls": [first]})]
    for start in range(0, len(arguments), 7):
        piece = {"index": 0, "function": {"arguments": arguments[start : start + 7]}}
        chunks.append(chat_chunk({"tool_calls": [piece]}))
    chunks.append(chat_chunk({}, "tool_calls"))
    return chunks


async def events_of(chunks: list[dict[str, Any]], **options: Any) -> list[PipelineEvent]:
    counter = iter(range(100))
    stream = process(chunks, provider="openai", segment_ids=lambda kind: f"s{next(counter)}", **options)
    return [event async for event in stream]


def without_values(event: PipelineEvent) -> Any:
    """``event`` as a segment-only consumer sees it: no ARGUMENT value events, no arguments at END."""
    if not isinstance(event, SegmentEvent):
        return event
    if event.event_type is SegmentEventType.ARGUMENT and "value" in event.payload:
        return None
    if event.event_type is SegmentEventType.END and event.metadata:
        kept = {key: value for key, value in event.metadata.items() if key not in ("arguments", "path")}
        return (event.segment_id, kept)
    return event


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["write_file", "get_weather"])
async def test_without_folding_the_segments_stream_the_same_and_no_invocation_is_made(name: str) -> None:
    arguments = json.dumps({"path": "a.py", "content": 'print("é")\n' * 20, "days": [1, 2]})
    folded = await events_of(call_chunks(name, arguments))
    unfolded = await events_of(call_chunks(name, arguments), fold=False)
    assert not any(isinstance(event, ToolInvocation) for event in unfolded)
    expected = [without_values(event) for event in folded if not isinstance(event, ToolInvocation)]
    assert [without_values(event) for event in unfolded] == [e for e in expected if e is not None]


@pytest.mark.anyio
async def test_without_folding_a_broken_call_still_ends_with_its_error() -> None:
    events = await events_of(call_chunks("get_weather", '{"city": "Par'), fold=False)
    (end,) = [e for e in events if isinstance(e, SegmentEvent) and e.event_type is SegmentEventType.END][1:]
    assert end.metadata["error"]["kind"] == "truncated"
    assert end.metadata["error"]["raw"] == '{"city": "Par'
    assert "arguments" not in end.metadata


def test_tools_need_folding() -> None:
    with pytest.raises(ConfigurationError, match="fold=True"):
        process([], tools={}, fold=False)


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=10,
    ),
    st.integers(1, 9),
)
def test_a_parser_that_keeps_no_values_streams_the_same_deltas(value: Any, size: int) -> None:
    text = json.dumps(value)
    pieces = [text[start : start + size] for start in range(0, len(text), size)]
    kept, streamed = JSONStreamParser(), JSONStreamParser(keep_values=False)
    kept_events = [e for piece in pieces for e in kept.feed(piece)] + kept.finish()
    streamed_events = [e for piece in pieces for e in streamed.feed(piece)] + streamed.finish()
    assert streamed_events == [e for e in kept_events if isinstance(e, ArgumentDelta)] + [
        ArgumentValue((), None)
    ]


def test_a_failed_call_longer_than_the_raw_cap_reports_its_first_characters() -> None:
    text = '{"content": "' + "x" * (RAW_KEPT + 10)
    splitter, emitter = ArgumentSplitter(), SegmentEmitter()
    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "c", "write_file", text[i : i + 4096])])
        for i in range(0, len(text), 4096)
    ]
    events = [e for chunk in chunks for split in splitter.feed(chunk) for e in emitter.feed(split)]
    events += [e for split in splitter.finish() for e in emitter.feed(split)]
    end = events[-1]
    assert isinstance(end, SegmentEvent)
    error = end.metadata["error"]
    assert error["kind"] == "truncated"
    assert error["raw"] == text[:RAW_KEPT]
    assert error["offset"] == len(text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "é", "\U0001f600", "\ud800", "xyz", ""]), max_size=3000),
    st.none() | st.integers(0, 4000),
)
def test_a_joiner_gives_its_pieces_joined_up_to_its_limit(pieces: list[str], limit: int | None) -> None:
    joiner = TextJoiner() if limit is None else TextHead(limit)
    for piece in pieces:
        joiner.append(piece)
    whole = "".join(pieces)
    kept = whole if limit is None else whole[:limit]
    assert joiner.length == len(whole)
    assert joiner.text() == kept
    assert joiner.text() == kept  # asking again gives the same
    for piece in pieces:  # and it goes on from where it was
        joiner.append(piece)
    twice = whole * 2 if limit is None else (whole * 2)[:limit]
    assert joiner.length == 2 * len(whole)
    assert joiner.text() == twice
    assert joiner.take() == twice
    assert not joiner
    assert joiner.length == 0
