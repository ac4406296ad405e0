"""An agent step whose write tool runs only once a person approves it, while its read tool runs eagerly.

The model's response is the bundled demo stream (an Anthropic Messages stream with a ``get_weather`` call
and a ``write_file`` call, ending ``tool_use``). ``get_weather`` is read-only, so it starts the moment its
call is folded; ``write_file`` is registered with ``start="approval"``: when its call is folded the runner
puts a :class:`~pipeline.models.ToolApprovalRequest` in the stream and waits on
:class:`~pipeline.agent.Approvals` for a decision. Approved, the file is written once the response has
ended with ``tool_calls``; denied (or undecided after ``timeout`` seconds), the call's output has status
``denied`` and says why, which the next turn carries to the model (:class:`~pipeline.agent.TurnBuilder`).

In a web app the decision comes from a button instead of the terminal (``streamfold serve``'s page, or the
Vercel AI SDK and AG-UI round trips of ``docs/tool-approval.md``).

Run: ``python examples/tool_approval.py`` (it asks on the terminal).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path

import anyio

from pipeline.agent import Approvals, ToolApprovalRequest, ToolOutput, ToolRegistry, run_tools
from pipeline.compose import process

Decide = Callable[[ToolApprovalRequest], tuple[bool, str | None]]
"""A person's answer to a request: approved, and an optional reason for the model."""


async def response() -> AsyncIterator[bytes]:
    data = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    for event in data.split(b"\n\n"):
        if event:
            yield event + b"\n\n"


def make_tools(workdir: Path) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def get_weather(location: str) -> str:
        """The current weather in a city."""
        return f"18°C and cloudy in {location}"

    @tools.tool(start="approval", timeout=10)
    async def write_file(path: str, content: str) -> str:
        """Write a file of the project (a person approves each call)."""
        target = workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        await anyio.Path(target).write_text(content)
        return f"wrote {len(content)} characters to {path}"

    return tools


def ask(request: ToolApprovalRequest) -> tuple[bool, str | None]:
    """Ask on the terminal."""
    shown = ", ".join(f"{key}={str(value)[:40]!r}" for key, value in request.arguments.items())
    answer = input(f"run {request.name}({shown})? [y/N] ").strip().lower()
    return (True, None) if answer == "y" else (False, input("why not? ").strip() or None)


async def run_step(tools: ToolRegistry, decide: Decide) -> list[ToolOutput]:
    """One response with its tools; ``decide`` answers each approval request. Returns the outputs."""
    approvals = Approvals(timeout=300)
    async with run_tools(process(response(), provider="anthropic"), tools, approvals=approvals) as run:
        async for item in run:
            if isinstance(item, ToolApprovalRequest):
                approved, reason = await anyio.to_thread.run_sync(decide, item)
                approvals.decide(item.call_id, approved, reason)
            elif isinstance(item, ToolOutput):
                print(f"{item.name} -> {item.status}: {item.text}")
    return run.outputs


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        await run_step(make_tools(Path(scratch)), ask)


if __name__ == "__main__":
    anyio.run(main)
