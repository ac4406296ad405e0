"""One subscriber's bounded buffer: the sans-IO state machine behind every hub subscription.

The pump offers items with :meth:`SubscriberBuffer.offer_nowait`; the consumer takes them with
:meth:`~SubscriberBuffer.take_nowait` or :meth:`~SubscriberBuffer.take_all_nowait`. Neither ever waits: a side
that cannot go on gets :class:`anyio.WouldBlock`, and its async wrapper in :mod:`pipeline.fanout.hub` waits
and tries again (the shape of anyio's memory object streams). The buffer wakes a waiting consumer itself
(:attr:`SubscriberBuffer.reader`) and tells its producer (a :class:`Producer`, the hub) when room is made,
when it ends and when its consumer is done with it.

What a full buffer does is its policy's (see :mod:`pipeline.fanout.hub` for the user's view): ``block`` and
``coalesce`` make the producer wait (``coalesce`` first merges a delta into a waiting one of the same
segment), ``drop`` discards the oldest entry, ``disconnect`` and ``coalesce_or_disconnect`` make the
producer call :meth:`~SubscriberBuffer.overflow`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import (
    Any,
    Final,
    Generic,
    Literal,
    NamedTuple,
    NoReturn,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    get_args,
)

import msgspec
from anyio import EndOfStream, WouldBlock

from pipeline.errors import SubscriberError
from pipeline.models import SegmentEvent, SegmentEventType

__all__ = [
    "COALESCING",
    "POLICIES",
    "CoalesceKey",
    "Policy",
    "Producer",
    "SubscriberBuffer",
    "SubscriberState",
    "SubscriberStatistics",
    "coalesce_key",
    "raise_shared",
]

T = TypeVar("T")

Policy: TypeAlias = Literal["block", "coalesce", "drop", "disconnect", "coalesce_or_disconnect"]
"""What a subscriber's buffer does when it is full; see :mod:`pipeline.fanout.hub`."""

SubscriberState: TypeAlias = Literal[
    "active", "completed", "failed", "disconnected", "unsubscribed", "closed"
]
"""``active`` until no more items will arrive, then why: the source ``completed`` or ``failed``, the
subscriber was ``disconnected`` (overflow) or ``failed`` itself (an observer that raised), it
``unsubscribed``, or the hub was ``closed`` before the source ended."""

POLICIES: Final = frozenset(get_args(Policy))
COALESCING: Final = frozenset({"coalesce", "coalesce_or_disconnect"})
"""The policies that need an item's :func:`coalesce_key`."""
_WAITING: Final = frozenset({"block", "coalesce"})

CoalesceKey: TypeAlias = tuple[str, SegmentEventType, tuple[Any, ...] | None]


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


class Producer(Protocol):
    """What a buffer tells the side that fills it (the hub's pump)."""

    def _wake_pump(self) -> None:
        """An entry was taken from a full buffer, or a buffer ended: a waiting pump may go on."""

    def _buffer_ended(self, buffer: SubscriberBuffer[Any]) -> None:
        """The buffer takes no more items: stop offering them."""

    def _retire(self, buffer: SubscriberBuffer[Any]) -> None:
        """The buffer's consumer is done with it (read to its end, or unsubscribed)."""


class _Waker(Protocol):
    def set(self) -> None: ...


def coalesce_key(item: object) -> CoalesceKey | None:
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


def raise_shared(error: BaseException, traceback: TracebackType | None) -> NoReturn:
    """Raise an exception that several readers raise in turn, from the traceback it had when it ended them.

    Raising an exception object again appends the raiser's frames to its traceback: without the reset,
    every subscriber (every reconnecting browser) would add its frames to the one shared exception, and
    keep them alive as long as the hub.
    """
    raise error.with_traceback(traceback)


