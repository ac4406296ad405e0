"""The NATS JetStream event log against a real nats-server: the conformance suite, then failures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from pipeline.errors import EventLogUnavailable, ServingError
from pipeline.fanout.serving._log import DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_RETENTION, EventLog, Retention
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.nats import NatsEventLog
from tests.guards import GUARD
from tests.pipeline.fanout.test_serving_manager import Upstream
from tests.servers import NatsServer, nats_server, own_server
from tests.serving_conformance import EventLogConformance, ServingBackend, collect

__all__ = ["nats_server"]

pytestmark = pytest.mark.anyio


class NatsBackend:
    """Every log is a new connection (as another process would have); a peer is one more."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.logs: list[NatsEventLog] = []

    async def open(
        self,
        *,
        retention: Retention = DEFAULT_RETENTION,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
    ) -> EventLog:
        log = await NatsEventLog.connect(self.url, retention=retention, heartbeat_timeout=heartbeat_timeout)
        self.logs.append(log)
        return log

    async def peer(self, log: EventLog) -> EventLog:
        assert isinstance(log, NatsEventLog)
        return await self.open(retention=log.retention, heartbeat_timeout=log.heartbeat_timeout)


class TestNatsConformance(EventLogConformance):
    @pytest.fixture
    async def serving_backend(self, nats_server: NatsServer) -> AsyncIterator[ServingBackend]:
        backend = NatsBackend(nats_server.url)
        yield backend
        for log in backend.logs:
            await log.aclose()


async def test_aclose_with_the_server_gone_for_good_returns(tmp_path: Path) -> None:
    """Items the client buffered while the server was down cannot be flushed at close: the close is
    still clean (nats-py raises ``ConnectionResetError`` from its final flush)."""
    server = own_server(NatsServer, tmp_path / "nats")
    assert isinstance(server, NatsServer)
    try:
        log = await NatsEventLog.connect(server.url, retry_for=0.2)
        await log.create("gone")
    finally:
        server.stop()
    with pytest.raises(EventLogUnavailable):
        await log.append("gone", [b'{"n": 1}'])  # buffered by the client, then given up
    with anyio.fail_after(GUARD):
        await log.aclose()
    with pytest.raises(ServingError, match="the event log is closed"):
        await log.append("gone", [b'{"n": 2}'])


async def test_an_item_over_the_server_s_max_payload_fails_its_response_alone(
    nats_server: NatsServer,
) -> None:
    log = await NatsEventLog.connect(nats_server.url)
    assert log.nc is not None
    max_payload = log.nc.max_payload  # 1 MiB unless the server's configuration says otherwise
    big = {"blob": "x" * max_payload}
    try:
        with anyio.fail_after(GUARD):
            async with ResponseManager(log) as manager:
                bad = await manager.start(Upstream([{"n": 1}, big]))
                await manager.wait(bad)
                good = await manager.start(Upstream([{"n": 1}]))
                await manager.wait(good)
        entries = await collect(log, bad)
        assert [entry.data for entry in entries[:-1]] == [b'{"n":1}']
        assert entries[-1].error == {
            "type": "ServingError",
            "message": f"an item of {max_payload + 11} bytes for response {bad!r} is over the NATS"
            f" server's max_payload of {max_payload} bytes (raise it in the server's configuration)",
            "kind": None,
        }
        assert [(e.data, e.end) for e in await collect(log, good)] == [(b'{"n":1}', False), (None, True)]
    finally:
        await log.aclose()
