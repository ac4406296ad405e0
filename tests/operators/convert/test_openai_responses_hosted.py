"""OpenAI Responses calls the provider runs without a built-in item type of their own: hosted shell calls
(with the ``shell_call_output`` of the same response as their result) and xAI's server-side custom calls."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline import process
from pipeline.models import ChunkResponse, ToolCallDelta, ToolResult
from pipeline.testing import collect, counter_segment_ids, sequential_call_ids
from tests.converter_cases import Event
from tests.operators.convert.test_openai_responses import (
    STARTED,
    USAGE,
    added,
    calls,
    completed,
    convert,
    created,
    done,
    end,
)

CONTAINER = {"type": "container_reference", "container_id": "cntr_1"}
ACTION = {"commands": ["uname -a"], "max_output_length": None, "timeout_ms": None}
OUTPUT = [{"outcome": {"type": "exit", "exit_code": 0}, "stderr": "", "stdout": "Linux\n"}]


def shell_call(status: str, environment: Any = CONTAINER, commands: list[str] | None = None) -> Event:
    """A ``shell_call`` item shaped as the recorded hosted ones (vercel/ai openai-shell-skills)."""
    action = ACTION if commands is None else {**ACTION, "commands": commands}
    item: Event = {
        "id": "sh_1",
        "type": "shell_call",
        "status": status,
        "action": action,
        "call_id": "call_1",
    }
    if environment is not None:
        item["environment"] = environment
    return item


def shell_output(output: list[Any], call_id: str = "call_1", status: str = "completed") -> Event:
    return {
        "id": "sho_1",
        "type": "shell_call_output",
        "status": status,
        "call_id": call_id,
        "max_output_length": None,
        "output": output,
    }


def hosted_shell_events(output_call_id: str = "call_1") -> list[Event]:
    return [
        created(tools=[{"type": "shell", "environment": CONTAINER}]),
        added(0, shell_call("in_progress", commands=[])),
        {
            "type": "response.shell_call_command.delta",
            "command_index": 0,
            "delta": "uname",
            "output_index": 0,
        },
        done(0, shell_call("completed")),
        added(1, shell_output([], output_call_id)),
        {
            "type": "response.shell_call_output_content.delta",
            "command_index": 0,
            "delta": {"stdout": "Linux\n"},
            "item_id": "sho_1",
            "output_index": 1,
        },
        done(1, shell_output(OUTPUT, output_call_id)),
        completed(),
    ]


ARGUMENTS = '{"commands":["uname -a"],"max_output_length":null,"timeout_ms":null}'


def test_a_hosted_shell_call_is_provider_executed_with_its_output_as_result_and_finishes_stop() -> None:
    assert convert(hosted_shell_events()) == [
        STARTED,
        calls(ToolCallDelta(0, "call_1", "shell", kind="server")),
        calls(ToolCallDelta(0, arguments_delta=ARGUMENTS, finished=True, kind="server")),
        ChunkResponse(
            tool_results=[
                ToolResult(call_id="call_1", name="shell", content=OUTPUT, result_type="shell_call_output")
            ]
        ),
        end("stop"),
    ]


def test_a_shell_call_output_answering_no_hosted_call_of_the_response_is_skipped() -> None:
    chunks = convert(hosted_shell_events(output_call_id="call_from_an_earlier_response"))
    assert [chunk.tool_results for chunk in chunks] == [None] * 4


@pytest.mark.parametrize("environment", [None, {"type": "local"}])
def test_a_local_shell_call_stays_a_client_call(environment: Any) -> None:
    events = [
        created(tools=[{"type": "shell"}]),
        added(0, shell_call("in_progress", environment, commands=[])),
        done(0, shell_call("completed", environment)),
        completed(),
    ]
    assert convert(events) == [
        STARTED,
        calls(ToolCallDelta(0, "call_1", "shell")),
        calls(ToolCallDelta(0, arguments_delta=ARGUMENTS, finished=True)),
        end("tool_calls"),
    ]


# xAI's x_search runs its steps as custom tool calls named after no tool of the request. The items below
# are those of vercel/ai packages/xai/src/responses/__fixtures__/xai-x-search-tool.chunks.txt @ed857f50f1.
X_SEARCH_TOOLS = [
    {
        "type": "x_search",
        "allowed_x_handles": ["xai", "elonmusk"],
        "enable_image_understanding": True,
        "enable_video_understanding": True,
    }
]
X_QUERY = '{"query":"from:xai filter:media","limit":20,"mode":"Latest"}'
X_ITEM_ID = "ctc_b7b464ea-cc85-d44a-0f2f-1f7320e703c3_xs_call_24148162"


def x_keyword_search(status: str, text: str) -> Event:
    return {
        "call_id": "xs_call_24148162",
        "input": text,
        "name": "x_keyword_search",
        "type": "custom_tool_call",
        "id": X_ITEM_ID,
        "status": status,
    }


def x_search_events(tools: list[Any]) -> list[Event]:
    return [
        created(tools=tools),
        added(0, x_keyword_search("in_progress", "")),
        {
            "type": "response.custom_tool_call_input.delta",
            "item_id": X_ITEM_ID,
            "output_index": 0,
            "delta": X_QUERY,
        },
        {
            "type": "response.custom_tool_call_input.done",
            "item_id": X_ITEM_ID,
            "output_index": 0,
            "input": X_QUERY,
        },
        done(0, x_keyword_search("completed", X_QUERY)),
        completed(),
    ]


def test_an_xai_custom_call_to_no_offered_tool_is_provider_executed_and_finishes_stop() -> None:
    assert convert(x_search_events(X_SEARCH_TOOLS)) == [
        STARTED,
        calls(ToolCallDelta(0, "xs_call_24148162", "x_keyword_search", kind="server")),
        calls(ToolCallDelta(0, arguments_delta=X_QUERY, kind="server")),
        calls(ToolCallDelta(0, finished=True, kind="server")),
        end("stop"),
    ]


def test_a_custom_call_to_an_offered_tool_or_without_a_tool_list_stays_a_client_call() -> None:
    offered = [*X_SEARCH_TOOLS, {"type": "custom", "name": "x_keyword_search"}]
    unlisted = [event for event in x_search_events([]) if event["type"] != "response.created"]
    for events in (x_search_events(offered), unlisted):
        chunks = convert(events)
        assert {call.kind for chunk in chunks for call in chunk.tool_calls or []} == {"custom"}
        assert chunks[-1].finish_reason == "tool_calls"


@pytest.mark.anyio
async def test_the_pipeline_shows_the_hosted_shell_call_and_its_output_and_runs_nothing() -> None:
    items = await collect(
        process(
            hosted_shell_events(),
            provider="openai-responses",
            id_factory=sequential_call_ids,
            segment_ids=counter_segment_ids(),
        )
    )
    meta = {"tool_name": "shell", "call_id": "call_1", "provider_executed": True}
    result_meta = {**meta, "result_type": "shell_call_output"}
    assert [item.to_dict() for item in items] == [
        {
            "type": "SEGMENT_START",
            "segment_id": "call_1",
            "segment_type": "tool_call",
            "payload": {"metadata": meta},
        },
        {"type": "SEGMENT_CONTENT", "segment_id": "call_1", "payload": {"delta": ARGUMENTS}},
        {
            "type": "SEGMENT_ARGUMENT",
            "segment_id": "call_1",
            "payload": {"path": ["commands", 0], "delta": "uname -a"},
        },
        *[
            {"type": "SEGMENT_ARGUMENT", "segment_id": "call_1", "payload": {"path": path, "value": value}}
            for path, value in (
                (["commands"], ["uname -a"]),
                (["max_output_length"], None),
                (["timeout_ms"], None),
            )
        ],
        {
            "type": "SEGMENT_END",
            "segment_id": "call_1",
            "payload": {"metadata": {**meta, "arguments": ACTION}},
        },
        {
            "type": "TOOL_INVOCATION",
            "id": "call_1",
            "name": "shell",
            "arguments": ACTION,
            "error": None,
            "provider_executed": True,
        },
        {
            "type": "SEGMENT_START",
            "segment_id": "call_1:result",
            "segment_type": "tool_result",
            "payload": {
                "metadata": {
                    "call_id": "call_1",
                    "provider_executed": True,
                    "tool_name": "shell",
                    "result_type": "shell_call_output",
                }
            },
        },
        {
            "type": "SEGMENT_CONTENT",
            "segment_id": "call_1:result",
            "payload": {
                "delta": '[{"outcome":{"exit_code":0,"type":"exit"},"stderr":"","stdout":"Linux\\n"}]'
            },
        },
        {
            "type": "SEGMENT_END",
            "segment_id": "call_1:result",
            "payload": {"metadata": {**result_meta, "result": OUTPUT}},
        },
        {
            "type": "RESPONSE_END",
            "finish_reason": "stop",
            "usage": USAGE.to_dict(),
            "metadata": {
                "id": "resp_1",
                "model": "gpt-test",
                "created": 1700000000,
                "stop_reason": "completed",
            },
        },
    ]
