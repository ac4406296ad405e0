"""A durable-run worker in a process of its own, for the crash tests of :mod:`pipeline.agent.durable`.

``python -m tests.durable_worker BACKEND URL RUN_ID MODE WORKDIR``: runs (or takes over) the run with a
scripted model (:func:`scripted_model`, the same events on every call) and two tools over ``WORKDIR``.
``MODE``: ``finish`` runs to the end, retrying while another worker's lease is live, then prints ``done``;
``crash-tool`` blocks inside ``write_file`` (after printing ``blocked``) until killed;
``crash-model`` blocks in the middle of the first model stream (after printing ``blocked``);
``finish-idempotent`` is ``finish`` with ``write_file`` marked idempotent (and ``crash-tool-idempotent``
the crash with it so marked).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio

from pipeline.agent import ToolRegistry
from pipeline.agent.durable import LeaseHeld, run_durable
from pipeline.agent.leases import Lease
from pipeline.fanout.serving._log import EventLog
from pipeline.models import PipelineEvent, ResponseEnd, SegmentEvent, ToolInvocation, ToolOutput

__all__ = ["LEASE_TTL", "make_tools", "next_messages", "scripted_model"]

LEASE_TTL = 1.0
"""Short, so that the second worker takes the run soon after the first dies."""


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _block_forever() -> None:
    say("blocked")
    await anyio.sleep_forever()


def make_tools(workdir: Path, *, block_in_write: bool, idempotent: bool) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(start="after_finish")
    async def read_file(path: str) -> str:
        """Read a file of the work directory."""
        return (workdir / path).read_text()

    @tools.tool(idempotent=idempotent)
    async def write_file(path: str, text: str) -> str:
        """Write a file of the work directory."""
        if block_in_write:
            await _block_forever()
        (workdir / path).write_text(text)
        return f"wrote {len(text)} characters to {path}"

    return tools


def scripted_model(*, block_mid_stream: bool) -> Any:
    """``call_model``: step 0 reads a.txt and writes b.txt; step 1 answers without a call."""

    async def call_model(messages: list[Any]) -> AsyncIterator[PipelineEvent]:
        if len(messages) == 1:
            yield SegmentEvent.content("t0", "Reading ")
            yield SegmentEvent.content("t0", "a.txt. ")
            if block_mid_stream:
                await _block_forever()
            yield ToolInvocation("call_read", "read_file", {"path": "a.txt"})
            yield ToolInvocation("call_write", "write_file", {"path": "b.txt", "text": "hello"})
            yield ResponseEnd(finish_reason="tool_calls")
        else:
            yield SegmentEvent.content("t1", "Done.")
            yield ResponseEnd(finish_reason="stop")

    return call_model


def next_messages(events: Sequence[PipelineEvent], outputs: Sequence[ToolOutput]) -> list[Any]:
    text = "".join(str(event.payload.get("delta", "")) for event in events if isinstance(event, SegmentEvent))
    calls = [event.id for event in events if isinstance(event, ToolInvocation)]
    results = [
        {"role": "tool", "call_id": output.call_id, "status": output.status, "output": output.output}
        for output in outputs
    ]
    return [{"role": "assistant", "text": text, "calls": calls}, *results]


async def open_backend(backend: str, url: str) -> tuple[EventLog, Lease]:
    if backend == "redis":
        from pipeline.agent.leases import RedisLease
        from pipeline.fanout.serving.redis import RedisEventLog

        return RedisEventLog(url), RedisLease(url)
    from pipeline.agent.leases import NatsLease
    from pipeline.fanout.serving.nats import NatsEventLog

    return await NatsEventLog.connect(url), await NatsLease.connect(url)


async def work(backend: str, url: str, run_id: str, mode: str, workdir: Path) -> None:
    log, lease = await open_backend(backend, url)
    tools = make_tools(
        workdir, block_in_write=mode.startswith("crash-tool"), idempotent=mode.endswith("idempotent")
    )
    call_model = scripted_model(block_mid_stream=mode == "crash-model")
    with anyio.fail_after(60):
        while True:
            try:
                run = await run_durable(
                    run_id,
                    log,
                    lease,
                    call_model,
                    [{"role": "user", "text": "copy a.txt"}],
                    tools,
                    next_messages=next_messages,
                    owner=f"worker-{mode}",
                    lease_ttl=LEASE_TTL,
                )
                break
            except LeaseHeld:
                await anyio.sleep(LEASE_TTL / 10)  # waiting for the dead worker's lease to run out
    say(f"done {run.stop_reason}")


def main() -> None:
    backend, url, run_id, mode, workdir = sys.argv[1:6]
    anyio.run(work, backend, url, run_id, mode, Path(workdir))


if __name__ == "__main__":
    main()
