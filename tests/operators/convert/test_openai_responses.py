"""OpenAI Responses converter: exact chunks for hand-written streams, and every recorded stream checked
against a deliberately naive reference computed from its raw events."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter import decode_jsonl, sse_events
from operators.convert.openai_responses import OpenAIResponsesConverter, convert_openai_responses
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta, ToolResult
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

FIXTURES = TESTS / "fixtures" / "openai_responses"
FIXTURE_FILES = sorted(FIXTURES.iterdir())


def convert(events: Iterable[Mapping[str, Any]]) -> list[ChunkResponse]:
    return run_converter(OpenAIResponsesConverter(id_factory=sequential_ids), events)


# -- event builders ----------------------------------------------------------------------------------

RAW_USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 12},
    "total_tokens": 130,
}
USAGE = TokenUsage(
    prompt_tokens=100, completion_tokens=30, total_tokens=130, cached_tokens=40, reasoning_tokens=12
)
STARTED = ChunkResponse(metadata={"id": "resp_1", "model": "gpt-test", "created": 1700000000})


def response(status: str = "in_progress", **fields: Any) -> dict[str, Any]:
    base = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-test",
        "status": status,
    }
    return base | fields


def created(**fields: Any) -> Event:
    return {"type": "response.created", "sequence_number": 0, "response": response(**fields)}


def completed(usage: Any = RAW_USAGE, **fields: Any) -> Event:
    return {"type": "response.completed", "response": response("completed", usage=usage, **fields)}


def added(output_index: int, item: Event) -> Event:
    return {"type": "response.output_item.added", "output_index": output_index, "item": item}


def done(output_index: int, item: Event) -> Event:
    return {"type": "response.output_item.done", "output_index": output_index, "item": item}


def delta(event_type: str, output_index: int, item_id: str, text: str, **fields: Any) -> Event:
    return {"type": event_type, "output_index": output_index, "item_id": item_id, "delta": text} | fields


def text_delta(text: str, output_index: int = 0, item_id: str = "msg_1", content_index: int = 0) -> Event:
    return delta("response.output_text.delta", output_index, item_id, text, content_index=content_index)


def summary_delta(text: str, summary_index: int, output_index: int = 0, item_id: str = "rs_1") -> Event:
    event_type = "response.reasoning_summary_text.delta"
    return delta(event_type, output_index, item_id, text, summary_index=summary_index)


def arguments_delta(text: str, output_index: int, item_id: str) -> Event:
    return delta("response.function_call_arguments.delta", output_index, item_id, text)


def function_call(item_id: str, call_id: str | None, name: str, arguments: str = "", **fields: Any) -> Event:
    item = {
        "type": "function_call",
        "id": item_id,
        "name": name,
        "arguments": arguments,
        "status": "in_progress",
    }
    if call_id is not None:
        item["call_id"] = call_id
    return item | fields


def calls(*deltas: ToolCallDelta) -> ChunkResponse:
    return ChunkResponse(tool_calls=list(deltas))


def end(
    finish_reason: str, stop_reason: str = "completed", usage: TokenUsage | None = USAGE
) -> ChunkResponse:
    return ChunkResponse(
        is_complete=True, usage=usage, finish_reason=finish_reason, metadata={"stop_reason": stop_reason}
    )


# -- text, refusal, metadata -------------------------------------------------------------------------


def test_text_message_gives_metadata_text_and_a_complete_last_chunk() -> None:
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": [], "status": "in_progress"}
    part = {"type": "output_text", "text": "", "annotations": []}
    finished = message | {"content": [part | {"text": "Hello world"}], "status": "completed"}
    events = [
        created(),
        {"type": "response.in_progress", "response": response()},
        added(0, message),
        {"type": "response.content_part.added", "output_index": 0, "item_id": "msg_1", "part": part},
        text_delta("Hello"),
        text_delta(" world"),
        {"type": "response.output_text.done", "output_index": 0, "item_id": "msg_1", "text": "Hello world"},
        {"type": "response.content_part.done", "output_index": 0, "item_id": "msg_1", "part": part},
        done(0, finished),
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        ChunkResponse(content="Hello"),
        ChunkResponse(content=" world"),
        end("stop"),
    ]


def test_metadata_reports_only_new_or_changed_facts() -> None:
    events = [
        {"type": "response.queued", "response": response("queued", service_tier="auto")},
        created(service_tier="auto"),
        {"type": "response.in_progress", "response": response(service_tier="auto")},
        completed(service_tier="default"),
    ]
    assert convert(events) == [
        ChunkResponse(
            metadata={"id": "resp_1", "model": "gpt-test", "created": 1700000000, "service_tier": "auto"}
        ),
        ChunkResponse(
            is_complete=True,
            usage=USAGE,
            finish_reason="stop",
            metadata={"service_tier": "default", "stop_reason": "completed"},
        ),
    ]


def test_refusal_streams_in_the_refusal_field() -> None:
    events = [
        created(),
        delta("response.refusal.delta", 0, "msg_1", "I can't", content_index=0),
        delta("response.refusal.delta", 0, "msg_1", " help.", content_index=0),
        {"type": "response.refusal.done", "output_index": 0, "item_id": "msg_1", "refusal": "I can't help."},
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        ChunkResponse(refusal="I can't"),
        ChunkResponse(refusal=" help."),
        end("stop"),
    ]


def test_text_sent_only_in_done_events_or_the_finished_item_is_emitted_once() -> None:
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    finished = message | {
        "content": [
            {"type": "output_text", "text": "first"},
            {"type": "output_text", "text": "second"},
            {"type": "refusal", "refusal": "no"},
        ]
    }
    events = [
        created(),
        added(0, message),
        {"type": "response.output_text.done", "output_index": 0, "item_id": "msg_1", "text": "first"},
        done(0, finished),
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        ChunkResponse(content="first"),
        ChunkResponse(content="second", refusal="no"),
        end("stop"),
    ]


def test_streamed_text_is_not_repeated_by_done_events() -> None:
    finished = {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "ab"}]}
    events = [
        text_delta("a"),
        text_delta("b"),
        {"type": "response.output_text.done", "output_index": 0, "item_id": "msg_1", "text": "ab"},
        done(0, finished),
    ]
    assert convert(events) == [ChunkResponse(content="a"), ChunkResponse(content="b")]


# -- reasoning -----------------------------------------------------------------------------------------


def test_reasoning_summary_parts_are_separated_by_a_blank_line() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "partial"}
    finished = reasoning | {
        "summary": [
            {"type": "summary_text", "text": "**A**\n\nx"},
            {"type": "summary_text", "text": "**B**"},
        ],
        "encrypted_content": "final",
    }
    events = [
        created(),
        added(0, reasoning),
        {
            "type": "response.reasoning_summary_part.added",
            "output_index": 0,
            "item_id": "rs_1",
            "summary_index": 0,
        },
        summary_delta("**A**", 0),
        summary_delta("\n\nx", 0),
        {
            "type": "response.reasoning_summary_text.done",
            "output_index": 0,
            "item_id": "rs_1",
            "text": "**A**\n\nx",
        },
        summary_delta("**B**", 1),
        done(0, finished),
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        ChunkResponse(reasoning_id="rs_1"),
        ChunkResponse(reasoning="**A**", reasoning_id="rs_1"),
        ChunkResponse(reasoning="\n\nx", reasoning_id="rs_1"),
        ChunkResponse(reasoning="\n\n**B**", reasoning_id="rs_1"),
        ChunkResponse(encrypted_reasoning="final", reasoning_id="rs_1", reasoning_done=True),
        end("stop"),
    ]


def test_reasoning_items_are_separate_blocks_with_their_ids() -> None:
    event_type = "response.reasoning_text.delta"
    events = [
        added(0, {"type": "reasoning", "id": "rs_1", "summary": []}),
        delta(event_type, 0, "rs_1", "think", content_index=0),
        delta(event_type, 0, "rs_1", "ing", content_index=0),
        done(0, {"type": "reasoning", "id": "rs_1", "summary": [], "content": []}),
        added(1, {"type": "reasoning", "id": "rs_2", "summary": []}),
        delta(event_type, 1, "rs_2", "more", content_index=0),
    ]
    assert convert(events) == [
        ChunkResponse(reasoning_id="rs_1"),
        ChunkResponse(reasoning="think", reasoning_id="rs_1"),
        ChunkResponse(reasoning="ing", reasoning_id="rs_1"),
        ChunkResponse(reasoning_id="rs_1", reasoning_done=True),
        ChunkResponse(reasoning_id="rs_2"),
        ChunkResponse(reasoning="more", reasoning_id="rs_2"),
    ]


def test_reasoning_only_in_the_finished_item_is_emitted_with_its_encrypted_content() -> None:
    finished = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "S1"}, {"type": "summary_text", "text": "S2"}],
        "content": [{"type": "reasoning_text", "text": "R"}],
        "encrypted_content": "blob",
    }
    assert convert([done(0, finished)]) == [
        ChunkResponse(
            reasoning="S1\n\nS2\n\nR", encrypted_reasoning="blob", reasoning_id="rs_1", reasoning_done=True
        )
    ]


def test_encrypted_content_of_the_added_item_is_the_fallback_and_given_once() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "early"}
    events = [added(0, reasoning), done(0, reasoning | {"encrypted_content": None}), done(0, reasoning)]
    assert convert(events) == [
        ChunkResponse(reasoning_id="rs_1"),
        ChunkResponse(encrypted_reasoning="early", reasoning_id="rs_1", reasoning_done=True),
    ]


# -- function calls ------------------------------------------------------------------------------------


def test_function_call_uses_call_id_and_positions_calls_from_zero() -> None:
    first = function_call("fc_1", "call_a", "add")
    second = function_call("fc_2", "call_b", "multiply")
    events = [
        created(),
        added(0, {"type": "reasoning", "id": "rs_1", "summary": []}),
        done(0, {"type": "reasoning", "id": "rs_1", "summary": []}),
        added(1, first),
        arguments_delta('{"a":', 1, "fc_1"),
        arguments_delta("2}", 1, "fc_1"),
        {
            "type": "response.function_call_arguments.done",
            "output_index": 1,
            "item_id": "fc_1",
            "arguments": '{"a":2}',
        },
        done(1, first | {"arguments": '{"a":2}', "status": "completed"}),
        added(2, second),
        arguments_delta("{}", 2, "fc_2"),
        done(2, second | {"arguments": "{}", "status": "completed"}),
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        ChunkResponse(reasoning_id="rs_1"),
        ChunkResponse(reasoning_id="rs_1", reasoning_done=True),
        calls(ToolCallDelta(0, "call_a", "add")),
        calls(ToolCallDelta(0, arguments_delta='{"a":')),
        calls(ToolCallDelta(0, arguments_delta="2}")),
        calls(ToolCallDelta(0, finished=True)),
        calls(ToolCallDelta(1, "call_b", "multiply")),
        calls(ToolCallDelta(1, arguments_delta="{}")),
        calls(ToolCallDelta(1, finished=True)),
        end("tool_calls"),
    ]


def test_arguments_without_deltas_come_from_the_done_event() -> None:
    call = function_call("fc_1", "call_a", "weather")
    arguments = '{"location":"Paris"}'
    events = [
        added(0, call),
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "item_id": "fc_1",
            "arguments": arguments,
        },
        done(0, call | {"arguments": arguments}),
    ]
    assert convert(events) == [
        calls(ToolCallDelta(0, "call_a", "weather")),
        calls(ToolCallDelta(0, arguments_delta=arguments)),
        calls(ToolCallDelta(0, finished=True)),
    ]


def test_arguments_only_in_the_finished_item_come_with_finished() -> None:
    call = function_call("fc_1", "call_a", "weather")
    events = [added(0, call), done(0, call | {"arguments": '{"x":1}'})]
    assert convert(events) == [
        calls(ToolCallDelta(0, "call_a", "weather")),
        calls(ToolCallDelta(0, arguments_delta='{"x":1}', finished=True)),
    ]


def test_a_call_item_only_seen_done_is_started_and_finished_in_one_delta() -> None:
    events = [done(3, function_call("fc_1", "call_a", "weather", '{"x":1}'))]
    assert convert(events) == [calls(ToolCallDelta(0, "call_a", "weather", '{"x":1}', finished=True))]


def test_a_call_without_call_id_gets_one_from_the_id_factory() -> None:
    events = [added(0, function_call("fc_1", None, "a")), added(1, function_call("fc_2", "", "b"))]
    assert convert(events) == [
        calls(ToolCallDelta(0, "gen_0", "a")),
        calls(ToolCallDelta(1, "gen_1", "b")),
    ]


def test_deltas_with_rotating_item_ids_are_found_by_output_index() -> None:
    call = function_call("capture-1", "call_a", "weather")
    events = [
        added(0, call),
        arguments_delta("{}", 0, "capture-2"),
        done(0, call | {"id": "capture-3", "arguments": "{}"}),
    ]
    assert convert(events) == [
        calls(ToolCallDelta(0, "call_a", "weather")),
        calls(ToolCallDelta(0, arguments_delta="{}")),
        calls(ToolCallDelta(0, finished=True)),
    ]


def test_deltas_after_a_call_finished_are_ignored() -> None:
    call = function_call("fc_1", "call_a", "f")
    events = [added(0, call), done(0, call | {"arguments": "{}"}), arguments_delta("x", 0, "fc_1")]
    assert convert(events) == [
        calls(ToolCallDelta(0, "call_a", "f")),
        calls(ToolCallDelta(0, arguments_delta="{}", finished=True)),
    ]


# -- custom, built-in, MCP and provider-executed items -------------------------------------------------


def test_custom_tool_call_streams_free_text_input() -> None:
    item = {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_c", "name": "write_sql", "input": ""}
    events = [
        created(),
        added(0, item),
        delta("response.custom_tool_call_input.delta", 0, "ct_1", "SELECT "),
        delta("response.custom_tool_call_input.delta", 0, "ct_1", "1"),
        {
            "type": "response.custom_tool_call_input.done",
            "output_index": 0,
            "item_id": "ct_1",
            "input": "SELECT 1",
        },
        done(0, item | {"input": "SELECT 1"}),
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        calls(ToolCallDelta(0, "call_c", "write_sql", kind="custom")),
        calls(ToolCallDelta(0, arguments_delta="SELECT ", kind="custom")),
        calls(ToolCallDelta(0, arguments_delta="1", kind="custom")),
        calls(ToolCallDelta(0, finished=True, kind="custom")),
        end("tool_calls"),
    ]


def test_custom_tool_input_from_the_done_event_or_the_finished_item() -> None:
    item = {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_c", "name": "sql", "input": ""}
    other = item | {"id": "ct_2", "call_id": "call_d"}
    events = [
        added(0, item),
        {"type": "response.custom_tool_call_input.done", "output_index": 0, "item_id": "ct_1", "input": "A"},
        done(0, item | {"input": "A"}),
        added(1, other),
        done(1, other | {"input": "B"}),
    ]
    assert convert(events) == [
        calls(ToolCallDelta(0, "call_c", "sql", kind="custom")),
        calls(ToolCallDelta(0, arguments_delta="A", kind="custom")),
        calls(ToolCallDelta(0, finished=True, kind="custom")),
        calls(ToolCallDelta(1, "call_d", "sql", kind="custom")),
        calls(ToolCallDelta(1, arguments_delta="B", finished=True, kind="custom")),
    ]


@pytest.mark.parametrize(
    ("item_type", "field", "value", "name", "arguments"),
    [
        (
            "local_shell_call",
            "action",
            {"type": "exec", "command": ["ls"]},
            "local_shell",
            {"type": "exec", "command": ["ls"]},
        ),
        (
            "shell_call",
            "action",
            {"commands": ["pwd"], "timeout_ms": 1000},
            "shell",
            {"commands": ["pwd"], "timeout_ms": 1000},
        ),
        (
            "computer_call",
            "action",
            {"type": "click", "x": 1, "y": 2},
            "computer",
            {"type": "click", "x": 1, "y": 2},
        ),
        (
            "computer_call",
            "actions",
            [{"type": "screenshot"}],
            "computer",
            {"actions": [{"type": "screenshot"}]},
        ),
        (
            "apply_patch_call",
            "operation",
            {"type": "delete_file", "path": "a.py"},
            "apply_patch",
            {"type": "delete_file", "path": "a.py"},
        ),
    ],
)
def test_client_executed_builtin_calls_are_function_calls_with_the_action_as_arguments(
    item_type: str, field: str, value: Any, name: str, arguments: dict[str, Any]
) -> None:
    item = {"type": item_type, "id": "it_1", "call_id": "call_x", "status": "in_progress"}
    events = [created(), added(0, item), done(0, item | {field: value, "status": "completed"}), completed()]
    chunks = convert(events)
    assert chunks[:2] == [STARTED, calls(ToolCallDelta(0, "call_x", name))]
    last_call = chunks[2].tool_calls
    assert last_call is not None
    assert [(d.index, d.call_id, d.name, d.finished, d.kind) for d in last_call] == [
        (0, None, None, True, "function")
    ]
    assert json.loads(last_call[0].arguments_delta or "") == arguments
    assert chunks[3:] == [end("tool_calls")]


def test_mcp_call_is_a_server_call_and_does_not_make_finish_reason_tool_calls() -> None:
    item = {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "search", "arguments": ""}
    events = [
        created(),
        added(0, item),
        delta("response.mcp_call_arguments.delta", 0, "mcp_1", '{"q":'),
        delta("response.mcp_call_arguments.delta", 0, "mcp_1", '"x"}'),
        {
            "type": "response.mcp_call_arguments.done",
            "output_index": 0,
            "item_id": "mcp_1",
            "arguments": '{"q":"x"}',
        },
        done(0, item | {"arguments": '{"q":"x"}', "output": "found"}),
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        calls(ToolCallDelta(0, "mcp_1", "search", kind="server")),
        calls(ToolCallDelta(0, arguments_delta='{"q":', kind="server")),
        calls(ToolCallDelta(0, arguments_delta='"x"}', kind="server")),
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, finished=True, kind="server")],
            tool_results=[
                ToolResult(call_id="mcp_1", name="search", content="found", result_type="mcp_call")
            ],
        ),
        end("stop"),
    ]


def test_a_failed_mcp_call_gives_its_error_as_the_result() -> None:
    item = {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "search", "arguments": "{}"}
    error = {"type": "mcp_protocol_error", "code": 32600, "message": "boom"}
    assert convert([added(0, item), done(0, item | {"output": None, "error": error})]) == [
        calls(ToolCallDelta(0, "mcp_1", "search", "{}", kind="server")),
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, finished=True, kind="server")],
            tool_results=[
                ToolResult(
                    call_id="mcp_1", name="search", content=error, is_error=True, result_type="mcp_call"
                )
            ],
        ),
    ]


WEB_SOURCES = [{"type": "url", "url": "https://example.com"}]


@pytest.mark.parametrize(
    ("added_item", "done_item", "name", "arguments", "result"),
    [
        (
            {"type": "web_search_call", "id": "ws_1", "status": "in_progress"},
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {"type": "search", "query": "x", "sources": WEB_SOURCES},
            },
            "web_search",
            '{"query":"x","type":"search"}',
            WEB_SOURCES,
        ),
        (
            {
                "type": "file_search_call",
                "id": "fs_1",
                "status": "in_progress",
                "queries": [],
                "results": None,
            },
            {
                "type": "file_search_call",
                "id": "fs_1",
                "status": "completed",
                "queries": ["q"],
                "results": [{"file_id": "f", "text": "t"}],
            },
            "file_search",
            '{"queries":["q"]}',
            [{"file_id": "f", "text": "t"}],
        ),
        (
            {
                "type": "code_interpreter_call",
                "id": "ci_1",
                "status": "in_progress",
                "code": "",
                "outputs": [],
            },
            {
                "type": "code_interpreter_call",
                "id": "ci_1",
                "status": "completed",
                "code": "print(1)",
                "container_id": "cntr_1",
                "outputs": [{"type": "logs", "logs": "1"}],
            },
            "code_interpreter",
            '{"code":"print(1)","container_id":"cntr_1"}',
            [{"type": "logs", "logs": "1"}],
        ),
    ],
    ids=["web_search", "file_search", "code_interpreter"],
)
def test_server_builtin_calls_are_server_calls_with_their_results(
    added_item: Event, done_item: Event, name: str, arguments: str, result: Any
) -> None:
    events = [created(), added(0, added_item), done(0, done_item), completed()]
    item_id = added_item["id"]
    assert convert(events) == [
        STARTED,
        calls(ToolCallDelta(0, item_id, name, kind="server")),
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, arguments_delta=arguments, finished=True, kind="server")],
            tool_results=[
                ToolResult(call_id=item_id, name=name, content=result, result_type=done_item["type"])
            ],
        ),
        end("stop"),
    ]


def test_a_failed_server_builtin_call_is_an_error_result_and_one_seen_only_done_starts_and_ends() -> None:
    item = {"type": "web_search_call", "id": "ws_1", "status": "failed"}
    assert convert([done(0, item)]) == [
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, "ws_1", "web_search", "{}", finished=True, kind="server")],
            tool_results=[
                ToolResult(call_id="ws_1", name="web_search", is_error=True, result_type="web_search_call")
            ],
        )
    ]


def test_code_interpreter_code_streams_as_the_code_argument() -> None:
    item = {"type": "code_interpreter_call", "id": "ci_1", "code": "", "container_id": "c", "outputs": []}
    events = [
        added(0, item),
        delta("response.code_interpreter_call_code.delta", 0, "ci_1", 'print("é'),
        delta("response.code_interpreter_call_code.delta", 0, "ci_1", '")\n'),
        {
            "type": "response.code_interpreter_call_code.done",
            "output_index": 0,
            "item_id": "ci_1",
            "code": "x",
        },
        done(0, item | {"code": 'print("é")\n', "outputs": None}),
    ]
    chunks = convert(events)
    assert chunks == [
        calls(ToolCallDelta(0, "ci_1", "code_interpreter", kind="server")),
        calls(ToolCallDelta(0, arguments_delta='{"code":"print(\\"é', kind="server")),
        calls(ToolCallDelta(0, arguments_delta='\\")\\n', kind="server")),
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, arguments_delta='","container_id":"c"}', finished=True, kind="server")
            ],
            tool_results=[
                ToolResult(call_id="ci_1", name="code_interpreter", result_type="code_interpreter_call")
            ],
        ),
    ]
    (call,) = fold_calls(chunks)
    assert json.loads(call.arguments) == {"code": 'print("é")\n', "container_id": "c"}


def test_annotations_are_citations_and_unstreamed_ones_come_with_the_finished_message() -> None:
    first = {"type": "url_citation", "url": "https://a", "start_index": 0, "end_index": 2}
    second = {"type": "file_citation", "file_id": "f", "index": 2}
    message = {"type": "message", "id": "msg_1", "content": []}
    annotation = {
        "type": "response.output_text.annotation.added",
        "output_index": 0,
        "item_id": "msg_1",
        "content_index": 0,
        "annotation_index": 0,
        "annotation": first,
    }
    finished = message | {
        "content": [
            {"type": "output_text", "text": "Hi", "annotations": [first, second]},
            {"type": "output_text", "text": "!", "annotations": [second]},
        ]
    }
    events = [added(0, message), text_delta("Hi"), annotation, done(0, finished)]
    assert convert(events) == [
        ChunkResponse(content="Hi"),
        ChunkResponse(citations=[first]),
        ChunkResponse(content="!", citations=[second, second]),
    ]


def test_a_duplicated_output_item_added_is_ignored() -> None:
    call = function_call("fc_1", "call_a", "add")
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    events = [
        added(0, reasoning),
        added(0, reasoning),
        done(0, reasoning),
        added(1, call),
        arguments_delta("{}", 1, "fc_1"),
        added(1, call),
        added(1, call | {"id": "fc_rotated"}),  # a proxy that rotates ids: same position, same type
        done(1, call | {"arguments": "{}"}),
    ]
    assert convert(events) == [
        ChunkResponse(reasoning_id="rs_1"),
        ChunkResponse(reasoning_id="rs_1", reasoning_done=True),
        calls(ToolCallDelta(0, "call_a", "add")),
        calls(ToolCallDelta(0, arguments_delta="{}")),
        calls(ToolCallDelta(0, finished=True)),
    ]


@pytest.mark.parametrize(
    ("again", "message"),
    [
        (added(1, function_call("fc_1", "call_a", "add")), "item 'fc_1' was announced before"),
        (added(0, {"type": "message", "id": "fc_1", "content": []}), "item 'fc_1' was announced before"),
        (added(0, {"type": "message", "id": "msg_9"}), "output_index 0 already holds the unfinished"),
    ],
)
def test_a_conflicting_output_item_added_is_an_error(again: Event, message: str) -> None:
    converter = OpenAIResponsesConverter()
    converter.feed(added(0, function_call("fc_1", "call_a", "add")))
    with pytest.raises(ConverterError, match=f"event 1 \\(response.output_item.added\\): {message}"):
        converter.feed(again)


def test_created_is_an_integer_from_sdk_objects_too() -> None:
    chunks = convert([created(created_at=1700000000.0)])
    assert chunks == [STARTED]
    assert type(chunks[0].metadata["created"]) is int  # type: ignore[index]


@pytest.mark.parametrize(
    "item",
    [
        {"type": "image_generation_call", "id": "ig_1", "result": "aGk=", "status": "completed"},
        {"type": "tool_search_call", "id": "ts_1", "execution": "server", "arguments": {"paths": ["a"]}},
        {"type": "mcp_list_tools", "id": "ml_1", "server_label": "docs", "tools": []},
    ],
)
def test_other_provider_executed_items_make_no_tool_call(item: Event) -> None:
    events = [created(), added(0, item), done(0, item), completed()]
    assert convert(events) == [STARTED, end("stop")]


def test_client_executed_tool_search_is_a_function_call() -> None:
    item = {
        "type": "tool_search_call",
        "id": "ts_1",
        "call_id": "call_t",
        "execution": "client",
        "arguments": {},
    }
    events = [added(0, item), done(0, item | {"arguments": {"query": "weather"}})]
    assert convert(events) == [
        calls(ToolCallDelta(0, "call_t", "tool_search")),
        calls(ToolCallDelta(0, arguments_delta='{"query":"weather"}', finished=True)),
    ]


# -- how a response ends ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("details", "finish_reason", "stop_reason"),
    [
        ({"reason": "max_output_tokens"}, "length", "max_output_tokens"),
        ({"reason": "content_filter"}, "content_filter", "content_filter"),
        ({"reason": "Something_New"}, "something_new", "Something_New"),
        (None, "incomplete", "incomplete"),
    ],
)
def test_incomplete_response(details: Any, finish_reason: str, stop_reason: str) -> None:
    event = {
        "type": "response.incomplete",
        "response": response("incomplete", incomplete_details=details, usage=RAW_USAGE),
    }
    assert convert([event]) == [
        ChunkResponse(
            is_complete=True,
            usage=USAGE,
            finish_reason=finish_reason,
            metadata={"id": "resp_1", "model": "gpt-test", "created": 1700000000, "stop_reason": stop_reason},
        )
    ]


def test_usage_without_total_or_details_and_with_cache_writes() -> None:
    raw = {
        "input_tokens": 5,
        "output_tokens": 7,
        "input_tokens_details": {"cached_tokens": 1, "cache_write_tokens": 2},
    }
    expected = TokenUsage(
        prompt_tokens=5, completion_tokens=7, total_tokens=12, cached_tokens=1, cache_creation_tokens=2
    )
    assert convert([created(), completed(usage=raw)]) == [STARTED, end("stop", usage=expected)]
    assert convert([created(), completed(usage=None)]) == [STARTED, end("stop", usage=None)]


def test_response_failed_raises_provider_error_with_message_and_code() -> None:
    converter = OpenAIResponsesConverter()
    assert converter.feed(created()) == [STARTED]
    failed = {
        "type": "response.failed",
        "response": response("failed", error={"code": "server_error", "message": "The model crashed."}),
    }
    with pytest.raises(ProviderError, match="The model crashed") as raised:
        converter.feed(failed)
    assert raised.value.kind == "server_error"
    assert raised.value.payload == failed


@pytest.mark.parametrize(
    "event",
    [
        {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": None},
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "code": "rate_limit_exceeded",
                "message": "Slow down.",
            },
        },
    ],
)
def test_error_event_raises_provider_error(event: Event) -> None:
    with pytest.raises(ProviderError, match="Slow down") as raised:
        OpenAIResponsesConverter().feed(event)
    assert raised.value.kind == "rate_limit_exceeded"


def test_a_new_response_after_completion_starts_over() -> None:
    first = [created(), added(0, function_call("fc_1", "call_a", "f")), completed()]
    second = [created(id="resp_2"), added(0, function_call("fc_2", "call_b", "g")), completed(id="resp_2")]
    chunks = convert(first + second)
    assert chunks[3:] == [
        ChunkResponse(metadata={"id": "resp_2", "model": "gpt-test", "created": 1700000000}),
        calls(ToolCallDelta(0, "call_b", "g")),
        end("tool_calls"),
    ]


def test_unknown_events_and_empty_deltas_give_nothing() -> None:
    events: list[Event] = [
        {"type": "response.something_new", "sequence_number": 9},
        text_delta(""),
        {"type": "response.content_part.added", "output_index": 0, "item_id": "m", "part": {}},
    ]
    assert convert(events) == []


def test_a_truncated_stream_ends_without_a_complete_chunk() -> None:
    assert convert([created(), text_delta("cut")]) == [STARTED, ChunkResponse(content="cut")]


# -- malformed input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"type": "response.output_text.delta", "output_index": 0, "item_id": "m"}, "event 1 .*'delta'"),
        ({"type": "response.output_text.delta", "output_index": "0", "delta": "x"}, "'output_index'"),
        ({"type": "response.output_item.added", "output_index": 0}, "'item'"),
        (
            {"type": "response.output_text.annotation.added", "output_index": 0, "annotation": 1},
            "'annotation'",
        ),
        (
            {"type": "response.output_item.added", "item": {"type": "function_call", "call_id": "c"}},
            "'item.name'",
        ),
        ({"type": "response.created", "response": None}, "'response'"),
        ({"sequence_number": 1}, "'type'"),
        ({"type": "response.completed", "response": {"usage": {"input_tokens": "9"}}}, "input_tokens"),
        (arguments_delta("{}", 5, "fc_unknown"), "fc_unknown.*not a call"),
    ],
)
def test_malformed_events_raise_converter_error_naming_event_and_field(event: Event, message: str) -> None:
    converter = OpenAIResponsesConverter()
    converter.feed({"type": "response.something_new"})
    with pytest.raises(ConverterError, match=message) as raised:
        converter.feed(event)
    assert raised.value.event_number == 1


def test_an_event_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(ConverterError, match="event 0: the event should be an object, got str"):
        OpenAIResponsesConverter().feed("data: {}")  # type: ignore[arg-type]


# -- the async operator -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_operator_yields_the_core_chunks() -> None:
    events = load_events(FIXTURES / "pydantic-ai_gpt-4o_function_call.sse")
    chunks = await collect(convert_openai_responses(iterate(events), id_factory=sequential_ids))
    assert chunks == convert(events)


@pytest.mark.anyio
async def test_operator_yields_everything_before_a_failure() -> None:
    failed = {
        "type": "response.failed",
        "response": response("failed", error={"message": "boom", "code": "x"}),
    }
    received: list[ChunkResponse] = []
    with pytest.raises(ProviderError, match="boom"):
        await collect(convert_openai_responses(iterate([created(), text_delta("hi"), failed])), received)
    assert received == [STARTED, ChunkResponse(content="hi")]


RECORDED_BYTES = {path: path.read_bytes() for path in FIXTURE_FILES}


@pytest.mark.anyio
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[path.name for path in FIXTURE_FILES])
async def test_recording_bytes_through_the_decoder_and_the_operator(path: Path) -> None:
    """The whole adapter path: raw recorded bytes in 7-byte chunks, decoded by operators.adapter.sse."""
    raw = chunked_bytes(RECORDED_BYTES[path], 7)
    events = sse_events(raw) if path.suffix == ".sse" else decode_jsonl(raw)
    chunks = await collect(events | convert_openai_responses.pipe(id_factory=sequential_ids))
    assert chunks == convert(load_events(path))


# -- every recording against a naive reference --------------------------------------------------------

CLIENT_CALL_NAMES = {
    "function_call": None,
    "custom_tool_call": None,
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "computer_call": "computer",
    "apply_patch_call": "apply_patch",
}
SERVER_CALL_NAMES = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
    "mcp_call": None,
}
SERVER_RESULTS = {"web_search_call": None, "file_search_call": "results", "code_interpreter_call": "outputs"}


def server_call(item: Event) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished provider-executed call item: the call as folded, and its result."""
    kind = item["type"]
    if kind == "web_search_call":
        arguments = {key: value for key, value in item.get("action", {}).items() if key != "sources"}
        content = item.get("action", {}).get("sources")
    elif kind == "file_search_call":
        arguments, content = {"queries": item["queries"]}, item["results"]
    elif kind == "code_interpreter_call":
        arguments, content = {"code": item["code"], "container_id": item["container_id"]}, item["outputs"]
    else:
        arguments = json.loads(item["arguments"])
        content = item["output"] if item.get("error") is None else item["error"]
    name = SERVER_CALL_NAMES[kind] or item["name"]
    call = {"id": item["id"], "name": name, "kind": "server", "arguments": arguments, "finished": True}
    failed = item.get("status") == "failed" or (kind == "mcp_call" and item.get("error") is not None)
    return call, {"call_id": item["id"], "name": name, "content": content, "is_error": failed}


