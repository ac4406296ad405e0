"""The fan-out hub: policies, replay, errors, cancellation, statistics.

Every concurrent step is synchronised explicitly: ``wait_all_tasks_blocked`` (every other task is waiting)
and events, under a ``fail_after`` guard so that a bug fails instead of hanging.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import traceback
import weakref
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex.abc import ObserverBase

import pipeline.fanout._buffer as buffer_module
import pipeline.fanout.hub as hub_module
from pipeline.errors import ConfigurationError, ProviderError, SubscriberError
from pipeline.fanout._buffer import SubscriberBuffer
from pipeline.fanout.hub import (
    Hub,
    HubClosedError,
    HubStatistics,
    Policy,
    ReplayUnavailableError,
    SubscriberStatistics,
    Subscription,
    broadcast,
    fan_out,
)
from pipeline.fanout.rx import observe
from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentType,
    TokenUsage,
    ToolInvocation,
)
from tests.guards import GUARD

pytestmark = pytest.mark.anyio

T = TypeVar("T")


def response_events() -> list[PipelineEvent]:
    """A response: text, then a tool call streaming its arguments, its invocation, the end."""
    text, call = "text_0", "call_1"
    return [
        SegmentEvent.start(text, SegmentType.TEXT),
        *(SegmentEvent.content(text, piece) for piece in ["Let", " me", " look", " that", " up."]),
        SegmentEvent.end(text),
        SegmentEvent.start(call, SegmentType.TOOL_CALL, {"tool_name": "search", "call_id": call}),
        SegmentEvent.content(call, '{"query": "'),
        SegmentEvent.argument_delta(call, ("query",), "asyncio"),
        SegmentEvent.content(call, "asyncio"),
        SegmentEvent.argument_delta(call, ("query",), " hubs"),
        SegmentEvent.content(call, ' hubs"'),
        SegmentEvent.argument_value(call, ("query",), "asyncio hubs"),
        SegmentEvent.content(call, "}"),
        SegmentEvent.end(call, {"tool_name": "search", "arguments": {"query": "asyncio hubs"}}),
        ToolInvocation(call, "search", {"query": "asyncio hubs"}),
        ResponseEnd(finish_reason="tool_calls", usage=TokenUsage(prompt_tokens=12, completion_tokens=9)),
    ]


async def from_list(items: Iterable[T], pulls: list[T] | None = None) -> AsyncIterator[T]:
    for item in items:
        if pulls is not None:
            pulls.append(item)
        yield item


async def read_all(subscription: Subscription[T]) -> list[T]:
    return [item async for item in subscription]


async def read_until_error(subscription: Subscription[T]) -> tuple[list[T], BaseException]:
    """The items before the subscription's error, and the error; fails if it ends cleanly."""
    received: list[T] = []
    try:
        async for item in subscription:
            received.append(item)
    except Exception as exc:
        return received, exc
    raise AssertionError(f"ended cleanly after {received!r}")


async def test_every_subscriber_gets_every_item_in_order() -> None:
    events = response_events()
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            first, second = hub.subscribe(), hub.subscribe(max_buffer=1)
            async with anyio.create_task_group() as readers:
                results: dict[str, list[PipelineEvent]] = {}

                async def collect(key: str, subscription: Subscription[PipelineEvent]) -> None:
                    results[key] = await read_all(subscription)

                readers.start_soon(collect, "first", first)
                readers.start_soon(collect, "second", second)
    assert results == {"first": events, "second": events}


async def test_block_subscriber_paces_the_source() -> None:
    pulls: list[int] = []
    taken: list[int] = []
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(range(12), pulls)) as hub:
            slow = hub.subscribe(max_buffer=3)
            never_read = hub.subscribe(policy="drop", max_buffer=1)  # lossy: must not pace the source
            for _ in range(12):
                await wait_all_tasks_blocked()
                # The pump pulls only when every block subscriber has room: it is max_buffer items ahead.
                assert len(pulls) == min(12, len(taken) + 3)
                taken.append(await anext(slow))
            assert await read_all(slow) == []
            assert never_read.statistics().dropped == 11
    assert taken == list(range(12))


async def test_receive_batch_takes_everything_waiting_at_once() -> None:
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(range(10))) as hub:
            subscription = hub.subscribe(max_buffer=4)
            batches = []
            while batch := await subscription.receive_batch():
                batches.append(batch)
                await wait_all_tasks_blocked()
    # The source never suspends, so the pump fills the buffer before the woken reader runs.
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


async def take_slowly(subscription: Subscription[T]) -> list[T]:
    """The slowest possible reader: one item each time every other task is blocked."""
    received: list[T] = []
    while True:
        await wait_all_tasks_blocked()
        try:
            received.append(await anext(subscription))
        except StopAsyncIteration:
            return received


