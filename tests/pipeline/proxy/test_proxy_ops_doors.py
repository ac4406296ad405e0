"""Metrics and access logs on the front doors ``/v1/responses`` and ``/v1/messages`` (real clients)."""

from __future__ import annotations

import json
import logging
from functools import partial

import anyio
import httpx
import openai
import pytest

from tests.guards import GUARD
from tests.pipeline.proxy.test_proxy_doors import (
    MESSAGES_TOOLS,
    RESPONSES_TOOLS,
    anthropic_client,
    kimi_upstream,
    openai_client,
    proxy,
)
from tests.pipeline.proxy.test_proxy_doors_policy import proxied, responses_tools, three_calls_upstream
from tests.proxy_upstream import FakeUpstream, Scenario, chat_completion


def added_latency_count(lines: set[str]) -> int:
    prefix = "streamfold_proxy_added_latency_seconds_count "
    return sum(int(line.removeprefix(prefix)) for line in lines if line.startswith(prefix))


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "streamfold.proxy.access"]


@pytest.mark.anyio
async def test_responses_route_counts_and_logs_streamed_whole_and_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream = kimi_upstream()
    upstream.add("broken", Scenario([b'{"error": {"message": "no"}}'], status=503))
    caplog.set_level(logging.INFO, logger="streamfold.proxy.access")
    async with proxy(upstream) as url, openai_client(url) as client, httpx.AsyncClient() as http:
        async with client.responses.stream(model="kimi", input="weather?", tools=RESPONSES_TOOLS) as stream:
            async for _ in stream:
                pass
        await client.responses.create(model="kimi", input="weather?", tools=RESPONSES_TOOLS)
        with pytest.raises(openai.InternalServerError, match="no"):
            await client.responses.create(model="broken", input="x")
        lines = set((await http.get(url + "/metrics")).text.splitlines())
    assert {
        'streamfold_proxy_requests_total{route="responses",status="200"} 2',
        'streamfold_proxy_requests_total{route="responses",status="503"} 1',
        'streamfold_proxy_upstream_errors_total{code="upstream_error"} 1',
        "streamfold_proxy_streams_open 0",
        "streamfold_proxy_tool_calls_total 1",  # streamed answers only, as on the Chat route
        "streamfold_proxy_tool_calls_dropped_total 0",
    } <= lines
    assert added_latency_count(lines) >= 1  # one per upstream read of the stream
    assert "streamfold_proxy_chunks_total 0" not in lines
    records = access_lines(caplog)
    assert [
        (r["method"], r["path"], r["route"], r["status"], r.get("model"), r.get("stream")) for r in records
    ] == [
        ("POST", "/v1/responses", "responses", 200, "kimi", True),
        ("POST", "/v1/responses", "responses", 200, "kimi", None),
        ("POST", "/v1/responses", "responses", 503, "broken", None),
    ]
    assert [r.get("tool_calls") for r in records] == [1, 1, None]
    assert records[2]["error"] == "upstream_error"


@pytest.mark.anyio
async def test_messages_route_counts_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    upstream = kimi_upstream()
    caplog.set_level(logging.INFO, logger="streamfold.proxy.access")
    request = {"model": "glm", "max_tokens": 100, "messages": [{"role": "user", "content": "weather?"}]}
    async with (
        proxy(upstream, tool_format="glm45") as url,
        anthropic_client(url) as client,
        httpx.AsyncClient() as http,
    ):
        async with client.messages.stream(**request, tools=MESSAGES_TOOLS) as stream:
            await stream.get_final_message()
        await client.messages.create(**request, tools=MESSAGES_TOOLS)
        lines = set((await http.get(url + "/metrics")).text.splitlines())
    assert 'streamfold_proxy_requests_total{route="messages",status="200"} 2' in lines
    assert "streamfold_proxy_streams_open 0" in lines
    records = access_lines(caplog)
    assert [(r["path"], r["route"], r["status"], r.get("model"), r.get("stream")) for r in records] == [
        ("/v1/messages", "messages", 200, "glm", True),
        ("/v1/messages", "messages", 200, "glm", None),
    ]


