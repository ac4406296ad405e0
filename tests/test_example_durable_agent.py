"""examples/durable_agent: a coding agent over ``chat_routes`` with durable runs. Two web workers and
producers are real processes over a real Redis. The producer running a run is killed with SIGKILL in the
middle of a tool and in the middle of a model stream; another producer takes the run over once its lease
expires and finishes it; the client, which resumed the chat's stream on the other web worker
(``Last-Event-ID``), got every chunk once, in order. The AI SDK's own chat (``ai`` under Node) follows a
run across a killed producer and answers the write tool's approval request with its next request; so does
``@ag-ui/client``'s ``HttpAgent``, resuming the interrupted run."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import Process

from pipeline.fanout.serving.redis import RedisEventLog
from pipeline.fanout.serving.runs import DurableRuns
from tests.pipeline.agent.test_approval_clients import node_client
from tests.pipeline.fanout.test_serving_web import Frame
from tests.servers import RedisServer, free_port, redis_server
from tests.test_example_replicas import started

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio

GUARD = 90
README = "# demo\n"
NEW_README = "# demo\nupdated\n"


def web(port: int, redis: str) -> tuple[list[str], bytes, dict[str, str]]:
    argv = [sys.executable, "-m", "uvicorn", "examples.durable_agent.web:app", "--host", "127.0.0.1"]
    return (
        [*argv, "--port", str(port), "--log-level", "info", "--no-access-log"],
        b"Uvicorn running on",
        {"STREAMFOLD_REDIS_URL": redis},
    )


def producer(name: str, redis: str, workdir: Path) -> tuple[list[str], bytes, dict[str, str]]:
    argv = [sys.executable, "examples/durable_agent/producer.py", "--redis", redis, "--name", name]
    holds = {
        "DURABLE_AGENT_HOLD_READS": str(workdir / "hold-reads"),
        "DURABLE_AGENT_HOLD_STREAM": str(workdir / "hold-stream"),
    }
    return (
        [*argv, "--workdir", str(workdir), "--lease-ttl", "1", "--poll", "0.1"],
        f"producer {name} ready".encode(),
        holds,
    )


@dataclass
class Agent:
    """The example's processes: two web workers on ``urls``, producer ``a`` (killable)."""

    urls: list[str]
    redis: str
    workdir: Path
    producer_a: Process
    stack: AsyncExitStack

    async def kill_a_and_start_b(self) -> None:
        """SIGKILL producer a wherever it is; start producer b; let the held work go on."""
        self.producer_a.kill()
        await self.producer_a.wait()
        await self.stack.enter_async_context(started(*producer("b", self.redis, self.workdir)))
        for name in ("hold-reads", "hold-stream"):
            (self.workdir / name).unlink(missing_ok=True)


@asynccontextmanager
async def agent(redis: str, workdir: Path, hold: str) -> AsyncIterator[Agent]:
    (workdir / "README.md").write_text(README)
    (workdir / hold).touch()  # producer a stops there until the test kills it
    ports = [free_port(), free_port()]
    async with AsyncExitStack() as stack:
        for port in ports:
            await stack.enter_async_context(started(*web(port, redis)))
        producer_a = await stack.enter_async_context(started(*producer("a", redis, workdir)))
        with anyio.fail_after(GUARD):
            yield Agent([f"http://127.0.0.1:{port}" for port in ports], redis, workdir, producer_a, stack)