async def test_coalesce_merges_waiting_deltas_of_a_segment_into_one() -> None:
    a = "seg_a"
    events = [
        SegmentEvent.start(a, SegmentType.TEXT),
        *(SegmentEvent.content(a, str(n)) for n in range(1, 5)),
        SegmentEvent.end(a),
    ]
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            ui = hub.subscribe(policy="coalesce", max_buffer=2)
            received = await take_slowly(ui)
            # START and "1" fill the buffer; "2", "3", "4" join "1"; END waits for room like block.
            assert received == [events[0], SegmentEvent.content(a, "1234"), events[-1]]
            assert ui.statistics().coalesced == 3


async def test_coalesce_keeps_text_and_every_other_event_in_order() -> None:
    events = response_events()
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            agent = hub.subscribe(max_buffer=len(events) + 1)  # room for everything: it never paces
            ui = hub.subscribe(policy="coalesce", max_buffer=2)
            ui_events = await take_slowly(ui)
            assert await read_all(agent) == events

    def is_delta(event: PipelineEvent) -> bool:
        return isinstance(event, SegmentEvent) and "delta" in event.payload

    def texts(received: Sequence[PipelineEvent]) -> dict[tuple[str, str, tuple[Any, ...]], str]:
        joined: dict[tuple[str, str, tuple[Any, ...]], str] = {}
        for event in received:
            if isinstance(event, SegmentEvent) and is_delta(event):
                key = (event.segment_id, event.event_type.value, tuple(event.payload.get("path", ())))
                joined[key] = joined.get(key, "") + event.payload["delta"]
        return joined

    assert sum(map(is_delta, ui_events)) < sum(map(is_delta, events))
    assert texts(ui_events) == texts(events)
    assert [e for e in ui_events if not is_delta(e)] == [e for e in events if not is_delta(e)]
    stats = ui.statistics()
    assert stats.delivered + stats.coalesced == len(events)
    assert stats.delivered == len(ui_events)


def canonical(items: Sequence[Any]) -> list[Any]:
    """Items with each run of same-segment deltas between other items reduced to its text per stream.

    Coalescing may merge within such a run (never across another item or segment): equal canonical forms
    mean no text was lost, reordered within a stream, or moved across anything else.
    """
    result: list[Any] = []
    run_segment: str | None = None
    run: dict[tuple[str, tuple[Any, ...]], str] = {}
    for item in items:
        if isinstance(item, SegmentEvent) and isinstance(item.payload.get("delta"), str):
            if item.segment_id != run_segment:
                if run:
                    result.append((run_segment, run))
                run_segment, run = item.segment_id, {}
            key = (item.event_type.value, tuple(item.payload.get("path", ())))
            run[key] = run.get(key, "") + item.payload["delta"]
            continue
        if run:
            result.append((run_segment, run))
        run_segment, run = None, {}
        result.append(item)
    if run:
        result.append((run_segment, run))
    return result


delta_events = st.builds(
    SegmentEvent.content, st.sampled_from(["a", "b"]), st.text(alphabet="xyz", min_size=1, max_size=3)
) | st.builds(
    SegmentEvent.argument_delta,
    st.sampled_from(["a", "b"]),
    st.sampled_from([("p",), ("q", 0)]),
    st.text(alphabet="xyz", min_size=1, max_size=3),
)
barrier_events = st.sampled_from(
    [
        SegmentEvent.start("a", SegmentType.TEXT),
        SegmentEvent.end("a"),
        SegmentEvent.argument_value("a", ("p",), 1),
        ResponseEnd(finish_reason="stop"),
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(delta_events | barrier_events, max_size=40),
    max_buffer=st.integers(min_value=1, max_value=4),
    reads=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=8),
)
def test_coalesce_is_lossless_whatever_the_reading_pace(
    events: list[SegmentEvent | ResponseEnd], max_buffer: int, reads: list[int]
) -> None:
    async def scenario() -> list[SegmentEvent | ResponseEnd]:
        received: list[SegmentEvent | ResponseEnd] = []
        with anyio.fail_after(GUARD):
            async with fan_out(from_list(events)) as hub:
                ui = hub.subscribe(policy="coalesce", max_buffer=max_buffer)
                step = 0
                while True:
                    await wait_all_tasks_blocked()
                    try:
                        for _ in range(reads[step % len(reads)]):
                            received.append(await anext(ui))
                    except StopAsyncIteration:
                        return received
                    step += 1

    received = anyio.run(scenario, backend="asyncio")
    assert canonical(received) == canonical(events)
    assert len(received) <= len(events)


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(delta_events | barrier_events, max_size=40),
    max_buffer=st.integers(min_value=1, max_value=4),
    paces=st.lists(
        st.tuples(st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=8,
    ),
)
def test_coalesce_or_disconnect_loses_no_text_before_it_disconnects_and_never_waits(
    events: list[SegmentEvent | ResponseEnd], max_buffer: int, paces: list[tuple[int, int]]
) -> None:
    async def scenario() -> tuple[list[Any], list[Any], SubscriberStatistics]:
        """The agent (block, max_buffer=1) and the UI read in turns at the paces given."""
        agent_received: list[Any] = []
        received: list[Any] = []
        with anyio.fail_after(GUARD):
            async with fan_out(from_list(events)) as hub:
                agent = hub.subscribe(max_buffer=1)
                ui = hub.subscribe(policy="coalesce_or_disconnect", max_buffer=max_buffer)
                step = 0
                while ui.statistics().state == "active" or ui.statistics().buffered:
                    await wait_all_tasks_blocked()
                    agent_reads, ui_reads = paces[step % len(paces)]
                    step += 1
                    # Each reads at least every other step, so that both always make progress.
                    for _ in range(max(agent_reads, step % 2)):
                        if agent.statistics().buffered:
                            agent_received.append(await anext(agent))
                    for _ in range(min(max(ui_reads, 1 - step % 2), ui.statistics().buffered)):
                        received.append(await anext(ui))
                with suppress(SubscriberError):
                    received.extend(await read_all(ui))
                agent_received.extend(await read_all(agent))
                return agent_received, received, ui.statistics()

    agent_received, received, stats = anyio.run(scenario, backend="asyncio")
    assert agent_received == events  # the UI never held the source up
    accepted = stats.delivered + stats.coalesced
    assert canonical(received) == canonical(events[:accepted])
    assert stats.state in {"completed", "disconnected"}
    if stats.state == "completed":
        assert accepted == len(events)


