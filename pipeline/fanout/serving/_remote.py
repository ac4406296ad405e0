"""What the server-backed logs (Redis, NATS) share: retries within a bound, and resumable reads.

A read catches up from the server in batches of at most `READ_BATCH` entries; once caught up, it
waits on the log's *tail* of that response: one blocking poll per response per process, whichever of its
waiting readers runs it (no background task), with the entries it brings kept in a bounded cache
(`TAIL_MAX_ITEMS`, `TAIL_MAX_BYTES`) that every caught-up reader takes from. A thousand
readers of one response in one process cost one poll, not a thousand. A reader that falls behind the
cache catches up from the server again, where trimming can answer ``ResponseGone``: a reader far behind
holds no memory of its own, and its edge's policy (coalesce, drop, disconnect) applies to what it reads.

Liveness without clocks shared across machines: the tail takes the producer as lost when, for
``heartbeat_timeout`` seconds of this process's monotonic clock, neither a new entry nor a new heartbeat
(a counter the producer bumps) was seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Final, TypeVar

import anyio

from pipeline.errors import (
    ConfigurationError,
    EventLogUnavailable,
    ProducerLost,
    ResponseGone,
    ServingError,
)
from pipeline.fanout.serving._log import Entry, ResponseState

__all__ = ["READ_BATCH", "TAIL_MAX_BYTES", "TAIL_MAX_ITEMS", "RemoteLogBase", "Snapshot"]

READ_BATCH: Final = 256
"""A catch-up read takes at most this many entries from the server at a time."""
TAIL_MAX_ITEMS: Final = 1024
TAIL_MAX_BYTES: Final = 4 * 1024 * 1024
"""Caps of a tail's cache of recent entries (the newest are kept)."""
DEFAULT_RETRY_FOR: Final = 10.0
"""Seconds an operation is retried while the server is unreachable before ``EventLogUnavailable``."""

T = TypeVar("T")


class Snapshot:
    """A response's state and the entries after a cursor, as one consistent read of the server."""

    __slots__ = ("entries", "first", "last", "state")

    def __init__(self, state: ResponseState, first: int, last: int, entries: list[Entry]) -> None:
        self.state = state
        self.first = first
        self.last = last
        self.entries = entries


class _Tail:
    """The newest entries of one response in this process, and who polls for more."""

    __slots__ = (
        "base",
        "beats",
        "changed",
        "cursor",
        "entries",
        "error",
        "failing_since",
        "nbytes",
        "polling",
        "progress_at",
        "readers",
    )

    def __init__(self, cursor: int, now: float) -> None:
        self.entries: list[Entry] = []
        self.base = cursor + 1  # id of entries[0]
        self.cursor = cursor  # id of the last entry seen
        self.nbytes = 0
        self.beats: object = None
        self.progress_at = now
        self.failing_since: float | None = None
        self.error: ServingError | None = None
        self.polling = False
        self.readers = 0
        self.changed = anyio.Event()

    def notify(self) -> None:
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def add(self, entries: list[Entry]) -> None:
        if entries[0].id != self.cursor + 1:  # trimmed faster than polled: restart the cache there
            self.entries.clear()
            self.nbytes = 0
            self.base = entries[0].id
        for entry in entries:
            self.entries.append(entry)
            if entry.data is not None:
                self.nbytes += len(entry.data)
        self.cursor = entries[-1].id
        drop = 0
        while len(self.entries) - drop > 1 and (
            len(self.entries) - drop > TAIL_MAX_ITEMS or self.nbytes > TAIL_MAX_BYTES
        ):
            data = self.entries[drop].data
            self.nbytes -= len(data) if data is not None else 0
            drop += 1
        if drop:
            del self.entries[:drop]
            self.base += drop

    def since(self, cursor: int) -> list[Entry]:
        start = cursor + 1 - self.base
        return self.entries[start : start + READ_BATCH] if start >= 0 else []


