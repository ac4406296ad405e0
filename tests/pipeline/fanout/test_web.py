"""SSE and WebSocket endpoints, served by a real uvicorn on 127.0.0.1 and read by httpx and websockets."""

from __future__ import annotations

import gc
import json
import socket
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, TypeVar

import anyio
import httpx
import pytest
from anyio.lowlevel import checkpoint
from starlette.applications import Starlette
from starlette.routing import Route
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from pipeline.errors import ConfigurationError, ProviderError
from pipeline.fanout.hub import Hub, fan_out
from pipeline.fanout.web import (
    MAX_SEND_BYTES,
    ResponseRegistry,
    sse_endpoint,
    stream_routes,
    websocket_endpoint,
)
from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentType,
    TokenUsage,
    ToolInvocation,
)
from tests.guards import GUARD
from tests.proxy_upstream import serving as proxy_serving

pytestmark = pytest.mark.anyio

T = TypeVar("T")


def response_events() -> list[PipelineEvent]:
    text, call = "text_0", "call_7"
    return [
        SegmentEvent.start(text, SegmentType.TEXT),
        SegmentEvent.content(text, "Writing "),
        SegmentEvent.content(text, "the file: ünïcode ✓"),
        SegmentEvent.end(text),
        SegmentEvent.start(call, SegmentType.WRITE_FILE, {"tool_name": "write_file", "call_id": call}),
        SegmentEvent.argument_value(call, ("path",), "notes.md"),
        SegmentEvent.content(call, "# Notes\n"),
        SegmentEvent.end(call, {"tool_name": "write_file", "path": "notes.md"}),
        ToolInvocation(call, "write_file", {"path": "notes.md", "content": "# Notes\n"}),
        ResponseEnd(finish_reason="tool_calls", usage=TokenUsage(prompt_tokens=5, completion_tokens=3)),
    ]


def wire(events: Iterable[PipelineEvent]) -> list[dict[str, Any]]:
    """What a browser should receive: each event's to_dict(), through JSON."""
    return [json.loads(json.dumps(event.to_dict())) for event in events]


async def from_list(items: Iterable[T]) -> AsyncIterator[T]:
    for item in items:
        yield item


class GatedSource:
    """Yields ``first`` items, waits for ``release``, then yields the rest."""

    def __init__(self, items: Sequence[Any], first: int) -> None:
        self.items, self.first = items, first
        self.release = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[Any]:
        for position, item in enumerate(self.items):
            if position == self.first:
                await self.release.wait()
            yield item


class Server(NamedTuple):
    registry: ResponseRegistry
    http: str
    ws: str


@asynccontextmanager
async def serving(app: Any, *, send_buffer: int | None = None) -> AsyncIterator[str]:
    """`tests.proxy_upstream.serving` with websockets' sans-IO protocol, h11 and no lifespan; yields
    ``host:port``."""
    options: dict[str, Any] = {
        "log_level": "warning",
        "lifespan": "off",
        "ws": "websockets-sansio",
        "http": "h11",
    }
    async with proxy_serving(app, send_buffer=send_buffer, **options) as url:
        yield url.removeprefix("http://")


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    """The registry's routes (default policy coalesce_or_disconnect, max_buffer=4) served by uvicorn."""
    registry = ResponseRegistry()
    async with serving(Starlette(routes=stream_routes(registry, max_buffer=4))) as address:
        yield Server(registry, f"http://{address}", f"ws://{address}")


class SSEEvent(NamedTuple):
    event: str
    data: Any


async def read_sse(
    response: httpx.Response, on_event: Callable[[SSEEvent], object] | None = None
) -> tuple[list[SSEEvent], list[str]]:
    """The events of an SSE stream (JSON data parsed) and its comment lines."""
    events: list[SSEEvent] = []
    comments: list[str] = []
    name, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith(":"):
            comments.append(line)
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
        elif not line and data:
            event = SSEEvent(name, json.loads("\n".join(data)))
            events.append(event)
            if on_event is not None:
                on_event(event)
            name, data = "message", []
    return events, comments


def http_client(base_url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url, trust_env=False, timeout=GUARD)


