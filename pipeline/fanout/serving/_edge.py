"""One web connection's edge over the log: a small bounded buffer and the connection's policy.

A filler task reads the log (``log.read``) into the buffer; the connection's sender takes everything
buffered at once. The log never waits for the connection; the buffer's policy decides what happens
when the client is slower than the response:

- ``block``: the filler stops reading the log; the client lags inside the log's retention, losslessly,
  and gets ``ResponseGone`` (with the first retained id) if trimming passes it. Across processes
  ``block`` never slows the producer: it means "lossless within retention".
- ``coalesce``: when the buffer is full, a ``SEGMENT_CONTENT`` delta merges into the waiting one of its
  segment (the merged frame's id is the last merged id, so a resume after it is exact); when nothing
  merges, as ``block``.
- ``drop``: the oldest buffered entry is discarded (the client sees a gap in the ids); for snapshot-like
  items only.
- ``disconnect`` / ``coalesce_or_disconnect``: as ``block`` / ``coalesce`` while the client reads (a
  client catching up from an old cursor is behind by design, and the log, not the edge, holds what it
  has not read); a client that stops reading is cut off by the endpoint's ``send_timeout``, one that
  falls behind retention by ``ResponseGone``; either can reconnect with ``Last-Event-ID``.

The buffer is the hub's (`pipeline.fanout._buffer.BoundedBuffer`). Caps: ``max_buffer``
entries and ``max_bytes`` bytes of items per connection (one entry may pass the byte cap).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import anyio
import msgspec
from anyio import WouldBlock

from pipeline._jsonenc import encode_json
from pipeline.fanout._buffer import BoundedBuffer, CoalesceKey, Policy
from pipeline.fanout.serving._log import Entry
from pipeline.models import SegmentEventType

__all__ = ["DEFAULT_EDGE_MAX_BYTES", "ENTRY_DELTAS", "Edge"]

DEFAULT_EDGE_MAX_BYTES: Final = 1024 * 1024

_CONTENT: Final = SegmentEventType.CONTENT.value


def _decoded(entry: Entry) -> dict[str, Any] | None:
    if entry.data is None:
        return None
    try:
        value = msgspec.json.decode(entry.data)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


class _EntryDeltas:
    """Log entries merge when each is a plain ``SEGMENT_CONTENT`` delta (``payload`` only ``delta``)
    of one segment; the merged entry has the last one's id."""

    __slots__ = ()

    def split(self, entry: Entry) -> tuple[CoalesceKey, str] | None:
        value = _decoded(entry)
        if value is None or value.get("type") != _CONTENT:
            return None
        payload = value.get("payload")
        segment = value.get("segment_id")
        if not (isinstance(payload, dict) and payload.keys() == {"delta"} and isinstance(segment, str)):
            return None
        delta = payload["delta"]
        return ((segment, SegmentEventType.CONTENT, None), delta) if isinstance(delta, str) else None

    def join(self, first: Entry, last: Entry, text: str) -> Entry:
        value = _decoded(first)
        assert value is not None
        return Entry(last.id, encode_json({**value, "payload": {"delta": text}}))


ENTRY_DELTAS: Final = _EntryDeltas()


def _entry_size(entry: Entry) -> int:
    return len(entry.data) if entry.data is not None else 0


class Edge:
    """The bounded buffer between one connection's log reader and its sender; see the module docs."""

    def __init__(self, *, policy: Policy, max_buffer: int, max_bytes: int = DEFAULT_EDGE_MAX_BYTES) -> None:
        self.buffer: BoundedBuffer[Entry] = BoundedBuffer(
            policy, max_buffer, ENTRY_DELTAS, max_bytes=max_bytes, size_of=_entry_size
        )
        self.done = False
        self.error: BaseException | None = None
        self._changed = anyio.Event()

    def __iter__(self) -> Iterator[Entry]:
        """What waits, to look at (nothing is taken)."""
        return iter(self.buffer)

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def fill(self, entries: AsyncIterator[Entry]) -> None:
        """Read ``entries`` into the buffer until the terminal entry or an error."""
        try:
            async for entry in entries:
                await self._offer(entry)
                if entry.end:
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

    async def _offer(self, entry: Entry) -> None:
        """Buffer ``entry`` as the policy says, waiting while the buffer is full."""
        while True:
            try:
                self.buffer.offer(entry)
            except WouldBlock:
                await self._changed.wait()
            else:
                self._notify()
                return

    async def take(self) -> list[Entry] | None:
        """Everything buffered (coalesced runs built), or None when the buffer ended (see ``error``)."""
        while not len(self.buffer):
            if self.done:
                return None
            await self._changed.wait()
        taken = self.buffer.take_all()
        self._notify()
        return taken

    async def take_or_raise(self) -> list[Entry] | None:
        """As `take`, but the error that ended the buffer is raised, not kept in `error`."""
        taken = await self.take()
        if taken is None and self.error is not None:
            raise self.error
        return taken