class RemoteLogBase:
    """Reads and retries over a backend's four primitives (see the subclasses)."""

    server_name = "the server"
    transient: tuple[type[BaseException], ...] = (OSError,)
    """What is retried: the server unreachable, or refusing for a while (`refusals`)."""
    refusals: tuple[type[BaseException], ...] = ()
    """The server's answers that say "not now" (out of memory, a failover): retried like an outage."""

    def __init__(self, *, heartbeat_timeout: float, retry_for: float) -> None:
        if not heartbeat_timeout > 0:
            raise ConfigurationError(f"heartbeat_timeout must be positive, got {heartbeat_timeout}")
        if not retry_for >= 0:
            raise ConfigurationError(f"retry_for must be a number of seconds >= 0, got {retry_for}")
        self.heartbeat_timeout = heartbeat_timeout
        self.retry_for = retry_for
        self._tails: dict[str, _Tail] = {}
        self._closed = False

    # -- what a backend provides ----------------------------------------------------------------

    async def _snapshot(self, response_id: str, after: int, count: int) -> Snapshot:
        """State plus at most ``count`` retained entries with id > ``after``; raises ResponseNotFound
        or ResponseGone (expired)."""
        raise NotImplementedError

    async def _poll(self, response_id: str, after: int, wait: float) -> tuple[list[Entry], object]:
        """Entries with id > ``after``, waiting up to ``wait`` seconds for one; with none, also a
        token that changes when the producer heartbeats."""
        raise NotImplementedError

    # -- retries --------------------------------------------------------------------------------

    async def _retry(self, what: str, response_id: str, op: Callable[[], Awaitable[T]]) -> T:
        """``op()``, retried with backoff while the server is unreachable, for at most ``retry_for`` s."""
        deadline: float | None = None
        delay = 0.02
        tries = 0
        while True:
            tries += 1
            try:
                return await op()
            except self.transient as exc:
                now = anyio.current_time()
                if deadline is None:
                    deadline = now + self.retry_for
                if now >= deadline or self._closed:
                    raise EventLogUnavailable(
                        f"{what} of response {response_id!r} failed: {self.server_name} {self._trouble(exc)}"
                        f" for {self.retry_for} s ({tries} tries): {exc}",
                        response_id=response_id,
                    ) from exc
                await anyio.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 0.5)

    def _trouble(self, exc: BaseException) -> str:
        return "refused the command" if isinstance(exc, self.refusals) else "was unreachable"

    # -- reads ----------------------------------------------------------------------------------

    async def read(self, response_id: str, *, after: int = 0) -> AsyncIterator[Entry]:
        if after < 0:
            raise ConfigurationError(f"a cursor is an entry id >= 0, got {after}")
        snapshot = await self._read_batch(response_id, after)
        if after > snapshot.last:
            raise ConfigurationError(
                f"cursor {after} is past the last entry ({snapshot.last}) of response {response_id!r}"
            )
        reading = _Reading(
            response_id,
            after,
            snapshot,
            tails=self._tails,
            fetch=partial(self._read_batch, response_id),
            wait=partial(self._wait, response_id),
        )
        try:
            while (batch := await reading.next_batch()) is not None:
                for entry in batch:
                    yield entry
                if batch[-1].end:
                    return
        finally:
            reading.leave()

    async def _read_batch(self, response_id: str, after: int) -> Snapshot:
        """The server's next batch of entries after ``after`` (retried while the server is unreachable)."""
        return await self._retry(
            "a read", response_id, lambda: self._snapshot(response_id, after, READ_BATCH)
        )

    async def _wait(self, response_id: str, tail: _Tail) -> None:
        """Until the tail changes: poll the server if no other reader is polling, else wait for it."""
        if tail.polling:
            await tail.changed.wait()
            return
        tail.polling = True
        try:
            await self._poll_once(response_id, tail)
        finally:
            tail.polling = False
            tail.notify()

    async def _poll_once(self, response_id: str, tail: _Tail) -> None:
        if self._closed:
            tail.error = ServingError("the event log is closed", response_id=response_id)
            return
        wait = min(1.0, self.heartbeat_timeout / 4)
        now = anyio.current_time()
        try:
            entries, beats = await self._poll(response_id, tail.cursor, wait)
        except ServingError as exc:
            tail.error = exc
            return
        except self.transient as exc:
            if tail.failing_since is None:
                tail.failing_since = now
            if now - tail.failing_since >= self.retry_for or self._closed:
                tail.error = EventLogUnavailable(
                    f"reading response {response_id!r} failed: {self.server_name} {self._trouble(exc)} for"
                    f" {self.retry_for} s: {exc}",
                    response_id=response_id,
                )
                return
            await anyio.sleep(min(0.2, self.retry_for / 10 + 0.01))
            return
        now = anyio.current_time()
        if tail.failing_since is not None:  # the server is back: give the producer its full timeout
            tail.failing_since = None
            tail.progress_at = now
        if entries:
            tail.add(entries)
            tail.progress_at = now
        elif beats != tail.beats:
            tail.beats = beats
            tail.progress_at = now
        elif now - tail.progress_at >= self.heartbeat_timeout:
            tail.error = ProducerLost(
                f"the producer of response {response_id!r} sent no heartbeat for {self.heartbeat_timeout} s",
                response_id=response_id,
            )


