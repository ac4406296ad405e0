"""The Redis Streams event log: a producer in one process, readers in any others.

Keys, all of one response in one cluster slot (the hash tag ``{response_id}``), under ``prefix``:

- ``PREFIX:{ID}:log``: a stream; entry ``n`` has the explicit stream id ``0-n``, so the log's ids are
  the stream's and ``XREAD``/``XRANGE`` resume exactly from any id. Field ``d`` holds an item's JSON; the
  terminal entry has field ``e`` instead (the error's JSON, or empty).
- ``PREFIX:{ID}:meta``: a hash: state, last and first retained id, bytes retained, created, updated,
  the user's meta (JSON), a heartbeat counter and whether a stop was requested.
- ``PREFIX:{ID}:ctl``: a stream the producer's manager blocks on: ``stop`` (requested) or ``end``.
- ``PREFIX:{ID}:gone``: a tombstone kept ``tombstone_ttl`` seconds past retention, so an expired id
  answers 410 (not 404) and is never reused.
- ``PREFIX:responses``: a sorted set (score: created) of the responses, for `RedisEventLog.active`;
  members whose keys expired are removed when listed. It is the one key outside the hash tags (its own
  slot); no command touches it together with a response's keys.

Appends are one Lua script call per batch (ids assigned, trimmed by ``max_items`` and ``max_bytes``
exactly: ``XTRIM MINID``, counted in the meta hash), and idempotent: the script is given the id the
producer expects to follow, so a retry after a lost reply never appends twice. The log sends that call
packed ahead (script, keys and limits once per response) on connections it takes from the client's pool
and keeps for its appends (at most as many as appends ran at once), given back on `aclose`. A running
response's keys expire ``heartbeat_timeout + ttl_after_end`` seconds after the producer's last append or
heartbeat (a dead producer's response does not stay for ever); an ended one's ``ttl_after_end`` seconds
after its end.

While the server is unreachable, or refuses for a while (out of memory under ``maxmemory``, a read-only
replica during a failover, a cluster slot down), every operation is retried with backoff for
``retry_for`` seconds, then fails with `EventLogUnavailable` (the manager then fails the response;
the routes answer 503). Run Redis
with persistence (``appendonly yes``) for readers to resume after a server restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Literal, cast

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

with needs_extra("redis", "the Redis event log"):
    import redis.asyncio as aioredis
    import redis.exceptions

if TYPE_CHECKING:
    from redis.asyncio.connection import AbstractConnection
    from redis.commands.core import AsyncScript

__all__ = ["DEFAULT_TOMBSTONE_TTL", "RedisEventLog"]

DEFAULT_TOMBSTONE_TTL: Final = 86_400.0

# Shared by the append and end scripts: trim the oldest entries over the caps (keeping the newest), each
# trimmed entry read once (its size), then one XTRIM MINID. Uses locals last, first, nbytes, maxi, maxb.
_TRIM = """
local drop = first
while drop < last and (last - drop + 1 > maxi or nbytes > maxb) do
  local e = redis.call('XRANGE', KEYS[1], '0-' .. drop, '0-' .. drop)
  if e[1] and e[1][2][1] == 'd' then nbytes = nbytes - #e[1][2][2] end
  drop = drop + 1
end
if drop ~= first then
  first = drop
  redis.call('XTRIM', KEYS[1], 'MINID', '0-' .. first)
end
"""

# KEYS: log meta ctl; ARGV: max_items max_bytes keep_ms expected-last (-1: unknown) now items...
# (the arguments that stay the same come first: the client packs them once, see RedisEventLog._prefix)
_APPEND = (
    """
local maxi, maxb = tonumber(ARGV[1]), tonumber(ARGV[2])
local st = redis.call('HMGET', KEYS[2], 'state', 'last', 'first', 'nbytes')
if not st[1] then return {-1, 0} end
local last, first, nbytes = tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
if st[1] ~= 'running' then return {-2, first} end
local n = #ARGV - 5
local expected = tonumber(ARGV[4])
if expected >= 0 and last ~= expected then
  if last == expected + n then return {last, first} end
  return {-3, last}
end
for i = 6, #ARGV do
  last = last + 1
  redis.call('XADD', KEYS[1], '0-' .. last, 'd', ARGV[i])
  nbytes = nbytes + #ARGV[i]
end
"""
    + _TRIM
    + """
