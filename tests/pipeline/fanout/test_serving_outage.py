"""A log whose server cannot be reached (past its retry bound) is the server's trouble: every served
route answers 503 in its error shape (WebSocket close 4503), never a bare 500 or a client's 400.
Real uvicorn; a Redis log pointed at a port where nothing listens."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import httpx
import pytest
import redis.asyncio
from starlette.applications import Starlette
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.redis import RedisEventLog
from pipeline.fanout.web import serving_routes
from tests.guards import GUARD
from tests.pipeline.fanout.test_serving_web import Gated
from tests.pipeline.fanout.test_web import serving
from tests.servers import RedisServer, free_port, redis_server

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio


def unreachable(what: str) -> re.Pattern[str]:
    """The message of the ``EventLogUnavailable`` the log raises for ``what`` (a pattern)."""
    return re.compile(
        what + r" failed: Redis was unreachable for 0\.2 s \(\d+ tries\): Error 111 connecting to"
        r" 127\.0\.0\.1:\d+\. .*"
    )


@asynccontextmanager
async def down() -> AsyncIterator[str]:
    """``serving_routes`` and a Vercel ``chat_routes`` over a Redis log whose server is not there."""
    log = RedisEventLog(f"redis://127.0.0.1:{free_port()}/0", retry_for=0.2)

    async def start(body: object) -> Gated:
        return Gated([{"n": 0}], 1)

    try:
        async with ResponseManager(log) as manager:
            routes = [*serving_routes(manager, start=start), *chat_routes(manager, start)]
            async with serving(Starlette(routes=routes)) as address:
                yield address
    finally:
        await log.aclose()


@pytest.mark.parametrize(
    ("method", "url", "what"),
    [
        ("GET", "/responses", r"listing of response '\*'"),
        ("POST", "/responses", "create of response '[0-9a-f]{32}'"),
        ("GET", "/responses/abc", "status of response 'abc'"),
        ("GET", "/responses/abc/events", "status of response 'abc'"),
        ("GET", "/responses/abc/events?protocol=vercel", "status of response 'abc'"),
        ("POST", "/responses/abc/stop", "status of response 'abc'"),
        ("POST", "/api/chat", "create of response '[0-9a-f]{32}'"),
        ("GET", "/api/chat/chat-1/stream", r"listing of response '\*'"),
    ],
)
async def test_an_unreachable_log_answers_503(method: str, url: str, what: str) -> None:
    async with down() as address, httpx.AsyncClient(base_url=f"http://{address}") as client:
        with anyio.fail_after(GUARD):
            answer = await client.request(method, url, json={"id": "chat-1", "messages": []})
    assert answer.status_code == 503
    body = answer.json()
    assert (sorted(body), body["type"], body["error"]) == (
        ["error", "message", "type"],
        "ERROR",
        "EventLogUnavailable",
    )
    assert unreachable(what).fullmatch(body["message"]), body["message"]


async def test_an_unreachable_log_closes_a_websocket_4503() -> None:
    async with down() as address:
        with anyio.fail_after(GUARD):
            async with connect(f"ws://{address}/responses/abc/ws") as websocket:
                received = []
                with suppress(ConnectionClosed):
                    async for message in websocket:
                        received.append(json.loads(message))
    [refusal] = received
    assert (refusal["type"], refusal["error"]) == ("ERROR", "EventLogUnavailable")
    assert unreachable("status of response 'abc'").fullmatch(refusal["message"])
    assert websocket.close_code == 4503


async def test_a_redis_that_refuses_writes_answers_503_and_a_stop_says_so(redis_server: RedisServer) -> None:
    """Redis out of memory (``maxmemory``, no eviction) refuses every write: it is retried like an
    outage, then 503. A stop whose end cannot be written answers 503 too (it answered 200 ``running``);
    reads go on, and once Redis takes writes again a response is served as usual."""
    log = RedisEventLog(redis_server.url, retry_for=0.2)
    admin = redis.asyncio.from_url(redis_server.url)
    source = Gated([{"n": 0}, {"n": 1}], 1, hang=True)

    async def start(body: object) -> Gated:
        return source

    try:
        async with (
            ResponseManager(log) as manager,
            serving(Starlette(routes=serving_routes(manager, start=start))) as address,
            httpx.AsyncClient(base_url=f"http://{address}") as client,
        ):
            with anyio.fail_after(GUARD):
                response_id = (await client.post("/responses", json={})).json()["response_id"]
                await admin.config_set("maxmemory", "1")
                try:
                    stop = await client.post(f"/responses/{response_id}/stop", json={})
                    create = await client.post("/responses", json={})
                    status = await client.get(f"/responses/{response_id}")
                finally:
                    await admin.config_set("maxmemory", "0")
                again = await client.post("/responses", json={})
    finally:
        await log.aclose()
        await admin.aclose()
    for answer, what in ((stop, f"response '{response_id}' stopped"), (create, "create of response")):
        body = answer.json()
        assert (answer.status_code, body["error"]) == (503, "EventLogUnavailable"), body
        assert body["message"].startswith(what), body["message"]
        assert "command not allowed when used memory > 'maxmemory'" in body["message"]
    assert "Redis refused the command for 0.2 s" in create.json()["message"]
    assert (status.status_code, status.json()["state"]) == (200, "running")
    assert again.status_code == 201
    assert source.closed
