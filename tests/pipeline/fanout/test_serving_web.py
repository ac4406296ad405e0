"""Serving routes over an event log, on a real uvicorn on 127.0.0.1: ids, exact resume, 404 / 410, the
response lifecycle over HTTP, WebSocket resume, and each connection's edge policy."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel
import httpx
import msgspec
import pytest
from starlette.applications import Starlette
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from pipeline.errors import ProviderError, ResponseGone
from pipeline.fanout.hub import Policy
from pipeline.fanout.serving._edge import Edge
from pipeline.fanout.serving._log import Entry, Retention
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.fanout.web import serving_routes
from pipeline.models import SegmentEvent
from tests.guards import GUARD
from tests.pipeline.fanout.test_web import serving

pytestmark = pytest.mark.anyio
JSON_TYPE = {"content-type": "application/json"}


class Frame(NamedTuple):
    id: int | None
    event: str
    data: Any


async def read_frames(
    response: httpx.Response, stop_after: int | None = None, *, until_id: int | None = None
) -> list[Frame]:
    """SSE frames (JSON data parsed); stop reading after ``stop_after`` frames or the frame ``until_id``."""
    frames: list[Frame] = []
    event_id: int | None = None
    name, data = "message", ""
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            event_id = int(line.removeprefix("id: "))
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
        elif line == "" and data:
            frames.append(Frame(event_id, name, json.loads(data)))
            event_id, name, data = None, "message", ""
            if len(frames) == stop_after or (until_id is not None and frames[-1].id == until_id):
                break
    return frames


class Gated:
    """Yields ``first`` items, waits for ``release``, yields the rest; records being closed."""

    def __init__(self, items: Sequence[Any], first: int, *, hang: bool = False) -> None:
        self.items, self.first, self.hang = items, first, hang
        self.release = anyio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[Any]:
        try:
            for position, item in enumerate(self.items):
                if position == self.first:
                    await self.release.wait()
                yield item
            if self.hang:
                await anyio.sleep_forever()
        finally:
            self.closed = True


class App(NamedTuple):
    log: MemoryEventLog
    manager: ResponseManager
    http: str
    ws: str
    starts: dict[str, Any]
    """Sources for ``POST /responses``, taken by the body's ``source`` name."""


def items(count: int) -> list[dict[str, int]]:
    return [{"n": n} for n in range(count)]


@pytest.fixture
async def app() -> AsyncIterator[App]:
    log = MemoryEventLog(retention=Retention(max_items=50, max_bytes=1 << 20))
    starts: dict[str, Any] = {}

    async def start(body: Any) -> Any:
        if body["source"] not in starts:
            raise ProviderError("the model is overloaded", kind="overloaded_error", status=529)
        return starts.pop(body["source"])

    async with ResponseManager(log) as manager:
        starlette = Starlette(routes=serving_routes(manager, start=start, max_buffer=8))
        async with serving(starlette) as address:
            yield App(log, manager, f"http://{address}", f"ws://{address}", starts)
        for status in await log.active():
            if status.state == "running":
                await manager.stop(status.response_id)


async def sse(
    app: App, response_id: str, *, headers: dict[str, str] | None = None, query: str = ""
) -> list[Frame]:
    async with httpx.AsyncClient(base_url=app.http) as client:
        with anyio.fail_after(GUARD):
            async with client.stream("GET", f"/responses/{response_id}/events{query}", headers=headers) as r:
                assert r.status_code == 200
                return await read_frames(r)


async def test_every_frame_carries_its_id_and_the_end_has_one(app: App) -> None:
    rid = await app.manager.start(Gated(items(3), 3), response_id="r1")
    await app.manager.wait(rid)
    assert await sse(app, rid) == [
        Frame(1, "message", {"n": 0}),
        Frame(2, "message", {"n": 1}),
        Frame(3, "message", {"n": 2}),
        Frame(4, "end", {"id": 4, "type": "END"}),
    ]


@pytest.mark.parametrize("after", [0, 1, 2, 3, 4])
async def test_last_event_id_and_after_resume_exactly_the_gap(app: App, after: int) -> None:
    rid = await app.manager.start(Gated(items(3), 3))
    await app.manager.wait(rid)
    by_header = await sse(app, rid, headers={"Last-Event-ID": str(after)})
    by_query = await sse(app, rid, query=f"?after={after}")
    assert [frame.id for frame in by_header if frame.id is not None] == list(range(after + 1, 5))
    assert by_header[-1].event == "end"
    assert by_query == by_header
    # the header wins over the query: an EventSource reconnecting keeps its URL
    assert await sse(app, rid, headers={"Last-Event-ID": str(after)}, query="?after=0") == by_header


