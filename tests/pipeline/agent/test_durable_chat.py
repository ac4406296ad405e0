"""``chat_routes`` over ``DurableRuns``: a chat request queues a durable run on the log (no model call in
the web worker), a worker (``serve_runs``) runs it, the route streams it back in the client's protocol,
and the approval decisions the next request brings are logged in that run and run once, also after a
takeover. In one process, on the memory log; tests/test_example_durable_agent.py does it across
processes on Redis, with kill -9."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from pipeline.agent import Approvals, ToolRegistry
from pipeline.agent.durable import INTERRUPTED_CALL, run_durable, serve_runs
from pipeline.agent.leases import MemoryLease
from pipeline.errors import ConfigurationError
from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving import MemoryEventLog
from pipeline.fanout.serving.runs import DurableRuns
from pipeline.models import PipelineEvent, ResponseEnd, SegmentEvent, ToolApproval, ToolInvocation, ToolOutput
from tests.guards import GUARD
from tests.proxy_upstream import serving

pytestmark = pytest.mark.anyio

CALL = {"path": "a.txt", "text": "hi"}
USER = [{"role": "user", "content": "write a.txt"}]


def approval_tools(ran: list[str], *, idempotent: bool = False) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(start="approval", idempotent=idempotent)
    async def write(path: str, text: str) -> str:
        ran.append(path)
        return f"wrote {path}"

    return tools


async def model(messages: list[Any]) -> AsyncIterator[PipelineEvent]:
    """Asks to write, then (once a tool's output is in) says what came of it."""
    if messages[-1]["role"] == "tool":
        yield SegmentEvent.content("t1", f"done: {messages[-1]['content']}")
        yield ResponseEnd(finish_reason="stop")
    else:
        yield ToolInvocation("c1", "write", CALL)
        yield ResponseEnd(finish_reason="tool_calls")


def next_messages(events: Sequence[PipelineEvent], outputs: Sequence[ToolOutput]) -> list[Any]:
    calls = [event.id for event in events if isinstance(event, ToolInvocation)]
    return [{"role": "assistant", "calls": calls}, *tool_messages(outputs)]


def tool_messages(outputs: Sequence[ToolOutput]) -> list[Any]:
    return [{"role": "tool", "call_id": output.call_id, "content": output.text} for output in outputs]


async def conversation(body: Any) -> Any:
    """The run's first messages: the user's texts (the start hook ``chat_routes`` calls)."""
    if body.get("bad"):
        raise ConfigurationError("no such conversation")
    if body.get("not_a_list"):
        return {"role": "user"}
    texts = [part.get("text") for message in body["messages"] for part in message.get("parts", [])]
    return [{"role": "user", "content": " ".join(t for t in texts if t)}]


@asynccontextmanager
async def durable_chat(log: MemoryEventLog, ran: list[str]) -> AsyncIterator[str]:
    """The chat route over ``DurableRuns(log)`` served by uvicorn, and a worker running its runs."""
    runs = DurableRuns(log)
    app = Starlette(routes=chat_routes(runs, conversation))
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: serve_runs(
                runs,
                MemoryLease(),
                model,
                approval_tools(ran),
                next_messages=next_messages,
                approved_messages=tool_messages,
                owner="worker",
                poll=0.02,
            )
        )
        async with serving(app) as url:
            yield f"{url}/api/chat"
        group.cancel_scope.cancel()


def chunks(body: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:])
        for line in body.splitlines()
        if line.startswith("data: {") and '"data-streamfold-item"' not in line
    ]


async def first_entry(log: MemoryEventLog, run_id: str) -> Any:
    async for entry in log.read(run_id):
        return json.loads(entry.data or b"null")
    return None


async def test_a_chat_request_queues_a_run_a_worker_runs_and_the_next_request_approves_it() -> None:
    log, ran = MemoryEventLog(), list[str]()
    user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "write a.txt"}]}
    with anyio.fail_after(GUARD):
        async with durable_chat(log, ran) as url, httpx.AsyncClient(timeout=GUARD) as client:
            first = await client.post(url, json={"id": "chat", "messages": [user]})
            run_id = first.headers["x-streamfold-response-id"]
            assistant = {
                "id": run_id,
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool-write",
                        "toolCallId": "c1",
                        "state": "approval-responded",
                        "input": CALL,
                        "approval": {"id": "approval_c1", "approved": True},
                    }
                ],
            }
            second = await client.post(url, json={"id": "chat", "messages": [user, assistant]})
    assert [chunk["type"] for chunk in chunks(first.text)] == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-approval-request",
        "finish-step",
        "finish",
    ]
    assert await first_entry(log, run_id) == {
        "type": "RUN_START",
        "messages": [{"role": "user", "content": "write a.txt"}],
    }
    assert chunks(second.text) == [
        {"type": "start", "messageId": run_id},  # the AI SDK's assistant message, continued
        {"type": "tool-output-available", "toolCallId": "c1", "output": "wrote a.txt"},
        {"type": "start-step"},
        {"type": "text-delta", "id": "t1", "delta": "done: wrote a.txt"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]
    second_id = second.headers["x-streamfold-response-id"]
    assert await first_entry(log, second_id) == {
        "type": "RUN_START",
        "messages": [{"role": "user", "content": "write a.txt"}],
        "approvals": [
            {"call_id": "c1", "approved": True, "name": "write", "arguments": CALL, "reason": None}
        ],
    }
    assert ran == ["a.txt"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"id": "chat", "messages": [], "bad": True}, 400, "no such conversation"),
        (
            {"id": "chat", "messages": [], "not_a_list": True},
            400,
            "a durable run starts from a list of messages, got dict",
        ),
        (
            {"id": "chat", "messages": [{"role": "assistant", "parts": [{"state": "approval-responded"}]}]},
            400,
            "the request's messages are not UI messages: "
            "Object missing required field `type` - at `$[0].parts[0]`",
        ),
    ],
)
async def test_a_refused_start_queues_nothing(body: dict[str, Any], status: int, message: str) -> None:
    log, ran = MemoryEventLog(), list[str]()
    async with durable_chat(log, ran) as url, httpx.AsyncClient(timeout=GUARD) as client:
        answer = await client.post(url, json=body)
    assert (answer.status_code, answer.json()["message"]) == (status, message)
    assert await log.active() == []


