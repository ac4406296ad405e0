"""The lifecycle of served responses: start detached from every client, stop, list, retention.

::

    log = MemoryEventLog(retention=Retention(ttl_after_end=600))
    async with ResponseManager(log) as manager:          # e.g. in a Starlette lifespan
        response_id = await manager.start(lambda: make_source(request))
        ...                                              # readers: log.read(response_id, after=cursor)

A response runs in a task group the manager owns, so no client's disconnect stops it; it ends when its
source ends (``done``), raises (``failed``: the error is on the terminal entry, after every item received
before it), or is stopped (:meth:`ResponseManager.stop` here, or ``log.request_stop`` from any process:
``stopped``). A stop cancels the source and closes it (``aclose()`` or ``close()``: the provider's HTTP
response). Leaving the manager's block stops the responses still running.

Appends are batched: a pump pulls the source and queues encoded items; a writer appends all the queued
items in one call while the pump goes on. The log never waits for readers, so neither does the source;
only a log that cannot keep up (a server restarting) holds the source back, once ``max_pending`` items or
``max_pending_bytes`` bytes are queued. A heartbeat every ``heartbeat_interval`` seconds tells readers in
other processes the producer is alive.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from typing import Any, Final, TypeAlias

import anyio
import msgspec
from anyio.abc import TaskGroup

from pipeline._jsonenc import encode_json
from pipeline.errors import (
    ConfigurationError,
    ResponseNotFound,
    ServingError,
    StreamfoldError,
)
from pipeline.fanout.serving._log import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    MAX_ITEM_BYTES,
    EventLog,
    ResponseStatus,
    check_response_id,
    error_to_entry,
)

__all__ = [
    "DEFAULT_MAX_PENDING",
    "DEFAULT_MAX_PENDING_BYTES",
    "STOPPED_ERROR",
    "ResponseManager",
    "SourceFactory",
    "encode_item",
]

_logger = logging.getLogger("streamfold")

SourceFactory: TypeAlias = Callable[[], Awaitable[AsyncIterable[Any]] | AsyncIterable[Any]]
"""Makes a response's source: an SDK stream, ``process(...)``, any async iterable of items."""

DEFAULT_MAX_PENDING: Final = 4096
DEFAULT_MAX_PENDING_BYTES: Final = 8 * 1024 * 1024
STOPPED_ERROR: Final = {"type": "ResponseStopped", "message": "the response was stopped", "kind": "stopped"}
"""The ``error`` on the terminal entry of a stopped response."""


def encode_item(item: Any) -> bytes:
    """An item as JSON bytes: its ``to_dict()`` if it has one, else msgspec's builtins form."""
    to_dict = getattr(item, "to_dict", None)
    return encode_json(to_dict() if to_dict is not None else msgspec.to_builtins(item))


class _Running:
    """One response this manager produces."""

    __slots__ = ("done", "scope", "stopping")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.stopping = False


