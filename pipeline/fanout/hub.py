"""The UI fan-out edge: one source pulled once, many subscribers, each with a bounded buffer and a policy.

::

    async with fan_out(events) as hub:                 # one pump task pulls `events`
        hub.observe(ui_observer, policy="coalesce")      # reactivex observer, own buffer and pump task
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
    The subscriber ends with :class:`~pipeline.errors.SubscriberError` after the items it already holds;
    the others go on.
``coalesce_or_disconnect``
    ``coalesce`` where a delta can merge, ``disconnect`` where ``coalesce`` would wait: lossless in text
    while the subscriber keeps up roughly, and it never holds up the source. For consumers that can
    start over (a browser reconnects and replays), and the web endpoints' default.

Replay: the hub keeps the response's items (up to ``MAX_REPLAY``, or the count given as
``fan_out(replay=...)``) so that a subscriber joining mid-stream first receives every item from the start.
A replaying subscriber reads the hub's own history list: replay copies nothing.

Nothing here starts a task per item: one pump task delivers each item into every subscriber's buffer
synchronously, and a consumer takes everything waiting in one go (:meth:`Subscription.receive_batch`)
or item by item without a hand-off while its buffer is not empty.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Literal,
    NamedTuple,
    NoReturn,
    TypeAlias,
    TypeVar,
    cast,
    get_args,
)

import anyio
import msgspec
from aiostream import streamcontext

from pipeline.errors import (
    ConfigurationError,
    HubClosedError,
    ReplayUnavailableError,
    SubscriberError,
)
from pipeline.models import SegmentEvent, SegmentEventType

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from reactivex.abc import DisposableBase, ObserverBase

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

Policy: TypeAlias = Literal["block", "coalesce", "drop", "disconnect", "coalesce_or_disconnect"]
"""What a subscriber's buffer does when it is full; see the module docstring."""

SubscriberState: TypeAlias = Literal[
    "active", "completed", "failed", "disconnected", "unsubscribed", "closed"
]
"""``active`` until no more items will arrive, then why: the source ``completed`` or ``failed``, the
subscriber was ``disconnected`` (overflow) or ``failed`` itself (an observer that raised), it
``unsubscribed``, or the hub was ``closed`` before the source ended."""

SourceState: TypeAlias = Literal["running", "completed", "failed", "closed"]

DEFAULT_MAX_BUFFER: Final = 16
MAX_REPLAY: Final = 100_000
"""Default cap of the replay history, in items (``fan_out(replay=True)``). About 100 k segment events is a
very long response; the history holds references to the items, nothing is copied."""
RETAINED_SUBSCRIBERS: Final = 256
"""How many ended subscribers :meth:`Hub.statistics` still lists one by one (totals count them all)."""

_POLICIES: Final = frozenset(get_args(Policy))
_COALESCING: Final = frozenset({"coalesce", "coalesce_or_disconnect"})


class SubscriberStatistics(NamedTuple):
    """One subscriber, as :meth:`Hub.statistics` and :meth:`Subscription.statistics` see it."""

    name: str
    policy: Policy
    max_buffer: int
    buffered: int
    """Items waiting in its buffer (a coalesced run counts as one)."""
    replay_pending: int
    """Items of the history it has still to read."""
    delivered: int
    """Items its consumer has taken (history included)."""
    coalesced: int
    """Deltas merged into a waiting one instead of taking a place of their own."""
    dropped: int
    state: SubscriberState
    error: BaseException | None
    """Why it ended, when not cleanly: the source's error, its overflow, its observer's exception."""


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


_CoalesceKey: TypeAlias = tuple[str, SegmentEventType, tuple[Any, ...] | None]


def _coalesce_key(item: object) -> _CoalesceKey | None:
    """What a delta can merge with (segment, kind, argument path), or None for items that never merge."""
    if not isinstance(item, SegmentEvent):
        return None
    payload = item.payload
    if item.event_type is SegmentEventType.CONTENT:
        if isinstance(payload.get("delta"), str):
            return (item.segment_id, SegmentEventType.CONTENT, None)
    elif item.event_type is SegmentEventType.ARGUMENT and isinstance(payload.get("delta"), str):
        path = payload.get("path")
        if isinstance(path, list | tuple):
            return (item.segment_id, SegmentEventType.ARGUMENT, tuple(path))
    return None


