"""Two UIs of different speeds and the agent, all watching one response through a hub.

- the agent reads everything (``block``: lossless, and it paces the provider);
- a fast UI is a reactivex observer (``coalesce``), as a terminal or a GUI toolkit would use;
- a slow UI (a browser on a bad link, simulated by sleeping on each item) reads with ``coalesce`` and a
  small buffer: while it lags, text deltas waiting for it merge into bigger ones, so it receives fewer
  events, but exactly the same text, and it never holds up the agent.

Run: ``python examples/ui_observers.py``
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import resources

import anyio
import anyio.lowlevel
import reactivex

from pipeline import PipelineEvent, SegmentEvent, SegmentEventType, ToolInvocation
from pipeline.compose import process
from pipeline.fanout.hub import Subscription, fan_out
from pipeline.fanout.rx import observe


async def response_bytes() -> AsyncIterator[bytes]:
    data = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    for event in data.split(b"\n\n"):
        if event:
            await anyio.lowlevel.checkpoint()  # let the observers run, as network reads would
            yield event + b"\n\n"


@dataclass
class Screen:
    """What a UI shows: the text of each segment, and how many events it took to get there."""

    events: int = 0
    text: dict[str, list[str]] = field(default_factory=dict)

    def show(self, event: PipelineEvent) -> None:
        self.events += 1
        if isinstance(event, SegmentEvent) and event.event_type is SegmentEventType.CONTENT:
            self.text.setdefault(event.segment_id, []).append(event.payload["delta"])

    def segments(self) -> dict[str, str]:
        return {segment: "".join(pieces) for segment, pieces in self.text.items()}


async def slow_ui(subscription: Subscription[PipelineEvent], screen: Screen) -> None:
    async for event in subscription:
        screen.show(event)
        await anyio.sleep(0.002)  # a slow client


async def agent(subscription: Subscription[PipelineEvent], invocations: list[ToolInvocation]) -> None:
    async for event in subscription:
        if isinstance(event, ToolInvocation):
            invocations.append(event)


async def main() -> tuple[Screen, Screen, list[ToolInvocation]]:
    fast, slow = Screen(), Screen()
    invocations: list[ToolInvocation] = []
    events = process(response_bytes(), provider="anthropic")
    async with fan_out(events) as hub:
        observe(hub, reactivex.Observer[PipelineEvent](on_next=fast.show), policy="coalesce")
        slow_subscription = hub.subscribe(policy="coalesce", max_buffer=4, name="slow ui")
        agent_subscription = hub.subscribe(policy="block", name="agent")
        async with anyio.create_task_group() as readers:
            readers.start_soon(slow_ui, slow_subscription, slow)
            readers.start_soon(agent, agent_subscription, invocations)
        await hub.wait_finished()
        statistics = hub.statistics()
    print(f"fast UI: {fast.events} events; slow UI: {slow.events} events (coalesced while it lagged)")
    print(f"same text on both screens: {fast.segments() == slow.segments()}")
    print(f"agent got {[invocation.name for invocation in invocations]}")
    for subscriber in statistics.subscribers:
        print(f"  {subscriber.name}: {subscriber}")
    return fast, slow, invocations


if __name__ == "__main__":
    anyio.run(main)
