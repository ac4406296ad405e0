"""Two web replicas over one Redis or NATS log: a tab that reconnects to the other replica mid-stream,
with ``Last-Event-ID``, continues without a gap and without a repeat (real uvicorn, real servers)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from pipeline.fanout.serving._log import EventLog
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.web import serving_routes
from pipeline.models import SegmentEvent
from tests.guards import GUARD
from tests.pipeline.fanout.test_serving_web import Gated, read_frames
from tests.pipeline.fanout.test_web import serving
from tests.servers import NatsServer, RedisServer, nats_server, redis_server

__all__ = ["nats_server", "redis_server"]

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["redis", "nats"])
async def logs(request: pytest.FixtureRequest) -> AsyncIterator[list[EventLog]]:
    """Three logs over one server, as three processes would have: the producer's and two replicas'."""
    opened: list[EventLog] = []
    if request.param == "redis":
        from pipeline.fanout.serving.redis import RedisEventLog

        server: RedisServer = request.getfixturevalue("redis_server")
        opened = [RedisEventLog(server.url) for _ in range(3)]
    else:
        from pipeline.fanout.serving.nats import NatsEventLog

        nats: NatsServer = request.getfixturevalue("nats_server")
        opened = [await NatsEventLog.connect(nats.url) for _ in range(3)]
    yield opened
    for log in opened:
        await log.aclose()


async def test_a_tab_reconnecting_to_the_other_replica_misses_and_repeats_nothing(
    logs: list[EventLog],
) -> None:
    producer_log, log_a, log_b = logs
    source = Gated([SegmentEvent.content("t", f"w{n} ") for n in range(30)], 5)
    async with (
        ResponseManager(producer_log) as manager,
        serving(Starlette(routes=serving_routes(log_a))) as replica_a,
        serving(Starlette(routes=serving_routes(log_b))) as replica_b,
    ):
        rid = await manager.start(source)
        with anyio.fail_after(GUARD):
            async with (
                httpx.AsyncClient(base_url=f"http://{replica_a}") as client,
                client.stream("GET", f"/responses/{rid}/events") as response,
            ):
                assert response.status_code == 200
                first = await read_frames(response, until_id=5)
            source.release.set()  # the response goes on while the tab is away
            async with (
                httpx.AsyncClient(base_url=f"http://{replica_b}") as client,
                client.stream(
                    "GET", f"/responses/{rid}/events", headers={"Last-Event-ID": str(first[-1].id)}
                ) as response,
            ):
                assert response.status_code == 200
                rest = await read_frames(response)
    frames = first + rest
    ids = [frame.id for frame in frames if frame.id is not None]
    assert ids == sorted(set(ids))
    assert ids[-1] == 31
    assert frames[-1].event == "end"
    text = "".join(frame.data["payload"]["delta"] for frame in frames if frame.event == "message")
    assert text == "".join(f"w{n} " for n in range(30))
