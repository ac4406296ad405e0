"""The response lifecycle: detached runs, batching, stop, failure, shutdown (in-memory log)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import msgspec
import pytest

from pipeline.errors import ConfigurationError, EventLogUnavailable, ProviderError, ResponseExists
from pipeline.fanout.serving._log import MAX_ITEM_BYTES, Entry
from pipeline.fanout.serving.manager import STOPPED_ERROR, ResponseManager
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.models import SegmentEvent
from tests.guards import GUARD
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
