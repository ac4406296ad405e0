"""The proxy's three encoders and a call whose arguments never became whole JSON.

An upstream's ``stop`` with calls is a call to run (``tool_calls``, ``tool_use``, a ``completed``
``function_call``) only when each call's arguments are whole JSON; otherwise the finish stays a plain
stop and a Responses item says ``incomplete``. The three encoders agree on every case.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.encode.anthropic import MessagesEncoder
from operators.encode.openai_chat import OpenAIChunkEncoder
from operators.encode.responses import ResponsesEncoder
from pipeline.models import ChunkResponse, ToolCallDelta, ToolCallKind

DEEP = "[" * 100_000 + "]" * 100_000


def call(
    index: int, arguments: str | None, *, finished: bool = False, kind: ToolCallKind = "function"
) -> ToolCallDelta:
    return ToolCallDelta(index, f"c{index}", f"f{index}", arguments, finished=finished, kind=kind)


CASES = [
    # (calls, finish, chat finish, Responses item statuses, Messages stop_reason)
    pytest.param([call(0, '{"a": 1}')], "stop", "tool_calls", ["completed"], "tool_use", id="whole"),
    pytest.param([call(0, '{"a": ')], "stop", "stop", ["incomplete"], "end_turn", id="cut"),
    pytest.param([call(0, '{"a": 1}<')], "stop", "stop", ["incomplete"], "end_turn", id="trailing"),
    pytest.param([call(0, None)], "stop", "tool_calls", ["completed"], "tool_use", id="no-arguments"),
    pytest.param([call(0, "  ")], "stop", "tool_calls", ["completed"], "tool_use", id="blank"),
    pytest.param(
        [call(0, '{"a": 1}', finished=True)], "stop", "tool_calls", ["completed"], "tool_use", id="finished"
    ),
    pytest.param(
        [call(0, "print(1", kind="custom")], "stop", "tool_calls", ["completed"], "tool_use", id="custom"
    ),
    pytest.param(
        [call(0, '{"a": "\udfff"}')], "stop", "tool_calls", ["completed"], "tool_use", id="lone-surrogate"
    ),
    pytest.param([call(0, DEEP)], "stop", "stop", ["incomplete"], "end_turn", id="too-deep"),
    pytest.param(
        [call(0, '{"a": 1}'), call(1, '{"b": [')],
        "stop",
        "stop",
        ["completed", "incomplete"],
        "end_turn",
        id="one-of-two-cut",
    ),
    pytest.param([call(0, '{"a": 1}')], "length", "length", ["incomplete"], "max_tokens", id="length"),
    pytest.param(
        [call(0, '{"a": 1}', finished=True)],
        "length",
        "length",
        ["completed"],
        "max_tokens",
        id="finished-length",
    ),
    pytest.param(
        [call(0, '{"a": ')], "tool_calls", "tool_calls", ["incomplete"], "tool_use", id="upstream-says"
    ),
]


def chunks(calls: list[ToolCallDelta], finish: str) -> list[ChunkResponse]:
    return [
        ChunkResponse(content="Checking."),
        *(ChunkResponse(tool_calls=[delta]) for delta in calls),
        ChunkResponse(finish_reason=finish),
        ChunkResponse(finish_reason=finish, is_complete=True),
    ]


@pytest.mark.parametrize(("calls", "finish", "chat", "statuses", "stop_reason"), CASES)
def test_each_encoder_runs_only_whole_calls(
    calls: list[ToolCallDelta], finish: str, chat: str, statuses: list[str], stop_reason: str
) -> None:
    encoder = OpenAIChunkEncoder()
    written = [out for chunk in chunks(calls, finish) for out in encoder.feed(chunk)] + encoder.finish()
    finishes = [entry["choices"][0]["finish_reason"] for entry in written if entry["choices"]]
    assert [reason for reason in finishes if reason] == [chat]

    responses = ResponsesEncoder({"model": "m"})
    events = [
        event for chunk in chunks(calls, finish) for event in responses.feed(chunk)
    ] + responses.finish()
    done = [event["item"] for event in events if event["type"] == "response.output_item.done"]
    assert [item["status"] for item in done if item["type"] == "function_call"] == statuses
    assert [
        item["status"] for item in responses.response["output"] if item["type"] == "function_call"
    ] == statuses

    messages = MessagesEncoder("m")
    pairs = [pair for chunk in chunks(calls, finish) for pair in messages.feed(chunk)] + messages.finish()
    deltas: list[dict[str, Any]] = [data["delta"] for name, data in pairs if name == "message_delta"]
    assert [delta["stop_reason"] for delta in deltas] == [stop_reason]
    assert messages.message["stop_reason"] == stop_reason


def test_a_failed_response_leaves_its_open_calls_incomplete() -> None:
    responses = ResponsesEncoder({"model": "m"})
    responses.feed(ChunkResponse(tool_calls=[call(0, '{"a": 1}', finished=True)]))
    responses.feed(ChunkResponse(tool_calls=[call(1, '{"b": 2}')]))
    events = responses.fail("the upstream went away", code="upstream_disconnected")
    done = [event["item"]["status"] for event in events if event["type"] == "response.output_item.done"]
    assert done == ["incomplete"]
    assert [item["status"] for item in responses.response["output"]] == ["completed", "incomplete"]
    assert responses.response["status"] == "failed"


def test_messages_input_of_a_cut_call_keeps_its_text() -> None:
    messages = MessagesEncoder("m")
    messages.feed(ChunkResponse(tool_calls=[call(0, DEEP[:10]), call(1, '{"a": "\udfff"}')]))
    messages.feed(ChunkResponse(finish_reason="stop", is_complete=True))
    messages.finish()
    assert [block["input"] for block in messages.message["content"]] == [
        {"_raw_arguments": DEEP[:10]},
        {"a": "\udfff"},
    ]
