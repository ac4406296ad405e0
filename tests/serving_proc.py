"""A producer or reader in a process of its own, for the multi-process serving tests.

``python -m tests.serving_proc produce BACKEND URL RESPONSE_ID HEARTBEAT_TIMEOUT``: creates the response,
appends ``{"n": 1..3}``, prints ``ready``; then per stdin line: ``more`` appends three more and prints
``ok``, ``end`` ends it and exits. It heartbeats all along (until killed).

``python -m tests.serving_proc read BACKEND URL RESPONSE_ID AFTER``: prints each entry read after
``AFTER`` as a JSON line, then ``done`` (or ``error TYPE``).
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from pipeline.fanout.serving._log import EventLog


async def open_log(backend: str, url: str, heartbeat_timeout: float = 15.0) -> EventLog:
    if backend == "redis":
        from pipeline.fanout.serving.redis import RedisEventLog

        return RedisEventLog(url, heartbeat_timeout=heartbeat_timeout)
    from pipeline.fanout.serving.nats import NatsEventLog

    return await NatsEventLog.connect(url, heartbeat_timeout=heartbeat_timeout)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def produce(backend: str, url: str, response_id: str, heartbeat_timeout: float) -> None:
    log = await open_log(backend, url, heartbeat_timeout)
    await log.create(response_id)
    count = 0

    async def append_three() -> None:
        nonlocal count
        for _ in range(3):
            count += 1
            await log.append(response_id, [msgspec.json.encode({"n": count})])

    async def beat() -> None:
        while True:
            await anyio.sleep(heartbeat_timeout / 4)
            await log.heartbeat(response_id)

    await append_three()
    say("ready")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(beat)
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if line.strip() == "more":
                await append_three()
                say("ok")
            else:
                await log.end(response_id)
                tasks.cancel_scope.cancel()
    await log.aclose()


async def read(backend: str, url: str, response_id: str, after: int) -> None:
    log = await open_log(backend, url)
    try:
        async for entry in log.read(response_id, after=after):
            say(msgspec.json.encode(entry).decode())
        say("done")
    except Exception as exc:
        say(f"error {type(exc).__name__}")
    finally:
        await log.aclose()


def main() -> None:
    mode, backend, url, response_id, number = sys.argv[1:6]
    if mode == "produce":
        anyio.run(produce, backend, url, response_id, float(number))
    else:
        anyio.run(read, backend, url, response_id, int(number))


if __name__ == "__main__":
    main()