async def test_a_full_log_is_503_before_start_is_called() -> None:
    log, ran = MemoryEventLog(max_responses=1), list[str]()
    await log.create("busy")
    async with durable_chat(log, ran) as url, httpx.AsyncClient(timeout=GUARD) as client:
        answer = await client.post(url, json={"id": "chat", "messages": [], "bad": True})
    assert answer.status_code == 503
    assert "Retry-After" in answer.headers


async def queued_with_decisions(log: MemoryEventLog, *logged: dict[str, Any]) -> None:
    decisions = [
        ToolApproval(call_id="c1", approved=True, name="write", arguments=CALL),
        ToolApproval(call_id="c2", approved=False, name="write", arguments=CALL, reason="no"),
    ]

    async def messages() -> list[Any]:
        return [{"role": "user", "content": "write"}]

    await DurableRuns(log).queue(messages, response_id="run", approvals=decisions)
    await log.append("run", [json.dumps(item).encode() for item in logged])


async def decided_outputs(log: MemoryEventLog, ran: list[str]) -> list[Any]:
    await run_durable(
        "run", log, MemoryLease(), model, (), approval_tools(ran), next_messages=next_messages, owner="w2"
    )
    items = [json.loads(entry.data) async for entry in log.read("run") if entry.data]
    return [
        (item["call_id"], item["status"], item["output"]) for item in items if item["type"] == "TOOL_OUTPUT"
    ]


async def test_a_decided_call_the_dead_worker_had_started_is_not_run_again() -> None:
    log, ran = MemoryEventLog(), list[str]()
    await queued_with_decisions(log, {"type": "TOOL_STARTED", "call_id": "c1", "name": "write", "lease": 1})
    assert await decided_outputs(log, ran) == [
        ("c1", "cancelled", INTERRUPTED_CALL),
        ("c2", "denied", "denied: no"),
    ]
    assert ran == []


async def test_a_decided_call_with_a_logged_output_is_not_run_again() -> None:
    log, ran = MemoryEventLog(), list[str]()
    output = ToolOutput(call_id="c1", name="write", output="wrote a.txt").to_dict()
    await queued_with_decisions(
        log, {"type": "TOOL_STARTED", "call_id": "c1", "name": "write", "lease": 1}, output
    )
    assert await decided_outputs(log, ran) == [("c1", "ok", "wrote a.txt"), ("c2", "denied", "denied: no")]
    assert ran == []


async def test_decided_calls_run_once_then_the_model() -> None:
    log, ran = MemoryEventLog(), list[str]()
    await queued_with_decisions(log)
    assert await decided_outputs(log, ran) == [("c1", "ok", "wrote a.txt"), ("c2", "denied", "denied: no")]
    assert ran == ["a.txt"]


# --- decisions of the run's own broker (``approvals``) ----------------------------------------------


async def test_a_broker_decision_is_logged_and_a_worker_that_takes_over_does_not_ask_again() -> None:
    log, ran = MemoryEventLog(), list[str]()
    approvals = Approvals(timeout=None)
    in_the_tool = anyio.Event()

    async def decide() -> None:
        while not approvals.pending:  # noqa: ASYNC110
            await anyio.sleep(0.01)
        approvals.decide("c1", True)

    def tools_that_hang() -> ToolRegistry:
        tools = ToolRegistry()

        @tools.tool(start="approval", name="write", idempotent=True)
        async def hangs(path: str, text: str) -> str:
            in_the_tool.set()
            await anyio.sleep_forever()
            return "never"

        return tools

    async def first_worker() -> None:
        await run_durable(
            "run", log, MemoryLease(), model, USER, tools_that_hang(), next_messages=next_messages,
            owner="w1", approvals=approvals,
        )  # fmt: skip

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(decide)
            group.start_soon(first_worker)
            await in_the_tool.wait()
            group.cancel_scope.cancel()  # the worker stops in the tool: no output logged
        second = Approvals(timeout=None)  # nobody decides here: the logged decision stands
        run = await run_durable(
            "run", log, MemoryLease(), model, USER, approval_tools(ran, idempotent=True),
            next_messages=next_messages, owner="w2", approvals=second,
        )  # fmt: skip
    assert run.stop_reason == "no_calls"
    assert ran == ["a.txt"]  # idempotent, started, decided: run again, without asking
    assert second.pending == {}
    items = [json.loads(entry.data) async for entry in log.read("run") if entry.data]
    assert [item for item in items if item["type"] == "TOOL_APPROVAL"] == [
        {
            "type": "TOOL_APPROVAL",
            "call_id": "c1",
            "approved": True,
            "name": "write",
            "arguments": CALL,
            "reason": None,
        }
    ]