class ResponseManager:
    """Starts, stops and lists served responses over an event log; an async context manager.

    Args:
        log: the backend (:class:`~pipeline.fanout.serving.memory.MemoryEventLog`, Redis, NATS).
        encode: an item to its JSON bytes.
        heartbeat_interval: seconds between heartbeats (default: a third of the log's
            ``heartbeat_timeout``, or 5 s).
        max_pending, max_pending_bytes: how much the pump may queue while an append is in flight.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        encode: Callable[[Any], bytes] = encode_item,
        heartbeat_interval: float | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ) -> None:
        if heartbeat_interval is None:
            heartbeat_interval = getattr(log, "heartbeat_timeout", DEFAULT_HEARTBEAT_TIMEOUT) / 3
        if not heartbeat_interval > 0:
            raise ConfigurationError(f"heartbeat_interval must be positive, got {heartbeat_interval}")
        if max_pending < 1 or max_pending_bytes < 1:
            raise ConfigurationError("max_pending and max_pending_bytes must be at least 1")
        self.log = log
        self.encode = encode
        self.heartbeat_interval = heartbeat_interval
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self._tasks: TaskGroup | None = None
        self._running: dict[str, _Running] = {}

    async def __aenter__(self) -> ResponseManager:
        if self._tasks is not None:
            raise ConfigurationError("a ResponseManager is entered once")
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._tasks is not None
        for running in list(self._running.values()):
            running.stopping = True
            running.scope.cancel()
        return await self._tasks.__aexit__(*exc_info)

    async def start(
        self,
        source: SourceFactory | AsyncIterable[Any],
        *,
        response_id: str | None = None,
        meta: Mapping[str, Any] = {},
    ) -> str:
        """Start a response and return its id (a new uuid unless given); it runs detached.

        ``source`` is an async iterable, or a function (sync or async) returning one; the response
        exists in the log when this returns. A factory that raises raises here, and no response is made.
        A factory is called only once the log has room and ``response_id`` is free (the model is not
        called for a start that will be refused; two starts racing for the last room or for one id may
        still both call theirs, and the loser's source is closed).

        Raises (a source already made is closed):
            ResponseExists: ``response_id`` was used before.
            EventLogFull: the log has no room for another running response.
            ConfigurationError: the manager's block is not entered, or an invalid ``response_id``.
        """
        if self._tasks is None:
            raise ConfigurationError("start a response inside `async with ResponseManager(...)`")
        try:
            response_id = await self._admit(response_id)
        except BaseException:
            if isinstance(source, AsyncIterable):
                await _close(source)
            raise
        # An async iterable is the source, whatever else it is: aiostream's streams (process(...)) are
        # callable and awaitable too (awaiting one gives its last item).
        made = source if isinstance(source, AsyncIterable) else source()
        iterable: AsyncIterable[Any]
        if isinstance(made, AsyncIterable):
            iterable = made
        else:
            iterable = await made
        try:
            await self.log.create(response_id, meta=meta)
        except BaseException:
            await _close(iterable)
            raise
        running = _Running()
        self._running[response_id] = running
        self._tasks.start_soon(self._run, response_id, iterable, running, name=f"response {response_id}")
        return response_id

    async def _admit(self, response_id: str | None) -> str:
        """The new response's id, once the log has room and the id is free: before a source is made."""
        response_id = check_response_id(response_id) if response_id is not None else uuid.uuid4().hex
        await self.log.check_create(response_id)
        return response_id

    async def stop(self, response_id: str) -> None:
        """Stop a response: here, cancel its source, close it and wait until it ended ``stopped``;
        produced by another process, ask it through the log. A no-op on an ended response.

        Raises:
            ResponseNotFound: no such response.
        """
        running = self._running.get(response_id)
        if running is None:
            await self.log.request_stop(response_id)
            return
        running.stopping = True
        running.scope.cancel()
        await running.done.wait()

    async def wait(self, response_id: str) -> None:
        """Wait until a response this manager produces has ended (its terminal entry written)."""
        running = self._running.get(response_id)
        if running is not None:
            await running.done.wait()

    async def list(self) -> list[ResponseStatus]:
        """Running responses and ended ones still retained (of every process sharing the log)."""
        return await self.log.active()

    async def status(self, response_id: str) -> ResponseStatus:
        """One response's status. Raises ``ResponseNotFound``."""
        status = await self.log.status(response_id)
        if status is None:
            raise ResponseNotFound(f"no response {response_id!r}", response_id=response_id)
        return status

    # -- one response ---------------------------------------------------------------------------

    async def _run(self, response_id: str, source: AsyncIterable[Any], running: _Running) -> None:
        writer = _Writer(self, response_id)
        outcome: BaseException | None = None
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._watch_stop, response_id, running)
                tasks.start_soon(self._heartbeats, response_id)
                tasks.start_soon(writer.run)
                with running.scope:
                    try:
                        await writer.pump(source)
                    except Exception as exc:
                        outcome = exc
                    finally:
                        with anyio.CancelScope(shield=True):
                            await _close(source)
                writer.close()
                await writer.flushed.wait()
                tasks.cancel_scope.cancel()
            if writer.error is not None:
                outcome = writer.error
            with anyio.CancelScope(shield=True):
                await self._end(response_id, running, outcome)
        finally:
            self._running.pop(response_id, None)
            running.done.set()

    async def _end(self, response_id: str, running: _Running, outcome: BaseException | None) -> None:
        try:
            if outcome is not None:
                if not isinstance(outcome, StreamfoldError):
                    _logger.error("the source of response %s failed", response_id, exc_info=outcome)
                await self.log.end(response_id, error=error_to_entry(outcome), state="failed")
            elif running.stopping or running.scope.cancel_called:
                await self.log.end(response_id, error=STOPPED_ERROR, state="stopped")
            else:
                await self.log.end(response_id)
        except Exception:
            _logger.exception("response %s could not be ended in the log", response_id)

    async def _watch_stop(self, response_id: str, running: _Running) -> None:
        """Cancel the response when a stop is requested (from any process). A watch that fails (the log's
        server gone past its retries) is logged and ends: the response runs on, stoppable from here."""
        try:
            async for _ in self.log.stop_requested(response_id):
                running.stopping = True
                running.scope.cancel()
                return
        except Exception:
            _logger.warning("watching response %s for a stop request failed", response_id, exc_info=True)

    async def _heartbeats(self, response_id: str) -> None:
        while True:
            await anyio.sleep(self.heartbeat_interval)
            try:
                await self.log.heartbeat(response_id)
            except Exception:
                _logger.warning("heartbeat of response %s failed", response_id, exc_info=True)


