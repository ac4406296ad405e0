"""The README's apps (examples/use_chat_app.py, examples/agui_app.py) run and serve their clients: the
useChat app's answer read by the real ``ai`` package as ``useChat`` reads it, the AG-UI app's events
validated by ``@ag-ui/core``'s schemas (both in Node, from tests/ui_clients)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from importlib import resources
from typing import Any

import anyio
import httpx
import pytest

from pipeline.cli.main import _DEMO_STREAMS
from pipeline.compose import process
from pipeline.models import PipelineEvent
from tests.guards import GUARD
from tests.pipeline.fanout.test_ui_conformance import (
    CLIENTS,
    agui_expected,
    agui_view,
    folded_view,
    ui_message_view,
)
from tests.proxy_upstream import serving
from tests.test_examples import load

pytestmark = pytest.mark.anyio

RECORDING = _DEMO_STREAMS["openai-parallel"][0]


def recording() -> bytes:
    return (resources.files("pipeline.cli") / "demo" / RECORDING).read_bytes()


class Model:
    """Stands in for the OpenAI SDK: records the messages it is asked with, answers a recorded stream."""

    def __init__(self) -> None:
        self.asked: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> bytes:
        self.asked.append(messages)
        return recording()


async def expected_events() -> list[PipelineEvent]:
    async with process(recording()).stream() as events:
        items = [event async for event in events]
    return items


def run_clients(request: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None or not (CLIENTS / "node_modules" / "ai").is_dir():
        reason = "Node.js or tests/ui_clients/node_modules is missing (.ci/run installs both)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        print(f"skipped: {reason}")
        pytest.skip(reason)
    done = subprocess.run(
        [node, "consume.mjs"],
        cwd=CLIENTS,
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_the_use_chat_app_answers_what_use_chat_reads() -> None:
    model = Model()
    app = load("use_chat_app").create_app(complete=model)
    body = {
        "id": "chat-1",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather in Paris?"}]}],
        "trigger": "submit-message",
        "messageId": None,
    }
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        with anyio.fail_after(GUARD):
            response = await client.post("/api/chat", json=body)
    assert response.status_code == 200
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert model.asked == [[{"role": "user", "content": "Weather in Paris?"}]]
    result = run_clients({"vercel": [{"name": "app", "body": response.text}], "agui": []})["vercel"]["app"]
    assert result["errors"] == []
    assert result["extraKeys"] == []
    assert ui_message_view(result["message"]) == folded_view(await expected_events())
    assert result["finishReason"] == "tool-calls"


async def test_the_agui_app_answers_valid_events() -> None:
    model = Model()
    app = load("agui_app").create_app(complete=model)
    run_input = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "Weather in Paris?"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        with anyio.fail_after(GUARD):
            response = await client.post("/agent", json=run_input)
            resumed = await client.get("/responses/r1/events", params={"protocol": "agui"})
    assert response.status_code == 200
    assert resumed.text == response.text  # the run is kept: the same events again
    assert model.asked == [[{"role": "user", "content": "Weather in Paris?"}]]
    events = [
        json.loads(block.split("data: ", 1)[1]) for block in response.text.split("\n\n") if "data: " in block
    ]
    assert agui_view(events) == agui_expected(await expected_events())
    result = run_clients({"vercel": [], "agui": [{"name": "app", "body": response.text}]})["agui"]["app"]
    assert result["errors"] == []
    assert [event["type"] for event in result["events"]][:: len(result["events"]) - 1] == [
        "RUN_STARTED",
        "RUN_FINISHED",
    ]
