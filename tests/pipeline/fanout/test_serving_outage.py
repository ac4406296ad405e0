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
from tests.servers import free_port

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