async def wait_until(condition: Callable[[], bool]) -> None:
    """Let the loop run (network I/O included) until ``condition`` holds; the caller guards the time."""
    while not condition():
        await checkpoint()


async def test_sse_streams_every_event_then_end(server: Server) -> None:
    events = response_events()
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            with server.registry.register("resp_1", hub):
                async with (
                    http_client(server.http) as client,
                    client.stream("GET", "/responses/resp_1/events") as response,
                ):
                    assert response.status_code == 200
                    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
                    received, comments = await read_sse(response)
            [web] = hub.statistics().subscribers
    assert received == [
        *(SSEEvent("message", data) for data in wire(events)),
        SSEEvent("end", {"type": "END"}),
    ]
    assert comments == []
    assert (web.policy, web.max_buffer, web.state) == ("coalesce_or_disconnect", 4, "completed")


async def read_failing_sse(server: Server, source: AsyncIterable[Any], received: list[SSEEvent]) -> None:
    """Serve ``source`` as response ``resp_1`` and read its SSE events into ``received``; the source's
    error is raised when the hub closes, after the events are read."""
    async with fan_out(source) as hub:
        with server.registry.register("resp_1", hub):
            async with (
                http_client(server.http) as client,
                client.stream("GET", "/responses/resp_1/events") as response,
            ):
                received.extend((await read_sse(response))[0])


async def test_sse_reports_a_source_error_as_an_error_event(server: Server) -> None:
    events = response_events()[:3]

    async def failing() -> AsyncIterator[PipelineEvent]:
        for event in events:
            yield event
        raise ProviderError("Overloaded", kind="overloaded_error")

    received: list[SSEEvent] = []
    with anyio.fail_after(GUARD), pytest.raises(ProviderError, match="Overloaded"):
        await read_failing_sse(server, failing(), received)
    assert received == [
        *(SSEEvent("message", data) for data in wire(events)),
        SSEEvent("error", {"type": "ERROR", "error": "ProviderError", "message": "Overloaded"}),
    ]


async def test_sse_hides_the_message_of_a_foreign_exception(server: Server) -> None:
    async def failing() -> AsyncIterator[int]:
        yield 1
        raise KeyError("/etc/secret/path")

    received: list[SSEEvent] = []
    with anyio.fail_after(GUARD), pytest.raises(KeyError):
        await read_failing_sse(server, failing(), received)
    assert received == [
        SSEEvent("message", 1),
        SSEEvent("error", {"type": "ERROR", "error": "KeyError", "message": "the response stream failed"}),
    ]


async def test_unknown_responses_are_404_and_4404(server: Server) -> None:
    with anyio.fail_after(GUARD):
        async with http_client(server.http) as client:
            response = await client.get("/responses/nope/events")
        assert response.status_code == 404
        assert response.text == "no such response\n"
        async with connect(f"{server.ws}/responses/nope/ws", proxy=None) as websocket:
            with pytest.raises(ConnectionClosed):
                await websocket.recv()
        assert websocket.close_code == 4404
        assert websocket.close_reason == "no such response"


async def read_websocket(websocket: ClientConnection) -> list[Any]:
    return [json.loads(message) async for message in websocket]


async def read_until_closed(websocket: ClientConnection) -> list[Any]:
    """The messages until the connection closes, whatever its close code."""
    messages: list[Any] = []
    try:
        async for message in websocket:
            messages.append(json.loads(message))
    except ConnectionClosed:
        pass
    return messages


async def test_websocket_sends_every_event_then_closes_normally(server: Server) -> None:
    events = response_events()
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            with server.registry.register("resp_1", hub):
                async with connect(f"{server.ws}/responses/resp_1/ws", proxy=None) as websocket:
                    received = await read_websocket(websocket)
    assert received == wire(events)
    assert websocket.close_code == 1000


