"""A producer of the durable coding agent: runs the queued runs, and takes over those of a dead producer.

    python examples/durable_agent/producer.py --redis redis://127.0.0.1:6379/0 --name a --workdir ./repo

Every ``--poll`` seconds it looks at the runs not finished yet (``web.py`` queues them) and runs each whose
lease is free with :func:`~pipeline.agent.durable.run_durable`: a new run, or one whose producer died
(its lease expired after ``--lease-ttl`` seconds). The tools work in ``--workdir``: ``read_file`` is
read-only (it starts while the model streams) and idempotent (a producer that takes over reads again);
``write_file`` needs a person's approval: the run stops ``awaiting_approval`` with a
``TOOL_APPROVAL_REQUEST`` in its log. The model is scripted, so the example runs without a provider key;
swap ``call_model`` for ``process(await client.chat.completions.create(..., stream=True))``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
from redis.asyncio import Redis

from pipeline.agent import ToolRegistry
from pipeline.agent.durable import LeaseHeld, run_durable
from pipeline.agent.leases import RedisLease
from pipeline.fanout.serving.redis import RedisEventLog
from pipeline.models import PipelineEvent, ResponseEnd, SegmentEvent, ToolInvocation, ToolOutput

RUNS = "durable-agent:runs"


def coding_tools(workdir: Path) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True, idempotent=True)
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        hold = os.environ.get("DURABLE_AGENT_HOLD_READS")  # the example's test holds a read here
        while hold and Path(hold).exists():
            time.sleep(0.05)  # a worker thread: polling the test's file is all there is to wait on
        return (workdir / path).read_text()

    @tools.tool(start="approval")
    async def write_file(path: str, text: str) -> str:
        """Write a file of the repository (a person approves it first)."""
        (workdir / path).write_text(text)
        return f"wrote {len(text)} characters to {path}"

    return tools


async def call_model(messages: list[Any]) -> AsyncIterator[PipelineEvent]:
    """A scripted coding model: reads README.md, then proposes a change to it."""
    yield SegmentEvent.content("text-0", "Let me read the README first. ")
    yield ToolInvocation("call_read_readme", "read_file", {"path": "README.md"})
    yield SegmentEvent.content("text-0", "I will add a line to it.")
    yield ToolInvocation(
        "call_write_readme", "write_file", {"path": "README.md", "text": "# demo\nupdated\n"}
    )
    yield ResponseEnd(finish_reason="tool_calls")


def next_messages(events: Sequence[PipelineEvent], outputs: Sequence[ToolOutput]) -> list[Any]:
    text = "".join(str(e.payload.get("delta", "")) for e in events if isinstance(e, SegmentEvent))
    results = [{"role": "tool", "tool_call_id": o.call_id, "content": o.text} for o in outputs]
    return [{"role": "assistant", "content": text}, *results]


async def main(redis_url: str, name: str, workdir: Path, lease_ttl: float, poll: float) -> None:
    log, lease, redis = RedisEventLog(redis_url), RedisLease(redis_url), Redis.from_url(redis_url)
    tools = coding_tools(workdir)
    print(f"producer {name} ready", flush=True)
    try:
        while True:
            queued = await redis.hgetall(RUNS)
            for raw_id, prompt in queued.items():
                run_id = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
                text = prompt.decode() if isinstance(prompt, bytes) else prompt
                messages = [{"role": "user", "content": text}]
                try:
                    run = await run_durable(
                        run_id, log, lease, call_model, messages, tools,
                        next_messages=next_messages, owner=name, lease_ttl=lease_ttl,
                    )  # fmt: skip
                except LeaseHeld:
                    continue  # another producer runs it
                await redis.hdel(RUNS, run_id)
                print(f"producer {name} finished {run_id}: {run.stop_reason}", flush=True)
            await anyio.sleep(poll)
    finally:
        await log.aclose()
        await lease.aclose()
        await redis.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--lease-ttl", type=float, default=10.0)
    parser.add_argument("--poll", type=float, default=0.5)
    arguments = parser.parse_args()
    anyio.run(main, arguments.redis, arguments.name, arguments.workdir, arguments.lease_ttl, arguments.poll)
