"""The Redis Streams event log against a real redis-server: the conformance suite, then failures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pipeline.fanout.serving._log import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_RETENTION, EventLog, Retention
from pipeline.fanout.serving.redis import RedisEventLog
from tests.servers import RedisServer, redis_server
from tests.serving_conformance import EventLogConformance, ServingBackend

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
        backend = RedisBackend(redis_server.url)
        yield backend
        for log in backend.logs:
            await log.aclose()
