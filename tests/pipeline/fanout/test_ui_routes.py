"""Served responses in the UI protocols: ``?protocol=`` on the events route, resume by Last-Event-ID, and
the chat routes ``useChat`` (Vercel) and AG-UI's ``HttpAgent`` call."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from starlette.applications import Starlette

from operators.encode.protocols import encoder_for
from pipeline.cli.main import _DEMO_STREAMS, _sse_event_pieces
from pipeline.compose import process
from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving import MemoryEventLog, Retention
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.web import serving_routes
from tests.guards import GUARD
from tests.pipeline.fanout.test_serving_web import Gated
from tests.proxy_upstream import serving

pytestmark = pytest.mark.anyio

_ID = re.compile(rb"^id: (\d+)\n", re.MULTILINE)


async def demo_items(stream: str = "openai-parallel") -> list[Any]:
    """The pipeline's items for a bundled recording."""
    name, provider = _DEMO_STREAMS[stream]
    data = (resources.files("pipeline.cli") / "demo" / name).read_bytes()
    pipeline = process(_sse_event_pieces(data), provider=provider)  # type: ignore[arg-type]
    async with pipeline.stream() as events:
        items = [event async for event in events]
    return items


def direct(protocol: str, response_id: str, items: list[Any], **options: Any) -> list[bytes]:
    """The frames the protocol's encoder gives for ``items`` in their log form (JSON round trip)."""
    core = encoder_for(protocol).core(response_id=response_id, **options)
    frames: list[bytes] = []
    for item in items:
        frames += core.feed(msgspec.json.decode(msgspec.json.encode(item.to_dict())))
    return frames + core.finish()


def split(body: bytes) -> list[tuple[int | None, bytes]]:
    """SSE events of ``body`` as (id, the event without its id line)."""
    events: list[tuple[int | None, bytes]] = []
    for raw in body.split(b"\n\n"):
        if not raw or raw.startswith(b":"):
            continue
        frame = raw + b"\n\n"
        found = _ID.match(frame)
        events.append((int(found.group(1)), frame[found.end() :]) if found else (None, frame))
    return events


@pytest.fixture
async def app() -> AsyncIterator[tuple[ResponseManager, str]]:
    log = MemoryEventLog()
    async with (
        ResponseManager(log) as manager,
        serving(Starlette(routes=serving_routes(manager, policy="block"))) as url,
    ):
        yield manager, url


@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_the_same_response_in_each_protocol(app: tuple[ResponseManager, str], protocol: str) -> None:
    manager, url = app
    items = await demo_items()
    rid = await manager.start(Gated(items, len(items)))
    async with httpx.AsyncClient(base_url=url) as client:
        with anyio.fail_after(GUARD):
            response = await client.get(f"/responses/{rid}/events", params={"protocol": protocol})
    assert response.status_code == 200
    for name, value in encoder_for(protocol).headers:
        assert response.headers[name] == value
    events = split(response.content)
    assert [frame for _, frame in events] == direct(protocol, rid, items)
    ids = [event_id for event_id, _ in events if event_id is not None]
    assert ids == sorted(set(ids))
    assert ids[-1] == len(items) + 1  # the terminal entry's id is on the last frame
    if protocol == "vercel":
        assert events[-1][1] == b"data: [DONE]\n\n"


@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_resuming_from_any_id_gives_exactly_the_rest(
    app: tuple[ResponseManager, str], protocol: str
) -> None:
    manager, url = app
    items = await demo_items()
    rid = await manager.start(Gated(items, len(items)))
    await manager.wait(rid)
    async with httpx.AsyncClient(base_url=url) as client:
        with anyio.fail_after(GUARD):
            whole = split(
                (await client.get(f"/responses/{rid}/events", params={"protocol": protocol})).content
            )
            for position, (cursor, _) in enumerate(whole):
                if cursor is None:
                    continue
                rest = await client.get(
                    f"/responses/{rid}/events",
                    params={"protocol": protocol},
                    headers={"Last-Event-ID": str(cursor)},
                )
                assert split(rest.content) == whole[position + 1 :], cursor


async def test_an_unknown_protocol_and_a_trimmed_start_are_clear_errors() -> None:
    log = MemoryEventLog(retention=Retention(max_items=5))
    async with ResponseManager(log) as manager, serving(Starlette(routes=serving_routes(manager))) as url:
        items = await demo_items()
        rid = await manager.start(Gated(items, len(items)))
        await manager.wait(rid)
        async with httpx.AsyncClient(base_url=url) as client:
            unknown = await client.get(f"/responses/{rid}/events", params={"protocol": "grpc"})
            assert unknown.status_code == 400
            assert "unknown wire protocol 'grpc'" in unknown.json()["message"]
            status = (await client.get(f"/responses/{rid}")).json()
            gone = await client.get(
                f"/responses/{rid}/events",
                params={"protocol": "vercel"},
                headers={"Last-Event-ID": str(status["last_id"] - 1)},
            )
            assert gone.status_code == 410
            assert gone.json()["first_id"] == status["first_id"]
            assert "replays response" in gone.json()["message"]


