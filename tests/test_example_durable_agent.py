"""examples/durable_agent: two web workers and two producers (real processes) over a real Redis; the
producer running a coding agent's run is killed with SIGKILL in the middle of a tool, the other producer
takes the run over once its lease expires and finishes it, and a client that followed the run through one
web worker and resumed on the other (``Last-Event-ID``) saw every entry once, in order."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.pipeline.fanout.test_serving_web import read_frames
from tests.servers import RedisServer, free_port, redis_server
from tests.test_example_replicas import started

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio

GUARD = 90


def web(port: int, redis: str) -> tuple[list[str], bytes, dict[str, str]]:
    argv = [sys.executable, "-m", "uvicorn", "examples.durable_agent.web:app", "--host", "127.0.0.1"]
    return (
        [*argv, "--port", str(port), "--log-level", "info", "--no-access-log"],
        b"Uvicorn running on",
        {"STREAMFOLD_REDIS_URL": redis},
    )


def producer(name: str, redis: str, workdir: Path, hold: Path) -> tuple[list[str], bytes, dict[str, str]]:
    argv = [sys.executable, "examples/durable_agent/producer.py", "--redis", redis, "--name", name]
    return (
        [*argv, "--workdir", str(workdir), "--lease-ttl", "1", "--poll", "0.1"],
        f"producer {name} ready".encode(),
        {"DURABLE_AGENT_HOLD_READS": str(hold)},
    )


def kinds(items: list[Any]) -> list[str]:
    return [item["type"] for item in items if item["type"] != "TOOL_STARTED"]


async def test_a_run_outlives_the_producer_killed_in_its_tool(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    (tmp_path / "README.md").write_text("# demo\n")
    hold = tmp_path / "hold"
    hold.touch()  # the first read_file waits until the test removes this
    ports = [free_port(), free_port()]
    url = redis_server.url
    async with (
        started(*web(ports[0], url)),
        started(*web(ports[1], url)),
        started(*producer("a", url, tmp_path, hold)) as producer_a,
    ):
        with anyio.fail_after(GUARD):
            async with httpx.AsyncClient(timeout=GUARD) as client:
                answer = await client.post(
                    f"http://127.0.0.1:{ports[0]}/api/runs", json={"prompt": "update the README"}
                )
                run_id = answer.json()["run_id"]
                events = f"/responses/{run_id}/events"
                status = f"http://127.0.0.1:{ports[0]}/responses/{run_id}"
                while (await client.get(status)).status_code != 200:  # noqa: ASYNC110
                    await anyio.sleep(0.05)  # producer a creates the run at its next poll
                async with client.stream("GET", f"http://127.0.0.1:{ports[0]}{events}") as response:
                    first = await read_frames(response, until_id=9)  # the model's part, the read's start
                assert {"RESPONSE_END", "TOOL_STARTED"} <= {frame.data["type"] for frame in first}
                async with started(*producer("b", url, tmp_path, hold)):
                    producer_a.kill()  # SIGKILL in the middle of read_file
                    await producer_a.wait()
                    hold.unlink()
                    headers = {"Last-Event-ID": str(first[-1].id)}
                    async with client.stream(
                        "GET", f"http://127.0.0.1:{ports[1]}{events}", headers=headers
                    ) as response:
                        rest = await read_frames(response)
                vercel = await client.get(f"http://127.0.0.1:{ports[0]}{events}?protocol=vercel")
    frames = [*first, *rest]
    assert frames[-1].event == "end"
    data = [frame for frame in frames if frame.event != "end"]
    assert [frame.id for frame in data] == list(range(1, len(data) + 1))  # nothing twice, no gap
    items = [frame.data for frame in data]
    assert kinds(items) == [
        "RUN_START",
        "RUN_STEP",
        "SEGMENT_CONTENT",
        "TOOL_INVOCATION",
        "SEGMENT_CONTENT",
        "TOOL_INVOCATION",
        "TOOL_APPROVAL_REQUEST",
        "RESPONSE_END",
        "TOOL_OUTPUT",
        "RUN_END",
    ]
    starts = [(item["call_id"], item["lease"]) for item in items if item["type"] == "TOOL_STARTED"]
    assert starts == [("call_read_readme", 1), ("call_read_readme", 2)]  # idempotent: read again
    output = next(item for item in items if item["type"] == "TOOL_OUTPUT")
    assert (output["call_id"], output["status"], output["output"]) == ("call_read_readme", "ok", "# demo\n")
    assert items[-1] == {"type": "RUN_END", "stop_reason": "awaiting_approval"}
    assert (tmp_path / "README.md").read_text() == "# demo\n"  # the write waits for a person
    chunks = [json.loads(line[6:]) for line in vercel.text.splitlines() if line.startswith("data: {")]
    useful = [chunk for chunk in chunks if chunk["type"] != "data-streamfold-item"]
    assert [chunk["type"] for chunk in useful] == [
        "start",
        "start-step",
        "text-delta",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "text-delta",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-approval-request",
        "finish-step",
        "tool-output-available",
        "finish",
    ]  # what useChat shows: the read's output, the write waiting for approval