def user_message(chat_id: str, text: str) -> dict[str, Any]:
    """What ``useChat``'s transport POSTs for a new message."""
    message = {"id": "user-1", "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat_id, "messages": [message], "trigger": "submit-message", "messageId": None}


async def follow_across_the_kill(agent: Agent, *until: str) -> tuple[str, list[Frame]]:
    """POST a chat message to web worker 0, read its stream until it had a frame of each type ``until``
    names (a chunk's type or a run entry's), kill producer a, and resume the chat's stream on web worker
    1 after the last id read. Returns the run's id and every frame read."""
    async with httpx.AsyncClient(timeout=GUARD) as client:
        body = user_message("chat-1", "add a line to the README")
        first: list[Frame] = []
        async with client.stream("POST", f"{agent.urls[0]}/api/chat", json=body) as response:
            assert response.status_code == 200
            run_id = response.headers["x-streamfold-response-id"]
            async for frame in frames_of(response):
                first.append(frame)
                kinds = {seen.data["type"] for seen in first} | {item["type"] for item in run_items(first)}
                if frame.id is not None and kinds >= set(until):
                    break  # at an entry's last frame: the id to resume after
        await agent.kill_a_and_start_b()
        resume = f"{agent.urls[1]}/api/chat/chat-1/stream"
        async with client.stream("GET", resume, headers={"Last-Event-ID": str(first[-1].id)}) as response:
            assert response.status_code == 200
            rest = [frame async for frame in frames_of(response)]
    return run_id, [*first, *rest]


async def frames_of(response: httpx.Response) -> AsyncIterator[Frame]:
    """The SSE frames of ``response`` as they come (JSON data parsed; ``[DONE]`` left out)."""
    event_id: int | None = None
    data = ""
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            event_id = int(line.removeprefix("id: "))
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
        elif line == "" and data and data != "[DONE]":
            yield Frame(event_id, "message", json.loads(data))
            event_id, data = None, ""


def chunks(frames: list[Frame]) -> list[dict[str, Any]]:
    """The chunks ``useChat`` acts on: the run's own entries (transient data parts) left out."""
    return [frame.data for frame in frames if frame.data["type"] != "data-streamfold-item"]


def run_items(frames: list[Frame]) -> list[Any]:
    return [frame.data["data"] for frame in frames if frame.data["type"] == "data-streamfold-item"]


def ids_once(frames: list[Frame]) -> None:
    ids = [frame.id for frame in frames if frame.id is not None]
    assert ids == list(range(1, len(ids) + 1))  # every entry once, in order


def text(segment_id: str, *deltas: str) -> list[dict[str, Any]]:
    return [
        {"type": "text-start", "id": segment_id},
        *({"type": "text-delta", "id": segment_id, "delta": delta} for delta in deltas),
        {"type": "text-end", "id": segment_id},
    ]


def call(call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "tool-input-start", "toolCallId": call_id, "toolName": name},
        {
            "type": "tool-input-delta",
            "toolCallId": call_id,
            "inputTextDelta": json.dumps(arguments, separators=(",", ":")),
        },
        {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": arguments},
    ]


READ = call("call_read_readme", "read_file", {"path": "README.md"})
WRITE = call("call_write_readme", "write_file", {"path": "README.md", "text": NEW_README})
THE_REST_OF_THE_TURN = [
    *READ,
    *text("text-1", "I will add a line to it."),
    *WRITE,
    {
        "type": "tool-approval-request",
        "approvalId": "approval_call_write_readme",
        "toolCallId": "call_write_readme",
    },
    {"type": "finish-step"},
    {"type": "tool-output-available", "toolCallId": "call_read_readme", "output": README},
    {"type": "finish", "finishReason": "tool-calls"},
]


async def test_a_chat_run_outlives_its_producer_killed_in_a_tool(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with agent(redis_server.url, tmp_path, "hold-reads") as example:
        run_id, frames = await follow_across_the_kill(example, "TOOL_STARTED", "finish-step")
    ids_once(frames)
    assert chunks(frames) == [
        {"type": "start", "messageId": run_id},
        {"type": "start-step"},
        *text("text-0", "Let me read ", "the README first. "),
        *THE_REST_OF_THE_TURN,
    ]
    items = run_items(frames)
    starts = [(item["call_id"], item["lease"]) for item in items if item["type"] == "TOOL_STARTED"]
    assert starts == [("call_read_readme", 1), ("call_read_readme", 2)]  # idempotent: read again
    assert items[-1] == {"type": "RUN_END", "stop_reason": "awaiting_approval"}
    assert (tmp_path / "README.md").read_text() == README  # the write waits for a person


async def test_a_chat_run_outlives_its_producer_killed_in_a_model_stream(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with agent(redis_server.url, tmp_path, "hold-stream") as example:
        run_id, frames = await follow_across_the_kill(example, "text-delta")
    ids_once(frames)
    assert chunks(frames) == [
        {"type": "start", "messageId": run_id},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": "Let me read "},
        {"type": "finish-step"},  # the dead attempt, closed
        {"type": "start-step"},  # the model called again
        *text("text-0", "Let me read ", "the README first. "),
        *THE_REST_OF_THE_TURN,
    ]
    steps = [(item["attempt"], item["lease"]) for item in run_items(frames) if item["type"] == "RUN_STEP"]
    assert steps == [(1, 1), (2, 2)]


async def kill_when_logged(example: Agent, *kinds: str) -> None:
    """Kill producer a once the chat's run has logged an entry of each type ``kinds`` names."""
    log = RedisEventLog(example.redis)
    try:
        while not (queued := await DurableRuns(log).queued()):  # noqa: ASYNC110
            await anyio.sleep(0.05)
        seen: set[str] = set()
        async for entry in log.read(queued[0].response_id):
            seen.add(json.loads(entry.data or b"{}").get("type"))
            if seen >= set(kinds):
                break
    finally:
        await log.aclose()
    await example.kill_a_and_start_b()


@pytest.mark.parametrize(
    ("hold", "kinds", "approved"),
    [("hold-reads", ["TOOL_STARTED", "RESPONSE_END"], True), ("hold-stream", ["SEGMENT_CONTENT"], False)],
    ids=["killed-in-a-tool-then-approved", "killed-in-a-stream-then-denied"],
)
async def test_the_ai_sdk_chat_follows_a_run_across_a_killed_producer_and_answers_its_approval(
    redis_server: RedisServer, tmp_path: Path, hold: str, kinds: list[str], approved: bool
) -> None:
    async with agent(redis_server.url, tmp_path, hold) as example:
        request = {
            "url": f"{example.urls[0]}/api/chat",
            "text": "add a line",
            "approved": approved,
            "reason": "not today",
        }
        async with anyio.create_task_group() as group:
            group.start_soon(kill_when_logged, example, *kinds)
            result = await anyio.to_thread.run_sync(node_client, "approval_chat.mjs", request)
    assert result["errors"] == []
    assert [part["toolCallId"] for part in result["requested"]] == ["call_write_readme"]
    sent = result["bodies"][1]["messages"][-1]["parts"]
    decided = [(part["state"], part["approval"]) for part in sent if part["type"] == "tool-write_file"]
    assert decided == [
        (
            "approval-responded",
            {"id": "approval_call_write_readme", "approved": approved, "reason": "not today"},
        )
    ]
    (user, assistant) = result["messages"]
    assert (user["role"], assistant["role"]) == ("user", "assistant")  # the approval's run continued it
    write = {
        "type": "tool-write_file",
        "toolCallId": "call_write_readme",
        "input": {"path": "README.md", "text": NEW_README},
        "approval": {"id": "approval_call_write_readme", "approved": approved, "reason": "not today"},
    }
    if approved:
        write |= {"state": "output-available", "output": "wrote 15 characters to README.md"}
    else:
        write |= {"state": "output-denied"}
    dead_attempt = (
        []
        if hold == "hold-reads"
        else [
            {"type": "step-start"},
            {"type": "text", "text": "Let me read ", "state": "streaming"},  # cut: a UI may drop it
        ]
    )
    assert assistant["parts"] == [
        *dead_attempt,
        {"type": "step-start"},
        {"type": "text", "text": "Let me read the README first. ", "state": "done"},
        {
            "type": "tool-read_file",
            "toolCallId": "call_read_readme",
            "state": "output-available",
            "input": {"path": "README.md"},
            "output": README,
        },
        {"type": "text", "text": "I will add a line to it.", "state": "done"},
        write,
        {"type": "step-start"},
        {
            "type": "text",
            "text": "Done: "
            + ("wrote 15 characters to README.md" if approved else "denied: not today")
            + ".",
            "state": "done",
        },
    ]
    assert (tmp_path / "README.md").read_text() == (NEW_README if approved else README)


async def test_the_ag_ui_client_follows_a_run_across_a_killed_producer_and_resumes_it_approved(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with agent(redis_server.url, tmp_path, "hold-reads") as example:
        request = {
            "url": f"{example.urls[0]}/agent",
            "text": "add a line",
            "status": "resolved",
            "payload": {"approved": True},
        }
        async with anyio.create_task_group() as group:
            group.start_soon(kill_when_logged, example, "TOOL_STARTED", "RESPONSE_END")
            result = await anyio.to_thread.run_sync(node_client, "approval_agent.mjs", request)
    (interrupt,) = result["interrupts"]
    assert (interrupt["id"], interrupt["toolCallId"]) == ("approval_call_write_readme", "call_write_readme")
    assert result["pendingAfter"] == []
    read = {
        "id": "call_read_readme",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":"README.md"}'},
    }
    write = {
        "id": "call_write_readme",
        "type": "function",
        "function": {
            "name": "write_file",
            "arguments": json.dumps({"path": "README.md", "text": NEW_README}, separators=(",", ":")),
        },
    }
    assert result["messages"] == [
        {"id": "user-1", "role": "user", "content": "add a line"},
        {
            "id": "text-0",
            "role": "assistant",
            "content": "Let me read the README first. ",
            "toolCalls": [read, write],
        },
        {
            "id": "call_read_readme:output",
            "toolCallId": "call_read_readme",
            "role": "tool",
            "content": README,
        },
        {
            "id": "call_write_readme:output",
            "toolCallId": "call_write_readme",
            "role": "tool",
            "content": "wrote 15 characters to README.md",
        },
        {"id": "text-1", "role": "assistant", "content": "I will add a line to it."},
        {"id": "text-2", "role": "assistant", "content": "Done: wrote 15 characters to README.md."},
    ]
    assert (tmp_path / "README.md").read_text() == NEW_README