async def test_websocket_reports_a_source_error_and_closes_with_1011(server: Server) -> None:
    events = response_events()[:2]

    async def failing() -> AsyncIterator[PipelineEvent]:
        for event in events:
            yield event
        raise ProviderError("quota exceeded", status=429)

    received: list[Any] = []
    close: list[object] = []

    async def run() -> None:
        async with fan_out(failing()) as hub:
            with server.registry.register("resp_1", hub):
                async with connect(f"{server.ws}/responses/resp_1/ws", proxy=None) as websocket:
                    received.extend(await read_until_closed(websocket))
                    close.extend([websocket.close_code, websocket.close_reason])

    with anyio.fail_after(GUARD), pytest.raises(ProviderError):
        await run()
    assert received == [
        *wire(events),
        {"type": "ERROR", "error": "ProviderError", "message": "quota exceeded"},
    ]
    assert close == [1011, "quota exceeded"]


def subscriber_state(hub: Hub[Any], name_part: str) -> str | None:
    for stats in hub.statistics().subscribers:
        if name_part in stats.name:
            return stats.state
    return None


async def test_an_sse_client_that_leaves_is_unsubscribed_and_stalls_nobody(server: Server) -> None:
    # Ints never merge, so the web subscriber (max_buffer=4) would be disconnected, not unsubscribed, if it
    # stayed subscribed without reading.
    source = GatedSource(list(range(100)), first=1)
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            agent = hub.subscribe(max_buffer=1)
            with server.registry.register("resp_1", hub):
                async with (
                    http_client(server.http) as client,
                    client.stream("GET", "/responses/resp_1/events") as response,
                ):
                    async for line in response.aiter_lines():
                        assert line == "data: 0"
                        break
                await wait_until(lambda: subscriber_state(hub, "/responses/resp_1/events") == "unsubscribed")
                source.release.set()
                assert [item async for item in agent] == list(range(100))


async def test_a_websocket_client_that_leaves_is_unsubscribed(server: Server) -> None:
    source = GatedSource(list(range(100)), first=1)
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            agent = hub.subscribe(max_buffer=1)
            with server.registry.register("resp_1", hub):
                async with connect(f"{server.ws}/responses/resp_1/ws", proxy=None) as websocket:
                    assert json.loads(await websocket.recv()) == 0
                await wait_until(lambda: subscriber_state(hub, "/responses/resp_1/ws") == "unsubscribed")
                source.release.set()
                assert [item async for item in agent] == list(range(100))


async def test_sse_heartbeat_keeps_an_idle_stream_alive() -> None:
    source = GatedSource([1, 2], first=1)
    lines: list[str] = []
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            app = Starlette(routes=[Route("/r/events", sse_endpoint(hub, heartbeat=0.01))])
            async with (
                serving(app) as address,
                http_client(f"http://{address}") as client,
                client.stream("GET", "/r/events") as response,
            ):
                async for line in response.aiter_lines():
                    lines.append(line)
                    if line == ": keep-alive":
                        source.release.set()  # the idle stream got its heartbeat: go on
    assert lines[:2] == ["data: 1", ""]
    assert ": keep-alive" in lines
    assert lines[-3:] == ["event: end", 'data: {"type":"END"}', ""]
    assert [line for line in lines if line.startswith("data: ")] == [
        "data: 1",
        "data: 2",
        'data: {"type":"END"}',
    ]


async def test_the_registry_binds_one_hub_per_response_id() -> None:
    registry = ResponseRegistry()
    async with fan_out(from_list([1])) as first, fan_out(from_list([2])) as second:
        with registry.register("a", first):
            with pytest.raises(ValueError, match="'a' is already registered"), registry.register("a", second):
                pass
            with registry.register("b", second):
                assert (registry.get("a"), registry.get("b"), len(registry)) == (first, second, 2)
            assert "b" not in registry
        assert len(registry) == 0


async def test_a_response_whose_start_is_no_longer_kept_is_410_and_4410(server: Server) -> None:
    source = GatedSource([1, 2], first=1)
    with anyio.fail_after(GUARD):
        async with fan_out(source, replay=False) as hub:
            agent = hub.subscribe()
            assert await anext(agent) == 1
            with server.registry.register("resp_1", hub):
                async with http_client(server.http) as client:
                    response = await client.get("/responses/resp_1/events")
                assert response.status_code == 410
                assert "cannot replay: this hub keeps no history" in response.text
                async with connect(f"{server.ws}/responses/resp_1/ws", proxy=None) as websocket:
                    with pytest.raises(ConnectionClosed):
                        await websocket.recv()
                assert websocket.close_code == 4410
                assert str(websocket.close_reason).startswith("cannot replay: this hub keeps no history")
            source.release.set()


