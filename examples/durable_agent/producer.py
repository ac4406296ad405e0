"""A producer of the durable coding agent: runs the runs the web workers queue, and takes over those of a
dead producer.

    python examples/durable_agent/producer.py --redis redis://127.0.0.1:6379/0 --name a --workdir ./repo

:func:`~pipeline.agent.durable.serve_runs` looks at the queued runs every ``--poll`` seconds and runs each
whose lease is free: a new run, or one whose producer died (its lease expired after ``--lease-ttl``
seconds). The tools work in ``--workdir``: ``read_file`` is read-only (it starts while the model streams)
and idempotent (a producer that takes over reads again); ``write_file`` needs a person's approval: the run
ends ``awaiting_approval`` with a ``tool-approval-request`` for the browser, and the browser's answer
comes with its next request, which queues the next run; the producer that takes that run writes the file
(or tells the model it was denied). The model is scripted, so the example runs without a provider key;
swap ``call_model`` for ``process(await client.chat.completions.create(..., stream=True))``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio

from pipeline.agent import ToolRegistry
from pipeline.agent.durable import serve_runs
from pipeline.agent.leases import RedisLease
from pipeline.fanout.serving.redis import RedisEventLog
from pipeline.fanout.serving.runs import DurableRuns
from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolInvocation,
    ToolOutput,
)

NEW_README = "# demo\nupdated\n"


def hold(variable: str) -> None:
    """The example's test holds a producer here while the file ``$variable`` names exists."""
    path = os.environ.get(variable)
    while path and Path(path).exists():
        time.sleep(0.05)  # a worker thread: polling the test's file is all there is to wait on


def coding_tools(workdir: Path) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True, idempotent=True)
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        hold("DURABLE_AGENT_HOLD_READS")
        return (workdir / path).read_text()

    @tools.tool(start="approval")
    async def write_file(path: str, text: str) -> str:
        """Write a file of the repository (a person approves it first)."""
        (workdir / path).write_text(text)
        return f"wrote {len(text)} characters to {path}"

    return tools


def text(segment_id: str, *pieces: str) -> list[SegmentEvent]:
    """A text segment of the scripted model."""
    contents = [SegmentEvent.content(segment_id, piece) for piece in pieces]
    start = SegmentEvent.start(segment_id, SegmentType.TEXT)
    return [start, *contents, SegmentEvent.end(segment_id, segment_type=SegmentType.TEXT)]


async def call_model(messages: list[Any]) -> AsyncIterator[PipelineEvent]:
    """A scripted coding model: reads README.md and proposes a change to it; once the change is
    written (or refused), says so."""
    if messages[-1]["role"] == "tool":
        for event in text("text-2", "Done: ", messages[-1]["content"], "."):
            yield event
        yield ResponseEnd(finish_reason="stop")
        return
    for event in text("text-0", "Let me read ", "the README first. "):
        yield event
        if event.event_type == SegmentEventType.CONTENT:  # the test may kill the producer here
            await anyio.to_thread.run_sync(hold, "DURABLE_AGENT_HOLD_STREAM")
    yield ToolInvocation("call_read_readme", "read_file", {"path": "README.md"})
    for event in text("text-1", "I will add a line to it."):
        yield event
    yield ToolInvocation("call_write_readme", "write_file", {"path": "README.md", "text": NEW_README})
    yield ResponseEnd(finish_reason="tool_calls")


def tool_messages(outputs: Sequence[ToolOutput]) -> list[Any]:
    """The chat messages that carry tool outputs (also those of the calls a request approved)."""
    return [{"role": "tool", "tool_call_id": o.call_id, "content": o.text} for o in outputs]


def next_messages(events: Sequence[PipelineEvent], outputs: Sequence[ToolOutput]) -> list[Any]:
    """The model's turn and its tools' outputs, as chat messages."""
    content = SegmentEventType.CONTENT
    said = "".join(e.delta or "" for e in events if isinstance(e, SegmentEvent) and e.event_type == content)
    calls = [
        {"id": e.id, "type": "function", "function": {"name": e.name, "arguments": json.dumps(e.arguments)}}
        for e in events
        if isinstance(e, ToolInvocation)
    ]
    turn: dict[str, Any] = {"role": "assistant", "content": said}
    if calls:
        turn["tool_calls"] = calls
    return [turn, *tool_messages(outputs)]


async def main(redis_url: str, name: str, workdir: Path, lease_ttl: float, poll: float) -> None:
    runs, lease = DurableRuns(RedisEventLog(redis_url)), RedisLease(redis_url)
    print(f"producer {name} ready", flush=True)
    try:
        await serve_runs(
            runs,
            lease,
            call_model,
            coding_tools(workdir),
            next_messages=next_messages,
            approved_messages=tool_messages,
            owner=name,
            lease_ttl=lease_ttl,
            poll=poll,
        )
    finally:
        await runs.log.aclose()
        await lease.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--lease-ttl", type=float, default=10.0)
    parser.add_argument("--poll", type=float, default=0.5)
    arguments = parser.parse_args()
    anyio.run(main, arguments.redis, arguments.name, arguments.workdir, arguments.lease_ttl, arguments.poll)
