"""Leases on durable runs: one worker holds a run at a time, and a worker that finds the lease expired
takes it (`pipeline.agent.durable`).

A lease has an owner (a worker's name), a time to live and a **token**: a number that grows each time the
lease changes hands, written into the run's own log entries so that a reader can tell the holders apart.
``acquire`` gives the token, or None while another owner's lease is live; ``renew`` extends the lease
only if the caller still holds it (same owner and token) and says whether it did; ``release`` lets it go
early. Three stores:

- `MemoryLease`: in-process (tests, one process with several workers).
- `RedisLease`: ``SET key value NX PX ttl`` to take a free lease, and Lua scripts that compare
  the value before they extend or delete it (the server's clock times the lease out).
- `NatsLease`: a JetStream key-value bucket; each write is checked against the revision read
  (``create`` for a free key, ``update(last=revision)`` otherwise), and the value carries its expiry in
  wall-clock seconds: the workers' clocks must agree to well within the time to live.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from pipeline.errors import ConfigurationError

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.js.kv import KeyValue
    from redis.asyncio import Redis

__all__ = ["DEFAULT_TOKEN_TTL", "Lease", "MemoryLease", "NatsLease", "RedisLease"]


class Lease(Protocol):
    """Where a run's lease is kept; every method is safe to call from many tasks and processes."""

    async def acquire(self, run_id: str, owner: str, ttl: float) -> int | None:
        """Take the lease if it is free or expired.

        Args:
            run_id: the run.
            owner: the worker's name.
            ttl: seconds the lease lasts unless renewed.

        Returns:
            The lease's new token; None while another owner's lease is live.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """

    async def renew(self, run_id: str, owner: str, token: int, ttl: float) -> bool:
        """Extend the lease if ``owner`` still holds it with ``token``.

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
            ttl: seconds from now the lease lasts unless renewed again.

        Returns:
            Whether the lease was extended (False: it expired or changed hands).

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """

    async def release(self, run_id: str, owner: str, token: int) -> None:
        """Let the lease go if ``owner`` still holds it with ``token`` (else nothing).

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
        """


def _check_ttl(ttl: float) -> int:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ConfigurationError(f"a lease's ttl is a positive number of seconds, got {ttl!r}")
    return max(1, int(ttl * 1000))


class MemoryLease:
    """Leases of one process, timed by its monotonic clock."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, int, float]] = {}
        self._tokens: dict[str, int] = {}

    async def acquire(self, run_id: str, owner: str, ttl: float) -> int | None:
        """Take the lease if it is free or expired: see `Lease.acquire`.

        Args:
            run_id: the run.
            owner: the worker's name.
            ttl: seconds the lease lasts unless renewed.

        Returns:
            The lease's new token; None while another owner's lease is live.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """
        _check_ttl(ttl)
        now = time.monotonic()
        held = self._held.get(run_id)
        if held is not None and held[2] > now:
            return None
        token = self._tokens.get(run_id, 0) + 1
        self._tokens[run_id] = token
        self._held[run_id] = (owner, token, now + ttl)
        return token

    async def renew(self, run_id: str, owner: str, token: int, ttl: float) -> bool:
        """Extend the lease if ``owner`` still holds it: see `Lease.renew`.

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
            ttl: seconds from now the lease lasts unless renewed again.

        Returns:
            Whether the lease was extended (False: it expired or changed hands).

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """
        _check_ttl(ttl)
        now = time.monotonic()
        held = self._held.get(run_id)
        if held is None or held[:2] != (owner, token) or held[2] <= now:
            return False
        self._held[run_id] = (owner, token, now + ttl)
        return True

    async def release(self, run_id: str, owner: str, token: int) -> None:
        """Let the lease go if ``owner`` still holds it: see `Lease.release`.

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
        """
        held = self._held.get(run_id)
        if held is not None and held[:2] == (owner, token):
            del self._held[run_id]


_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


DEFAULT_TOKEN_TTL: Final = 86_400.0
"""Seconds a run's token counter outlives the last time its lease was taken or renewed."""


class RedisLease:
    """Leases in Redis: ``{prefix}:{{run_id}}:lease`` holds ``owner token`` with a PX expiry, and
    ``{prefix}:{{run_id}}:lease-token`` counts the tokens (INCR).

    Args:
        redis: a Redis URL (a connection of its own, closed by `aclose`) or a client.
        prefix: starts every key.
        token_ttl: seconds the token counter lives after the lease was last taken or renewed: keep it
            longer than a run may wait for a worker, since a counter that expired starts the tokens again
            from 1.

    Raises:
        ConfigurationError: ``token_ttl`` is not a positive number.
    """

    def __init__(
        self, redis: str | Redis, *, prefix: str = "streamfold", token_ttl: float = DEFAULT_TOKEN_TTL
    ) -> None:
        from redis.asyncio import Redis

        self._token_ms = _check_ttl(token_ttl)
        if isinstance(redis, str):
            self.client: Redis = Redis.from_url(redis, decode_responses=False)
            self._own_client = True
        else:
            self.client = redis
            self._own_client = False
        self.prefix = prefix
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    def _keys(self, run_id: str) -> tuple[str, str]:
        base = f"{self.prefix}:{{{run_id}}}"
        return f"{base}:lease", f"{base}:lease-token"

    async def acquire(self, run_id: str, owner: str, ttl: float) -> int | None:
        """Take the lease if it is free or expired: see `Lease.acquire`.

        Args:
            run_id: the run.
            owner: the worker's name.
            ttl: seconds the lease lasts unless renewed.

        Returns:
            The lease's new token; None while another owner's lease is live.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """
        ms = _check_ttl(ttl)
        key, counter = self._keys(run_id)
        if await self.client.exists(key):
            return None
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.incr(counter)
            pipe.pexpire(counter, self._token_ms)
            counted, _ = await pipe.execute()
        token = int(counted)
        taken = await self.client.set(key, f"{owner} {token}", nx=True, px=ms)
        return token if taken else None

    async def renew(self, run_id: str, owner: str, token: int, ttl: float) -> bool:
        """Extend the lease if ``owner`` still holds it: see `Lease.renew`.

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
            ttl: seconds from now the lease lasts unless renewed again.

        Returns:
            Whether the lease was extended (False: it expired or changed hands).

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """
        ms = _check_ttl(ttl)
        key, counter = self._keys(run_id)
        return bool(await self._renew(keys=[key, counter], args=[f"{owner} {token}", ms, self._token_ms]))

    async def release(self, run_id: str, owner: str, token: int) -> None:
        """Let the lease go if ``owner`` still holds it: see `Lease.release`.

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
        """
        key, _ = self._keys(run_id)
        await self._release(keys=[key], args=[f"{owner} {token}"])

    async def aclose(self) -> None:
        """Close the connection this lease opened, if any."""
        if self._own_client:
            await self.client.aclose()


