"""Who may start, list, read and stop served responses, and what a POST body may be, over real HTTP
(uvicorn on 127.0.0.1): owners, the loopback default, cross-site posts, body caps, undecodable bodies."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager, suppress
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from pipeline.errors import ConfigurationError
from pipeline.fanout.access import (
    DEFAULT_MAX_BODY_BYTES,
    Authorize,
    Principal,
    bearer_token,
    is_loopback,
    owner_only,
    read_body,
)
from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.fanout.serving.redis import RedisEventLog
from pipeline.fanout.web import serving_routes
from tests.conftest import ROOT
from tests.guards import GUARD
from tests.pipeline.fanout.test_serving_web import Gated, items, read_frames
from tests.pipeline.fanout.test_web import serving
from tests.proxy_upstream import serving as proxy_serving
from tests.servers import RedisServer, redis_server

pytestmark = pytest.mark.anyio
__all__ = ["redis_server"]  # the fixture
JSON_TYPE = {"content-type": "application/json"}
TOKENS = {"token-a": "alice", "token-b": "bob"}
ALICE = {"authorization": "Bearer token-a"}
BOB = {"authorization": "Bearer token-b"}
FAR_CLIENT = ("203.0.113.9", 4000)
LOOPBACK_HELP = (
    "without authorize=, the serving routes serve only clients on this machine (127.0.0.0/8, ::1);"
    " pass authorize= (a session or token check, see pipeline.fanout.access) to serve others"
)

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def user(connection: HTTPConnection) -> str | None:
    """The tests' principal: the holder of a bearer token of ``TOKENS``."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return TOKENS.get(token) if scheme == "Bearer" else None


def denied(message: str) -> dict[str, str]:
    return {"type": "ERROR", "error": "AccessDenied", "message": message}