class _Reading:
    """One reader's place in a response: its cursor, the snapshot it has yet to read, the tail it follows.

    It catches up from the server in snapshots, then follows this process's tail of the response; a
    reader that falls behind the tail's cache catches up from the server again.
    """

    __slots__ = ("cursor", "fetch", "following", "response_id", "snapshot", "tail", "tails", "wait")

    def __init__(
        self,
        response_id: str,
        after: int,
        snapshot: Snapshot,
        *,
        tails: dict[str, _Tail],
        fetch: Callable[[int], Awaitable[Snapshot]],
        wait: Callable[[_Tail], Awaitable[None]],
    ) -> None:
        """``tails`` are the log's shared tails (by response id), ``fetch(cursor)`` gets the server's
        entries after a cursor, ``wait(tail)`` waits until the tail changes."""
        self.response_id = response_id
        self.tails = tails
        self.fetch = fetch
        self.wait = wait
        self.cursor = after
        self.snapshot: Snapshot | None = snapshot
        self.tail: _Tail | None = None
        self.following = False
        if snapshot.state == "running":
            # Join (or start) this process's tail of the response at once, at the live edge: readers
            # starting together share its polls instead of each catching up from the server.
            self._join(snapshot.last)

    async def next_batch(self) -> list[Entry] | None:
        """The next entries after the cursor (waiting for them), or None at the end of the response."""
        while True:
            if not self.following:
                batch = await self._from_server()
                if batch is None:
                    return None
                if batch:
                    return self._advance(batch)
                self.following = True
            # Following the tail, inline (every caught-up reader wakes here on each new entry).
            tail = self.tail or self._join(self.cursor)
            live = tail.since(self.cursor)
            if live:
                return self._advance(live)
            if self.cursor + 1 < tail.base:
                self.following = False  # behind the tail's cache: catch up from the server
            elif tail.error is not None:
                raise tail.error
            elif tail.polling:  # the usual case: another reader polls for all of them
                await tail.changed.wait()
            else:
                await self.wait(tail)

    async def _from_server(self) -> list[Entry] | None:
        """The snapshot's entries, fetched unless the tail holds the cursor's next entry; ``[]``: follow
        the tail; None: the response has ended."""
        snapshot = self.snapshot
        if snapshot is None:
            if not self._off_tail():
                return []
            snapshot = await self.fetch(self.cursor)
        self.snapshot = None
        self._check_retained(snapshot.first)
        if snapshot.entries:
            return snapshot.entries
        return [] if snapshot.state == "running" else None

    def _off_tail(self) -> bool:
        """The tail's cache does not hold the cursor's next entry: ask the server."""
        shared = self.tail or self.tails.get(self.response_id)
        return shared is None or shared.base > self.cursor + 1 or shared.error is not None

    def _check_retained(self, first: int) -> None:
        if self.cursor < first - 1:
            raise ResponseGone(
                f"entries {self.cursor + 1} to {first - 1} of response {self.response_id!r} are no"
                f" longer retained; the oldest retained is {first}",
                response_id=self.response_id,
                first_id=first,
            )

    def _advance(self, batch: list[Entry]) -> list[Entry]:
        self.cursor = batch[-1].id
        return batch

    def _join(self, cursor: int) -> _Tail:
        tails = self.tails
        tail = tails.get(self.response_id)
        if tail is None:
            tail = tails[self.response_id] = _Tail(cursor, anyio.current_time())
        tail.readers += 1
        self.tail = tail
        return tail

    def leave(self) -> None:
        """Stop following the tail; the last reader to leave drops it."""
        tail = self.tail
        if tail is not None:
            tail.readers -= 1
            if tail.readers == 0 and self.tails.get(self.response_id) is tail:
                del self.tails[self.response_id]
