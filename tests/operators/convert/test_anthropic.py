"""The Anthropic Messages converter: hand-written event sequences, every recorded stream, the operator."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from aiostream import stream

from operators.convert.anthropic import (
    AnthropicConverter,
    convert_anthropic,
    normalize_anthropic_stop_reason,
)
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta, ToolResult
from tests.conftest import TESTS
from tests.converter_cases import fold_calls, load_events, run_converter, sequential_ids

FIXTURES = TESTS / "fixtures" / "anthropic"
RECORDINGS = sorted(path for path in FIXTURES.iterdir() if path.suffix in {".sse", ".jsonl"})


def convert(events: Iterable[dict[str, Any]]) -> list[ChunkResponse]:
    return run_converter(AnthropicConverter(id_factory=sequential_ids), events)


def message_start(**usage: Any) -> dict[str, Any]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": []}
    return {"type": "message_start", "message": {**message, "usage": usage or {"input_tokens": 10}}}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, **usage: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": usage}


MESSAGE_STOP = {"type": "message_stop"}
START_USAGE = TokenUsage(prompt_tokens=10, completion_tokens=0, total_tokens=10)
START = ChunkResponse(usage=START_USAGE, metadata={"id": "msg_1", "model": "claude-x"})


def text(index: int, value: str) -> dict[str, Any]:
    return block_delta(index, {"type": "text_delta", "text": value})


def json_delta(index: int, value: str) -> dict[str, Any]:
    return block_delta(index, {"type": "input_json_delta", "partial_json": value})


def tool(index: int, call_id: str, name: str, block_type: str = "tool_use", **extra: Any) -> dict[str, Any]:
    return block_start(index, {"type": block_type, "id": call_id, "name": name, "input": {}, **extra})


# --------------------------------------------------------------------------------------------------
# Hand-written sequences


def test_text_stream() -> None:
    chunks = convert(
        [
            message_start(input_tokens=10, output_tokens=1),
            block_start(0, {"type": "text", "text": ""}),
            {"type": "ping"},
            text(0, "Hello"),
            text(0, ""),
            text(0, " world"),
            block_stop(0),
            message_delta("end_turn", output_tokens=7),
            MESSAGE_STOP,
        ]
    )
    assert chunks == [
        ChunkResponse(
            usage=TokenUsage(prompt_tokens=10, completion_tokens=1, total_tokens=11),
            metadata={"id": "msg_1", "model": "claude-x"},
        ),
        ChunkResponse(content="Hello"),
        ChunkResponse(content=" world"),
        ChunkResponse(
            finish_reason="stop",
            usage=TokenUsage(prompt_tokens=10, completion_tokens=7, total_tokens=17),
            metadata={"stop_reason": "end_turn"},
        ),
        ChunkResponse(is_complete=True, finish_reason="stop"),
    ]


def test_text_already_in_the_block_start() -> None:
    assert convert([block_start(0, {"type": "text", "text": "Hi"}), text(0, "!")]) == [
        ChunkResponse(content="Hi"),
        ChunkResponse(content="!"),
    ]


def test_thinking_signature_and_redacted_thinking() -> None:
    chunks = convert(
        [
            block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            block_delta(0, {"type": "thinking_delta", "thinking": "Let me think"}),
            block_delta(0, {"type": "signature_delta", "signature": "sig=="}),
            block_stop(0),
            block_start(1, {"type": "redacted_thinking", "data": "opaque"}),
            block_stop(1),
            block_start(2, {"type": "text", "text": ""}),
            text(2, "Answer"),
            block_stop(2),
        ]
    )
    assert chunks == [
        ChunkResponse(reasoning="Let me think"),
        ChunkResponse(reasoning_signature="sig=="),
        ChunkResponse(reasoning_done=True),
        ChunkResponse(encrypted_reasoning="opaque"),
        ChunkResponse(reasoning_done=True),
        ChunkResponse(content="Answer"),
    ]


def test_tool_use_positions_ids_and_finished() -> None:
    chunks = convert(
        [
            block_start(0, {"type": "text", "text": ""}),
            text(0, "Calling."),
            block_stop(0),
            tool(1, "toolu_a", "get_weather"),
            json_delta(1, ""),
            json_delta(1, '{"city": '),
            json_delta(1, '"Paris"}'),
            block_stop(1),
            tool(2, "toolu_b", "get_time"),
            json_delta(2, '{"tz": "CET"}'),
            block_stop(2),
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )
    assert chunks == [
        ChunkResponse(content="Calling."),
        ChunkResponse(tool_calls=[ToolCallDelta(0, "toolu_a", "get_weather")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"city": ')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='"Paris"}')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "toolu_b", "get_time")]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, arguments_delta='{"tz": "CET"}')]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, finished=True)]),
        ChunkResponse(finish_reason="tool_calls", metadata={"stop_reason": "tool_use"}),
        ChunkResponse(is_complete=True, finish_reason="tool_calls"),
    ]


def test_server_and_mcp_tools_are_server_calls_and_result_blocks_are_tool_results() -> None:
    search_results = [{"type": "web_search_result", "url": "https://example.com", "title": "Example"}]
    bash_error = {"type": "bash_code_execution_tool_result_error", "error_code": "unavailable"}
    chunks = convert(
        [
            tool(0, "srvtoolu_1", "web_search", "server_tool_use"),
            json_delta(0, '{"query": "x"}'),
            block_stop(0),
            block_start(
                1, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": search_results}
            ),
            block_stop(1),
            tool(2, "mcptoolu_1", "echo", "mcp_tool_use", server_name="echo"),
            json_delta(2, "{}"),
            block_stop(2),
            block_start(
                3,
                {
                    "type": "mcp_tool_result",
                    "tool_use_id": "mcptoolu_1",
                    "is_error": True,
                    "content": [{"type": "text", "text": "no"}],
                },
            ),
            block_stop(3),
            block_start(
                4, {"type": "bash_code_execution_tool_result", "tool_use_id": "x", "content": bash_error}
            ),
            block_stop(4),
        ]
    )
    assert chunks == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "srvtoolu_1", "web_search", kind="server")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"query": "x"}', kind="server")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True, kind="server")]),
        ChunkResponse(
            tool_results=[
                ToolResult(
                    call_id="srvtoolu_1",
                    name="web_search",
                    content=search_results,
                    result_type="web_search_tool_result",
                )
            ]
        ),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "mcptoolu_1", "echo", kind="server", server_name="echo")]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, arguments_delta="{}", kind="server")]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, finished=True, kind="server")]),
        ChunkResponse(
            tool_results=[
                ToolResult(
                    call_id="mcptoolu_1",
                    name="echo",
                    content=[{"type": "text", "text": "no"}],
                    is_error=True,
                    result_type="mcp_tool_result",
                )
            ]
        ),
        ChunkResponse(
            tool_results=[
                ToolResult(
                    call_id="x",
                    content=bash_error,
                    is_error=True,
                    result_type="bash_code_execution_tool_result",
                )
            ]
        ),
    ]


def test_citations_delta_and_citations_in_a_text_block_start_are_citations() -> None:
    cite = {"type": "web_search_result_location", "url": "https://example.com", "cited_text": "x"}
    other = {"type": "char_location", "document_index": 0, "cited_text": "y"}
    chunks = convert(
        [
            block_start(0, {"type": "text", "text": "", "citations": []}),
            block_delta(0, {"type": "citations_delta", "citation": cite}),
            text(0, "Cited."),
            block_stop(0),
            block_start(1, {"type": "text", "text": "Whole.", "citations": [other]}),
            block_stop(1),
        ]
    )
    assert chunks == [
        ChunkResponse(citations=[cite]),
        ChunkResponse(content="Cited."),
        ChunkResponse(content="Whole.", citations=[other]),
    ]


def test_empty_input_gives_a_call_with_no_arguments_text() -> None:
    chunks = convert([tool(0, "toolu_a", "list_files"), json_delta(0, ""), block_stop(0)])
    assert chunks == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "toolu_a", "list_files")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]),
    ]


def test_input_given_whole_in_the_block_start() -> None:
    start = block_start(0, {"type": "server_tool_use", "id": "s1", "name": "advisor", "input": {"q": "é\n"}})
    assert convert([start, block_stop(0)]) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "s1", "advisor", kind="server")]),
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, arguments_delta='{"q":"é\\n"}', finished=True, kind="server")]
        ),
    ]


def test_streamed_input_wins_over_the_input_in_the_block_start() -> None:
    start = block_start(0, {"type": "tool_use", "id": "t1", "name": "f", "input": {"q": 1}})
    assert convert([start, json_delta(0, '{"q": 1}'), block_stop(0)]) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "t1", "f")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"q": 1}')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]),
    ]


def test_missing_id_comes_from_the_id_factory() -> None:
    start = block_start(3, {"type": "tool_use", "name": "google_search"})
    assert convert([start, block_delta(3, {"type": "input_json_delta"}), block_stop(3)]) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", "google_search")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]),
    ]


def test_a_call_cut_off_by_max_tokens_is_not_finished() -> None:
    chunks = convert(
        [
            tool(0, "toolu_a", "make_file"),
            json_delta(0, '{"filename": "taxes.txt", "lines": ["a'),
            message_delta("max_tokens", output_tokens=124),
            MESSAGE_STOP,
        ]
    )
    assert chunks == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "toolu_a", "make_file")]),
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, arguments_delta='{"filename": "taxes.txt", "lines": ["a')]
        ),
        ChunkResponse(
            finish_reason="length",
            usage=TokenUsage(prompt_tokens=0, completion_tokens=124, total_tokens=124),
            metadata={"stop_reason": "max_tokens"},
        ),
        ChunkResponse(is_complete=True, finish_reason="length"),
    ]


@pytest.mark.parametrize(
    ("stop_reason", "normalised"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
        ("Something_New", "something_new"),
    ],
)
def test_stop_reasons_are_normalised(stop_reason: str, normalised: str) -> None:
    assert normalize_anthropic_stop_reason(stop_reason) == normalised
    assert convert([message_delta(stop_reason), MESSAGE_STOP]) == [
        ChunkResponse(finish_reason=normalised, metadata={"stop_reason": stop_reason}),
        ChunkResponse(is_complete=True, finish_reason=normalised),
    ]


def test_stop_sequence_is_kept_in_metadata() -> None:
    event = {"type": "message_delta", "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"}}
    assert convert([event]) == [
        ChunkResponse(finish_reason="stop", metadata={"stop_reason": "stop_sequence", "stop_sequence": "END"})
    ]


def test_usage_is_cumulative_in_openai_terms() -> None:
    chunks = convert(
        [
            message_start(
                input_tokens=100, cache_read_input_tokens=50, cache_creation_input_tokens=25, output_tokens=1
            ),
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                # 0 for input_tokens as some re-serialising clients write it: counts never go down
                "usage": {
                    "input_tokens": 0,
                    "output_tokens": 40,
                    "output_tokens_details": {"thinking_tokens": 30},
                },
            },
        ]
    )
    assert [chunk.usage for chunk in chunks] == [
        TokenUsage(
            prompt_tokens=175,
            completion_tokens=1,
            total_tokens=176,
            cached_tokens=50,
            cache_creation_tokens=25,
        ),
        TokenUsage(
            prompt_tokens=175,
            completion_tokens=40,
            total_tokens=215,
            cached_tokens=50,
            cache_creation_tokens=25,
            reasoning_tokens=30,
        ),
    ]


def test_a_second_message_is_a_new_response() -> None:
    """Two messages in one stream (a client that streams an agent's turns on): the second one's call
    positions restart at 0, and its usage and finish reason are its own."""
    turn = [
        tool(0, "toolu_a", "get_weather"),
        json_delta(0, "{}"),
        block_stop(0),
        message_delta("tool_use", output_tokens=7),
        MESSAGE_STOP,
    ]
    chunks = convert(
        [
            message_start(input_tokens=100),
            *turn,
            message_start(input_tokens=20),
            block_start(0, {"type": "text", "text": ""}),
            text(0, "Done."),
            block_stop(0),
            message_delta("end_turn", output_tokens=3),
            MESSAGE_STOP,
        ]
    )
    second = chunks[chunks.index(ChunkResponse(is_complete=True, finish_reason="tool_calls")) + 1 :]
    assert second == [
        ChunkResponse(
            usage=TokenUsage(prompt_tokens=20, completion_tokens=0, total_tokens=20),
            metadata={"id": "msg_1", "model": "claude-x"},
        ),
        ChunkResponse(content="Done."),
        ChunkResponse(
            finish_reason="stop",
            usage=TokenUsage(prompt_tokens=20, completion_tokens=3, total_tokens=23),
            metadata={"stop_reason": "end_turn"},
        ),
        ChunkResponse(is_complete=True, finish_reason="stop"),
    ]
    chunks = convert([message_start(), *turn, message_start(), *turn])
    assert [delta.index for chunk in chunks for delta in chunk.tool_calls or ()] == [0, 0, 0, 0, 0, 0]


def test_service_tier_goes_to_metadata() -> None:
    assert convert([message_start(input_tokens=3, service_tier="standard")]) == [
        ChunkResponse(
            usage=TokenUsage(prompt_tokens=3, completion_tokens=0, total_tokens=3),
            metadata={"id": "msg_1", "model": "claude-x", "service_tier": "standard"},
        )
    ]


def test_unknown_events_blocks_and_deltas_are_skipped() -> None:
    chunks = convert(
        [
            {"type": "brand_new_event", "payload": 1},
            block_start(0, {"type": "hologram", "data": "x"}),
            block_delta(0, {"type": "hologram_delta", "x": 1}),
            block_stop(0),
            block_start(1, {"type": "text", "text": ""}),
            text(1, "ok"),
        ]
    )
    assert chunks == [ChunkResponse(content="ok")]


def test_in_band_error_raises_after_what_came_before() -> None:
    converter = AnthropicConverter()
    assert converter.feed(text(0, "partial")) == [ChunkResponse(content="partial")]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ProviderError) as caught:
        converter.feed(error)
    assert caught.value.kind == "overloaded_error"
    assert caught.value.payload == error
    assert str(caught.value) == "event 1: provider error (overloaded_error): Overloaded"


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            ["not", "a", "mapping"],
            re.escape("event 1: the event should be an object, got list: ['not', 'a', 'mapping']"),
        ),
        ({"index": 0}, re.escape("event 1: field 'type' should be a string, got nothing")),
        (
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}},
            re.escape("event 1 (content_block_delta): field 'index' should be an integer, got nothing"),
        ),
        ({"type": "content_block_delta", "index": 0}, "field 'delta' should be an object, got nothing"),
        (
            block_delta(0, {"type": "text_delta"}),
            re.escape("event 1 (content_block_delta): field 'delta.text' should be a string, got nothing"),
        ),
        (
            block_delta(0, {"type": "thinking_delta"}),
            re.escape("(content_block_delta): field 'delta.thinking' should be a string, got nothing"),
        ),
        (
            {"type": "message_delta", "usage": {"output_tokens": 9}},
            re.escape("event 1 (message_delta): field 'delta' should be an object, got nothing"),
        ),
        (
            block_delta(0, {"type": "text_delta", "text": 5}),
            re.escape("event 1 (content_block_delta): field 'delta.text': Expected `str`, got `int`"),
        ),
        (block_start(0, {"type": "tool_use", "id": "t"}), "field 'name' should be a string, got nothing"),
        (
            block_delta(0, {"type": 7, "text": "x"}),
            "content_block_delta\\): field 'delta.type': Expected `str`, got `int`",
        ),
        (block_delta(0, {"text": "x"}), "content_block_delta\\): field 'delta.type' should be a string"),
        (
            block_start(0, {"type": None, "text": "x"}),
            "field 'content_block.type' should be a string, got NoneType: None",
        ),
        (
            block_delta(0, {"type": "citations_delta", "citation": "x"}),
            "field 'delta.citation': Expected `object`, got `str`",
        ),
        (
            block_start(0, {"type": "web_search_tool_result", "content": []}),
            "field 'tool_use_id' should be a string, got nothing",
        ),
        (block_start(0, {"type": "text", "citations": {}}), "'citations' that is not a list of objects"),
        (json_delta(7, "{}"), "input_json_delta for block 7, not an open tool block"),
        (
            {"type": "message_start"},
            re.escape("event 1 (message_start): field 'message' should be an object, got nothing"),
        ),
        ({"type": "message_delta", "delta": {}, "usage": {"output_tokens": "9"}}, "usage.output_tokens"),
    ],
)
def test_malformed_events_raise_converter_errors_naming_event_and_field(event: Any, message: str) -> None:
    converter = AnthropicConverter()
    converter.feed({"type": "ping"})
    with pytest.raises(ConverterError, match=message) as caught:
        converter.feed(event)
    assert caught.value.event_number == 1


@pytest.mark.parametrize(
    ("event", "field", "expected"),
    [
        (block_delta(0, {"type": "text_delta"}), "delta.text", "a string"),
        (block_delta(0, {"type": "thinking_delta"}), "delta.thinking", "a string"),
        ({"type": "content_block_delta", "index": 0}, "delta", "an object"),
        ({"type": "message_delta"}, "delta", "an object"),
    ],
)
def test_framed_events_without_a_field_raise_naming_it(
    event: dict[str, Any], field: str, expected: str
) -> None:
    """Framed bytes take the typed decode's path: a field they lack is named as a dict's would be."""
    converter = AnthropicConverter()
    empty = block_delta(0, {"type": "text_delta", "text": ""})
    assert converter.feed(Payload(json.dumps(empty).encode(), 0)) == []
    with pytest.raises(ConverterError) as caught:
        converter.feed(Payload(json.dumps(event).encode(), 40))
    message = f"event 1 ({event['type']}): field {field!r} should be {expected}, got nothing"
    assert str(caught.value) == message


def test_a_tool_block_started_twice_is_an_error() -> None:
    converter = AnthropicConverter()
    converter.feed(tool(0, "t1", "f"))
    with pytest.raises(ConverterError, match="starts content block 0 again"):
        converter.feed(tool(0, "t2", "g"))


# --------------------------------------------------------------------------------------------------
# Every recording against a deliberately naive reference


CALL_BLOCKS = {"tool_use": "function", "server_tool_use": "server", "mcp_tool_use": "server"}
STOP_WORDS = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def reference(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the recording holds, read directly off the whole event list."""
    text: list[str] = []
    reasoning: list[str] = []
    signatures: list[str] = []
    calls: list[dict[str, Any]] = []
    call_of_block: dict[int, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    thinking_tokens = None
    stop_reason = None
    for event in events:
        kind = event["type"]
        if kind == "content_block_start":
            block = event["content_block"]
            if block["type"] in CALL_BLOCKS:
                call = {
                    "index": len(calls),
                    "id": block["id"],
                    "name": block["name"],
                    "kind": CALL_BLOCKS[block["type"]],
                    "arguments": "",
                    "finished": False,
                }
                calls.append(call)
                call_of_block[event["index"]] = call
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                text.append(delta["text"])
            elif delta["type"] == "thinking_delta":
                reasoning.append(delta["thinking"])
            elif delta["type"] == "signature_delta":
                signatures.append(delta["signature"])
            elif delta["type"] == "input_json_delta":
                call_of_block[event["index"]]["arguments"] += delta.get("partial_json", "")
        elif kind == "content_block_stop" and event["index"] in call_of_block:
            call_of_block[event["index"]]["finished"] = True
        if kind in ("message_start", "message_delta"):
            usage = event["message"]["usage"] if kind == "message_start" else event["usage"]
            for key in (
                "input_tokens",
                "output_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            ):
                if key in usage:
                    counts[key] = max(counts.get(key, 0), usage[key])
            thinking_tokens = usage.get("output_tokens_details", {}).get("thinking_tokens", thinking_tokens)
        if kind == "message_delta":
            stop_reason = event["delta"]["stop_reason"]
    prompt = (
        counts["input_tokens"]
        + counts.get("cache_read_input_tokens", 0)
        + counts.get("cache_creation_input_tokens", 0)
    )
    usage_dict = {
        "prompt_tokens": prompt,
        "completion_tokens": counts["output_tokens"],
        "total_tokens": prompt + counts["output_tokens"],
    }
    for key, value in (
        ("cached_tokens", counts.get("cache_read_input_tokens")),
        ("cache_creation_tokens", counts.get("cache_creation_input_tokens")),
        ("reasoning_tokens", thinking_tokens),
    ):
        if value is not None:
            usage_dict[key] = value
    return {
        "text": "".join(text),
        "reasoning": "".join(reasoning),
        "signatures": signatures,
        "calls": calls,
        "finish_reason": STOP_WORDS[stop_reason] if stop_reason else None,
        "usage": usage_dict,
    }


def summary(chunks: list[ChunkResponse]) -> dict[str, Any]:
    """The same facts gathered from the converter's chunks."""
    calls = [
        {
            "index": call.index,
            "id": call.call_id,
            "name": call.name,
            "kind": call.kind,
            "arguments": call.arguments,
            "finished": call.finished,
        }
        for call in fold_calls(chunks)
    ]
    usages = [chunk.usage for chunk in chunks if chunk.usage is not None]
    return {
        "text": "".join(chunk.content for chunk in chunks),
        "reasoning": "".join(chunk.reasoning or "" for chunk in chunks),
        "signatures": [chunk.reasoning_signature for chunk in chunks if chunk.reasoning_signature],
        "calls": calls,
        "finish_reason": chunks[-1].finish_reason,
        "usage": usages[-1].to_dict() if usages else None,
    }


@pytest.mark.parametrize("path", RECORDINGS, ids=[path.name for path in RECORDINGS])
def test_recording_matches_the_naive_reference(path: Path) -> None:
    events = load_events(path)
    chunks = convert(events)
    assert summary(chunks) == reference(events)
    assert [chunk.is_complete for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[0].metadata is not None
    assert chunks[0].metadata["id"] == events[0]["message"]["id"]
    for call in summary(chunks)["calls"]:
        if call["finished"]:
            assert isinstance(json.loads(call["arguments"] or "{}"), dict)


def test_the_truncated_recording_leaves_its_call_unfinished() -> None:
    chunks = convert(
        load_events(FIXTURES / "anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse")
    )
    (call,) = summary(chunks)["calls"]
    assert call["finished"] is False
    assert call["arguments"].startswith('{"filename": "taxes.txt", "lines_of_text": [')
    assert chunks[-1] == ChunkResponse(is_complete=True, finish_reason="length")


# --------------------------------------------------------------------------------------------------
# The operator


@pytest.mark.anyio
async def test_operator_gives_what_the_core_gives() -> None:
    events = load_events(FIXTURES / "fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse")
    async with (
        stream.iterate(events) | convert_anthropic.pipe(id_factory=sequential_ids)
    ).stream() as chunks:
        received = [chunk async for chunk in chunks]
    assert received == convert(events)


@pytest.mark.anyio
async def test_operator_raises_the_provider_error_after_yielding_what_came_before() -> None:
    events = [
        text(0, "a"),
        {"type": "error", "error": {"type": "api_error", "message": "boom"}},
        text(0, "b"),
    ]
    received: list[ChunkResponse] = []

    async def consume() -> None:
        async with convert_anthropic(stream.iterate(events)).stream() as chunks:
            async for chunk in chunks:
                received.append(chunk)

    with pytest.raises(ProviderError, match="boom"):
        await consume()
    assert received == [ChunkResponse(content="a")]


@pytest.mark.anyio
async def test_an_mcp_call_names_its_server_in_its_segment() -> None:
    """The MCP server of an ``mcp_tool_use`` block reaches the tool segment's START (a next turn that
    replays the call must name it)."""
    from pipeline.compose import process
    from pipeline.models import SegmentEvent, SegmentEventType, SegmentType

    body = (FIXTURES / "vercel_claude-sonnet-4-5_mcp_tool_use.jsonl").read_bytes()
    async with process(body, provider="anthropic", framing="jsonl").stream() as events:
        starts = [
            event.metadata
            async for event in events
            if isinstance(event, SegmentEvent)
            and event.event_type is SegmentEventType.START
            and event.segment_type is SegmentType.TOOL_CALL
        ]
    assert starts == [
        {
            "tool_name": "echo",
            "call_id": "mcptoolu_017CuqaJcXe5ZHJjaz3KS1AT",
            "provider_executed": True,
            "server_name": "echo",
        }
    ]