class _Writer:
    """The pump's queue of encoded items and the task appending them in batches."""

    __slots__ = ("closed", "error", "flushed", "log", "manager", "nbytes", "pending", "response_id", "wake")

    def __init__(self, manager: ResponseManager, response_id: str) -> None:
        self.manager = manager
        self.log = manager.log
        self.response_id = response_id
        self.pending: list[bytes] = []
        self.nbytes = 0
        self.wake = anyio.Event()  # set when the pending list or the state changed
        self.flushed = anyio.Event()
        self.closed = False
        self.error: BaseException | None = None

    def _notify(self) -> None:
        wake, self.wake = self.wake, anyio.Event()
        wake.set()

    async def pump(self, source: AsyncIterable[Any]) -> None:
        """Pull the source; queue each item; wait only when the queue is over its caps."""
        encode = self.manager.encode
        max_pending, max_bytes = self.manager.max_pending, self.manager.max_pending_bytes
        position = 0
        async for item in source:
            if self.error is not None:
                return
            position += 1
            try:
                data = encode(item)
            except Exception as exc:
                raise ServingError(
                    f"item {position} of response {self.response_id!r} cannot be encoded as JSON:"
                    f" {type(exc).__name__}: {exc}",
                    response_id=self.response_id,
                ) from exc
            if len(data) > MAX_ITEM_BYTES:
                raise ServingError(
                    f"item {position} of response {self.response_id!r} is {len(data)} bytes, over the"
                    f" {MAX_ITEM_BYTES}-byte cap (MAX_ITEM_BYTES)",
                    response_id=self.response_id,
                )
            self.pending.append(data)
            self.nbytes += len(data)
            if len(self.pending) == 1:
                self._notify()
            while len(self.pending) >= max_pending or self.nbytes >= max_bytes:
                if self.error is not None:
                    return
                await self.wake.wait()

    def close(self) -> None:
        self.closed = True
        self._notify()

    async def run(self) -> None:
        """Append whatever is queued, in one call, until closed and drained (or an append fails)."""
        try:
            while True:
                if not self.pending:
                    if self.closed:
                        return
                    await self.wake.wait()
                    continue
                batch, self.pending, self.nbytes = self.pending, [], 0
                self._notify()  # room for a waiting pump
                await self.log.append(self.response_id, batch)
        except Exception as exc:
            self.error = exc
            self._notify()
            self.manager._running[self.response_id].scope.cancel()
        finally:
            self.flushed.set()


async def _close(source: AsyncIterable[Any]) -> None:
    """Close a source that can be closed (``aclose()``: generators; ``close()``: SDK streams)."""
    close: Callable[[], Any] | None = getattr(source, "aclose", None) or getattr(source, "close", None)
    if close is None:
        return
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception:
        _logger.warning("closing a response's source failed", exc_info=True)
