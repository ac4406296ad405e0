"""The reactivex bridge: observers fed from a hub, a hub as an Observable, and a cold adapter.

reactivex has no backpressure and runs user callbacks synchronously, so observers sit behind the hub: each
one gets its own bounded buffer and policy (`pipeline.fanout.hub`) and a pump task in the hub's task
group
that calls ``on_next`` for every item it takes.

Isolation: an observer whose ``on_next`` raises is cut off alone. Its pump stops, its ``on_error`` is
called once with that exception (so it knows it will hear nothing more), the failure is logged on the
``streamfold`` logger and shown in `Hub.statistics` (state ``failed``), and the pipeline and the other
subscribers go on. An ``on_error`` or ``on_completed`` that raises is logged, never propagated: an exception
escaping into the event loop would end the stream without a word.

Emissions happen in the pump task, on the running asyncio loop. Time-based operators downstream
(``debounce``, ``buffer_with_time``, ...) need that loop's scheduler, passed when subscribing:
``observable.pipe(...).subscribe(observer, scheduler=AsyncIOScheduler(asyncio.get_running_loop()))``.
Disposing must happen on the loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Callable
from typing import Generic, TypeVar

import anyio
from aiostream import streamcontext
from reactivex import Observable, create
from reactivex.abc import DisposableBase, ObserverBase, SchedulerBase
from reactivex.disposable import Disposable

from pipeline.fanout.hub import DEFAULT_MAX_BUFFER, Hub, HubClosedError, Policy, Subscription

__all__ = ["as_observable", "observe", "to_observable"]

_logger = logging.getLogger("streamfold")

T = TypeVar("T")


def observe(
    hub: Hub[T],
    observer: ObserverBase[T],
    *,
    policy: Policy = "block",
    max_buffer: int = DEFAULT_MAX_BUFFER,
    replay: bool = True,
    name: str | None = None,
) -> DisposableBase:
    """Feed ``observer`` every item of ``hub`` through its own bounded buffer and pump task.

    The observer gets ``on_next`` per item, then ``on_completed`` or ``on_error`` with the source's exception,
    its overflow (``disconnect``) or `HubClosedError`.

    Args:
        hub: the hub to read.
        observer: the reactivex observer.
        policy: the subscription's overflow policy (`Hub.subscribe`).
        max_buffer: the subscription's buffer, in items.
        replay: first the items since the start of the source (`Hub.subscribe`).
        name: how the hub's statistics name the subscriber.

    Returns:
        A disposable: ``dispose()`` unsubscribes at once, also from inside the observer's own
        ``on_next`` (as ``take(n)`` does); a disposed observer hears nothing more.

    Raises:
        HubClosedError: the hub's ``async with`` block has already ended.
    """
    subscription = hub.subscribe(policy=policy, max_buffer=max_buffer, replay=replay, name=name)
    feeding = _ObserverFeed(subscription, observer)
    try:
        hub.start_soon(feeding.run, name=f"streamfold observer {subscription.name}")
    except HubClosedError:
        subscription.close()
        raise
    return Disposable(feeding.dispose)


class _ObserverFeed(Generic[T]):
    """One observer's pump: takes batches from its subscription and calls the observer, guarded."""

    __slots__ = ("disposed", "observer", "subscription")

    def __init__(self, subscription: Subscription[T], observer: ObserverBase[T]) -> None:
        self.subscription = subscription
        self.observer = observer
        self.disposed = False

    def dispose(self) -> None:
        self.disposed = True
        self.subscription.close()  # wakes the pump, which then sees the end and returns quietly

    async def run(self) -> None:
        name = self.subscription.name
        try:
            while True:
                try:
                    batch = await self.subscription.receive_batch()
                except Exception as exc:
                    if not self.disposed:
                        _notify(self.observer.on_error, name, exc)
                    return
                if not self._deliver(batch):
                    return
        except anyio.get_cancelled_exc_class():
            # The hub is being torn down before the source ended (its block raised or was cancelled).
            if not self.disposed:
                self.subscription.close()
                _notify(
                    self.observer.on_error, name, HubClosedError("the hub was closed before its source ended")
                )
            raise

    def _deliver(self, batch: list[T]) -> bool:
        """Pass a batch to the observer; False when the feed is over: the source ended (an empty batch),
        the observer was disposed, or it raised."""
        if not batch:
            if not self.disposed:
                _notify(self.observer.on_completed, self.subscription.name)
            return False
        for item in batch:
            if self.disposed:
                return False
            try:
                self.observer.on_next(item)
            except Exception as exc:
                self._cut_off(exc)
                return False
        return True

    def _cut_off(self, error: Exception) -> None:
        name = self.subscription.name
        self.subscription.cut_off(error)
        _logger.error(
            "observer %r raised in on_next and was cut off from the hub; the others go on",
            name,
            exc_info=error,
        )
        _notify(self.observer.on_error, name, error)