redis.call('HSET', KEYS[2], 'last', last, 'first', first, 'nbytes', nbytes, 'updated', ARGV[5])
local keep = tonumber(ARGV[3])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], keep) end
return {last, first}
"""
)

# KEYS: log meta ctl gone; ARGV: error-json state(ARGV[2]) max_items max_bytes ttl_ms tomb_ms now
_END = (
    """
local maxi, maxb = tonumber(ARGV[3]), tonumber(ARGV[4])
local st = redis.call('HMGET', KEYS[2], 'state', 'last', 'first', 'nbytes')
if not st[1] then return {-1, 0} end
local last, first, nbytes = tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
if st[1] ~= 'running' then return {-2, first} end
last = last + 1
redis.call('XADD', KEYS[1], '0-' .. last, 'e', ARGV[1])
"""
    + _TRIM
    + """
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'last', last, 'first', first, 'nbytes', nbytes,
  'updated', ARGV[7])
redis.call('XADD', KEYS[3], '*', 'k', 'end')
local ttl = tonumber(ARGV[5])
for i = 1, 3 do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) else redis.call('DEL', KEYS[i]) end
end
redis.call('SET', KEYS[4], '1', 'PX', ttl + tonumber(ARGV[6]))
return {last, first}
"""
)

# KEYS: meta gone ctl log; ARGV: now meta-json token keep_ms
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'token') == ARGV[3] then return 1 end
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'running', 'last', 0, 'first', 1, 'nbytes', 0, 'created', ARGV[1],
  'updated', ARGV[1], 'meta', ARGV[2], 'beats', 0, 'stop', 0, 'token', ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
return 1
"""

# KEYS: meta log ctl; ARGV: now keep_ms
_HEARTBEAT = """
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
if state ~= 'running' then return -2 end
redis.call('HINCRBY', KEYS[1], 'beats', 1)
redis.call('HSET', KEYS[1], 'updated', ARGV[1])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2])) end
return 1
"""

# KEYS: meta ctl
_STOP = """
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
if state ~= 'running' then return 0 end
if redis.call('HGET', KEYS[1], 'stop') == '1' then return 1 end
redis.call('HSET', KEYS[1], 'stop', 1)
redis.call('XADD', KEYS[2], '*', 'k', 'stop')
redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1]))
return 1
"""

_META_FIELDS: Final = ("state", "last", "first", "created", "updated", "meta", "beats")
_APPEND_ARITY: Final = 11
"""Arguments of the append command besides its items: EVALSHA sha numkeys, 3 keys, 5 arguments."""


def _bulk(value: bytes) -> tuple[bytes, bytes, bytes]:
    """One argument of a command as the Redis protocol sends it (a bulk string), in three pieces."""
    return b"$%d\r\n" % len(value), value, b"\r\n"


def _entry(stream_id: bytes, fields: Mapping[bytes, bytes]) -> Entry:
    entry_id = int(stream_id[2:])
    data = fields.get(b"d")
    if data is not None:
        return Entry(entry_id, data)
    error = fields.get(b"e")
    return Entry(entry_id, None, True, msgspec.json.decode(error) if error else None)


