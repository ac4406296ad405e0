"""Eager tool execution against run-after-the-stream: the time to the last tool result on paced recordings.

Run: ``python -m benchmarks.bench_eager_tools`` (``--pace-ms 20``, ``--tool-ms 500 50``).

Each recording is replayed one SSE event every ``--pace-ms`` milliseconds (like a live response), through
``process()``. Every client-side call's tool sleeps for a duration taken in turn from ``--tool-ms`` (the
first call the slowest by default: a search, a build), and all tools are read-only, so both ways run them
in parallel. Timed from the first byte, in milliseconds (the clock of the event loop):

- stream: when the response's last event arrived (in the run-after run; the eager run's own is in
  ``past end``);
- after: run-after-the-stream (what the OpenAI Agents SDK, pydantic-ai and the Vercel AI SDK do): fold the
  whole response, then run its calls in parallel; the time its last tool returned;
- eager: :func:`pipeline.agent.run_tools`, each call starting the moment it is folded; the time its last
  tool output arrived;
- past end: eager's last output after its own response ended (0 would be: every tool hidden in the stream);
- saved: after minus eager.

Eager ends at about max(stream, the last call's fold + its tool), after at stream + the slowest tool.
"""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import anyio

from pipeline.agent import ToolOutput, ToolRegistry, run_tools
from pipeline.compose import process
from pipeline.models import ToolInvocation

FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures"
RECORDINGS = {
    "anthropic demo (write_file)": None,
    "anthropic 2 parallel": FIXTURES
    / "anthropic"
    / "fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse",
    "openai chat 2 parallel": FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse",
    "responses reasoning + 2": FIXTURES
    / "openai_responses"
    / "fantasy_gpt-5_reasoning_then_2_parallel_function_calls.sse",
    "kimi (avian) interleaved": FIXTURES
    / "openai_compatible"
    / "fantasy_avian_kimi_reasoning_text_interleaved_between_parallel_tools.sse",
    "glm-4.7 reasoning + 2": FIXTURES
    / "openai_compatible"
    / "fantasy_zai_glm-4.7-flash_reasoning_text_2_parallel_tools.sse",
}
_EVENT_END = re.compile(rb"\r?\n\r?\n")


def recording(path: Path | None) -> bytes:
    if path is None:
        return (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    return path.read_bytes()


async def paced(data: bytes, pace: float) -> AsyncIterator[bytes]:
    """The recording one SSE event at a time, ``pace`` seconds apart."""
    start = 0
    for match in _EVENT_END.finditer(data):
        await anyio.sleep(pace)
        yield data[start : match.end()]
        start = match.end()
    if data[start:].strip():
        yield data[start:]


async def tool_names(data: bytes) -> list[str]:
    async with process(data).stream() as events:
        names = [e.name async for e in events if isinstance(e, ToolInvocation) and not e.provider_executed]
    return names


def registry(names: list[str], durations: list[float]) -> ToolRegistry:
    """One read-only tool per name; the n-th call (in call order) sleeps ``durations[n % len]``."""
    tools = ToolRegistry()
    turn = itertools.count()

    def make(name: str) -> Any:
        async def tool() -> str:
            await anyio.sleep(durations[next(turn) % len(durations)])
            return name

        return tool

    for name in dict.fromkeys(names):
        tools.add(make(name), name=name, read_only=True)
    return tools


async def eager(data: bytes, pace: float, durations: list[float]) -> tuple[float, float]:
    tools = registry(await tool_names(data), durations)
    started = anyio.current_time()
    streamed = last = 0.0
    async with run_tools(process(paced(data, pace)), tools) as run:
        async for item in run:
            now = anyio.current_time() - started
            if isinstance(item, ToolOutput):
                last = now
            else:
                streamed = now
    return streamed, last


async def after(data: bytes, pace: float, durations: list[float]) -> tuple[float, float]:
    tools = registry(await tool_names(data), durations)
    started = anyio.current_time()
    async with process(paced(data, pace)).stream() as events:
        calls = [e async for e in events if isinstance(e, ToolInvocation) and not e.provider_executed]
    streamed = anyio.current_time() - started
    async with anyio.create_task_group() as group:
        for invocation in calls:
            tool = tools[invocation.name]
            group.start_soon(tool.call, tool.validate(invocation.arguments))
    return streamed, anyio.current_time() - started


async def main(pace: float, durations: list[float]) -> None:
    print(f"pace {pace * 1000:.0f} ms/event, tools {', '.join(f'{d * 1000:.0f}' for d in durations)} ms")
    print(
        f"{'recording':30} {'events':>6} {'calls':>5} {'stream':>8} {'after':>8} {'eager':>8} "
        f"{'past end':>8} {'saved':>8}"
    )
    for label, path in RECORDINGS.items():
        data = recording(path)
        events = len(_EVENT_END.findall(data))
        calls = len(await tool_names(data))
        streamed, late = await after(data, pace, durations)
        eager_streamed, early = await eager(data, pace, durations)
        print(
            f"{label:30} {events:6d} {calls:5d} {streamed * 1000:8.0f} {late * 1000:8.0f} "
            f"{early * 1000:8.0f} {(early - eager_streamed) * 1000:8.0f} {(late - early) * 1000:8.0f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pace-ms", type=float, default=20.0, help="milliseconds between SSE events")
    parser.add_argument("--tool-ms", type=float, nargs="+", default=[500.0, 50.0], help="tool durations")
    options = parser.parse_args()
    anyio.run(main, options.pace_ms / 1000, [ms / 1000 for ms in options.tool_ms])
