"""The NATS JetStream event log: a producer in one process, readers in any others.

Each response is a stream of its own, ``PREFIX_ID`` on subject ``PREFIX.r.ID``, so the log's ids *are*
the stream's sequence numbers (1, 2, 3, ... contiguous; a stream of one response has no other messages):
resuming after id ``n`` is a batched direct get from sequence ``n + 1``. The terminal entry is a message
with the header ``Sf-End`` (its body the error's JSON, or empty). An append retried after a lost
acknowledgement first reads the stream's last id and publishes only what is missing (one producer per
response), so nothing is appended twice. After an append that failed for good, the producer reads the
stream's last id again: items the client had buffered while disconnected may have landed (nothing
received is lost; the terminal entry follows them).

The registry is a key-value bucket ``PREFIX_responses``: per response, its state, timestamps, the user's
meta, a heartbeat counter and whether a stop was requested (updated with compare-and-set). Its history
expires ``tombstone_ttl`` seconds after the last write, which is also how long an expired id answers 410.

Retention: ``max_items`` is the stream's ``max_msgs`` (the server discards the oldest); ``max_bytes``
counts the items' JSON as the other backends do, enforced by the producer with a purge below the first id
to keep. ``ttl_after_end``: an ended response past it is deleted by the first log that touches it
(``status``, ``read``, ``active``), comparing the producer's wall clock at the end with its own: keep the
machines' clocks synchronised (NTP).

Appends publish a batch without waiting, then wait once for all its acknowledgements (one reply subject).
While the server is unreachable every operation is retried for ``retry_for`` seconds, then fails with
`EventLogUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import partial
from typing import Any, Final, Literal, cast

import anyio
import msgspec

from pipeline._extras import needs_extra
from pipeline.errors import (
    ConfigurationError,
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
    is_response_id,
)
from pipeline.fanout.serving._remote import DEFAULT_RETRY_FOR, RemoteLogBase, Snapshot

with needs_extra("nats", "the NATS event log"):
    import nats
    import nats.errors
    import nats.js.errors
    from nats.aio.client import Client as NATS
    from nats.aio.msg import Msg
    from nats.js import api
    from nats.js.kv import KeyValue

__all__ = ["CLOSE_TIMEOUT", "DEFAULT_TOMBSTONE_TTL", "NatsEventLog"]

DEFAULT_TOMBSTONE_TTL: Final = 86_400.0
_END_HEADER: Final = "Sf-End"
_END: Final = {_END_HEADER: "1"}
CLOSE_TIMEOUT: Final = 5.0
"""Seconds `NatsEventLog.aclose` waits for the connection to close (the server may be gone)."""

_logger = logging.getLogger("streamfold")

_API_TIMEOUT: Final = 5.0
"""Seconds one JetStream API request may take (nats-py's own default for its manager's requests)."""
_LOST_TRANSPORT_WRITE: Final = (TypeError, AttributeError) if sys.version_info >= (3, 12) else ()
"""What nats-py's close raises on Python 3.12 and 3.13 when it flushes what it buffered into a transport whose
connection is lost: asyncio's ``writelines`` calls a callback the lost connection cleared (CPython issue
136234), where Python 3.11 raises ``ConnectionResetError``."""


class _Ack(msgspec.Struct):
    """JetStream's acknowledgement of a publish (``seq`` 0 when it carries an error instead)."""

    seq: int = 0


class _Record(msgspec.Struct):
    """A response's registry value."""

    state: str
    created: float
    updated: float
    meta: dict[str, Any] = {}
    beats: int = 0
    stop: bool = False
    ended: float | None = None


class _Producing:
    """What the producing log knows of a response: its last id and the sizes it retains."""

    __slots__ = ("first", "last", "nbytes", "sizes")

    def __init__(self, last: int) -> None:
        self.last = last
        self.first = 1
        self.sizes: deque[int] = deque()
        self.nbytes = 0


def _too_large(response_id: str, size: int, max_payload: int) -> ServingError:
    if size > MAX_ITEM_BYTES:
        why = f"the {MAX_ITEM_BYTES}-byte cap (MAX_ITEM_BYTES)"
    else:
        why = f"the NATS server's max_payload of {max_payload} bytes (raise it in the server's configuration)"
    return ServingError(
        f"an item of {size} bytes for response {response_id!r} is over {why}", response_id=response_id
    )


