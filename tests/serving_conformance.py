"""The conformance suite every :class:`~pipeline.fanout.serving._log.EventLog` backend runs.

A backend's test module subclasses :class:`EventLogConformance` and gives a ``serving_backend`` fixture
yielding a :class:`ServingBackend`::

    class TestMemory(EventLogConformance):
        @pytest.fixture
        async def serving_backend(self) -> AsyncIterator[ServingBackend]:
            ...

Response ids are unique per test (a shared server may hold other tests' responses). Timing tests use
short timeouts and wait for the outcome with a hang guard; nothing sleeps to synchronise.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Protocol

import anyio
import msgspec
import pytest

from pipeline.errors import (
    ConfigurationError,
    ProducerLost,
    ResponseExists,
    ResponseGone,
    ResponseNotFound,
)
from pipeline.fanout.serving._log import (
    Entry,
    EventLog,
    Retention,
)
from tests.guards import GUARD

__all__ = ["UNHOLDABLE_IDS", "EventLogConformance", "ServingBackend", "collect", "items", "new_id"]


class ServingBackend(Protocol):
    """How the suite gets logs of one backend; every log it opens is closed at the fixture's teardown."""

    async def open(self, *, retention: Retention = ..., heartbeat_timeout: float = ...) -> EventLog:
        """A new log (a new connection to the backend's server) with these options."""

    async def peer(self, log: EventLog) -> EventLog:
        """Another log over the same responses as ``log``, as another process would open it (the
        in-memory backend returns ``log`` itself)."""


UNHOLDABLE_IDS = ["..", "*", ">", "$JS", "$JS.API.>", "a.b", "a b", "a{b}", "é", "²", "", "x" * 129]
"""Ids a NATS subject (wildcards, ``$JS``, dots), a Redis hash tag (braces) or a URL cannot hold."""


def new_id() -> str:
    return "r-" + uuid.uuid4().hex


def items(*texts: str) -> list[bytes]:
    return [msgspec.json.encode({"t": text}) for text in texts]


async def collect(log: EventLog, response_id: str, after: int = 0) -> list[Entry]:
    with anyio.fail_after(GUARD):
        return [entry async for entry in log.read(response_id, after=after)]


def data_of(entries: Sequence[Entry]) -> list[bytes | None]:
    return [entry.data for entry in entries]


pytestmark = pytest.mark.anyio