def _notify(callback: Callable[..., None], name: str, *args: Exception) -> None:
    """Call an observer's on_error / on_completed; log what it raises instead of letting it escape."""
    try:
        callback(*args)
    except Exception as exc:
        _logger.error(
            "observer %r raised in %s; ignored",
            name,
            getattr(callback, "__name__", "a callback"),
            exc_info=exc,
        )


def as_observable(
    hub: Hub[T],
    *,
    policy: Policy = "block",
    max_buffer: int = DEFAULT_MAX_BUFFER,
    replay: bool = True,
    name: str | None = None,
) -> Observable[T]:
    """The hub as a reactivex Observable: each subscription is an `observe` on the hub.

    Subscribing starts a pump task in the hub's task group, so it must happen on the hub's loop while
    the hub is open (otherwise the observer gets ``on_error(HubClosedError)``); disposing unsubscribes.
    Items are emitted from that task, on the running asyncio loop.

    Args:
        hub: the hub to read.
        policy: each subscription's overflow policy (`Hub.subscribe`).
        max_buffer: each subscription's buffer, in items.
        replay: first the items since the start of the source (`Hub.subscribe`).
        name: how the hub's statistics name each subscriber.
    """

    def subscribe(observer: ObserverBase[T], scheduler: SchedulerBase | None = None) -> DisposableBase:
        try:
            return observe(hub, observer, policy=policy, max_buffer=max_buffer, replay=replay, name=name)
        except HubClosedError as exc:
            _notify(observer.on_error, name or "as_observable", exc)
            return Disposable()

    return create(subscribe)


_running_adapters: set[asyncio.Task[None]] = set()
"""Strong references to the cold adapters' tasks: the event loop keeps only weak ones."""


def to_observable(source: AsyncIterable[T]) -> Observable[T]:
    """A cold Observable over an async iterable, for ad-hoc use and tests.

    Each subscription iterates ``source`` anew in a task of its own on the running loop (so ``source``
    must be re-iterable, like an aiostream stream, to be subscribed more than once). Disposing cancels that
    task and closes the source. Unlike `observe`, nothing bounds or structures these tasks: in a
    program, put the source behind `pipeline.fanout.hub.fan_out` instead.

    Raises:
        RuntimeError: when subscribed outside a running event loop.
    """

    def subscribe(observer: ObserverBase[T], scheduler: SchedulerBase | None = None) -> DisposableBase:
        feeding = _SourceFeed(source, observer)
        task = asyncio.get_running_loop().create_task(feeding.run(), name="streamfold to_observable")
        feeding.task = task
        _running_adapters.add(task)
        task.add_done_callback(_running_adapters.discard)
        return Disposable(feeding.dispose)

    return create(subscribe)


class _SourceFeed(Generic[T]):
    __slots__ = ("disposed", "observer", "source", "task")

    def __init__(self, source: AsyncIterable[T], observer: ObserverBase[T]) -> None:
        self.source = source
        self.observer = observer
        self.disposed = False
        self.task: asyncio.Task[None] | None = None

    def dispose(self) -> None:
        self.disposed = True
        # From inside on_next the loop just stops; cancelling our own task would also cancel aclose().
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()

    async def run(self) -> None:
        name = "to_observable"
        try:
            async with streamcontext(self.source) as items:
                async for item in items:
                    try:
                        self.observer.on_next(item)
                    except Exception as exc:
                        _logger.error("observer raised in on_next and was cut off", exc_info=exc)
                        self.disposed = True
                        _notify(self.observer.on_error, name, exc)
                    if self.disposed:
                        return
        except Exception as exc:
            if not self.disposed:
                _notify(self.observer.on_error, name, exc)
            return
        if not self.disposed:
            _notify(self.observer.on_completed, name)
