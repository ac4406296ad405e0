"""The one bounded buffer of the fan-out, sans IO: a hub subscriber's and a served connection's.

`BoundedBuffer` holds up to ``max_items`` items (and, when it is told their sizes, about
``max_bytes`` of them); what a full buffer does with one more is its policy's (see
`pipeline.fanout.hub` for the user's view): ``drop`` discards the oldest, ``coalesce`` and
``coalesce_or_disconnect`` merge a delta into a waiting one of the same `CoalesceKey`, and
otherwise it says `anyio.WouldBlock`: its owner waits for room (``block``, ``coalesce``) or
cuts the reader off (``disconnect``, ``coalesce_or_disconnect``). A `Coalescer` says how items
of one kind merge: segment events here, log entries in `pipeline.fanout.serving._edge`.

`SubscriberBuffer` is a hub subscriber's: the hub's history to replay first, then the bounded
buffer. The pump offers items with `SubscriberBuffer.offer_nowait`; the consumer takes them with
`take_nowait` or `take_all_nowait`. Neither ever
waits: a side that cannot go on gets `anyio.WouldBlock`, and its async wrapper in
`pipeline.fanout.hub` waits and tries again (the shape of anyio's memory object streams). The
buffer wakes a waiting consumer itself (`SubscriberBuffer.reader`) and tells its producer (a
`Producer`, the hub) when room is made, when it ends and when its consumer is done with it.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterator
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
    "SEGMENT_DELTAS",
    "BoundedBuffer",
    "CoalesceKey",
    "Coalescer",
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
"""What a subscriber's buffer does when it is full; see `pipeline.fanout.hub`."""

SubscriberState: TypeAlias = Literal[
    "active", "completed", "failed", "disconnected", "unsubscribed", "closed"
]
"""``active`` until no more items will arrive, then why: the source ``completed`` or ``failed``, the
subscriber was ``disconnected`` (overflow) or ``failed`` itself (an observer that raised), it
``unsubscribed``, or the hub was ``closed`` before the source ended."""

POLICIES: Final = frozenset(get_args(Policy))
COALESCING: Final = frozenset({"coalesce", "coalesce_or_disconnect"})
"""The policies that need an item's `coalesce_key`."""
_WAITING: Final = frozenset({"block", "coalesce"})

CoalesceKey: TypeAlias = tuple[str, SegmentEventType, tuple[Any, ...] | None]


class SubscriberStatistics(NamedTuple):
    """One subscriber, as `Hub.statistics` and `Subscription.statistics` see it."""

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


class Coalescer(Protocol[T]):
    """How items of one kind merge: each delta's key and text, and the item a run of deltas becomes."""

    def split(self, item: T) -> tuple[CoalesceKey, str] | None:
        """The key ``item`` merges under and its delta text, or None: it never merges."""
        ...

    def join(self, first: T, last: T, text: str) -> T:
        """The one item the run from ``first`` to ``last`` becomes, with the run's joined ``text``."""
        ...


class _Run(Generic[T]):
    """Deltas waiting as one buffer entry; their text is joined once, when the consumer takes it."""

    __slots__ = ("first", "key", "last", "parts", "size")

    def __init__(self, first: T, key: CoalesceKey, parts: list[str], last: T, size: int) -> None:
        self.first = first
        self.key = key
        self.parts = parts
        self.last = last
        self.size = size


