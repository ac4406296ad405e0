"""``streamfold serve``: the page in a real headless Chromium reaches the final state of the response,
through a reconnect (the first connection is cut mid-stream; EventSource resumes with Last-Event-ID)."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from pipeline.cli.main import _DEMO_STREAMS, _parser, _sse_event_pieces, serve_app
from pipeline.compose import process
from pipeline.models import ResponseEnd, SegmentEvent, SegmentEventType, ToolInvocation
from tests.browser import chromium
from tests.conftest import ROOT, TESTS
from tests.proxy_upstream import serving

pytestmark = pytest.mark.anyio

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

CUT_AFTER = 40
"""The first SSE connection is cut after the first frame with at least this id."""
_FRAME_ID = re.compile(rb"^id: (\d+)\n", re.MULTILINE)
GUARD = 90


class CutFirstStream:
    """ASGI middleware: the first ``/events`` response ends (cleanly) right after entry ``cut_after``,
    as a proxy or a network blip would end it; it also asks EventSource to retry after 100 ms."""

    def __init__(self, app: ASGIApp, cut_after: int) -> None:
        self.app = app
        self.cut_after = cut_after
        self.cut_at: int | None = None
        """The id of the last frame the first connection delivered (frames may be coalesced, so the
        first at or after ``cut_after``)."""
        self.cut = False
        self.cut_requests: list[str] = []
        self.resumed_from: list[str | None] = []

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/events"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        self.resumed_from.append(headers[b"last-event-id"].decode() if b"last-event-id" in headers else None)
        if self.cut:
            await self.app(scope, receive, send)
            return
        self.cut = True
        pending = bytearray(b"retry: 100\n\n")
        done = False

        async def cutting_send(message: MutableMapping[str, Any]) -> None:
            nonlocal done
            if done:
                raise OSError("cut")  # the endpoint stops as if the client went away
            if message["type"] != "http.response.body":
                await send(message)
                return
            pending.extend(message.get("body", b""))
            found = next((m for m in _FRAME_ID.finditer(pending) if int(m.group(1)) >= self.cut_after), None)
            if found is not None:
                self.cut_at = int(found.group(1))
                end = pending.index(b"\n\n", found.start()) + 2
                await send({"type": "http.response.body", "body": bytes(pending[:end]), "more_body": False})
                done = True
                raise OSError("cut")
            await send({**message, "body": bytes(pending)})
            pending.clear()

        await self.app(scope, receive, cutting_send)


async def expected_view(stream: str) -> dict[str, Any]:
    """What the page must show: the folded view of the same recording, from ``process()``."""
    name, provider = _DEMO_STREAMS[stream]
    data = (resources.files("pipeline.cli") / "demo" / name).read_bytes()
    texts: dict[str, list[str]] = {}
    types: dict[str, str] = {}
    order: list[str] = []
    invocations: list[str] = []
    end: ResponseEnd | None = None
    async with process(_sse_event_pieces(data), provider=provider).stream() as events:  # type: ignore[arg-type]
        async for event in events:
            if isinstance(event, SegmentEvent):
                if event.event_type is SegmentEventType.START:
                    assert event.segment_type is not None
                    types[event.segment_id] = event.segment_type.value
                    order.append(event.segment_id)
                    texts[event.segment_id] = []
                elif event.event_type is SegmentEventType.CONTENT:
                    texts[event.segment_id].append(event.delta or "")
            elif isinstance(event, ToolInvocation):
                invocations.append(event.name)
            elif isinstance(event, ResponseEnd):
                end = event
    assert end is not None
    assert end.usage is not None
    segments = []
    for segment_id in order:
        text = "".join(texts[segment_id])
        if types[segment_id] in ("write_file", "patch_file") and not text.endswith("\n"):
            text += "\n"
        segments.append({"type": types[segment_id], "body": text})
    return {"segments": segments, "invocations": invocations, "end": end}


READ_VIEW = """(async () => {
  const state = await window.streamfoldDone;
  const types = ["text", "reasoning", "tool_call", "write_file", "patch_file", "tool_result"];
  return {
    state,
    badge: document.getElementById("connection").textContent,
    log: document.getElementById("log").textContent,
    finish: document.getElementById("finish").textContent,
    segments: [...document.querySelectorAll("section.segment")].map((s) => ({
      type: types.find((t) => s.classList.contains(t)),
      streaming: s.classList.contains("streaming"),
      name: s.querySelector(".name").textContent,
      body: s.querySelector(".body, pre.code, pre.args").textContent,
      highlighted: s.querySelectorAll("pre.code span[class^=tk-]").length,
    })),
    invocations: [...document.querySelectorAll(".invocation")].map((e) => e.textContent),
  };
})()"""


def serve_arguments(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["serve", *argv])


async def test_the_page_shows_the_demo_live_through_a_reconnect(tmp_path: Path) -> None:
    app = CutFirstStream(serve_app(serve_arguments("--demo", "--speed", "0")), CUT_AFTER)
    want = await expected_view("coding-agent")
    async with serving(app) as address, chromium() as browser:
        page = await browser.new_page()
        with anyio.fail_after(GUARD):
            await page.navigate(f"{address}/")
            view = await page.evaluate(READ_VIEW)
            screenshot = await page.screenshot()
    assert view["state"] == "done"
    assert view["badge"] == "done (reconnected 1x)"
    assert app.cut_at is not None
    assert app.cut_at >= CUT_AFTER
    assert f"connection lost after event {app.cut_at}; reconnecting" in view["log"]
    assert f"reconnected; resumed after event {app.cut_at}" in view["log"]
    assert app.resumed_from == [None, str(app.cut_at)]
    got = [{"type": s["type"], "body": s["body"]} for s in view["segments"]]
    assert got == want["segments"]
    assert not any(s["streaming"] for s in view["segments"])
    files = [s for s in view["segments"] if s["type"] == "write_file"]
    assert files
    assert all(s["name"].endswith(".py") and s["highlighted"] > 10 for s in files)
    tools = [s for s in view["segments"] if s["type"] == "tool_call"]
    assert [s["name"] for s in tools] == [n for n in want["invocations"] if n != "write_file"]
    assert [text.split(": ", 1)[1].split("(")[0] for text in view["invocations"]] == want["invocations"]
    end: ResponseEnd = want["end"]
    assert end.usage is not None
    assert view["finish"] == (
        f"finish: {end.finish_reason}  \u00b7  tokens: {end.usage.prompt_tokens} in,"
        f" {end.usage.completion_tokens} out, {end.usage.total_tokens} total"
    )
    assert screenshot.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(screenshot) > 20_000
    (tmp_path / "serve.png").write_bytes(screenshot)
    if os.environ.get("STREAMFOLD_UPDATE_DOCS"):  # regenerate the README's screenshot
        (ROOT / "docs" / "serve.png").write_bytes(screenshot)


async def test_a_served_file_replays_afresh_for_each_response(tmp_path: Path) -> None:
    name, _ = _DEMO_STREAMS["openai-parallel"]
    recording = tmp_path / "stream.sse"
    recording.write_bytes((resources.files("pipeline.cli") / "demo" / name).read_bytes())
    app = serve_app(serve_arguments(str(recording), "--speed", "0"))
    async with serving(app) as address, httpx.AsyncClient(base_url=address) as client:
        assert (await client.get("/config")).json() == {"mode": "file", "label": "stream.sse"}
        bodies = []
        for _ in range(2):
            started = await client.post("/responses", json={})
            assert started.status_code == 201
            bodies.append((await client.get(started.json()["events"])).text)
    assert bodies[0].count("TOOL_INVOCATION") == 2 == bodies[1].count("TOOL_INVOCATION")
    assert bodies[0].rstrip().endswith('"type":"END"}')


async def test_serve_serves_only_its_own_static_files() -> None:
    app = serve_app(serve_arguments("--demo"))
    async with serving(app) as address, httpx.AsyncClient(base_url=address) as client:
        page = await client.get("/")
        script = await client.get("/static/app.js")
        assert page.status_code == 200
        assert 'src="static/app.js"' in page.text
        assert script.headers["content-type"].startswith("text/javascript")
        assert (await client.get("/static/..%2Fserve.py")).status_code == 404
        assert (await client.get("/static/index.html")).status_code == 404


def test_serve_takes_one_source(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from pipeline.cli.main import main

    assert main(["serve", "--demo", str(tmp_path / "x.sse")]) == 2
    assert (
        capsys.readouterr().err
        == "streamfold: serve: give one of FILE, --demo, --upstream, not FILE and --demo\n"
    )
    assert main(["serve", str(tmp_path / "missing.sse")]) == 2
    assert "missing.sse" in capsys.readouterr().err


async def test_serve_upstream_asks_the_model_for_each_prompt_and_rewrites_its_calls() -> None:
    from tests.pipeline.proxy.test_proxy import KIMI_FILES, kimi_reference, kimi_text
    from tests.proxy_upstream import FakeUpstream, Scenario, chat_sse, split_bytes

    text = kimi_text(KIMI_FILES[0])
    content, calls = kimi_reference(text)
    upstream = FakeUpstream()
    upstream.add("kimi", Scenario(split_bytes(chat_sse([text]), [17] * (len(text) // 17 + 40))))
    upstream.add("down", Scenario([b'{"error": {"message": "overloaded"}}'], status=503))
    async with serving(upstream.app) as model_url:
        apps = {
            model: serve_app(
                serve_arguments("--upstream", model_url, "--model", model, "--tool-format", "kimi_k2")
            )
            for model in ("kimi", "down")
        }
        async with serving(apps["kimi"]) as url, httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/config")).json() == {
                "mode": "upstream",
                "label": f"kimi at {model_url}",
            }
            assert (await client.post("/responses", json={"prompt": " "})).status_code == 400
            started = await client.post("/responses", json={"prompt": "What is the weather?"})
            assert started.status_code == 201
            body = (await client.get(started.json()["events"])).text
        async with serving(apps["down"]) as url, httpx.AsyncClient(base_url=url) as client:
            failed = (
                await client.get((await client.post("/responses", json={"prompt": "hi"})).json()["events"])
            ).text
    asked = [received.body for received in upstream.received if received.path == "/v1/chat/completions"]
    assert asked[0]["messages"] == [{"role": "user", "content": "What is the weather?"}]
    assert asked[0]["model"] == "kimi"
    items = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
    invocations = [
        (item["id"], item["name"], item["arguments"]) for item in items if item["type"] == "TOOL_INVOCATION"
    ]
    assert invocations == calls
    texts = [item["payload"]["delta"] for item in items if item["type"] == "SEGMENT_CONTENT"]
    assert content.strip() in "".join(texts)
    assert "event: error" in failed
    assert "HTTP 503" in failed


async def test_the_page_never_shows_the_upstream_urls_password() -> None:
    """``--upstream http://user:password@...``: ``/config`` (what the page shows) names the user, not the
    password."""
    app = serve_app(serve_arguments("--upstream", "http://me:s3cret@127.0.0.1:9/v1", "--model", "m"))
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        config = (await client.get("/config")).json()
    assert config == {"mode": "upstream", "label": "m at http://me:***@127.0.0.1:9/v1"}


APPROVAL_RECORDING = TESTS / "fixtures" / "openai_chat" / "openai-python_single_tool_call_gpt4o.sse"

READ_APPROVAL = """(async () => {
  const deadline = Date.now() + 60000;
  while (!document.querySelector(".approval button.%s")) {
    if (Date.now() > deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  document.querySelector(".approval button.%s").click();
  const settled = () => document.body.dataset.state === "done" && document.querySelector("pre.output")
    && document.querySelector(".approval").dataset.decided;
  while (!settled()) {
    if (Date.now() > deadline) return {state: document.body.dataset.state};
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return {
    approval: document.querySelector(".approval").textContent,
    buttons: document.querySelectorAll(".approval button").length,
    output: document.querySelector("pre.output").textContent,
  };
})()"""


@pytest.mark.parametrize("approved", [True, False])
async def test_the_page_approves_or_denies_a_pending_call(approved: bool) -> None:
    from pipeline.agent import ToolRegistry
    from pipeline.cli.serve import create_serve_app, recorded_source

    ran: list[str] = []
    tools = ToolRegistry()

    @tools.tool(name="GetWeatherArgs", start="approval")
    async def weather(city: str, country: str, units: str) -> str:
        ran.append(city)
        return f"12 {units} in {city}"

    async def pieces() -> Any:
        for piece in _sse_event_pieces(APPROVAL_RECORDING.read_bytes()):
            yield piece

    source = recorded_source(lambda: (pieces(), "openai"))
    app = create_serve_app(source, mode="file", label="approval", tools=tools)
    button = "approve" if approved else "deny"
    with anyio.fail_after(GUARD):
        async with serving(app) as address, chromium() as browser:
            page = await browser.new_page()
            await page.navigate(f"{address}/")
            view = await page.evaluate(READ_APPROVAL % (button, button))
    arguments = '{"city":"Edinburgh","country":"UK","units":"c"}'
    decided = "approved" if approved else "denied"
    assert view == {
        "approval": f"approve GetWeatherArgs({arguments})?  {decided}",
        "buttons": 0,
        "output": "ok: 12 c in Edinburgh" if approved else "denied: denied: a person refused this call",
    }
    assert ran == (["Edinburgh"] if approved else [])


async def test_a_decision_for_no_pending_call_is_a_404() -> None:
    from pipeline.agent import ToolRegistry
    from pipeline.cli.serve import create_serve_app

    app = create_serve_app(None, mode="viewer", label="x", tools=ToolRegistry())
    async with serving(app) as address, httpx.AsyncClient(base_url=address) as client:
        answer = await client.post("/approvals/c1", json={"approved": True})
        assert (answer.status_code, answer.json()["message"]) == (404, "no call 'c1' waits for a decision")
        answer = await client.post("/approvals/c1", json={"approved": "yes"})
        assert answer.status_code == 400
