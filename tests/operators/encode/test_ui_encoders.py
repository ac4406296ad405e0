"""The UI protocol encoders' cores, frame by frame: Vercel UI message stream v1, AG-UI, streamfold's SSE."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiostream import streamcontext
from hypothesis import given
from hypothesis import strategies as st

from operators.encode import AGUIEncoder, StreamfoldSSEEncoder, VercelUIEncoder, encode_vercel, encoder_for
from operators.encode.agui import encode_agui
from pipeline.errors import ConfigurationError, ProviderError
from pipeline.models import (
    ResponseEnd,
    SegmentEvent,
    SegmentType,
    TokenUsage,
    ToolCallError,
    ToolInvocation,
    ToolOutput,
)
from pipeline.testing import replay
from tests.reference import FIXTURES, call_id_for

Frames = list[dict[str, Any]]


def parse(frames: list[bytes]) -> list[Any]:
    """SSE frames to their JSON (``[DONE]`` as the string)."""
    out: list[Any] = []
    for frame in frames:
        assert frame.startswith(b"data: "), frame
        assert frame.endswith(b"\n\n"), frame
        data = frame[6:-2].decode()
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def run(core: Any, items: list[Any], *, finish: bool = True) -> list[Any]:
    frames: list[bytes] = []
    for item in items:
        frames += core.feed(item)
    if finish:
        frames += core.finish()
    return parse(frames)


def text_reasoning_call() -> list[Any]:
    """Reasoning with a signature, text, one tool call whose JSON streams, its invocation, the end."""
    return [
        SegmentEvent.start("r0", SegmentType.REASONING),
        SegmentEvent.content("r0", "Think"),
        SegmentEvent.end("r0", {"signature": "sig=="}, segment_type=SegmentType.REASONING),
        SegmentEvent.start("t1", SegmentType.TEXT),
        SegmentEvent.content("t1", "Hi"),
        SegmentEvent.content("t1", ""),
        SegmentEvent.end("t1", segment_type=SegmentType.TEXT),
        SegmentEvent.start(
            "call_1", SegmentType.TOOL_CALL, {"tool_name": "get_weather", "call_id": "call_1"}
        ),
        SegmentEvent.content("call_1", '{"city": "Pa'),
        SegmentEvent.argument_delta("call_1", ("city",), "Pa"),
        SegmentEvent.content("call_1", 'ris"}'),
        SegmentEvent.argument_value("call_1", ("city",), "Paris"),
        SegmentEvent.end(
            "call_1",
            {"tool_name": "get_weather", "call_id": "call_1", "arguments": {"city": "Paris"}},
            segment_type=SegmentType.TOOL_CALL,
        ),
        ToolInvocation("call_1", "get_weather", {"city": "Paris"}),
        ResponseEnd(
            finish_reason="tool_calls", usage=TokenUsage(prompt_tokens=3, completion_tokens=4, total_tokens=7)
        ),
    ]


def test_vercel_maps_each_segment_kind_and_closes_the_message() -> None:
    assert run(VercelUIEncoder(message_id="resp_1"), text_reasoning_call()) == [
        {"type": "start", "messageId": "resp_1"},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "r0"},
        {"type": "reasoning-delta", "id": "r0", "delta": "Think"},
        {"type": "reasoning-end", "id": "r0", "providerMetadata": {"streamfold": {"signature": "sig=="}}},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "Hi"},
        {"type": "text-end", "id": "t1"},
        {"type": "tool-input-start", "toolCallId": "call_1", "toolName": "get_weather"},
        {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": '{"city": "Pa'},
        {
            "type": "data-tool-argument",
            "data": {"toolCallId": "call_1", "path": ["city"], "delta": "Pa"},
            "transient": True,
        },
        {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": 'ris"}'},
        {
            "type": "data-tool-argument",
            "data": {"toolCallId": "call_1", "path": ["city"], "value": "Paris"},
            "transient": True,
        },
        {
            "type": "tool-input-available",
            "toolCallId": "call_1",
            "toolName": "get_weather",
            "input": {"city": "Paris"},
        },
        {"type": "finish-step"},
        {
            "type": "finish",
            "finishReason": "tool-calls",
            "messageMetadata": {"usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}},
        },
        "[DONE]",
    ]


def unended_call() -> list[Any]:
    """A text and a tool call's segment, then the input ends: no ToolInvocation, no ResponseEnd."""
    return [item for item in text_reasoning_call()[3:] if not isinstance(item, ToolInvocation | ResponseEnd)]


