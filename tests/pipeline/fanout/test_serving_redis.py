"""The Redis Streams event log against a real redis-server: the conformance suite, then failures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pipeline.fanout.serving._log import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_RETENTION, EventLog, Retention
from pipeline.fanout.serving.redis import RedisEventLog
from tests.servers import CLIENT_POOL, RedisServer, redis_server
from tests.serving_conformance import EventLogConformance, ServingBackend, collect, items, new_id

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio


class RedisBackend:
    """Every log is a new client (as another process would have); a peer is one more."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.logs: list[RedisEventLog] = []

    async def open(
        self,
        *,
        retention: Retention = DEFAULT_RETENTION,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
    ) -> EventLog:
        log = RedisEventLog(self.url, retention=retention, heartbeat_timeout=heartbeat_timeout)
        self.logs.append(log)
        return log

    async def peer(self, log: EventLog) -> EventLog:
        assert isinstance(log, RedisEventLog)
        return await self.open(retention=log.retention, heartbeat_timeout=log.heartbeat_timeout)


class TestRedisConformance(EventLogConformance):
    @pytest.fixture
    async def serving_backend(self, redis_server: RedisServer) -> AsyncIterator[ServingBackend]:
        backend = RedisBackend(redis_server.client_url)
        yield backend
        for log in backend.logs:
            await log.aclose()


def test_every_key_of_a_response_is_in_one_cluster_slot() -> None:
    from redis.crc import key_slot

    log = RedisEventLog("redis://127.0.0.1:1/0")
    slots = {key_slot(key.encode()) for key in log._keys("r-1")}
    assert len(slots) == 1


async def test_an_append_retried_after_a_lost_reply_is_applied_once(redis_server: RedisServer) -> None:
    import redis.exceptions

    log = RedisEventLog(redis_server.url)
    rid = new_id()
    await log.create(rid)
    run_append = log._run_append
    calls: list[int] = []

    async def lose_the_first_reply(args: list[bytes]) -> Any:
        result = await run_append(args)
        calls.append(1)
        if len(calls) == 1:
            raise redis.exceptions.ConnectionError("the reply was lost")
        return result

    log._run_append = lose_the_first_reply  # type: ignore[method-assign, assignment]
    try:
        assert await log.append(rid, items("a", "b")) == 2
        assert len(calls) == 2
        await log.end(rid)
        assert [entry.id for entry in await collect(log, rid)] == [1, 2, 3]
    finally:
        await log.aclose()


async def test_an_append_loads_its_script_again_after_the_server_forgot_it(redis_server: RedisServer) -> None:
    log = RedisEventLog(redis_server.url)
    rid = new_id()
    try:
        await log.create(rid)
        assert await log.append(rid, items("a")) == 1
        await log.client.script_flush()  # a restarted server, a failover: the script cache is empty
        assert await log.append(rid, items("b")) == 2
        await log.end(rid)
        assert [entry.id for entry in await collect(log, rid)] == [1, 2, 3]
    finally:
        await log.aclose()


async def test_the_tests_clients_hold_a_thousand_readers(redis_server: RedisServer) -> None:
    log = await RedisBackend(redis_server.client_url).open()
    assert isinstance(log, RedisEventLog)
    try:
        assert log.client.connection_pool.max_connections == CLIENT_POOL >= 1000 + 1
    finally:
        await log.aclose()
