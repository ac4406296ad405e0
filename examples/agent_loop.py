"""An agent loop that runs each tool the moment its call is folded, while the model is still streaming.

The model's response is replayed from the bundled demo stream (an Anthropic Messages stream with a
``get_weather`` call and a ``write_file`` call), paced like a real response. Each invocation starts its
tool in a task group as soon as ``fold_invocations`` yields it: ``get_weather`` runs while the model is
still writing the file. ``write_file`` writes into a scratch directory.

Run: ``python examples/agent_loop.py``
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import anyio

from pipeline import SegmentEvent, SegmentEventType, ToolInvocation
from pipeline.compose import process

Tool = Callable[[dict[str, Any]], Awaitable[str]]


async def paced_response(speed: float = 400.0) -> AsyncIterator[bytes]:
    """The demo stream, one SSE event at a time, ``speed`` events per second (like a real response)."""
    data = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    for event in data.split(b"\n\n"):
        if event:
            await anyio.sleep(1 / speed)
            yield event + b"\n\n"


def make_tools(workdir: Path) -> dict[str, Tool]:
    async def get_weather(arguments: dict[str, Any]) -> str:
        await anyio.sleep(0.05)  # a slow API call
        return f"18°C and cloudy in {arguments['location']}"

    async def write_file(arguments: dict[str, Any]) -> str:
        target = workdir / arguments["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        await anyio.Path(target).write_text(arguments["content"])
        return f"wrote {len(arguments['content'])} characters to {arguments['path']}"

    return {"get_weather": get_weather, "write_file": write_file}


async def run_agent(
    source: AsyncIterator[bytes], tools: dict[str, Tool]
) -> tuple[list[tuple[str, str, float]], float]:
    """Stream the response; start every folded invocation at once.

    Returns (call id, result, seconds from the start when the tool started) per call, and the seconds
    from the start when the model's response ended.
    """
    started = time.perf_counter()
    results: list[tuple[str, str, float]] = []

    async def execute(invocation: ToolInvocation) -> None:
        at = time.perf_counter() - started
        tool = tools.get(invocation.name)
        if invocation.error is not None:
            result = f"not run: {invocation.error.kind}: {invocation.error.message}"
        elif tool is None:
            result = f"not run: no tool named {invocation.name!r}"
        else:
            result = await tool(invocation.arguments)
        results.append((invocation.id, result, at))

    async with anyio.create_task_group() as tools_running:
        async with process(source, provider="anthropic").stream() as events:
            async for event in events:
                if isinstance(event, ToolInvocation) and not event.provider_executed:
                    tools_running.start_soon(execute, event)
                elif isinstance(event, SegmentEvent) and event.event_type is SegmentEventType.START:
                    print(f"{time.perf_counter() - started:6.3f}s  segment {event.segment_type} started")
        streamed = time.perf_counter() - started
        print(f"{streamed:6.3f}s  the model finished streaming")
    return results, streamed


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        results, _ = await run_agent(paced_response(), make_tools(Path(scratch)))
        for call_id, result, at in results:
            print(f"{at:6.3f}s  {call_id} started -> {result}")


if __name__ == "__main__":
    anyio.run(main)
