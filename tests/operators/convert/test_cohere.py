"""Cohere v2 chat converter: exact chunks for hand-written streams, and every recorded stream checked
against a deliberately naive reference computed from its raw events."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter import decode_jsonl, sse_events
from operators.convert.cohere import CohereConverter, convert_cohere
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta
from tests.conftest import TESTS
from tests.converter_cases import (
    Event,
    chunked_bytes,
    collect,
    fold_calls,
    iterate,
    load_events,
    run_converter,
    sequential_ids,
)
from tests.core_runs import each_item

FIXTURES = TESTS / "fixtures" / "cohere"
FIXTURE_FILES = sorted(FIXTURES.iterdir())


def convert(events: Iterable[Mapping[str, Any]]) -> list[ChunkResponse]:
    return run_converter(CohereConverter(id_factory=sequential_ids), events)


def message(**fields: Any) -> dict[str, Any]:
    return {"message": fields}


def start(message_id: str = "msg_1") -> Event:
    return {"id": message_id, "type": "message-start", "delta": message(role="assistant", content=[])}


def content_delta(text: str, index: int = 0) -> Event:
    return {"type": "content-delta", "index": index, "delta": message(content={"text": text})}


def plan_delta(text: str) -> Event:
    return {"type": "tool-plan-delta", "delta": message(tool_plan=text)}


def call_start(index: int, call_id: str | None, name: str, arguments: str = "") -> Event:
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    return {"type": "tool-call-start", "index": index, "delta": message(tool_calls=call)}


def call_delta(index: int | None, arguments: str) -> Event:
    event: Event = {
        "type": "tool-call-delta",
        "delta": message(tool_calls={"function": {"arguments": arguments}}),
    }
    if index is not None:
        event["index"] = index
    return event


def call_end(index: int) -> Event:
    return {"type": "tool-call-end", "index": index}


def message_end(finish_reason: str, usage: Any = None, **fields: Any) -> Event:
    delta: dict[str, Any] = {"finish_reason": finish_reason} | fields
    if usage is not None:
        delta["usage"] = usage
    return {"type": "message-end", "delta": delta}


RAW_USAGE = {
    "billed_units": {"input_tokens": 10, "output_tokens": 4},
    "tokens": {"input_tokens": 30, "output_tokens": 6},
    "cached_tokens": 20,
}
USAGE = TokenUsage(prompt_tokens=30, completion_tokens=6, total_tokens=36, cached_tokens=20)


def calls(*deltas: ToolCallDelta) -> ChunkResponse:
    return ChunkResponse(tool_calls=list(deltas))


def test_text_response() -> None:
    events = [
        start(),
        {"type": "content-start", "index": 0, "delta": message(content={"type": "text", "text": ""})},
        content_delta("Hello"),
        content_delta(" there"),
        {"type": "content-end", "index": 0},
        message_end("COMPLETE", RAW_USAGE),
    ]
    assert convert(events) == [
        ChunkResponse(metadata={"id": "msg_1"}),
        ChunkResponse(content="Hello"),
        ChunkResponse(content=" there"),
        ChunkResponse(
            is_complete=True, usage=USAGE, finish_reason="stop", metadata={"stop_reason": "COMPLETE"}
        ),
    ]


def test_tool_plan_is_reasoning_and_parallel_calls_stream_their_arguments() -> None:
    events = [
        start(),
        plan_delta("I will"),
        plan_delta(" look."),
        call_start(0, "weather_1", "weather"),
        call_delta(0, '{"city":'),
        call_delta(0, '"Paris"}'),
        call_end(0),
        call_start(1, "time_2", "time", "{}"),
        call_end(1),
        message_end("TOOL_CALL", RAW_USAGE),
    ]
    assert convert(events) == [
        ChunkResponse(metadata={"id": "msg_1"}),
        ChunkResponse(reasoning="I will"),
        ChunkResponse(reasoning=" look."),
        calls(ToolCallDelta(0, "weather_1", "weather")),
        calls(ToolCallDelta(0, arguments_delta='{"city":')),
        calls(ToolCallDelta(0, arguments_delta='"Paris"}')),
        calls(ToolCallDelta(0, finished=True)),
        calls(ToolCallDelta(1, "time_2", "time", "{}")),
        calls(ToolCallDelta(1, finished=True)),
        ChunkResponse(
            is_complete=True, usage=USAGE, finish_reason="tool_calls", metadata={"stop_reason": "TOOL_CALL"}
        ),
    ]


def test_call_positions_follow_first_appearance_and_missing_ids_are_generated() -> None:
    events = [call_start(3, None, "a"), call_start(7, "", "b"), call_delta(7, "{}"), call_delta(3, "{}")]
    assert convert(events) == [
        calls(ToolCallDelta(0, "gen_0", "a")),
        calls(ToolCallDelta(1, "gen_1", "b")),
        calls(ToolCallDelta(1, arguments_delta="{}")),
        calls(ToolCallDelta(0, arguments_delta="{}")),
    ]


def test_a_delta_without_index_belongs_to_the_last_started_call() -> None:
    events = [call_start(0, "c0", "a"), call_start(1, "c1", "b"), call_delta(None, "{}")]
    assert convert(events)[-1] == calls(ToolCallDelta(1, arguments_delta="{}"))


def test_thinking_content_is_reasoning() -> None:
    events = [
        {
            "type": "content-start",
            "index": 0,
            "delta": message(content={"type": "thinking", "thinking": "Hmm"}),
        },
        {"type": "content-delta", "index": 0, "delta": message(content={"thinking": ", yes"})},
    ]
    assert convert(events) == [ChunkResponse(reasoning="Hmm"), ChunkResponse(reasoning=", yes")]


@pytest.mark.parametrize(
    ("reason", "finish_reason"),
    [
        ("COMPLETE", "stop"),
        ("STOP_SEQUENCE", "stop"),
        ("MAX_TOKENS", "length"),
        ("TOOL_CALL", "tool_calls"),
        ("ERROR", "error"),
        ("TIMEOUT", "timeout"),
    ],
)
def test_finish_reasons_are_normalised(reason: str, finish_reason: str) -> None:
    assert convert([message_end(reason)]) == [
        ChunkResponse(is_complete=True, finish_reason=finish_reason, metadata={"stop_reason": reason})
    ]


def test_error_message_and_billed_units_when_tokens_are_absent() -> None:
    usage = {"billed_units": {"input_tokens": 3.0, "output_tokens": 2}}
    assert convert([message_end("ERROR", usage, error="overloaded")]) == [
        ChunkResponse(
            is_complete=True,
            usage=TokenUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5),
            finish_reason="error",
            metadata={"stop_reason": "ERROR", "error": "overloaded"},
        )
    ]


def test_citations_unknown_events_and_empty_deltas_give_nothing() -> None:
    events: list[Event] = [
        {
            "type": "citation-start",
            "index": 0,
            "delta": message(citations={"start": 0, "end": 4, "text": "Paris"}),
        },
        {"type": "citation-end", "index": 0},
        {"type": "debug", "delta": {}},
        content_delta(""),
        {"type": "content-end", "index": 0},
    ]
    assert convert(events) == []


def test_a_new_message_restarts_call_positions() -> None:
    events = [start("m1"), call_start(0, "a", "f"), start("m2"), call_start(0, "b", "g")]
    assert convert(events) == [
        ChunkResponse(metadata={"id": "m1"}),
        calls(ToolCallDelta(0, "a", "f")),
        ChunkResponse(metadata={"id": "m2"}),
        calls(ToolCallDelta(0, "b", "g")),
    ]


@pytest.mark.parametrize(
    ("event", "message_pattern"),
    [
        ({"type": "content-delta", "delta": {}}, "event 1 .*'delta.message'"),
        ({"type": "content-delta", "delta": message(content={"text": 5})}, "'delta.message.content.text'"),
        (
            {"type": "tool-call-start", "index": 0, "delta": message(tool_calls={"function": {}})},
            "function.name",
        ),
        (
            {
                "type": "tool-call-start",
                "index": "0",
                "delta": message(tool_calls={"function": {"name": "f"}}),
            },
            "'index'",
        ),
        (call_delta(4, "{}"), "call index 4 is not open"),
        (call_end(4), "call index 4 is not open"),
        (call_delta(None, "{}"), "'index'"),
        ({"type": "message-end", "delta": {"usage": {"tokens": {"input_tokens": "x"}}}}, "input_tokens"),
        ({"delta": {}}, "'type'"),
    ],
)
def test_malformed_events_raise_converter_error(event: Event, message_pattern: str) -> None:
    converter = CohereConverter()
    converter.feed({"type": "citation-end"})
    with pytest.raises(ConverterError, match=message_pattern) as raised:
        converter.feed(event)
    assert raised.value.event_number == 1


def test_a_call_cannot_be_started_twice_or_continued_after_its_end() -> None:
    converter = CohereConverter()
    converter.feed(call_start(0, "a", "f"))
    with pytest.raises(ConverterError, match="already started"):
        converter.feed(call_start(0, "a", "f"))
    converter.feed(call_end(0))
    with pytest.raises(ConverterError, match=r"event 3 .*not open"):
        converter.feed(call_delta(0, "{}"))


@pytest.mark.anyio
async def test_operator_yields_the_core_chunks() -> None:
    events = load_events(FIXTURE_FILES[0])
    assert await collect(convert_cohere(iterate(events), id_factory=sequential_ids)) == convert(events)


RECORDED_BYTES = {path: path.read_bytes() for path in FIXTURE_FILES}


@pytest.mark.anyio
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[path.name for path in FIXTURE_FILES])
async def test_recording_bytes_through_the_decoder_and_the_operator(path: Path) -> None:
    """The whole adapter path: raw recorded bytes in 5-byte chunks, decoded by operators.adapter.sse."""
    raw = chunked_bytes(RECORDED_BYTES[path], 5)
    events = sse_events(raw) if path.suffix == ".sse" else decode_jsonl(raw)
    chunks = await collect(events | convert_cohere.pipe(id_factory=sequential_ids))
    assert chunks == convert(load_events(path))


# -- every recording against a naive reference --------------------------------------------------------


def reference(events: list[Event]) -> dict[str, Any]:
    """The response computed the simple way from the raw events."""
    text = "".join(
        e["delta"]["message"]["content"].get("text", "") for e in events if e["type"] == "content-delta"
    )
    plan = "".join(e["delta"]["message"]["tool_plan"] for e in events if e["type"] == "tool-plan-delta")
    found: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["type"] == "tool-call-start":
            call = e["delta"]["message"]["tool_calls"]
            found[e["index"]] = {"id": call["id"], "name": call["function"]["name"], "text": ""}
        elif e["type"] == "tool-call-delta":
            found[e["index"]]["text"] += e["delta"]["message"]["tool_calls"]["function"]["arguments"]
    end = events[-1]["delta"]
    tokens = end["usage"]["tokens"]
    return {
        "id": events[0]["id"],
        "content": text,
        "reasoning": plan,
        "calls": [
            {"id": c["id"], "name": c["name"], "arguments": json.loads(c["text"]), "finished": True}
            for c in found.values()
        ],
        "finish_reason": {"COMPLETE": "stop", "TOOL_CALL": "tool_calls", "MAX_TOKENS": "length"}[
            end["finish_reason"]
        ],
        "usage": (tokens["input_tokens"], tokens["output_tokens"], end["usage"].get("cached_tokens")),
    }


def folded(chunks: list[ChunkResponse]) -> dict[str, Any]:
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    metadata: dict[str, Any] = {}
    for chunk in chunks:
        metadata.update(chunk.metadata or {})
    return {
        "id": metadata["id"],
        "content": "".join(chunk.content for chunk in chunks),
        "reasoning": "".join(chunk.reasoning or "" for chunk in chunks),
        "calls": [
            {
                "id": call.call_id,
                "name": call.name,
                "arguments": json.loads(call.arguments),
                "finished": call.finished,
            }
            for call in fold_calls(chunks)
        ],
        "finish_reason": chunks[-1].finish_reason,
        "usage": (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens),
    }


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[path.name for path in FIXTURE_FILES])
def test_recording_matches_the_naive_reference(path: Path) -> None:
    events = load_events(path)
    chunks = convert(events)
    expected = reference(events)
    assert folded(chunks) == expected
    assert expected["calls"]
    assert expected["reasoning"]
    assert [chunk.is_complete for chunk in chunks] == [False] * (len(chunks) - 1) + [True]


def test_the_tool_plan_recording_has_two_parallel_calls() -> None:
    result = reference(load_events(FIXTURES / "vercel_cohere_v2_tool_plan_then_2_parallel_tool_calls.jsonl"))
    assert [(c["id"], c["name"], c["arguments"]) for c in result["calls"]] == [
        ("weather_e8p4pn45zt0t", "weather", {"location": "San Francisco"}),
        ("cityAttractions_pyxssbwnq9fq", "cityAttractions", {"city": "San Francisco"}),
    ]
    assert result["usage"] == (1549, 95, 1504)


def delta_text(event: Event) -> str | None:
    """The text a tool-plan or tool-call delta carries, else ``None``."""
    if event["type"] == "tool-plan-delta":
        return str(event["delta"]["message"]["tool_plan"])
    if event["type"] == "tool-call-delta":
        return str(event["delta"]["message"]["tool_calls"]["function"]["arguments"])
    return None


def with_delta_text(event: Event, text: str) -> Event:
    if event["type"] == "tool-plan-delta":
        return event | {"delta": message(tool_plan=text)}
    return event | {"delta": message(tool_calls={"function": {"arguments": text}})}


def resplit(events: list[Event], cuts: list[int]) -> list[Event]:
    """Split each text-carrying delta in two at the cut chosen for it (empty halves are kept)."""
    result: list[Event] = []
    for number, event in enumerate(events):
        text = delta_text(event)
        if text is None:
            result.append(event)
            continue
        cut = cuts[number % len(cuts)] % (len(text) + 1)
        result.extend([with_delta_text(event, text[:cut]), with_delta_text(event, text[cut:])])
    return result


@settings(max_examples=40, deadline=None)
@given(path=st.sampled_from(FIXTURE_FILES), cuts=st.lists(st.integers(0, 32), min_size=1, max_size=8))
def test_any_split_of_the_deltas_folds_to_the_same_response(path: Path, cuts: list[int]) -> None:
    events = load_events(path)
    assert folded(convert(resplit(events, cuts))) == folded(convert(events))


# --------------------------------------------------------------------------------------------------
# Wrong-typed fields raise instead of being dropped or replaced


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"id": 7, "type": "message-start", "delta": message(role="assistant")}, "id"),
        (
            {
                "type": "tool-call-start",
                "index": 0,
                "delta": message(tool_calls={"id": 42, "function": {"name": "f", "arguments": ""}}),
            },
            "delta.message.tool_calls.id",
        ),
        ({"type": "message-end", "delta": {"finish_reason": 1}}, "delta.finish_reason"),
        ({"type": "message-end", "delta": {"finish_reason": "ERROR", "error": 500}}, "delta.error"),
        ({"type": "message-end", "delta": {"usage": {"tokens": [1, 2]}}}, "delta.usage.tokens"),
        ({"type": "message-end", "delta": {"usage": {"billed_units": "3"}}}, "delta.usage.billed_units"),
    ],
)
def test_wrong_typed_fields_raise_naming_them(event: Event, field: str) -> None:
    converter = CohereConverter()
    converter.feed(content_delta("kept"))
    with pytest.raises(ConverterError, match=f"event 1: field '{field}': Expected ") as raised:
        converter.feed(event)
    assert raised.value.event_number == 1


# --------------------------------------------------------------------------------------------------
# One decode: an event's bytes and its dict give the same; unknown event types; in-band errors


def outcome(converter: CohereConverter, items: Iterable[Any]) -> list[tuple[list[ChunkResponse], str | None]]:
    """What each item gives, or its error (the stream goes on after it)."""
    return each_item(converter, items, finish=False)


def as_payloads(events: Iterable[Any]) -> list[Payload]:
    return [Payload(msgspec.json.encode(event), 0) for event in events]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda path: path.name)
def test_recorded_events_as_bytes_give_what_their_dicts_give(path: Path) -> None:
    lines = [line.strip() for line in path.read_bytes().splitlines() if line.strip()]
    as_bytes = outcome(CohereConverter(id_factory=sequential_ids), [Payload(line, 0) for line in lines])
    as_dicts = outcome(CohereConverter(id_factory=sequential_ids), [json.loads(line) for line in lines])
    assert as_bytes == as_dicts
    assert any(chunks for chunks, _ in as_bytes)


MALFORMED = st.sampled_from(
    [
        {"type": "content-delta", "delta": {}},
        {"type": "content-delta", "delta": message(content={"text": 5})},
        {"type": "content-delta", "delta": message(content=[])},
        {"type": "tool-call-start", "index": "0", "delta": message(tool_calls={"function": {"name": "f"}})},
        {"type": "tool-call-start", "index": 1, "delta": message(tool_calls=[])},
        {"type": "message-end", "delta": {"usage": {"tokens": {"input_tokens": 1.5}}}},
        {"type": 5},
        {"delta": {}},
        {"type": "error", "error": {"message": "overloaded", "code": "overloaded"}},
        {"type": "future-event", "delta": {"message": {"content": "a string"}, "extra": [1, {"a": None}]}},
    ]
)
EVENTS = st.lists(
    st.one_of(
        st.builds(content_delta, st.sampled_from(["Hi", "", "é"])),
        st.builds(plan_delta, st.sampled_from(["plan", ""])),
        st.builds(call_start, st.integers(0, 2), st.sampled_from(["c", None]), st.just("f")),
        st.builds(call_delta, st.sampled_from([0, 1, None]), st.just("{}")),
        st.builds(call_end, st.integers(0, 2)),
        st.builds(message_end, st.sampled_from(["COMPLETE", "TOOL_CALL"]), st.just(RAW_USAGE)),
        st.just(start()),
        MALFORMED,
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(events=EVENTS)
def test_events_as_bytes_give_what_their_dicts_give(events: list[Event]) -> None:
    as_bytes = outcome(CohereConverter(id_factory=sequential_ids), as_payloads(events))
    assert as_bytes == outcome(CohereConverter(id_factory=sequential_ids), events)


def test_an_unknown_event_type_of_any_shape_is_skipped() -> None:
    future = {"type": "thought-delta", "index": 0, "delta": {"message": {"content": "text", "tool_calls": 3}}}
    events = [content_delta("a"), future, content_delta("b")]
    expected = [[ChunkResponse(content="a")], [], [ChunkResponse(content="b")]]
    assert [chunks for chunks, _ in outcome(CohereConverter(), as_payloads(events))] == expected


@pytest.mark.parametrize(
    ("event", "message_"),
    [
        (
            {"type": "error", "error": {"message": "overloaded", "code": "overloaded"}},
            "event 1: provider error (overloaded): overloaded",
        ),
        (
            {"type": "error", "message": "quota", "code": "too_many_requests"},
            "event 1: provider error (too_many_",
        ),
        ({"error": {"message": "bad gateway", "status_code": 502}}, "event 1: provider error: bad gateway"),
        ({"error": "upstream went away"}, "event 1: provider error: upstream went away"),
    ],
)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_an_in_band_error_raises_provider_error(event: Event, message_: str, as_bytes: bool) -> None:
    converter = CohereConverter()
    items: list[Any] = [content_delta("kept"), event]
    if as_bytes:
        items = as_payloads(items)
    assert converter.feed(items[0]) == [ChunkResponse(content="kept")]
    with pytest.raises(ProviderError, match=re.escape(message_)) as raised:
        converter.feed(items[1])
    assert raised.value.payload == event