async def test_an_empty_last_event_id_leaves_the_cursor_to_the_query(app: App) -> None:
    rid = await app.manager.start(Gated(items(3), 3))
    await app.manager.wait(rid)
    expected = [Frame(4, "end", {"id": 4, "type": "END"})]
    assert await sse(app, rid, headers={"Last-Event-ID": ""}, query="?after=3") == expected
    assert [frame.id for frame in await sse(app, rid, headers={"Last-Event-ID": ""})] == [1, 2, 3, 4]


async def test_a_failure_no_route_expects_is_a_500_in_the_error_shape(
    app: App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing() -> Any:
        raise RuntimeError("the log's server refused: secret detail")

    async with httpx.AsyncClient(base_url=app.http) as client:
        no_source = await client.post("/responses", json={"other": 1})  # start() raises KeyError
        monkeypatch.setattr(app.log, "active", failing)
        listed = await client.get("/responses")
    assert (no_source.status_code, no_source.json()) == (
        500,
        {
            "type": "ERROR",
            "error": "StreamfoldError",
            "message": "POST /responses failed on the server (its log says why)",
        },
    )
    assert (listed.status_code, listed.json()["message"]) == (
        500,
        "GET /responses failed on the server (its log says why)",
    )
    failures = [record for record in caplog.records if record.name == "streamfold"]
    assert [record.exc_info[0] for record in failures if record.exc_info] == [KeyError, RuntimeError]


@pytest.mark.parametrize("query", ["", "?protocol=vercel", "?protocol=agui"])
async def test_head_on_a_running_response_answers_its_headers_at_once(app: App, query: str) -> None:
    source = Gated(items(3), 1, hang=True)
    rid = await app.manager.start(source)
    async with httpx.AsyncClient(base_url=app.http) as client:
        with anyio.fail_after(GUARD):
            head = await client.head(f"/responses/{rid}/events{query}")
            missing = await client.head(f"/responses/nope/events{query}")
    assert (head.status_code, head.headers["content-type"].split(";")[0], head.content) == (
        200,
        "text/event-stream",
        b"",
    )
    assert missing.status_code == 404


async def test_a_reconnect_mid_stream_gets_nothing_missing_nothing_twice(app: App) -> None:
    source = Gated([SegmentEvent.content("t", f"w{n} ") for n in range(20)], 5)
    rid = await app.manager.start(source)
    async with httpx.AsyncClient(base_url=app.http) as client:
        with anyio.fail_after(GUARD):
            async with client.stream("GET", f"/responses/{rid}/events") as response:
                first = await read_frames(response, until_id=5)
    source.release.set()  # the response goes on while no client is connected
    await app.manager.wait(rid)
    rest = await sse(app, rid, headers={"Last-Event-ID": str(first[-1].id)})
    frames = first + rest
    ids = [frame.id for frame in frames if frame.id is not None]
    assert ids == sorted(set(ids))  # nothing twice (a coalesced frame carries its last delta's id)
    assert ids[-1] == 21
    text = "".join(frame.data["payload"]["delta"] for frame in frames if frame.event == "message")
    assert text == "".join(f"w{n} " for n in range(20))


async def test_unknown_gone_and_bad_cursors(app: App) -> None:
    rid = await app.manager.start(Gated(items(60), 60))
    await app.manager.wait(rid)  # 61 entries, the last 50 retained: 12..61
    async with httpx.AsyncClient(base_url=app.http) as client:
        missing = await client.get("/responses/nope/events")
        assert missing.status_code == 404
        assert missing.json()["error"] == "ResponseNotFound"
        gone = await client.get(f"/responses/{rid}/events", headers={"Last-Event-ID": "3"})
        assert gone.status_code == 410
        assert gone.json()["first_id"] == 12
        whole = await client.get(f"/responses/{rid}/events")  # from the start: also older than retained
        assert whole.status_code == 410
        bad = await client.get(f"/responses/{rid}/events?after=x")
        assert bad.status_code == 400
        future = await client.get(f"/responses/{rid}/events?after=99")
        assert future.status_code == 400
    assert [frame.id for frame in await sse(app, rid, query="?after=11")] == list(range(12, 62))


async def test_post_starts_a_detached_response_and_stop_closes_its_upstream(app: App) -> None:
    upstream = Gated(items(2), 2, hang=True)
    async with httpx.AsyncClient(base_url=app.http) as client:
        assert (await client.get("/responses")).json() == {"responses": []}
        app.starts["up"] = upstream
        created = await client.post("/responses", json={"source": "up"})
        assert created.status_code == 201
        rid = created.json()["response_id"]
        assert created.json()["events"] == f"/responses/{rid}/events"
        listed = (await client.get("/responses")).json()["responses"]
        assert [(s["response_id"], s["state"]) for s in listed] == [(rid, "running")]
        with anyio.fail_after(GUARD):
            async with client.stream("GET", f"/responses/{rid}/events") as response:
                assert [f.id for f in await read_frames(response, stop_after=2)] == [1, 2]
        stopped = await client.post(f"/responses/{rid}/stop", json={})
        assert stopped.status_code == 200
        assert stopped.json()["state"] == "stopped"
        assert upstream.closed
        assert (await client.post("/responses/nope/stop")).status_code == 404
        not_json = await client.post("/responses", content=b"{not json", headers=JSON_TYPE)
        assert not_json.status_code == 400
        refused = await client.post("/responses", json={"source": "missing"})
        assert refused.status_code == 502
        assert refused.json()["error"] == "ProviderError"
    assert (await sse(app, rid, query="?after=2"))[-1] == Frame(
        3,
        "error",
        {
            "id": 3,
            "type": "ERROR",
            "error": "ResponseStopped",
            "message": "the response was stopped",
            "kind": "stopped",
        },
    )


async def test_websocket_resumes_from_after(app: App) -> None:
    rid = await app.manager.start(Gated(items(3), 3))
    await app.manager.wait(rid)
    with anyio.fail_after(GUARD):
        async with connect(f"{app.ws}/responses/{rid}/ws?after=1") as websocket:
            messages = [json.loads(message) async for message in websocket]
            assert websocket.close_code == 1000
    assert messages == [{"id": 2, "item": {"n": 1}}, {"id": 3, "item": {"n": 2}}, {"id": 4, "type": "END"}]


@pytest.mark.parametrize(
    ("path", "code"), [("nope/ws", 4404), ("{rid}/ws?after=0", 4410), ("{rid}/ws?after=x", 4400)]
)
async def test_websocket_refusals(app: App, path: str, code: int) -> None:
    rid = await app.manager.start(Gated(items(60), 60))
    await app.manager.wait(rid)
    with anyio.fail_after(GUARD):
        async with connect(f"{app.ws}/responses/{path.format(rid=rid)}") as websocket:
            received: list[Any] = []
            with pytest.raises(ConnectionClosed):
                await receive_all(websocket, received)
            assert websocket.close_code == code
    assert received[0]["type"] == "ERROR"


async def receive_all(websocket: Any, into: list[Any]) -> None:
    while True:
        into.append(json.loads(await websocket.recv()))


# -- the edge: one connection's bounded buffer and policy ------------------------------------------


def content(entry_id: int, delta: str, segment: str = "t") -> Entry:
    return Entry(entry_id, msgspec.json.encode(SegmentEvent.content(segment, delta).to_dict()))


async def entries_of(source: Sequence[Entry]) -> AsyncIterator[Entry]:
    for entry in source:
        yield entry


async def test_coalescing_merges_waiting_deltas_and_keeps_the_last_id() -> None:
    """A full edge merges a delta into the waiting one of its segment; anything else waits for room."""
    edge = Edge(policy="coalesce", max_buffer=4)
    source = [content(n, f"{n},") for n in range(1, 101)] + [
        content(101, "x", "other"),
        Entry(102, None, True),
    ]
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(edge.fill, entries_of(source))
        await anyio.wait_all_tasks_blocked()  # nobody takes meanwhile: a client far behind
        taken = await edge.take()
        assert taken is not None
        assert [entry.id for entry in taken] == [1, 2, 3, 100]
        merged = msgspec.json.decode(taken[3].data or b"")
        assert merged["payload"]["delta"] == "".join(f"{n}," for n in range(4, 101))
        rest = await edge.take()
        assert rest is not None
        assert [entry.id for entry in rest] == [101, 102]
        assert await edge.take() is None


@pytest.mark.parametrize("policy", ["block", "disconnect", "coalesce_or_disconnect"])
async def test_a_full_edge_holds_the_reader_not_the_log(policy: Policy) -> None:
    edge = Edge(policy=policy, max_buffer=4)
    entries = entries_of([Entry(n, b"{}") for n in range(1, 50)])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(edge.fill, entries)
        await anyio.wait_all_tasks_blocked()
        assert len(list(edge)) == 4  # bounded: the rest stays in the log
        taken = await edge.take()
        assert taken is not None
        assert [entry.id for entry in taken] == [1, 2, 3, 4]
        await anyio.wait_all_tasks_blocked()
        assert [entry.id for entry in edge] == [5, 6, 7, 8]
        tasks.cancel_scope.cancel()


async def test_drop_policy_keeps_the_newest() -> None:
    edge = Edge(policy="drop", max_buffer=3)
    await edge.fill(entries_of([Entry(n, b"{}") for n in range(1, 11)]))
    taken = await edge.take()
    assert taken is not None
    assert [entry.id for entry in taken] == [8, 9, 10]


async def test_the_edge_is_bounded_in_bytes() -> None:
    edge = Edge(policy="drop", max_buffer=1000, max_bytes=100)
    await edge.fill(entries_of([Entry(n, b'"' + b"x" * 38 + b'"') for n in range(1, 50)]))
    taken = await edge.take()
    assert taken is not None
    assert [entry.id for entry in taken] == [47, 48, 49]  # 40 bytes each: three reach the cap


async def test_a_reader_far_behind_holds_a_bounded_edge_then_gets_gone() -> None:
    log = MemoryEventLog(retention=Retention(max_items=5, max_bytes=1 << 20))
    await log.create("far")
    edge = Edge(policy="block", max_buffer=2)
    await log.append("far", [b"{}"] * 4)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(edge.fill, log.read("far"))
        await anyio.wait_all_tasks_blocked()
        assert [entry.id for entry in edge] == [1, 2]  # the reader waits, not the log
        await log.append("far", [b"{}"] * 20)
        taken = [entry.id for batch in [await edge.take(), await edge.take()] for entry in batch or []]
        assert taken == [1, 2, 3, 4]  # a slice it already held, then the log had trimmed past it
        assert await edge.take() is None
    assert isinstance(edge.error, ResponseGone)
    assert edge.error.first_id == 20


async def test_a_thousand_readers_through_their_edges() -> None:
    log = MemoryEventLog()
    await log.create("many")
    got: list[list[int]] = []

    async def reader() -> None:
        edge = Edge(policy="coalesce_or_disconnect", max_buffer=8)
        ids: list[int] = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(edge.fill, log.read("many"))
            while (batch := await edge.take()) is not None:
                ids += [entry.id for entry in batch]
        got.append(ids)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tasks:
            for _ in range(1000):
                tasks.start_soon(reader)
            await anyio.wait_all_tasks_blocked()
            for n in range(20):
                await log.append("many", [msgspec.json.encode({"n": n})])
                await anyio.lowlevel.checkpoint()
            await log.end("many")
    assert got == [list(range(1, 22))] * 1000


async def test_a_dead_producer_ends_sse_with_producer_lost() -> None:
    """Routes over a bare log (a web replica that produces nothing); the producer never heartbeats."""
    log = MemoryEventLog(heartbeat_timeout=0.3)
    await log.create("orphan")
    await log.append("orphan", [b'{"n":0}'])
    async with (
        serving(Starlette(routes=serving_routes(log))) as address,
        httpx.AsyncClient(base_url=f"http://{address}") as client,
    ):
        status = await client.get("/responses/orphan")
        assert (status.json()["state"], status.json()["last_id"]) == ("running", 1)
        with anyio.fail_after(GUARD):
            async with client.stream("GET", "/responses/orphan/events") as response:
                frames = await read_frames(response)
        assert (await client.post("/responses", json={})).status_code == 405  # no manager here
    assert frames[0] == Frame(1, "message", {"n": 0})
    assert frames[1].id is None  # not an entry of the response: a reconnect resumes after 1
    assert (frames[1].event, frames[1].data["error"]) == ("error", "ProducerLost")


async def test_the_serving_example_resumes_a_reconnecting_tab_without_a_gap() -> None:
    example = load_example("serving")
    async with (
        example.manager,
        serving(example.app) as address,
        httpx.AsyncClient(base_url=f"http://{address}") as client,
    ):
        created = await client.post("/responses", json={})
        events = created.json()["events"]
        with anyio.fail_after(GUARD):
            async with client.stream("GET", events) as response:
                first = await read_frames(response, stop_after=3)  # the tab's connection blips
            async with client.stream("GET", events, headers={"Last-Event-ID": str(first[-1].id)}) as r:
                rest = await read_frames(r)
        whole = await client.get(events, headers={"Last-Event-ID": "0"})
    ids = [frame.id for frame in first + rest if frame.id is not None]
    assert ids == sorted(set(ids))
    assert rest[-1].event == "end"
    assert text_of(first + rest) == text_of(parse_frames(whole.text))


def load_example(name: str) -> Any:
    from tests.test_examples import load

    return load(name)


def text_of(frames: Sequence[Frame]) -> str:
    return "".join(
        frame.data["payload"]["delta"]
        for frame in frames
        if frame.event == "message" and frame.data.get("type") == "SEGMENT_CONTENT"
    )


def parse_frames(body: str) -> list[Frame]:
    frames: list[Frame] = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            event_id = int(fields["id"]) if "id" in fields else None
            frames.append(Frame(event_id, fields.get("event", "message"), json.loads(fields["data"])))
    return frames
