"""The in-memory event log: the conformance suite, plus its own caps."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import ProducerLost, ResponseExists, ResponseGone, ServingError
from pipeline.fanout.serving._log import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_RETENTION, EventLog, Retention
from pipeline.fanout.serving.memory import READ_BATCH, MemoryEventLog
from tests.guards import GUARD
from tests.serving_conformance import EventLogConformance, ServingBackend, collect, items, new_id

pytestmark = pytest.mark.anyio


class MemoryBackend:
    """Every log is its own; a peer is the log itself (one process)."""

    def __init__(self) -> None:
        self.logs: list[MemoryEventLog] = []

    async def open(
        self,
        *,
        retention: Retention = DEFAULT_RETENTION,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
    ) -> EventLog:
        log = MemoryEventLog(retention=retention, heartbeat_timeout=heartbeat_timeout)
        self.logs.append(log)
        return log

    async def peer(self, log: EventLog) -> EventLog:
        return log


class TestMemoryConformance(EventLogConformance):
    @pytest.fixture
    async def serving_backend(self) -> AsyncIterator[ServingBackend]:
        backend = MemoryBackend()
        yield backend
        for log in backend.logs:
            await log.aclose()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def test_ttl_expiry_with_a_clock_answers_gone_then_forgets_nothing_else() -> None:
    clock = FakeClock()
    log = MemoryEventLog(retention=Retention(ttl_after_end=60.0), clock=clock)
    rid, other = new_id(), new_id()
    await log.create(rid)
    await log.create(other)
    await log.end(rid)
    clock.now += 59.0
    assert len(await collect(log, rid)) == 1
    clock.now += 2.0
    with pytest.raises(ResponseGone, match="no longer retained"):
        await collect(log, rid)
    assert [status.response_id for status in await log.active()] == [other]
    with pytest.raises(ResponseExists):
        await log.create(rid)  # an expired id is never reused


async def test_max_responses_evicts_the_oldest_ended_then_refuses() -> None:
    log = MemoryEventLog(max_responses=2)
    first, second, third = new_id(), new_id(), new_id()
    await log.create(first)
    await log.end(first)
    await log.create(second)
    await log.create(third)  # evicts `first`, the only ended one
    with pytest.raises(ResponseGone):
        await collect(log, first)
    with pytest.raises(ServingError, match="max_responses"):
        await log.create(new_id())


async def test_max_total_bytes_evicts_ended_responses() -> None:
    log = MemoryEventLog(max_total_bytes=100)
    old, new = new_id(), new_id()
    await log.create(old)
    await log.append(old, [b"x" * 60])
    await log.end(old)
    await log.create(new)
    await log.append(new, [b"y" * 60])
    with pytest.raises(ResponseGone):
        await collect(log, old)
    assert (await log.status(new)) is not None


async def test_a_reader_takes_a_bounded_slice_at_a_time() -> None:
    log = MemoryEventLog()
    rid = new_id()
    await log.create(rid)
    await log.append(rid, items(*(str(n) for n in range(3 * READ_BATCH))))
    await log.end(rid)
    entries = await collect(log, rid)
    assert [entry.id for entry in entries] == list(range(1, 3 * READ_BATCH + 2))


async def test_closing_the_log_ends_waiting_readers_with_an_error() -> None:
    log = MemoryEventLog()
    rid = new_id()
    await log.create(rid)
    reader = log.read(rid)
    async with anyio.create_task_group() as tasks:

        async def read() -> None:
            with pytest.raises(ServingError, match="closed"):
                await reader.__anext__()

        tasks.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        await log.aclose()


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=7), min_size=1, max_size=12),
    cursor=st.integers(min_value=0, max_value=60),
)
@settings(max_examples=60, deadline=None)
def test_any_batching_of_appends_gives_the_same_log_and_exact_resume(sizes: list[int], cursor: int) -> None:
    """However the producer batches its appends, ids are 1..n in order and a cursor resumes exactly."""

    async def scenario() -> None:
        log = MemoryEventLog()
        rid = new_id()
        await log.create(rid)
        payloads = items(*(str(n) for n in range(sum(sizes))))
        position = 0
        for size in sizes:
            await log.append(rid, payloads[position : position + size])
            position += size
        await log.end(rid)
        total = len(payloads) + 1
        after = min(cursor, total)
        entries = await collect(log, rid, after)
        assert [entry.id for entry in entries] == list(range(after + 1, total + 1))
        assert [entry.data for entry in entries if not entry.end] == payloads[after:]

    anyio.run(scenario)


def test_the_public_surface() -> None:
    import pipeline.fanout.serving as serving

    for name in serving.__all__:
        assert getattr(serving, name) is not None
    assert serving.MemoryEventLog is MemoryEventLog


async def test_every_waiting_reader_learns_the_producer_is_lost() -> None:
    """One waiting reader keeps the heartbeat deadline for all: the others hear of it too."""
    log = MemoryEventLog(heartbeat_timeout=0.3)
    rid = new_id()
    await log.create(rid)
    lost: list[str] = []

    async def read() -> None:
        with pytest.raises(ProducerLost):
            await collect(log, rid)
        lost.append(rid)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tasks:
            for _ in range(5):
                tasks.start_soon(read)
    assert lost == [rid] * 5


async def test_a_reader_that_leaves_hands_the_heartbeat_deadline_on() -> None:
    log = MemoryEventLog(heartbeat_timeout=0.3)
    rid = new_id()
    await log.create(rid)
    lost: list[BaseException] = []
    leaving = anyio.CancelScope()

    async def leave_early() -> None:
        with leaving:
            await collect(log, rid)

    async def stay() -> None:
        try:
            await collect(log, rid)
        except ProducerLost as exc:
            lost.append(exc)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(leave_early)  # the first to wait: it keeps the deadline
            await anyio.wait_all_tasks_blocked()
            tasks.start_soon(stay)
            await anyio.wait_all_tasks_blocked()
            leaving.cancel()
    assert len(lost) == 1