class FromAfar:
    """ASGI middleware: every connection comes from ``FAR_CLIENT``, as a client on another machine."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        await self.app({**scope, "client": FAR_CLIENT}, receive, send)


class Served(NamedTuple):
    log: MemoryEventLog
    manager: ResponseManager
    http: str
    ws: str
    calls: list[Any]
    """The bodies ``start`` was called with: one per model call."""


@asynccontextmanager
async def served(*, far: bool = False, **access: Any) -> AsyncIterator[Served]:
    """``serving_routes`` and ``chat_routes`` (``/api/chat`` Vercel, ``/agent`` AG-UI) over one manager;
    each start makes a response that runs until stopped."""
    log = MemoryEventLog()
    calls: list[Any] = []

    async def start(body: Any) -> Any:
        calls.append(body)
        return Gated(items(2), 2, hang=True)

    async with ResponseManager(log) as manager:
        routes = [
            *serving_routes(manager, start=start, **access),
            *chat_routes(manager, start, path="/api/chat", **access),
            *chat_routes(manager, start, path="/agent", protocol="agui", **access),
        ]
        app: Any = Starlette(routes=routes)
        async with serving(FromAfar(app) if far else app) as address:
            yield Served(log, manager, f"http://{address}", f"ws://{address}", calls)
        for status in await log.active():
            if status.state == "running":
                await manager.stop(status.response_id)


async def websocket_refusal(url: str, **headers: str) -> tuple[list[Any], int | None, str | None]:
    """The messages a refused WebSocket receives before its close, and the close code and reason."""
    with anyio.fail_after(GUARD):
        async with connect(url, additional_headers=headers) as websocket:
            received: list[Any] = []
            with suppress(ConnectionClosed):  # a close code other than 1000 ends the iteration so
                async for message in websocket:
                    received.append(json.loads(message))
            return received, websocket.close_code, websocket.close_reason


async def test_a_second_client_cannot_list_read_resume_or_stop_anothers_response() -> None:
    async with (
        served(authorize=owner_only(user), owner=user) as app,
        httpx.AsyncClient(base_url=app.http) as client,
    ):
        created = await client.post("/responses", json={}, headers=ALICE)
        assert created.status_code == 201
        rid = created.json()["response_id"]
        status = await app.log.status(rid)
        assert status is not None
        assert status.meta == {"owner": "alice"}

        assert (await client.get("/responses", headers=BOB)).json() == {"responses": []}
        read_denied = denied(f"not allowed to read response {rid!r}")
        for url, headers in [
            (f"/responses/{rid}", {}),
            (f"/responses/{rid}/events", {}),
            (f"/responses/{rid}/events?after=1", {}),
            (f"/responses/{rid}/events", {"last-event-id": "1"}),
            (f"/responses/{rid}/events?protocol=vercel", {}),
            (f"/responses/{rid}/events?protocol=agui&after=1", {}),
            # refused before the request's other faults are looked at: a refused client learns nothing
            (f"/responses/{rid}/events?after=x", {}),
            (f"/responses/{rid}/events", {"last-event-id": "-1"}),
            (f"/responses/{rid}/events?protocol=nope", {}),
            (f"/responses/{rid}/events?protocol=vercel&after=x", {}),
            (f"/responses/{rid}/events?protocol=agui&after=99", {}),
        ]:
            refused = await client.get(url, headers={**BOB, **headers})
            assert (refused.status_code, refused.json()) == (403, read_denied), url
        for query in ("after=1", "after=x"):
            message, code, reason = await websocket_refusal(f"{app.ws}/responses/{rid}/ws?{query}", **BOB)
            assert message == [read_denied]
            assert (code, reason) == (4403, read_denied["message"])
        for unknown in ["/responses/nope", "/responses/nope/events", "/responses/nope/events?protocol=agui"]:
            hidden = await client.get(unknown, headers=BOB)  # not 404: an unknown id looks like another's
            assert (hidden.status_code, hidden.json()) == (403, denied("not allowed to read response 'nope'"))
        stop = await client.post(f"/responses/{rid}/stop", json={}, headers=BOB)
        assert (stop.status_code, stop.json()) == (403, denied(f"not allowed to stop response {rid!r}"))
        assert (await client.post(f"/responses/{rid}/stop", json={})).status_code == 403  # nobody
        still = await app.log.status(rid)
        assert still is not None
        assert still.state == "running"

        # nobody (no token) may start or list; no model call is made
        anonymous = await client.post("/responses", json={})
        assert (anonymous.status_code, anonymous.json()) == (403, denied("not allowed to start a response"))
        listed = await client.get("/responses")
        assert (listed.status_code, listed.json()) == (403, denied("not allowed to list responses"))
        assert app.calls == [{}]

        # the owner lists, reads (any way) and stops it
        mine = (await client.get("/responses", headers=ALICE)).json()["responses"]
        assert [(s["response_id"], s["meta"]) for s in mine] == [(rid, {"owner": "alice"})]
        assert (await client.get(f"/responses/{rid}", headers=ALICE)).status_code == 200
        with anyio.fail_after(GUARD):
            async with client.stream("GET", f"/responses/{rid}/events", headers=ALICE) as response:
                assert [f.id for f in await read_frames(response, stop_after=2)] == [1, 2]
            async with connect(f"{app.ws}/responses/{rid}/ws?after=1", additional_headers=ALICE) as ws:
                assert json.loads(await ws.recv()) == {"id": 2, "item": {"n": 1}}
        stopped = await client.post(f"/responses/{rid}/stop", json={}, headers=ALICE)
        assert (stopped.status_code, stopped.json()["state"]) == (200, "stopped")


async def test_a_second_client_cannot_resume_anothers_chat() -> None:
    body = {"id": "chat-1", "messages": [], "trigger": "submit-message"}
    async with (
        served(authorize=owner_only(user), owner=user) as app,
        httpx.AsyncClient(base_url=app.http) as client,
    ):
        with anyio.fail_after(GUARD):
            async with client.stream("POST", "/api/chat", json=body, headers=ALICE) as response:
                assert response.status_code == 200
                rid = response.headers["x-streamfold-response-id"]
            status = await app.log.status(rid)
            assert status is not None
            assert status.meta == {"protocol": "vercel", "chat_id": "chat-1", "owner": "alice"}
            # Bob learns nothing of Alice's running chat: as if none ran
            assert (await client.get("/api/chat/chat-1/stream", headers=BOB)).status_code == 204
            async with client.stream("GET", "/api/chat/chat-1/stream", headers=ALICE) as response:
                assert response.status_code == 200
                assert response.headers["x-streamfold-response-id"] == rid
            assert (await client.get("/api/chat/other/stream", headers=BOB)).status_code == 204
            refused = await client.post("/agent", json={"threadId": "t", "messages": []})
            assert (refused.status_code, refused.json()) == (403, denied("not allowed to start a response"))
        assert app.calls == [body]


async def test_a_repeated_ag_ui_run_id_is_read_as_the_runs_owner_allows() -> None:
    """Bob repeating Alice's ``runId`` in her thread is refused as a read of her run: 403, no stream,
    and no second model call."""
    body = {"threadId": "thread-1", "runId": "run-1", "messages": []}
    async with (
        served(authorize=owner_only(user), owner=user) as app,
        httpx.AsyncClient(base_url=app.http) as client,
    ):
        with anyio.fail_after(GUARD):
            async with client.stream("POST", "/agent", json=body, headers=ALICE) as response:
                assert response.status_code == 200
            repeated = await client.post("/agent", json=body, headers=BOB)
            assert (repeated.status_code, repeated.json()) == (
                403,
                denied("not allowed to read response 'run-1'"),
            )
            async with client.stream("POST", "/agent", json=body, headers=ALICE) as response:
                assert response.status_code == 200
                assert response.headers["x-streamfold-response-id"] == "run-1"
        assert app.calls == [body]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
async def test_a_cross_site_post_starts_no_model_call_and_stops_nothing(content_type: str | None) -> None:
    """What a page of another site can send without a CORS preflight (a form, a no-cors fetch)."""
    headers = {"content-type": content_type} if content_type is not None else {}
    refusal = {
        "type": "ERROR",
        "error": "UnsupportedMediaType",
        "message": f"a POST here takes content-type application/json, got {content_type or 'none'}",
    }
    async with served() as app, httpx.AsyncClient(base_url=app.http) as client:
        rid = await app.manager.start(Gated(items(2), 2, hang=True))
        for url in ["/responses", "/api/chat", "/agent", f"/responses/{rid}/stop"]:
            posted = await client.post(url, content=b'{"id": "c", "messages": []}', headers=headers)
            assert (posted.status_code, posted.json()) == (415, refusal), url
        assert app.calls == []
        status = await app.log.status(rid)
        assert status is not None
        assert status.state == "running"
        # the same POSTs as JSON do what they are for
        assert (await client.post(f"/responses/{rid}/stop", headers=JSON_TYPE)).status_code == 200
        assert (await client.post("/responses", json={})).status_code == 201


def too_large(cap: int) -> dict[str, str]:
    return {
        "type": "ERROR",
        "error": "PayloadTooLarge",
        "message": f"the body is over the {cap}-byte cap (max_body_bytes)",
    }


async def test_a_body_over_the_default_cap_is_refused_413() -> None:
    over = b'"' + b"x" * (DEFAULT_MAX_BODY_BYTES - 1) + b'"'  # one byte over
    async with served() as app, httpx.AsyncClient(base_url=app.http) as client:
        rid = await app.manager.start(Gated(items(2), 2, hang=True))
        for url in ["/responses", "/api/chat", "/agent", f"/responses/{rid}/stop"]:
            posted = await client.post(url, content=over, headers=JSON_TYPE)
            assert (posted.status_code, posted.json()) == (413, too_large(DEFAULT_MAX_BODY_BYTES)), url
        assert app.calls == []
        at_cap = await client.post("/responses", content=over[:-2] + b'"', headers=JSON_TYPE)
        assert at_cap.status_code == 201


async def test_max_body_bytes_caps_bodies_with_and_without_a_length() -> None:
    cap = 100
    fits = json.dumps({"pad": "x" * (cap - 11)}).encode()
    assert len(fits) == cap

    async def chunked(data: bytes) -> AsyncIterator[bytes]:  # no content-length: read until the cap
        for start in range(0, len(data), 30):
            yield data[start : start + 30]

    async with served(max_body_bytes=cap) as app, httpx.AsyncClient(base_url=app.http) as client:
        for url in ["/responses", "/api/chat", "/agent"]:
            contents: list[bytes | AsyncIterator[bytes]] = [fits + b" ", chunked(fits + b" ")]
            for content in contents:
                posted = await client.post(url, content=content, headers=JSON_TYPE)
                assert (posted.status_code, posted.json()) == (413, too_large(cap)), url
        assert app.calls == []
        assert (await client.post("/responses", content=chunked(fits), headers=JSON_TYPE)).status_code == 201
        assert app.calls == [{"pad": "x" * (cap - 11)}]


@pytest.mark.parametrize(
    ("declared", "read"),
    [("\u00b2", b"{}"), ("1\u00b9", b"{}"), ("9" * 5000, too_large(10)), ("9" * 19, too_large(10))],
    ids=["superscript-two", "superscript-one", "5000-digits", "19-digits"],
)
async def test_a_content_length_of_other_digits_is_not_trusted(declared: str, read: Any) -> None:
    """uvicorn refuses such a ``Content-Length``, another ASGI server may pass it on: a length that is not
    ASCII digits is ignored (the body is counted as it arrives), one of 19 digits or more is over the cap."""
    scope = {"type": "http", "headers": [(b"content-length", declared.encode("latin-1"))]}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    got = await read_body(HTTPConnection(scope), receive, 10)
    assert (got if isinstance(got, bytes) else got.error) == read


async def test_a_lone_surrogate_escape_is_named_as_the_fault() -> None:
    """msgspec refuses ``"\\ud800"`` as "truncated"; the answer says what streamfold refuses and where."""
    message = (
        "the body is not I-JSON (RFC 7493): a lone surrogate escape '\\\\ud800' at byte 14 of the JSON"
        " (streamfold refuses it)"
    )
    async with served() as app, httpx.AsyncClient(base_url=app.http) as client:
        for url in ["/responses", "/api/chat", "/agent"]:
            posted = await client.post(url, content=b'{"messages": "\\ud800"}', headers=JSON_TYPE)
            assert (posted.status_code, posted.json()["message"]) == (400, message), url


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            b'{"messages": "caf\xe9"}',
            "it is not UTF-8: byte 0xe9 at offset 17 (invalid continuation byte)",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "it is nested deeper than the decoder allows"),
        (b'{"messages": [' * 50_000, "it is nested deeper than the decoder allows"),
    ],
    ids=["bad-utf8", "deep-array", "deep-unclosed"],
)
async def test_undecodable_bodies_answer_400_in_the_routes_shape(body: bytes, reason: str) -> None:
    expected = {"type": "ERROR", "error": "StreamDecodeError", "message": f"the body is not JSON: {reason}"}
    async with served() as app, httpx.AsyncClient(base_url=app.http) as client:
        for url in ["/responses", "/api/chat", "/agent"]:
            posted = await client.post(url, content=body, headers=JSON_TYPE)
            assert (posted.status_code, posted.json()) == (400, expected), url
    assert app.calls == []


async def test_by_default_a_client_on_another_machine_is_refused() -> None:
    async with served(far=True) as app, httpx.AsyncClient(base_url=app.http) as client:
        rid = await app.manager.start(Gated(items(2), 2, hang=True), meta={"chat_id": "chat-1"})
        far = "client 203.0.113.9 is not on this machine: " + LOOPBACK_HELP
        for method, url, action in [
            ("GET", "/responses", "list responses"),
            ("POST", "/responses", "start a response"),
            ("POST", "/api/chat", "start a response"),
            ("POST", "/agent", "start a response"),
            ("GET", f"/responses/{rid}", f"read response {rid!r}"),
            ("GET", f"/responses/{rid}/events", f"read response {rid!r}"),
            ("GET", f"/responses/{rid}/events?protocol=agui", f"read response {rid!r}"),
            ("GET", "/api/chat/chat-1/stream", "list responses"),
            ("POST", f"/responses/{rid}/stop", f"stop response {rid!r}"),
        ]:
            answer = await client.request(method, url, json={"id": "chat-1", "messages": []})
            refusal = denied(f"not allowed to {action}: {far}")
            assert (answer.status_code, answer.json()) == (403, refusal), url
        message, code, _ = await websocket_refusal(f"{app.ws}/responses/{rid}/ws")
        assert message == [denied(f"not allowed to read response {rid!r}: {far}")]
        assert code == 4403
        unknown = await client.get("/responses/nope/events?after=1")  # refused before anything else
        assert (unknown.status_code, unknown.json()) == (
            403,
            denied(f"not allowed to read response 'nope': {far}"),
        )
        assert app.calls == []
        status = await app.log.status(rid)
        assert status is not None
        assert status.state == "running"


async def test_by_default_a_websocket_from_a_page_of_another_site_is_refused() -> None:
    async with served() as app:
        rid = await app.manager.start(Gated(items(2), 2))
        await app.manager.wait(rid)
        message, code, _ = await websocket_refusal(
            f"{app.ws}/responses/{rid}/ws", origin="http://evil.example"
        )
        assert message == [
            denied(
                f"not allowed to read response {rid!r}: a WebSocket opened by a page of"
                " http://evil.example is refused: browsers apply no CORS to WebSockets; pass authorize="
                " to allow other sites"
            )
        ]
        assert code == 4403
        same_site = Origin(app.http)  # a page the server itself serves
        with anyio.fail_after(GUARD):
            async with connect(f"{app.ws}/responses/{rid}/ws", origin=same_site) as websocket:
                assert [json.loads(m) async for m in websocket][-1] == {"id": 3, "type": "END"}
                assert websocket.close_code == 1000


async def test_bearer_token_takes_the_header_or_the_cookie() -> None:
    async with (
        served(far=True, authorize=bearer_token("s3cret", cookie="session")) as app,
        httpx.AsyncClient(base_url=app.http) as client,
    ):
        assert (await client.get("/responses", headers={"authorization": "Bearer s3cret"})).status_code == 200
        assert (await client.get("/responses", headers={"authorization": "bearer s3cret"})).status_code == 200
        assert (await client.get("/responses", headers={"cookie": "session=s3cret"})).status_code == 200
        for headers in [{}, {"authorization": "Bearer s3cre"}, {"cookie": "other=s3cret"}]:
            refused = await client.get("/responses", headers=headers)
            assert (refused.status_code, refused.json()) == (403, denied("not allowed to list responses"))
    with pytest.raises(ConfigurationError, match="non-empty token"):
        bearer_token("")


@pytest.mark.parametrize(
    ("client", "local"),
    [
        (("127.0.0.1", 1), True),
        (("127.200.0.9", 1), True),
        (("::1", 1), True),
        (("::ffff:127.0.0.1", 1), True),
        (("10.0.0.1", 1), False),
        (("::ffff:10.0.0.1", 1), False),
        (("2001:db8::1", 1), False),
        (("testclient", 1), False),
        (None, False),
    ],
)
def test_is_loopback(client: tuple[str, int] | None, local: bool) -> None:
    assert is_loopback(HTTPConnection({"type": "http", "client": client, "headers": []})) is local


async def test_hooks_may_be_async() -> None:
    async def principal(connection: HTTPConnection) -> str | None:
        await anyio.lowlevel.checkpoint()
        return user(connection)

    async def only_alice(connection: HTTPConnection, action: str, response_id: str | None, meta: Any) -> bool:
        return await principal(connection) == "alice"

    hooks: tuple[Authorize, Principal] = (only_alice, principal)
    async with (
        served(authorize=hooks[0], owner=hooks[1]) as app,
        httpx.AsyncClient(base_url=app.http) as client,
    ):
        assert (await client.post("/responses", json={}, headers=ALICE)).status_code == 201
        assert (await client.post("/responses", json={}, headers=BOB)).status_code == 403
        [status] = await app.log.active()
        assert status.meta == {"owner": "alice"}


def security_page_app() -> Any:
    """The app of the Python block of ``docs/serving-security.md``, run as written."""
    page = (ROOT / "docs" / "serving-security.md").read_text()
    [block] = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    namespace: dict[str, Any] = {"__name__": "security_page"}
    exec(compile(block, "docs/serving-security.md", "exec"), namespace)
    return namespace["app"]


async def test_the_security_page_example_serves_each_user_their_own() -> None:
    alice = {"authorization": "Bearer token-of-alice"}
    bob = {"authorization": "Bearer token-of-bob"}
    async with (
        proxy_serving(security_page_app()) as address,
        httpx.AsyncClient(base_url=address) as client,
    ):
        created = await client.post("/responses", json={}, headers=alice)
        assert created.status_code == 201
        rid = created.json()["response_id"]
        assert (await client.get(f"/responses/{rid}/events", headers=bob)).status_code == 403
        assert (await client.get("/responses", headers=bob)).json() == {"responses": []}
        events = await client.get(f"/responses/{rid}/events", headers=alice)
        assert '"delta":"Hello"' in events.text
        preflight = {
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type",
        }
        allowed = await client.options(
            "/api/chat", headers={"origin": "https://app.example.com", **preflight}
        )
        assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
        assert allowed.headers["access-control-allow-credentials"] == "true"
        other = await client.options("/api/chat", headers={"origin": "https://evil.example", **preflight})
        assert other.status_code == 400
        assert "access-control-allow-origin" not in other.headers


async def test_the_owner_travels_with_the_response_to_another_process(redis_server: RedisServer) -> None:
    """A web replica over the same Redis log checks the owner the producing process stored."""
    producer_log, replica_log = RedisEventLog(redis_server.url), RedisEventLog(redis_server.url)
    access: dict[str, Any] = {"authorize": owner_only(user), "owner": user}

    async def start(body: Any) -> Any:
        return Gated(items(2), 2)

    try:
        async with ResponseManager(producer_log) as manager:
            producer = Starlette(routes=serving_routes(manager, start=start, **access))
            replica = Starlette(routes=serving_routes(replica_log, **access))
            async with (
                serving(producer) as producer_address,
                serving(replica) as replica_address,
                httpx.AsyncClient() as client,
            ):
                created = await client.post(f"http://{producer_address}/responses", json={}, headers=ALICE)
                rid = created.json()["response_id"]
                await manager.wait(rid)
                there = f"http://{replica_address}/responses"
                refused = await client.get(f"{there}/{rid}/events", headers=BOB)
                assert (refused.status_code, refused.json()) == (
                    403,
                    denied(f"not allowed to read response {rid!r}"),
                )
                assert (await client.get(there, headers=BOB)).json() == {"responses": []}
                events = await client.get(f"{there}/{rid}/events", headers=ALICE)
                assert events.status_code == 200
                assert events.text.endswith('event: end\ndata: {"id":3,"type":"END"}\n\n')
    finally:
        await producer_log.aclose()
        await replica_log.aclose()
