"""The proxy's upstream transport on aiohttp (:mod:`pipeline.proxy._transport`), against a real upstream on
127.0.0.1: bodies as read, httpx's errors for aiohttp's, connections closed when a body is given up, and the
proxy giving the same answers on it as on httpx's own transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import openai
import pytest

from pipeline.proxy._transport import AiohttpTransport
from pipeline.proxy.app import _upstream_transport, create_app
from tests.guards import GUARD
from tests.pipeline.proxy.test_proxy_doors import KIMI
from tests.proxy_upstream import FakeUpstream, Scenario, chat_sse, closed_port, serving, sse_events

BODY = {"model": "m", "messages": [{"role": "user", "content": "x"}]}


@asynccontextmanager
async def aiohttp_client(**options: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=AiohttpTransport(httpx.Limits(max_connections=4)), **options
    ) as client:
        yield client


def test_the_proxy_takes_the_aiohttp_transport_when_it_is_installed() -> None:
    assert isinstance(_upstream_transport(httpx.Limits()), AiohttpTransport)


@pytest.mark.anyio
async def test_streamed_body_comes_whole_and_in_order() -> None:
    upstream = FakeUpstream()
    pieces = sse_events(chat_sse(["one ", "two ", "three"]))
    upstream.add("m", Scenario(pieces, headers={"x-extra": "1"}))
    async with serving(upstream.app) as url, aiohttp_client() as client:
        async with client.stream("POST", url + "/v1/chat/completions", json=BODY) as response:
            assert (response.status_code, response.headers["x-extra"]) == (200, "1")
            assert response.headers["content-type"].startswith("text/event-stream")
            received = b"".join([data async for data in response.aiter_raw()])
        # the request went as httpx built it: its JSON body and headers, nothing aiohttp would add
        record = upstream.requests_for("m")[0]
        assert record.body == BODY
        assert record.headers["content-type"] == "application/json"
    assert received == b"".join(pieces)


@pytest.mark.anyio
async def test_errors_are_httpx_errors() -> None:
    upstream = FakeUpstream()
    pieces = sse_events(chat_sse(["one ", "two ", "three"]))
    upstream.add("cut", Scenario(pieces, cut_after=2))
    upstream.add("stall", Scenario(pieces, pause_after=1))
    async with serving(upstream.app) as url, aiohttp_client(timeout=httpx.Timeout(5, read=1.0)) as client:
        with pytest.raises(httpx.ConnectError) as refused:
            await client.post(f"http://127.0.0.1:{closed_port()}/v1/chat/completions", json=BODY)
        assert refused.value.request.method == "POST"
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(url + "/v1/chat/completions", json=BODY | {"model": "cut"})
        with pytest.raises(httpx.ReadTimeout):
            await client.post(url + "/v1/chat/completions", json=BODY | {"model": "stall"})
    assert [r.outcome for r in upstream.received] == ["cut", "cancelled"]


@pytest.mark.anyio
async def test_a_body_given_up_closes_its_connection_and_a_read_one_is_kept() -> None:
    upstream = FakeUpstream()
    pieces = sse_events(chat_sse(["one ", "two ", "three"]))
    stalled = upstream.add("slow", Scenario(pieces, pause_after=1))
    upstream.add("m", Scenario(pieces))
    async with serving(upstream.app) as url, aiohttp_client() as client:
        async with client.stream(
            "POST", url + "/v1/chat/completions", json=BODY | {"model": "slow"}
        ) as response:
            async for _ in response.aiter_raw():
                break  # the client gives up after the first read
        record = upstream.requests_for("slow")[0]
        with anyio.fail_after(GUARD):
            await record.ended.wait()
        assert record.outcome == "cancelled"
        assert not stalled.release.is_set()
        for _ in range(3):
            assert (await client.post(url + "/v1/chat/completions", json=BODY)).content == b"".join(pieces)
        transport = client._transport
        assert isinstance(transport, AiohttpTransport)
        connector = transport._session.connector if transport._session is not None else None
        assert connector is not None
        assert sum(len(kept) for kept in connector._conns.values()) == 1  # one connection, kept alive


async def through_proxy(client: httpx.AsyncClient | None) -> tuple[list[Any], str]:
    """The rewritten calls and text of a Kimi stream, and the error of a cut one, through the proxy."""
    upstream = FakeUpstream()
    upstream.add("kimi", Scenario(sse_events(chat_sse([KIMI[:15], KIMI[15:60], KIMI[60:]]))))
    upstream.add("cut", Scenario(sse_events(chat_sse(["partial ", "text"])), cut_after=1))
    async with serving(upstream.app) as upstream_url:
        app = create_app(upstream_url, tool_format="kimi_k2", client=client)
        async with serving(app) as url, openai_client(url) as api:
            tools = [{"type": "function", "function": {"name": "get_weather"}}]
            request: dict[str, Any] = {"model": "kimi", "messages": BODY["messages"], "tools": tools}
            async with api.chat.completions.stream(**request) as stream:
                completion = await stream.get_final_completion()
            with pytest.raises(openai.APIError) as cut:
                await drain(api, request | {"model": "cut"})
    message = completion.choices[0].message
    calls = [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls or ()]
    return [message.content, calls], f"{cut.value.code}: {cut.value.message.split(':')[0]}"


async def drain(api: Any, request: dict[str, Any]) -> None:
    async with api.chat.completions.stream(**request) as stream:
        async for _ in stream:
            pass


@asynccontextmanager
async def openai_client(url: str) -> AsyncIterator[Any]:
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as client:
        yield client


@pytest.mark.anyio
async def test_the_proxy_answers_the_same_on_both_transports() -> None:
    on_aiohttp = await through_proxy(None)  # create_app's own client: the aiohttp transport
    async with httpx.AsyncClient() as httpx_own:
        on_httpx = await through_proxy(httpx_own)
    assert on_aiohttp == on_httpx
    assert on_aiohttp == (
        ["I'll check. ", [("get_weather", {"city": "Beijing"})]],
        "upstream_disconnected: the upstream stream was cut off",
    )