class BoundedBuffer(Generic[T]):
    """Up to ``max_items`` waiting items (and ``max_bytes`` of their sizes); what a full buffer does
    with one more is its policy's.

    Sans IO: `offer` never waits. A full buffer under ``drop`` discards its oldest item; under
    ``coalesce`` and ``coalesce_or_disconnect`` it merges a delta into the waiting one of the same key
    (segment, kind, argument path), provided only deltas of that segment came after it; otherwise it
    raises `WouldBlock`, and its owner waits for room or cuts the reader off.
    """

    __slots__ = (
        "_coalescer",
        "_entries",
        "_size_of",
        "coalesced",
        "dropped",
        "max_bytes",
        "max_items",
        "nbytes",
        "policy",
    )

    def __init__(
        self,
        policy: Policy,
        max_items: int,
        coalescer: Coalescer[T],
        *,
        max_bytes: int | None = None,
        size_of: Callable[[T], int] | None = None,
    ) -> None:
        self.policy = policy
        self.max_items = max_items
        self.max_bytes = sys.maxsize if max_bytes is None else max_bytes
        """With ``size_of``: the cap of the waiting items' sizes (one item may pass it)."""
        self._coalescer = coalescer
        self._size_of = size_of
        self._entries: deque[T | _Run[T]] = deque()
        self.nbytes = 0
        """The sizes of what waits (0 without ``size_of``)."""
        self.coalesced = 0
        """Deltas merged into a waiting one instead of taking a place of their own."""
        self.dropped = 0

    @property
    def full(self) -> bool:
        return len(self._entries) >= self.max_items or self.nbytes >= self.max_bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[T]:
        """The waiting items, merged runs built (to look at them: nothing is taken)."""
        return (self._build(entry) for entry in self._entries)

    def offer(self, item: T) -> None:
        """Put ``item`` in as the policy says.

        Raises:
            WouldBlock: the buffer is full and the item neither merges nor drops an older one.
        """
        size = self._size_of(item) if self._size_of is not None else 0
        if self.full:
            if self.policy in COALESCING and self._merge(item, size):
                return
            if self.policy != "drop":
                raise WouldBlock
            while self._entries and self.full:
                self.nbytes -= self._size(self._entries.popleft())
                self.dropped += 1
        self._entries.append(item)
        self.nbytes += size

    def _merge(self, item: T, size: int) -> bool:
        """Merge ``item`` into the waiting run of its key, if there is one; False when it does not merge."""
        split = self._coalescer.split(item)
        if split is None or self.nbytes + size > self.max_bytes:
            return False
        run = self._run_of(split[0])
        if run is None:
            return False
        run.parts.append(split[1])
        run.last = item
        run.size += size
        self.nbytes += size
        self.coalesced += 1
        return True

    def _run_of(self, key: CoalesceKey) -> _Run[T] | None:
        """The newest waiting delta of ``key`` as a run, if only deltas of its segment came after it."""
        entries = self._entries
        for index in range(len(entries) - 1, -1, -1):
            waiting = entries[index]
            if isinstance(waiting, _Run):
                if waiting.key == key:
                    return waiting
                waiting_key = waiting.key
            else:
                split = self._coalescer.split(waiting)
                if split is None:
                    return None
                waiting_key = split[0]
                if waiting_key == key:
                    run = _Run(waiting, key, [split[1]], waiting, self._size(waiting))
                    entries[index] = run
                    return run
            if waiting_key[0] != key[0]:
                return None
        return None

    def take(self) -> T:
        """The oldest waiting item (a merged run built). Raises ``IndexError`` when none waits."""
        entry = self._entries.popleft()
        self.nbytes -= self._size(entry)
        return self._build(entry)

    def take_all(self) -> list[T]:
        """Every waiting item, oldest first (merged runs built); none waits after."""
        entries = self._entries
        if self.coalesced:  # a merged run may wait
            taken = [self._build(entry) for entry in entries]
        else:
            taken = cast("list[T]", list(entries))
        entries.clear()
        self.nbytes = 0
        return taken

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def _build(self, entry: T | _Run[T]) -> T:
        if isinstance(entry, _Run):
            return self._coalescer.join(entry.first, entry.last, "".join(entry.parts))
        return entry

    def _size(self, entry: T | _Run[T]) -> int:
        if isinstance(entry, _Run):
            return entry.size
        return self._size_of(entry) if self._size_of is not None else 0


