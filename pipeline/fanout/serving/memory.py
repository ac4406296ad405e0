"""The in-memory event log: the default backend, embedded in the process, no server.

Readers and producer share one process. Appends never wait: a reader only holds a cursor into the
response's retained entries (and a slice of at most `READ_BATCH` of them at a time), so a reader far
behind costs no memory of its own; when trimming passes its cursor it gets
`ResponseGone`.

Memory is bounded by the caps: each response keeps at most ``retention.max_items`` entries and
``retention.max_bytes`` bytes of items (the oldest are trimmed first; the newest entry is always kept);
the log keeps at most ``max_responses`` responses and ``max_total_bytes`` bytes of items, evicting the
oldest ended responses first (their ids then answer 410 Gone); creating a response when
``max_responses`` are all running raises `EventLogFull` (the routes answer 503
with ``Retry-After:`` `RETRY_AFTER_FULL`; ``check_create`` says so before). Ended responses are
kept for ``retention.ttl_after_end`` seconds; ids of expired responses are remembered (up to
``max_responses`` of them) to answer 410 rather than 404.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, Literal

import anyio

from pipeline.errors import (
    ConfigurationError,
    EventLogFull,
    ProducerLost,
    ResponseExists,
    ResponseGone,
    ResponseNotFound,
    ServingError,
)
from pipeline.fanout.serving._log import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_RETENTION,
    MAX_ITEM_BYTES,
    Entry,
    ResponseState,
    ResponseStatus,
    Retention,
    check_lookup_id,
    check_response_id,
)

__all__ = [
    "DEFAULT_MAX_RESPONSES",
    "DEFAULT_MAX_TOTAL_BYTES",
    "READ_BATCH",
    "RETRY_AFTER_FULL",
    "MemoryEventLog",
]

DEFAULT_MAX_RESPONSES: Final = 1_000
DEFAULT_MAX_TOTAL_BYTES: Final = 256 * 1024 * 1024
READ_BATCH: Final = 256
"""A reader takes at most this many entries from the log at a time."""
RETRY_AFTER_FULL: Final = 5
"""Seconds a start refused for a full log (``max_responses`` running) is told to wait before retrying."""


class _Response:
    """One response's retained entries and state."""

    __slots__ = (
        "alive_until",
        "changed",
        "created",
        "ended_at",
        "entries",
        "head",
        "last_id",
        "meta",
        "nbytes",
        "response_id",
        "state",
        "stop",
        "stop_requested",
        "updated",
        "watched",
    )

    def __init__(self, response_id: str, meta: dict[str, Any], now: float, alive_until: float) -> None:
        self.response_id = response_id
        self.meta = meta
        self.state: ResponseState = "running"
        self.entries: list[Entry] = []
        self.head = 0  # entries[head:] are retained; compacted when the dead prefix is half the list
        self.nbytes = 0
        self.last_id = 0
        self.created = now
        self.updated = now
        self.ended_at: float | None = None
        self.alive_until = alive_until  # loop time: past it without a heartbeat, the producer is lost
        self.changed = anyio.Event()
        self.stop = anyio.Event()  # set on a stop request or at the end
        self.stop_requested = False
        self.watched = False  # a waiting reader keeps the heartbeat deadline (see MemoryEventLog.read)

    @property
    def first_id(self) -> int:
        return self.entries[self.head].id if self.head < len(self.entries) else self.last_id + 1

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        self.last_id = entry.id
        if entry.data is not None:
            self.nbytes += len(entry.data)

    def trim(self, retention: Retention) -> int:
        """Drop the oldest entries over the caps (keeping the newest); return the bytes freed."""
        entries = self.entries
        freed = 0
        while len(entries) - self.head > 1 and (
            len(entries) - self.head > retention.max_items or self.nbytes > retention.max_bytes
        ):
            data = entries[self.head].data
            if data is not None:
                self.nbytes -= len(data)
                freed += len(data)
            self.head += 1
        if self.head > 64 and self.head * 2 > len(entries):
            del entries[: self.head]
            self.head = 0
        return freed

    def notify(self) -> None:
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def status(self) -> ResponseStatus:
        return ResponseStatus(
            response_id=self.response_id,
            state=self.state,
            last_id=self.last_id,
            first_id=self.first_id,
            created=self.created,
            updated=self.updated,
            meta=self.meta,
        )