USE_CHAT_BODY = {
    "id": "chat-7Qx2",
    "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Weather in Paris?"}]}],
    "trigger": "submit-message",
}


async def test_use_chat_posts_start_a_response_and_get_its_ui_message_stream() -> None:
    items = await demo_items()
    bodies: list[Any] = []
    gate = Gated(items, 3)

    async def start(body: Any) -> Gated:
        bodies.append(body)
        return gate

    async with (
        ResponseManager(MemoryEventLog()) as manager,
        serving(Starlette(routes=chat_routes(manager, start, policy="block"))) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        with anyio.fail_after(GUARD):
            assert (await client.get("/api/chat/chat-7Qx2/stream")).status_code == 204
            async with client.stream("POST", "/api/chat", json=USE_CHAT_BODY) as response:
                assert response.status_code == 200
                assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
                rid = response.headers["x-streamfold-response-id"]
                assert bodies == [USE_CHAT_BODY]
                # the tab reloads: useChat({resume: true}) asks for the chat's running stream
                async with client.stream("GET", "/api/chat/chat-7Qx2/stream") as resumed:
                    assert resumed.status_code == 200
                    gate.release.set()
                    again = b"".join([piece async for piece in resumed.aiter_bytes()])
                body = b"".join([piece async for piece in response.aiter_bytes()])
            await manager.wait(rid)
            assert (await client.get("/api/chat/chat-7Qx2/stream")).status_code == 204
    want = direct("vercel", rid, items)
    assert [frame for _, frame in split(body)] == want
    assert [frame for _, frame in split(again)] == want
    assert b'"messageId":"' + rid.encode() + b'"' in want[0]


async def test_an_ag_ui_run_starts_with_the_request_s_thread_and_run() -> None:
    items = await demo_items()
    run_input = {
        "threadId": "thread-1",
        "runId": "run-42",
        "messages": [{"id": "m1", "role": "user", "content": "Weather in Paris?"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }

    async def start(body: Any) -> Gated:
        assert body == run_input
        return Gated(items, len(items))

    async with (
        ResponseManager(MemoryEventLog()) as manager,
        serving(
            Starlette(routes=chat_routes(manager, start, path="/agent", protocol="agui", policy="block"))
        ) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        with anyio.fail_after(GUARD):
            response = await client.post("/agent", json=run_input)
            assert (await client.post("/agent", json=[1])).status_code == 400
    assert response.status_code == 200
    assert response.headers["x-streamfold-response-id"] == "run-42"
    events = [frame for _, frame in split(response.content)]
    assert events == direct("agui", "run-42", items, thread_id="thread-1")
    first = msgspec.json.decode(events[0].removeprefix(b"data: "))
    assert (first["type"], first["threadId"], first["runId"]) == ("RUN_STARTED", "thread-1", "run-42")
    assert b"RUN_FINISHED" in events[-1]


async def test_chat_routes_refuse_other_protocols() -> None:
    from pipeline.errors import ConfigurationError

    async def start(body: Any) -> list[Any]:
        return []

    with pytest.raises(ConfigurationError, match="chat_routes serves vercel or agui, not 'streamfold'"):
        chat_routes(ResponseManager(MemoryEventLog()), start, protocol="streamfold")


_LONG = "is at most 256 characters, got 257"


@pytest.mark.parametrize(
    ("protocol", "body", "status", "error", "message"),
    [
        # start() raises a KeyError (no "messages"): 500, its details on the streamfold logger only
        ("vercel", {"id": "c1"}, 500, "StreamfoldError", "starting a vercel chat failed on the server"),
        ("agui", {"threadId": "t1", "runId": "r1"}, 500, "StreamfoldError", "starting a agui chat failed"),
        # an id over the cap is refused before anything is kept
        ("vercel", {"id": "c" * 257, "messages": []}, 400, "ConfigurationError", f"the chat's id {_LONG}"),
        (
            "agui",
            {"threadId": "t" * 257, "messages": []},
            400,
            "ConfigurationError",
            f"the chat's id {_LONG}",
        ),
        (
            "vercel",
            {"id": "c1", "messages": [{"role": "assistant", "id": "m" * 257, "parts": []}]},
            400,
            "ConfigurationError",
            f"the continued message's id {_LONG}",
        ),
    ],
)
async def test_a_refused_chat_post_answers_in_the_error_shape_and_keeps_nothing(
    protocol: str, body: dict[str, Any], status: int, error: str, message: str
) -> None:
    starts: list[Any] = []

    async def start(body: Any) -> list[Any]:
        starts.append(body)
        return [part["content"] for part in body["messages"]]

    async with (
        ResponseManager(MemoryEventLog()) as manager,
        serving(Starlette(routes=chat_routes(manager, start, protocol=protocol))) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        with anyio.fail_after(GUARD):
            refused = await client.post("/api/chat", json=body)
            assert await manager.log.active() == []
    assert (refused.status_code, refused.json()["type"], refused.json()["error"]) == (status, "ERROR", error)
    assert refused.json()["message"].startswith(message)
    assert len(starts) == (1 if status == 500 else 0)