async def test_drop_keeps_the_latest_snapshots() -> None:
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(range(10))) as hub:
            agent = hub.subscribe(max_buffer=1)
            status = hub.subscribe(policy="drop", max_buffer=2)
            assert await read_all(agent) == list(range(10))
            assert await read_all(status) == [8, 9]
            assert status.statistics().dropped == 8


async def test_disconnect_cuts_off_only_the_slow_subscriber() -> None:
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(range(10))) as hub:
            agent = hub.subscribe(max_buffer=1)
            slow = hub.subscribe(policy="disconnect", max_buffer=2, name="slow")
            assert await read_all(agent) == list(range(10))
            received, error = await read_until_error(slow)
            assert received == [0, 1]  # what it held when cut off is still delivered
            assert isinstance(error, SubscriberError)
            assert str(error) == (
                "subscriber 'slow' fell 2 items behind (max_buffer) at item 3 of the source and was"
                " disconnected (policy 'disconnect')"
            )
            assert slow.statistics().state == "disconnected"
            assert await read_all(slow) == []  # the error is raised once


async def test_coalesce_or_disconnect_merges_deltas_and_disconnects_instead_of_waiting() -> None:
    text = "text_0"
    events: list[PipelineEvent] = [
        SegmentEvent.start(text, SegmentType.TEXT),
        *(SegmentEvent.content(text, piece) for piece in ["a", "b", "c"]),
        SegmentEvent.end(text),  # cannot merge: coalesce would wait here for room
        ResponseEnd(finish_reason="stop"),
    ]
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            agent = hub.subscribe(max_buffer=1)
            browser = hub.subscribe(policy="coalesce_or_disconnect", max_buffer=2, name="browser")
            assert await read_all(agent) == events  # never held up by the browser
            received, error = await read_until_error(browser)
            assert received == [events[0], SegmentEvent.content(text, "abc")]
            assert isinstance(error, SubscriberError)
            assert str(error) == (
                "subscriber 'browser' fell 2 items behind (max_buffer) at item 5 of the source and was"
                " disconnected (policy 'coalesce_or_disconnect')"
            )
            stats = browser.statistics()
            assert (stats.state, stats.coalesced, stats.delivered) == ("disconnected", 2, 2)


class GatedSource:
    """Yields ``first`` items, waits for ``release``, then yields the rest; records its pulls and closing."""

    def __init__(self, items: Sequence[int], first: int) -> None:
        self.items, self.first = items, first
        self.release = anyio.Event()
        self.pulls = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[int]:
        try:
            for position, item in enumerate(self.items):
                if position == self.first:
                    await self.release.wait()
                self.pulls += 1
                yield item
        finally:
            self.closed = True


