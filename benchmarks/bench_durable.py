"""The cost per step of logging an agent run: :func:`~pipeline.agent.durable.run_durable` against
:func:`~pipeline.agent.runner.run_loop`, on the memory log.

Run: ``python -m benchmarks.bench_durable`` (``--runs 200 --steps 5 --deltas 50``).

A scripted model answers each step with ``--deltas`` text deltas, one read-only tool call and a
``ResponseEnd`` (the last step: no call). ``run_loop`` runs it as is; ``run_durable`` runs it over a
:class:`~pipeline.fanout.serving.memory.MemoryEventLog` and a :class:`~pipeline.agent.leases.MemoryLease`
(one append per item, a ``TOOL_STARTED`` per call, the step entries). The table gives the median time of
one step in microseconds, and the difference: what logging a step costs on top of running it (network
logs add their round trips per append).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio

from pipeline.agent import ToolRegistry, run_loop
from pipeline.agent.durable import run_durable
from pipeline.agent.leases import MemoryLease
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.models import PipelineEvent, ResponseEnd, SegmentEvent, ToolInvocation, ToolOutput


def scripted(steps: int, deltas: int) -> Any:
    async def call_model(messages: list[Any]) -> AsyncIterator[PipelineEvent]:
        step = (len(messages) - 1) // 2
        for n in range(deltas):
            yield SegmentEvent.content(f"t{step}", f"word{n} ")
        if step < steps - 1:
            yield ToolInvocation(f"call_{step}", "look", {"n": step})
            yield ResponseEnd(finish_reason="tool_calls")
        else:
            yield ResponseEnd(finish_reason="stop")

    return call_model


def next_messages(events: Sequence[PipelineEvent], outputs: Sequence[ToolOutput]) -> list[Any]:
    return [{"role": "assistant"}, {"role": "tool", "outputs": [output.text for output in outputs]}]


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def look(n: int) -> str:
        return f"looked {n}"

    return tools


async def measure(runs: int, steps: int, deltas: int) -> dict[str, float]:
    tools, model, user = registry(), scripted(steps, deltas), [{"role": "user"}]
    plain: list[float] = []
    durable: list[float] = []
    log, lease = MemoryEventLog(max_responses=runs + 1), MemoryLease()
    for run in range(runs):
        started = time.perf_counter_ns()
        await run_loop(model, user, tools, next_messages=next_messages, max_steps=steps)
        plain.append((time.perf_counter_ns() - started) / steps / 1000)
        started = time.perf_counter_ns()
        await run_durable(
            f"run-{run}", log, lease, model, user, tools,
            next_messages=next_messages, owner="bench", max_steps=steps,
        )  # fmt: skip
        durable.append((time.perf_counter_ns() - started) / steps / 1000)
    await log.aclose()
    return {"run_loop": statistics.median(plain), "run_durable": statistics.median(durable)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--deltas", type=int, default=50)
    arguments = parser.parse_args()
    result = anyio.run(measure, arguments.runs, arguments.steps, arguments.deltas)
    print(f"one step: {arguments.deltas} deltas, one tool call; median of {arguments.runs} runs")
    print(f"{'loop':<12} {'us/step':>10}")
    for name, value in result.items():
        print(f"{name:<12} {value:>10.1f}")
    print(f"{'logging':<12} {result['run_durable'] - result['run_loop']:>10.1f}")


if __name__ == "__main__":
    main()