class _Held(msgspec.Struct):
    owner: str
    token: int
    expires: float
    """Unix seconds."""


class NatsLease:
    """Leases in the JetStream key-value bucket ``{prefix}_leases`` (created if missing); each write is
    checked against the revision read, so of two workers taking an expired lease one wins.

    `connect` makes one.

    Args:
        kv: the bucket.
        nc: the connection `aclose` closes; None: the caller's, left open.
    """

    def __init__(self, kv: KeyValue, nc: NATS | None = None) -> None:
        self._kv = kv
        self._nc = nc
        self._revisions: dict[tuple[str, str, int], int] = {}

    @classmethod
    async def connect(cls, nats_url: str | NATS, *, prefix: str = "streamfold") -> NatsLease:
        """A lease store over NATS.

        Args:
            nats_url: a NATS URL (a connection of its own, closed by `aclose`) or a connection.
            prefix: names the bucket, ``{prefix}_leases``.
        """
        import nats
        import nats.js.errors

        own = isinstance(nats_url, str)
        nc = await nats.connect(nats_url, connect_timeout=2) if isinstance(nats_url, str) else nats_url
        js = nc.jetstream()
        bucket = f"{prefix}_leases"
        try:
            kv = await js.key_value(bucket)
        except nats.js.errors.BucketNotFoundError:
            kv = await js.create_key_value(bucket=bucket, history=1)
        return cls(kv, nc if own else None)

    async def _read(self, run_id: str) -> tuple[_Held | None, int | None]:
        import nats.js.errors

        try:
            got = await self._kv.get(run_id)
        except nats.js.errors.KeyNotFoundError:  # also a deleted key
            return None, None
        if not got.value:
            return None, got.revision
        return msgspec.json.decode(got.value, type=_Held), got.revision

    async def _write(self, run_id: str, held: _Held, revision: int | None) -> int | None:
        import nats.js.errors

        value = msgspec.json.encode(held)
        try:
            if revision is None:
                return int(await self._kv.create(run_id, value))
            return int(await self._kv.update(run_id, value, last=revision))
        except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.APIError):
            return None  # another worker wrote first

    async def acquire(self, run_id: str, owner: str, ttl: float) -> int | None:
        """Take the lease if it is free or expired: see `Lease.acquire`.

        Args:
            run_id: the run.
            owner: the worker's name.
            ttl: seconds the lease lasts unless renewed.

        Returns:
            The lease's new token; None while another owner's lease is live.

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """
        _check_ttl(ttl)
        held, revision = await self._read(run_id)
        if held is not None and held.expires > time.time():
            return None
        token = (held.token if held is not None else 0) + 1
        written = await self._write(run_id, _Held(owner, token, time.time() + ttl), revision)
        if written is None:
            return None
        self._revisions[run_id, owner, token] = written
        return token

    async def renew(self, run_id: str, owner: str, token: int, ttl: float) -> bool:
        """Extend the lease if ``owner`` still holds it: see `Lease.renew`.

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
            ttl: seconds from now the lease lasts unless renewed again.

        Returns:
            Whether the lease was extended (False: it expired or changed hands).

        Raises:
            ConfigurationError: ``ttl`` is not a positive number.
        """
        _check_ttl(ttl)
        revision = self._revisions.get((run_id, owner, token))
        if revision is None:
            return False
        held, current = await self._read(run_id)
        if held is None or current != revision or (held.owner, held.token) != (owner, token):
            return False
        if held.expires <= time.time():
            return False
        written = await self._write(run_id, _Held(owner, token, time.time() + ttl), revision)
        if written is None:
            del self._revisions[run_id, owner, token]
            return False
        self._revisions[run_id, owner, token] = written
        return True

    async def release(self, run_id: str, owner: str, token: int) -> None:
        """Let the lease go if ``owner`` still holds it: see `Lease.release`.

        Args:
            run_id: the run.
            owner: the worker's name.
            token: the token `acquire` gave.
        """
        revision = self._revisions.pop((run_id, owner, token), None)
        if revision is not None:
            await self._write(run_id, _Held(owner, token, 0.0), revision)

    async def aclose(self) -> None:
        """Close the connection this lease opened, if any."""
        if self._nc is not None:
            await self._nc.close()