def reference(events: list[Event]) -> dict[str, Any]:
    """What a response holds, computed the simple way: join every delta, read finished items whole."""
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    reasoning_parts: dict[tuple[int, str, int], list[str]] = {}
    for e in events:
        if e["type"] == "response.reasoning_summary_text.delta":
            reasoning_parts.setdefault((e["output_index"], "summary", e["summary_index"]), []).append(
                e["delta"]
            )
        elif e["type"] == "response.reasoning_text.delta":
            reasoning_parts.setdefault((e["output_index"], "text", e["content_index"]), []).append(e["delta"])
    arguments: dict[int, list[str]] = {}
    for e in events:
        if e["type"] in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            arguments.setdefault(e["output_index"], []).append(e["delta"])
    calls = []
    results = []
    encrypted = []
    blocks = []
    client_calls = False
    announced = {
        e["output_index"]: e["item"]["id"] for e in events if e["type"] == "response.output_item.added"
    }
    for e in events:
        if e["type"] != "response.output_item.done":
            continue
        item = e["item"]
        if item["type"] == "reasoning" and item.get("encrypted_content"):
            encrypted.append(item["encrypted_content"])
        if item["type"] == "reasoning":
            parts = [*item.get("summary", []), *(item.get("content") or [])]
            # the id the item was announced with: a proxy may rotate ids afterwards
            block_id = announced.get(e["output_index"], item["id"])
            blocks.append((block_id, "\n\n".join(part["text"] for part in parts)))
        if item["type"] in SERVER_CALL_NAMES:
            call, result = server_call(item)
            calls.append(call)
            results.append(result)
        if item["type"] == "shell_call" and item.get("environment", {}).get("type", "local") != "local":
            call = {"id": item["call_id"], "name": "shell", "kind": "server", "arguments": item["action"]}
            calls.append(call | {"finished": True})
            continue
        if item["type"] == "shell_call_output":
            failed = item.get("status") == "failed"
            results.append(
                {"call_id": item["call_id"], "name": "shell", "content": item["output"], "is_error": failed}
            )
        if item["type"] not in CLIENT_CALL_NAMES:
            continue
        streamed = "".join(arguments.get(e["output_index"], []))
        if item["type"] == "function_call":
            value = json.loads(streamed or item["arguments"])
        elif item["type"] == "custom_tool_call":
            value = streamed or item["input"]
        else:
            value = item.get("action", item.get("operation"))
        kind = "custom" if item["type"] == "custom_tool_call" else "function"
        name = CLIENT_CALL_NAMES[item["type"]] or item["name"]
        calls.append(
            {"id": item["call_id"], "name": name, "kind": kind, "arguments": value, "finished": True}
        )
        client_calls = True
    last = events[-1]["response"]
    citations = [
        annotation
        for item in last["output"]
        if item["type"] == "message"
        for part in item["content"]
        for annotation in part.get("annotations", [])
    ]
    raw_usage = last["usage"]
    usage = TokenUsage(
        prompt_tokens=raw_usage["input_tokens"],
        completion_tokens=raw_usage["output_tokens"],
        total_tokens=raw_usage["total_tokens"],
        cached_tokens=raw_usage["input_tokens_details"]["cached_tokens"],
        cache_creation_tokens=raw_usage["input_tokens_details"].get("cache_write_tokens"),
        reasoning_tokens=raw_usage["output_tokens_details"]["reasoning_tokens"],
    )
    return {
        "content": text,
        "reasoning": "\n\n".join("".join(part) for part in reasoning_parts.values()),
        "encrypted": encrypted,
        "calls": calls,
        "results": results,
        "citations": citations,
        "reasoning_blocks": blocks,
        "finish_reason": "tool_calls" if client_calls else "stop",
        "usage": usage,
        "id": last["id"],
        "model": last["model"],
    }