async def test_late_subscriber_replays_from_the_start_and_live_one_joins_live() -> None:
    source = GatedSource(range(10), first=5)
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            early = hub.subscribe()
            assert [await anext(early) for _ in range(5)] == [0, 1, 2, 3, 4]
            await wait_all_tasks_blocked()
            late = hub.subscribe()
            live = hub.subscribe(replay=False)
            source.release.set()
            assert await read_all(early) == [5, 6, 7, 8, 9]
            assert await read_all(late) == list(range(10))
            assert await read_all(live) == [5, 6, 7, 8, 9]
            after_the_end = hub.subscribe()
            assert await after_the_end.receive_batch() == list(range(10))
            assert await after_the_end.receive_batch() == []


async def test_replay_is_refused_clearly_when_the_history_is_not_kept() -> None:
    source = GatedSource(range(5), first=1)
    with anyio.fail_after(GUARD):
        async with fan_out(source, replay=False) as hub:
            assert await anext(hub.subscribe()) == 0
            with pytest.raises(ReplayUnavailableError, match=r"keeps no history \(fan_out\(replay=False\)\)"):
                hub.subscribe()
            live = hub.subscribe(replay=False)
            source.release.set()
            assert await read_all(live) == [1, 2, 3, 4]


async def test_replay_beyond_max_replay_is_refused_but_earlier_joiners_keep_theirs() -> None:
    source = GatedSource(range(6), first=2)
    with anyio.fail_after(GUARD):
        async with fan_out(source, replay=3) as hub:
            agent = hub.subscribe(max_buffer=1)
            assert [await anext(agent) for _ in range(2)] == [0, 1]
            await wait_all_tasks_blocked()
            joined_in_time = hub.subscribe()
            source.release.set()
            assert await read_all(agent) == [2, 3, 4, 5]
            assert hub.statistics()[1:4] == (6, 0, False)  # items, history kept, history complete
            with pytest.raises(
                ReplayUnavailableError, match=r"at most 3 items \(max_replay\) and 6 have passed"
            ):
                hub.subscribe()
            assert await read_all(joined_in_time) == list(range(6))


async def test_replay_n_keeps_exactly_n_items_and_refuses_at_the_n_plus_first() -> None:
    """``fan_out(replay=3)``: a subscriber joining after 3 items replays them all; after the 4th, it is
    refused (a cap of 4, or one that drops the history at the 3rd, fails here)."""
    send, receive = anyio.create_memory_object_stream[int]()
    with send, anyio.fail_after(GUARD):
        async with fan_out(receive, replay=3) as hub:
            for number in range(3):
                await send.send(number)
            await wait_all_tasks_blocked()
            assert hub.statistics()[1:4] == (3, 3, True)  # items, history kept, history complete
            at_the_cap = hub.subscribe()
            await send.send(3)
            await wait_all_tasks_blocked()
            assert hub.statistics()[1:4] == (4, 0, False)
            with pytest.raises(
                ReplayUnavailableError, match=r"at most 3 items \(max_replay\) and 4 have passed"
            ):
                hub.subscribe()
            send.close()
            assert await read_all(at_the_cap) == [0, 1, 2, 3]


async def test_source_error_ends_every_subscriber_and_leaves_the_hub_unwrapped() -> None:
    boom = ProviderError("overloaded", kind="overloaded_error")

    async def failing() -> AsyncIterator[int]:
        yield 1
        yield 2
        raise boom

    async def run_hub() -> None:
        async with fan_out(failing()) as hub:
            subscribers = [hub.subscribe(), hub.subscribe(policy="coalesce", max_buffer=2)]
            for subscription in subscribers:
                assert await read_until_error(subscription) == ([1, 2], boom)
            late = hub.subscribe()
            assert await late.receive_batch() == [1, 2]
            with pytest.raises(ProviderError):
                await late.receive_batch()
            assert hub.statistics().source_state == "failed"

    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as raised:
        await run_hub()
    assert raised.value is boom


async def test_source_error_is_raised_at_exit_when_nobody_read_it() -> None:
    boom = ProviderError("stream broke")

    async def failing() -> AsyncIterator[int]:
        yield 1
        raise boom

    async def run_hub() -> None:
        async with fan_out(failing()) as hub:
            await hub.wait_finished()

    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as raised:
        await run_hub()
    assert raised.value is boom
    assert not isinstance(raised.value, BaseExceptionGroup)


async def test_an_error_of_the_block_propagates_alone_and_closes_the_source() -> None:
    source = GatedSource(range(5), first=1)

    async def run_hub() -> None:
        async with fan_out(source) as hub:
            await anext(hub.subscribe())
            raise KeyError("agent bug")

    with anyio.fail_after(GUARD), pytest.raises(KeyError):
        await run_hub()
    assert source.closed


