"""The reactivex bridge: observers behind the hub, the hub as an Observable, the cold adapter."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any, TypeVar

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from reactivex import operators as ops
from reactivex.abc import ObserverBase

from pipeline.errors import ProviderError
from pipeline.fanout.hub import HubClosedError, Subscription, fan_out
from pipeline.fanout.rx import as_observable, observe, to_observable
from pipeline.models import PipelineEvent, ResponseEnd, SegmentEvent, SegmentType, ToolInvocation
from tests.guards import GUARD

pytestmark = pytest.mark.anyio

T = TypeVar("T")


class Recorder(ObserverBase[T]):
    """Records every notification: items as they are, then ``("error", exc)`` or ``"completed"``."""

    def __init__(self, *, fail_on: int | None = None, fail_in_on_error: bool = False) -> None:
        self.notifications: list[object] = []
        self.fail_on = fail_on
        self.fail_in_on_error = fail_in_on_error

    def on_next(self, value: T) -> None:
        if value == self.fail_on:
            raise ValueError(f"observer cannot render {value!r}")
        self.notifications.append(value)

    def on_error(self, error: Exception) -> None:
        self.notifications.append(("error", error))
        if self.fail_in_on_error:
            raise RuntimeError("on_error is broken too")

    def on_completed(self) -> None:
        self.notifications.append("completed")


def response_events() -> list[PipelineEvent]:
    text = "text_0"
    return [
        SegmentEvent.start(text, SegmentType.TEXT),
        SegmentEvent.content(text, "Hello"),
        SegmentEvent.content(text, ", world"),
        SegmentEvent.end(text),
        ToolInvocation("call_1", "lookup", {"q": "x"}),
        ResponseEnd(finish_reason="stop"),
    ]


async def from_list(items: Iterable[T]) -> AsyncIterator[T]:
    for item in items:
        yield item


class GatedSource:
    """Yields ``first`` items, then waits for ``release``; records whether it was closed."""

    def __init__(self, items: Iterable[int], first: int) -> None:
        self.items, self.first = list(items), first
        self.release = anyio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[int]:
        try:
            for position, item in enumerate(self.items):
                if position == self.first:
                    await self.release.wait()
                yield item
        finally:
            self.closed = True


async def read_all(subscription: Subscription[T]) -> list[T]:
    return [item async for item in subscription]


async def test_an_observer_gets_every_item_then_completed() -> None:
    events = response_events()
    recorder: Recorder[PipelineEvent] = Recorder()
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(events)) as hub:
            observe(hub, recorder, policy="coalesce", max_buffer=64)
            await hub.wait_finished()
    assert recorder.notifications == [*events, "completed"]


async def test_an_observer_that_raises_is_cut_off_alone(caplog: pytest.LogCaptureFixture) -> None:
    broken: Recorder[int] = Recorder(fail_on=3)
    healthy: Recorder[int] = Recorder()
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(range(10))) as hub:
            observe(hub, broken, max_buffer=1, name="broken chart")
            observe(hub, healthy, max_buffer=1)
            agent = hub.subscribe(max_buffer=1)
            assert await read_all(agent) == list(range(10))
        stats = {subscriber.name: subscriber for subscriber in hub.statistics().subscribers}

    assert broken.notifications[:3] == [0, 1, 2]
    assert len(broken.notifications) == 4
    error = broken.notifications[3]
    assert isinstance(error, tuple)
    assert error[0] == "error"
    assert isinstance(error[1], ValueError)
    assert str(error[1]) == "observer cannot render 3"
    assert healthy.notifications == [*range(10), "completed"]
    assert stats["broken chart"].state == "failed"
    assert stats["broken chart"].error is error[1]
    assert hub.statistics().failed == 1
    [record] = [r for r in caplog.records if r.name == "streamfold"]
    assert record.levelno == logging.ERROR
    assert "'broken chart' raised in on_next and was cut off" in record.getMessage()
    assert record.exc_info is not None
    assert record.exc_info[1] is error[1]


async def test_an_on_error_that_raises_is_logged_and_contained(caplog: pytest.LogCaptureFixture) -> None:
    doubly_broken: Recorder[int] = Recorder(fail_on=1, fail_in_on_error=True)
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(range(4))) as hub:
            observe(hub, doubly_broken, name="doubly broken")
            agent = hub.subscribe()
            assert await read_all(agent) == [0, 1, 2, 3]
    assert doubly_broken.notifications[0] == 0
    assert len(doubly_broken.notifications) == 2  # 0, then on_error once
    messages = [r.getMessage() for r in caplog.records if r.name == "streamfold"]
    assert messages == [
        "observer 'doubly broken' raised in on_next and was cut off from the hub; the others go on",
        "observer 'doubly broken' raised in on_error; ignored",
    ]


async def test_observers_get_the_source_error() -> None:
    boom = ProviderError("rate limited", status=429)

    async def failing() -> AsyncIterator[int]:
        yield 7
        raise boom

    recorder: Recorder[int] = Recorder()

    async def run_hub() -> None:
        async with fan_out(failing()) as hub:
            observe(hub, recorder)
            await hub.wait_finished()

    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as raised:
        await run_hub()
    assert raised.value is boom
    assert recorder.notifications == [7, ("error", boom)]


async def test_observers_hear_when_the_hub_closes_before_the_source_ends() -> None:
    source = GatedSource(range(5), first=2)
    recorder: Recorder[int] = Recorder()
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            observe(hub, recorder)
            await wait_all_tasks_blocked()
    assert source.closed
    assert recorder.notifications[:2] == [0, 1]
    assert len(recorder.notifications) == 3
    assert isinstance(recorder.notifications[2], tuple)
    assert recorder.notifications[2][0] == "error"
    assert isinstance(recorder.notifications[2][1], HubClosedError)


async def test_observers_hear_when_the_hub_is_cancelled() -> None:
    source = GatedSource(range(5), first=1)
    recorder: Recorder[int] = Recorder()
    tasks_before = asyncio.all_tasks()
    with anyio.fail_after(GUARD), anyio.CancelScope() as scope:
        async with fan_out(source) as hub:
            observe(hub, recorder)
            await wait_all_tasks_blocked()
            scope.cancel()
            await anyio.sleep_forever()
    assert source.closed
    assert recorder.notifications[0] == 0
    assert isinstance(recorder.notifications[1], tuple)
    assert isinstance(recorder.notifications[1][1], HubClosedError)
    assert asyncio.all_tasks() == tasks_before  # the pump and the observer's task are gone


async def test_disposing_an_observer_unsubscribes_it_at_once() -> None:
    source = GatedSource(range(6), first=2)
    recorder: Recorder[int] = Recorder()
    with anyio.fail_after(GUARD):
        async with fan_out(source) as hub:
            disposable = observe(hub, recorder, max_buffer=1, name="panel")
            agent = hub.subscribe(max_buffer=1)
            await wait_all_tasks_blocked()
            disposable.dispose()
            source.release.set()
            assert await read_all(agent) == list(range(6))
            [panel] = [s for s in hub.statistics().subscribers if s.name == "panel"]
    assert recorder.notifications == [0]  # the agent's full buffer held the source at item 1
    assert panel.state == "unsubscribed"


def times_ten(number: int) -> int:
    return number * 10


async def test_as_observable_composes_with_operators_and_disposal_unsubscribes() -> None:
    taken: list[object] = []
    with anyio.fail_after(GUARD):
        async with fan_out(from_list(range(20))) as hub:
            agent = hub.subscribe(max_buffer=1)
            as_observable(hub, max_buffer=1).pipe(ops.map(times_ten), ops.take(3)).subscribe(
                on_next=taken.append,
                on_completed=lambda: taken.append("completed"),
            )
            assert await read_all(agent) == list(range(20))
            states = [s.state for s in hub.statistics().subscribers]
    assert taken == [0, 10, 20, "completed"]
    assert states == ["completed", "unsubscribed"]


async def test_as_observable_after_the_hub_closed_reports_an_error() -> None:
    async with fan_out(from_list([1])) as hub:
        await hub.wait_finished()
    errors: list[Exception] = []
    as_observable(hub).subscribe(on_error=errors.append)
    assert len(errors) == 1
    assert isinstance(errors[0], HubClosedError)


async def test_to_observable_emits_every_item_then_completed() -> None:
    recorder: Recorder[int] = Recorder()
    with anyio.fail_after(GUARD):
        to_observable(from_list(range(3))).subscribe(recorder)
        await wait_all_tasks_blocked()
    assert recorder.notifications == [0, 1, 2, "completed"]


async def test_to_observable_reports_the_source_error() -> None:
    boom = ProviderError("bad gateway", status=502)

    async def failing() -> AsyncIterator[int]:
        yield 1
        raise boom

    recorder: Recorder[int] = Recorder()
    with anyio.fail_after(GUARD):
        to_observable(failing()).subscribe(recorder)
        await wait_all_tasks_blocked()
    assert recorder.notifications == [1, ("error", boom)]


async def test_to_observable_disposal_cancels_and_closes_the_source() -> None:
    source = GatedSource(range(5), first=1)
    recorder: Recorder[int] = Recorder()
    with anyio.fail_after(GUARD):
        disposable = to_observable(source).subscribe(recorder)
        await wait_all_tasks_blocked()
        disposable.dispose()
        await wait_all_tasks_blocked()
    assert source.closed
    assert recorder.notifications == [0]


async def test_to_observable_cuts_off_an_observer_that_raises(caplog: pytest.LogCaptureFixture) -> None:
    source = GatedSource(range(5), first=5)
    recorder: Recorder[int] = Recorder(fail_on=2)
    with anyio.fail_after(GUARD):
        to_observable(source).subscribe(recorder)
        await wait_all_tasks_blocked()
    assert source.closed
    assert recorder.notifications[:2] == [0, 1]
    assert isinstance(recorder.notifications[2], tuple)
    assert isinstance(recorder.notifications[2][1], ValueError)
    assert [r.levelno for r in caplog.records if r.name == "streamfold"] == [logging.ERROR]


async def test_to_observable_disposed_from_on_next_stops_quietly() -> None:
    source = GatedSource(range(5), first=5)
    taken: list[object] = []
    with anyio.fail_after(GUARD):
        to_observable(source).pipe(ops.take(2)).subscribe(
            on_next=taken.append, on_completed=lambda: taken.append("completed")
        )
        await wait_all_tasks_blocked()
    assert taken == [0, 1, "completed"]
    assert source.closed


class Item:
    __slots__ = ("__weakref__",)


class Tally(ObserverBase[Any]):
    """Records what it hears without keeping the items or the error (which would keep the hub alive)."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    def on_next(self, value: Any) -> None:
        self.heard.append("next")

    def on_error(self, error: Exception) -> None:
        self.heard.append(type(error).__name__)

    def on_completed(self) -> None:
        self.heard.append("completed")


async def test_an_observed_hub_is_freed_after_its_source_fails() -> None:
    observer = Tally()

    async def run_hub() -> tuple[weakref.ref[Any], weakref.ref[Item]]:
        item = Item()

        async def failing() -> AsyncIterator[Item]:
            yield item
            raise ProviderError("overloaded")

        try:
            async with fan_out(failing()) as hub:
                observe(hub, observer)
                await hub.wait_finished()
        except ProviderError:
            return weakref.ref(hub), weakref.ref(item)
        raise AssertionError("the source's error was not raised")

    with anyio.fail_after(GUARD):
        hub_ref, item_ref = await run_hub()
    gc.collect()
    assert observer.heard == ["next", "ProviderError"]
    assert (hub_ref(), item_ref()) == (None, None)
