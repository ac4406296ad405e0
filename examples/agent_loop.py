"""An agent step whose read-only tools run the moment each call is folded, while the model is still
streaming, and whose side-effecting tools wait for the response to end safely.

The model's response is replayed from the bundled demo stream (an Anthropic Messages stream with a
``get_weather`` call and a ``write_file`` call, ending ``tool_use``), paced like a real response. The tools
are registered in a :class:`pipeline.agent.ToolRegistry` (arguments typed by the signatures);
:func:`pipeline.agent.run_tools` starts each one when its gate allows and puts a ``ToolOutput`` in the
same stream when it returns: ``get_weather`` (read-only, so ``start="eager"``) runs while the model is
still writing the file; ``write_file`` (side effects, so ``start="after_finish"``) starts once the
response has ended with ``tool_calls``, and would be ``not_run`` had it ended ``length`` or
``content_filter``. It writes into a scratch directory. For several turns, :func:`pipeline.agent.run_loop`
drives the same runner with a ``call_model(messages)`` and a next-turn message builder.

Run: ``python examples/agent_loop.py``
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path

import anyio

from pipeline import ResponseEnd, SegmentEvent, SegmentEventType, ToolInvocation
from pipeline.agent import ToolOutput, ToolRegistry, run_tools
from pipeline.compose import process


async def paced_response(speed: float = 400.0) -> AsyncIterator[bytes]:
    """The demo stream, one SSE event at a time, ``speed`` events per second (like a real response)."""
    data = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    for event in data.split(b"\n\n"):
        if event:
            await anyio.sleep(1 / speed)
            yield event + b"\n\n"


def make_tools(workdir: Path) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True, timeout=10)
    async def get_weather(location: str) -> str:
        """The current weather in a city."""
        await anyio.sleep(0.05)  # a slow API call
        return f"18°C and cloudy in {location}"

    @tools.tool(timeout=10)
    async def write_file(path: str, content: str) -> str:
        """Write a file of the project."""
        target = workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        await anyio.Path(target).write_text(content)
        return f"wrote {len(content)} characters to {path}"

    return tools


async def run_agent(
    source: AsyncIterator[bytes], tools: ToolRegistry
) -> tuple[list[tuple[str, str, float]], float]:
    """Stream the response; each eager tool starts when its call is folded, the others at the end.

    Returns (call id, output text, seconds from the start when the tool started) per call, in the order
    the outputs arrived, and the seconds from the start when the model's response ended.
    """
    started = time.perf_counter()
    tool_started: dict[str, float] = {}
    held: list[ToolInvocation] = []
    results: list[tuple[str, str, float]] = []
    streamed = 0.0
    async with run_tools(process(source, provider="anthropic"), tools) as run:
        async for item in run:
            now = time.perf_counter() - started
            if isinstance(item, ToolInvocation):
                if tools[item.name].start == "eager":
                    tool_started[item.id] = now  # its tool is already running
                    print(f"{now:6.3f}s  {item.name} started")
                else:
                    held.append(item)
                    print(f"{now:6.3f}s  {item.name} held until the response ends safely")
            elif isinstance(item, ToolOutput):
                results.append((item.call_id, item.text, tool_started[item.call_id]))
                print(f"{now:6.3f}s  {item.name} -> {item.status}: {item.text}")
            elif isinstance(item, SegmentEvent) and item.event_type is SegmentEventType.START:
                print(f"{now:6.3f}s  segment {item.segment_type} started")
            elif isinstance(item, ResponseEnd):
                streamed = now
                print(f"{streamed:6.3f}s  the model finished streaming ({item.finish_reason})")
                for call in held:  # started now if the finish is stop / tool_calls, else not_run
                    tool_started[call.id] = now
    return results, streamed


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        await run_agent(paced_response(), make_tools(Path(scratch)))


if __name__ == "__main__":
    anyio.run(main)