async def test_cancellation_closes_the_source_and_leaves_no_task() -> None:
    source = GatedSource(range(5), first=1)
    tasks_before = asyncio.all_tasks()
    outcome: list[object] = []

    async def reader(subscription: Subscription[int]) -> None:
        try:
            async for item in subscription:
                outcome.append(item)
        except HubClosedError as exc:
            outcome.append(exc)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as readers:
            with anyio.CancelScope() as scope:
                async with fan_out(source) as hub:
                    readers.start_soon(reader, hub.subscribe())
                    await wait_all_tasks_blocked()
                    assert outcome == [0]
                    scope.cancel()
                    await anyio.sleep_forever()
    assert source.closed
    assert outcome[:1] == [0]
    assert isinstance(outcome[1], HubClosedError)
    assert "closed after 1 items" in str(outcome[1])
    assert asyncio.all_tasks() == tasks_before


async def test_leaving_the_block_early_closes_the_source_at_once() -> None:
    source = GatedSource(range(5), first=2)
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            subscription = hub.subscribe()
            assert await anext(subscription) == 0
        assert source.closed
        assert hub.source_state == "closed"
        assert await subscription.receive_batch() == [1]  # what it held
        with pytest.raises(HubClosedError):
            await subscription.receive_batch()


async def test_a_subscriber_that_walks_away_never_stalls_the_others() -> None:
    async def walk_away_after_one(subscription: Subscription[int]) -> None:
        async for _ in subscription:
            break

    async with fan_out(from_list(range(50))) as hub:
        agent = hub.subscribe(max_buffer=1)
        with anyio.fail_after(GUARD):
            async with hub.subscribe(max_buffer=1, name="closes") as closes:
                await anext(closes)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(walk_away_after_one, hub.subscribe(max_buffer=1, name="forgotten"))
        gc.collect()  # CPython frees it at once; this covers other interpreters (outside the guard)
        with anyio.fail_after(GUARD):
            assert await read_all(agent) == list(range(50))
        states = {stats.name: stats.state for stats in hub.statistics().subscribers}
        assert states == {
            "closes": "unsubscribed",
            "forgotten": "unsubscribed",
            "subscriber-1": "completed",
        }


async def test_statistics_per_subscriber_and_totals() -> None:
    a = "seg_a"
    events: list[SegmentEvent] = [
        SegmentEvent.start(a, SegmentType.TEXT),
        *(SegmentEvent.content(a, str(n)) for n in range(6)),
        SegmentEvent.end(a),
    ]
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            agent = hub.subscribe(max_buffer=8, name="agent")
            ui = hub.subscribe(policy="coalesce", max_buffer=2, name="ui")
            # Never read, but referenced: a subscription nobody holds unsubscribes itself.
            status = hub.subscribe(policy="drop", max_buffer=3, name="status")
            slow = hub.subscribe(policy="disconnect", max_buffer=4, name="slow")
            assert [await anext(agent) for _ in range(7)] == events[:7]
            await wait_all_tasks_blocked()
            # The ui holds START and "012345"; END cannot merge, so the pump waits for the ui to read.
            during = hub.statistics()
            overflow = during.subscribers[3].error
            assert isinstance(overflow, SubscriberError)
            assert during == HubStatistics(
                source_state="running",
                items=8,
                history=8,
                history_complete=True,
                subscribers=(
                    SubscriberStatistics("agent", "block", 8, 1, 0, 7, 0, 0, "active", None),
                    SubscriberStatistics("ui", "coalesce", 2, 2, 0, 0, 5, 0, "active", None),
                    SubscriberStatistics("status", "drop", 3, 3, 0, 0, 0, 5, "active", None),
                    SubscriberStatistics("slow", "disconnect", 4, 4, 0, 0, 0, 0, "disconnected", overflow),
                ),
                active=3,
                delivered=7,
                coalesced=5,
                dropped=5,
                disconnected=1,
                failed=0,
            )
            assert await read_all(ui) == [events[0], SegmentEvent.content(a, "012345"), events[-1]]
            assert await read_all(agent) == events[7:]
            after = hub.statistics()
            del status, slow
    assert after == HubStatistics(
        source_state="completed",
        items=8,
        history=8,
        history_complete=True,
        subscribers=(
            SubscriberStatistics("agent", "block", 8, 0, 0, 8, 0, 0, "completed", None),
            SubscriberStatistics("ui", "coalesce", 2, 0, 0, 3, 5, 0, "completed", None),
            SubscriberStatistics("status", "drop", 3, 3, 0, 0, 0, 5, "completed", None),
            SubscriberStatistics("slow", "disconnect", 4, 4, 0, 0, 0, 0, "disconnected", overflow),
        ),
        active=0,
        delivered=11,
        coalesced=5,
        dropped=5,
        disconnected=1,
        failed=0,
    )