class _Merged:
    """Deltas waiting as one buffer entry; their text is joined once, when the consumer takes it."""

    __slots__ = ("first", "parts")

    def __init__(self, first: SegmentEvent, second: SegmentEvent) -> None:
        self.first = first
        self.parts: list[str] = [first.payload["delta"], second.payload["delta"]]

    def build(self) -> SegmentEvent:
        payload = {**self.first.payload, "delta": "".join(self.parts)}
        return msgspec.structs.replace(self.first, payload=payload)


class _Feed(Generic[T]):
    """A subscriber's state, held by the hub. Its consumer-facing handle is :class:`Subscription`."""

    __slots__ = (
        "__weakref__",
        "_appended",
        "_error_traceback",
        "_history",
        "_hub",
        "_items",
        "_merge_segment",
        "_merge_targets",
        "_readable",
        "_reader_waiting",
        "_replay_end",
        "_replay_position",
        "_taken",
        "coalesced",
        "delivered",
        "dropped",
        "ended",
        "error",
        "finished",
        "max_buffer",
        "name",
        "offer",
        "policy",
        "state",
    )

    def __init__(
        self,
        hub: Hub[T],
        name: str,
        policy: Policy,
        max_buffer: int,
        history: list[T] | None,
    ) -> None:
        self._hub = hub
        self.name = name
        self.policy = policy
        self.max_buffer = max_buffer
        self._items: deque[T | _Merged] = deque()
        self._history = history
        self._replay_position = 0
        self._replay_end = len(history) if history is not None else 0
        self._readable: anyio.Event | None = None
        """Set by the pump when items arrive or the feed ends, while the consumer waits for it."""
        self._reader_waiting = False
        # Absolute positions of buffer entries, for coalescing: entry number n is at index n - _taken.
        self._taken = 0
        self._appended = 0
        self._merge_targets: dict[_CoalesceKey, int] = {}
        self._merge_segment: str | None = None
        self.delivered = 0
        self.coalesced = 0
        self.dropped = 0
        self.state: SubscriberState = "active"
        self.error: BaseException | None = None
        self._error_traceback: TracebackType | None = None
        self.ended = False
        """No more items will arrive (those waiting can still be read)."""
        self.finished = False
        """The consumer has seen the end, or unsubscribed."""
        offers: dict[Policy, Callable[[T, _CoalesceKey | None], bool]] = {
            "block": self._offer_block,
            "coalesce": self._offer_coalesce,
            "drop": self._offer_drop,
            "disconnect": self._offer_disconnect,
            "coalesce_or_disconnect": self._offer_coalesce_or_disconnect,
        }
        self.offer = offers[policy]
        """Put an item in the buffer as the policy says; False means the pump must wait for room."""

    # -- the pump's side ---------------------------------------------------------------------------------

    def _append(self, item: T) -> None:
        self._items.append(item)
        self._appended += 1
        if self._readable is not None:
            self._wake_reader()

    def _wake_reader(self) -> None:
        readable = self._readable
        if readable is not None:
            self._readable = None  # set it once, not once per item that arrives before the reader runs
            readable.set()

    def _offer_block(self, item: T, key: _CoalesceKey | None) -> bool:
        if len(self._items) >= self.max_buffer:
            return False
        self._append(item)
        if len(self._items) >= self.max_buffer:
            self._hub._block_full = True
        return True

    def _offer_coalesce(self, item: T, key: _CoalesceKey | None) -> bool:
        if len(self._items) < self.max_buffer:
            self._track_merge_target(key)
            self._append(item)
            return True
        position = self._merge_targets.get(key) if key is not None else None
        if position is None or position < self._taken:
            return False
        index = position - self._taken
        waiting = self._items[index]
        delta = cast(SegmentEvent, item)
        if isinstance(waiting, _Merged):
            waiting.parts.append(delta.payload["delta"])
        else:
            self._items[index] = _Merged(cast(SegmentEvent, waiting), delta)
        self.coalesced += 1
        return True

    def _track_merge_target(self, key: _CoalesceKey | None) -> None:
        """Remember where the next entry lands; anything but a same-segment delta ends merging across it."""
        if key is None:
            self._merge_targets.clear()
            self._merge_segment = None
            return
        if key[0] != self._merge_segment:
            self._merge_targets.clear()
            self._merge_segment = key[0]
        self._merge_targets[key] = self._appended

    def _offer_drop(self, item: T, key: _CoalesceKey | None) -> bool:
        if len(self._items) >= self.max_buffer:
            self._items.popleft()
            self._taken += 1
            self.dropped += 1
        self._append(item)
        return True

    def _offer_disconnect(self, item: T, key: _CoalesceKey | None) -> bool:
        if len(self._items) >= self.max_buffer:
            self._overflow()
        else:
            self._append(item)
        return True

    def _offer_coalesce_or_disconnect(self, item: T, key: _CoalesceKey | None) -> bool:
        if not self._offer_coalesce(item, key):
            self._overflow()
        return True

    def _overflow(self) -> None:
        self.end(
            "disconnected",
            SubscriberError(
                f"subscriber {self.name!r} fell {self.max_buffer} items behind (max_buffer) at item"
                f" {self._hub._items_seen} of the source and was disconnected (policy {self.policy!r})"
            ),
        )

    def end(
        self,
        state: SubscriberState,
        error: BaseException | None,
        error_traceback: TracebackType | None = None,
    ) -> None:
        """No more items: record why, wake the consumer, and stop holding up the pump.

        ``error_traceback`` is the traceback ``error`` is raised from (by default its own, as it is now).
        """
        if self.ended:
            return
        self.ended = True
        self.state = state
        self.error = error
        if error is not None and error_traceback is None:
            error_traceback = error.__traceback__
        self._error_traceback = error_traceback
        self._wake_reader()
        self._hub._feed_ended(self)

    # -- the consumer's side -----------------------------------------------------------------------------

    def _pop(self) -> T:
        was_full = len(self._items) >= self.max_buffer
        entry = self._items.popleft()
        self._taken += 1
        self.delivered += 1
        if was_full:
            self._hub._wake_pump()
        if isinstance(entry, _Merged):
            return cast(T, entry.build())
        return entry

    def take_all(self) -> list[T]:
        """Everything waiting now: the rest of the history, then the buffer."""
        batch: list[T] = []
        if self._replay_position < self._replay_end:
            assert self._history is not None
            batch = self._history[self._replay_position : self._replay_end]
            self._replay_position = self._replay_end
            self._history = None
            self.delivered += len(batch)
        if self._items:
            was_full = len(self._items) >= self.max_buffer
            count = len(self._items)
            batch.extend(
                cast(T, entry.build()) if isinstance(entry, _Merged) else entry for entry in self._items
            )
            self._items.clear()
            self._taken += count
            self.delivered += count
            if was_full:
                self._hub._wake_pump()
        return batch

    async def receive(self) -> T:
        while True:
            if self._replay_position < self._replay_end:
                assert self._history is not None
                item = self._history[self._replay_position]
                self._replay_position += 1
                self.delivered += 1
                if self._replay_position == self._replay_end:
                    self._history = None
                return item
            if self._items:
                return self._pop()
            if self.ended:
                self._finish_reading()
                raise StopAsyncIteration
            await self._wait_readable()

    async def receive_batch(self) -> list[T]:
        while True:
            batch = self.take_all()
            if batch:
                return batch
            if self.ended:
                self._finish_reading()
                return []
            await self._wait_readable()

    async def _wait_readable(self) -> None:
        if self._reader_waiting:
            raise RuntimeError(f"subscription {self.name!r} is already being read by another task")
        self._readable = readable = anyio.Event()
        self._reader_waiting = True
        try:
            await readable.wait()
        finally:
            self._reader_waiting = False
            if self._readable is readable:
                self._readable = None

    def _finish_reading(self) -> None:
        """The consumer reached the end: raise why it ended, if not cleanly (once)."""
        if self.finished:
            return
        self.finished = True
        self._hub._retire(self)
        if self.error is not None and self.state != "unsubscribed":
            _raise_shared(self.error, self._error_traceback)

    def close(self) -> None:
        """Unsubscribe: drop what is waiting and never hold up the pump again."""
        self.end("unsubscribed", None)
        self._items.clear()
        self._history = None
        self._replay_position = self._replay_end
        if not self.finished:
            self.finished = True
            self._hub._retire(self)

    def cut_off(self, error: Exception) -> None:
        """End this subscriber alone because its consumer failed (an observer that raised)."""
        self.end("failed", error)
        self.close()

    def statistics(self) -> SubscriberStatistics:
        return SubscriberStatistics(
            name=self.name,
            policy=self.policy,
            max_buffer=self.max_buffer,
            buffered=len(self._items),
            replay_pending=self._replay_end - self._replay_position,
            delivered=self.delivered,
            coalesced=self.coalesced,
            dropped=self.dropped,
            state=self.state,
            error=self.error,
        )