def raise_shared(error: BaseException, traceback: TracebackType | None) -> NoReturn:
    """Raise an exception that several readers raise in turn, from the traceback it had when it ended them.

    Raising an exception object again appends the raiser's frames to its traceback: without the reset,
    every subscriber (every reconnecting browser) would add its frames to the one shared exception, and
    keep them alive as long as the hub.
    """
    raise error.with_traceback(traceback)


class _SegmentDeltas:
    """Segment events merge: CONTENT deltas of a segment, ARGUMENT deltas of a segment and path."""

    __slots__ = ()

    def split(self, item: Any) -> tuple[CoalesceKey, str] | None:
        key = coalesce_key(item)
        return None if key is None else (key, item.payload["delta"])

    def join(self, first: Any, last: Any, text: str) -> Any:
        return msgspec.structs.replace(first, payload={**first.payload, "delta": text})


SEGMENT_DELTAS: Final = _SegmentDeltas()
"""How a hub's items coalesce (see `coalesce_key`)."""


class SubscriberBuffer(BoundedBuffer[T]):
    """A subscriber's items: the rest of the hub's history to replay, then up to ``max_buffer`` live items.

    Held by the hub; its consumer-facing handle is `pipeline.fanout.hub.Subscription`.
    """

    __slots__ = (
        "__weakref__",
        "_error_traceback",
        "_history",
        "_paces",
        "_producer",
        "_replay_end",
        "_replay_position",
        "delivered",
        "ended",
        "error",
        "finished",
        "name",
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
        super().__init__(policy, max_buffer, SEGMENT_DELTAS)
        self._producer = producer
        self.name = name
        self.waits = policy in _WAITING
        """On `WouldBlock` from `offer_nowait` the producer waits for room; else it calls
        `overflow`."""
        self._paces = policy == "block"
        self._history = history
        self._replay_position = 0
        self._replay_end = len(history) if history is not None else 0
        self.reader: _Waker | None = None
        """Set by a consumer waiting for items; the buffer sets it (once) when items arrive or it ends."""
        self.delivered = 0
        self.state: SubscriberState = "active"
        self.error: BaseException | None = None
        self._error_traceback: TracebackType | None = None
        self.ended = False
        """No more items will arrive (those waiting can still be read)."""
        self.finished = False
        """The consumer has seen the end, or unsubscribed."""

    @property
    def max_buffer(self) -> int:
        return self.max_items

    # -- the producer's side -----------------------------------------------------------------------------

    def offer_nowait(self, item: T) -> bool:
        """Put an item in the buffer as the policy says, without waiting.

        Returns True when the producer should pace itself (a ``block`` buffer is now full: wait for room
        before the next item). Raises `WouldBlock` when the item cannot go in now (see `waits`).
        """
        self.offer(item)
        if self.reader is not None:
            self._wake_reader()
        return self._paces and len(self._entries) >= self.max_items

    def _wake_reader(self) -> None:
        reader = self.reader
        if reader is not None:
            self.reader = None  # set it once, not once per item that arrives before the reader runs
            reader.set()

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
        if self._entries:
            was_full = self.full
            item = self.take()
            self.delivered += 1
            if was_full:
                self._producer._wake_pump()
            return item
        return self._raise_end()

    def take_all_nowait(self) -> list[T]:
        """Everything waiting now (at least one item): the rest of the history, then the buffer.

        Raises as `take_nowait` does when nothing is waiting.
        """
        batch: list[T] = []
        if self._replay_position < self._replay_end:
            assert self._history is not None
            batch = self._history[self._replay_position : self._replay_end]
            self._replay_position = self._replay_end
            self._history = None
            self.delivered += len(batch)
        if self._entries:
            was_full = self.full
            taken = self.take_all()
            self.delivered += len(taken)
            if batch:
                batch.extend(taken)
            else:
                batch = taken
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
        self.clear()
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
            buffered=len(self._entries),
            replay_pending=self._replay_end - self._replay_position,
            delivered=self.delivered,
            coalesced=self.coalesced,
            dropped=self.dropped,
            state=self.state,
            error=self.error,
        )