async def test_coalesce_merges_argument_deltas_per_path_but_not_across_a_value() -> None:
    call = "call_1"
    events = [
        SegmentEvent.start(call, SegmentType.TOOL_CALL, {"tool_name": "write_note"}),
        SegmentEvent.argument_delta(call, ("title",), "Sh"),
        SegmentEvent.argument_delta(call, ("body",), "Buy "),
        SegmentEvent.argument_delta(call, ("title",), "opping"),
        SegmentEvent.argument_delta(call, ("body",), "milk"),
        SegmentEvent.argument_value(call, ("title",), "Shopping"),
        SegmentEvent.argument_delta(call, ("body",), " and eggs"),
        SegmentEvent.argument_delta(call, ("body",), "."),
        SegmentEvent.end(call),
    ]
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            ui = hub.subscribe(policy="coalesce", max_buffer=3)
            received = await take_slowly(ui)
    assert received == [
        events[0],
        SegmentEvent.argument_delta(call, ("title",), "Shopping"),
        SegmentEvent.argument_delta(call, ("body",), "Buy milk"),
        events[5],
        SegmentEvent.argument_delta(call, ("body",), " and eggs."),
        events[8],
    ]


async def test_broadcast_runs_every_consumer_to_the_end_of_the_source() -> None:
    pulls: list[int] = []
    agent_items: list[int] = []
    observed: list[object] = []

    async def agent(subscription: Subscription[int]) -> None:
        agent_items.extend(await read_all(subscription))

    async def glance(subscription: Subscription[int]) -> None:
        await anext(subscription)  # returns early: it must not hold the others up

    class Recorder(ObserverBase[int]):
        def on_next(self, item: int) -> None:
            observed.append(item)

        def on_error(self, error: Exception) -> None:
            observed.append(error)

        def on_completed(self) -> None:
            observed.append("completed")

    with anyio.fail_after(GUARD):
        await broadcast(
            from_list(range(30), pulls),
            agent,
            glance,
            max_buffer=1,
            on_start=lambda hub: observe(hub, Recorder()),
        )
    assert agent_items == list(range(30))
    assert observed == [*range(30), "completed"]
    assert pulls == list(range(30))


async def test_broadcast_raises_a_consumers_error_alone_and_closes_the_source() -> None:
    source = GatedSource(range(5), first=2)

    async def faulty(subscription: Subscription[int]) -> None:
        await anext(subscription)
        raise LookupError("consumer bug")

    async def patient(subscription: Subscription[int]) -> None:
        await read_all(subscription)

    with anyio.fail_after(GUARD), pytest.raises(LookupError, match="consumer bug"):
        await broadcast(source, faulty, patient)
    assert source.closed


async def test_bad_options_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ConfigurationError, match="must be a bool or an item count >= 0, got -1"):
        async with fan_out(from_list([1]), replay=-1):
            pass
    async with fan_out(from_list([1])) as hub:
        with pytest.raises(ConfigurationError, match="unknown subscriber policy 'latest'"):
            hub.subscribe(policy="latest")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="max_buffer must be at least 1, got 0"):
            hub.subscribe(max_buffer=0)


async def test_one_subscription_is_read_by_one_task_at_a_time() -> None:
    source = GatedSource(range(3), first=0)
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub, anyio.create_task_group() as readers:
            subscription = hub.subscribe()
            readers.start_soon(read_all, subscription)
            await wait_all_tasks_blocked()
            with pytest.raises(RuntimeError, match="already being read by another task"):
                await anext(subscription)
            source.release.set()


async def test_a_block_that_never_awaits_still_closes_a_source_that_never_suspends() -> None:
    pulls: list[int] = []
    async with fan_out(from_list(range(100), pulls)) as hub:
        subscription = hub.subscribe()
    assert hub.source_state == "closed"
    assert pulls == []
    with pytest.raises(HubClosedError):
        await subscription.receive_batch()


@settings(max_examples=40, deadline=None)
@given(
    total=st.integers(min_value=0, max_value=30),
    join_after=st.integers(min_value=0, max_value=30),
    max_buffer=st.integers(min_value=1, max_value=4),
    policy=st.sampled_from(["block", "coalesce"]),
)
def test_a_late_subscriber_always_receives_the_whole_sequence(
    total: int, join_after: int, max_buffer: int, policy: Policy
) -> None:
    join_after = min(join_after, total)

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        source = GatedSource(range(total), first=join_after)
        with anyio.fail_after(GUARD):
            async with fan_out(source) as hub:
                agent = hub.subscribe(max_buffer=max_buffer)
                seen = [await anext(agent) for _ in range(join_after)]
                await wait_all_tasks_blocked()
                late = hub.subscribe(max_buffer=max_buffer, policy=policy)
                live = hub.subscribe(max_buffer=max_buffer, policy=policy, replay=False)
                source.release.set()
                async with anyio.create_task_group() as readers:
                    results: dict[str, list[int]] = {}

                    async def collect(key: str, subscription: Subscription[int]) -> None:
                        results[key] = await read_all(subscription)

                    readers.start_soon(collect, "late", late)
                    readers.start_soon(collect, "live", live)
                    seen += await read_all(agent)
        return seen, results["late"], results["live"]

    seen, late, live = anyio.run(scenario, backend="asyncio")
    assert seen == late == list(range(total))
    assert live == list(range(join_after, total))


