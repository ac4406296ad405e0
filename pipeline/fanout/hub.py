"""The UI fan-out edge: one source pulled once, many subscribers, each with a bounded buffer and a policy.

::

    async with fan_out(events) as hub:                 # one pump task pulls `events`
        observe(hub, ui_observer, policy="coalesce")     # pipeline.fanout.rx: own buffer and pump task
        async for event in hub.subscribe():              # agent code: lossless, paces the source
            ...

A subscriber declares what happens when its buffer (``max_buffer`` items) is full:

``block``
    Lossless. The pump waits before pulling the next item until every block subscriber has room, so the
    slowest block subscriber paces the source (and, through the pull, the provider's HTTP read).
``coalesce``
    Lossless in text. Waiting ``SegmentEvent`` deltas (CONTENT of a segment, ARGUMENT deltas of a segment and
    path) absorb a new delta of the same kind into one event with the concatenated text; anything else
    waits for room like ``block``. For UIs that render text and can take it in bigger pieces.
``drop``
    Lossy: the oldest waiting item is discarded. Only for snapshot-like items (each one replaces the
    previous, e.g. a progress or cumulative-state item); a dropped delta is lost text.
``disconnect``
    The subscriber ends with `SubscriberError` after the items it already holds;
    the others go on.
``coalesce_or_disconnect``
    ``coalesce`` where a delta can merge, ``disconnect`` where ``coalesce`` would wait: lossless in text
    while the subscriber keeps up roughly, and it never holds up the source. For consumers that can
    start over (a browser reconnects and replays), and the web endpoints' default.

Replay: the hub keeps the response's items (up to ``MAX_REPLAY``, or the count given as
``fan_out(replay=...)``) so that a subscriber joining mid-stream first receives every item from the start.
A replaying subscriber reads the hub's own history list: replay copies nothing.

Nothing here starts a task per item: one pump task delivers each item into every subscriber's buffer
synchronously, and a consumer takes everything waiting in one go (`Subscription.receive_batch`)
or item by item without a hand-off while its buffer is not empty.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, NamedTuple, TypeAlias, TypeVar

import anyio
from aiostream import streamcontext
from anyio import EndOfStream, WouldBlock

from pipeline.errors import (
    ConfigurationError,
    HubClosedError,
    ReplayUnavailableError,
    SubscriberError,
)
from pipeline.fanout._buffer import (
    POLICIES,
    Policy,
    SubscriberBuffer,
    SubscriberState,
    SubscriberStatistics,
    raise_shared,
)

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = [
    "DEFAULT_MAX_BUFFER",
    "MAX_REPLAY",
    "RETAINED_SUBSCRIBERS",
    "Hub",
    "HubClosedError",
    "HubStatistics",
    "Policy",
    "ReplayUnavailableError",
    "SourceState",
    "SubscriberState",
    "SubscriberStatistics",
    "Subscription",
    "broadcast",
    "fan_out",
]

T = TypeVar("T")

SourceState: TypeAlias = Literal["running", "completed", "failed", "closed"]

DEFAULT_MAX_BUFFER: Final = 16
MAX_REPLAY: Final = 100_000
"""Default cap of the replay history, in items (``fan_out(replay=True)``). About 100 k segment events is a
very long response; the history holds references to the items, nothing is copied."""
RETAINED_SUBSCRIBERS: Final = 256
"""How many ended subscribers `Hub.statistics` still lists one by one (totals count them all)."""


class HubStatistics(NamedTuple):
    """The hub: its source, its history, each subscriber, and totals over every subscriber it ever had."""

    source_state: SourceState
    items: int
    """Items pulled from the source."""
    history: int
    """Items kept for replay."""
    history_complete: bool
    """Every item since the start is kept: a subscriber can still ask for replay."""
    subscribers: tuple[SubscriberStatistics, ...]
    """In order of subscription; of those done with (read to their end or unsubscribed), only the last
    ``RETAINED_SUBSCRIBERS`` are listed."""
    active: int
    delivered: int
    coalesced: int
    dropped: int
    disconnected: int
    failed: int


class Subscription(AsyncIterator[T]):
    """One subscriber's view of a hub: an async iterator over its bounded buffer.

    Iterate it (``async for``) or take batches (`receive_batch`). It ends as the source ends: cleanly,
    or by raising the source's exception, `SubscriberError` (overflow under
    ``disconnect`` or ``coalesce_or_disconnect``) or `HubClosedError`, after the items it already
    holds.

    Use it as an async context manager, or call `close`, to unsubscribe early. A subscription that is
    no longer referenced (``async for ... : break`` on ``hub.subscribe()``) unsubscribes itself, so a
    consumer that walks away never stalls the others, even under ``block``.

    A consumer takes waiting items without a task switch; only an empty buffer makes it wait. One task
    reads a subscription at a time.
    """

    __slots__ = ("__weakref__", "_buffer", "_reading")

    def __init__(self, buffer: SubscriberBuffer[T]) -> None:
        self._buffer = buffer
        self._reading = False
        # Only a weak reference to the buffer: the finalizer registry is a global root, and the buffer's
        # error (its traceback holds this subscription's frames) would otherwise keep both, and the hub's
        # whole history, alive for ever.
        weakref.finalize(self, _close_buffer, weakref.ref(buffer)).atexit = False

    @property
    def name(self) -> str:
        return self._buffer.name

    def __aiter__(self) -> Subscription[T]:
        return self

    async def __anext__(self) -> T:
        buffer = self._buffer
        while True:
            try:
                return buffer.take_nowait()
            except WouldBlock:
                await self._wait_readable()
            except EndOfStream:
                raise StopAsyncIteration from None

    async def receive_batch(self) -> list[T]:
        """Every item waiting (waits for at least one); ``[]`` when the subscription has ended cleanly."""
        buffer = self._buffer
        while True:
            try:
                return buffer.take_all_nowait()
            except WouldBlock:
                await self._wait_readable()
            except EndOfStream:
                return []

    async def _wait_readable(self) -> None:
        buffer = self._buffer
        if self._reading:
            raise RuntimeError(f"subscription {buffer.name!r} is already being read by another task")
        buffer.reader = readable = anyio.Event()
        self._reading = True
        try:
            await readable.wait()
        finally:
            self._reading = False
            if buffer.reader is readable:
                buffer.reader = None

    def close(self) -> None:
        """Unsubscribe now. Items still waiting are discarded; iteration then ends cleanly."""
        self._buffer.close()

    async def aclose(self) -> None:
        """Unsubscribe: the hub stops delivering to this subscription."""
        self._buffer.close()

    async def __aenter__(self) -> Subscription[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._buffer.close()

    def cut_off(self, error: BaseException) -> None:
        """End this subscriber alone because its consumer failed (an observer that raised).

        Its statistics show it ``failed`` with ``error``; the source and the other subscribers go on.
        """
        self._buffer.cut_off("failed", error)

    def disconnect(self, error: SubscriberError) -> None:
        """End this subscriber alone because its consumer cannot keep up (a web client's send timed out).

        Its statistics show it ``disconnected`` with ``error``; the source and the other subscribers go on.
        """
        self._buffer.cut_off("disconnected", error)

    def statistics(self) -> SubscriberStatistics:
        """This subscriber's counts and state now."""
        return self._buffer.statistics()


def _close_buffer(buffer_ref: weakref.ref[SubscriberBuffer[Any]]) -> None:
    """A forgotten subscription's finalizer: unsubscribe its buffer, if the hub still holds it."""
    buffer = buffer_ref()
    if buffer is not None:
        buffer.close()


class Hub(Generic[T]):
    """Multicasts one source to many subscribers. Made by `fan_out`, which owns its tasks.

    Subscribe with `subscribe` (an async iterator; `pipeline.fanout.rx.observe` feeds a reactivex
    observer from one); watch it with `statistics`. Use it from the event loop's thread only.

    Args:
        source: the items to multicast.
        history_limit: items kept for subscribers joining late; None or 0: none.
    """

    def __init__(self, source: AsyncIterable[T], *, history_limit: int | None) -> None:
        self._source = source
        self._history_limit = history_limit
        self._history: list[T] | None = [] if history_limit else None
        self._items_seen = 0
        self._live: tuple[
            SubscriberBuffer[T], ...
        ] = ()  # replaced, never mutated: safe to iterate while it changes
        self._buffers: dict[SubscriberBuffer[T], None] = {}  # for statistics, in order of subscription
        self._retired = 0
        self._forgotten_totals = [0, 0, 0, 0, 0]  # delivered, coalesced, dropped, disconnected, failed
        self._subscriptions_made = 0
        self._source_state: SourceState = "running"
        self._source_error: BaseException | None = None
        self._source_traceback: TracebackType | None = None
        self._room: anyio.Event | None = None
        self._finished = anyio.Event()
        self._pump_scope = anyio.CancelScope()
        self._closing = False
        self._block_full = False  # a block subscriber's buffer filled up since the last pacing check
        self._task_group: TaskGroup | None = None

    # -- public ------------------------------------------------------------------------------------------

    def subscribe(
        self,
        *,
        max_buffer: int = DEFAULT_MAX_BUFFER,
        policy: Policy = "block",
        replay: bool = True,
        name: str | None = None,
    ) -> Subscription[T]:
        """A new subscriber with a buffer of ``max_buffer`` items and the given overflow policy.

        Subscriptions made before the ``async with`` body first awaits see every item, whatever ``replay``.

        Args:
            max_buffer: items the subscriber's buffer holds.
            policy: what happens when the buffer is full (see the module docs).
            replay: first every item since the start of the source, then live ones; False: only items
                pulled after this call.
            name: how `statistics` names the subscriber.

        Raises:
            ConfigurationError: an unknown policy or a ``max_buffer`` below 1.
            ReplayUnavailableError: ``replay`` asked after the first item, but the hub keeps no history
                (``fan_out(replay=False)``) or has passed its ``max_replay`` cap.
        """
        if policy not in POLICIES:
            raise ConfigurationError(
                f"unknown subscriber policy {policy!r}; expected one of {sorted(POLICIES)}"
            )
        if max_buffer < 1:
            raise ConfigurationError(f"max_buffer must be at least 1, got {max_buffer}")
        history: list[T] | None = None
        if replay and self._items_seen:
            if self._history is None:
                raise ReplayUnavailableError(self._replay_unavailable_reason())
            history = self._history
        self._subscriptions_made += 1
        buffer = SubscriberBuffer(
            self, name or f"subscriber-{self._subscriptions_made}", policy, max_buffer, history
        )
        self._buffers[buffer] = None
        if self._source_state == "running":
            self._live = (*self._live, buffer)
        else:
            buffer.end(*self._outcome_for_subscribers())
        return Subscription(buffer)

    def start_soon(self, function: Callable[[], Coroutine[Any, Any, object]], *, name: str) -> None:
        """Start a task in the hub's task group, for a bridge that feeds a subscription elsewhere.

        The task is cancelled when the hub's ``async with`` block ends, like the pump.

        Args:
            function: makes the task's coroutine.
            name: the task's name.

        Raises:
            HubClosedError: the hub's ``async with`` block has already ended.
        """
        if self._task_group is None:
            raise HubClosedError(f"the hub's `async with` block has ended; it cannot start {name!r}")
        self._task_group.start_soon(function, name=name)

    async def wait_finished(self) -> None:
        """Wait until the source has ended (completed, failed, or the hub was closed). Never raises."""
        await self._finished.wait()

    @property
    def source_state(self) -> SourceState:
        return self._source_state

    def statistics(self) -> HubStatistics:
        """The hub's totals, its source's state, and each subscriber's counts now."""
        subscribers = tuple(buffer.statistics() for buffer in self._buffers)
        delivered, coalesced, dropped, disconnected, failed = self._forgotten_totals
        for stats in subscribers:
            delivered += stats.delivered
            coalesced += stats.coalesced
            dropped += stats.dropped
            disconnected += stats.state == "disconnected"
            failed += stats.state == "failed"
        return HubStatistics(
            source_state=self._source_state,
            items=self._items_seen,
            history=len(self._history) if self._history is not None else 0,
            history_complete=self._history is not None or self._items_seen == 0,
            subscribers=subscribers,
            active=sum(1 for stats in subscribers if stats.state == "active"),
            delivered=delivered,
            coalesced=coalesced,
            dropped=dropped,
            disconnected=disconnected,
            failed=failed,
        )

    # -- the pump ----------------------------------------------------------------------------------------

    async def _pump(self) -> None:
        """Pull the source once, deliver each item to every live subscriber, end them all when it ends."""
        state: SourceState = "closed"
        error: BaseException | None = None
        with self._pump_scope:
            try:
                exhausted = False
                async with streamcontext(self._source) as iterator:
                    # Checking _closing too: cancellation cannot stop a source that never suspends.
                    while not self._closing:
                        try:
                            item = await anext(iterator)
                        except StopAsyncIteration:
                            exhausted = True
                            break
                        self._record(item)
                        await self._deliver(item)
                        if self._block_full:
                            await self._wait_for_block_room()
                if exhausted:
                    state = "completed"
            except Exception as exc:
                state, error = "failed", exc
            finally:
                self._end_source(state, error)

    def _record(self, item: T) -> None:
        self._items_seen += 1
        history = self._history
        if history is not None:
            assert self._history_limit is not None
            if len(history) < self._history_limit:
                history.append(item)
            else:
                self._history = None  # readers mid-replay keep their own reference

    async def _deliver(self, item: T) -> None:
        stalled: list[SubscriberBuffer[T]] = []
        for buffer in self._live:
            try:
                if buffer.offer_nowait(item):
                    self._block_full = True
            except WouldBlock:
                if buffer.waits:
                    stalled.append(buffer)
                else:
                    buffer.overflow(self._items_seen)
        for buffer in stalled:
            while not buffer.ended:
                try:
                    if buffer.offer_nowait(item):
                        self._block_full = True
                    break
                except WouldBlock:
                    await self._wait_for_room()

    async def _wait_for_block_room(self) -> None:
        """Wait until every block subscriber has room: the pacing of ``block``."""
        while any(buffer.policy == "block" and buffer.full for buffer in self._live):
            await self._wait_for_room()
        self._block_full = False

    async def _wait_for_room(self) -> None:
        self._room = room = anyio.Event()
        try:
            await room.wait()
        finally:
            self._room = None

    def _wake_pump(self) -> None:
        if self._room is not None:
            self._room.set()

    def _end_source(self, state: SourceState, error: BaseException | None) -> None:
        self._source_state = state
        self._source_error = error
        self._source_traceback = error.__traceback__ if error is not None else None
        subscriber_outcome = self._outcome_for_subscribers()
        for buffer in self._live:
            buffer.end(*subscriber_outcome)
        self._finished.set()

    def _outcome_for_subscribers(
        self,
    ) -> tuple[SubscriberState, BaseException | None, TracebackType | None]:
        if self._source_state == "completed":
            return "completed", None, None
        if self._source_state == "failed":
            return "failed", self._source_error, self._source_traceback
        closed = HubClosedError(f"the hub was closed after {self._items_seen} items, before its source ended")
        return "closed", closed, None

    def _replay_unavailable_reason(self) -> str:
        if not self._history_limit:
            return (
                f"cannot replay: this hub keeps no history (fan_out(replay=False)) and {self._items_seen}"
                " items have passed; subscribe with replay=False to join live"
            )
        return (
            f"cannot replay: the hub keeps at most {self._history_limit} items (max_replay) and"
            f" {self._items_seen} have passed; subscribe with replay=False to join live"
        )

    # -- bookkeeping -------------------------------------------------------------------------------------

    def _buffer_ended(self, buffer: SubscriberBuffer[Any]) -> None:
        if buffer in self._live:
            self._live = tuple(live for live in self._live if live is not buffer)
        self._wake_pump()

    def _retire(self, buffer: SubscriberBuffer[Any]) -> None:
        """A subscriber is done with; past ``RETAINED_SUBSCRIBERS`` such, forget the oldest but its counts."""
        self._retired += 1
        if self._retired <= RETAINED_SUBSCRIBERS:
            return
        oldest = next(done for done in self._buffers if done.finished)
        del self._buffers[oldest]
        self._retired -= 1
        stats = oldest.statistics()
        totals = self._forgotten_totals
        totals[0] += stats.delivered
        totals[1] += stats.coalesced
        totals[2] += stats.dropped
        totals[3] += stats.state == "disconnected"
        totals[4] += stats.state == "failed"

    def _start(self, task_group: TaskGroup) -> None:
        self._task_group = task_group
        task_group.start_soon(self._pump, name="streamfold hub pump")

    def _close(self) -> None:
        self._closing = True
        self._pump_scope.cancel()
        self._task_group = None

    def _raise_source_error(self) -> None:
        if self._source_error is not None:
            raise_shared(self._source_error, self._source_traceback)


@contextmanager
def _sole_exception_unwrapped() -> Iterator[None]:
    """Re-raise a lone exception out of the exception group a task group wraps it in."""
    try:
        yield
    except BaseExceptionGroup as group:
        sole: BaseException = group
        while isinstance(sole, BaseExceptionGroup) and len(sole.exceptions) == 1:
            sole = sole.exceptions[0]
        if sole is group or isinstance(sole, BaseExceptionGroup):
            raise
        context = sole.__context__
        try:
            raise sole
        finally:
            sole.__context__ = context


def _history_limit(replay: bool | int) -> int | None:
    if replay is True:
        return MAX_REPLAY
    if replay is False:
        return None
    if replay < 0:
        raise ConfigurationError(f"replay must be a bool or an item count >= 0, got {replay}")
    return replay or None


@asynccontextmanager
async def fan_out(source: AsyncIterable[T], *, replay: bool | int = True) -> AsyncIterator[Hub[T]]:
    """Multicast ``source`` to the subscribers of the hub this yields.

    One pump task, started on entry, pulls the source (once) and delivers each item to every subscriber.

    Args:
        source: the items, e.g. a pipeline's ``PipelineEvent``s. It is closed (``aclose``) when it ends or
            the hub closes.
        replay: keep the items for subscribers joining late: ``True`` keeps up to ``MAX_REPLAY`` items, an
            int keeps up to that many, ``False`` none. Past the cap, asking for replay raises
            `ReplayUnavailableError`.

    Leaving the block (or cancelling the task in it) cancels the pump and closes the source at once;
    subscribers still reading get what they hold, then `HubClosedError` (or a clean end if the
    source had already ended). No task is left behind. To let the source run to its end, await
    `Hub.wait_finished` (or consume a subscription to its end) inside the block.

    Raises:
        Exception: the source's own exception, unwrapped (not an ``ExceptionGroup``), after every
            subscriber received the items before it and then the exception.
    """
    hub = Hub(source, history_limit=_history_limit(replay))
    with _sole_exception_unwrapped():
        async with anyio.create_task_group() as task_group:
            hub._start(task_group)
            try:
                yield hub
            finally:
                hub._close()
    hub._raise_source_error()


Consumer: TypeAlias = Callable[[Subscription[T]], Awaitable[object]]


async def broadcast(
    source: AsyncIterable[T],
    *consumers: Consumer[T],
    policy: Policy = "block",
    max_buffer: int = DEFAULT_MAX_BUFFER,
    replay: bool | int = True,
    on_start: Callable[[Hub[T]], object] | None = None,
) -> None:
    """Drive ``source`` to its end while each consumer reads its own subscription, concurrently.

    The common case of a hub: agent code is one consumer (``block``, so it sees everything and paces the
    provider), and ``on_start`` attaches the rest. A consumer that returns early is unsubscribed and
    holds nobody up. Returns when the source has ended and every consumer has returned.

    Args:
        source: the items.
        *consumers: async functions, each given its own `Subscription`.
        policy: every consumer's overflow policy.
        max_buffer: every consumer's buffer, in items.
        replay: as `fan_out` takes it.
        on_start: called with the hub before the first item is pulled, to attach UI observers
            (`pipeline.fanout.rx.observe`), a `pipeline.fanout.web.ResponseRegistry` entry...

    Raises:
        Exception: the source's exception, or a consumer's (which cancels the rest), unwrapped.
    """
    async with fan_out(source, replay=replay) as hub:
        subscriptions = [hub.subscribe(policy=policy, max_buffer=max_buffer) for _ in consumers]
        if on_start is not None:
            on_start(hub)
        with _sole_exception_unwrapped():
            async with anyio.create_task_group() as task_group:
                for consume, subscription in zip(consumers, subscriptions, strict=True):
                    task_group.start_soon(_consume, consume, subscription)
        del subscriptions
        await hub.wait_finished()


async def _consume(consume: Consumer[T], subscription: Subscription[T]) -> None:
    async with subscription:
        await consume(subscription)
