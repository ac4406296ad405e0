"""The lifecycle of served responses: start detached from every client, stop, list, retention.

::

    log = MemoryEventLog(retention=Retention(ttl_after_end=600))
    async with ResponseManager(log) as manager:          # e.g. in a Starlette lifespan
        response_id = await manager.start(lambda: make_source(request))
        ...                                              # readers: log.read(response_id, after=cursor)

A response runs in a task group the manager owns, so no client's disconnect stops it; it ends when its
source ends (``done``), raises (``failed``: the error is on the terminal entry, after every item received
before it), or is stopped (`ResponseManager.stop` here, or ``log.request_stop`` from any process:
``stopped``). A stop cancels the source and closes it (``aclose()`` or ``close()``: the provider's HTTP
response). Leaving the manager's block stops the responses still running.

One response's failure is its own: an item that cannot be served (not JSON, over
`MAX_ITEM_BYTES`), a failing log or a bug ends that response
``failed`` with the error on its terminal entry, and the manager (and the app's lifespan around it) goes
on. A source may hold a cancel scope across its yields (``anyio.fail_after`` around them, a tool runner's
task group): it is closed from where it yielded, so its scopes unwind in order and its cleanup runs.

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
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final, TypeAlias

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import TaskGroup

from pipeline.errors import (
    ConfigurationError,
    EventLogUnavailable,
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
_encode = msgspec.json.encode

SourceFactory: TypeAlias = Callable[[], Awaitable[AsyncIterable[Any]] | AsyncIterable[Any]]
"""Makes a response's source: an SDK stream, ``process(...)``, any async iterable of items."""

DEFAULT_MAX_PENDING: Final = 4096
DEFAULT_MAX_PENDING_BYTES: Final = 8 * 1024 * 1024
STOPPED_ERROR: Final = {"type": "ResponseStopped", "message": "the response was stopped", "kind": "stopped"}
"""The ``error`` on the terminal entry of a stopped response."""


def encode_item(item: Any) -> bytes:
    """An item as JSON bytes: its ``to_dict()`` if it has one, else msgspec's builtins form.

    A lone surrogate in a string (a provider's broken ``\\u`` escape, half an emoji), which UTF-8
    cannot hold, is written as U+FFFD: the log holds valid UTF-8 JSON, so every reader (the SSE and
    WebSocket routes, the Vercel and AG-UI encoders, a browser, another process) reads the whole answer
    the same way. This is the serving routes' one policy, applied here, where items enter the log.
    """
    to_dict = getattr(item, "to_dict", None)
    value = to_dict() if to_dict is not None else msgspec.to_builtins(item)
    try:
        return _encode(value)
    except UnicodeEncodeError:
        return _encode(_replace_lone_surrogates(value))


def _replace_lone_surrogates(value: Any) -> Any:
    """``value`` (JSON builtins) with every lone surrogate in its strings (keys too) made U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {_replace_lone_surrogates(key): _replace_lone_surrogates(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace_lone_surrogates(v) for v in value]
    return value


class _Running:
    """One response this manager produces."""

    __slots__ = ("done", "end_error", "scope", "stopping", "writer")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.stopping = False
        self.writer: _Writer | None = None  # set when its task starts
        self.end_error: Exception | None = None
        """Why the response's end could not be written to the log, if it could not."""

    def stop(self) -> None:
        """Stop the response: its pump returns (see `_Writer.interrupt`)."""
        self.stopping = True
        if self.writer is None:
            self.scope.cancel()
        else:
            self.writer.interrupt()