class Item:
    """An item that can be referenced weakly: tells whether a hub's history was freed."""

    __slots__ = ("__weakref__", "number")

    def __init__(self, number: int) -> None:
        self.number = number


class Freed:
    """Weak references to a hub and to the items of its history, checked after a full collection."""

    def __init__(self, hub: Hub[Item], items: Sequence[Item]) -> None:
        self.refs: list[weakref.ref[Any]] = [weakref.ref(hub), *(weakref.ref(item) for item in items)]

    def alive(self) -> int:
        gc.collect()
        return sum(ref() is not None for ref in self.refs)


async def failed_response_hub() -> Freed:
    """A response whose source fails: read by a subscriber, replayed after the end, raised at exit."""

    async def failing() -> AsyncIterator[Item]:
        for item in [Item(number) for number in range(20)]:
            yield item
        raise ProviderError("overloaded")

    try:
        async with fan_out(failing()) as hub:
            reader = hub.subscribe(max_buffer=2)
            forgotten = hub.subscribe(max_buffer=50)
            received, error = await read_until_error(reader)
            assert isinstance(error, ProviderError)
            late_received, late_error = await read_until_error(hub.subscribe())
            assert late_received == received
            assert late_error is error
            freed = Freed(hub, received)
            del forgotten, received, late_received, error, late_error, reader
    except ProviderError:
        pass
    else:
        raise AssertionError("the source's error was not raised")
    return freed


async def overflowed_hub() -> Freed:
    """A ``disconnect`` subscriber overflows and reads its SubscriberError; the source completes."""
    items = [Item(number) for number in range(20)]
    async with fan_out(from_list(items)) as hub:
        slow = hub.subscribe(policy="disconnect", max_buffer=2)
        assert await read_all(hub.subscribe(max_buffer=1)) == items
        received, error = await read_until_error(slow)
        assert received == items[:2]
        assert isinstance(error, SubscriberError)
        del received, error, slow
        freed = Freed(hub, items)
    return freed


async def closed_early_hub() -> Freed:
    """The hub's block is left before the source ends; a subscriber reads its HubClosedError."""
    items = [Item(number) for number in range(20)]
    async with fan_out(from_list(items)) as hub:
        subscription = hub.subscribe(max_buffer=2)
        assert await anext(subscription) is items[0]
    received, error = await read_until_error(subscription)
    assert received == items[1 : 1 + len(received)]
    assert isinstance(error, HubClosedError)
    del received, error, subscription
    return Freed(hub, items)


async def clean_hub() -> Freed:
    items = [Item(number) for number in range(20)]
    async with fan_out(from_list(items)) as hub:
        assert await read_all(hub.subscribe(max_buffer=2)) == items
    return Freed(hub, items)


@pytest.mark.parametrize("run", [clean_hub, failed_response_hub, overflowed_hub, closed_early_hub])
async def test_a_hub_is_freed_after_a_failure_like_after_a_clean_end(run: Any) -> None:
    # Each subscription's finalizer used to hold its feed strongly, and the feed's error held the
    # subscription through its traceback: the hub and its whole history were never freed.
    with anyio.fail_after(GUARD):
        freed: Freed = await run()
    assert freed.alive() == 0


async def test_a_shared_error_does_not_grow_a_traceback_per_subscriber() -> None:
    boom = ProviderError("overloaded")

    async def failing() -> AsyncIterator[int]:
        yield 1
        raise boom

    def depth(error: BaseException) -> int:
        return len(traceback.extract_tb(error.__traceback__))

    depths: list[int] = []

    async def run_hub() -> None:
        async with fan_out(failing()) as hub:
            await hub.wait_finished()
            for _ in range(5):
                assert (await read_until_error(hub.subscribe()))[1] is boom
                depths.append(depth(boom))

    with anyio.fail_after(GUARD), pytest.raises(ProviderError):
        await run_hub()
    assert len(depths) == 5
    assert len(set(depths)) == 1