def folded(chunks: list[ChunkResponse]) -> dict[str, Any]:
    """The converter's chunks folded the way a consumer would."""
    calls = fold_calls(chunks)
    metadata: dict[str, Any] = {}
    blocks: list[tuple[str | None, str]] = []
    block_id: str | None = None
    block_text: list[str] = []
    for chunk in chunks:
        metadata.update(chunk.metadata or {})
        block_id = chunk.reasoning_id or block_id
        block_text.append(chunk.reasoning or "")
        if chunk.reasoning_done:
            blocks.append((block_id, "".join(block_text)))
            block_id, block_text = None, []
    return {
        "content": "".join(chunk.content for chunk in chunks),
        "reasoning": "".join(chunk.reasoning or "" for chunk in chunks),
        "encrypted": [chunk.encrypted_reasoning for chunk in chunks if chunk.encrypted_reasoning],
        "calls": [
            {
                "id": call.call_id,
                "name": call.name,
                "kind": call.kind,
                "arguments": call.arguments if call.kind == "custom" else json.loads(call.arguments),
                "finished": call.finished,
            }
            for call in calls
        ],
        "results": [
            {
                "call_id": result.call_id,
                "name": result.name,
                "content": result.content,
                "is_error": result.is_error,
            }
            for chunk in chunks
            for result in chunk.tool_results or []
        ],
        "citations": [citation for chunk in chunks for citation in chunk.citations or []],
        "reasoning_blocks": blocks,
        "finish_reason": chunks[-1].finish_reason,
        "usage": chunks[-1].usage,
        "id": metadata.get("id"),
        "model": metadata.get("model"),
    }


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[path.name for path in FIXTURE_FILES])
def test_recording_matches_the_naive_reference(path: Path) -> None:
    events = load_events(path)
    chunks = convert(events)
    assert folded(chunks) == reference(events)
    assert [chunk.is_complete for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    assert all(chunk != ChunkResponse() for chunk in chunks)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[path.name for path in FIXTURE_FILES])
