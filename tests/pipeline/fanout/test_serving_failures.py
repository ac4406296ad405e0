"""Server and process failures of the Redis and NATS event logs, against real servers and processes.

- the server restarts mid-stream: the producer's appends retry and land once, readers resume from their
  last id (nothing missing, nothing twice);
- the server stays down past the retry bound: the append fails with ``EventLogUnavailable``, the manager
  fails the response, and readers receive that error on its terminal entry;
- the producer's process dies: readers get ``ProducerLost`` after the heartbeat timeout;
- a reader moves to another process mid-stream: it resumes after its last id exactly.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from pipeline.errors import EventLogUnavailable, ProducerLost
from pipeline.fanout.serving._log import Entry, EventLog, Retention
from pipeline.fanout.serving.manager import ResponseManager
from tests.conftest import ROOT
from tests.guards import GUARD
from tests.servers import NatsServer, RedisServer, own_server
from tests.serving_conformance import collect, items, new_id

pytestmark = pytest.mark.anyio


class Backend:
    def __init__(self, kind: str, server: RedisServer | NatsServer) -> None:
        self.kind = kind
        self.server = server
        self.logs: list[EventLog] = []

    async def open(self, **options: Any) -> EventLog:
        log: EventLog
        if self.kind == "redis":
            from pipeline.fanout.serving.redis import RedisEventLog

            assert isinstance(self.server, RedisServer)
            log = RedisEventLog(self.server.client_url, **options)
        else:
            from pipeline.fanout.serving.nats import NatsEventLog

            log = await NatsEventLog.connect(self.server.url, **options)
        self.logs.append(log)
        return log

    async def restart(self) -> None:
        await anyio.to_thread.run_sync(self.server.restart)

    async def stop(self) -> None:
        await anyio.to_thread.run_sync(self.server.stop)

    async def start(self) -> None:
        await anyio.to_thread.run_sync(self.server.start)


@pytest.fixture(params=["redis", "nats"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    kind = RedisServer if request.param == "redis" else NatsServer
    server = own_server(kind, tmp_path / request.param)
    assert isinstance(server, RedisServer | NatsServer)
    backend = Backend(request.param, server)
    try:
        yield backend
    finally:
        for log in backend.logs:
            with anyio.move_on_after(5):
                await log.aclose()
        server.stop()


def numbered(entries: Sequence[Entry]) -> list[int]:
    return [entry.id for entry in entries]


async def test_a_server_restart_mid_stream_loses_and_repeats_nothing(backend: Backend) -> None:
    producer = await backend.open(retry_for=15.0)
    reader_log = await backend.open(retry_for=15.0)
    rid = new_id()
    await producer.create(rid)
    await producer.append(rid, items(*"abc"))
    got: list[Entry] = []
    three = anyio.Event()

    async def read() -> None:
        async for entry in reader_log.read(rid):
            got.append(entry)
            if entry.id == 3:
                three.set()

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            await three.wait()
            await backend.stop()
            async with anyio.create_task_group() as during:
                during.start_soon(producer.append, rid, items("d", "e"))  # retries while it is down
                await backend.start()
            await producer.append(rid, items("f"))
            await producer.end(rid)
    assert numbered(got) == [1, 2, 3, 4, 5, 6, 7]
    assert got[-1].end
    assert [entry.data for entry in got[:-1]] == items(*"abcdef")
    assert numbered(await collect(reader_log, rid, 2)) == [3, 4, 5, 6, 7]


async def test_a_server_down_past_the_bound_fails_the_response_with_a_clear_error(
    backend: Backend,
) -> None:
    producer = await backend.open(retry_for=2.0, heartbeat_timeout=30.0)
    failed = anyio.Event()
    released = anyio.Event()
    append = producer.append

    async def append_then_signal(response_id: str, batch: Sequence[bytes]) -> int:
        try:
            return await append(response_id, batch)
        except EventLogUnavailable:
            failed.set()
            raise

    producer.append = append_then_signal  # type: ignore[method-assign,assignment]

    async def source() -> AsyncIterator[dict[str, str]]:
        yield {"t": "before"}
        await released.wait()
        yield {"t": "during"}

    with anyio.fail_after(GUARD):
        async with ResponseManager(producer) as manager:
            rid = await manager.start(source)
            reader_log = await backend.open()
            first = await reader_log.read(rid).__anext__()
            assert first.data == b'{"t":"before"}'
            await backend.stop()
            released.set()
            await failed.wait()  # the append gave up after retry_for; the manager now ends it (retrying)
            await backend.start()
            await manager.wait(rid)
            entries = await collect(reader_log, rid)
    # Redis never ran the failed append; the NATS client delivers what it buffered while disconnected
    # once it reconnects, so there the item may have landed (nothing received is lost either way).
    assert [entry.data for entry in entries[:-1]] in (
        [b'{"t":"before"}'],
        [b'{"t":"before"}', b'{"t":"during"}'],
    )
    assert numbered(entries) == list(range(1, len(entries) + 1))
    error = entries[-1].error
    assert entries[-1].end
    assert error is not None
    assert error["type"] == "EventLogUnavailable"
    assert "unreachable for 2.0 s" in error["message"]
    status = await reader_log.status(rid)
    assert status is not None
    assert status.state == "failed"


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.serving_proc", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


async def line_of(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    stdout = process.stdout
    with anyio.fail_after(GUARD):
        return (await anyio.to_thread.run_sync(stdout.readline)).strip()


async def test_a_dead_producer_process_gives_readers_producer_lost(
    backend: Backend, processes: list[subprocess.Popen[str]]
) -> None:
    rid = new_id()
    producer = spawn("produce", backend.kind, backend.server.url, rid, "0.6")
    processes.append(producer)
    assert await line_of(producer) == "ready"
    log = await backend.open(heartbeat_timeout=0.6)
    reader = log.read(rid)
    assert (await reader.__anext__()).id == 1
    producer.kill()
    await anyio.to_thread.run_sync(producer.wait)
    with pytest.raises(ProducerLost, match=rid), anyio.fail_after(GUARD):
        async for _ in reader:
            pass


async def test_a_reader_resumes_in_another_process_after_its_last_id(
    backend: Backend, processes: list[subprocess.Popen[str]]
) -> None:
    rid = new_id()
    producer = spawn("produce", backend.kind, backend.server.url, rid, "5")
    processes.append(producer)
    assert await line_of(producer) == "ready"
    log = await backend.open()
    seen: list[Entry] = []
    with anyio.fail_after(GUARD):
        async for entry in log.read(rid):
            seen.append(entry)
            if entry.id == 2:
                break
    # The tab reconnects to another replica with Last-Event-ID: 2.
    reader = spawn("read", backend.kind, backend.server.url, rid, "2")
    processes.append(reader)
    assert producer.stdin is not None
    producer.stdin.write("more\n")
    producer.stdin.flush()
    assert await line_of(producer) == "ok"
    producer.stdin.write("end\n")
    producer.stdin.flush()
    lines = []
    while (line := await line_of(reader)) not in ("done", ""):
        lines.append(msgspec.json.decode(line, type=Entry))
    assert line == "done"
    seen += lines
    assert numbered(seen) == list(range(1, 8))
    assert [entry.data for entry in seen[:-1]] == [msgspec.json.encode({"n": n}) for n in range(1, 7)]
    assert seen[-1].end


async def test_a_thousand_readers_across_two_logs(backend: Backend) -> None:
    producer = await backend.open(retention=Retention(max_items=10_000))
    replicas = [await backend.open(), await backend.open()]
    rid = new_id()
    await producer.create(rid)
    counts: list[int] = []

    async def read(log: EventLog) -> None:
        entries = await collect(log, rid)
        assert numbered(entries) == list(range(1, 102))
        counts.append(len(entries))

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tasks:
            for number in range(1000):
                tasks.start_soon(read, replicas[number % 2])
            for number in range(100):
                await producer.append(rid, items(str(number)))
            await producer.end(rid)
    assert counts == [101] * 1000
