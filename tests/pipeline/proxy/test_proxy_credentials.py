"""Credentials in the upstream URL (``http://user:password@host``): sent as Basic auth on both transports,
never shown in an answer or a log line; the upstream's address is not shown to clients either."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import httpx
import pytest

from pipeline.proxy.app import create_app
from tests.proxy_upstream import FakeUpstream, Scenario, chat_sse, closed_port, serving, sse_events

PASSWORD = "s3cret-pw"
BASIC = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
USER = [{"role": "user", "content": "x"}]


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://alice:{PASSWORD}@")


@asynccontextmanager
async def upstream_client(transport: str) -> AsyncIterator[httpx.AsyncClient | None]:
    """``None``: create_app's own client (the aiohttp transport); ``httpx``: httpx's own transport."""
    if transport == "aiohttp":
        yield None
    else:
        async with httpx.AsyncClient() as client:
            yield client


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_credentials_in_the_upstream_url_reach_the_upstream_as_basic_auth(transport: str) -> None:
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse(["hi"]))))
    async with upstream_client(transport) as client, serving(upstream.app) as upstream_url:
        app = create_app(with_credentials(upstream_url), tool_format="kimi_k2", client=client)
        async with serving(app) as url, httpx.AsyncClient(base_url=url) as http:
            models = await http.get("/v1/models")
            chat = await http.post(
                "/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True}
            )
            messages = await http.post("/v1/messages", json={"model": "m", "max_tokens": 5, "messages": USER})
    assert (models.status_code, chat.status_code, messages.status_code) == (200, 200, 200)
    assert chat.text.endswith("data: [DONE]\n\n")
    assert [request.headers["authorization"] for request in upstream.received] == [BASIC] * 3


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_an_upstream_failure_shows_neither_the_password_nor_the_address(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = closed_port()
    address = f"127.0.0.1:{port}"
    async with upstream_client(transport) as client:
        app = create_app(with_credentials(f"http://{address}"), tool_format="kimi_k2", client=client)
        async with serving(app) as url, httpx.AsyncClient(base_url=url) as http:
            answers = [
                await http.post(
                    "/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True}
                ),
                await http.post("/v1/responses", json={"model": "m", "input": "x"}),
                await http.post("/v1/messages", json={"model": "m", "max_tokens": 5, "messages": USER}),
                await http.get("/v1/models"),
            ]
    assert [answer.status_code for answer in answers] == [502] * 4
    assert [answer.json() for answer in answers[:2]] == [
        {
            "error": {
                "message": "cannot connect to the upstream (ConnectError)",
                "type": "upstream_error",
                "param": None,
                "code": "upstream_unreachable",
            }
        }
    ] * 2
    assert answers[2].json() == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": "upstream_unreachable: cannot connect to the upstream (ConnectError)",
            "details": {"error_code": "upstream_unreachable"},
        },
    }
    for answer in answers:
        assert PASSWORD not in answer.text
        assert address not in answer.text
    lines = [record.getMessage() for record in caplog.records]
    assert any(address in line for line in lines)  # the operator's log says where
    assert not [line for line in lines if PASSWORD in line]


@pytest.mark.anyio
async def test_a_malformed_upstream_answer_logs_no_authorization_header(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aiohttp reports an answer that is not HTTP as a ``ClientResponseError`` whose ``repr`` holds the
    request's headers: the Basic auth made of the URL's password (base64 is no secret) and a client's own
    token must not reach the log through it."""
    caplog.set_level(logging.DEBUG)
    token = BASIC.removeprefix("Basic ")

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            await stream.send(b"NOT HTTP AT ALL\r\n\r\n")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, handle)
        with_password = create_app(with_credentials(f"http://127.0.0.1:{port}"), tool_format="kimi_k2")
        without = create_app(f"http://127.0.0.1:{port}", tool_format="kimi_k2")
        async with serving(with_password) as first, serving(without) as second:
            answers = []
            for url in (first, second):
                async with httpx.AsyncClient(base_url=url) as http:
                    answers.append(
                        await http.post(
                            "/v1/chat/completions",
                            headers={"authorization": "Bearer sk-client-token"},
                            json={"model": "m", "messages": USER},
                        )
                    )
        tasks.cancel_scope.cancel()
    assert [(answer.status_code, answer.json()["error"]["code"]) for answer in answers] == [
        (502, "upstream_error")
    ] * 2
    lines = [record.getMessage() for record in caplog.records]
    assert any("upstream request POST" in line for line in lines)
    assert not [line for line in lines if token in line or PASSWORD in line or "sk-client-token" in line]