class _Producer:
    """A stand-in for the hub's pump, recording what a buffer tells it."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def _wake_pump(self) -> None:
        self.told.append("room")

    def _buffer_ended(self, buffer: SubscriberBuffer[Any]) -> None:
        self.told.append(f"ended {buffer.state}")

    def _retire(self, buffer: SubscriberBuffer[Any]) -> None:
        self.told.append("retired")


def test_the_buffer_is_a_synchronous_state_machine_that_says_would_block() -> None:
    producer = _Producer()
    buffer: SubscriberBuffer[int] = SubscriberBuffer(producer, "ui", "block", 2, history=[7])
    with pytest.raises(anyio.WouldBlock):
        SubscriberBuffer(producer, "late", "block", 1, history=None).take_nowait()
    assert buffer.offer_nowait(1) is False
    assert buffer.offer_nowait(2) is True  # now full: the producer paces itself
    with pytest.raises(anyio.WouldBlock):
        buffer.offer_nowait(3)
    assert buffer.waits
    assert buffer.take_nowait() == 7  # the history first
    assert buffer.take_nowait() == 1
    assert producer.told == ["room"]  # taken from a full buffer
    assert buffer.take_all_nowait() == [2]
    with pytest.raises(anyio.WouldBlock):
        buffer.take_all_nowait()
    buffer.end("completed", None)
    with pytest.raises(anyio.EndOfStream):
        buffer.take_nowait()
    assert producer.told == ["room", "ended completed", "retired"]


def test_the_buffer_asks_a_disconnecting_producer_to_overflow_and_coalesces_first() -> None:
    producer = _Producer()
    buffer: SubscriberBuffer[PipelineEvent] = SubscriberBuffer(
        producer, "web", "coalesce_or_disconnect", 1, history=None
    )
    first, second = (SegmentEvent.content("s1", text) for text in ("a", "b"))
    assert buffer.offer_nowait(first) is False
    assert buffer.offer_nowait(second) is False  # merged into the waiting one
    end = SegmentEvent.end("s1")
    with pytest.raises(anyio.WouldBlock):
        buffer.offer_nowait(end)
    assert not buffer.waits
    buffer.overflow(3)
    assert buffer.take_nowait() == SegmentEvent.content("s1", "ab")
    with pytest.raises(SubscriberError, match=r"subscriber 'web' fell 1 items behind .* at item 3 "):
        buffer.take_nowait()
    with pytest.raises(anyio.EndOfStream):
        buffer.take_nowait()


def test_a_content_delta_never_merges_into_an_argument_delta_of_its_segment() -> None:
    """The fixed example beside the coalesce property tests: a full buffer merges a delta only into a
    waiting one of the same segment, kind and argument path; a CONTENT delta waits behind an ARGUMENT
    delta of its segment instead of joining its text."""
    producer = _Producer()
    buffer: SubscriberBuffer[PipelineEvent] = SubscriberBuffer(producer, "ui", "coalesce", 1, history=None)
    argument, more = (SegmentEvent.argument_delta("s1", ("city",), text) for text in ("Pa", "ris"))
    content = SegmentEvent.content("s1", '"}')
    assert buffer.offer_nowait(argument) is False
    with pytest.raises(anyio.WouldBlock):
        buffer.offer_nowait(content)
    assert buffer.offer_nowait(more) is False  # same segment, kind and path: merged
    assert buffer.coalesced == 1
    assert buffer.take_nowait() == SegmentEvent.argument_delta("s1", ("city",), "Paris")
    assert buffer.offer_nowait(content) is False
    assert buffer.take_nowait() == content
    assert buffer.coalesced == 1


def test_the_hub_never_imports_the_reactivex_bridge() -> None:
    for module in (hub_module, buffer_module):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        imported = {
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert not {
            name for name in imported if name and ("rx" in name.split(".")[-1] or "reactivex" in name)
        }
    assert not hasattr(Hub, "observe")  # one way to feed an observer: pipeline.fanout.rx.observe


async def test_start_soon_runs_a_bridge_in_the_hub_and_refuses_once_it_is_closed() -> None:
    ran: list[str] = []

    async def bridge() -> None:
        ran.append("bridge")

    async with fan_out(from_list([1])) as hub:
        hub.start_soon(bridge, name="bridge")
        await hub.wait_finished()
    assert ran == ["bridge"]
    with pytest.raises(HubClosedError, match="block has ended; it cannot start 'late bridge'"):
        hub.start_soon(bridge, name="late bridge")


async def test_cut_off_and_disconnect_end_one_subscriber_with_the_reason() -> None:
    failure, lag = ValueError("observer broke"), SubscriberError("send timed out")
    async with fan_out(from_list([1, 2])) as hub:
        broken, slow, agent = (hub.subscribe(name=name) for name in ("broken", "slow", "agent"))
        broken.cut_off(failure)
        slow.disconnect(lag)
        assert [item async for item in agent] == [1, 2]
    states = {stats.name: (stats.state, stats.error) for stats in hub.statistics().subscribers}
    assert states == {
        "broken": ("failed", failure),
        "slow": ("disconnected", lag),
        "agent": ("completed", None),
    }
    assert [item async for item in broken] == []