@pytest.mark.anyio
async def test_front_doors_count_dropped_calls_and_log_broken_tool_rules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Calls the tool rules drop are counted; a required call not made is the access line's error."""
    caplog.set_level(logging.INFO, logger="streamfold.proxy.access")
    async with (
        proxied(three_calls_upstream(), unknown_tools="drop") as url,
        openai_client(url) as client,
        httpx.AsyncClient() as http,
    ):
        # Three calls upstream (get_weather, get_news, send_email); one tool offered: two dropped.
        async with client.responses.stream(
            model="three", input="x", tools=responses_tools("get_weather")
        ) as stream:
            await stream.get_final_response()
        events = [
            event.type
            async for event in await client.responses.create(
                model="text", input="x", tools=responses_tools("search"), tool_choice="required", stream=True
            )
        ]
        lines = set((await http.get(url + "/metrics")).text.splitlines())
    assert events[-1] == "response.failed"
    assert {
        "streamfold_proxy_tool_calls_total 1",
        "streamfold_proxy_tool_calls_dropped_total 2",
        "streamfold_proxy_streams_open 0",
    } <= lines
    records = access_lines(caplog)
    assert [(r["model"], r["status"], r.get("tool_calls"), r.get("error")) for r in records] == [
        ("three", 200, 1, None),
        ("text", 200, None, "tool_choice_not_satisfied"),
    ]


class CountingHandler(logging.Handler):
    """Sets ``reached`` once ``wanted`` records have been logged."""

    def __init__(self, wanted: int) -> None:
        super().__init__()
        self.wanted = wanted
        self.count = 0
        self.reached = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if self.count == self.wanted:
            self.reached.set()


@pytest.mark.anyio
async def test_front_doors_log_a_client_that_went_away_as_499(caplog: pytest.LogCaptureFixture) -> None:
    """A client that gives up before the answer starts: the upstream request is cancelled at once, and the
    access line and the request count say 499, on both front doors."""
    upstream = FakeUpstream()
    caplog.set_level(logging.INFO, logger="streamfold.proxy.access")
    logged = CountingHandler(2)
    logging.getLogger("streamfold.proxy.access").addHandler(logged)
    requests: dict[str, dict[str, object]] = {
        "/v1/responses": {"input": "x"},
        "/v1/messages": {"max_tokens": 10, "messages": [{"role": "user", "content": "x"}]},
    }
    try:
        async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
            for path, body in requests.items():
                model = "held" + path
                held = upstream.add(
                    model, Scenario([chat_completion("late")], media_type="application/json", hold=True)
                )
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(partial(http.post, path, json=body | {"model": model}))
                    with anyio.fail_after(GUARD):
                        await held.arrived.wait()
                    tasks.cancel_scope.cancel()  # the client gives up: its connection to the proxy closes
                record = upstream.requests_for(model)[0]
                with anyio.fail_after(GUARD):
                    await record.ended.wait()
                assert record.outcome == "cancelled"
                assert not held.release.is_set()
            with anyio.fail_after(GUARD):
                await (
                    logged.reached.wait()
                )  # written as the proxy's request unwinds, maybe after the upstream's
            lines = set((await http.get("/metrics")).text.splitlines())
    finally:
        logging.getLogger("streamfold.proxy.access").removeHandler(logged)
    assert [(r["path"], r["route"], r["status"], r["model"]) for r in access_lines(caplog)] == [
        ("/v1/responses", "responses", 499, "held/v1/responses"),
        ("/v1/messages", "messages", 499, "held/v1/messages"),
    ]
    assert {
        'streamfold_proxy_requests_total{route="responses",status="499"} 1',
        'streamfold_proxy_requests_total{route="messages",status="499"} 1',
        "streamfold_proxy_streams_open 0",
    } <= lines
