"""The producer process: runs one response into the Redis log and exits when it ends.

    python examples/replicas/producer.py --redis redis://127.0.0.1:6379/0 --response-id demo --pace 0.03

It replays the bundled demo recording at a model's pace through ``process()``; readers in other
processes (the web replicas) follow it from the log. Prints ``started <id>`` once the response exists.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import anyio

from pipeline.compose import process
from pipeline.fanout.serving import ResponseManager
from pipeline.fanout.serving.redis import RedisEventLog


async def paced_recording(pace: float) -> AsyncIterator[bytes]:
    data = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    for event in data.split(b"\n\n"):
        await anyio.sleep(pace)
        yield event + b"\n\n"


async def events(pace: float) -> AsyncIterator[Any]:
    async with process(paced_recording(pace)).stream() as items:
        async for item in items:
            yield item


async def main(redis: str, response_id: str, pace: float) -> None:
    log = RedisEventLog(redis)
    try:
        async with ResponseManager(log) as manager:
            await manager.start(events(pace), response_id=response_id)
            print(f"started {response_id}", flush=True)
            await manager.wait(response_id)
    finally:
        await log.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--response-id", required=True)
    parser.add_argument("--pace", type=float, default=0.03, help="seconds between the recording's events")
    arguments = parser.parse_args()
    anyio.run(main, arguments.redis, arguments.response_id, arguments.pace)