class NatsEventLog(RemoteLogBase):
    """An `EventLog` on NATS JetStream; see the module docs.

    Args:
        nats_url: a ``nats://`` URL, or a connected ``nats.aio.client.Client`` (not closed by the log).
        prefix: of streams, subjects and the registry bucket (letters, digits, ``_``, ``-``).
        retention: as `RedisEventLog`'s.
        heartbeat_timeout: as `RedisEventLog`'s.
        retry_for: as `RedisEventLog`'s.
        tombstone_ttl: as `RedisEventLog`'s.

    Raises:
        ConfigurationError: a ``prefix`` that is not letters, digits, ``_`` and ``-``.

    Open with ``await NatsEventLog.connect(...)`` (or call `start` once).
    """

    server_name = "NATS"
    transient = (
        nats.errors.TimeoutError,
        nats.errors.ConnectionClosedError,
        nats.errors.NoRespondersError,
        nats.errors.StaleConnectionError,
        nats.errors.ConnectionReconnectingError,
        nats.js.errors.NoStreamResponseError,
        nats.js.errors.ServiceUnavailableError,
        asyncio.TimeoutError,
        OSError,
    )

    def __init__(
        self,
        nats_url: str | NATS,
        *,
        prefix: str = "streamfold",
        retention: Retention = DEFAULT_RETENTION,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
        retry_for: float = DEFAULT_RETRY_FOR,
        tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL,
    ) -> None:
        super().__init__(heartbeat_timeout=heartbeat_timeout, retry_for=retry_for)
        if not prefix or not prefix.replace("_", "").replace("-", "").isalnum():
            raise ConfigurationError(f"a NATS prefix is letters, digits, '_' and '-', got {prefix!r}")
        self.prefix = prefix
        self.retention = retention
        self.tombstone_ttl = tombstone_ttl
        self._url = nats_url if isinstance(nats_url, str) else None
        self.nc: NATS | None = None if isinstance(nats_url, str) else nats_url
        self._kv: KeyValue | None = None
        self._producing: dict[str, _Producing] = {}

    @classmethod
    async def connect(cls, nats_url: str | NATS, **options: Any) -> NatsEventLog:
        """A started log.

        Args:
            nats_url: as the class takes it.
            **options: the class's other options.
        """
        log = cls(nats_url, **options)
        await log.start()
        return log

    async def start(self) -> None:
        """Connect (if given a URL) and create the registry bucket if it does not exist."""
        if self.nc is None:
            assert self._url is not None
            self.nc = await nats.connect(
                self._url, reconnect_time_wait=0.1, max_reconnect_attempts=-1, connect_timeout=2
            )
        js = self.nc.jetstream()
        bucket = f"{self.prefix}_responses"
        try:
            self._kv = await js.key_value(bucket)
        except nats.js.errors.BucketNotFoundError:
            self._kv = await js.create_key_value(bucket=bucket, history=1, ttl=self.tombstone_ttl)

    # -- names and records ----------------------------------------------------------------------

    def _stream(self, response_id: str) -> str:
        return f"{self.prefix}_{response_id}"

    def _subject(self, response_id: str) -> str:
        return f"{self.prefix}.r.{response_id}"

    def _ready(self, response_id: str) -> tuple[NATS, KeyValue]:
        """The connection for work on one response; an id no subject can hold is unknown."""
        check_lookup_id(response_id)
        return self._client(response_id)

    def _client(self, response_id: str) -> tuple[NATS, KeyValue]:
        if self._closed:
            raise ServingError("the event log is closed", response_id=response_id)
        if self.nc is None or self._kv is None:
            raise ServingError(
                "the NATS event log is not started (await log.start())", response_id=response_id
            )
        return self.nc, self._kv

    async def _record(self, response_id: str) -> tuple[_Record, int] | None:
        """The registry value and its revision, expiring an ended response past its retention."""
        _, kv = self._ready(response_id)
        try:
            got = await kv.get(response_id)
        except nats.js.errors.KeyNotFoundError:
            return None
        if got.value is None or got.revision is None:
            return None
        record = msgspec.json.decode(got.value, type=_Record)
        if (
            record.ended is not None
            and record.state != "expired"
            and time.time() >= record.ended + self.retention.ttl_after_end
        ):
            await self._expire(response_id, record)
            record.state = "expired"
        return record, got.revision

    async def _expire(self, response_id: str, record: _Record) -> None:
        nc, kv = self._ready(response_id)
        record.state = "expired"
        record.meta = {}
        await kv.put(response_id, msgspec.json.encode(record))
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await nc.jetstream().delete_stream(self._stream(response_id))

    def _missing(self, response_id: str, record: _Record | None) -> ServingError:
        if record is not None and record.state == "expired":
            return ResponseGone(
                f"response {response_id!r} ended and is no longer retained", response_id=response_id
            )
        return ResponseNotFound(f"no response {response_id!r}", response_id=response_id)

    async def _known(self, response_id: str) -> tuple[_Record, int]:
        found = await self._record(response_id)
        if found is None or found[0].state == "expired":
            raise self._missing(response_id, found[0] if found else None)
        return found

    async def _change(self, response_id: str, what: str, change: Any) -> _Record | None:
        """Apply ``change(record) -> bool`` (False: leave it) with compare-and-set; the new record."""
        _, kv = self._ready(response_id)
        while True:
            record, revision = await self._retry(what, response_id, lambda: self._known(response_id))
            if not change(record):
                return None
            record.updated = time.time()
            try:
                value = msgspec.json.encode(record)
                await self._retry(what, response_id, partial(kv.update, response_id, value, revision))
                return record
            except nats.js.errors.KeyWrongLastSequenceError:
                continue  # another writer came first: read again

    # -- the producer's side --------------------------------------------------------------------

    async def create(self, response_id: str, *, meta: Mapping[str, Any] = {}) -> None:
        """Start a response: see `EventLog.create`.

        Args:
            response_id: the new response's id.
            meta: kept with the response and shown in its status (such as its owner).
        """
        check_response_id(response_id)
        nc, kv = self._ready(response_id)
        now = time.time()
        record = _Record(state="running", created=now, updated=now, meta=dict(meta))
        try:
            await self._retry(
                "create", response_id, lambda: kv.create(response_id, msgspec.json.encode(record))
            )
        except nats.js.errors.KeyWrongLastSequenceError:
            raise ResponseExists(
                f"response {response_id!r} already exists", response_id=response_id
            ) from None
        config = api.StreamConfig(
            name=self._stream(response_id),
            subjects=[self._subject(response_id)],
            max_msgs=self.retention.max_items,
            discard=api.DiscardPolicy.OLD,
            storage=api.StorageType.FILE,
            allow_direct=True,
        )
        await self._retry("create", response_id, lambda: nc.jetstream().add_stream(config))
        self._producing[response_id] = _Producing(0)

    async def check_create(self, response_id: str) -> None:
        """Never full (the server's limits are the cap); an id with a registry record (an expired one
        too, for ``tombstone_ttl``) exists."""
        check_response_id(response_id)
        if await self._retry("create", response_id, lambda: self._record(response_id)) is not None:
            raise ResponseExists(f"response {response_id!r} already exists", response_id=response_id)

    async def _producer(self, response_id: str) -> _Producing:
        producing = self._producing.get(response_id)
        if producing is not None:
            return producing
        record, _ = await self._retry("an append", response_id, lambda: self._known(response_id))
        if record.state != "running":
            raise ResponseGone(
                f"response {response_id!r} has ended ({record.state})", response_id=response_id
            )
        nc, _ = self._ready(response_id)
        info = await self._retry(
            "an append", response_id, lambda: nc.jetstream().stream_info(self._stream(response_id))
        )
        producing = self._producing[response_id] = _Producing(info.state.last_seq)
        producing.first = info.state.first_seq or 1
        return producing

    async def _publish(self, response_id: str, first_id: int, items: Sequence[tuple[bytes, bool]]) -> None:
        """Publish ``items`` (data, is-end) as ids ``first_id, ...``; check every acknowledgement."""
        nc, _ = self._ready(response_id)
        subject = self._subject(response_id)
        timeout = max(2.0, self.retry_for / 4)
        attempts = 0

        async def once() -> None:
            nonlocal attempts
            attempts += 1
            todo = list(items)
            start = first_id
            if attempts > 1:  # a retry: publish only what the stream does not have yet
                info = await nc.jetstream().stream_info(self._stream(response_id))
                stored = info.state.last_seq - (first_id - 1)
                if not 0 <= stored <= len(items):
                    raise ServingError(
                        f"response {response_id!r}: its stream's last id is {info.state.last_seq}, this"
                        f" log expected {first_id - 1} (another producer appended to it?)",
                        response_id=response_id,
                    )
                todo, start = todo[stored:], first_id + stored
                if not todo:
                    return
            if len(todo) == 1:  # one item: one request on the client's shared reply subject, as js.publish
                data, end = todo[0]
                reply = await nc.request(subject, data, timeout=timeout, headers=_END if end else None)
                acks = [reply.data]
                seqs = [msgspec.json.decode(acks[0], type=_Ack).seq]
            else:
                acks = await self._acknowledged(nc, subject, todo)
                seqs = sorted(msgspec.json.decode(ack, type=_Ack).seq for ack in acks)
            if seqs != list(range(start, start + len(todo))):
                errors = [ack for ack in acks if b'"error"' in ack]
                raise ServingError(
                    f"response {response_id!r}: entries {start} to {start + len(todo) - 1} were stored"
                    f" as sequences {seqs[:3]}... {errors[:1]!r}",
                    response_id=response_id,
                )

        try:
            await self._retry("an append", response_id, once)
        except BaseException:
            # What the server stored is unknown (the client also delivers what it buffered while
            # disconnected once it reconnects): the next append or end reads the stream's last id.
            self._producing.pop(response_id, None)
            raise

    async def _acknowledged(self, nc: NATS, subject: str, todo: Sequence[tuple[bytes, bool]]) -> list[bytes]:
        """Publish ``todo`` (two or more: data, is-end) and return the server's acknowledgements."""
        timeout = max(2.0, self.retry_for / 4)
        # One reply subject for the batch, acknowledgements counted in a callback: no future and
        # no headers per item (the per-item cost publish_async has).
        acks: list[bytes] = []
        complete = anyio.Event()

        async def on_ack(msg: Msg) -> None:
            acks.append(msg.data)
            if len(acks) == len(todo):
                complete.set()

        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, cb=on_ack)
        try:
            for data, end in todo:
                await nc.publish(subject, data, reply=inbox, headers=_END if end else None)
            with anyio.fail_after(timeout):
                await complete.wait()
        finally:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        return acks

    def _trim_bytes(self, producing: _Producing, sizes: Sequence[int]) -> int:
        """Record ``sizes``; return the first id to keep under the caps (the server trims by items)."""
        for size in sizes:
            producing.sizes.append(size)
            producing.nbytes += size
        retention = self.retention
        while len(producing.sizes) > 1 and (
            len(producing.sizes) > retention.max_items or producing.nbytes > retention.max_bytes
        ):
            producing.nbytes -= producing.sizes.popleft()
            producing.first += 1
        return producing.first

    async def _purge_below(self, response_id: str, first: int, server_first: int) -> None:
        if first > server_first:
            nc, _ = self._ready(response_id)
            await self._retry(
                "trimming",
                response_id,
                lambda: nc.jetstream().purge_stream(self._stream(response_id), seq=first),
            )

    async def append(self, response_id: str, items: Sequence[bytes]) -> int:
        """Append items and return the last id: see `EventLog.append`.

        Args:
            response_id: the running response.
            items: the items' bytes (JSON), in order.
        """
        max_payload = self._ready(response_id)[0].max_payload
        for position, data in enumerate(items):
            if len(data) > min(MAX_ITEM_BYTES, max_payload):
                if position:  # what came before it is kept
                    await self.append(response_id, items[:position])
                raise _too_large(response_id, len(data), max_payload)
        producing = self._producing.get(response_id) or await self._producer(response_id)
        if not items:
            return producing.last
        start = producing.last + 1
        await self._publish(response_id, start, [(data, False) for data in items])
        producing.last += len(items)
        before = max(producing.first, producing.last - self.retention.max_items + 1)
        first = self._trim_bytes(producing, [len(data) for data in items])
        if first > before:
            await self._purge_below(response_id, first, before)
        return producing.last

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
        producing = await self._producer(response_id)
        body = msgspec.json.encode(dict(error)) if error is not None else b""
        await self._publish(response_id, producing.last + 1, [(body, True)])
        producing.last += 1
        before = max(producing.first, producing.last - self.retention.max_items + 1)
        await self._purge_below(response_id, self._trim_bytes(producing, [0]), before)
        del self._producing[response_id]
        now = time.time()

        def ended(record: _Record) -> bool:
            record.state = state
            record.ended = now
            return True

        await self._change(response_id, "end", ended)

    async def heartbeat(self, response_id: str) -> None:
        """Mark the producer alive: see `EventLog.heartbeat`."""

        def beat(record: _Record) -> bool:
            if record.state != "running":
                raise ResponseGone(f"response {response_id!r} has ended", response_id=response_id)
            record.beats += 1
            return True

        await self._change(response_id, "a heartbeat", beat)

    async def request_stop(self, response_id: str) -> None:
        """Ask the producer to stop: see `EventLog.request_stop`."""

        def stop(record: _Record) -> bool:
            if record.state != "running" or record.stop:
                return False
            record.stop = True
            return True

        await self._change(response_id, "a stop request", stop)

    async def stop_requested(self, response_id: str) -> AsyncIterator[None]:
        """Yield once when a stop is requested: see `EventLog.stop_requested`."""
        _, kv = self._ready(response_id)
        await self._retry("a stop watch", response_id, lambda: self._known(response_id))
        watcher = await kv.watch(response_id)
        try:
            while not self._closed:
                try:
                    got = await watcher.updates(  # type: ignore[no-untyped-call]
                        timeout=min(1.0, self.heartbeat_timeout)
                    )
                except nats.errors.TimeoutError:
                    continue
                if got is None or got.value is None:
                    if got is not None and got.operation is not None:
                        return  # deleted or purged
                    continue
                record = msgspec.json.decode(got.value, type=_Record)
                if record.state != "running":
                    return
                if record.stop:
                    yield None
                    return
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(nats.errors.Error):
                    await watcher.stop()  # type: ignore[no-untyped-call]

    # -- the readers' side ----------------------------------------------------------------------

    async def _fetch(self, response_id: str, after: int, count: int) -> list[Entry]:
        """At most ``count`` entries with id > ``after``: one batched direct get."""
        nc, _ = self._ready(response_id)
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        try:
            request = msgspec.json.encode({"seq": after + 1, "batch": count})
            await nc.publish(f"$JS.API.DIRECT.GET.{self._stream(response_id)}", request, reply=inbox)
            entries: list[Entry] = []
            while True:
                msg = await sub.next_msg(timeout=max(2.0, self.retry_for / 4))
                headers = msg.headers or {}
                status = headers.get("Status")
                if status is not None:
                    if status in ("204", "404", "408"):
                        return entries
                    if status == "503":
                        raise nats.errors.NoRespondersError
                    raise ServingError(
                        f"reading response {response_id!r}: NATS answered {status}"
                        f" {headers.get('Description', '')}",
                        response_id=response_id,
                    )
                entry_id = int(headers["Nats-Sequence"])
                if headers.get(_END_HEADER):
                    error = msgspec.json.decode(msg.data) if msg.data else None
                    entries.append(Entry(entry_id, None, True, error))
                else:
                    entries.append(Entry(entry_id, msg.data))
                if len(entries) >= count:
                    return entries
        finally:
            await sub.unsubscribe()

    async def _snapshot(self, response_id: str, after: int, count: int) -> Snapshot:
        record, _ = await self._known(response_id)
        nc, _ = self._ready(response_id)
        try:
            info = await nc.jetstream().stream_info(self._stream(response_id))
        except nats.js.errors.NotFoundError:
            raise self._missing(response_id, record) from None
        last = info.state.last_seq
        first = info.state.first_seq if info.state.messages else last + 1
        entries = await self._fetch(response_id, after, count) if last > after else []
        if entries and entries[0].id > after + 1:
            first = max(first, entries[0].id)  # trimmed between the two requests
        return Snapshot(cast(ResponseState, record.state), first, last, entries)

    async def _poll(self, response_id: str, after: int, wait: float) -> tuple[list[Entry], object]:
        nc, _ = self._ready(response_id)
        sub = await nc.subscribe(self._subject(response_id), max_msgs=1)
        try:
            entries = await self._fetch(response_id, after, 1024)
            if entries:
                return entries, None
            try:
                await sub.next_msg(timeout=wait)
            except nats.errors.TimeoutError:
                found = await self._record(response_id)
                if found is None or found[0].state == "expired":
                    raise self._missing(response_id, found[0] if found else None) from None
                return [], found[1]
            return await self._fetch(response_id, after, 1024), None
        finally:
            with contextlib.suppress(nats.errors.BadSubscriptionError):
                await sub.unsubscribe()

    def _status(self, response_id: str, record: _Record, info: api.StreamInfo | None) -> ResponseStatus:
        last = info.state.last_seq if info is not None else 0
        first = (info.state.first_seq if info.state.messages else last + 1) if info is not None else 1
        return ResponseStatus(
            response_id=response_id,
            state=cast(ResponseState, record.state),
            last_id=last,
            first_id=first,
            created=record.created,
            updated=record.updated,
            meta=record.meta,
        )

    async def status(self, response_id: str) -> ResponseStatus | None:
        """The response's status, or None: see `EventLog.status`."""
        if not is_response_id(response_id):
            return None
        nc, _ = self._ready(response_id)
        found = await self._retry("status", response_id, lambda: self._record(response_id))
        if found is None or found[0].state == "expired":
            return None
        try:
            info = await self._retry(
                "status", response_id, lambda: nc.jetstream().stream_info(self._stream(response_id))
            )
        except nats.js.errors.NotFoundError:
            info = None
        return self._status(response_id, found[0], info)

    async def active(self) -> list[ResponseStatus]:
        """Running and retained responses, oldest first: see `EventLog.active`."""
        if self._closed:
            return []
        nc, _ = self._client("*")
        keys = await self._retry("listing", "*", lambda: self._keys(nc))
        found: list[ResponseStatus] = []
        for key in keys:
            status = await self.status(key)
            if status is not None:
                found.append(status)
        return sorted(found, key=lambda status: status.created)

    async def _keys(self, nc: NATS) -> list[str]:
        """The registry's keys, read from its stream's subjects, page by page (the server sends at most
        100,000 per reply). nats-py's ``kv.keys()`` can end its listing early while the bucket is written
        to (nats.py issue 842, pull request 995), and a response created just before would be missing from
        `active`; its ``stream_info`` reads one page only."""
        prefix = f"$KV.{self.prefix}_responses."
        request = f"$JS.API.STREAM.INFO.KV_{self.prefix}_responses"
        keys: list[str] = []
        while True:
            asked = msgspec.json.encode({"subjects_filter": f"{prefix}>", "offset": len(keys)})
            try:
                reply = msgspec.json.decode((await nc.request(request, asked, timeout=_API_TIMEOUT)).data)
            except nats.errors.NoRespondersError:
                raise nats.js.errors.ServiceUnavailableError from None
            if "error" in reply:
                nats.js.errors.APIError.from_error(reply["error"])
            subjects = (reply.get("state") or {}).get("subjects") or {}
            keys += [subject[len(prefix) :] for subject in subjects]
            if not subjects or len(keys) >= reply.get("total", 0):
                return keys

    async def aclose(self) -> None:
        """Release connections: see `EventLog.aclose`."""
        self._closed = True
        for tail in self._tails.values():
            tail.notify()
        if self._url is not None and self.nc is not None:
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
                try:
                    await self.nc.close()
                except (*self.transient, nats.errors.Error, *_LOST_TRANSPORT_WRITE) as exc:
                    # The server is gone: what the client buffered for it cannot be flushed.
                    _logger.info("closing the NATS connection of the event log failed: %r", exc)