class MemoryEventLog:
    """An `EventLog` in this process's memory; see the module docs.

    Args:
        retention: per-response caps and how long an ended response stays readable.
        max_responses: cap on the number of responses kept.
        max_total_bytes: cap on the bytes of all responses kept.
        heartbeat_timeout: seconds without an append or heartbeat after which readers of a running
            response get `ProducerLost`.
        clock: unix seconds, for timestamps and retention (tests pass a fake one).

    Raises:
        ConfigurationError: a cap below 1, or a ``heartbeat_timeout`` that is not positive.
    """

    def __init__(
        self,
        *,
        retention: Retention = DEFAULT_RETENTION,
        max_responses: int = DEFAULT_MAX_RESPONSES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_responses < 1:
            raise ConfigurationError(f"max_responses must be at least 1, got {max_responses}")
        if max_total_bytes < 1:
            raise ConfigurationError(f"max_total_bytes must be at least 1, got {max_total_bytes}")
        if not heartbeat_timeout > 0:
            raise ConfigurationError(f"heartbeat_timeout must be positive, got {heartbeat_timeout}")
        self.retention = retention
        self.max_responses = max_responses
        self.max_total_bytes = max_total_bytes
        self.heartbeat_timeout = heartbeat_timeout
        self._clock = clock
        self._responses: dict[str, _Response] = {}
        self._ended: OrderedDict[str, float] = OrderedDict()  # in order of ending (= of expiry)
        self._gone: OrderedDict[str, None] = OrderedDict()  # expired or evicted ids: 410, not 404
        self._nbytes = 0
        self._closed = False

    # -- housekeeping ---------------------------------------------------------------------------

    def _expire(self) -> None:
        deadline = self._clock() - self.retention.ttl_after_end
        while self._ended:
            response_id, ended_at = next(iter(self._ended.items()))
            if ended_at > deadline:
                break
            self._forget(response_id)

    def _forget(self, response_id: str) -> None:
        self._ended.pop(response_id, None)
        response = self._responses.pop(response_id)
        self._nbytes -= response.nbytes
        response.notify()  # readers waiting on it see it gone
        self._gone[response_id] = None
        while len(self._gone) > self.max_responses:
            self._gone.popitem(last=False)

    def _evict_for_room(self) -> None:
        while self._ended and (
            len(self._responses) >= self.max_responses or self._nbytes > self.max_total_bytes
        ):
            self._forget(next(iter(self._ended)))

    def _get(self, response_id: str) -> _Response:
        check_lookup_id(response_id)
        if self._closed:
            raise ServingError("the event log is closed", response_id=response_id)
        self._expire()
        response = self._responses.get(response_id)
        if response is None:
            if response_id in self._gone:
                raise ResponseGone(
                    f"response {response_id!r} ended and is no longer retained", response_id=response_id
                )
            raise ResponseNotFound(f"no response {response_id!r}", response_id=response_id)
        return response

    def _running(self, response_id: str) -> _Response:
        response = self._get(response_id)
        if response.state != "running":
            raise ResponseGone(
                f"response {response_id!r} has ended ({response.state}); nothing can be added to it",
                response_id=response_id,
                first_id=response.first_id,
            )
        return response

    def _alive(self, response: _Response) -> None:
        response.updated = self._clock()
        response.alive_until = anyio.current_time() + self.heartbeat_timeout

    # -- the producer's side --------------------------------------------------------------------

    def _full(self, response_id: str) -> EventLogFull:
        return EventLogFull(
            f"no room for a new response: {self.max_responses} responses are running (max_responses);"
            f" retry in {RETRY_AFTER_FULL} s",
            response_id=response_id,
            retry_after=RETRY_AFTER_FULL,
        )

    async def check_create(self, response_id: str) -> None:
        """Raise what `create` would raise now: see `EventLog.check_create`."""
        check_response_id(response_id)
        self._expire()
        if response_id in self._responses or response_id in self._gone:
            raise ResponseExists(f"response {response_id!r} already exists", response_id=response_id)
        if len(self._responses) - len(self._ended) >= self.max_responses:  # create evicts ended ones
            raise self._full(response_id)

    async def create(self, response_id: str, *, meta: Mapping[str, Any] = {}) -> None:
        """Start a response: see `EventLog.create`.

        Args:
            response_id: the new response's id.
            meta: kept with the response and shown in its status (such as its owner).
        """
        check_response_id(response_id)
        if self._closed:
            raise ServingError("the event log is closed", response_id=response_id)
        self._expire()
        if response_id in self._responses or response_id in self._gone:
            raise ResponseExists(f"response {response_id!r} already exists", response_id=response_id)
        self._evict_for_room()
        if len(self._responses) >= self.max_responses:
            raise self._full(response_id)
        self._responses[response_id] = _Response(
            response_id, dict(meta), self._clock(), anyio.current_time() + self.heartbeat_timeout
        )

    async def append(self, response_id: str, items: Sequence[bytes]) -> int:
        """Append items and return the last id: see `EventLog.append`.

        Args:
            response_id: the running response.
            items: the items' bytes (JSON), in order.
        """
        response = self._running(response_id)
        for data in items:
            if len(data) > MAX_ITEM_BYTES:
                raise ServingError(
                    f"an item of {len(data)} bytes for response {response_id!r} is over the"
                    f" {MAX_ITEM_BYTES}-byte cap (MAX_ITEM_BYTES)",
                    response_id=response_id,
                )
        if not items:
            return response.last_id
        before = response.nbytes
        next_id = response.last_id
        for data in items:
            next_id += 1
            response.add(Entry(next_id, data))
        response.trim(self.retention)
        self._nbytes += response.nbytes - before
        self._alive(response)
        response.notify()
        if self._nbytes > self.max_total_bytes:
            self._evict_for_room()
        return response.last_id

    async def end(
        self,
        response_id: str,
        *,
        error: Mapping[str, Any] | None = None,
        state: Literal["done", "failed", "stopped"] = "done",
    ) -> None:
        """Append the terminal entry: see `EventLog.end`.

        Args:
            response_id: the running response.
            error: the error the response ended with, as JSON-ready data; None: none.
            state: how it ended: ``done``, ``failed`` or ``stopped``.
        """
        response = self._running(response_id)
        response.add(Entry(response.last_id + 1, None, True, dict(error) if error is not None else None))
        before = response.nbytes
        response.trim(self.retention)
        self._nbytes += response.nbytes - before
        response.state = state
        response.updated = response.ended_at = self._clock()
        self._ended[response_id] = response.ended_at
        response.stop.set()
        response.notify()

    async def heartbeat(self, response_id: str) -> None:
        """Mark the producer alive: see `EventLog.heartbeat`."""
        self._alive(self._running(response_id))

    async def request_stop(self, response_id: str) -> None:
        """Ask the producer to stop: see `EventLog.request_stop`."""
        response = self._get(response_id)
        if response.state == "running":
            response.stop_requested = True
            response.stop.set()

    async def stop_requested(self, response_id: str) -> AsyncIterator[None]:
        """Yield once when a stop is requested: see `EventLog.stop_requested`."""
        response = self._get(response_id)
        await response.stop.wait()
        if response.stop_requested and response.state == "running":
            yield None

    # -- the readers' side ----------------------------------------------------------------------

    async def read(self, response_id: str, *, after: int = 0) -> AsyncIterator[Entry]:
        """Entries after an id, then live ones: see `EventLog.read`.

        Args:
            response_id: the response.
            after: the last id the reader has; 0: from the start.

        Raises:
            ConfigurationError: ``after`` is negative or past the last id.
        """
        if after < 0:
            raise ConfigurationError(f"a cursor is an entry id >= 0, got {after}")
        response = self._get(response_id)
        if after > response.last_id:
            raise ConfigurationError(
                f"cursor {after} is past the last entry ({response.last_id}) of response {response_id!r}"
            )
        cursor = after
        while True:
            if self._closed or self._responses.get(response_id) is not response:
                response = self._get(response_id)  # closed, forgotten: raises
            while cursor < response.last_id:  # the newest entry is always retained: never an empty batch
                batch = self._retained(response, cursor)
                for entry in batch:
                    yield entry
                cursor = batch[-1].id
                if batch[-1].end:
                    return
            if response.state != "running":
                return
            if response.watched:  # the usual case, inline: another reader keeps the heartbeat deadline
                await response.changed.wait()
            else:
                await self._wait_for_change(response)

    def _retained(self, response: _Response, cursor: int) -> list[Entry]:
        """The next entries after ``cursor``; raises ``ResponseGone`` when trimming passed it."""
        first_id = response.first_id
        if cursor < first_id - 1:
            raise ResponseGone(
                f"entries {cursor + 1} to {first_id - 1} of response {response.response_id!r} are no"
                f" longer retained; the oldest retained is {first_id}",
                response_id=response.response_id,
                first_id=first_id,
            )
        start = response.head + cursor + 1 - first_id
        return response.entries[start : start + READ_BATCH]

    async def _wait_for_change(self, response: _Response) -> None:
        """Until the response changes. One waiting reader keeps the producer's heartbeat deadline for
        all of them, so an append wakes the others without a timer each."""
        changed = response.changed
        if response.watched:
            await changed.wait()
            return
        wait = response.alive_until - anyio.current_time()
        if wait <= 0:  # a watcher that times out wakes the others, and each of them checks here
            raise ProducerLost(
                f"the producer of response {response.response_id!r} sent no heartbeat for"
                f" {self.heartbeat_timeout} s",
                response_id=response.response_id,
            )
        response.watched = True
        try:
            with anyio.move_on_after(wait):
                await changed.wait()
        finally:
            response.watched = False
            if not changed.is_set():  # timed out, or this reader left: another one watches now
                response.notify()

    async def status(self, response_id: str) -> ResponseStatus | None:
        """The response's status, or None: see `EventLog.status`."""
        try:
            return self._get(response_id).status()
        except (ResponseGone, ResponseNotFound):
            return None

    async def active(self) -> list[ResponseStatus]:
        """Running and retained responses, oldest first: see `EventLog.active`."""
        if self._closed:
            return []
        self._expire()
        return sorted((r.status() for r in self._responses.values()), key=lambda s: s.created)

    async def aclose(self) -> None:
        """Release connections: see `EventLog.aclose`."""
        self._closed = True
        for response in self._responses.values():
            response.stop.set()
            response.notify()
