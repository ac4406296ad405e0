"""One web connection's edge over the log: a small bounded buffer and the connection's policy.

A filler task reads the log (``log.read``) into the buffer; the connection's sender takes everything
buffered at once. The log never waits for the connection; the buffer's policy decides what happens
when the client is slower than the response:

- ``block``: the filler stops reading the log; the client lags inside the log's retention, losslessly,
  and gets ``ResponseGone`` (with the first retained id) if trimming passes it. Across processes
  ``block`` never slows the producer: it means "lossless within retention".
- ``coalesce``: waiting ``SEGMENT_CONTENT`` deltas of one segment merge into one frame (its id is the
  last merged id, so a resume after it is exact); when nothing merges, as ``block``.
- ``drop``: the oldest buffered entry is discarded (the client sees a gap in the ids); for snapshot-like
  items only.
- ``disconnect`` / ``coalesce_or_disconnect``: as ``block`` / ``coalesce`` while the client reads (a
  client catching up from an old cursor is behind by design, and the log, not the edge, holds what it
  has not read); a client that stops reading is cut off by the endpoint's ``send_timeout``, one that
  falls behind retention by ``ResponseGone``; either can reconnect with ``Last-Event-ID``.

Caps: ``max_buffer`` entries and ``max_buffer_bytes`` bytes of items per connection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Final

import anyio
import msgspec

from pipeline._jsonenc import encode_json
from pipeline.fanout.serving._log import Entry

__all__ = ["DEFAULT_EDGE_MAX_BYTES", "Edge", "EdgeItem"]

DEFAULT_EDGE_MAX_BYTES: Final = 1024 * 1024
_COALESCING: Final = frozenset({"coalesce", "coalesce_or_disconnect"})


class EdgeItem:
    """A buffered entry; a coalesced run keeps its deltas as parts, joined once when taken."""

    __slots__ = ("decoded", "entry", "parts", "size")

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.size = len(entry.data) if entry.data is not None else 0
        self.decoded: dict[str, Any] | None = None
        self.parts: list[str] | None = None

    def segment(self) -> str | None:
        """The segment id if this is a plain text delta that may merge, else None."""
        if self.entry.data is None:
            return None
        if self.decoded is None:
            try:
                value = msgspec.json.decode(self.entry.data)
            except msgspec.DecodeError:
                return None
            if not isinstance(value, dict):
                return None
            self.decoded = value
        payload = self.decoded.get("payload")
        if (
            self.decoded.get("type") == "SEGMENT_CONTENT"
            and isinstance(payload, dict)
            and payload.keys() == {"delta"}
            and isinstance(payload["delta"], str)
        ):
            segment = self.decoded.get("segment_id")
            return segment if isinstance(segment, str) else None
        return None

    def merge(self, later: EdgeItem) -> None:
        """Take ``later``'s delta (and id) into this item."""
        assert self.decoded is not None
        assert later.decoded is not None
        if self.parts is None:
            self.parts = [self.decoded["payload"]["delta"]]
        self.parts.append(later.decoded["payload"]["delta"])
        self.size += later.size
        self.entry = Entry(later.entry.id, self.entry.data)

    def build(self) -> Entry:
        if self.parts is None:
            return self.entry
        assert self.decoded is not None
        merged = {**self.decoded, "payload": {"delta": "".join(self.parts)}}
        return Entry(self.entry.id, encode_json(merged))


class Edge:
    """The bounded buffer between one connection's log reader and its sender; see the module docs."""

    def __init__(self, *, policy: str, max_buffer: int, max_bytes: int = DEFAULT_EDGE_MAX_BYTES) -> None:
        self.policy = policy
        self.max_buffer = max_buffer
        self.max_bytes = max_bytes
        self.items: deque[EdgeItem] = deque()
        self.nbytes = 0
        self.done = False
        self.error: BaseException | None = None
        self._changed = anyio.Event()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _full(self) -> bool:
        return len(self.items) >= self.max_buffer or self.nbytes >= self.max_bytes

    async def fill(self, entries: AsyncIterator[Entry]) -> None:
        """Read ``entries`` into the buffer until the terminal entry, an error or an overflow."""
        try:
            async for entry in entries:
                if not await self._offer(EdgeItem(entry)) or entry.end:
                    break
        except Exception as exc:
            self.error = exc
        finally:
            self.done = True
            self._notify()
            aclose = getattr(entries, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()

    async def _offer(self, item: EdgeItem) -> bool:
        """Buffer ``item`` (merging or waiting as the policy says); False to stop reading."""
        if (
            self.items
            and self.policy in _COALESCING
            and not item.entry.end
            and self.nbytes + item.size <= self.max_bytes
        ):
            last = self.items[-1]
            segment = last.segment()
            if segment is not None and item.segment() == segment:
                last.merge(item)
                self.nbytes += item.size
                self._notify()
                return True
        while self._full():
            if self.policy == "drop":
                self._pop()
            else:
                await self._changed.wait()
        self.items.append(item)
        self.nbytes += item.size
        self._notify()
        return True

    def _pop(self) -> EdgeItem:
        item = self.items.popleft()
        self.nbytes -= item.size
        return item

    async def take(self) -> list[Entry] | None:
        """Everything buffered (coalesced runs built), or None when the buffer ended (see ``error``)."""
        while not self.items:
            if self.done:
                return None
            await self._changed.wait()
        taken = [item.build() for item in self.items]
        self.items.clear()
        self.nbytes = 0
        self._notify()
        return taken

    async def take_or_raise(self) -> list[Entry] | None:
        """As :meth:`take`, but the error that ended the buffer is raised, not kept in :attr:`error`."""
        taken = await self.take()
        if taken is None and self.error is not None:
            raise self.error
        return taken
