"""What a client may name on the serving routes, on every backend (memory, Redis, NATS: real servers):
cursors are plain ASCII digits, response ids what a URL segment, a Redis hash tag and a NATS subject
token can all hold. Anything else is refused the same way everywhere: 400 (WebSocket 4400) for a
cursor, 404 (4404) for an id looked up, 400 for an id a client asks to create."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from pipeline.fanout.serving._log import EventLog
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.fanout.web import serving_routes
from tests.servers import NatsServer, RedisServer, nats_server, redis_server
from tests.test_serving_web import GUARD, Gated
from tests.test_web import serving

__all__ = ["nats_server", "redis_server"]

pytestmark = pytest.mark.anyio

ARABIC_ONE = "\u0661"  # int() reads it as 1
NOT_ASCII_DIGITS = ["²", "¹", ARABIC_ONE, "\u0663", "\uff11", "0x1", "1e3", "+1", "-1", " 1 2", "1" * 19]
"""Cursors refused: superscripts (``str.isdigit``), other scripts' digits (``int`` parses them), signs."""


class App(NamedTuple):
    log: EventLog
    manager: ResponseManager
    http: str
    ws: str


@pytest.fixture(params=["memory", "redis", "nats"])
async def log(request: pytest.FixtureRequest) -> AsyncIterator[EventLog]:
    """A log of each backend, over a real server for Redis and NATS."""
    if request.param == "memory":
        yield MemoryEventLog()
        return
    opened: EventLog
    if request.param == "redis":
        from pipeline.fanout.serving.redis import RedisEventLog

        redis: RedisServer = request.getfixturevalue("redis_server")
        opened = RedisEventLog(redis.url)
    else:
        from pipeline.fanout.serving.nats import NatsEventLog

        nats: NatsServer = request.getfixturevalue("nats_server")
        opened = await NatsEventLog.connect(nats.url)
    yield opened
    await opened.aclose()


@pytest.fixture
async def app(log: EventLog) -> AsyncIterator[App]:
    async with (
        ResponseManager(log) as manager,
        serving(Starlette(routes=serving_routes(manager))) as address,
    ):
        yield App(log, manager, f"http://{address}", f"ws://{address}")


async def finished(app: App) -> str:
    """A response of three items that has ended."""
    rid = await app.manager.start(Gated([{"n": n} for n in range(3)], 3))
    await app.manager.wait(rid)
    return rid


async def ws_refusal(url: str) -> tuple[int | None, Any]:
    """The close code and the first message of a WebSocket the server refuses."""
    with anyio.fail_after(GUARD):
        async with connect(url) as websocket:
            first = json.loads(await websocket.recv())
            with pytest.raises(ConnectionClosed):
                await websocket.recv()
            return websocket.close_code, first


@pytest.mark.parametrize("cursor", NOT_ASCII_DIGITS)
async def test_a_cursor_that_is_not_ascii_digits_is_400(app: App, cursor: str) -> None:
    rid = await finished(app)
    message = f"a cursor (Last-Event-ID or ?after=) is an entry id >= 0, got {cursor!r}"
    async with httpx.AsyncClient(base_url=app.http) as client:
        for protocol in ({}, {"protocol": "vercel"}, {"protocol": "agui"}):
            by_query = await client.get(f"/responses/{rid}/events", params={"after": cursor, **protocol})
            assert by_query.status_code == 400, protocol
            assert by_query.json() == {"type": "ERROR", "error": "ConfigurationError", "message": message}
    code, first = await ws_refusal(f"{app.ws}/responses/{rid}/ws?{httpx.QueryParams(after=cursor)}")
    assert (code, first["error"], first["message"]) == (4400, "ConfigurationError", message)


async def test_a_last_event_id_that_is_not_ascii_digits_is_400(app: App) -> None:
    rid = await finished(app)
    async with httpx.AsyncClient(base_url=app.http) as client:
        # a header is bytes: b"\xb2" is "²" in latin-1, the charset of HTTP header values
        for raw, seen in [(b"\xb2", "²"), (b"\xb9", "¹"), (ARABIC_ONE.encode(), "\xd9\xa1")]:
            response = await client.get(f"/responses/{rid}/events", headers={b"Last-Event-ID": raw})
            assert response.status_code == 400
            assert response.json()["message"].endswith(f"got {seen!r}")
        resumed = await client.get(f"/responses/{rid}/events", headers={"Last-Event-ID": "2"})
        assert resumed.status_code == 200