class Subscription(AsyncIterator[T]):
    """One subscriber's view of a hub: an async iterator over its bounded buffer.

    Iterate it (``async for``) or take batches (:meth:`receive_batch`). It ends as the source ends: cleanly,
    or by raising the source's exception, :class:`~pipeline.errors.SubscriberError` (overflow under
    ``disconnect`` or ``coalesce_or_disconnect``) or :class:`HubClosedError`, after the items it already
    holds.

    Use it as an async context manager, or call :meth:`close`, to unsubscribe early. A subscription that is
    no longer referenced (``async for ... : break`` on ``hub.subscribe()``) unsubscribes itself, so a
    consumer that walks away never stalls the others, even under ``block``.

    A consumer takes waiting items without a task switch; only an empty buffer makes it wait. One task
    reads a subscription at a time.
    """

    __slots__ = ("__weakref__", "_feed")

    def __init__(self, feed: _Feed[T]) -> None:
        self._feed = feed
        # Only a weak reference to the feed: the finalizer registry is a global root, and the feed's error
        # (its traceback holds this subscription's frames) would otherwise keep both, and the hub's whole
        # history, alive for ever.
        weakref.finalize(self, _close_feed, weakref.ref(feed)).atexit = False

    @property
    def name(self) -> str:
        return self._feed.name

    def __aiter__(self) -> Subscription[T]:
        return self

    async def __anext__(self) -> T:
        return await self._feed.receive()

    async def receive_batch(self) -> list[T]:
        """Every item waiting (waits for at least one); ``[]`` when the subscription has ended cleanly."""
        return await self._feed.receive_batch()

    def close(self) -> None:
        """Unsubscribe now. Items still waiting are discarded; iteration then ends cleanly."""
        self._feed.close()

    async def aclose(self) -> None:
        self._feed.close()

    async def __aenter__(self) -> Subscription[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._feed.close()

    def statistics(self) -> SubscriberStatistics:
        return self._feed.statistics()

    def _cut_off(self, error: Exception) -> None:
        self._feed.cut_off(error)

    def _disconnect(self, error: SubscriberError) -> None:
        """End this subscriber alone because its consumer cannot keep up (a web client's send timed out)."""
        self._feed.end("disconnected", error)
        self._feed.close()


def _close_feed(feed_ref: weakref.ref[_Feed[Any]]) -> None:
    """A forgotten subscription's finalizer: unsubscribe its feed, if the hub still holds it."""
    feed = feed_ref()
    if feed is not None:
        feed.close()


def _raise_shared(error: BaseException, traceback: TracebackType | None) -> NoReturn:
    """Raise an exception that several readers raise in turn, from the traceback it had when it ended them.

    Raising an exception object again appends the raiser's frames to its traceback: without the reset,
    every subscriber (every reconnecting browser) would add its frames to the one shared exception, and
    keep them alive as long as the hub.
    """
    raise error.with_traceback(traceback)


class Hub(Generic[T]):
    """Multicasts one source to many subscribers. Made by :func:`fan_out`, which owns its tasks.

    Subscribe with :meth:`subscribe` (an async iterator) or :meth:`observe` (a reactivex observer); watch
    it with :meth:`statistics`. Use it from the event loop's thread only.
    """

    def __init__(self, source: AsyncIterable[T], *, history_limit: int | None) -> None:
        self._source = source
        self._history_limit = history_limit
        self._history: list[T] | None = [] if history_limit else None
        self._items_seen = 0
        self._live: tuple[_Feed[T], ...] = ()  # replaced, never mutated: safe to iterate while it changes
        self._feeds: dict[_Feed[T], None] = {}  # for statistics, in order of subscription
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

        With ``replay`` it first receives every item since the start of the source, then live ones; without,
        only items pulled after this call. Subscriptions made before the ``async with`` body first awaits
        see every item either way.

        Raises:
            ConfigurationError: an unknown policy or a ``max_buffer`` below 1.
            ReplayUnavailableError: ``replay`` asked after the first item, but the hub keeps no history
                (``fan_out(replay=False)``) or has passed its ``max_replay`` cap.
        """
        if policy not in _POLICIES:
            raise ConfigurationError(
                f"unknown subscriber policy {policy!r}; expected one of {sorted(_POLICIES)}"
            )
        if max_buffer < 1:
            raise ConfigurationError(f"max_buffer must be at least 1, got {max_buffer}")
        history: list[T] | None = None
        if replay and self._items_seen:
            if self._history is None:
                raise ReplayUnavailableError(self._replay_unavailable_reason())
            history = self._history
        self._subscriptions_made += 1
        feed = _Feed(self, name or f"subscriber-{self._subscriptions_made}", policy, max_buffer, history)
        self._feeds[feed] = None
        if self._source_state == "running":
            self._live = (*self._live, feed)
        else:
            feed.end(*self._outcome_for_subscribers())
        return Subscription(feed)

    def observe(
        self,
        observer: ObserverBase[T],
        *,
        policy: Policy = "block",
        max_buffer: int = DEFAULT_MAX_BUFFER,
        replay: bool = True,
        name: str | None = None,
    ) -> DisposableBase:
        """Feed a reactivex observer through its own buffer and pump task; see
        :func:`pipeline.fanout.rx.observe`."""
        from pipeline.fanout.rx import observe

        return observe(self, observer, policy=policy, max_buffer=max_buffer, replay=replay, name=name)

    async def wait_finished(self) -> None:
        """Wait until the source has ended (completed, failed, or the hub was closed). Never raises."""
        await self._finished.wait()

    @property
    def source_state(self) -> SourceState:
        return self._source_state

    def statistics(self) -> HubStatistics:
        subscribers = tuple(feed.statistics() for feed in self._feeds)
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
        key: _CoalesceKey | None = None
        key_known = False
        stalled: list[_Feed[T]] = []
        for feed in self._live:
            if not key_known and feed.policy in _COALESCING:
                key, key_known = _coalesce_key(item), True
            if not feed.offer(item, key):
                stalled.append(feed)
        for feed in stalled:
            while not feed.ended and not feed.offer(item, key):
                await self._wait_for_room()

    async def _wait_for_block_room(self) -> None:
        """Wait until every block subscriber has room: the pacing of ``block``."""
        while any(feed.policy == "block" and len(feed._items) >= feed.max_buffer for feed in self._live):
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
        for feed in self._live:
            feed.end(*subscriber_outcome)
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

    def _feed_ended(self, feed: _Feed[T]) -> None:
        if feed in self._live:
            self._live = tuple(live for live in self._live if live is not feed)
        self._wake_pump()

    def _retire(self, feed: _Feed[T]) -> None:
        """A subscriber is done with; past ``RETAINED_SUBSCRIBERS`` such, forget the oldest but its counts."""
        self._retired += 1
        if self._retired <= RETAINED_SUBSCRIBERS:
            return
        oldest = next(done for done in self._feeds if done.finished)
        del self._feeds[oldest]
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

    def _spawn(self, function: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """Start a helper task (an observer's pump) in the hub's task group."""
        if self._task_group is None:
            raise HubClosedError("the hub's `async with` block has ended; it cannot start an observer")
        self._task_group.start_soon(function, name=name)

    def _raise_source_error(self) -> None:
        if self._source_error is not None:
            _raise_shared(self._source_error, self._source_traceback)


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
            :class:`ReplayUnavailableError`.

    Leaving the block (or cancelling the task in it) cancels the pump and closes the source at once;
    subscribers still reading get what they hold, then :class:`HubClosedError` (or a clean end if the
    source had already ended). No task is left behind. To let the source run to its end, await
    :meth:`Hub.wait_finished` (or consume a subscription to its end) inside the block.

    Raises:
        The source's own exception, unwrapped (not an ``ExceptionGroup``), after every subscriber received
        the items before it and then the exception.
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
    provider), and ``on_start(hub)`` is called before the first item is pulled to attach the rest (UI
    observers with :meth:`Hub.observe`, a :class:`pipeline.fanout.web.ResponseRegistry` entry, ...). A
    consumer
    that returns early is unsubscribed and holds nobody up. Returns when the source has ended and every
    consumer has returned.

    Raises:
        The source's exception, or a consumer's (which cancels the rest), unwrapped.
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
