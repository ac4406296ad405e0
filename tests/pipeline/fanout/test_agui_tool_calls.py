"""AG-UI tool calls as ``@ag-ui/client`` folds them: one assistant message per model turn (every
``TOOL_CALL_START`` of a response has one ``parentMessageId``), and no provider-executed call left
without a result (a call without one is a call the client must run)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from operators.arguments.splitter import ArgumentSplitter
from operators.encode import AGUIEncoder
from operators.invocations import InvocationFolder
from operators.segments import SegmentEmitter
from pipeline.models import ChunkResponse, ResponseEnd, ToolCallDelta, ToolResult
from pipeline.stage import chain
from pipeline.testing import counter_segment_ids

NO_RESULT = "The provider ran this tool; its result is not part of this response."


def pipeline_items(*responses: list[ChunkResponse]) -> list[Any]:
    """The pipeline's items for each response in turn, as an agent loop streams them in one run."""
    items: list[Any] = []
    ids = counter_segment_ids()
    for chunks in responses:
        core = chain(ArgumentSplitter(), SegmentEmitter(segment_ids=ids), InvocationFolder())
        for chunk in chunks:
            items += core.feed(chunk)
        items += core.finish()
    return items


def frames(items: list[Any]) -> list[dict[str, Any]]:
    core = AGUIEncoder(run_id="run", extras=False)
    out = [frame for item in items for frame in core.feed(item)] + core.finish()
    return [json.loads(frame.decode().removeprefix("data: ")) for frame in out]


def call(index: int, call_id: str, name: str, kind: Any = "function") -> ChunkResponse:
    return ChunkResponse(tool_calls=[ToolCallDelta(index, call_id, name, "{}", True, kind=kind)])


def start(call_id: str, name: str, parent: str) -> dict[str, Any]:
    return {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name, "parentMessageId": parent}


def args_end(call_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


RUN_STARTED = {"type": "RUN_STARTED", "threadId": "run", "runId": "run"}


def run_finished(reason: str) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": "run", "runId": "run", "result": {"finishReason": reason}}


def test_the_calls_of_one_turn_share_one_parent_message_and_the_next_turn_has_its_own() -> None:
    first = [
        call(0, "call_a", "add"),
        call(1, "call_b", "multiply"),
        ChunkResponse(finish_reason="tool_calls"),
    ]
    second = [
        ChunkResponse(content="Both done."),
        call(0, "call_c", "add"),
        ChunkResponse(finish_reason="tool_calls"),
    ]
    assert frames(pipeline_items(first, second)) == [
        RUN_STARTED,
        start("call_a", "add", "call_a"),
        *args_end("call_a"),
        start("call_b", "multiply", "call_a"),
        *args_end("call_b"),
        {"type": "TEXT_MESSAGE_START", "messageId": "text_0", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "text_0", "delta": "Both done."},
        {"type": "TEXT_MESSAGE_END", "messageId": "text_0"},
        start("call_c", "add", "text_0"),
        *args_end("call_c"),
        run_finished("tool_calls"),
    ]


def test_a_provider_executed_call_without_its_result_gets_one_saying_so_at_the_response_end() -> None:
    chunks = [
        call(0, "xs_call_1", "x_keyword_search", "server"),
        call(1, "ws_1", "web_search", "server"),
        ChunkResponse(tool_results=[ToolResult(call_id="ws_1", name="web_search", content=[])]),
        ChunkResponse(content="Found it."),
        ChunkResponse(finish_reason="stop"),
    ]
    assert frames(pipeline_items(chunks)) == [
        RUN_STARTED,
        start("xs_call_1", "x_keyword_search", "xs_call_1"),
        *args_end("xs_call_1"),
        start("ws_1", "web_search", "xs_call_1"),
        *args_end("ws_1"),
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "ws_1:result",
            "toolCallId": "ws_1",
            "content": "[]",
            "role": "tool",
        },
        {"type": "TEXT_MESSAGE_START", "messageId": "text_0", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "text_0", "delta": "Found it."},
        {"type": "TEXT_MESSAGE_END", "messageId": "text_0"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "xs_call_1:result",
            "toolCallId": "xs_call_1",
            "content": NO_RESULT,
            "role": "tool",
        },
        run_finished("stop"),
    ]


def test_a_run_without_a_response_end_still_answers_the_provider_executed_calls() -> None:
    items = pipeline_items([call(0, "srv_1", "code_execution", "server")])
    items = [item for item in items if not isinstance(item, ResponseEnd)]
    assert frames(items)[-2:] == [
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "srv_1:result",
            "toolCallId": "srv_1",
            "content": NO_RESULT,
            "role": "tool",
        },
        {"type": "RUN_FINISHED", "threadId": "run", "runId": "run"},
    ]


def test_the_events_validate_with_the_ag_ui_protocol_models() -> None:
    models = pytest.importorskip(
        "ag_ui.core", reason="ag-ui-protocol is not installed (the test extra has it)"
    )
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(models.Event)
    chunks = [call(0, "xs_call_1", "x_keyword_search", "server"), ChunkResponse(finish_reason="stop")]
    for frame in frames(pipeline_items(chunks)):
        event = adapter.validate_python(frame)
        if frame["type"] == "TOOL_CALL_START":
            assert event.parent_message_id == "xs_call_1"