class ResponseManager:
    """Starts, stops and lists served responses over an event log; an async context manager.

    Args:
        log: the backend (`MemoryEventLog`, Redis, NATS).
        encode: an item to its JSON bytes.
        heartbeat_interval: seconds between heartbeats (default: a third of the log's
            ``heartbeat_timeout``, or 5 s).
        max_pending: how many items the pump may queue while an append is in flight.
        max_pending_bytes: how many bytes the pump may queue while an append is in flight.

    Raises:
        ConfigurationError: a ``heartbeat_interval`` that is not positive, or a cap below 1.
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
            running.stop()
        return await self._tasks.__aexit__(*exc_info)

    async def start(
        self,
        source: SourceFactory | AsyncIterable[Any],
        *,
        response_id: str | None = None,
        meta: Mapping[str, Any] = {},
    ) -> str:
        """Start a response and return its id; it runs detached.

        The response exists in the log when this returns. A factory that raises raises here, and no
        response is made. A factory is called only once the log has room and ``response_id`` is free (the
        model is not called for a start that will be refused; two starts racing for the last room or for
        one id may still both call theirs, and the loser's source is closed).

        Args:
            source: an async iterable, or a function (sync or async) returning one.
            response_id: the id (default: a new uuid).
            meta: kept with the response, in its `ResponseStatus`.

        Returns:
            The response's id.

        Raises:
            ResponseExists: ``response_id`` was used before.
            EventLogFull: the log has no room for another running response.
            ConfigurationError: the manager's block is not entered, or an invalid ``response_id``.

        A source already made is closed when one of these is raised.
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
            EventLogUnavailable: stopped here, but its end could not be written to the log (the log's
                server stayed unreachable, or refused, past its retries): readers still see it running.
        """
        running = self._running.get(response_id)
        if running is None:
            await self.log.request_stop(response_id)
            return
        running.stop()
        await running.done.wait()
        if running.end_error is not None:
            raise EventLogUnavailable(
                f"response {response_id!r} stopped, but its end could not be written to the log:"
                f" {running.end_error}",
                response_id=response_id,
            ) from running.end_error

    async def wait(self, response_id: str) -> None:
        """Wait until a response this manager produces has ended (its terminal entry written)."""
        running = self._running.get(response_id)
        if running is not None:
            await running.done.wait()

    async def list(self) -> list[ResponseStatus]:
        """Running responses and ended ones still retained (of every process sharing the log)."""
        return await self.log.active()

    async def status(self, response_id: str) -> ResponseStatus:
        """One response's status.

        Raises:
            ResponseNotFound: the log does not know the response.
        """
        status = await self.log.status(response_id)
        if status is None:
            raise ResponseNotFound(f"no response {response_id!r}", response_id=response_id)
        return status

    # -- one response ---------------------------------------------------------------------------

    async def _run(self, response_id: str, source: AsyncIterable[Any], running: _Running) -> None:
        """Produce one response, end it in the log, whatever happens: a failure here (the source's, the
        log's, or a bug) ends this response alone, never the manager's other responses."""
        writer = running.writer = _Writer(self, response_id, running)
        outcome: BaseException | None = None
        try:
            try:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(self._watch_stop, response_id, running)
                    tasks.start_soon(self._heartbeats, response_id)
                    tasks.start_soon(writer.run)
                    outcome = await _produce(source, writer, running)
                    writer.close()
                    await writer.flushed.wait()
                    tasks.cancel_scope.cancel()
            except Exception as exc:
                _logger.error("producing response %s failed", response_id, exc_info=exc)
                outcome = outcome or exc
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
        except Exception as exc:
            running.end_error = exc
            _logger.exception("response %s could not be ended in the log", response_id)

    async def _watch_stop(self, response_id: str, running: _Running) -> None:
        """Cancel the response when a stop is requested (from any process). A watch that fails (the log's
        server gone past its retries) is logged and ends: the response runs on, stoppable from here."""
        try:
            async for _ in self.log.stop_requested(response_id):
                running.stop()
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

    __slots__ = (
        "at_yield",
        "closed",
        "error",
        "flushed",
        "log",
        "manager",
        "nbytes",
        "pending",
        "response_id",
        "running",
        "wake",
    )

    def __init__(self, manager: ResponseManager, response_id: str, running: _Running) -> None:
        self.manager = manager
        self.log = manager.log
        self.response_id = response_id
        self.running = running
        self.at_yield = False  # the pump holds the source suspended at a yield (not awaiting in it)
        self.pending: list[bytes] = []
        self.nbytes = 0
        self.wake = anyio.Event()  # set when the pending list or the state changed
        self.flushed = anyio.Event()
        self.closed = False
        self.error: BaseException | None = None

    def _notify(self) -> None:
        wake, self.wake = self.wake, anyio.Event()
        wake.set()

    def interrupt(self) -> None:
        """Make the pump return: cancel the source while the pump awaits in it (the source unwinds its
        own cancel scopes there); while the source is suspended at a yield (the pump waits for room),
        wake the pump instead, which returns and closes the source where it yielded (see
        `_close_source`)."""
        if self.at_yield:
            self._notify()
        else:
            self.running.scope.cancel()

    async def pump(self, source: AsyncIterator[Any]) -> None:
        """Pull the source; queue each item; wait only when the queue is over its caps.

        Returns early when the response is stopped or an append failed; raises ``ServingError`` for an
        item that cannot be served. Either way, ``at_yield`` tells whether the source is suspended at a
        yield."""
        encode = self.manager.encode
        max_pending, max_bytes = self.manager.max_pending, self.manager.max_pending_bytes
        running = self.running
        position = 0
        async for item in source:
            self.at_yield = True
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
                await self.wake.wait()
                if self.error is not None or running.stopping:
                    return
            self.at_yield = False

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
            self.interrupt()
        finally:
            self.flushed.set()


async def _produce(source: AsyncIterable[Any], writer: _Writer, running: _Running) -> BaseException | None:
    """Pump ``source`` into ``writer`` in the response's cancel scope, then close it; the source's
    failure (or an item it gave that cannot be served), or None."""
    with running.scope:
        iterator = aiter(source)
        try:
            await writer.pump(iterator)
            return None
        except Exception as exc:
            return exc
        except anyio.get_cancelled_exc_class():
            if not writer.at_yield:
                raise
            # A stop never cancels a pump that holds its source at a yield: this cancel came from
            # outside, or from a cancel scope the source holds across its yields (its deadline passed
            # while it waited), which the source leaves as it closes.
        finally:
            await _close_source(source, iterator, at_yield=writer.at_yield)
        await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled from outside: go on cancelling
        return ServingError(
            f"response {writer.response_id!r} was cancelled by a cancel scope its source holds across its"
            " yields (such as anyio.fail_after), while the source waited at a yield",
            response_id=writer.response_id,
        )
    return None  # stopped: the source was cancelled inside


async def _close_source(source: AsyncIterable[Any], iterator: AsyncIterator[Any], *, at_yield: bool) -> None:
    """Close the iterator the pump pulled, then its source if that is another object (an SDK stream).

    A source suspended at a yield is closed right there, in no new cancel scope: an async generator
    holding a cancel scope across its yields (``anyio.fail_after``, a task group) must leave it from the
    scope it entered it in, or anyio's scopes of the whole task break. The response is not cancelled
    then (a stop wakes the pump instead), so its cleanup runs in full. Otherwise (the source ended,
    failed, or was cancelled inside) the close is shielded: a stopped SDK stream still closes its HTTP
    response."""
    try:
        if at_yield:
            await _close(iterator)
    finally:
        with anyio.CancelScope(shield=True):
            if not at_yield:
                await _close(iterator)
            if iterator is not source:
                await _close(source)


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
