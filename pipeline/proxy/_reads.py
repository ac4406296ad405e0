"""The upstream body handed on one network read at a time, not one HTTP chunk at a time.

A model server writes every SSE event as its own HTTP chunk, and httpx yields each chunk on its own: when
the proxy falls behind a fast upstream, one socket read holds a hundred events, and handling them one by
one costs a rewrite call, an ASGI ``send`` and a socket write each. `forward_reads` hands on
everything the upstream iterator produced without waiting (what one read brought) in one call instead.
It adds no latency: a batch ends exactly where the reader would wait for the network.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    import httpx
    from starlette.types import Send

    from pipeline.proxy.ops import Metrics

__all__ = ["FEED_SLICE", "MAX_PENDING", "RelayCore", "feed_sliced", "forward_reads", "relay_upstream"]

MAX_PENDING: Final = 1024 * 1024
"""Bytes read ahead of the handler at most (the upstream is not read further until it catches up)."""
FEED_SLICE: Final = 16 * 1024
"""The most upstream bytes a core is fed between two awaits: a larger read (a fast upstream's backlog,
a stream of 25,000 calls in one piece) is fed in slices of this size, with a checkpoint after each, so
that one client's huge answer cannot hold the event loop (and the other clients) for seconds. A paced
stream's reads are far smaller and take the one-call path."""


async def feed_sliced(
    feed: Callable[[bytes], bytes], data: bytes, emit: Callable[[bytes], Awaitable[bool]]
) -> bool:
    """``feed(data)`` in slices of at most `FEED_SLICE` bytes, handing each result to ``emit``
    (which returns ``False`` to stop) and yielding to the event loop between two slices."""
    if len(data) <= FEED_SLICE:
        return await emit(feed(data))
    view = memoryview(data)
    for start in range(0, len(data), FEED_SLICE):
        if start:
            await anyio.lowlevel.checkpoint()
        if not await emit(feed(bytes(view[start : start + FEED_SLICE]))):
            return False
    return True


class _Reader:
    """Reads ``body`` in its own task into ``parts``, waking the handler's side when there is news.

    On asyncio the handler's side waits on a bare future, because a paced stream would make an
    ``anyio.Event`` per read and that shows in the proxy's CPU per chunk (``benchmarks/bench_proxy``);
    elsewhere (trio) it waits on an ``anyio.Event``.
    """

    __slots__ = (
        "_event",
        "_loop",
        "_waiter",
        "body",
        "done",
        "error",
        "max_pending",
        "parts",
        "room",
        "size",
    )

    def __init__(self, body: AsyncIterable[bytes], max_pending: int) -> None:
        self.body = body
        self.max_pending = max_pending
        self.parts: list[bytes] = []
        self.size = 0
        self.done = False
        self.error: Exception | None = None
        self.room: anyio.Event | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._waiter: asyncio.Future[None] | None = None
        self._event: anyio.Event | None = None

    async def run(self) -> None:
        try:
            async for data in self.body:
                if not data:
                    continue
                self.parts.append(data)
                self.size += len(data)
                self._wake()
                if self.size >= self.max_pending:
                    self.room = anyio.Event()
                    await self.room.wait()
        except Exception as exc:  # handed to the handler's side, after what came before it
            self.error = exc
        finally:
            self.done = True
            self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            if not self._waiter.done():
                self._waiter.set_result(None)
        elif self._event is not None:
            self._event.set()

    async def news(self) -> None:
        """Wait until ``parts`` grows or the body ends (only when neither is so now)."""
        if self._loop is not None:
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        else:
            self._event = anyio.Event()
            try:
                await self._event.wait()
            finally:
                self._event = None

    def take(self) -> bytes:
        data = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self.parts.clear()
        self.size = 0
        if self.room is not None:
            self.room.set()
            self.room = None
        return data


async def forward_reads(
    body: AsyncIterable[bytes],
    handle: Callable[[bytes], Awaitable[bool]],
    *,
    max_pending: int = MAX_PENDING,
) -> None:
    """Call ``handle`` with all the bytes ``body`` yielded since its last call, until ``body`` ends or
    ``handle`` returns ``False``.

    ``body`` is read in a task of its own, so that while ``handle`` sends, the next read is already
    waiting; at most ``max_pending`` bytes are read ahead. An exception of ``body`` is raised here after
    every byte before it was handled (nothing received is lost); an exception of ``handle`` stops the
    reading and is raised as it is.
    """
    reader = _Reader(body, max_pending)
    failure: Exception | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader.run)
        try:
            while True:
                if reader.parts:
                    if not await handle(reader.take()):
                        break
                elif reader.done:
                    failure = reader.error
                    break
                else:
                    await reader.news()
        except Exception as exc:
            failure = exc
        tasks.cancel_scope.cancel()
    if failure is not None:
        raise failure


class RelayCore(Protocol):
    """What `relay_upstream` drives: upstream bytes in, the client's bytes out, never raising."""

    @property
    def ended(self) -> bool:
        """An error event has ended the answer."""
        ...

    def feed(self, data: bytes) -> bytes: ...
    def finish(self) -> bytes: ...
    def fail(self, error: Mapping[str, Any]) -> bytes: ...


async def relay_upstream(upstream: httpx.Response, core: RelayCore, send: Send, metrics: Metrics) -> bytes:
    """Send what ``core`` makes of each upstream read as the next body part, timing each read into the
    added-latency histogram; return the answer's last part (the error event that ended it, or what
    ``core.finish`` or, when the upstream broke off, ``core.fail`` gives)."""
    import httpx

    from pipeline.proxy._shared import cut_stream_error

    clock = time.perf_counter
    last = b""

    async def emit(piece: bytes) -> bool:
        nonlocal last
        if core.ended:
            last = piece  # an error event ended the answer: piece is its last part
            return False
        if piece:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        return True

    async def forward(data: bytes) -> bool:
        nonlocal last
        received = clock()
        if len(data) > FEED_SLICE:
            if not await feed_sliced(core.feed, data, emit):
                return False
        else:  # a paced stream's small read, inline: the slicing's await shows in bench_proxy at 50 streams
            piece = core.feed(data)
            if core.ended:
                last = piece  # an error event ended the answer: piece is its last part
                return False
            if piece:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        metrics.added_latency(clock() - received)
        return True

    encoding = upstream.headers.get("content-encoding", "identity").lower()
    body = upstream.aiter_raw() if encoding in ("", "identity") else upstream.aiter_bytes()
    try:
        await forward_reads(body, forward)
    except httpx.HTTPError as exc:
        return core.fail(cut_stream_error(exc))
    return last if core.ended else core.finish()
