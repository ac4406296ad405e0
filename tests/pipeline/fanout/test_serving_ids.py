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

from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving._log import EventLog
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.fanout.web import serving_routes
from tests.guards import GUARD
from tests.pipeline.fanout.test_serving_web import Gated
from tests.pipeline.fanout.test_web import serving
from tests.servers import NatsServer, RedisServer, nats_server, redis_server
from tests.serving_conformance import UNHOLDABLE_IDS, new_id

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


async def test_a_long_cursor_is_quoted_in_part(app: App) -> None:
    """A cursor of any length is refused with its first 40 characters and its length, not echoed whole."""
    rid = await finished(app)
    cursor = "9" * 30 + "x" * 60_000
    async with httpx.AsyncClient(base_url=app.http) as client:
        refused = await client.get(f"/responses/{rid}/events", headers={"Last-Event-ID": cursor})
    assert refused.status_code == 400
    assert refused.json()["message"] == (
        f"a cursor (Last-Event-ID or ?after=) is an entry id >= 0, got {cursor[:40]!r}... (60030 characters)"
    )


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


def path_segment(response_id: str) -> str:
    """``response_id`` percent-encoded byte by byte, so that no client normalises ``..`` away."""
    return "".join(f"%{byte:02X}" for byte in response_id.encode())


ROUTABLE = [bad for bad in UNHOLDABLE_IDS if bad != ""]  # "" is no path segment: the router's own 404


@pytest.mark.parametrize("bad", ROUTABLE)
async def test_an_id_no_backend_can_hold_is_404_on_every_route(app: App, bad: str) -> None:
    unknown = {"type": "ERROR", "error": "ResponseNotFound", "message": f"no response {bad!r}"}
    segment = path_segment(bad)
    async with httpx.AsyncClient(base_url=app.http) as client:
        for method, path in [
            ("GET", f"/responses/{segment}"),
            ("GET", f"/responses/{segment}/events"),
            ("GET", f"/responses/{segment}/events?protocol=vercel"),
            ("GET", f"/responses/{segment}/events?protocol=agui"),
            ("POST", f"/responses/{segment}/stop"),
        ]:
            response = await client.request(method, path)
            assert (response.status_code, response.json()) == (404, unknown), path
    code, first = await ws_refusal(f"{app.ws}/responses/{segment}/ws")
    assert (code, first) == (4404, unknown)


class Recorder:
    """A chat starter that records its calls."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def __call__(self, body: Any) -> Gated:
        self.calls.append(body)
        return Gated([], 0)


@pytest.mark.parametrize("bad", ["..", "*", ">", "$JS", "a.b", "é", "²", "", "x" * 129, 42])
async def test_an_ag_ui_run_id_no_backend_can_hold_is_400_before_the_model_is_called(
    log: EventLog, bad: object
) -> None:
    start = Recorder()
    thread = new_id()
    async with (
        ResponseManager(log) as manager,
        serving(Starlette(routes=chat_routes(manager, start, path="/agent", protocol="agui"))) as address,
        httpx.AsyncClient(base_url=f"http://{address}") as client,
    ):
        response = await client.post("/agent", json={"threadId": thread, "runId": bad, "messages": []})
    assert response.status_code == 400
    assert response.json() == {
        "type": "ERROR",
        "error": "ConfigurationError",
        "message": f"a response id is 1 to 128 letters, digits, '_' or '-', got {bad!r}",
    }
    assert start.calls == []
    assert [status for status in await log.active() if status.meta.get("chat_id") == thread] == []


@pytest.mark.parametrize(("protocol", "key"), [("agui", "threadId"), ("vercel", "id")])
@pytest.mark.parametrize("bad", [42, ["t"], {"id": "t"}, True])
async def test_a_chat_id_that_is_not_a_string_is_400_before_the_model_is_called(
    protocol: str, key: str, bad: object
) -> None:
    """Two runs whose thread ids are both not strings are not one thread (a repeated runId would replay
    the other's run): such a request is refused, naming the field."""
    start = Recorder()
    async with (
        ResponseManager(MemoryEventLog()) as manager,
        serving(Starlette(routes=chat_routes(manager, start, path="/chat", protocol=protocol))) as address,
        httpx.AsyncClient(base_url=f"http://{address}") as client,
    ):
        response = await client.post("/chat", json={key: bad, "messages": []})
    assert response.status_code == 400
    assert response.json()["message"] == f"{key} is a string, got {type(bad).__name__}"
    assert start.calls == []