class Unencodable:
    def to_dict(self) -> dict[str, object]:
        return {"handle": object()}


async def test_an_item_that_cannot_be_encoded_ends_the_stream_with_an_error(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    error = {"type": "ERROR", "error": "EncodeError"}
    with anyio.fail_after(GUARD):
        async with fan_out(from_list([ResponseEnd(), Unencodable()])) as hub:
            with server.registry.register("resp_1", hub):
                async with (
                    http_client(server.http) as client,
                    client.stream("GET", "/responses/resp_1/events") as response,
                ):
                    sse_events, _ = await read_sse(response)
                async with connect(f"{server.ws}/responses/resp_1/ws", proxy=None) as websocket:
                    messages = await read_until_closed(websocket)
    for received in ([event.data for event in sse_events], messages):
        assert received[0] == ResponseEnd().to_dict()  # what came before is not lost
        assert received[1].items() >= error.items()
        assert received[1]["message"].startswith("an item could not be encoded: ")
        assert len(received) == 2
    assert [event.event for event in sse_events] == ["message", "error"]
    assert websocket.close_code == 1011
    assert len([r for r in caplog.records if r.name == "streamfold"]) == 2


class Item:
    """An item that can be referenced weakly, sent as ``{}``."""

    __slots__ = ("__weakref__",)

    def to_dict(self) -> dict[str, Any]:
        return {}


async def test_a_failed_response_served_over_sse_and_websocket_is_freed() -> None:
    # Each connection's subscription used to keep the hub and its history alive for ever once it had
    # read the source's error.
    async def run(server: Server) -> tuple[weakref.ref[Any], weakref.ref[Item]]:
        item = Item()

        async def failing() -> AsyncIterator[Item]:
            yield item
            raise ProviderError("overloaded")

        try:
            async with fan_out(failing()) as hub:
                with server.registry.register("resp_1", hub):
                    async with (
                        http_client(server.http) as client,
                        client.stream("GET", "/responses/resp_1/events") as response,
                    ):
                        events = [event.event for event in (await read_sse(response))[0]]
                    async with connect(f"{server.ws}/responses/resp_1/ws", proxy=None) as websocket:
                        messages = await read_until_closed(websocket)
                    assert events == ["message", "error"]
                    assert [message.get("type") for message in messages] == [None, "ERROR"]
                    await wait_until(lambda: hub.statistics().active == 0)
        except ProviderError:
            return weakref.ref(hub), weakref.ref(item)
        raise AssertionError("the source's error was not raised")

    registry = ResponseRegistry()
    with anyio.fail_after(GUARD):
        # The server of its own is stopped before the check: its connections' tasks have all ended.
        async with serving(Starlette(routes=stream_routes(registry, max_buffer=4))) as address:
            hub_ref, item_ref = await run(Server(registry, f"http://{address}", f"ws://{address}"))
    gc.collect()  # outside the guard: a full collection on a busy machine is no hang
    assert (hub_ref(), item_ref()) == (None, None)


class Watched:
    """An ASGI app that records when a connection's call to the wrapped app has returned."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.returned = anyio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            self.returned.set()


def stalled_client(address: str, request: bytes) -> socket.socket:
    """A client with a tiny receive buffer that sends ``request`` and then never reads."""
    host, port = address.split(":")
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect((host, int(port)))  # completes in the kernel: the listener is already listening
    client.sendall(request)
    return client


def sse_request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode()


def websocket_request(path: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("route", ["/r/events", "/r/ws"])
@pytest.mark.parametrize(
    ("options", "ended_by"),
    [
        ({}, "fell 4 items behind"),  # the default policy: disconnected at once, the send timeout ends it
        ({"policy": "coalesce"}, "took nothing for 0.2 s (send_timeout)"),  # stalls until the timeout
    ],
)
async def test_a_client_that_stops_reading_never_stalls_the_producer_or_the_others(
    route: str, options: dict[str, Any], ended_by: str
) -> None:
    # A client that stays connected but reads nothing used to freeze the agent for ever: the web
    # subscriber's non-delta items waited like `block`, and nothing timed out a send.
    items = [{"number": number, "padding": "x" * 1000} for number in range(2000)]  # 2 MB, none merge
    source = GatedSource(items, first=1)
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            endpoint = Watched(
                Starlette(routes=stream_routes(hub, path="/r", max_buffer=4, send_timeout=0.2, **options))
            )
            agent = hub.subscribe(max_buffer=1, name="agent")
            async with serving(endpoint, send_buffer=4096) as address:
                request = sse_request(route) if route.endswith("events") else websocket_request(route)
                with stalled_client(address, request):
                    await wait_until(lambda: subscriber_state(hub, route) is not None)
                    source.release.set()
                    assert [item async for item in agent] == items  # the producer ran to its end
                    await hub.wait_finished()
                    await endpoint.returned.wait()  # the stalled connection was let go
                    [web] = [stats for stats in hub.statistics().subscribers if route in stats.name]
                    assert web.state == "disconnected"
                    assert ended_by in str(web.error)
                    assert web.delivered < len(items)


async def test_strings_with_lone_surrogates_are_sent_escaped_not_failed(server: Server) -> None:
    # A dict source can hand over an already-decoded string holding a lone surrogate, which
    # msgspec.json.encode refuses: the stream used to end with an EncodeError there.
    items: list[Any] = [{"text": "\ud800 and \udfff"}, ResponseEnd()]

    async def failing() -> AsyncIterator[Any]:
        for item in items:
            yield item
        raise ProviderError("bad \ud800 byte")

    received: dict[str, Any] = {}

    async def run() -> None:
        async with fan_out(failing()) as hub:
            with server.registry.register("resp_1", hub):
                async with (
                    http_client(server.http) as client,
                    client.stream("GET", "/responses/resp_1/events") as response,
                ):
                    received["sse"] = (await read_sse(response))[0]
                async with connect(f"{server.ws}/responses/resp_1/ws", proxy=None) as websocket:
                    received["ws"] = await read_until_closed(websocket)
                    received["close"] = (websocket.close_code, websocket.close_reason)

    with anyio.fail_after(GUARD), pytest.raises(ProviderError):
        await run()
    expected = [
        {"text": "\ud800 and \udfff"},
        ResponseEnd().to_dict(),
        {"type": "ERROR", "error": "ProviderError", "message": "bad \ud800 byte"},
    ]
    assert received["sse"] == [
        SSEEvent("message", expected[0]),
        SSEEvent("message", expected[1]),
        SSEEvent("error", expected[2]),
    ]
    assert received["ws"] == expected
    assert received["close"] == (1011, "bad ? byte")


async def test_a_long_replay_is_sent_in_bounded_bodies_so_send_timeout_applies_to_each() -> None:
    items = [{"number": number, "padding": "x" * 1000} for number in range(300)]  # about 300 KB
    bodies: list[bytes] = []

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])

    with anyio.fail_after(GUARD):
        async with fan_out(from_list(items)) as hub:
            await hub.wait_finished()
            scope = {"type": "http", "path": "/r/events", "client": ("127.0.0.1", 1)}
            await sse_endpoint(hub)(scope, receive, send)  # the whole history is one batch
    frame = len(b"data: " + json.dumps(items[0], separators=(",", ":")).encode() + b"\n\n")
    assert b"".join(bodies).count(b"data: ") == len(items) + 1  # and the END
    assert len(bodies) > 4
    assert all(len(body) < MAX_SEND_BYTES + frame for body in bodies)


def test_send_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="send_timeout must be a positive number"):
        sse_endpoint(ResponseRegistry(), send_timeout=0)
    with pytest.raises(ConfigurationError, match="send_timeout must be a positive number"):
        websocket_endpoint(ResponseRegistry(), send_timeout=-1.0)