def test_vercel_finishes_a_stream_without_response_end() -> None:
    """The call ended is made available, the step and the message close (no finish reason was given)."""
    assert run(VercelUIEncoder(message_id="resp_1", extras=False), unended_call()) == [
        {"type": "start", "messageId": "resp_1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "Hi"},
        {"type": "text-end", "id": "t1"},
        {"type": "tool-input-start", "toolCallId": "call_1", "toolName": "get_weather"},
        {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": '{"city": "Pa'},
        {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": 'ris"}'},
        {
            "type": "tool-input-available",
            "toolCallId": "call_1",
            "toolName": "get_weather",
            "input": {"city": "Paris"},
        },
        {"type": "finish-step"},
        {"type": "finish"},
        "[DONE]",
    ]


def test_vercel_provider_key_and_no_extras() -> None:
    frames = run(VercelUIEncoder(provider="anthropic", extras=False), text_reasoning_call())
    assert not any(isinstance(frame, dict) and frame["type"].startswith("data-") for frame in frames)
    assert frames[4] == {
        "type": "reasoning-end",
        "id": "r0",
        "providerMetadata": {"anthropic": {"signature": "sig=="}},
    }
    assert frames[0] == {"type": "start"}


def file_write() -> list[Any]:
    """A write_file call: its CONTENT is the decoded file text, its path an ARGUMENT."""
    arguments = {"path": "a.py", "content": "print(1)\n"}
    return [
        SegmentEvent.start(
            "call_f", SegmentType.WRITE_FILE, {"tool_name": "write_file", "call_id": "call_f"}
        ),
        SegmentEvent.argument_value("call_f", ("path",), "a.py"),
        SegmentEvent.content("call_f", "print(1)"),
        SegmentEvent.content("call_f", "\n"),
        SegmentEvent.end(
            "call_f",
            {"tool_name": "write_file", "call_id": "call_f", "arguments": arguments, "path": "a.py"},
            segment_type=SegmentType.WRITE_FILE,
        ),
        ToolInvocation("call_f", "write_file", arguments),
        ToolOutput(call_id="call_f", name="write_file", output={"written": 9}),
    ]


def test_vercel_file_content_streams_as_data_parts_and_the_input_as_one_delta() -> None:
    frames = run(VercelUIEncoder(), file_write(), finish=False)
    assert frames[2:] == [
        {"type": "tool-input-start", "toolCallId": "call_f", "toolName": "write_file"},
        {
            "type": "data-tool-argument",
            "data": {"toolCallId": "call_f", "path": ["path"], "value": "a.py"},
            "transient": True,
        },
        {
            "type": "data-file-delta",
            "data": {"toolCallId": "call_f", "toolName": "write_file", "delta": "print(1)"},
            "transient": True,
        },
        {
            "type": "data-file-delta",
            "data": {"toolCallId": "call_f", "toolName": "write_file", "delta": "\n"},
            "transient": True,
        },
        {
            "type": "tool-input-delta",
            "toolCallId": "call_f",
            "inputTextDelta": '{"path":"a.py","content":"print(1)\\n"}',
        },
        {
            "type": "tool-input-available",
            "toolCallId": "call_f",
            "toolName": "write_file",
            "input": {"path": "a.py", "content": "print(1)\n"},
        },
        {"type": "tool-output-available", "toolCallId": "call_f", "output": {"written": 9}},
    ]


def test_vercel_failed_call_and_failed_tool() -> None:
    error = ToolCallError("truncated", "the arguments were cut off", '{"city": "Pa', 12)
    items = [
        SegmentEvent.start("c", SegmentType.TOOL_CALL, {"tool_name": "f", "call_id": "c"}),
        SegmentEvent.content("c", '{"city": "Pa'),
        ToolInvocation("c", "f", {}, error),
        ToolOutput(call_id="c", name="f", output="not run: the arguments were cut off", status="not_run"),
    ]
    frames = run(VercelUIEncoder(extras=False), items, finish=False)
    assert frames[4:] == [
        {
            "type": "tool-input-error",
            "toolCallId": "c",
            "toolName": "f",
            "input": '{"city": "Pa',
            "errorText": "truncated: the arguments were cut off",
        },
        {
            "type": "tool-output-error",
            "toolCallId": "c",
            "errorText": "not_run: not run: the arguments were cut off",
        },
    ]


@pytest.mark.anyio
async def test_vercel_operator_delivers_everything_then_the_error() -> None:
    async def failing() -> AsyncIterator[Any]:
        yield SegmentEvent.start("t", SegmentType.TEXT)
        yield SegmentEvent.content("t", "partial")
        raise ProviderError("overloaded_error: Overloaded")

    received: list[bytes] = []

    async def consume() -> None:
        async with streamcontext(encode_vercel(failing(), message_id="m")) as frames:
            async for frame in frames:
                received.append(frame)

    with pytest.raises(ProviderError):
        await consume()
    assert parse(received) == [
        {"type": "start", "messageId": "m"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "partial"},
        {"type": "error", "errorText": "overloaded_error: Overloaded"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "error"},
        "[DONE]",
    ]


def test_error_messages_of_other_exceptions_are_withheld() -> None:
    assert parse(VercelUIEncoder().abort(KeyError("secret path")))[1] == {
        "type": "error",
        "errorText": "the response stream failed (KeyError)",
    }
    assert parse(AGUIEncoder(run_id="r").abort(KeyError("secret path")))[1] == {
        "type": "RUN_ERROR",
        "message": "the response stream failed (KeyError)",
        "code": "KeyError",
    }


def test_agui_maps_each_segment_kind_and_finishes_the_run() -> None:
    assert run(AGUIEncoder(run_id="run_1", thread_id="th"), text_reasoning_call()) == [
        {"type": "RUN_STARTED", "threadId": "th", "runId": "run_1"},
        {"type": "REASONING_START", "messageId": "r0"},
        {"type": "REASONING_MESSAGE_START", "messageId": "r0", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r0", "delta": "Think"},
        {"type": "REASONING_MESSAGE_END", "messageId": "r0"},
        {
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": "message",
            "entityId": "r0",
            "encryptedValue": "sig==",
        },
        {"type": "REASONING_END", "messageId": "r0"},
        {"type": "TEXT_MESSAGE_START", "messageId": "t1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "t1", "delta": "Hi"},
        {"type": "TEXT_MESSAGE_END", "messageId": "t1"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "call_1",
            "toolCallName": "get_weather",
            "parentMessageId": "t1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": '{"city": "Pa'},
        {
            "type": "CUSTOM",
            "name": "streamfold.argument",
            "value": {"toolCallId": "call_1", "path": ["city"], "delta": "Pa"},
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": 'ris"}'},
        {
            "type": "CUSTOM",
            "name": "streamfold.argument",
            "value": {"toolCallId": "call_1", "path": ["city"], "value": "Paris"},
        },
        {"type": "TOOL_CALL_END", "toolCallId": "call_1"},
        {
            "type": "CUSTOM",
            "name": "streamfold.response_end",
            "value": {
                "finishReason": "tool_calls",
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            },
        },
        {
            "type": "RUN_FINISHED",
            "threadId": "th",
            "runId": "run_1",
            "result": {"finishReason": "tool_calls"},
            "usage": [{"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}],
        },
    ]


def test_agui_finishes_a_stream_without_response_end() -> None:
    """The call ended gets its TOOL_CALL_END, then RUN_FINISHED without a result (no finish reason)."""
    assert run(AGUIEncoder(run_id="run_1", thread_id="th", extras=False), unended_call()) == [
        {"type": "RUN_STARTED", "threadId": "th", "runId": "run_1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "t1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "t1", "delta": "Hi"},
        {"type": "TEXT_MESSAGE_END", "messageId": "t1"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "call_1",
            "toolCallName": "get_weather",
            "parentMessageId": "t1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": '{"city": "Pa'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": 'ris"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "call_1"},
        {"type": "RUN_FINISHED", "threadId": "th", "runId": "run_1"},
    ]


def test_agui_file_write_and_tool_output() -> None:
    frames = run(AGUIEncoder(run_id="r"), file_write(), finish=False)
    assert frames[1:] == [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "call_f",
            "toolCallName": "write_file",
            "parentMessageId": "call_f",
        },
        {
            "type": "CUSTOM",
            "name": "streamfold.argument",
            "value": {"toolCallId": "call_f", "path": ["path"], "value": "a.py"},
        },
        {
            "type": "CUSTOM",
            "name": "streamfold.file_delta",
            "value": {"toolCallId": "call_f", "toolName": "write_file", "delta": "print(1)"},
        },
        {
            "type": "CUSTOM",
            "name": "streamfold.file_delta",
            "value": {"toolCallId": "call_f", "toolName": "write_file", "delta": "\n"},
        },
        {
            "type": "TOOL_CALL_ARGS",
            "toolCallId": "call_f",
            "delta": '{"path":"a.py","content":"print(1)\\n"}',
        },
        {"type": "TOOL_CALL_END", "toolCallId": "call_f"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "call_f:output",
            "toolCallId": "call_f",
            "content": '{"written":9}',
            "role": "tool",
        },
    ]


@given(st.lists(st.text(max_size=4), max_size=12))
def test_agui_never_sends_an_empty_delta(pieces: list[str]) -> None:
    items: list[Any] = [SegmentEvent.start("t", SegmentType.TEXT)]
    items += [SegmentEvent.content("t", piece) for piece in pieces]
    items.append(SegmentEvent.end("t", segment_type=SegmentType.TEXT))
    frames = run(AGUIEncoder(run_id="r"), items)
    deltas = [frame["delta"] for frame in frames if frame["type"] == "TEXT_MESSAGE_CONTENT"]
    assert all(deltas)
    assert "".join(deltas) == "".join(pieces)


PARALLEL = FIXTURES / "anthropic/fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse"
GEMINI_WHOLE = FIXTURES / "gemini/fantasy_gemini-2.5-flash_2_parallel_function_calls_one_chunk.sse"


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_a_call_is_available_as_soon_as_it_folds(protocol: str) -> None:
    events = await replay(PARALLEL, id_factory=call_id_for)
    frames = run(encoder_for(protocol).core(response_id="r"), events)
    kinds = [frame["type"] for frame in frames if isinstance(frame, dict)]
    start, ready = (
        ("tool-input-start", "tool-input-available")
        if protocol == "vercel"
        else ("TOOL_CALL_START", "TOOL_CALL_END")
    )
    first_ready = kinds.index(ready)
    second_start = [i for i, kind in enumerate(kinds) if kind == start][1]
    assert first_ready < second_start  # the first call is usable while the second still streams


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_arguments_that_arrive_whole_give_one_delta(protocol: str) -> None:
    events = await replay(GEMINI_WHOLE, id_factory=call_id_for)
    invocations = [event for event in events if isinstance(event, ToolInvocation)]
    frames = run(encoder_for(protocol).core(response_id="r"), events)
    delta, key = (
        ("tool-input-delta", "inputTextDelta") if protocol == "vercel" else ("TOOL_CALL_ARGS", "delta")
    )
    for invocation in invocations:
        deltas = [
            f[key]
            for f in frames
            if isinstance(f, dict) and f["type"] == delta and f["toolCallId"] == invocation.id
        ]
        assert len(deltas) == 1
        assert json.loads(deltas[0]) == invocation.arguments


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["streamfold", "vercel", "agui"])
async def test_the_wire_dicts_of_a_log_encode_like_the_items(protocol: str) -> None:
    events = await replay(PARALLEL, id_factory=call_id_for)
    typed = run(encoder_for(protocol).core(response_id="r"), events) if protocol != "streamfold" else None
    if typed is None:
        core = StreamfoldSSEEncoder()
        frames = [frame for event in events for frame in core.feed(event)]
        again = StreamfoldSSEEncoder()
        assert [
            frame for event in events for frame in again.feed(json.loads(json.dumps(event.to_dict())))
        ] == frames
        return
    assert run(encoder_for(protocol).core(response_id="r"), [event.to_dict() for event in events]) == typed


def test_streamfold_core_writes_the_web_format() -> None:
    core = StreamfoldSSEEncoder()
    assert core.feed(ResponseEnd(finish_reason="stop")) == [
        b'data: {"type":"RESPONSE_END","finish_reason":"stop","usage":null,"metadata":{}}\n\n'
    ]
    assert core.finish() == [b'event: end\ndata: {"type":"END"}\n\n']
    assert StreamfoldSSEEncoder().abort(ProviderError("boom")) == [
        b'event: error\ndata: {"type":"ERROR","error":"ProviderError","message":"boom"}\n\n'
    ]


def test_encoder_for_gives_media_type_and_headers() -> None:
    vercel = encoder_for("vercel")
    assert vercel.media_type == "text/event-stream"
    assert ("x-vercel-ai-ui-message-stream", "v1") in vercel.headers
    assert isinstance(vercel.core(response_id="m"), VercelUIEncoder)
    assert isinstance(encoder_for("agui").core(), AGUIEncoder)
    assert isinstance(encoder_for("streamfold").core(response_id="x"), StreamfoldSSEEncoder)
    with pytest.raises(ConfigurationError, match="unknown wire protocol 'sse'"):
        encoder_for("sse")


@pytest.mark.anyio
async def test_agui_operator_runs_the_core() -> None:
    async def items() -> AsyncIterator[Any]:
        for item in text_reasoning_call():
            yield item

    async with streamcontext(encode_agui(items(), run_id="r")) as frames:
        received = [frame async for frame in frames]
    assert parse(received) == run(AGUIEncoder(run_id="r"), text_reasoning_call())


@given(st.lists(st.integers(min_value=0, max_value=6), max_size=10))
def test_vercel_any_split_of_the_arguments_gives_the_same_input(cuts: list[int]) -> None:
    raw = '{"city": "Paris", "days": 3}'
    pieces, position = [], 0
    for cut in cuts:
        pieces.append(raw[position : position + cut])
        position += cut
    pieces.append(raw[position:])
    items: list[Any] = [SegmentEvent.start("c", SegmentType.TOOL_CALL, {"tool_name": "f", "call_id": "c"})]
    items += [SegmentEvent.content("c", piece) for piece in pieces]
    arguments = {"city": "Paris", "days": 3}
    items += [
        SegmentEvent.end(
            "c",
            {"tool_name": "f", "call_id": "c", "arguments": arguments},
            segment_type=SegmentType.TOOL_CALL,
        ),
        ToolInvocation("c", "f", arguments),
    ]
    frames = run(VercelUIEncoder(), items)
    deltas = [
        frame["inputTextDelta"]
        for frame in frames
        if isinstance(frame, dict) and frame["type"] == "tool-input-delta"
    ]
    assert all(deltas)
    assert "".join(deltas) == raw
    ready = [frame for frame in frames if isinstance(frame, dict) and frame["type"] == "tool-input-available"]
    assert ready == [{"type": "tool-input-available", "toolCallId": "c", "toolName": "f", "input": arguments}]
