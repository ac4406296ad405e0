"""The latency from a call's last argument byte to its tool's start, per tool gate.

Run: ``python -m benchmarks.bench_tool_gates`` (``--runs 2000``).

A recorded OpenAI chat response with one tool call (``openai-python_single_tool_call_gpt4o.sse``) is fed
to ``process()`` one SSE event per chunk, as fast as it is read. The clock starts when the source hands
over the event that holds the call's last argument bytes and stops when the tool's function starts
(``time.perf_counter_ns``), for:

- floor: no runner: the consumer of ``process()`` calls a bare function on the folded
  :class:`~pipeline.models.ToolInvocation` (the fold's own latency);
- eager: ``run_tools``, the tool registered ``start="eager"``;
- after_finish: ``start="after_finish"``: the tool waits for the ``ResponseEnd`` (here two events after
  the last argument byte: the finish chunk and the usage chunk);
- approval: ``start="approval"`` with ``run_tools(approvals=Approvals())``; the consumer approves as
  soon as it reads the :class:`~pipeline.models.ToolApprovalRequest` (a person who answers at once: the
  machinery's cost, not a person's).

The table gives the median and the 99th percentile in microseconds over ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio

from pipeline.agent import Approvals, ToolApprovalRequest, ToolRegistry, run_tools
from pipeline.compose import process
from pipeline.models import ToolInvocation

RECORDING = (
    Path(__file__).parent.parent
    / "tests"
    / "fixtures"
    / "openai_chat"
    / "openai-python_single_tool_call_gpt4o.sse"
)
_EVENT_END = re.compile(rb"\r?\n\r?\n")
GATES = ("floor", "eager", "after_finish", "approval")


def events_of(data: bytes) -> tuple[list[bytes], int]:
    """The recording's SSE events, and the index of the last one holding argument bytes."""
    events: list[bytes] = []
    start = 0
    for match in _EVENT_END.finditer(data):
        events.append(data[start : match.end()])
        start = match.end()
    last = max(
        i for i, event in enumerate(events) if b'"arguments":"' in event and b'"arguments":""' not in event
    )
    return events, last


class Clock:
    """When the last argument byte was handed over, and when the tool started."""

    __slots__ = ("started", "stopped")

    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = time.perf_counter_ns()


async def source(events: list[bytes], last: int, clock: Clock) -> AsyncIterator[bytes]:
    for index, event in enumerate(events):
        if index == last:
            clock.started = time.perf_counter_ns()
        yield event


def tools_for(gate: str, clock: Clock) -> ToolRegistry:
    tools = ToolRegistry()

    async def weather(city: str, country: str, units: str) -> str:
        clock.stop()
        return city

    tools.add(weather, name="GetWeatherArgs", start=gate if gate != "floor" else "eager")  # type: ignore[arg-type]
    return tools


async def one_run(gate: str, events: list[bytes], last: int) -> float:
    """Microseconds from the last argument byte to the tool's start, for one run through ``gate``."""
    clock = Clock()
    if gate == "floor":
        async with process(source(events, last, clock), provider="openai").stream() as items:
            async for item in items:
                if isinstance(item, ToolInvocation):
                    clock.stop()  # the bare function call on the folded invocation
    else:
        approvals = Approvals() if gate == "approval" else None
        async with run_tools(
            process(source(events, last, clock), provider="openai"),
            tools_for(gate, clock),
            approvals=approvals,
        ) as run:
            async for output in run:
                if isinstance(output, ToolApprovalRequest) and approvals is not None:
                    approvals.decide(output.call_id, True)
    assert clock.stopped, f"{gate}: the tool did not start"
    return (clock.stopped - clock.started) / 1000


async def measure(runs: int, warmup: int = 50) -> dict[str, list[float]]:
    events, last = events_of(RECORDING.read_bytes())
    results: dict[str, list[float]] = {gate: [] for gate in GATES}
    for round_ in range(warmup + runs):
        for gate in GATES:  # interleaved: the machine's noise falls on every gate alike
            latency = await one_run(gate, events, last)
            if round_ >= warmup:
                results[gate].append(latency)
    return results


def table(results: dict[str, list[float]]) -> str:
    def percentile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    lines = ["| gate | median µs | p99 µs |", "|---|---:|---:|"]
    for gate, values in results.items():
        lines.append(f"| {gate} | {statistics.median(values):.1f} | {percentile(values, 0.99):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None, run: Callable[..., Any] = anyio.run) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000)
    options = parser.parse_args(argv)
    print(table(run(measure, options.runs)))


if __name__ == "__main__":
    main()