class SubscriberBuffer(Generic[T]):
    """A subscriber's items: the rest of the hub's history to replay, then up to ``max_buffer`` live entries.

    Held by the hub; its consumer-facing handle is :class:`pipeline.fanout.hub.Subscription`.
    """

    __slots__ = (
        "__weakref__",
        "_appended",
        "_error_traceback",
        "_history",
        "_items",
        "_merge_segment",
        "_merge_targets",
        "_producer",
        "_replay_end",
        "_replay_position",
        "_taken",
        "coalesced",
        "coalesces",
        "delivered",
        "dropped",
        "ended",
        "error",
        "finished",
        "max_buffer",
        "name",
        "offer_nowait",
        "policy",
        "reader",
        "state",
        "waits",
    )

    def __init__(
        self,
        producer: Producer,
        name: str,
        policy: Policy,
        max_buffer: int,
        history: list[T] | None,
    ) -> None:
        self._producer = producer
        self.name = name
        self.policy = policy
        self.max_buffer = max_buffer
        self.coalesces = policy in COALESCING
        """Offers need the item's :func:`coalesce_key`."""
        self.waits = policy in _WAITING
        """On :class:`WouldBlock` from :meth:`offer_nowait` the producer waits for room; else it calls
        :meth:`overflow`."""
        self._items: deque[T | _Merged] = deque()
        self._history = history
        self._replay_position = 0
        self._replay_end = len(history) if history is not None else 0
        self.reader: _Waker | None = None
        """Set by a consumer waiting for items; the buffer sets it (once) when items arrive or it ends."""
        # Absolute positions of buffer entries, for coalescing: entry number n is at index n - _taken.
        self._taken = 0
        self._appended = 0
        self._merge_targets: dict[CoalesceKey, int] = {}
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
        offers: dict[Policy, Callable[[T, CoalesceKey | None], bool]] = {
            "block": self._offer_block,
            "coalesce": self._offer_coalesce,
            "drop": self._offer_drop,
            "disconnect": self._offer_disconnect,
            "coalesce_or_disconnect": self._offer_coalesce,
        }
        self.offer_nowait: Callable[[T, CoalesceKey | None], bool] = offers[policy]
        """Put an item in the buffer as the policy says, without waiting.

        Returns True when the producer should pace itself (a ``block`` buffer is now full: wait for room
        before the next item). Raises :class:`WouldBlock` when the item cannot go in now (see :attr:`waits`).
        """

    @property
    def full(self) -> bool:
        return len(self._items) >= self.max_buffer

    # -- the producer's side -----------------------------------------------------------------------------

    def _append(self, item: T) -> None:
        self._items.append(item)
        self._appended += 1
        if self.reader is not None:
            self._wake_reader()

    def _wake_reader(self) -> None:
        reader = self.reader
        if reader is not None:
            self.reader = None  # set it once, not once per item that arrives before the reader runs
            reader.set()

    def _offer_block(self, item: T, key: CoalesceKey | None) -> bool:
        if len(self._items) >= self.max_buffer:
            raise WouldBlock
        self._append(item)
        return len(self._items) >= self.max_buffer

    def _offer_coalesce(self, item: T, key: CoalesceKey | None) -> bool:
        if len(self._items) < self.max_buffer:
            self._track_merge_target(key)
            self._append(item)
            return False
        position = self._merge_targets.get(key) if key is not None else None
        if position is None or position < self._taken:
            raise WouldBlock
        index = position - self._taken
        waiting = self._items[index]
        delta = cast(SegmentEvent, item)
        if isinstance(waiting, _Merged):
            waiting.parts.append(delta.payload["delta"])
        else:
            self._items[index] = _Merged(cast(SegmentEvent, waiting), delta)
        self.coalesced += 1
        return False

    def _track_merge_target(self, key: CoalesceKey | None) -> None:
        """Remember where the next entry lands; anything but a same-segment delta ends merging across it."""
        if key is None:
            self._merge_targets.clear()
            self._merge_segment = None
            return
        if key[0] != self._merge_segment:
            self._merge_targets.clear()
            self._merge_segment = key[0]
        self._merge_targets[key] = self._appended

    def _offer_drop(self, item: T, key: CoalesceKey | None) -> bool:
        if len(self._items) >= self.max_buffer:
            self._items.popleft()
            self._taken += 1
            self.dropped += 1
        self._append(item)
        return False

    def _offer_disconnect(self, item: T, key: CoalesceKey | None) -> bool:
        if len(self._items) >= self.max_buffer:
            raise WouldBlock
        self._append(item)
        return False

    def overflow(self, position: int) -> None:
        """End a disconnecting subscriber that had no room for item number ``position`` of the source."""
        self.end(
            "disconnected",
            SubscriberError(
                f"subscriber {self.name!r} fell {self.max_buffer} items behind (max_buffer) at item"
                f" {position} of the source and was disconnected (policy {self.policy!r})"
            ),
        )

    def end(
        self,
        state: SubscriberState,
        error: BaseException | None,
        error_traceback: TracebackType | None = None,
    ) -> None:
        """No more items: record why, wake the consumer, and stop holding up the producer.

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
        self._producer._buffer_ended(self)

    # -- the consumer's side -----------------------------------------------------------------------------

    def take_nowait(self) -> T:
        """The next item: from the history while replaying, then from the buffer.

        Raises:
            WouldBlock: nothing is waiting yet.
            EndOfStream: the subscriber ended cleanly and everything was taken.
            BaseException: why it ended, when not cleanly (once; then EndOfStream).
        """
        if self._replay_position < self._replay_end:
            assert self._history is not None
            item = self._history[self._replay_position]
            self._replay_position += 1
            self.delivered += 1
            if self._replay_position == self._replay_end:
                self._history = None
            return item
        if self._items:
            was_full = len(self._items) >= self.max_buffer
            entry = self._items.popleft()
            self._taken += 1
            self.delivered += 1
            if was_full:
                self._producer._wake_pump()
            if isinstance(entry, _Merged):
                return cast(T, entry.build())
            return entry
        return self._raise_end()

    def take_all_nowait(self) -> list[T]:
        """Everything waiting now (at least one item): the rest of the history, then the buffer.

        Raises as :meth:`take_nowait` does when nothing is waiting.
        """
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
                self._producer._wake_pump()
        if batch:
            return batch
        return self._raise_end()

    def _raise_end(self) -> NoReturn:
        if not self.ended:
            raise WouldBlock
        if not self.finished:
            # The consumer reached the end: raise why it ended, if not cleanly (once).
            self.finished = True
            self._producer._retire(self)
            if self.error is not None and self.state != "unsubscribed":
                raise_shared(self.error, self._error_traceback)
        raise EndOfStream

    def close(self) -> None:
        """Unsubscribe: drop what is waiting and never hold up the producer again."""
        self.end("unsubscribed", None)
        self._items.clear()
        self._history = None
        self._replay_position = self._replay_end
        if not self.finished:
            self.finished = True
            self._producer._retire(self)

    def cut_off(self, state: Literal["failed", "disconnected"], error: BaseException) -> None:
        """End this subscriber alone because its consumer failed or cannot keep up, and unsubscribe it."""
        self.end(state, error)
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