def test_recording_text_equals_the_final_response_snapshot(path: Path) -> None:
    """Cross-check of the reference: the joined deltas equal the texts of ``response.completed``."""
    events = load_events(path)
    output = events[-1]["response"]["output"]
    chunks = convert(events)
    texts = [part["text"] for item in output if item["type"] == "message" for part in item["content"]]
    assert "".join(chunk.content for chunk in chunks) == "".join(texts)
    reasoning = [
        part["text"]
        for item in output
        if item["type"] == "reasoning"
        for part in [*item.get("summary", []), *(item.get("content") or [])]
    ]
    assert "".join(chunk.reasoning or "" for chunk in chunks) == "\n\n".join(reasoning)


def test_the_recordings_cover_what_they_are_meant_to() -> None:
    """Guards the reference test against vacuous fixtures: each feature appears in some recording."""
    results = {path.name: reference(load_events(path)) for path in FIXTURE_FILES}
    kinds = {call["kind"] for result in results.values() for call in result["calls"]}
    assert kinds == {"function", "custom", "server"}
    assert sum(len(result["results"]) for result in results.values()) >= 10
    assert sum(len(result["citations"]) for result in results.values()) >= 14
    assert sum(len(result["reasoning_blocks"]) > 1 for result in results.values()) >= 3
    assert sum(bool(result["encrypted"]) for result in results.values()) >= 6
    assert sum(bool(result["reasoning"]) for result in results.values()) >= 5
    assert sum(bool(result["content"]) for result in results.values()) >= 5
    assert results["vercel_gpt-5-codex_local_shell_call.jsonl"]["calls"][0]["name"] == "local_shell"
    hosted = results["vercel_gpt-5.2_hosted_shell_calls_with_outputs.jsonl"]
    assert [(call["name"], call["kind"]) for call in hosted["calls"]] == [("shell", "server")] * 2
    assert [result["call_id"] for result in hosted["results"]] == [call["id"] for call in hosted["calls"]]
    assert hosted["finish_reason"] == "stop"


