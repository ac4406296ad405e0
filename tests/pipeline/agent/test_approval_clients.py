"""Tool approval end to end with the real clients under Node: the AI SDK's chat (``tool-approval-request``,
``addToolApprovalResponse``, the next request carrying the decision) and ``@ag-ui/client`` (a
``RUN_FINISHED`` interrupt outcome, a run resumed with the answer), against ``chat_routes`` served by
uvicorn. The exact chunks and events are pinned here too."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette

from operators.encode.vercel import VercelUIEncoder, vercel_approvals
from pipeline.agent import (
    ToolApproval,
    ToolApprovalRequest,
    ToolOutput,
    ToolRegistry,
    chat_approvals,
    run_approved,
    run_tools,
)
from pipeline.compose import process
from pipeline.errors import ConfigurationError
from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving import MemoryEventLog, ResponseManager
from tests.conftest import FIXTURES, TESTS
from tests.guards import GUARD
from tests.proxy_upstream import serving

CLIENTS = TESTS / "ui_clients"
FIRST = FIXTURES / "openai_chat" / "openai-python_single_tool_call_gpt4o.sse"
"""The model asks for ``GetWeatherArgs`` and ends ``tool_calls``."""
SECOND = FIXTURES / "openai_chat" / "fantasy_gpt-4o_text_after_tool_result.sse"
"""The model's answer once the tool's output is in."""
ANSWER = "The current temperature in Florence, Italy is 40°C."
CALL_ID = "call_c91SqDXlYFuETYv8mUHzz6pp"
ARGUMENTS = {"city": "Edinburgh", "country": "UK", "units": "c"}


def weather_tools(ran: list[str]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(name="GetWeatherArgs", start="approval")
    async def weather(city: str, country: str, units: str) -> str:
        ran.append(city)
        return f"12 {units} in {city}"

    return tools


def chat_app(protocol: str, ran: list[str]) -> Starlette:
    """A chat route whose model answers from two recordings: the call, then the text after its output."""
    tools = weather_tools(ran)
    manager = ResponseManager(MemoryEventLog())

    async def start(body: Any) -> AsyncIterator[Any]:
        decisions = chat_approvals(body, protocol)

        async def items() -> AsyncIterator[Any]:
            recording = FIRST
            if decisions:
                async for output in run_approved(decisions, tools):
                    yield output
                recording = SECOND
            async with run_tools(process(recording.read_bytes(), provider="openai"), tools) as run:
                async for item in run:
                    yield item

        return items()

    return Starlette(routes=chat_routes(manager, start, protocol=protocol), lifespan=lifespan(manager))


def lifespan(manager: ResponseManager) -> Any:
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def running(app: Starlette) -> AsyncIterator[None]:
        async with manager:
            yield

    return running


def node_client(script: str, request: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the UI clients' tests need it")
    if not all((CLIENTS / "node_modules" / name).is_dir() for name in ("ai", "@ag-ui/client")):
        pytest.skip("the UI clients are not installed: run `npm ci` in tests/ui_clients")
    done = subprocess.run(
        [node, script], cwd=CLIENTS, input=json.dumps(request).encode(), capture_output=True, timeout=GUARD
    )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def run_client(protocol: str, script: str, **request: Any) -> tuple[dict[str, Any], list[str]]:
    ran: list[str] = []
    async with serving(chat_app(protocol, ran)) as url:
        result = await anyio.to_thread.run_sync(node_client, script, {"url": f"{url}/api/chat", **request})
    return result, ran


# -- Vercel AI SDK ----------------------------------------------------------------------------------


def test_the_vercel_chunks_of_a_request_and_a_denial() -> None:
    encoder = VercelUIEncoder(extras=False)
    request = ToolApprovalRequest(call_id="c1", name="delete", arguments={"path": "a"})
    assert encoder.feed(request) == [
        b'data: {"type":"start"}\n\n',
        b'data: {"type":"tool-approval-request","approvalId":"approval_c1","toolCallId":"c1"}\n\n',
    ]
    denied = ToolOutput(call_id="c1", name="delete", status="denied", output="denied: no")
    assert encoder.feed(denied) == [b'data: {"type":"tool-output-denied","toolCallId":"c1"}\n\n']
    assert encoder.feed(denied.to_dict()) == [b'data: {"type":"tool-output-denied","toolCallId":"c1"}\n\n']
    assert VercelUIEncoder().feed(request.to_dict())[1:] == encoder.feed(request)


def test_vercel_approvals_are_the_responded_parts_of_the_last_assistant_message() -> None:
    responded = {
        "type": "tool-delete",
        "toolCallId": "c1",
        "state": "approval-responded",
        "input": {"path": "a"},
        "approval": {"id": "approval_c1", "approved": False, "reason": "not a"},
    }
    dynamic = {**responded, "type": "dynamic-tool", "toolName": "move", "toolCallId": "c2"}
    dynamic["approval"] = {"id": "approval_c2", "approved": True}
    waiting = {**responded, "toolCallId": "c3", "state": "approval-requested", "approval": {"id": "x"}}
    messages = [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "clean up"}]},
        {"id": "m", "role": "assistant", "parts": [{"type": "step-start"}, responded, dynamic, waiting]},
    ]
    assert vercel_approvals(messages) == [
        ToolApproval(call_id="c1", approved=False, name="delete", arguments={"path": "a"}, reason="not a"),
        ToolApproval(call_id="c2", approved=True, name="move", arguments={"path": "a"}),
    ]
    assert vercel_approvals(messages[:1]) == []  # the last message is the user's: no decision
    assert vercel_approvals([]) == []
    with pytest.raises(ConfigurationError) as error:
        vercel_approvals([{"role": "assistant", "parts": [{"state": "approval-responded"}]}])
    assert str(error.value) == (
        "the request's messages are not UI messages: "
        "Object missing required field `type` - at `$[0].parts[0]`"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("approved", [True, False])
async def test_the_ai_sdk_chat_approves_or_denies_and_the_next_request_carries_it(approved: bool) -> None:
    result, ran = await run_client(
        "vercel", "approval_chat.mjs", text="weather?", approved=approved, reason="not today"
    )
    assert result["errors"] == []
    assert [part["approval"] for part in result["requested"]] == [{"id": f"approval_{CALL_ID}"}]
    assert [part["toolCallId"] for part in result["requested"]] == [CALL_ID]
    assert len(result["bodies"]) == 2
    sent = result["bodies"][1]["messages"][-1]
    tool_parts = [part for part in sent["parts"] if part["type"] == "tool-GetWeatherArgs"]
    approval = {"id": f"approval_{CALL_ID}", "approved": approved, "reason": "not today"}
    assert [(part["state"], part["approval"], part["input"]) for part in tool_parts] == [
        ("approval-responded", approval, ARGUMENTS)
    ]
    assert [message["role"] for message in result["messages"]] == ["user", "assistant"]  # continued
    final = result["messages"][-1]
    (tool,) = [part for part in final["parts"] if part["type"] == "tool-GetWeatherArgs"]
    if approved:
        assert ran == ["Edinburgh"]
        assert (tool["state"], tool["output"]) == ("output-available", "12 c in Edinburgh")
    else:
        assert ran == []
        assert tool["state"] == "output-denied"
        assert "output" not in tool
    texts = [part["text"] for part in final["parts"] if part["type"] == "text"]
    assert texts == [ANSWER]  # the model's answer after the output, in the same message


# -- AG-UI ------------------------------------------------------------------------------------------


def test_an_unanswered_request_pauses_the_ag_ui_run_with_an_interrupt() -> None:
    from operators.encode.agui import AGUIEncoder

    encoder = AGUIEncoder(run_id="r", thread_id="t", extras=False)
    request = ToolApprovalRequest(call_id="c1", name="delete", arguments={"path": "a"}, expires_at=0.5)
    assert encoder.feed(request) == [b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n']
    (finished,) = encoder.finish()
    assert json.loads(finished.removeprefix(b"data: ")) == {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "r",
        "outcome": {
            "type": "interrupt",
            "interrupts": [
                {
                    "id": "approval_c1",
                    "reason": "tool_approval",
                    "message": "Approve the call of delete?",
                    "toolCallId": "c1",
                    "responseSchema": {
                        "type": "object",
                        "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
                        "required": ["approved"],
                    },
                    "expiresAt": "1970-01-01T00:00:00.500Z",
                }
            ],
        },
    }
    answered = AGUIEncoder(run_id="r", thread_id="t", extras=False)
    answered.feed(request)
    answered.feed(ToolOutput(call_id="c1", name="delete", status="denied", output="denied: no"))
    assert b"outcome" not in b"".join(answered.finish())  # answered within the run: no interrupt


def test_agui_approvals_are_the_resume_entries_with_their_calls() -> None:
    from operators.encode.agui import agui_approvals

    call = {"id": "c1", "type": "function", "function": {"name": "delete", "arguments": '{"path":"a"}'}}
    other = {"id": "c2", "type": "function", "function": {"name": "move", "arguments": "{}"}}
    run_input = {
        "messages": [{"id": "m", "role": "assistant", "toolCalls": [call, other]}],
        "resume": [
            {"interruptId": "approval_c1", "status": "resolved", "payload": {"approved": True}},
            {
                "interruptId": "approval_c2",
                "status": "resolved",
                "payload": {"approved": False, "reason": "no"},
            },
            {"interruptId": "approval_c1", "status": "cancelled"},
            {
                "interruptId": "approval_c9",
                "status": "resolved",
                "payload": {"approved": True},
            },  # no such call
            {"interruptId": "other", "status": "resolved"},
        ],
    }
    assert agui_approvals(run_input) == [
        ToolApproval(call_id="c1", approved=True, name="delete", arguments={"path": "a"}),
        ToolApproval(call_id="c2", approved=False, name="move", reason="no"),
        ToolApproval(call_id="c1", approved=False, name="delete", arguments={"path": "a"}),
    ]
    assert agui_approvals({"messages": []}) == []
    with pytest.raises(ConfigurationError) as error:
        agui_approvals({"resume": [{"interruptId": 3, "status": "resolved"}]})
    assert str(error.value) == (
        "the run input's messages or resume entries: Expected `str`, got `int` - at `$.resume[0].interruptId`"
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "payload", "output"),
    [
        ("resolved", {"approved": True}, "12 c in Edinburgh"),
        ("resolved", {"approved": False, "reason": "not today"}, "denied: not today"),
        ("cancelled", None, "denied: a person refused this call"),
    ],
)
async def test_the_ag_ui_client_resumes_the_interrupted_run_with_its_answer(
    status: str, payload: Any, output: str
) -> None:
    result, ran = await run_client(
        "agui", "approval_agent.mjs", text="weather?", status=status, payload=payload
    )
    (interrupt,) = result["interrupts"]
    assert {key: interrupt[key] for key in ("id", "reason", "toolCallId")} == {
        "id": f"approval_{CALL_ID}",
        "reason": "tool_approval",
        "toolCallId": CALL_ID,
    }
    assert "expiresAt" not in interrupt  # decided with the next request: no expiry within the run
    resume = result["bodies"][1]["resume"]
    assert [entry["interruptId"] for entry in resume] == [f"approval_{CALL_ID}"]
    assert result["pendingAfter"] == []
    assert ran == (["Edinburgh"] if output.startswith("12") else [])
    tool_messages = [message for message in result["messages"] if message["role"] == "tool"]
    assert [(message["toolCallId"], message["content"]) for message in tool_messages] == [(CALL_ID, output)]
    assistant = [message for message in result["messages"] if message["role"] == "assistant"]
    assert assistant[0]["toolCalls"][0]["id"] == CALL_ID
    assert assistant[-1]["content"] == ANSWER