class EventLogConformance:
    """What every backend must do; see the module docstring."""

    @pytest.fixture
    async def log(self, serving_backend: ServingBackend) -> EventLog:
        return await serving_backend.open()

    async def test_ids_are_contiguous_and_the_end_has_its_own(self, log: EventLog) -> None:
        rid = new_id()
        await log.create(rid, meta={"model": "m"})
        assert await log.append(rid, items("a", "b")) == 2
        assert await log.append(rid, items("c")) == 3
        assert await log.append(rid, []) == 3
        await log.end(rid)
        entries = await collect(log, rid)
        assert entries == [
            Entry(1, items("a")[0]),
            Entry(2, items("b")[0]),
            Entry(3, items("c")[0]),
            Entry(4, None, True, None),
        ]
        status = await log.status(rid)
        assert status is not None
        assert (status.state, status.first_id, status.last_id, status.meta) == ("done", 1, 4, {"model": "m"})

    @pytest.mark.parametrize("after", [0, 1, 2, 3, 4, 5])
    async def test_reading_after_a_cursor_gives_exactly_the_gap(self, log: EventLog, after: int) -> None:
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items("a", "b", "c", "d", "e"))
        await log.end(rid)
        entries = await collect(log, rid, after)
        assert [entry.id for entry in entries] == list(range(after + 1, 7))

    async def test_a_cursor_after_the_end_gives_nothing(self, log: EventLog) -> None:
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items("a"))
        await log.end(rid)
        assert await collect(log, rid, 2) == []

    async def test_a_cursor_past_the_last_id_is_refused(self, log: EventLog) -> None:
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items("a"))
        with pytest.raises(ConfigurationError, match="past the last entry"):
            await collect(log, rid, 5)
        with pytest.raises(ConfigurationError, match=">= 0"):
            await collect(log, rid, -1)

    async def test_live_readers_get_every_entry_once_in_order(self, serving_backend: ServingBackend) -> None:
        log = await serving_backend.open()
        peer = await serving_backend.peer(log)
        rid = new_id()
        await log.create(rid)
        results: dict[int, list[Entry]] = {}

        async def reader(number: int, source: EventLog, after: int) -> None:
            results[number] = await collect(source, rid, after)

        await log.append(rid, items("0"))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(reader, 0, log, 0)
            tasks.start_soon(reader, 1, peer, 0)
            tasks.start_soon(reader, 2, peer, 1)
            for number in range(1, 50):
                await log.append(rid, items(str(number)))
                await anyio.lowlevel.checkpoint()
            await log.end(rid)
        expected = [Entry(n + 1, items(str(n))[0]) for n in range(50)] + [Entry(51, None, True)]
        assert results[0] == expected
        assert results[1] == expected
        assert results[2] == expected[1:]

    async def test_a_thousand_readers(self, log: EventLog) -> None:
        rid = new_id()
        await log.create(rid)
        counts: list[int] = []

        async def reader() -> None:
            entries = await collect(log, rid)
            assert [entry.id for entry in entries] == list(range(1, 12))
            counts.append(len(entries))

        async with anyio.create_task_group() as tasks:
            for _ in range(1000):
                tasks.start_soon(reader)
            for number in range(10):
                await log.append(rid, items(str(number)))
            await log.end(rid)
        assert counts == [11] * 1000

    async def test_unknown_duplicate_and_ended_responses(self, log: EventLog) -> None:
        rid = new_id()
        with pytest.raises(ResponseNotFound):
            await collect(log, rid)
        assert await log.status(rid) is None
        with pytest.raises(ResponseNotFound):
            await log.append(rid, items("a"))
        with pytest.raises(ResponseNotFound):
            await log.request_stop(rid)
        await log.create(rid)
        with pytest.raises(ResponseExists):
            await log.create(rid)
        await log.end(rid)
        with pytest.raises(ResponseGone):
            await log.append(rid, items("late"))
        with pytest.raises(ResponseGone):
            await log.end(rid)

    async def test_invalid_response_ids_are_refused(self, log: EventLog) -> None:
        for bad in ["", "a{b}", "a.b", "a b", "x" * 129]:
            with pytest.raises(ConfigurationError, match="response id"):
                await log.create(bad)

    @pytest.mark.parametrize("bad", UNHOLDABLE_IDS)
    async def test_an_id_no_backend_can_hold_is_unknown_everywhere(self, log: EventLog, bad: str) -> None:
        with pytest.raises(ConfigurationError, match="response id"):
            await log.create(bad)
        assert await log.status(bad) is None
        unknown = f"no response {bad!r}"
        with pytest.raises(ResponseNotFound, match=re.escape(unknown)):
            await collect(log, bad)
        with pytest.raises(ResponseNotFound, match=re.escape(unknown)):
            await log.request_stop(bad)
        with pytest.raises(ResponseNotFound, match=re.escape(unknown)):
            await log.append(bad, items("a"))
        with pytest.raises(ResponseNotFound, match=re.escape(unknown)):
            await log.heartbeat(bad)
        with pytest.raises(ResponseNotFound, match=re.escape(unknown)):
            await log.end(bad)
        with pytest.raises(ResponseNotFound, match=re.escape(unknown)):
            async for _ in log.stop_requested(bad):
                pass

    async def test_trimming_by_items_answers_gone_with_the_first_retained_id(
        self, serving_backend: ServingBackend
    ) -> None:
        log = await serving_backend.open(retention=Retention(max_items=3, max_bytes=1 << 20))
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items(*"abcdefghij"))
        status = await log.status(rid)
        assert status is not None
        assert (status.first_id, status.last_id) == (8, 10)
        with pytest.raises(ResponseGone) as gone:
            await collect(log, rid, 0)
        assert gone.value.first_id == 8
        with pytest.raises(ResponseGone):
            await collect(log, rid, 6)
        await log.end(rid)
        assert [entry.id for entry in await collect(log, rid, 8)] == [9, 10, 11]

    async def test_trimming_by_bytes(self, serving_backend: ServingBackend) -> None:
        log = await serving_backend.open(retention=Retention(max_items=1000, max_bytes=30))
        rid = new_id()
        await log.create(rid)
        await log.append(rid, [b'"0123456789"'] * 10)  # 12 bytes each: two fit in 30
        status = await log.status(rid)
        assert status is not None
        assert (status.first_id, status.last_id) == (9, 10)
        assert [entry.id for entry in await collect_running(log, rid, 8, 2)] == [9, 10]

    async def test_an_item_larger_than_max_bytes_is_kept_alone(self, serving_backend: ServingBackend) -> None:
        """Retention keeps at least the newest entry even if it alone is over ``max_bytes``."""
        log = await serving_backend.open(retention=Retention(max_items=1000, max_bytes=10))
        rid = new_id()
        await log.create(rid)
        big = b'"0123456789abcdef"'  # 18 bytes, over the 10-byte cap on its own
        await log.append(rid, [b'"a"', big])
        status = await log.status(rid)
        assert status is not None
        assert (status.first_id, status.last_id) == (2, 2)
        assert [(entry.id, entry.data) for entry in await collect_running(log, rid, 1, 1)] == [(2, big)]
        await log.append(rid, [b'"b"'])  # the big one is no longer the newest: trimmed
        await log.end(rid)
        assert [(entry.id, entry.data, entry.end) for entry in await collect(log, rid, 2)] == [
            (3, b'"b"', False),
            (4, None, True),
        ]

    async def test_a_reader_far_behind_gets_gone_not_a_partial_replay(
        self, serving_backend: ServingBackend
    ) -> None:
        log = await serving_backend.open(retention=Retention(max_items=5, max_bytes=1 << 20))
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items("a"))
        reader = log.read(rid)
        first = await reader.__anext__()
        assert first.id == 1
        await log.append(rid, items(*"bcdefghijk"))
        with pytest.raises(ResponseGone) as gone, anyio.fail_after(GUARD):
            async for _ in reader:
                pass
        assert gone.value.first_id == 7

    async def test_a_failed_response_ends_with_its_error(self, log: EventLog) -> None:
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items("a"))
        error = {"type": "ProviderError", "message": "overloaded", "kind": "overloaded_error"}
        await log.end(rid, error=error, state="failed")
        assert (await collect(log, rid))[-1] == Entry(2, None, True, error)
        status = await log.status(rid)
        assert status is not None
        assert status.state == "failed"

    async def test_active_lists_running_and_retained_responses(self, log: EventLog) -> None:
        running, ended = new_id(), new_id()
        await log.create(running, meta={"user": "u1"})
        await log.create(ended)
        await log.end(ended, state="stopped")
        states = {status.response_id: status.state for status in await log.active()}
        assert states[running] == "running"
        assert states[ended] == "stopped"

    async def test_stop_requests_reach_the_producer(self, serving_backend: ServingBackend) -> None:
        log = await serving_backend.open()
        peer = await serving_backend.peer(log)
        rid = new_id()
        await log.create(rid)
        seen: list[None] = []

        async def watch() -> None:
            async for item in log.stop_requested(rid):
                seen.append(item)

        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(watch)
                await anyio.wait_all_tasks_blocked()
                await peer.request_stop(rid)
        assert seen == [None]
        await log.end(rid, state="stopped")
        await peer.request_stop(rid)  # a no-op once ended
        with anyio.fail_after(GUARD):
            assert [item async for item in log.stop_requested(rid)] == []

    async def test_a_stop_requested_before_watching_is_seen(self, log: EventLog) -> None:
        rid = new_id()
        await log.create(rid)
        await log.request_stop(rid)
        with anyio.fail_after(GUARD):
            async for _ in log.stop_requested(rid):
                break
            else:
                pytest.fail("the stop request was not seen")

    async def test_a_silent_producer_is_lost(self, serving_backend: ServingBackend) -> None:
        log = await serving_backend.open(heartbeat_timeout=0.3)
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items("a"))
        reader = log.read(rid)
        assert (await reader.__anext__()).id == 1
        with pytest.raises(ProducerLost, match=rid), anyio.fail_after(GUARD):
            await reader.__anext__()

    async def test_heartbeats_keep_a_quiet_producer_alive(self, serving_backend: ServingBackend) -> None:
        # A heartbeat every tenth of the timeout: a busy machine may delay one several times over.
        log = await serving_backend.open(heartbeat_timeout=1.0)
        rid = new_id()
        await log.create(rid)
        got: list[Entry] = []

        async def read() -> None:
            got.extend(await collect(log, rid))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            for _ in range(12):  # 1.2 s of heartbeats, no appends: more than the timeout
                await anyio.sleep(0.1)
                await log.heartbeat(rid)
            await log.end(rid)
        assert got == [Entry(1, None, True)]

    async def test_ended_responses_expire_after_their_ttl(self, serving_backend: ServingBackend) -> None:
        log = await serving_backend.open(
            retention=Retention(max_items=100, max_bytes=1 << 20, ttl_after_end=0.3)
        )
        rid = new_id()
        await log.create(rid)
        await log.append(rid, items("a"))
        await log.end(rid)
        assert len(await collect(log, rid)) == 2
        with anyio.fail_after(GUARD):
            while await log.status(rid) is not None:  # noqa: ASYNC110 -- the expiry is the server's
                await anyio.sleep(0.05)
        with pytest.raises((ResponseGone, ResponseNotFound)):
            await collect(log, rid)
        assert rid not in {status.response_id for status in await log.active()}
        with pytest.raises(ResponseExists):  # an expired id is never reused: refused before a source
            await log.check_create(rid)

    async def test_check_create_refuses_what_create_would(self, log: EventLog) -> None:
        rid = new_id()
        await log.check_create(rid)
        assert await log.status(rid) is None  # nothing created
        await log.create(rid)
        with pytest.raises(ResponseExists, match=re.escape(f"response {rid!r} already exists")):
            await log.check_create(rid)
        await log.end(rid)
        with pytest.raises(ResponseExists):
            await log.check_create(rid)
        for bad in UNHOLDABLE_IDS:
            with pytest.raises(ConfigurationError, match="response id"):
                await log.check_create(bad)


async def collect_running(log: EventLog, response_id: str, after: int, count: int) -> list[Entry]:
    """The first ``count`` entries after ``after`` of a response still running."""
    got: list[Entry] = []
    with anyio.fail_after(GUARD):
        async for entry in log.read(response_id, after=after):
            got.append(entry)
            if len(got) == count:
                break
    return got