# -- any split of the deltas gives the same result ---------------------------------------------------

SPLITTABLE = {
    "response.output_text.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
    "response.code_interpreter_call_code.delta",
}


def resplit(events: list[Event], cuts: list[int]) -> list[Event]:
    """Split each delta event in two (or leave it) at the cut chosen for it; empty halves are kept."""
    result: list[Event] = []
    for number, event in enumerate(events):
        if event["type"] not in SPLITTABLE:
            result.append(event)
            continue
        text = event["delta"]
        cut = cuts[number % len(cuts)] % (len(text) + 1)
        result.extend([event | {"delta": text[:cut]}, event | {"delta": text[cut:]}])
    return result


@settings(max_examples=60, deadline=None)
@given(
    path=st.sampled_from(FIXTURE_FILES),
    cuts=st.lists(st.integers(min_value=0, max_value=64), min_size=1, max_size=16),
)
def test_any_split_of_the_deltas_folds_to_the_same_response(path: Path, cuts: list[int]) -> None:
    events = load_events(path)
    assert folded(convert(resplit(events, cuts))) == folded(convert(events))


def test_a_message_known_only_from_its_deltas_still_gives_its_unstreamed_parts_when_done() -> None:
    finished = {
        "type": "message",
        "id": "msg_1",
        "content": [{"type": "output_text", "text": "ab"}, {"type": "output_text", "text": "cd"}],
    }
    events = [text_delta("a"), text_delta("b"), done(0, finished)]
    assert convert(events) == [
        ChunkResponse(content="a"),
        ChunkResponse(content="b"),
        ChunkResponse(content="cd"),
    ]