class RedisEventLog(RemoteLogBase):
    """An `EventLog` on Redis Streams; see the module docs.

    Args:
        redis: a ``redis://`` URL, or a ``redis.asyncio.Redis`` client (``decode_responses=False``;
            the log then does not close it).
        prefix: of every key (hash tags keep each response's keys in one cluster slot).
        retention: per-response caps (exact) and how long an ended response stays readable.
        heartbeat_timeout: seconds without an entry or heartbeat after which readers get
            `ProducerLost`.
        retry_for: seconds an operation is retried while Redis is unreachable.
        tombstone_ttl: seconds an expired response's id still answers 410 (then 404).

    Raises:
        ConfigurationError: an empty ``prefix``, or one with braces.
    """

    server_name = "Redis"
    refusals = (  # for a while: out of memory, a replica during a failover, a cluster slot moving or down
        redis.exceptions.OutOfMemoryError,
        redis.exceptions.ReadOnlyError,
        redis.exceptions.TryAgainError,
        redis.exceptions.ClusterDownError,
    )
    transient = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError, *refusals)

    def __init__(
        self,
        redis: str | aioredis.Redis,
        *,
        prefix: str = "streamfold",
        retention: Retention = DEFAULT_RETENTION,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
        retry_for: float = DEFAULT_RETRY_FOR,
        tombstone_ttl: float = DEFAULT_TOMBSTONE_TTL,
    ) -> None:
        super().__init__(heartbeat_timeout=heartbeat_timeout, retry_for=retry_for)
        if not prefix or "{" in prefix or "}" in prefix:
            raise ConfigurationError(f"a key prefix is non-empty and has no braces, got {prefix!r}")
        self.retention = retention
        self.prefix = prefix
        self.tombstone_ttl = tombstone_ttl
        if isinstance(redis, str):
            self.client: aioredis.Redis = aioredis.Redis.from_url(redis, decode_responses=False)
            self._own_client = True
        else:
            self.client = redis
            self._own_client = False
        self._registry = f"{prefix}:responses"
        self._append: AsyncScript = self.client.register_script(_APPEND)
        self._end: AsyncScript = self.client.register_script(_END)
        self._create: AsyncScript = self.client.register_script(_CREATE)
        self._heartbeat: AsyncScript = self.client.register_script(_HEARTBEAT)
        self._stop: AsyncScript = self.client.register_script(_STOP)
        self._expected: dict[str, int] = {}  # last id of each response this log appends to
        self._last_prefix: tuple[str, Retention | None, int, bytes] = ("", None, 0, b"")
        # Connections of the client's pool kept for appends: at most as many as appends ever ran at once
        # (bounded by the pool's max_connections); given back to the pool on aclose.
        self._idle: list[AbstractConnection] = []

    def _keys(self, response_id: str) -> tuple[str, str, str, str]:
        base = f"{self.prefix}:{{{response_id}}}"
        return f"{base}:log", f"{base}:meta", f"{base}:ctl", f"{base}:gone"

    def _keep_ms(self) -> int:
        return max(1, int((self.heartbeat_timeout + self.retention.ttl_after_end) * 1000))

    async def _missing(self, response_id: str) -> ServingError:
        """NotFound, or Gone when the tombstone says it expired."""
        gone = await self.client.exists(self._keys(response_id)[3])
        if gone:
            return ResponseGone(
                f"response {response_id!r} ended and is no longer retained", response_id=response_id
            )
        return ResponseNotFound(f"no response {response_id!r}", response_id=response_id)

    def _check_open(self, response_id: str) -> None:
        check_lookup_id(response_id)
        if self._closed:
            raise ServingError("the event log is closed", response_id=response_id)

    # -- the producer's side --------------------------------------------------------------------

    async def create(self, response_id: str, *, meta: Mapping[str, Any] = {}) -> None:
        """Start a response: see `EventLog.create`.

        Args:
            response_id: the new response's id.
            meta: kept with the response and shown in its status (such as its owner).
        """
        check_response_id(response_id)
        self._check_open(response_id)
        log, meta_key, ctl, gone = self._keys(response_id)
        now = time.time()
        args: list[str | bytes | int] = [
            repr(now),
            msgspec.json.encode(dict(meta)),
            uuid.uuid4().hex,
            self._keep_ms(),
        ]
        created = await self._retry(
            "create", response_id, lambda: self._create(keys=[meta_key, gone, ctl, log], args=args)
        )
        if not created:
            raise ResponseExists(f"response {response_id!r} already exists", response_id=response_id)
        self._expected[response_id] = 0
        await self._retry("create", response_id, lambda: self.client.zadd(self._registry, {response_id: now}))

    async def check_create(self, response_id: str) -> None:
        """Never full (the server's memory is the cap); an id in use or tombstoned exists."""
        check_response_id(response_id)
        self._check_open(response_id)
        _, meta, _, gone = self._keys(response_id)
        if await self._retry("create", response_id, lambda: self.client.exists(meta, gone)):
            raise ResponseExists(f"response {response_id!r} already exists", response_id=response_id)

    async def append(self, response_id: str, items: Sequence[bytes]) -> int:
        """Append items and return the last id: see `EventLog.append`.

        Args:
            response_id: the running response.
            items: the items' bytes (JSON), in order.
        """
        self._check_open(response_id)
        for data in items:
            if len(data) > MAX_ITEM_BYTES:
                raise ServingError(
                    f"an item of {len(data)} bytes for response {response_id!r} is over the"
                    f" {MAX_ITEM_BYTES}-byte cap (MAX_ITEM_BYTES)",
                    response_id=response_id,
                )
        expected = self._expected.get(response_id, -1)
        command = [
            b"*%d\r\n" % (_APPEND_ARITY + len(items)),
            self._prefix(response_id),
            *_bulk(b"%d" % expected),
            *_bulk(repr(time.time()).encode()),
        ]
        for data in items:
            command += _bulk(data)
        result = await self._retry("an append", response_id, partial(self._run_append, command))
        last, first = int(result[0]), int(result[1])
        if last == -1:
            raise await self._missing(response_id)
        if last == -2:
            raise ResponseGone(
                f"response {response_id!r} has ended; nothing can be added to it",
                response_id=response_id,
                first_id=first,
            )
        if last == -3:
            raise ServingError(
                f"response {response_id!r} was appended to by another producer (its last id is {first},"
                f" this log expected {expected})",
                response_id=response_id,
            )
        if expected >= 0:
            self._expected[response_id] = last
        return last

    def _prefix(self, response_id: str) -> bytes:
        """The append command's arguments that stay the same (script, keys, limits), packed once for the
        response appended to last (a producer's usual case) and the retention it was packed for."""
        keep_ms = self._keep_ms()
        cached = self._last_prefix
        if cached[0] != response_id or cached[1] is not self.retention or cached[2] != keep_ms:
            log, meta, ctl, _ = self._keys(response_id)
            retention = self.retention
            packed = b"".join(
                piece
                for value in (
                    b"EVALSHA",
                    self._append.sha.encode(),
                    b"3",
                    log.encode(),
                    meta.encode(),
                    ctl.encode(),
                    b"%d" % retention.max_items,
                    b"%d" % retention.max_bytes,
                    b"%d" % keep_ms,
                )
                for piece in _bulk(value)
            )
            cached = self._last_prefix = (response_id, retention, keep_ms, packed)
        return cached[3]

    async def _run_append(self, command: list[bytes]) -> Any:
        """Send a packed ``EVALSHA`` of the append script and read its reply (the script is loaded first
        if the server does not know it), on a connection of the client's pool this log keeps for its
        appends: one append pays for its round trip, not for the client's per-command machinery."""
        if self._idle:
            connection = self._idle.pop()
        else:
            pool = self.client.connection_pool
            connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            # A failure or cancellation between the two disconnects the connection (redis-py does), so
            # no reply is left behind to be read by the next append; it reconnects on its next send.
            await connection.send_packed_command(command)
            try:
                return await connection.read_response()
            except redis.exceptions.NoScriptError:
                await self.client.script_load(_APPEND)
            await connection.send_packed_command(command)
            return await connection.read_response()
        finally:
            if self._closed:
                with anyio.CancelScope(shield=True):
                    await self.client.connection_pool.release(connection)
            else:
                self._idle.append(connection)

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
        self._check_open(response_id)
        keys = list(self._keys(response_id))
        retention = self.retention
        args = [
            msgspec.json.encode(dict(error)) if error is not None else b"",
            state,
            retention.max_items,
            retention.max_bytes,
            int(retention.ttl_after_end * 1000),
            int(self.tombstone_ttl * 1000),
            repr(time.time()),
        ]
        result = await self._retry("end", response_id, lambda: self._end(keys=keys, args=args))
        code = int(result[0])
        if code == -1:
            raise await self._missing(response_id)
        if code == -2:
            raise ResponseGone(
                f"response {response_id!r} has already ended",
                response_id=response_id,
                first_id=int(result[1]),
            )
        self._expected.pop(response_id, None)

    async def heartbeat(self, response_id: str) -> None:
        """Mark the producer alive: see `EventLog.heartbeat`."""
        self._check_open(response_id)
        log, meta, ctl, _ = self._keys(response_id)
        args: list[str | int] = [repr(time.time()), self._keep_ms()]
        code = await self._retry(
            "a heartbeat", response_id, lambda: self._heartbeat(keys=[meta, log, ctl], args=args)
        )
        if code == -1:
            raise await self._missing(response_id)
        if code == -2:
            raise ResponseGone(f"response {response_id!r} has ended", response_id=response_id)

    async def request_stop(self, response_id: str) -> None:
        """Ask the producer to stop: see `EventLog.request_stop`."""
        self._check_open(response_id)
        _, meta, ctl, _ = self._keys(response_id)
        code = await self._retry("a stop request", response_id, lambda: self._stop(keys=[meta, ctl]))
        if code == -1:
            raise await self._missing(response_id)

    async def stop_requested(self, response_id: str) -> AsyncIterator[None]:
        """Yield once when a stop is requested: see `EventLog.stop_requested`."""
        self._check_open(response_id)
        _, meta, ctl, _ = self._keys(response_id)
        state = await self._retry("a stop watch", response_id, lambda: self.client.hget(meta, "state"))
        if state is None:
            raise await self._missing(response_id)
        if state != b"running":
            return
        block = max(1, int(min(1.0, self.heartbeat_timeout / 4) * 1000))
        delay = 0.02
        while not self._closed:
            # Unbounded retries: a watch is only a signal; while Redis is down the producer's appends
            # fail within their bound and end the response, which ends this watch.
            try:
                got: Any = await self.client.xread({ctl: "0-0"}, count=1, block=block)
                if not got and not await self.client.exists(meta):
                    return
            except self.transient:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            delay = 0.02
            if got:
                fields = got[0][1][0][1]
                if fields.get(b"k") == b"stop":
                    yield None
                return

    # -- the readers' side ----------------------------------------------------------------------

    async def _snapshot(self, response_id: str, after: int, count: int) -> Snapshot:
        self._check_open(response_id)
        log, meta, _, _ = self._keys(response_id)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hmget(meta, ["state", "first", "last"])
            pipe.xrange(log, f"0-{after + 1}", "+", count=count)
            (state, first, last), raw = await pipe.execute()
        if state is None:
            raise await self._missing(response_id)
        entries = [_entry(stream_id, fields) for stream_id, fields in raw]
        return Snapshot(cast(ResponseState, state.decode()), int(first), int(last), entries)

    async def _poll(self, response_id: str, after: int, wait: float) -> tuple[list[Entry], object]:
        self._check_open(response_id)
        log, meta, _, _ = self._keys(response_id)
        got: Any = await self.client.xread({log: f"0-{after}"}, count=1024, block=max(1, int(wait * 1000)))
        if got:
            return [_entry(stream_id, fields) for stream_id, fields in got[0][1]], None
        beats = await self.client.hget(meta, "beats")
        if beats is None:
            raise await self._missing(response_id)
        return [], beats

    async def status(self, response_id: str) -> ResponseStatus | None:
        """The response's status, or None: see `EventLog.status`."""
        if not is_response_id(response_id):
            return None
        self._check_open(response_id)
        meta = self._keys(response_id)[1]
        values: Any = await self._retry("status", response_id, lambda: self.client.hmget(meta, _META_FIELDS))
        return self._status(response_id, values)

    @staticmethod
    def _status(response_id: str, values: Sequence[bytes | None]) -> ResponseStatus | None:
        state, last, first, created, updated, meta, _ = values
        if state is None or last is None or first is None or created is None or updated is None:
            return None
        return ResponseStatus(
            response_id=response_id,
            state=cast(ResponseState, state.decode()),
            last_id=int(last),
            first_id=int(first),
            created=float(created),
            updated=float(updated),
            meta=msgspec.json.decode(meta) if meta else {},
        )

    async def active(self) -> list[ResponseStatus]:
        """Running and retained responses, oldest first: see `EventLog.active`."""
        if self._closed:
            return []
        members: Any = await self._retry("listing", "*", lambda: self.client.zrange(self._registry, 0, -1))
        found: list[ResponseStatus] = []
        missing: list[bytes] = []
        for start in range(0, len(members), 256):
            chunk = members[start : start + 256]
            async with self.client.pipeline(transaction=False) as pipe:
                for member in chunk:
                    pipe.hmget(self._keys(member.decode())[1], _META_FIELDS)
                rows = await pipe.execute()
            for member, values in zip(chunk, rows, strict=True):
                status = self._status(member.decode(), values)
                if status is None:
                    missing.append(member)
                else:
                    found.append(status)
        if missing:
            await self.client.zrem(self._registry, *missing)
        return found

    async def aclose(self) -> None:
        """Release connections: see `EventLog.aclose`."""
        self._closed = True
        for tail in self._tails.values():
            tail.notify()
        idle, self._idle = self._idle, []
        with anyio.CancelScope(shield=True):
            for connection in idle:
                await self.client.connection_pool.release(connection)
        if self._own_client:
            with anyio.CancelScope(shield=True):
                await self.client.aclose()
