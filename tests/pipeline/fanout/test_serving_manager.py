"""The response lifecycle: detached runs, batching, stop, failure, shutdown (in-memory log); one bad
response among others, in an app's lifespan on a real uvicorn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import msgspec
import pytest
from starlette.applications import Starlette

from pipeline.errors import ConfigurationError, EventLogUnavailable, ProviderError, ResponseExists
from pipeline.fanout.serving._log import MAX_ITEM_BYTES, Entry
from pipeline.fanout.serving.manager import STOPPED_ERROR, ResponseManager
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.fanout.web import serving_routes
from pipeline.models import SegmentEvent
from tests.guards import GUARD
from tests.proxy_upstream import serving  # uvicorn with the app's lifespan on
from tests.serving_conformance import collect

pytestmark = pytest.mark.anyio


class Upstream:
    """A source that records whether it was closed, optionally failing or waiting forever."""

    def __init__(self, items: Sequence[Any], *, fail: BaseException | None = None, hang: bool = False):
        self.items = items
        self.fail = fail
        self.hang = hang
        self.closed = False
        self.started = anyio.Event()

    async def _generate(self) -> AsyncIterator[Any]:
        try:
            for item in self.items:
                yield item
            self.started.set()
            if self.hang:
                await anyio.sleep_forever()
            if self.fail is not None:
                raise self.fail
        finally:
            self.closed = True

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._generate()


class CountingLog(MemoryEventLog):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.batches: list[int] = []
        self.fail_appends = False

    async def append(self, response_id: str, items: Sequence[bytes]) -> int:
        if self.fail_appends:
            raise EventLogUnavailable("append failed after 3 tries", response_id=response_id)
        self.batches.append(len(items))
        return await super().append(response_id, items)


def json_of(entries: list[Entry]) -> list[Any]:
    return [msgspec.json.decode(e.data) if e.data is not None else ("END", e.error) for e in entries]


async def test_a_response_runs_detached_and_ends_done() -> None:
    log = MemoryEventLog()
    event = SegmentEvent.content("t", "a")
    async with ResponseManager(log) as manager:
        rid = await manager.start(Upstream([event, {"plain": "dict"}]), meta={"user": "u"})
        await manager.wait(rid)
    assert json_of(await collect(log, rid)) == [event.to_dict(), {"plain": "dict"}, ("END", None)]
    status = await log.status(rid)
    assert status is not None
    assert (status.state, status.meta) == ("done", {"user": "u"})


async def test_ready_items_are_appended_in_batches() -> None:
    log = CountingLog()
    async with ResponseManager(log, max_pending=100) as manager:
        rid = await manager.start(Upstream([{"n": n} for n in range(1000)]))
        await manager.wait(rid)
    assert log.batches == [100] * 10
    assert [e.id for e in await collect(log, rid)] == list(range(1, 1002))


async def test_a_failing_source_delivers_what_came_before_then_its_error() -> None:
    log = MemoryEventLog()
    upstream = Upstream([{"n": 1}], fail=ProviderError("overloaded", kind="overloaded_error"))
    async with ResponseManager(log) as manager:
        rid = await manager.start(upstream)
        await manager.wait(rid)
    assert json_of(await collect(log, rid)) == [
        {"n": 1},
        ("END", {"type": "ProviderError", "message": "overloaded", "kind": "overloaded_error"}),
    ]
    assert upstream.closed


async def test_an_internal_error_message_is_withheld() -> None:
    log = MemoryEventLog()
    async with ResponseManager(log) as manager:
        rid = await manager.start(Upstream([], fail=KeyError("secret")))
        await manager.wait(rid)
    assert (await collect(log, rid))[-1].error == {
        "type": "KeyError",
        "message": "the response's source failed",
        "kind": None,
    }


@pytest.mark.parametrize("how", ["manager", "log"])
async def test_stop_cancels_the_source_and_closes_the_upstream(how: str) -> None:
    log = MemoryEventLog()
    upstream = Upstream([{"n": 1}], hang=True)
    with anyio.fail_after(GUARD):
        async with ResponseManager(log) as manager:
            rid = await manager.start(upstream)
            await upstream.started.wait()
            if how == "manager":
                await manager.stop(rid)
            else:  # as another process would
                await log.request_stop(rid)
                await manager.wait(rid)
            assert upstream.closed
    assert json_of(await collect(log, rid)) == [{"n": 1}, ("END", STOPPED_ERROR)]
    status = await log.status(rid)
    assert status is not None
    assert status.state == "stopped"


async def test_leaving_the_manager_stops_running_responses() -> None:
    log = MemoryEventLog()
    upstream = Upstream([], hang=True)
    with anyio.fail_after(GUARD):
        async with ResponseManager(log) as manager:
            rid = await manager.start(upstream)
            await upstream.started.wait()
    assert upstream.closed
    assert (await collect(log, rid))[-1].error == STOPPED_ERROR


async def test_an_append_that_fails_fails_the_response_and_closes_the_source() -> None:
    log = CountingLog()
    log.fail_appends = True
    upstream = Upstream([{"n": 1}], hang=True)
    with anyio.fail_after(GUARD):
        async with ResponseManager(log) as manager:
            rid = await manager.start(upstream)
            await manager.wait(rid)
    assert upstream.closed
    entry = (await collect(log, rid))[-1]
    assert entry.error is not None
    assert (entry.error["type"], entry.error["message"]) == (
        "EventLogUnavailable",
        "append failed after 3 tries",
    )


async def test_a_source_factory_sync_or_async() -> None:
    log = MemoryEventLog()

    async def make() -> Upstream:
        return Upstream([{"n": "async"}])

    async with ResponseManager(log) as manager:
        first = await manager.start(make, response_id="first")
        second = await manager.start(lambda: Upstream([{"n": "sync"}]))
        await manager.wait(first)
        await manager.wait(second)
    assert json_of(await collect(log, first))[0] == {"n": "async"}
    assert json_of(await collect(log, second))[0] == {"n": "sync"}


async def test_a_duplicate_id_closes_the_new_source() -> None:
    log = MemoryEventLog()
    async with ResponseManager(log) as manager:
        await manager.start(Upstream([]), response_id="same")
        upstream = Upstream([])
        iterator = upstream.__aiter__()
        with pytest.raises(ResponseExists):
            await manager.start(iterator, response_id="same")
    with pytest.raises(StopAsyncIteration):
        await iterator.__anext__()  # closed: an async generator that was closed ends at once


async def test_start_outside_the_block_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="async with"):
        await ResponseManager(MemoryEventLog()).start(Upstream([]))


async def test_an_item_that_cannot_be_encoded_fails_after_the_items_before_it() -> None:
    log = MemoryEventLog()
    async with ResponseManager(log, max_pending=100) as manager:
        rid = await manager.start(Upstream([{"n": 1}, {"n": 2}, object(), {"n": 4}]))
        await manager.wait(rid)
    entries = json_of(await collect(log, rid))
    assert entries[:2] == [{"n": 1}, {"n": 2}]
    end, error = entries[2]
    assert end == "END"
    assert error["type"] == "ServingError"
    assert error["message"].startswith(f"item 3 of response {rid!r} cannot be encoded as JSON: TypeError")


async def test_an_item_over_the_cap_fails_after_the_items_before_it() -> None:
    log = MemoryEventLog()
    huge = "x" * MAX_ITEM_BYTES
    async with ResponseManager(log, max_pending=100) as manager:
        rid = await manager.start(Upstream([{"n": 1}, huge]))
        await manager.wait(rid)
    entries = json_of(await collect(log, rid))
    assert entries[0] == {"n": 1}
    assert "over the 8388608-byte cap (MAX_ITEM_BYTES)" in entries[1][1]["message"]


# -- one bad response among others --------------------------------------------------------------


async def scoped(
    items: Sequence[Any], closed: list[str], name: str, *, gate: anyio.Event | None = None
) -> AsyncIterator[Any]:
    """An async generator holding a cancel scope across its yields (as ``anyio.fail_after`` or a tool
    runner's task group do), waiting for ``gate`` before its last item; its cleanup awaits, and ``name``
    is recorded in ``closed`` only when the cleanup ran in full."""
    try:
        with anyio.fail_after(GUARD):
            for position, item in enumerate(items):
                if gate is not None and position == len(items) - 1:
                    await gate.wait()
                yield item
    finally:
        await anyio.lowlevel.checkpoint()
        closed.append(name)


NOT_JSON = {"tool": object()}
TOO_LARGE = {"blob": "x" * MAX_ITEM_BYTES}


@pytest.mark.parametrize(
    ("bad_item", "why"),
    [
        (NOT_JSON, "cannot be encoded as JSON: TypeError: Encoding objects of type object is unsupported"),
        (TOO_LARGE, f"is {MAX_ITEM_BYTES + 11} bytes, over the {MAX_ITEM_BYTES}-byte cap (MAX_ITEM_BYTES)"),
    ],
    ids=["not-json", "too-large"],
)
async def test_a_bad_item_fails_its_response_alone(bad_item: Any, why: str) -> None:
    log = MemoryEventLog()
    closed: list[str] = []
    release = anyio.Event()
    bad_comes = anyio.Event()
    received: list[Entry] = []

    async def read(response_id: str) -> None:
        async for entry in log.read(response_id):
            received.append(entry)
            bad_comes.set()

    with anyio.fail_after(GUARD):
        async with ResponseManager(log) as manager, anyio.create_task_group() as readers:
            good = [
                await manager.start(scoped([{"n": 1}, {"n": 2}], closed, f"good {n}", gate=release))
                for n in range(2)
            ]
            bad = await manager.start(scoped([{"n": 1}, bad_item], closed, "bad", gate=bad_comes))
            readers.start_soon(read, bad)
            await manager.wait(bad)
            for response_id in good:
                assert (await manager.status(response_id)).state == "running"
            release.set()
            for response_id in good:
                await manager.wait(response_id)
            after = await manager.start(scoped([{"n": 1}], closed, "after"))
            await manager.wait(after)

    error = {"type": "ServingError", "message": f"item 2 of response {bad!r} {why}", "kind": None}
    assert json_of(received) == [{"n": 1}, ("END", error)]
    assert sorted(closed) == ["after", "bad", "good 0", "good 1"]
    for response_id in [*good, after]:
        assert (await log.status(response_id)).state == "done"  # type: ignore[union-attr]
        assert json_of(await collect(log, response_id))[-1] == ("END", None)
    assert (await log.status(bad)).state == "failed"  # type: ignore[union-attr]


class BlockedLog(MemoryEventLog):
    """Its first append waits for ``release``: the pump fills its queue and waits for room."""

    def __init__(self) -> None:
        super().__init__()
        self.appending = anyio.Event()
        self.release = anyio.Event()

    async def append(self, response_id: str, items: Sequence[bytes]) -> int:
        if not self.appending.is_set():
            self.appending.set()
            await self.release.wait()
        return await super().append(response_id, items)


@pytest.mark.parametrize("how", ["stop", "leave"])
async def test_a_source_holding_a_cancel_scope_is_stopped_while_the_pump_waits(how: str) -> None:
    log = BlockedLog()
    closed: list[str] = []

    async def release_when_blocked() -> None:
        await anyio.wait_all_tasks_blocked()
        log.release.set()

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as helpers:
            async with ResponseManager(log, max_pending=1) as manager:
                rid = await manager.start(scoped([{"n": n} for n in range(5)], closed, "scoped"))
                await log.appending.wait()
                await anyio.wait_all_tasks_blocked()  # the pump waits for room, the source at a yield
                helpers.start_soon(release_when_blocked)
                if how == "stop":
                    await manager.stop(rid)
            other = MemoryEventLog()
            async with ResponseManager(other) as manager:  # the host goes on
                await manager.wait(await manager.start(scoped([{"n": 1}], closed, "next")))

    assert closed == ["scoped", "next"]
    assert json_of(await collect(log, rid)) == [{"n": 0}, {"n": 1}, ("END", STOPPED_ERROR)]


async def test_a_cancel_scope_of_the_source_firing_while_it_waits_at_a_yield_fails_the_response() -> None:
    """As ``anyio.fail_after`` around the yields does when its deadline passes while the log is slow."""
    log = BlockedLog()
    closed: list[str] = []
    held: list[anyio.CancelScope] = []

    async def source() -> AsyncIterator[Any]:
        try:
            with anyio.CancelScope() as scope:
                held.append(scope)
                for n in range(5):
                    yield {"n": n}
        finally:
            await anyio.lowlevel.checkpoint()
            closed.append("source")

    with anyio.fail_after(GUARD):
        async with ResponseManager(log, max_pending=1) as manager:
            rid = await manager.start(source())
            await log.appending.wait()
            await anyio.wait_all_tasks_blocked()  # the pump waits for room, the source at a yield
            held[0].cancel()  # its deadline, as it were
            await anyio.wait_all_tasks_blocked()
            log.release.set()
            await manager.wait(rid)
            after = await manager.start(Upstream([{"n": 1}]))
            await manager.wait(after)

    error = {
        "type": "ServingError",
        "message": f"response {rid!r} was cancelled by a cancel scope its source holds across its yields"
        " (such as anyio.fail_after), while the source waited at a yield",
        "kind": None,
    }
    assert closed == ["source"]
    assert json_of(await collect(log, rid)) == [{"n": 0}, {"n": 1}, ("END", error)]
    assert json_of(await collect(log, after)) == [{"n": 1}, ("END", None)]


async def test_a_bad_response_leaves_the_app_lifespan_running() -> None:
    log = MemoryEventLog()
    manager = ResponseManager(log)
    closed: list[str] = []
    lifespan_steps: list[str] = []
    sources = {
        "bad": lambda: scoped([{"n": 1}, NOT_JSON], closed, "bad"),
        "good": lambda: scoped([{"n": 1}, {"n": 2}], closed, "good"),
    }

    async def start(body: Any) -> Any:
        return sources[body["source"]]()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager:
            lifespan_steps.append("started")
            yield
        lifespan_steps.append("ended")

    app = Starlette(routes=serving_routes(manager, start=start), lifespan=lifespan)

    async def events(client: httpx.AsyncClient, response_id: str) -> list[str]:
        async with client.stream("GET", f"/responses/{response_id}/events") as response:
            return [line async for line in response.aiter_lines() if line.startswith(("event:", "data:"))]

    with anyio.fail_after(GUARD):
        async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
            bad = (await client.post("/responses", json={"source": "bad"})).json()["response_id"]
            good = (await client.post("/responses", json={"source": "good"})).json()["response_id"]
            bad_events = await events(client, bad)
            good_events = await events(client, good)
            again = await client.post("/responses", json={"source": "good"})
            assert again.status_code == 201
            again_events = await events(client, again.json()["response_id"])

    error = {
        "id": 2,
        "type": "ERROR",
        "error": "ServingError",
        "message": f"item 2 of response {bad!r} cannot be encoded as JSON:"
        " TypeError: Encoding objects of type object is unsupported",
    }
    assert bad_events == [
        'data: {"n":1}',
        "event: error",
        f"data: {json.dumps(error, separators=(',', ':'))}",
    ]
    assert (
        good_events
        == again_events
        == ['data: {"n":1}', 'data: {"n":2}', "event: end", 'data: {"id":3,"type":"END"}']
    )
    assert lifespan_steps == ["started", "ended"]
    assert sorted(closed) == ["bad", "good", "good"]
